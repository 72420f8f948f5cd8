"""Every host's fixtures, read by our readers, checked three ways.

1. The records agree with the trajectory-v1 JSON Schema.
2. They equal the fixture's hand-reviewed ``expected.json`` (Pi fixtures are
   checked record by record in test_pi.py instead).
3. They agree with the ``agent-trajectory`` package's normalizer (PyPI
   agent-trajectory==0.4.3, which runs a bundled JS normalizer under node) on the
   last turn, for the sources it reads: Pi, Claude Code, Codex and the Letta Code
   transcript. It normalizes the whole file (every branch, every turn), so its
   records are compared from its last user record on. Where its conventions
   differ from ours, the difference is undone in one named, narrow step below
   and nowhere else.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import trajectory
from trajectory import NormalizeInput
from trajectory import TrajectorySource

from machine_git.rows import schemas
from machine_git.sessions import detect
from tests.conftest import FIXTURES
from tests.conftest import PI_SESSIONS

Record = dict[str, Any]
"""A record as JSON data: ours and agent-trajectory's are compared key by key."""

LETTA = FIXTURES / "letta"


@dataclass(frozen=True)
class Case:
    path: Path
    expected: Path | None
    source: TrajectorySource | None  # agent-trajectory's name, if it reads the format

    def __str__(self) -> str:
        return str(self.path.relative_to(FIXTURES))


def _cases() -> list[Case]:
    cases = [Case(p, None, "pi") for p in sorted(PI_SESSIONS.glob("*.jsonl"))]
    for folder in sorted((LETTA / "local-backend").iterdir()):
        cases.append(Case(folder / "messages.jsonl", folder / "expected.json", None))
    for path in sorted(LETTA.glob("transcript/*/*/transcript.jsonl")):
        cases.append(Case(path, path.parent / "expected.json", "letta-code"))
    cases.append(
        Case(LETTA / "api-history.json", LETTA / "api-history.expected.json", None)
    )
    cases.append(Case(LETTA / "agent.af", LETTA / "agent.expected.json", None))
    for path in sorted((FIXTURES / "claude").glob("-*/*.jsonl")):
        cases.append(Case(path, path.parent / "expected.json", "claude-code"))
    # Real files of the CLIs (their expectations are in test_real_agents.py).
    for host in ("claude", "codex", "gemini"):
        for path in sorted((FIXTURES / host / "real").glob("*.jsonl")):
            cases.append(Case(path, None, None))
    for path in sorted((FIXTURES / "opencode" / "real").glob("*.db")):
        cases.append(Case(path, None, None))  # expectations: test_opencode.py
    for path in sorted((FIXTURES / "codex").glob("sessions/*/*/*/rollout-*.jsonl")):
        cases.append(Case(path, path.parent / "expected.json", "codex"))
    return cases


CASES = _cases()
CHECKED = [c for c in CASES if c.source is not None]


def _records(case: Case) -> list[Record]:
    turn, _ = detect.read(case.path)
    return [dict(r) for r in turn.records]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_records_agree_with_the_schema_and_expected(case: Case) -> None:
    records = _records(case)
    assert schemas.check(schemas.validator("trajectory-v1"), records) == []
    if case.expected is not None:
        assert records == orjson.loads(case.expected.read_bytes())


def test_every_host_has_fixtures_in_the_cross_check() -> None:
    hosts = {detect.sniff(c.path).name for c in CASES}
    assert hosts == {f.name for f in detect.FORMATS}
    assert {c.source for c in CHECKED} == {"pi", "letta-code", "claude-code", "codex"}


@pytest.fixture(scope="module")
def normalized() -> dict[Path, list[Record]]:
    """agent-trajectory's records for every checked fixture (one node process)."""
    if shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("node is missing in CI: the agent-trajectory check must run")
        pytest.skip("node is not installed: agent-trajectory needs it to normalize")
    requests: list[NormalizeInput] = []
    for case in CHECKED:
        assert case.source is not None
        requests.append({"source": case.source, "transcript": case.path.read_text()})
    results = trajectory.normalize_many(requests)
    return {
        c.path: [dict(r) for r in result["records"]]
        for c, result in zip(CHECKED, results, strict=True)
    }


def _last_turn(records: list[Record]) -> list[Record]:
    start = max(i for i, r in enumerate(records) if r["role"] == "user")
    return [records[0], *records[start:]]


def _as_agent_trajectory_writes_it(source: str, records: list[Record]) -> list[Record]:
    """Our records with agent-trajectory's known, different conventions applied."""
    out: list[Record] = []
    for record in records:
        record = dict(record)
        # We keep the images a message carried (rows/images.py); it keeps the
        # [image] placeholder only, as our text does.
        record.pop("images", None)
        calls = record.get("tool_calls") or []
        if len(calls) > 1:
            # We keep the parallel calls of one response in one assistant record
            # (the shape Tinker's messages take); it writes one record per call.
            out += [dict(record, tool_calls=[call]) for call in calls]
            continue
        if record["role"] == "tool" and source in ("claude-code", "codex"):
            failed = record.get("ok") is False
            if source == "codex":
                # Codex has no status field; we read the exit code Codex writes
                # into every exec output, it leaves ok out.
                record.pop("ok", None)
            if failed:
                # It marks failed Claude Code results with ok: false only, and
                # (reading no status) Codex ones not at all: no "Error: " prefix.
                assert record["content"].startswith("Error: ")
                record["content"] = record["content"][len("Error: ") :]
        out.append(record)
    return out


@pytest.mark.parametrize("case", CHECKED, ids=str)
def test_records_agree_with_agent_trajectory(
    case: Case, normalized: dict[Path, list[Record]]
) -> None:
    assert case.source is not None
    theirs = _last_turn(normalized[case.path])
    ours = _as_agent_trajectory_writes_it(case.source, _records(case))
    assert ours == theirs


def test_the_exceptions_are_exercised(normalized: dict[Path, list[Record]]) -> None:
    # Each difference undone above occurs in the fixtures: if one stops
    # occurring, the exception is dead and should go.
    grouped = failed_claude = codex_ok = imaged = False
    for case in CHECKED:
        for record in _records(case):
            imaged |= "images" in record
            grouped |= len(record.get("tool_calls") or []) > 1
            failed_claude |= case.source == "claude-code" and record.get("ok") is False
            codex_ok |= case.source == "codex" and "ok" in record
    assert grouped and failed_claude and codex_ok and imaged
    assert not any(
        len(r.get("tool_calls") or []) > 1 for rs in normalized.values() for r in rs
    )

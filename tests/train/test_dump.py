"""One path from row to datum: what ``train validate --dump`` shows is sent.

The dump, the run's ``data.jsonl`` and the datums ``train run`` hands to
``forward_backward`` come from the same bytes through the same function; here
the datums the fake service received are compared with the dump, token for
token and weight for weight, for rows with their context and without.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import Run
from tests.train import conftest as support
from tests.train.conftest import FakeTinker

# "context" is the session whose runs machine's extension recorded (system
# prompt and tools); the others have none.
SESSIONS = ("context", "basic", "file-repair", "mixed")


def _sent(fake: FakeTinker) -> list[tuple[list[int], list[int]]]:
    """Each datum the service got, as the dump writes it: the sequence (its
    inputs and last target) and 1 where a target carries loss."""
    out = []
    for batch in fake.batches:
        for d in batch:
            inputs = d.model_input.to_ints()
            targets = [int(t) for t in d.loss_fn_inputs["target_tokens"].data]
            weights = [float(w) for w in d.loss_fn_inputs["weights"].data]
            assert targets[:-1] == inputs[1:]  # next-token targets
            assert abs(sum(weights) - 1.0) < 1e-5  # the per-sequence mean
            out.append(([*inputs, targets[-1]], [0] + [int(w > 0) for w in weights]))
    return out


@pytest.mark.parametrize("context", [True, False])
def test_the_datums_sent_are_the_dump(
    project: Path, run: Run, fake: FakeTinker, tmp_path: Path, context: bool
) -> None:
    support.tag(run, project, SESSIONS, "--trace")
    flags = () if context else ("--no-context",)
    dump = tmp_path / "dump.jsonl"
    checked = run(
        "train",
        "validate",
        "--kind",
        "traces",
        "--batch-size",
        "2",
        "--dump",
        str(dump),
        *flags,
    )
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    dumped = [orjson.loads(line) for line in dump.read_bytes().splitlines()]
    prepared = run("train", "sft", "--kind", "traces", "--batch-size", "2", *flags)
    assert prepared.exit_code == 0, prepared.stderr
    result = run("train", "run", "--yes")
    assert result.exit_code == 0, result.stderr
    sent = _sent(fake)
    assert len(sent) == len(dumped) >= 8
    assert sorted(sent) == sorted((d["tokens"], d["weights"]) for d in dumped)
    # the context (system prompt and tool declaration) is there, or is not
    with_system = [d for d in dumped if "Current working directory" in d["text"]]
    assert len(with_system) == (2 if context else 0)
    tools = [d for d in dumped if "<tools>" in d["text"]]
    assert len(tools) == len(with_system)


def test_a_truncated_datum_is_dumped_as_sent(
    project: Path, run: Run, fake: FakeTinker, tmp_path: Path
) -> None:
    # --max-length cuts the long prompts' untrained tail away; what is sent
    # (and dumped) is the cut sequence, with every trained token kept.
    support.tag(run, project, SESSIONS, "--trace")
    dump = tmp_path / "dump.jsonl"
    full = tmp_path / "full.jsonl"
    args = ("train", "validate", "--kind", "traces", "--batch-size", "2")
    assert run(*args, "--dump", str(full)).exit_code == 0
    lengths = [len(orjson.loads(x)["tokens"]) for x in full.read_bytes().splitlines()]
    assert len(set(lengths)) > 1
    longest = max(lengths)
    checked = run(*args, "--dump", str(dump), "--max-length", str(longest))
    assert checked.exit_code == 0, checked.stdout
    assert dump.read_bytes() == full.read_bytes()
    cut = run(*args, "--dump", str(dump), "--max-length", str(longest - 1))
    assert cut.exit_code == 1
    line: dict[str, Any] = next(
        orjson.loads(x)
        for x in dump.read_bytes().splitlines()
        if len(orjson.loads(x)["tokens"]) == longest - 1
    )
    assert line["weights"][-1] == 1  # the cut is inside a trained span
    assert (
        f"cut before its end-of-message token by --max-length {longest - 1} "
        f"(raise --max-length to at least {longest}, or drop the row): "
        f"{line['row']} example {line['example']}"
    ) in cut.stdout

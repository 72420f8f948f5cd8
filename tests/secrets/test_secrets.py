"""The secret scanner: corpora of fake secrets and of look-alikes, the API contract.

The fake secrets in ``fixtures/secrets/secrets.jsonl`` are deterministic, match
the providers' formats and are not real credentials.  Each is stored split by
the marker ``{{JOIN}}`` so that the file itself never holds a whole token (no
scanner or push protection trips on it); the marker is removed on load.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import pytest

from machine_git.core.errors import MachineError
from machine_git.core.errors import SecretScanError
from machine_git.secrets import JSON
from machine_git.secrets import KINDS
from machine_git.secrets import Finding
from machine_git.secrets import all_kinds
from machine_git.secrets import commands
from machine_git.secrets import engine
from machine_git.secrets import placeholder
from machine_git.secrets import redact
from machine_git.secrets import redact_text
from machine_git.secrets import scan_text

FIXTURES = Path(__file__).parents[1] / "fixtures" / "secrets"
JOIN = "{{JOIN}}"


def _load(name: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    with (FIXTURES / name).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                rows.append({k: str(v).replace(JOIN, "") for k, v in row.items()})
    return rows


# The fixture's "high-entropy" rows are random strings with nothing around
# them that says secret: since issue 28 they are not redacted (a value is a
# secret by a rule with context, never for looking random).
SECRETS = [row for row in _load("secrets.jsonl") if row["kind"] != "high-entropy"]
LOOKALIKES = _load("lookalikes.jsonl")

# A fake GitHub token assembled from parts (see the module docstring).
GH = "ghp_" + "aB3dE5fG7hI9" + "jK1lM3nO5pQ7" + "rS9tU1vW3xY5"
AKID = "AKIA" + "Q7ZK4XW2N5RT3PLM"


def _ids(rows: list[dict[str, str]], field: str) -> list[str]:
    return [f"{i:03d}-{row[field]}" for i, row in enumerate(rows)]


# -- the corpora ------------------------------------------------------------------


def test_corpora_are_big_enough() -> None:
    assert len(SECRETS) >= 40
    assert len(LOOKALIKES) >= 150
    assert len({row["kind"] for row in SECRETS}) >= 30
    for row in SECRETS:
        assert row["secret"] in row["context"], row
        assert row["kind"] in KINDS | {"high-entropy"}, row


@pytest.mark.parametrize("row", SECRETS, ids=_ids(SECRETS, "kind"))
def test_secret_is_found_with_its_kind_and_removed(row: dict[str, str]) -> None:
    context, secret, kind = row["context"], row["secret"], row["kind"]
    findings = scan_text(context)
    start = context.index(secret)
    end = start + len(secret)
    covering = [f for f in findings if f.start < end and start < f.end]
    assert covering, f"{kind} not found in {context!r}"
    # named after the engine's rule when it finds it (github-pat), else machine's
    assert {f.kind for f in covering} <= all_kinds(), findings

    redacted, counts = redact_text(context)
    assert secret not in redacted
    assert any(placeholder(f.kind) in redacted for f in covering)
    assert sum(counts.values()) >= 1


def test_false_positive_rate_is_below_five_percent() -> None:
    flagged = []
    for row in LOOKALIKES:
        findings = scan_text(row["text"])
        if findings:
            spans = [(f.kind, row["text"][f.start : f.end]) for f in findings]
            flagged.append((row["category"], spans))
    rate = len(flagged) / len(LOOKALIKES)
    share = f"{len(flagged)}/{len(LOOKALIKES)}"
    print(f"secret scanner false-positive rate: {rate:.1%} ({share})")
    assert rate < 0.05, flagged


@pytest.mark.parametrize(
    "text",
    [
        'password = os.environ["DB_PASSWORD"]',
        "PASSWORD=",
        "OPENAI_API_KEY=<your-key>",
        "API_KEY=xxx",
        "DB_PASSWORD=changeme",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "id 550e8400-e29b-41d4-a716-446655440000",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        '"id": "toolu_01D7FLrfh4GYq7yT1ULFeyMV"',
        "postgres://app:${DB_PASSWORD}@db:5432/app",
    ],
)
def test_well_known_lookalikes_are_left_alone(text: str) -> None:
    assert scan_text(text) == []
    assert redact_text(text) == (text, {})


# -- what gets replaced -------------------------------------------------------------


def test_url_credentials_replace_only_the_password() -> None:
    text = "DATABASE_URL=postgres://app:S3cr3t-Pa55@db.internal:5432/app"
    redacted, counts = redact_text(text)
    assert redacted == (  # the engine's rule for credentials in URIs wins
        "DATABASE_URL=postgres://app:[REDACTED:generic-credential-uri]"
        "@db.internal:5432/app"
    )
    assert counts == {"generic-credential-uri": 1}


def test_env_secret_replaces_only_the_value() -> None:
    text = 'DB_PASSWORD=Tr0ub4dor&3x\n{"password": "hunter22"}\nuser: app'
    redacted, counts = redact_text(text)
    assert redacted == (
        "DB_PASSWORD=[REDACTED:env-secret]\n"
        '{"password": "[REDACTED:env-secret]"}\nuser: app'
    )
    assert counts == {"env-secret": 2}


def test_private_key_block_is_replaced_whole() -> None:
    body = "\n".join(["MIIEowIBAAKCAQEA" + "x9Lm2Qp8Rv4Tw6Yb" * 3] * 4)
    key = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    text = f"key:\n{key}\nok"
    assert redact_text(text) == ("key:\n[REDACTED:private-key]\nok", {"private-key": 1})


def test_truncated_private_key_is_still_redacted() -> None:
    body = "MIIEowIBAAKCAQEA" + "x9Lm2Qp8Rv4Tw6Yb" * 3
    text = f"$ head -2 id_rsa\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n$ "
    redacted, counts = redact_text(text)
    assert body not in redacted
    assert counts == {"private-key": 1}


def test_a_private_key_header_alone_is_not_a_secret() -> None:
    text = 'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):\n    n += 1'
    assert scan_text(text) == []


def test_aws_secret_key_next_to_an_access_key_id() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq83Hk2LmA"
    text = f"AccessKeyId {AKID}   SecretAccessKey {secret}"
    redacted, counts = redact_text(text)
    assert secret not in redacted and AKID not in redacted
    assert counts == {"aws-access-key": 1, "aws-secret-key": 1}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # JSON printed inside a JSON string: escaped quotes
            '{\\"user\\": \\"app\\", \\"password\\": \\"Zk9-Lp2-Qx7\\"}',
            '{\\"user\\": \\"app\\", \\"password\\": \\"[REDACTED:env-secret]\\"}',
        ),
        (  # a query string: the value ends at the next &
            "POST /login?user=app&password=Zk9Lp2Qx7&next=/home",
            "POST /login?user=app&password=[REDACTED:env-secret]&next=/home",
        ),
        (
            "docker login --password Zk9Lp2Qx7 registry.acme.io",
            "docker login --password [REDACTED:cli-secret] registry.acme.io",
        ),
        (
            "Authorization: Bearer Zk9Lp2Qx7Wm4Rt8Yb1Nc3Hd5",
            "Authorization: Bearer [REDACTED:auth-header]",
        ),
        (  # a PEM key whose newlines are escaped twice
            '"-----BEGIN PRIVATE KEY-----\\\\n'
            + "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" * 3
            + '\\\\n-----END PRIVATE KEY-----"',
            '"[REDACTED:private-key]"',
        ),
    ],
)
def test_shapes_seen_in_tool_output(text: str, expected: str) -> None:
    assert redact_text(text)[0] == expected


def test_overlapping_detectors_yield_one_finding_of_the_specific_kind() -> None:
    # the token is at once a provider key, an env value and a url password
    text = f"GITHUB_TOKEN={GH}\nhttps://x-access-token:{GH}@github.com/o/r.git"
    findings = scan_text(text)
    # the engine's rules name them: its GitHub rule, its URI credential rule
    assert [f.kind for f in findings] == ["github-pat", "generic-credential-uri"]
    assert all(text[f.start : f.end] == GH for f in findings)


def test_findings_are_sorted_and_do_not_overlap() -> None:
    text = "\n\n".join(row["context"] for row in SECRETS)
    findings = scan_text(text)
    assert len(findings) >= len(SECRETS)
    for a, b in itertools.pairwise(findings):
        assert a.start < a.end <= b.start < b.end


def test_counts_per_kind() -> None:
    text = f"one {GH}\ntwo {GH}\nkey {AKID}\n"
    redacted, counts = redact_text(text)
    assert counts == {"github-pat": 2, "aws-access-key": 1}
    assert redacted == (
        "one [REDACTED:github-pat]\ntwo [REDACTED:github-pat]\n"
        "key [REDACTED:aws-access-key]\n"
    )


def test_offsets_hold_for_text_whose_lowercase_is_longer() -> None:
    # "İ".lower() is two characters: the keyword pass must not drift
    text = "İİİİ şehir\npassword: Zk9-Lp2-Qx7\n" + GH
    redacted, counts = redact_text(text)
    assert (
        redacted == "İİİİ şehir\npassword: [REDACTED:env-secret]\n[REDACTED:github-pat]"
    )
    assert counts == {"env-secret": 1, "github-pat": 1}


def test_empty_and_plain_text() -> None:
    assert scan_text("") == []
    assert redact_text("") == ("", {})
    assert redact_text("hello world\n") == ("hello world\n", {})


def test_finding_is_a_frozen_value() -> None:
    f = Finding("jwt", 1, 5)
    assert f == Finding(kind="jwt", start=1, end=5)
    with pytest.raises(AttributeError):
        f.kind = "other"  # type: ignore[misc]


def test_kinds_are_kebab_case() -> None:
    assert {"aws-access-key", "private-key", "url-credentials", "jwt"} <= KINDS
    assert {"env-secret", "netrc-password", "openai-api-key", "tinker-api-key"} <= KINDS
    assert "high-entropy" not in KINDS  # issue 28: nothing is a secret for its looks
    for kind in all_kinds():
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", kind), kind


# -- idempotence ------------------------------------------------------------------


def test_redaction_is_idempotent_on_both_corpora() -> None:
    texts = [row["context"] for row in SECRETS] + [row["text"] for row in LOOKALIKES]
    for text in texts:
        once, _ = redact_text(text)
        twice, counts = redact_text(once)
        assert twice == once, text
        assert counts == {}, (text, once)


def test_spliced_corpora_keep_the_invariants() -> None:
    """Seeded splices of both corpora: spans stay sorted, disjoint, idempotent."""
    pieces = [row["context"] for row in SECRETS] + [row["text"] for row in LOOKALIKES]
    glue = ["", " ", "\n", '"', "=", ":", ".", "/", "\\n", "&", "İ", "://", "-----"]
    rng = random.Random(20251129)
    for _ in range(300):
        parts: list[str] = []
        for _ in range(rng.randint(1, 5)):
            piece = rng.choice(pieces)
            if rng.random() < 0.3:
                a = rng.randrange(len(piece))
                piece = piece[a : rng.randrange(a, len(piece) + 1)]
            parts += [piece, rng.choice(glue)]
        text = "".join(parts)
        findings = scan_text(text)
        assert all(0 <= f.start < f.end <= len(text) for f in findings)
        assert all(a.end <= b.start for a, b in itertools.pairwise(findings))
        once, _ = redact_text(text)
        assert redact_text(once) == (once, {}), text


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_placeholders_are_never_flagged(kind: str) -> None:
    ph = placeholder(kind)
    texts = [
        ph,
        f"API_KEY={ph}",
        f'{{"password": "{ph}", "token": "{ph}"}}',
        f"password: {ph}",
        f"postgres://app:{ph}@db:5432/app",
        f"Authorization: Bearer {ph}",
        f"--password {ph} --token {ph}",
        f"{ph}{ph} {ph}/{ph}",
    ]
    for text in texts:
        assert scan_text(text) == [], text


# -- JSON walking -------------------------------------------------------------------


def test_redact_walks_json_and_sums_counts() -> None:
    row: JSON = {
        "id": "row-1",
        "turns": [
            {"role": "user", "content": f"use {GH} please"},
            {"role": "tool", "content": [f"AKID={AKID}", {"out": f"{GH} {GH}"}]},
        ],
        GH: "keys are kept as they are",
        "n": 3,
        "ok": True,
        "score": 0.5,
        "none": None,
    }
    before = json.dumps(row, sort_keys=True)
    result, counts = redact(row)
    assert counts == {"github-pat": 3, "aws-access-key": 1}
    assert result == {
        "id": "row-1",
        "turns": [
            {"role": "user", "content": "use [REDACTED:github-pat] please"},
            {
                "role": "tool",
                "content": [
                    "AKID=[REDACTED:aws-access-key]",
                    {"out": "[REDACTED:github-pat] [REDACTED:github-pat]"},
                ],
            },
        ],
        GH: "keys are kept as they are",
        "n": 3,
        "ok": True,
        "score": 0.5,
        "none": None,
    }
    assert json.dumps(row, sort_keys=True) == before  # the input is not touched
    assert result is not row


@pytest.mark.parametrize("value", [None, True, False, 0, 7, 1.5, "", "plain", [], {}])
def test_redact_keeps_clean_values(value: JSON) -> None:
    result, counts = redact(value)
    assert result == value
    assert type(result) is type(value)
    assert counts == {}


def test_redact_of_a_bare_string() -> None:
    assert redact(f"token {GH}") == (
        "token [REDACTED:github-pat]",
        {"github-pat": 1},
    )


# -- failing closed -----------------------------------------------------------------


def test_secret_scan_error_is_a_machine_error() -> None:
    assert issubclass(SecretScanError, MachineError)


def test_an_internal_error_is_raised_as_secret_scan_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(text: str, out: list[tuple[int, int, int, str]]) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(engine, "scan", broken)
    monkeypatch.setattr(engine, "scan_many", lambda texts: 1 / 0)
    with pytest.raises(SecretScanError, match="boom"):
        scan_text(f"x {GH}")
    with pytest.raises(SecretScanError):
        redact_text("anything at all")
    with pytest.raises(SecretScanError):
        redact({"a": ["nested 1", {"b": "value 2"}]})


def test_a_broken_pattern_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def finditer(self, text: str) -> list[object]:
            raise re.error("bad pattern")

    monkeypatch.setattr(commands, "_FLAG_RE", Broken())
    with pytest.raises(SecretScanError):
        redact_text("some text")


@pytest.mark.parametrize(
    "value",
    [
        {"a": b"bytes are not JSON"},
        {"a": {1, 2}},
        [object()],
        {1: "keys must be strings"},
        ("a", "tuple"),
    ],
)
def test_values_that_are_not_json_fail_closed(value: object) -> None:
    with pytest.raises(SecretScanError):
        redact(value)  # type: ignore[arg-type]


def test_scan_text_refuses_non_strings() -> None:
    with pytest.raises(SecretScanError):
        scan_text(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(SecretScanError):
        redact_text(None)  # type: ignore[arg-type]


def test_absurdly_deep_json_fails_closed() -> None:
    deep: JSON = "x"
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(SecretScanError):
        redact(deep)


@pytest.mark.parametrize("cut", ["\\u", "\\u0", "\\u00", "\\u001"])
def test_a_string_literal_with_a_cut_unicode_escape_is_still_scanned(cut: str) -> None:
    # A commit body shows values as JSON cut short: "…\u00… -> "new"" is a
    # literal (up to the next quote) whose \u escape lost its digits (issue 25).
    text = f'content: "answer {cut}… token {GH}" -> "Two."'
    found = scan_text(text)
    assert [(f.kind, text[f.start : f.end]) for f in found] == [("github-pat", GH)]
    clean = f'content: "an answer of some length {cut}… -> "Two."'
    assert scan_text(clean) == []
    assert redact_text(clean)[0] == clean

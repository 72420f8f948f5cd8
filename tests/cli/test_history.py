from __future__ import annotations

import re
import time
from datetime import UTC
from datetime import datetime
from pathlib import Path

import orjson
import pygit2
import pytest

from machine_git.core import paths
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

WORDS = "Now two-tools: read notes.md and list /nonexiste…"  # 80 columns


def tag_three(project: Path, run: Run) -> list[str]:
    install_session(project, "basic")
    a = orjson.loads(run("good", "--json").stdout)["id"]
    b = orjson.loads(run("good", "--trace", "--json").stdout)["id"]
    install_session(project, "multi-turn")
    c = orjson.loads(run("bad", "too", "terse", "--json").stdout)["id"]
    return [a, b, c]


def shas(project: Path) -> list[str]:
    return git(paths.store_path(project), "log", "--format=%H").split()


def test_log_lists_every_change_newest_first(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "COLUMNS", "200"
    )  # whole summaries (tests/core/test_table.py: 80)
    a, b, _ = tag_three(project, run)
    run("rewrite", a, "--as", "Short.")
    run("rm", b, "--why", "dup")
    h = [s[:12] for s in shas(project)]
    lines = run("log").stdout.splitlines()
    assert [line.split()[0] for line in lines] == h
    assert [line.split()[3] for line in lines] == [
        "rm",
        "rewrite",
        "tag",
        "tag",
        "tag",
        "init",
    ]
    assert lines[0].endswith(
        f"rm {b}: Now two-tools: read notes.md and list /nonexistent-dir."
    )
    assert run("log", "-n", "2").stdout.splitlines() == lines[:2]


def test_log_kind_and_id_filters(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # whole summaries
    a, b, c = tag_three(project, run)
    run("move", a, "--to", "bad")
    traces = run("log", "--kind", "traces").stdout.splitlines()
    assert len(traces) == 1
    assert traces[0].endswith(
        f"good {b}: Now two-tools: read notes.md and list /nonexistent-d…"
    )
    life = [line.split()[3] for line in run("log", "--id", a[:6]).stdout.splitlines()]
    assert life == ["move", "tag"]
    # A removed row's history is still reachable by its full id.
    run("rm", c)
    assert [x.split()[3] for x in run("log", "--id", c).stdout.splitlines()] == [
        "rm",
        "tag",
    ]


def test_log_json(project: Path, run: Run) -> None:
    tag_three(project, run)
    entries = orjson.loads(run("log", "--json", "-n", "1").stdout)
    assert entries[0]["commit"] == shas(project)[0]
    assert entries[0]["action"] == "tag"
    assert entries[0]["trailers"]["Kind"] == "rejected"


def test_show_a_row_now_and_as_it_was(project: Path, run: Run) -> None:
    a, _, _ = tag_three(project, run)
    before = shas(project)[0]
    run("rewrite", a, "--as", "Short.")
    now = orjson.loads(run("show", a[:5], "--json").stdout)
    then = orjson.loads(run("show", a[:5], "--at", before, "--json").stdout)
    assert now["messages"][1]["content"] == "Short."
    assert then["messages"][1]["content"] != "Short."
    assert "original_answer" not in then
    text = run("show", a).stdout
    assert text == git(
        paths.store_path(project), "show", f"HEAD:rows/{a[:2]}/{a[2:4]}/{a}.json"
    )


def test_show_a_commit_with_the_rows_it_touched(project: Path, run: Run) -> None:
    a, _, _ = tag_three(project, run)
    run("move", a, "--to", "bad")
    out = run("show", "HEAD").stdout.splitlines()
    assert out[0] == f"commit {shas(project)[0]}"
    assert out[2] == "author Test User <test@example.com>"
    assert (
        out[4] == f"    move {a} train -> rejected: Now two-tools: read notes.md and l…"
    )
    assert out[-1] == (  # 80 columns: the prompt is cut, never the id
        f"moved  {a}  train -> rejected  Now two-tools: read notes.md and list /…"
    )


def test_show_unknown_is_one_line(project: Path, run: Run) -> None:
    tag_three(project, run)
    result = run("show", "zzz")
    assert result.exit_code == NOT_FOUND
    assert result.stderr == "Error: 'zzz' is neither a row id nor a revision\n"


def test_diff_default_is_the_last_commit_with_field_changes(
    project: Path, run: Run
) -> None:
    a, _, _ = tag_three(project, run)
    run("rewrite", a, "--as", "Short.")
    h = shas(project)
    out = run("diff").stdout.splitlines()
    assert out == [
        f"diff {h[1][:12]}..{h[0][:12]}: 1 row changed",
        "  train     +0  -0  ~1",
        f"modified  {a}  train  {WORDS}",
        # 80 columns: the values share what the path leaves, cut with an ellipsis
        '    $.messages[1].content: "notes.md starts with \\"# Notes\\". The c… '
        '-> "Short."',
        '    $.original_answer: (absent) -> "notes.md starts with \\"# Notes\\". '
        "The comma…",
    ]
    assert max(map(len, out)) == 80


def test_diff_between_versions_summary_ids_and_kind(project: Path, run: Run) -> None:
    a, b, c = tag_three(project, run)
    run("version", "v1", "HEAD~2")
    run("move", a, "--to", "bad")
    stat = run("diff", "v1", "--stat").stdout.splitlines()
    assert stat[1:] == [
        "  train     +0  -0  ~0  moved in 0, out 1",
        "  traces    +1  -0  ~0",
        "  rejected  +1  -0  ~0  moved in 1, out 0",
    ]
    ids = run("diff", "v1", "HEAD", "--ids").stdout.splitlines()
    assert sorted(ids) == sorted([f"> {a}", f"+ {b}", f"+ {c}"])
    only = orjson.loads(run("diff", "v1", "--kind", "traces", "--json").stdout)
    assert [r["id"] for r in only["rows"]] == [b]


def test_diff_of_a_trajectory_is_record_by_record(project: Path, run: Run) -> None:
    _, b, _ = tag_three(project, run)
    run("rewrite", b, "--as", "Both checked.")
    fields = orjson.loads(run("diff", "--json").stdout)["rows"][0]["fields"]
    assert [f["path"] for f in fields] == [
        "$.original_answer",
        "$.trajectory[5].content",
    ]
    assert fields[1]["new"] == "Both checked."


def test_diff_bad_revision(project: Path, run: Run) -> None:
    tag_three(project, run)
    result = run("diff", "nope")
    assert result.exit_code == NOT_FOUND
    assert result.stderr == (
        "Error: unknown revision 'nope' (a commit id, HEAD~N, a version name, "
        "a run id or @{DATE})\n"
    )


def _sft(run: Run) -> str:
    made = run("train", "sft", "--batch-size", "1", "--json")
    assert made.exit_code == 0, made.stderr
    return str(orjson.loads(made.stdout)["id"])


def test_diff_between_runs_compares_what_each_trained_on(
    project: Path, run: Run
) -> None:
    from machine_git.store.store import Store
    from machine_git.train import evals
    from tests.train import conftest as support

    install_session(project, "multi-turn")
    turn_one = support.answer_entry("multi-turn", "Turn one")
    assert run("good", "--entry", turn_one).exit_code == 0
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    store = paths.store_path(project)
    eval_set = evals.active(Store.open(store))
    assert eval_set is not None and len(eval_set["rows"]) == 1  # multi-turn's turn
    first = _sft(run)
    # A later turn of the eval session is held out too; one new row is not.
    install_session(project, "multi-turn")
    turn_two = support.answer_entry("multi-turn", "Turn two")
    held = orjson.loads(run("good", "--entry", turn_two, "--json").stdout)["id"]
    install_session(project, "bash-execution")
    added = orjson.loads(run("good", "--json").stdout)["id"]
    second = _sft(run)
    out = run("diff", first, second).stdout.splitlines()
    eval_id = eval_set["id"]
    assert out[0] == (
        f"diff {first}..{second} (the rows each run trained on; eval rows held "
        "out): 1 row changed"
    )
    assert out[1] == "  train     +1  -0  ~0"
    assert out[2].startswith(
        f"added  {added}  train  "
    )  # status: as wide as its widest
    assert out[3:] == [
        "other files:",
        "  added    allowed_signers",  # the first signed record trusts its key
        f"  added    evals/{eval_id}.json",
        f"  added    runs/{first}.json",
    ]
    assert held not in "\n".join(out)
    found = orjson.loads(run("diff", first, second, "--json").stdout)
    assert [(r["id"], r["status"]) for r in found["rows"]] == [(added, "added")]
    assert found["other_files"] == [
        {"path": "allowed_signers", "status": "added"},
        {"path": f"evals/{eval_id}.json", "status": "added"},
        {"path": f"runs/{first}.json", "status": "added"},
    ]
    # As plain revisions, the same two commits hold both new rows.
    commits = [
        orjson.loads(run("runs", r, "--json").stdout)["dataset"]["commit"]
        for r in (first, second)
    ]
    plain = run("diff", *commits, "--stat").stdout.splitlines()
    assert plain[1:] == ["  train     +2  -0  ~0"]


def test_diff_names_files_outside_rows_by_what_happened(
    project: Path, run: Run
) -> None:
    from machine_git.store.store import Change
    from machine_git.store.store import Store

    tag_three(project, run)
    store = Store.open(paths.store_path(project))
    store.write(lambda snap: Change("notes", {"notes.txt": b"a\n", "b.txt": b"b\n"}))
    store.write(lambda snap: Change("more", {"notes.txt": b"b\n", "b.txt": None}))
    assert run("diff").stdout.splitlines() == [
        f"diff {shas(project)[1][:12]}..{shas(project)[0][:12]}: 0 rows changed",
        "other files:",
        "  removed  b.txt",
        "  changed  notes.txt",
    ]
    assert run("diff", "HEAD~2").stdout.splitlines()[1:] == [
        "other files:",
        "  added    notes.txt",
    ]
    # Many files of one folder with one verb: one line.
    many = {f"evals/e/results/m{n}.json": b"{}\n" for n in range(4)}
    store.write(lambda snap: Change("results", {**many, "evals/e.json": b"{}\n"}))
    assert run("diff").stdout.splitlines()[1:] == [
        "other files:",
        "  added    evals/e.json",
        "  added    evals/e/results/ (4 files)",
    ]


def test_a_context_belongs_to_its_row_whatever_kind_the_diff_shows(
    project: Path, run: Run, tmp_path: Path
) -> None:
    from machine_git.core import jsonio
    from tests import helpers

    rejected = helpers.traces_row(
        "d1b2c3d4e5f6", kind="rejected", tag="bad", context=helpers.CONTEXT
    )
    seed = tmp_path / "rejected.jsonl"
    seed.write_bytes(jsonio.line(rejected))
    assert run("import", str(seed)).exit_code == 0
    # the commit adds the row and its context file; neither is a traces change
    for args in (("--kind", "traces"), ("--kind", "traces", "--stat")):
        shown = run("diff", *args).stdout
        assert "other files" not in shown, args
        assert "context/" not in shown, args
    assert "other files" not in run("diff").stdout


# -- dates ---------------------------------------------------------------------------

HOUR = 3600
DAY = 24 * HOUR


def dated_history(project: Path, run: Run, ages: list[int]) -> list[str]:
    """A store whose commits (init, then three tags) were made ``ages`` seconds
    ago: the same trees and messages, committed again at those times."""
    tag_three(project, run)
    repo = pygit2.Repository(str(paths.store_path(project)))
    old = list(reversed(shas(project)))
    assert len(old) == len(ages)
    now = int(time.time())
    parents: list[pygit2.Oid] = []
    made: list[str] = []
    for sha, age in zip(old, ages, strict=True):
        commit = repo[sha].peel(pygit2.Commit)
        when = pygit2.Signature("machine", "machine@localhost", now - age, 0)
        oid = repo.create_commit(
            None, when, when, commit.message, commit.tree_id, parents
        )
        parents = [oid]
        made.append(str(oid))
    repo.references["refs/heads/main"].set_target(parents[0])
    return made


def test_git_relative_dates_pick_the_dataset_as_it_was(project: Path, run: Run) -> None:
    init, first, second, third = dated_history(
        project, run, [10 * DAY, 3 * DAY, 30 * HOUR, HOUR]
    )
    expected = {
        "@{2.days.ago}": first,
        "@{2 days ago}": first,
        "@{yesterday}": second,
        "@{1 week ago}": init,
        "@{90.minutes.ago}": second,
        "@{now}": third,
        "@{2999-01-01}": third,
    }
    for date, commit in expected.items():
        shown = orjson.loads(run("log", date, "-n", "1", "--json").stdout)
        assert (date, shown[0]["commit"]) == (date, commit)
        assert orjson.loads(run("show", date, "--json").stdout)["commit"] == commit


DATE_COMMANDS = [
    ("show", "{}"),
    ("show", "abcdef", "--at", "{}"),
    ("log", "{}"),
    ("diff", "{}"),
    ("diff", "HEAD", "{}"),
    ("export", "{}"),
    ("version", "v1", "{}"),
]


@pytest.mark.parametrize("command", DATE_COMMANDS, ids=" ".join)
def test_a_date_error_is_one_message_whatever_the_command(
    project: Path, run: Run, command: tuple[str, ...]
) -> None:
    init = dated_history(project, run, [10 * DAY, 3 * DAY, 2 * DAY, DAY])[0]
    first = datetime.fromtimestamp(
        pygit2.Repository(str(paths.store_path(project)))[init]
        .peel(pygit2.Commit)
        .commit_time,
        UTC,
    ).strftime("%Y-%m-%d %H:%M UTC")
    forms = "expected YYYY-MM-DD, an ISO 8601 time or a date git understands "
    forms += "(yesterday, 2.days.ago, 1 week ago, noon, last friday)"
    cases = {
        "@{soon}": (USAGE, f"bad date @{{soon}}: {forms}"),
        "@{2026-13-01}": (USAGE, f"bad date @{{2026-13-01}}: {forms}"),
        "@{}": (USAGE, f"bad date @{{}}: {forms}"),
        "@{yesterday": (USAGE, f"bad date @{{yesterday: no closing brace; {forms}"),
        "@{3}": (
            USAGE,
            "bad date @{3}: a small number is a reflog position in git, not a "
            "date (HEAD~N counts commits back)",
        ),
        "@{2000-01-01}": (
            NOT_FOUND,
            "no commit at or before @{2000-01-01} (2000-01-01 23:59 UTC): the "
            f"store's first commit is from {first}",
        ),
    }
    for date, (code, message) in cases.items():
        result = run(*(part.format(date) for part in command))
        assert (date, result.exit_code, result.stderr) == (
            date,
            code,
            f"Error: {message}\n",
        )
    long_ago = run(*(part.format("@{2 weeks ago}") for part in command))
    assert long_ago.exit_code == NOT_FOUND
    assert re.fullmatch(
        r"Error: no commit at or before @\{2 weeks ago\} \(\d{4}-\d\d-\d\d \d\d:\d\d "
        rf"UTC\): the store's first commit is from {first}\n",
        long_ago.stderr,
    )

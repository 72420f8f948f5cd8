from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core.errors import SERVICE
from machine_git.core.errors import USAGE
from machine_git.store.store import Store
from machine_git.train import rendering
from machine_git.train import service
from tests.conftest import Run
from tests.conftest import git
from tests.train import conftest as support
from tests.train.conftest import FakeTinker

MODEL = support.MODEL
REPO = Path(__file__).parents[2]
HEAVY = (
    "torch",
    "tinker",
    "tinker_cookbook",
    "tml_renderers",
    "transformers",
    "datasets",
)


@pytest.fixture(autouse=True)
def _tinker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    support.clean_env(monkeypatch)


@pytest.fixture
def listener() -> Iterator[str]:
    with support.listening() as url:
        yield url


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, listener: str) -> FakeTinker:
    support.set_key(monkeypatch, listener)
    tinker = FakeTinker(tokenizer=rendering.tokenizer(MODEL))
    monkeypatch.setattr(service, "service_client", tinker.service_client)
    return tinker


@pytest.fixture
def traces(project: Path, run: Run) -> Path:
    """A store with the last turn of eight sessions tagged good --trace."""
    support.tag(run, project, support.SESSIONS, "--trace")
    return support.store_path(project)


def _json(text: str | bytes) -> Any:
    return orjson.loads(text)


def _sft(run: Run, *extra: str) -> dict[str, Any]:
    result = run(
        "train", "sft", "--kind", "traces", "--batch-size", "2", "--json", *extra
    )
    assert result.exit_code == 0, result.stderr
    return dict(_json(result.stdout))


def _subjects(store: Path, n: int) -> list[str]:
    return git(store, "log", f"-{n}", "--format=%s").splitlines()


# -- start-up and the optional stack -------------------------------------------


def _modules_after(args: list[str]) -> list[str]:
    code = (
        "import sys\n"
        "from machine_git.cli import cli\n"
        f"try:\n    cli({args!r}, prog_name='machine')\n"
        "except SystemExit:\n    pass\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return list(_json(done.stdout.strip().splitlines()[-1].replace("'", '"')))


@pytest.mark.slow
def test_help_does_not_import_the_training_stack() -> None:
    assert _modules_after(["--help"]) == []
    assert _modules_after(["train", "--help"]) == []
    assert _modules_after(["train", "eval", "--help"]) == []


@pytest.mark.slow
def test_runs_needs_no_training_stack(project: Path, run: Run) -> None:
    support.tag(run, project, ("basic",))
    code = (
        "import sys\nfrom machine_git.cli import cli\n"
        "import machine_git.train.preflight, machine_git.train.evals\n"
        "import machine_git.train.runs, machine_git.train.stack\n"
        "try:\n    cli(['runs'], prog_name='machine')\nexcept SystemExit:\n    pass\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=project,
        env=os.environ.copy(),
    )
    assert done.stdout == (
        "no training runs yet (prepare one with 'machine train sft')\n[]\n"
    )


def test_without_the_stack_train_says_how_to_install_it(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tinker", None)
    result = run("train", "validate")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: machine train needs the training stack (tinker is missing): "
        "pip install torch==2.13.0 '.[train]' in a machine checkout, or pip install "
        "torch==2.13.0 'machine_git-0.1.0-py3-none-any.whl[train]' from a wheel\n"
    )


# -- validate ------------------------------------------------------------------


def test_validate_renders_every_row_offline(traces: Path, run: Run) -> None:
    head = git(traces, "rev-parse", "HEAD").strip()
    result = run("train", "validate", "--kind", "traces")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"validate HEAD ({head[:12]}): 8 traces rows\n"
        f"model    {MODEL} (renderer qwen3, loss on all_assistant_messages)\n"
        "tokens   min 36, median 126, max 576, total 1400 (per row)\n"
        "batches  16 sequences / batch size 8 = 2 steps per epoch\n"
        f"warning  1 duplicate prompts: {_branch_turns(traces)}\n"
    )


def test_validate_dump_writes_what_trains(
    traces: Path, run: Run, tmp_path: Path
) -> None:
    dump = tmp_path / "examples.jsonl"
    result = run("train", "validate", "--kind", "traces", "--dump", str(dump))
    assert result.exit_code == 0, result.stderr
    examples = [_json(line) for line in dump.read_bytes().splitlines()]
    assert len(examples) == 16  # one per rendered sequence
    tok = rendering.tokenizer(MODEL)
    for example in examples:
        ids, weights = example["tokens"], example["weights"]
        assert len(ids) == len(weights) and set(weights) <= {0, 1}
        trained = tok.decode([t for t, w in zip(ids, weights, strict=True) if w])
        marked = re.findall("\u27e6(.*?)\u27e7", example["text"], re.S)
        assert "".join(marked) == trained
        assert example["text"].replace("\u27e6", "").replace("\u27e7", "") == (
            tok.decode(ids)
        )
        assert trained.endswith("<|im_end|>") and ids[-1] == tok.eos_token_id
    store = Store.open(traces)
    traces_ids = {
        _json(data)["id"] for _, data in store.iter_row_blobs() if b"traces" in data
    }
    assert {e["row"] for e in examples} == traces_ids


def _branch_turns(store: Path) -> str:
    # compaction-branch and branch-summary end on the same prompt.
    ids = []
    for line in git(store, "log", "--format=%s").splitlines():
        if "Branch turn" in line:
            ids.append(line.split()[1].rstrip(":"))
    return " = ".join(sorted(ids))


def test_validate_blocks_when_rows_make_no_batch(traces: Path, run: Run) -> None:
    result = run("train", "validate", "--kind", "traces", "--batch-size", "16")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-2:] == [
        "blocking  8 rows to train: fewer than one batch of 16 (tag more rows or "
        "lower --batch-size)",
        f"warning  1 duplicate prompts: {_branch_turns(traces)}",
    ]
    assert result.stderr == "Error: 1 blocking problem\n"


def test_validate_a_file_of_conversations(
    project: Path, run: Run, tmp_path: Path
) -> None:
    lines = [
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ]
        },
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": " "},
            ]
        },
        {
            "messages": [
                {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4"},
            ]
        },
    ]
    path = tmp_path / "conv.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    result = run("train", "validate", str(path), "--batch-size", "1", "--json")
    assert result.exit_code == 1
    report = _json(result.stdout)
    assert (report["rows"], report["sequences"], report["steps_per_epoch"]) == (3, 2, 2)
    assert report["problems"] == [
        {
            "blocking": True,
            "what": "empty answer (an assistant message with no text or tool call)",
            "ids": ["conv.jsonl:2"],
        },
        {
            "blocking": False,
            "what": "1 duplicate prompts",
            "ids": ["conv.jsonl:1 = conv.jsonl:2"],
        },
    ]
    assert result.stderr == "Error: 1 blocking problem\n"


# -- sft -----------------------------------------------------------------------


def test_sft_pins_the_data_and_writes_a_run_folder(traces: Path, run: Run) -> None:
    data_commit = git(traces, "rev-parse", "HEAD").strip()
    plain = run("export", "--kind", "traces").stdout.encode()
    result = run("train", "sft", "--kind", "traces", "--batch-size", "2")
    assert result.exit_code == 0, result.stderr
    run_id = _json(run("runs", "--json").stdout)[0]["id"]
    folder = traces / "machine" / "runs" / run_id
    sha = hashlib.sha256(plain).hexdigest()
    assert result.stdout == (
        f"prepared run {run_id}\n"
        f"  data    8 traces rows at {data_commit[:12]} (HEAD)\n"
        f"  export  data.jsonl sha256 {sha}\n"
        f"  model   {MODEL}, renderer qwen3, loss on all_assistant_messages\n"
        "  steps   8 (16 sequences, batch size 2, 1 epoch)\n"
        f"  folder  {folder}\n"
        "next: machine train smoke --yes  (two steps on Tinker)\n"
    )
    assert run_id.startswith(f"traces-{data_commit[:8]}-")
    # The export is `machine export --kind traces`, byte for byte.
    assert (folder / "data.jsonl").read_bytes() == plain
    assert sorted(p.name for p in folder.iterdir()) == [
        ".lock",
        "data.jsonl",
        "data.jsonl.manifest.json",
        "tinker.yaml",
        "train_sft.py",
    ]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("data.jsonl", "data.jsonl.manifest.json", "tinker.yaml"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    for name in ("tinker.yaml", "train_sft.py"):
        text = (folder / name).read_text()
        assert data_commit in text and sha in text
    manifest = _json((folder / "data.jsonl.manifest.json").read_bytes())
    assert (manifest["commit"], manifest["sha256"], manifest["rows"]) == (
        data_commit,
        sha,
        8,
    )

    # The record is a commit; the run id is a ref to the data it learned from.
    record = _json(git(traces, "show", f"HEAD:runs/{run_id}.json"))
    assert record["dataset"] == {
        "commit": data_commit,
        "revision": "HEAD",
        "kind": "traces",
        "file": "data.jsonl",
        "sha256": sha,
        "rows": 8,
        "sequences": 16,
        "held_out_eval": None,
        "held_out_rows": 0,
        "context": True,
    }
    assert (record["status"], record["renderer"], record["train_on_what"]) == (
        "prepared",
        "qwen3",
        "all_assistant_messages",
    )
    assert record["hyperparameters"]["batch_size"] == 2
    assert git(traces, "log", "-1", "--format=%(trailers)") == (
        "Machine-Action: train-sft\n"
        f"Machine-Run: {run_id}\n"
        f"Machine-Dataset: {data_commit}\n"
        f"Machine-Export: {sha}\n"
        "\n"
    )
    assert git(traces, "rev-parse", f"refs/runs/{run_id}").strip() == data_commit
    # No row changed.
    assert git(traces, "diff", "--stat", f"{data_commit}..HEAD", "--", "rows") == ""


def test_sft_no_context_trains_without_the_system_prompt_and_tools(
    project: Path, traces: Path, run: Run
) -> None:
    support.tag(run, project, ("context",), "--trace")
    full = _sft(run)
    bare = _sft(run, "--no-context")
    assert bare["id"] != full["id"]  # another config, another run
    assert (full["dataset"]["context"], bare["dataset"]["context"]) == (True, False)

    def lines(record: dict[str, Any]) -> list[dict[str, Any]]:
        data = traces / "machine" / "runs" / record["id"] / "data.jsonl"
        return [_json(line) for line in data.read_bytes().splitlines()]

    with_context = [x for x in lines(full) if "tools" in x]
    assert len(with_context) == 1
    assert with_context[0]["messages"][0]["role"] == "system"
    # the same rows, less the system message and the tool declaration
    assert lines(bare) == [
        {"messages": [m for m in x["messages"] if m["role"] != "system"]}
        for x in lines(full)
    ]
    assert (traces / "machine" / "runs" / bare["id"] / "data.jsonl").read_bytes() == (
        run("export", "--kind", "traces", "--no-context").stdout_bytes
    )
    yaml_text = (traces / "machine" / "runs" / bare["id"] / "tinker.yaml").read_text()
    assert "context: false" in yaml_text


def test_sft_refuses_to_overwrite_without_force(traces: Path, run: Run) -> None:
    first = _sft(run)
    again = run("train", "sft", "--kind", "traces", "--batch-size", "2")
    assert again.exit_code == 1
    assert again.stderr == (
        f"Error: run {first['id']} already exists for this data and config (status "
        "prepared); --force prepares it again\n"
    )
    forced = _sft(run, "--force")
    assert forced["id"] == first["id"]
    assert (
        _subjects(traces, 2)
        == [
            f"train sft {first['id']}: 8 traces rows at "
            f"{first['dataset']['commit'][:12]}"
        ]
        * 2
    )


def test_sft_refuses_a_run_with_zero_steps(traces: Path, run: Run) -> None:
    head = git(traces, "rev-parse", "HEAD").strip()
    result = run("train", "sft", "--kind", "traces", "--batch-size", "9")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: refused, nothing was spent: 8 rows to train: fewer than one batch "
        "of 9 (tag more rows or lower --batch-size); see 'machine train validate'\n"
    )
    assert git(traces, "rev-parse", "HEAD").strip() == head
    assert not (traces / "machine" / "runs").exists() or not any(
        (traces / "machine" / "runs").iterdir()
    )


def test_sft_refuses_examples_with_nothing_to_learn(traces: Path, run: Run) -> None:
    head = git(traces, "rev-parse", "HEAD").strip()
    result = run("train", "sft", "--kind", "traces", "--max-length", "8")
    assert result.exit_code == 1
    # every example named: row and number, and what to change
    assert result.stderr.startswith(
        "Error: refused, nothing was spent: nothing to learn: --max-length 8 cuts "
        "away every trained token (raise --max-length to at least "
    )
    assert " example 1, " in result.stderr
    assert result.stderr.endswith(", ...; see 'machine train validate'\n")
    assert git(traces, "rev-parse", "HEAD").strip() == head


@pytest.mark.parametrize("command", ["smoke", "run"])
def test_smoke_and_run_refuse_a_run_whose_export_validate_blocks(
    traces: Path, run: Run, fake: FakeTinker, command: str
) -> None:
    record = _sft(run)
    folder = traces / "machine" / "runs" / record["id"]
    yaml = (folder / "tinker.yaml").read_text()
    (folder / "tinker.yaml").write_text(
        yaml.replace("max_length: 32768", "max_length: 8")
    )
    head = git(traces, "rev-parse", "HEAD").strip()
    result = run("train", command, "--yes")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: refused, nothing was spent: nothing to learn: --max-length 8 cuts "
        "away every trained token (raise --max-length to at least "
    )
    assert "or drop the row): data.jsonl:1 example 1, " in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert fake.calls == []
    assert git(traces, "rev-parse", "HEAD").strip() == head


def test_sft_refuses_a_base_model_whose_renderer_drops_tool_calls(
    traces: Path, run: Run
) -> None:
    head = git(traces, "rev-parse", "HEAD").strip()
    result = run(
        "train", "sft", "--kind", "traces", "--base-model", "Qwen/Qwen3-8B-Base"
    )
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: Qwen/Qwen3-8B-Base is not accepted: a base model's renderer "
        "(role_colon) follows no chat template and drops tool calls (machine "
        "renders Qwen3, Qwen3.5 and Kimi K2 Thinking, checked against their published "
        f"chat templates; default {MODEL})\n"
    )
    assert git(traces, "rev-parse", "HEAD").strip() == head
    assert not (traces / "machine" / "runs").exists()


@pytest.mark.slow
def test_the_generated_script_runs_on_its_own(traces: Path, run: Run) -> None:
    record = _sft(run)
    folder = traces / "machine" / "runs" / record["id"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    check = subprocess.run(
        [sys.executable, "train_sft.py", "--check"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
    )
    assert (check.returncode, check.stdout) == (
        0,
        f"{record['id']}: 8 rows, 16 sequences, 8 steps of 2 on {MODEL}\n",
    )
    lint = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--config",
            str(REPO / "pyproject.toml"),
            "train_sft.py",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout
    no_key = subprocess.run(
        [sys.executable, str(folder / "train_sft.py")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert no_key.returncode == 1
    assert no_key.stderr == (
        "Error: no Tinker API key: set TINKER_API_KEY (or run 'tinker auth login')\n"
    )


# -- smoke and run -------------------------------------------------------------


def test_api_commands_refuse_without_yes(
    traces: Path, run: Run, fake: FakeTinker
) -> None:
    _sft(run)
    for args, name in (
        (("train", "smoke"), "machine train smoke"),
        (("train", "run"), "machine train run"),
        (("train", "eval", "baseline"), "machine train eval baseline"),
    ):
        result = run(*args)
        assert result.exit_code == USAGE
        assert result.stderr == (
            f"Error: {name} calls the Tinker API, which is billed: add --yes\n"
        )
    assert fake.calls == []


def test_smoke_takes_two_steps_and_commits_each(
    traces: Path, run: Run, fake: FakeTinker, listener: str
) -> None:
    record = _sft(run)
    run_id, data = record["id"], record["dataset"]
    result = run("train", "smoke", "--yes")
    assert result.exit_code == 0, result.stderr
    sampler = "tinker://fake-run:train:0/sampler_weights/smoke"
    assert result.stdout == (
        f"smoke passed: 2 steps, loss 0.2500, checkpoint {sampler}\n"
        "next: machine train run --yes\n"
    )
    assert result.stderr.splitlines()[0] == (
        f"smoke {run_id}: 2 steps on {MODEL} (data {data['commit'][:12]}, sha256 "
        f"{data['sha256'][:12]})"
    )
    assert result.stderr.splitlines()[1].startswith(f"tinker ok: {listener} (")
    assert fake.names() == [
        "ServiceClient",
        "get_server_capabilities",
        "ServiceClient",
        "create_lora_training_client",
        "forward_backward",
        "optim_step",
        "forward_backward",
        "optim_step",
        "save_weights_for_sampler",
    ]
    metadata = {
        "machine_run": run_id,
        "dataset_commit": data["commit"],
        "export_sha256": data["sha256"],
    }
    assert fake.calls[3] == (
        "create_lora_training_client",
        {"base_model": MODEL, "rank": 32, "seed": 0, "user_metadata": metadata},
    )
    assert [len(b) for b in fake.batches] == [2, 2]
    assert _subjects(traces, 5) == [
        f"train smoke {run_id}: done, 2 steps, loss 0.2500",
        f"train smoke {run_id}: checkpoint smoke {sampler}",
        f"train smoke {run_id}: step 2/2 loss 0.2500",
        f"train smoke {run_id}: step 1/2 loss 0.5000",
        f"train smoke {run_id}: 2 steps",
    ]
    smoke = _json(git(traces, "show", f"HEAD:runs/{run_id}.json"))["smoke"]
    assert (smoke["status"], smoke["checkpoint"], smoke["final_loss"]) == (
        "passed",
        sampler,
        0.25,
    )
    assert [s["loss"] for s in smoke["steps"]] == [0.5, 0.25]
    folder = traces / "machine" / "runs" / run_id / "smoke"
    lines = [_json(x) for x in (folder / "metrics.jsonl").read_bytes().splitlines()]
    assert [(x["step"], x["dataset_commit"], x["export_sha256"]) for x in lines] == [
        (0, data["commit"], data["sha256"]),
        (1, data["commit"], data["sha256"]),
    ]


def test_run_trains_every_batch_and_records_checkpoints(
    traces: Path, run: Run, fake: FakeTinker
) -> None:
    record = _sft(run, "--save-every", "2")
    run_id, data = record["id"], record["dataset"]
    result = run("train", "run", "--yes")
    assert result.exit_code == 0, result.stderr
    prefix = "tinker://fake-run:train:0"
    assert result.stdout == (
        "done: 8 steps, final loss 0.0625\n"
        f"sampler {prefix}/sampler_weights/final\n"
        f"state   {prefix}/weights/final\n"
    )
    assert "training" in result.stderr  # the progress bar (not a terminal: its label)
    two_steps = ["forward_backward", "optim_step"] * 2
    assert fake.names()[2:] == [
        "ServiceClient",
        "create_lora_training_client",
        *two_steps,
        "save_state",
        *two_steps,
        "save_state",
        *two_steps,
        "save_state",
        *two_steps,
        "save_state",
        "save_weights_for_sampler",
    ]
    rates = [c[1]["learning_rate"] for c in fake.calls if c[0] == "optim_step"]
    assert rates == pytest.approx([2e-4 * (1 - k / 8) for k in range(8)])
    # Every sequence once: 8 rows -> 16 sequences (one per assistant turn).
    assert sum(len(b) for b in fake.batches) == 16
    assert _subjects(traces, 3) == [
        f"train run {run_id}: done, 8 steps, loss 0.0625",
        f"train run {run_id}: checkpoint final {prefix}/sampler_weights/final",
        f"train run {run_id}: step 8/8 loss 0.0625",
    ]
    assert git(traces, "log", "-1", "--format=%(trailers:key=Machine-Action)") == (
        "Machine-Action: train-done\n\n"
    )
    final = _json(git(traces, "show", f"HEAD:runs/{run_id}.json"))
    assert (final["status"], final["final_loss"], final["attempts"]) == (
        "done",
        0.0625,
        1,
    )
    assert [c["name"] for c in final["checkpoints"]] == [
        "000002",
        "000004",
        "000006",
        "final",
    ]
    assert final["checkpoints"][-1]["state_path"] == f"{prefix}/weights/final"
    folder = traces / "machine" / "runs" / run_id
    checkpoints = [
        _json(x) for x in (folder / "checkpoints.jsonl").read_bytes().splitlines()
    ]
    assert checkpoints[-1] == {
        "name": "final",
        "batch": 8,
        "epoch": 0,
        "final": True,
        "state_path": f"{prefix}/weights/final",
        "sampler_path": f"{prefix}/sampler_weights/final",
        "run_id": run_id,
        "dataset_commit": data["commit"],
        "export_sha256": data["sha256"],
    }
    again = run("train", "run", "--yes")
    assert again.exit_code == 1
    assert again.stderr == (
        f"Error: run {run_id} is done; prepare a new one with 'machine train sft'\n"
    )


def test_smoke_and_run_json_print_one_document_and_no_progress(
    traces: Path, run: Run, fake: FakeTinker, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _sft(run, "--save-every", "4")
    run_id, data = record["id"], record["dataset"]
    prefix = "tinker://fake-run:train:0"
    smoke = run("train", "smoke", "--yes", "--json")
    assert smoke.exit_code == 0, smoke.stderr
    assert smoke.stdout == (
        f'{{"checkpoint":"{prefix}/sampler_weights/smoke","final_loss":0.25,'
        f'"run":"{run_id}","status":"passed","steps":2}}\n'
    )
    done = run("train", "run", "--yes", "--json")
    assert done.exit_code == 0, done.stderr
    stored = _json(git(traces, "show", f"HEAD:runs/{run_id}.json"))
    assert _json(done.stdout) == {
        "id": run_id,
        "method": "sft",
        "created_at": stored["created_at"],
        "rows": data["rows"],
        "status": "done",
        "dataset_commit": data["commit"],
        "export_sha256": data["sha256"],
        "kind": "traces",
        "base_model": MODEL,
        "steps": 8,
        "steps_planned": 8,
        "final_loss": 0.0625,
        "checkpoints": 2,
        "final_sampler": f"{prefix}/sampler_weights/final",
        "final_state": f"{prefix}/weights/final",
        "smoke": "passed",
        "epochs": stored["trained"]["epochs"],
    }
    assert done.stdout.count("\n") == 1
    assert "training" not in done.stderr  # no progress bar with --json
    # The listing fits the terminal: only TRAINED, the free text, is cut.
    epochs = _json(done.stdout)["epochs"]
    trained = ", ".join(
        f"e{e['epoch']} {e['rows']} rows {e['tokens']} tok" for e in epochs
    )
    for columns in (80, 200):
        monkeypatch.setenv("COLUMNS", str(columns))
        lines = run("runs").stdout.splitlines()
        fixed = [
            ("RUN".ljust(len(run_id)), run_id),
            ("STATUS", "done  "),
            ("DATA        ", data["commit"][:12]),
            ("STEPS", "8/8  "),
            ("LOSS  ", "0.0625"),
            ("CKPT", "2   "),
            ("SMOKE ", "passed"),
        ]
        start = ["".join(f"{c[i]}  " for c in fixed) for i in (0, 1)]
        room = columns - len(start[1])
        assert lines == [
            start[0] + ("TRAINED" if room >= 7 else "TRAINED"[: room - 1] + "…"),
            start[1] + (trained if len(trained) <= room else trained[: room - 1] + "…"),
        ]
        assert max(map(len, lines)) == min(columns, len(start[1]) + len(trained))


def test_a_run_id_is_a_revision(project: Path, run: Run) -> None:
    support.tag(run, project, support.SESSIONS[:4], "--trace")
    first = _sft(run)["id"]
    support.tag(run, project, support.SESSIONS[4:6], "--trace")
    second = _sft(run)["id"]
    diff = run("diff", first, second, "--stat")
    assert diff.exit_code == 0, diff.stderr
    assert diff.stdout.splitlines()[1:] == ["  traces    +2  -0  ~0"]
    show = run("show", first)
    assert (
        show.stdout.splitlines()[0]
        == f"commit {_json(run('runs', first, '--json').stdout)['dataset']['commit']}"
    )


# -- failures ------------------------------------------------------------------


def _rows_unchanged(store: Path, since: str) -> None:
    assert git(store, "diff", "--stat", f"{since}..HEAD", "--", "rows") == ""


def test_no_key_stops_before_any_request(
    traces: Path, run: Run, fake: FakeTinker, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sft(run)
    head = git(traces, "rev-parse", "HEAD").strip()
    monkeypatch.delenv("TINKER_API_KEY")
    result = run("train", "run", "--yes")
    assert result.exit_code == SERVICE
    assert result.stderr.splitlines()[-1] == (
        "Error: no Tinker API key: set TINKER_API_KEY (or run 'tinker auth login')"
    )
    assert fake.calls == []
    assert git(traces, "rev-parse", "HEAD").strip() == head


def test_an_unreachable_service_fails_fast(
    traces: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sft(run)
    head = git(traces, "rev-parse", "HEAD").strip()
    url = support.refusing_url()
    support.set_key(monkeypatch, url)  # and the real client seam: nothing faked
    result = run("train", "smoke", "--yes")
    assert result.exit_code == SERVICE
    assert result.stderr.splitlines()[-1] == (
        f"Error: Tinker is unreachable at {url}: connection refused "
        "(check the network or TINKER_BASE_URL)"
    )
    assert git(traces, "rev-parse", "HEAD").strip() == head


def test_a_service_error_mid_run_marks_the_run_failed(
    traces: Path, run: Run, fake: FakeTinker
) -> None:
    record = _sft(run)
    run_id = record["id"]
    before = git(traces, "rev-parse", "HEAD").strip()
    fake.fail_at_step = 3
    result = run("train", "run", "--yes")
    assert result.exit_code == SERVICE
    reason = "HTTP 500 (the service failed): worker lost"
    assert result.stderr.splitlines()[-1] == (
        f"Error: run of {run_id} failed at step 3: {reason}"
    )
    final = _json(git(traces, "show", f"HEAD:runs/{run_id}.json"))
    assert (final["status"], final["error"]) == ("failed", f"step 3: {reason}")
    assert [s["step"] for s in final["steps"]] == [0, 1]
    assert _subjects(traces, 1) == [f"train failed {run_id} at step 3: {reason}"]
    assert git(traces, "log", "-1", "--format=%(trailers:key=Machine-Action)") == (
        "Machine-Action: train-failed\n\n"
    )
    _rows_unchanged(traces, before)
    # A failed run can be run again from the start.
    fake.fail_at_step = None
    retry = run("train", "run", "--yes")
    assert retry.exit_code == 0, retry.stderr
    done = _json(git(traces, "show", f"HEAD:runs/{run_id}.json"))
    assert (done["status"], done["attempts"], done["error"]) == ("done", 2, None)


def test_a_changed_export_is_refused_before_any_request(
    traces: Path, run: Run, fake: FakeTinker
) -> None:
    record = _sft(run)
    data = traces / "machine" / "runs" / record["id"] / "data.jsonl"
    data.write_bytes(data.read_bytes() + data.read_bytes())
    result = run("train", "smoke", "--yes")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"Error: {data} changed since run {record['id']} was prepared"
    )
    assert fake.calls == []

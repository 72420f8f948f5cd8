"""examples/project-euler: variants, sandbox, mutation scoring, receipts, gates."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from machine_git import releases
from machine_git.releases import steps
from machine_git.store import Store
from tests.conftest import git

EXAMPLE = Path(__file__).parents[1] / "examples" / "project-euler"
SOLUTIONS = EXAMPLE / "solutions"
sys.path.insert(0, str(EXAMPLE))
problems: Any = importlib.import_module("euler.problems")
variants: Any = importlib.import_module("euler.variants")
sandbox: Any = importlib.import_module("euler.sandbox")
mutate: Any = importlib.import_module("euler.mutate")
score: Any = importlib.import_module("euler.score")
receipts: Any = importlib.import_module("euler.receipts")
cli: Any = importlib.import_module("euler.cli")

ISOLATIONS = sorted({"guards", sandbox.best()})


def test_reference_answers_of_known_small_cases() -> None:
    cases = {
        "multiples": ({"a": 3, "b": 5, "n": 10}, 23),
        "fibonacci": ({"k": 2, "n": 100}, 44),
        "prime-factor": ({"n": 13195}, 29),
        "smallest-multiple": ({"lo": 1, "hi": 10}, 2520),
        "power-digits": ({"base": 2, "exponent": 15}, 26),
    }
    assert sorted(cases) == sorted(problems.PROBLEMS)
    for pid, (params, answer) in cases.items():
        assert problems.get(pid).solve(params) == answer


def test_hidden_variants_differ_per_seed_and_repeat_per_seed() -> None:
    for pid in problems.PROBLEMS:
        one = variants.hidden(pid, "seed-one", 4)
        assert [v.params for v in one] == [
            v.params for v in variants.hidden(pid, "seed-one", 4)
        ]
        assert [v.params for v in one] != [
            v.params for v in variants.hidden(pid, "seed-two", 4)
        ]
        assert [v.id for v in one] == [f"{pid}/hidden-{i}" for i in range(4)]


def test_transfer_variants_are_frozen_parameters_only() -> None:
    table = json.loads(variants.TRANSFER.read_text())
    assert sorted(table) == sorted(problems.PROBLEMS)
    frozen = variants.transfer("prime-factor")
    assert [(v.id, v.params, v.seed) for v in frozen] == [
        ("prime-factor/transfer-0", {"n": 600851}, None),
        ("prime-factor/transfer-1", {"n": 2147483647}, None),
    ]
    assert [v.answer() for v in frozen] == [20719, 2147483647]


PY_NET = b"""
import socket
for attempt in (
    lambda: socket.create_connection(("127.0.0.1", 9), timeout=2),
    lambda: socket.getaddrinfo("example.com", 80),
):
    try:
        attempt()
        print("reached")
    except Exception as e:
        print("blocked", type(e).__name__)
"""

JS_NET = b"""
const net = require("net"), dns = require("dns");
try {
  const s = net.connect(9, "127.0.0.1");
  s.on("connect", () => console.log("reached"));
  s.on("error", () => console.log("blocked error"));
} catch (e) { console.log("blocked", e.message); }
try {
  dns.lookup("example.com", (err) => console.log(err ? "blocked dns" : "reached"));
} catch (e) { console.log("blocked", e.message); }
"""


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_sandbox_has_no_network(isolation: str) -> None:
    py = sandbox.run(PY_NET, "python", isolation=isolation)
    js = sandbox.run(JS_NET, "javascript", isolation=isolation)
    assert py.returncode == 0
    assert py.stdout.decode().split() == ["blocked", "PermissionError"] * 2
    assert js.stdout.decode().count("blocked") == 2
    assert b"reached" not in js.stdout


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_sandbox_cannot_write_outside_its_dir(isolation: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    py = (
        f"import os\nopen('inside.txt', 'w').write('ok')\n"
        f"print(open('inside.txt').read())\n"
        f"for f in (lambda: open({str(outside)!r}, 'w'), "
        f"lambda: os.remove({str(victim)!r})):\n"
        f"    try:\n        f()\n        print('wrote')\n"
        f"    except OSError:\n        print('refused')\n"
    ).encode()
    js = (
        "const fs = require('fs'); fs.writeFileSync('inside.txt', 'ok');"
        "console.log(fs.readFileSync('inside.txt', 'utf8'));"
        f"try {{ fs.writeFileSync({json.dumps(str(outside))}, 'x');"
        " console.log('wrote'); } catch (e) { console.log('refused'); }"
        f"try {{ fs.unlinkSync({json.dumps(str(victim))});"
        " console.log('wrote'); } catch (e) { console.log('refused'); }"
    ).encode()
    for source, lang in ((py, "python"), (js, "javascript")):
        result = sandbox.run(source, lang, isolation=isolation)
        assert result.stdout.decode().split() == ["ok", "refused", "refused"]
    assert not outside.exists()
    assert victim.read_text() == "keep"


@pytest.mark.slow
def test_sandbox_times_out_an_infinite_loop_and_caps_output() -> None:
    limits = sandbox.Limits(timeout=1.0, output=1000)
    loop = sandbox.run(b"while True:\n    pass\n", "python", limits=limits)
    assert (loop.timed_out, loop.answer()) == (True, None)
    flood = sandbox.run(b"while True:\n    print('x' * 99)\n", "python", limits=limits)
    assert (flood.truncated, len(flood.stdout), flood.answer()) == (True, 1000, None)


def test_mutants_change_literals_and_comparisons_not_strings() -> None:
    py = "x = 'a<1'  # 2 < 3\nif n <= 10:\n    print(0)\n"
    assert [m.description for m in mutate.mutants(py, "python")] == [
        "line 2: <= -> <",
        "line 2: 10 -> 11",
        "line 2: 10 -> 9",
        "line 3: 0 -> 1",
    ]
    js = 'const s = "a<1"; // 2\nlet t = 10n; if (t === 2n) f(x => x >> 1);\n'
    assert [m.description for m in mutate.mutants(js, "javascript")] == [
        "line 2: 10n -> 11n",
        "line 2: 10n -> 9n",
        "line 2: === -> !==",
        "line 2: 2n -> 3n",
        "line 2: 2n -> 1n",
        "line 2: 1 -> 2",
        "line 2: 1 -> 0",
    ]
    assert mutate.mutants(py, "python")[0].source.splitlines()[1] == "if n < 10:"


def _evaluate(name: str, seed: str = "t1") -> dict[str, Any]:
    path = SOLUTIONS / name
    pid = path.stem.removeprefix("cheat-")
    settings = score.Settings(mutants=10, mutant_variants=2)
    return dict(
        score.evaluate(
            pid,
            path.read_bytes(),
            sandbox.language(path),
            variants.hidden(pid, seed, 3),
            variants.transfer(pid),
            settings,
            seed,
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["multiples.py", "multiples.js", "power-digits.js", "fibonacci.py"]
)
def test_correct_solutions_score_high(name: str) -> None:
    result = _evaluate(name)
    assert (result["correctness"], result["transfer"]) == (1.0, 1.0)
    assert result["mutation_sensitivity"] >= score.FULL_CREDIT
    assert (result["score"], result["suspicious"]) == (1.0, False)
    assert all(v["correct"] for v in result["variants"])


@pytest.mark.slow
def test_cheat_scores_low_on_mutation_sensitivity() -> None:
    result = _evaluate("cheat-multiples.py")
    assert result["mutation_sensitivity"] < score.SUSPICIOUS
    assert (result["suspicious"], result["score"]) == (True, 0.0)
    assert [v["output"] for v in result["variants"]] == ["2318"] * 5


@pytest.mark.slow
def test_receipt_is_committed_to_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "store.git"
    Store.create(store_path)
    program = str(SOLUTIONS / "multiples.py")
    argv = ["eval", "--program", program, "--seed", "s9", "--variants", "2"]
    argv += ["--mutants", "4", "--store", str(store_path), "--json"]
    assert cli.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    rid = printed["run"]
    stored = json.loads(
        git(store_path, "show", f"main:receipts/project-euler/{rid}.json")
    )
    assert stored["seed"] == "s9"
    [result] = stored["results"]
    assert (
        result["program_sha256"]
        == receipts.hashlib.sha256(
            (SOLUTIONS / "multiples.py").read_bytes()
        ).hexdigest()
    )
    assert [v["seed"] for v in result["variants"]] == [
        variants.sub_seed("s9", "multiples", 0),
        variants.sub_seed("s9", "multiples", 1),
        None,
        None,
    ]
    assert stored["summary"]["score"] == 1.0
    trailers = git(store_path, "log", "-1", "--format=%(trailers)")
    assert trailers.split("\n")[:2] == [
        "Machine-Action: receipt",
        f"Machine-Receipt: {rid}",
    ]
    assert printed["commit"] == git(store_path, "rev-parse", "main").strip()


@pytest.mark.slow
def test_agent_command_supplies_the_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = f"cp {SOLUTIONS / 'multiples.js'} {{out}} # {{prompt}}"
    argv = ["eval", "--problem", "multiples", "--agent-cmd", agent, "--language"]
    argv += ["js", "--variants", "2", "--mutants", "4", "--seed", "s1"]
    assert cli.main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("multiples          javascript correct 1.00  transfer 1.00")


def test_gates_and_holdouts_are_accepted_by_releases(tmp_path: Path) -> None:
    hold, gates = receipts.write_gates(
        tmp_path, ["multiples", "power-digits"], "g1", 2, 0.8
    )
    spec, data = releases.load_spec(gates, None)  # the gates file's model
    assert data is not None
    assert len(steps.parse_holdouts(data, hold.name)) == 8
    assert data == hold.read_bytes()
    cases = [json.loads(line) for line in data.splitlines()]
    assert [c["id"] for c in cases] == [
        "project-euler/multiples/hidden-0",
        "project-euler/multiples/hidden-1",
        "project-euler/multiples/transfer-0",
        "project-euler/multiples/transfer-1",
        "project-euler/power-digits/hidden-0",
        "project-euler/power-digits/hidden-1",
        "project-euler/power-digits/transfer-0",
        "project-euler/power-digits/transfer-1",
    ]
    assert cases[2]["messages"] == [
        {
            "role": "user",
            "content": "What is the sum of all natural numbers below 1000000 that are"
            " multiples of 7 or of 11? Answer with the number only.",
        }
    ]
    assert cases[2]["reference"] == "110389889610"
    assert spec.gates.holdouts is not None
    assert [g.model_dump() for g in spec.gates.holdouts.metrics] == [
        {"metric": "exact", "min": 0.8, "min_delta": 0.0}
    ]

"""``python -m euler``: list problems, evaluate programs, emit release gates.

python -m euler problems
python -m euler eval --program solutions/multiples.py [--program ID=FILE ...]
    [--seed S] [--variants 5] [--mutants 16] [--isolation bwrap]
    [--unsafe-no-sandbox] [--store PATH | --project DIR] [--json]
python -m euler eval --problem multiples --agent-cmd 'pi -p {prompt}' --language py
python -m euler gates --out DIR [--problem ID ...] [--seed S] [--mastery 0.8]
python -m euler isolation
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from euler import problems
from euler import receipts
from euler import sandbox
from euler import score
from euler import variants

_EXT = {"py": "python", "js": "javascript"}


class UsageError(Exception):
    pass


# The largest program the harness reads (a bigger one is a failed result).
MAX_PROGRAM = 1 << 20


def _programs(args: argparse.Namespace) -> list[tuple[str, bytes | str, str]]:
    """(problem id, source or why there is none, language) per program."""
    found: list[tuple[str, bytes | str, str]] = []
    for spec in args.program or []:
        pid, _, name = spec.rpartition("=")
        path = Path(name)
        pid = pid or path.stem.removeprefix("cheat-")
        problems.get(pid)
        try:
            found.append((pid, path.read_bytes(), sandbox.language(path)))
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror}") from None
    if args.agent_cmd:
        for pid in args.problem or list(problems.PROBLEMS):
            found.append(
                (
                    pid,
                    _from_agent(args.agent_cmd, pid, args.language),
                    _EXT[args.language],
                )
            )
    if not found:
        raise UsageError("give --program FILE (or --agent-cmd with --problem)")
    return found


def _from_agent(template: str, pid: str, ext: str) -> bytes | str:
    """Ask the agent for a program: run the command, read the file it wrote.

    The command is the user's own agent (trusted, run outside the sandbox);
    ``{prompt}`` and ``{out}`` are replaced, shell-quoted. When it writes no
    file, the reason (a string) stands in for the program.
    """
    with tempfile.TemporaryDirectory(prefix="euler-agent-") as tmp:
        out = Path(tmp, f"{pid}.{ext}")
        prompt = (
            f"Write a complete {_EXT[ext]} program to the file {out}. "
            + problems.get(pid).statement
            + " Use only the standard library; no network, no files."
        )
        cmd = template.format(prompt=shlex.quote(prompt), out=shlex.quote(str(out)))
        done = subprocess.run(cmd, shell=True, cwd=tmp, check=False)
        if done.returncode != 0 or not out.is_file():
            return f"agent command wrote no {out.name} (exit {done.returncode})"
        return out.read_bytes()


def _store_path(args: argparse.Namespace) -> Path | None:
    if args.store:
        return Path(args.store)
    if args.project:
        from machine_git.core import paths

        return paths.store_path(paths.project_root(Path(args.project)))
    return None


def cmd_eval(args: argparse.Namespace) -> int:
    seed = args.seed or variants.new_seed()
    isolation = sandbox.resolve(args.isolation, allow_unsafe=args.unsafe_no_sandbox)
    programs = _programs(args)
    if isolation == sandbox.UNSAFE:
        print(
            "warning: no sandbox; the programs run with in-process guards only",
            file=sys.stderr,
        )
    settings = score.Settings(
        mutants=args.mutants, mutant_variants=args.mutant_variants,
        isolation=isolation, allow_unsafe=args.unsafe_no_sandbox,
        limits=sandbox.Limits(timeout=args.timeout),
    )  # fmt: skip
    results = []
    for pid, source, lang in programs:
        if isinstance(source, str):
            results.append(score.failed(pid, lang, b"", source))
            continue
        if len(source) > MAX_PROGRAM:
            why = f"program is {len(source)} bytes (at most {MAX_PROGRAM})"
            results.append(score.failed(pid, lang, source, why))
            continue
        hidden = variants.hidden(pid, seed, args.variants)
        results.append(
            score.evaluate(
                pid, source, lang, hidden, variants.transfer(pid), settings, seed
            )
        )
    summary = score.summary(results)
    rid = receipts.run_id(seed)
    receipt = receipts.build(rid, seed, results, summary)
    store = _store_path(args)
    commit = receipts.commit(store, receipt) if store else None
    if args.json:
        print(json.dumps({**receipt, "commit": commit}, indent=2))
    else:
        _print(results, summary)
        if commit:
            print(f"receipt {receipts.path(rid)} at {commit[:12]}")
    return 0


def _print(results: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    for r in results:
        killed = sum(m["killed"] for m in r["mutants"])
        flag = "  SUSPICIOUS" if r["suspicious"] else ""
        if "error" in r:
            flag += f"  FAILED: {r['error']}"
        print(
            f"{r['problem']:<18} {r['language']:<10} "
            f"correct {r['correctness']:.2f}  transfer {r['transfer']:.2f}  "
            f"mutation {r['mutation_sensitivity']:.2f} ({killed}/{len(r['mutants'])})  "
            f"score {r['score']:.2f}{flag}"
        )
    isolation = next((r["isolation"] for r in results if r["isolation"]), None)
    print(
        f"total: score {summary['score']:.2f}, correct {summary['correctness']:.2f}, "
        f"transfer {summary['transfer']:.2f}, isolation {isolation}"
    )


def cmd_gates(args: argparse.Namespace) -> int:
    seed = args.seed or variants.new_seed()
    pids = args.problem or list(problems.PROBLEMS)
    hold, gates = receipts.write_gates(
        Path(args.out), pids, seed, args.variants, args.mastery
    )
    print(f"wrote {hold} and {gates} (seed {seed})")
    print(f"use: machine release new BR-NNN --run RUN --gates {gates}")
    return 0


def cmd_problems(_args: argparse.Namespace) -> int:
    for p in problems.PROBLEMS.values():
        print(f"{p.id}: {p.title}\n  {p.statement}")
    return 0


def cmd_isolation(_args: argparse.Namespace) -> int:
    for mode in sandbox.ISOLATIONS:
        print(f"{mode:<7} {sandbox.problem(mode) or 'works'}")
    best = sandbox.best()
    print(f"use: {best or 'none (only with --unsafe-no-sandbox)'}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="euler", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="score programs on hidden and frozen variants")
    ev.add_argument("--program", action="append", metavar="[ID=]FILE")
    ev.add_argument("--problem", action="append", metavar="ID")
    ev.add_argument("--agent-cmd", help="shell command with {prompt} and {out}")
    ev.add_argument("--language", choices=sorted(_EXT), default="py")
    ev.add_argument("--seed", help="reproduce a run (default: a fresh seed)")
    ev.add_argument("--variants", type=int, default=5)
    ev.add_argument("--mutants", type=int, default=16)
    ev.add_argument("--mutant-variants", type=int, default=3)
    ev.add_argument("--timeout", type=float, default=10.0)
    ev.add_argument("--isolation", choices=[*sandbox.ISOLATIONS, sandbox.UNSAFE])
    ev.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="allow running untrusted programs with in-process guards only",
    )
    ev.add_argument("--store", help="commit the receipt to this machine store")
    ev.add_argument("--project", help="commit the receipt to this project's store")
    ev.add_argument("--json", action="store_true")
    ev.set_defaults(func=cmd_eval)
    ga = sub.add_parser("gates", help="write holdouts.jsonl + gates.json")
    ga.add_argument("--out", required=True)
    ga.add_argument("--problem", action="append", metavar="ID")
    ga.add_argument("--seed")
    ga.add_argument("--variants", type=int, default=5)
    ga.add_argument("--mastery", type=float, default=0.8)
    ga.set_defaults(func=cmd_gates)
    sub.add_parser("problems", help="list the problems").set_defaults(func=cmd_problems)
    sub.add_parser("isolation", help="the sandbox this machine gives").set_defaults(
        func=cmd_isolation
    )
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader left (`| head`): stop quietly, as a shell tool would, and
        # point stdout at /dev/null so the exit flush does not complain.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (UsageError, ValueError, sandbox.NoSandbox) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if type(e).__module__.startswith("machine_git"):
            print(f"Error: {e}", file=sys.stderr)
            return 1
        raise

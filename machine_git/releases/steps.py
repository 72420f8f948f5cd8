"""The four release steps, each a pure function of the store before it.

``preregister``, ``check``, ``trial`` and ``activate`` take the snapshot a
commit is planned against and the step's inputs (what a person chose, what
the Tinker service answered, the time), and return the one :class:`Change`
the step commits. Nothing else decides what a step writes, so the same
function serves twice: the commands commit its result, and the audit
(``audit.py``) recomputes it from the parent of every commit that touches
``releases/`` and compares the bytes. The inputs are inside the records the
steps write (a preregistration names its run, gates and title; a check holds
its answers), so a commit carries what is needed to verify it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pygit2
from pygit2 import Commit
from pygit2 import Tree

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import NotFoundError
from machine_git.core.errors import ReleaseError
from machine_git.core.errors import RunNotFoundError
from machine_git.releases import gates
from machine_git.releases.records import Activation
from machine_git.releases.records import Baseline
from machine_git.releases.records import Bounds
from machine_git.releases.records import Candidate
from machine_git.releases.records import Check
from machine_git.releases.records import CheckRef
from machine_git.releases.records import EvalPin
from machine_git.releases.records import EvalUsed
from machine_git.releases.records import FrozenHoldouts
from machine_git.releases.records import Gates
from machine_git.releases.records import GateSpec
from machine_git.releases.records import HoldoutSpec
from machine_git.releases.records import Prereg
from machine_git.releases.records import Sample
from machine_git.releases.records import Sampling
from machine_git.releases.records import Training
from machine_git.releases.records import Trial
from machine_git.releases.records import TrialSpec
from machine_git.releases.records import activation_path
from machine_git.releases.records import check_id
from machine_git.releases.records import check_number
from machine_git.releases.records import check_path
from machine_git.releases.records import folder_of
from machine_git.releases.records import holdouts_path
from machine_git.releases.records import load
from machine_git.releases.records import prereg_path
from machine_git.releases.records import trial_path
from machine_git.store import settings
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.train.evals import Case

NEW, CHECK, TRIAL, ACTIVATE = "new", "check", "trial", "activate"


class AlreadyDone(ReleaseError):
    """The step was already taken (a trial or activation): nothing to commit."""

    def __init__(self, release_id: str, status: str, path: str) -> None:
        super().__init__(f"{release_id} is already {status}")
        self.release_id = release_id
        self.status = status
        self.path = path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- a release's files at one commit ---------------------------------------------------


@dataclass(frozen=True)
class Folder:
    """The bytes of one release's records at one commit."""

    release_id: str
    prereg_bytes: bytes | None
    holdouts_bytes: bytes | None
    check_bytes: list[bytes]
    trial_bytes: bytes | None
    activation_bytes: bytes | None

    def prereg(self) -> Prereg:
        if self.prereg_bytes is None:
            raise NotFoundError(
                f"no release {self.release_id} (see 'machine release list')"
            )
        return load(Prereg, self.prereg_bytes, prereg_path(self.release_id))

    def checks(self) -> list[Check]:
        return [
            load(Check, data, check_path(self.release_id, n))
            for n, data in enumerate(self.check_bytes, start=1)
        ]

    def last_check(self) -> CheckRef | None:
        if not self.check_bytes:
            return None
        return CheckRef(
            number=len(self.check_bytes), sha256=sha256(self.check_bytes[-1])
        )

    @property
    def status(self) -> str:
        """preregistered, passed, failed, trial or active: read from the files."""
        if self.activation_bytes is not None:
            return "active"
        if self.trial_bytes is not None:
            return "trial"
        if self.check_bytes:
            return "passed" if self.checks()[-1].passed else "failed"
        return "preregistered"


def broken_links(found: Folder) -> list[tuple[str, str]]:
    """(path, field) of each digest that does not match the record it names.

    Each step checks its own links when it writes; this is for a merge, which
    may put records from two histories side by side.
    """
    rid = found.release_id
    if found.prereg_bytes is None:
        return []
    prereg = sha256(found.prereg_bytes)
    checks = [sha256(data) for data in found.check_bytes]
    out: list[tuple[str, str]] = []
    for n, check in enumerate(found.checks(), start=1):
        if check.prereg_sha256 != prereg:
            out.append((check_path(rid, n), "$.prereg_sha256"))
        if check.previous_sha256 != (checks[n - 2] if n > 1 else None):
            out.append((check_path(rid, n), "$.previous_sha256"))
    refs: list[tuple[str, str, CheckRef | None, str]] = []
    if found.trial_bytes is not None:
        trial = load(Trial, found.trial_bytes, trial_path(rid))
        refs.append(
            (trial_path(rid), trial.prereg_sha256, trial.last_check, "last_check")
        )
    if found.activation_bytes is not None:
        done = load(Activation, found.activation_bytes, activation_path(rid))
        refs.append((activation_path(rid), done.prereg_sha256, done.check, "check"))
        trial_sha = sha256(found.trial_bytes) if found.trial_bytes else None
        if done.trial_sha256 != trial_sha:
            out.append((activation_path(rid), "$.trial_sha256"))
    for path, names, ref, key in refs:
        if names != prereg:
            out.append((path, "$.prereg_sha256"))
        if ref is not None and (
            ref.number > len(checks) or checks[ref.number - 1] != ref.sha256
        ):
            out.append((path, f"$.{key}.sha256"))
    return sorted(out)


def folder(snap: Snapshot, release_id: str) -> Folder:
    """Release ``release_id``'s records as of ``snap``."""
    check_id(release_id)
    return Folder(
        release_id=release_id,
        prereg_bytes=snap.read(prereg_path(release_id)),
        holdouts_bytes=snap.read(holdouts_path(release_id)),
        check_bytes=_checks(snap, release_id),
        trial_bytes=snap.read(trial_path(release_id)),
        activation_bytes=snap.read(activation_path(release_id)),
    )


def _checks(snap: Snapshot, release_id: str) -> list[bytes]:
    """Checks 001, 002, ... up to the first gap (the audit reports a gap)."""
    where = f"{folder_of(release_id)}/checks"
    if snap.tree is None:
        return []
    try:
        tree = snap.repo[snap.tree[where].id].peel(Tree)
    except (KeyError, ValueError, pygit2.GitError):
        return []
    numbers = {check_number(f"checks/{e.name}") for e in tree}
    out: list[bytes] = []
    while len(out) + 1 in numbers:
        data = snap.read(check_path(release_id, len(out) + 1))
        if data is None:
            break
        out.append(data)
    return out


# -- preregistering --------------------------------------------------------------------


@dataclass(frozen=True)
class PreregInputs:
    """What a person chooses when preregistering (the rest comes from the store)."""

    release_id: str
    run: str
    title: str
    template: str | None
    purpose: str | None
    created_at: str
    gates: GateSpec
    bounds: Bounds | None
    trial: TrialSpec


def inputs_of(prereg: Prereg) -> PreregInputs:
    """The choices a preregistration was made from (to recompute it)."""
    frozen = prereg.gates
    return PreregInputs(
        release_id=prereg.id,
        run=prereg.candidate.run,
        title=prereg.title,
        template=prereg.template,
        purpose=prereg.purpose,
        created_at=prereg.created_at,
        gates=GateSpec(
            metrics=frozen.metrics,
            no_regress=frozen.no_regress,
            holdouts=None
            if frozen.holdouts is None
            else HoldoutSpec(
                file=frozen.holdouts.file, metrics=frozen.holdouts.metrics
            ),
        ),
        bounds=prereg.training.bounds,
        trial=prereg.trial,
    )


def preregister(snap: Snapshot, inputs: PreregInputs, holdouts: bytes | None) -> Change:
    """release-new: freeze the gates against the run, eval set and baseline now."""
    from machine_git.train import runs

    release_id = check_id(inputs.release_id)
    if snap.read(prereg_path(release_id)) is not None:
        raise ReleaseError(
            f"{release_id} is already preregistered; its gates are frozen: "
            "preregister a new release id"
        )
    store = _store(snap)
    run = runs.read(store, inputs.run, snap.commit)
    if run is None:
        raise RunNotFoundError(f"no run {inputs.run!r} in the store")
    problems = bounds_problems(run, inputs.bounds)
    if problems:
        raise ReleaseError(
            f"run {run['id']} is outside {release_id}'s training bounds: "
            + "; ".join(problems)
        )
    checkpoint = candidate_checkpoint(run)
    dataset = run.get("dataset") or {}
    eval_pin = _eval_pin(snap, store, run)
    record = Prereg(
        id=release_id,
        title=inputs.title,
        template=inputs.template,
        purpose=inputs.purpose,
        created_at=inputs.created_at,
        candidate=Candidate(
            run=str(run["id"]),
            checkpoint=checkpoint,
            base_model=str(run["base_model"]),
            renderer=run.get("renderer"),
        ),
        training=Training(
            dataset_commit=dataset.get("commit"),
            export_sha256=dataset.get("sha256"),
            kind=dataset.get("kind"),
            rows=dataset.get("rows"),
            steps=run.get("steps_planned"),
            train_on_what=run.get("train_on_what"),
            hyperparameters=run.get("hyperparameters"),
            bounds=inputs.bounds,
        ),
        gates=Gates(
            metrics=inputs.gates.metrics,
            no_regress=inputs.gates.no_regress,
            holdouts=_frozen_holdouts(inputs.gates, holdouts),
            eval=eval_pin,
        ),
        trial=inputs.trial,
    )
    files: dict[str, bytes | None] = {prereg_path(release_id): record.dump()}
    if holdouts is not None:
        files[holdouts_path(release_id)] = holdouts
    return Change(
        summary=f"release new {release_id}: {record.title}",
        files=files,
        trailers={
            "Action": "release-new",
            "Release": release_id,
            "Run": record.candidate.run,
            "Dataset": str(dataset.get("commit")),
        },
    )


def _eval_pin(snap: Snapshot, store: Store, run: dict[str, Any]) -> EvalPin:
    """The eval set the run held out, where it was drawn, and its baseline now."""
    from machine_git.train import evals

    current = evals.active(store, snap.commit)
    if current is None:
        raise ReleaseError(
            "no eval set to gate on: draw one with 'machine train eval init' and "
            "record a baseline with 'machine train eval baseline --yes'"
        )
    held = (run.get("dataset") or {}).get("held_out_eval")
    if held != current["id"]:
        # Gating on rows the run may have trained on would prove nothing.
        raise ReleaseError(
            f"run {run['id']} held out {held or 'no eval set'}, but eval set "
            f"{current['id']} is in force: train a run against it first"
        )
    eval_id = str(current["id"])
    base_model = str(run["base_model"])
    path = evals.results_path(eval_id, base_model)
    blob = snap.read(path)
    if blob is None:
        raise ReleaseError(
            f"no baseline of {base_model} on eval set {eval_id}: record one first "
            "with 'machine train eval baseline --yes'"
        )
    results = jsonio.load_object(blob, path, ReleaseError)
    assert snap.commit is not None  # an eval set was found in its tree
    return EvalPin(
        id=eval_id,
        commit=str(last_change(snap.commit, evals.path_of(eval_id)).id),
        baseline=Baseline(
            model=base_model,
            path=path,
            blob=str(pygit2.hash(blob)),
            scores=dict(results.get("scores") or {}),
        ),
    )


def last_change(commit: Commit, path: str) -> Commit:
    """The commit at or before ``commit`` (first parents) that wrote ``path``."""
    current = commit
    here = _entry(current, path)
    while current.parents and _entry(current.parents[0], path) == here:
        current = current.parents[0]
    return current


def _entry(commit: Commit, path: str) -> pygit2.Oid | None:
    try:
        return commit.tree[path].id
    except KeyError:
        return None


def _frozen_holdouts(spec: GateSpec, data: bytes | None) -> FrozenHoldouts | None:
    if spec.holdouts is None:
        if data is not None:
            raise ReleaseError("holdouts were given but no gate uses them")
        return None
    name = spec.holdouts.file
    if data is None:
        raise ReleaseError(f"the holdouts file {name} is missing")
    cases = parse_holdouts(data, name)
    return FrozenHoldouts(
        file=name,
        metrics=spec.holdouts.metrics,
        sha256=sha256(data),
        cases=len(cases),
    )


def parse_holdouts(data: bytes, name: str) -> list[Case]:
    """Each line a case: ``{"id", "messages", "reference"}``; one line if bad."""
    out = []
    for number, line in inputs.numbered_lines(data):
        try:
            case = jsonio.loads(line)
        except jsonio.JSONDecodeError as e:
            raise ReleaseError(f"{name}:{number}: not valid JSON ({e})") from None
        if not (
            isinstance(case, dict)
            and isinstance(case.get("id"), str)
            and isinstance(case.get("messages"), list)
            and isinstance(case.get("reference"), str)
        ):
            raise ReleaseError(
                f"{name}:{number}: a holdout needs id, messages, reference"
            )
        out.append(Case(case["id"], "holdout", case["messages"], case["reference"]))
    return out


def bounds_problems(run: dict[str, Any], bounds: Bounds | None) -> list[str]:
    """How the run lies outside the training bounds; empty if it does not."""
    if bounds is None:
        return []
    hyper = run.get("hyperparameters") or {}
    dataset = run.get("dataset") or {}
    found: list[str] = []
    kind = dataset.get("kind")
    if bounds.kinds and kind not in bounds.kinds:
        found.append(f"kind {kind} is not one of {', '.join(bounds.kinds)}")
    for name in ("learning_rate", "lora_rank"):
        limits, value = getattr(bounds, name), hyper.get(name)
        if limits is not None and isinstance(value, int | float):
            low = value if limits.min is None else limits.min
            high = value if limits.max is None else limits.max
            if not low <= value <= high:
                found.append(f"{name} {value} outside [{limits.min}, {limits.max}]")
    steps, rows = run.get("steps_planned"), dataset.get("rows")
    if _above(steps, bounds.max_steps):
        found.append(f"{steps} steps planned > max_steps {bounds.max_steps}")
    if _above(bounds.min_rows, rows):
        found.append(f"{rows} rows < min_rows {bounds.min_rows}")
    if bounds.train_on_what and run.get("train_on_what") != bounds.train_on_what:
        found.append(
            f"train_on_what {run.get('train_on_what')} is not {bounds.train_on_what}"
        )
    return found


def _above(value: Any, limit: Any) -> bool:
    return isinstance(value, int) and isinstance(limit, int) and value > limit


def candidate_checkpoint(run: dict[str, Any]) -> str:
    """The run's last sampler checkpoint (the one a release can serve)."""
    samplers = [
        c.get("sampler_path")
        for c in run.get("checkpoints") or []
        if isinstance(c, dict) and c.get("sampler_path")
    ]
    if not samplers:
        raise ReleaseError(
            f"run {run['id']} has no sampler checkpoint yet "
            f"(status {run.get('status')}); "
            "train it with 'machine train run --yes' first"
        )
    return str(samplers[-1])


# -- checking --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cases:
    """What a check samples: the frozen eval set's cases, then the holdouts."""

    on_eval: list[Case]
    skipped: list[str]
    holdouts: list[Case]

    @property
    def all(self) -> list[Case]:
        return [*self.on_eval, *self.holdouts]


def cases(snap: Snapshot, release_id: str) -> Cases:
    """The cases of a release's check, all from what its preregistration froze."""
    from machine_git.train import evals

    found = folder(snap, release_id)
    pin = found.prereg().gates.eval
    store = _store(snap)
    try:
        at = store.repo.revparse_single(pin.commit).peel(Commit)
    except (KeyError, ValueError, pygit2.GitError):
        raise ReleaseError(f"the eval commit {pin.commit[:12]} is missing") from None
    data = store.snapshot(at).read(evals.path_of(pin.id))
    if data is None:
        raise ReleaseError(f"eval set {pin.id} is not at {pin.commit[:12]}")
    eval_set = jsonio.load_object(data, evals.path_of(pin.id), ReleaseError)
    on_eval, skipped = evals.cases(store, eval_set)
    held = found.holdouts_bytes
    return Cases(
        on_eval,
        skipped,
        [] if held is None else parse_holdouts(held, holdouts_path(release_id)),
    )


def check(
    snap: Snapshot,
    release_id: str,
    samples: list[Sample],
    created_at: str,
    sampling: Sampling,
) -> Change:
    """release-check: judge the answers on the frozen gates, as check N+1."""
    found = folder(snap, release_id)
    prereg = found.prereg()
    assert found.prereg_bytes is not None
    todo = cases(snap, release_id)
    if len(samples) != len(todo.all):
        raise ReleaseError(
            f"{len(samples)} answers for {len(todo.all)} cases of {release_id}"
        )
    pin = prereg.gates.eval.baseline
    try:
        blob = snap.repo[pin.blob].peel(pygit2.Blob).data
    except (KeyError, ValueError, pygit2.GitError):
        raise ReleaseError(f"the frozen baseline {pin.blob[:12]} is missing") from None
    baseline = jsonio.load_object(blob, pin.path, ReleaseError)
    verdict = gates.judge(prereg, todo.on_eval, todo.holdouts, samples, baseline)
    number = len(found.check_bytes) + 1
    previous = found.last_check()
    record = Check(
        release=release_id,
        number=number,
        created_at=created_at,
        checkpoint=prereg.candidate.checkpoint,
        prereg_sha256=sha256(found.prereg_bytes),
        previous_sha256=None if previous is None else previous.sha256,
        sampling=sampling,
        eval=EvalUsed(
            id=prereg.gates.eval.id,
            commit=prereg.gates.eval.commit,
            skipped=todo.skipped,
        ),
        passed=verdict.passed,
        gates=verdict.gates,
        cases=verdict.cases,
        holdouts=verdict.holdouts,
    )
    passed = sum(g.passed for g in verdict.gates)
    result = "pass" if verdict.passed else "fail"
    return Change(
        summary=(
            f"release check {release_id}: {result} "
            f"({passed}/{len(verdict.gates)} gates)"
        ),
        files={check_path(release_id, number): record.dump()},
        trailers={"Action": "release-check", "Release": release_id, "Result": result},
    )


# -- trial and activation --------------------------------------------------------------


def trial(snap: Snapshot, release_id: str, at: str) -> Change:
    """release-trial: the candidate becomes the student, marked trial."""
    found = folder(snap, release_id)
    prereg = found.prereg()
    assert found.prereg_bytes is not None
    if found.activation_bytes is not None:
        raise AlreadyDone(release_id, "active", activation_path(release_id))
    if found.trial_bytes is not None:
        raise AlreadyDone(release_id, "on trial", trial_path(release_id))
    _require_pass(found, "tried")
    record = Trial(
        release=release_id,
        at=at,
        checkpoint=prereg.candidate.checkpoint,
        prereg_sha256=sha256(found.prereg_bytes),
        last_check=found.last_check(),
    )
    return _student(snap, prereg, record.dump(), trial_path(release_id), TRIAL)


def activate(snap: Snapshot, release_id: str, at: str) -> Change:
    """release-activate: only after a passing last check and a trial."""
    found = folder(snap, release_id)
    prereg = found.prereg()
    assert found.prereg_bytes is not None
    if found.activation_bytes is not None:
        raise AlreadyDone(release_id, "active", activation_path(release_id))
    last = _require_pass(found, "activated")
    if found.trial_bytes is None:
        raise ReleaseError(
            f"{release_id} has no trial: run 'machine release trial {release_id}' first"
        )
    record = Activation(
        release=release_id,
        at=at,
        checkpoint=prereg.candidate.checkpoint,
        prereg_sha256=sha256(found.prereg_bytes),
        check=last,
        trial_sha256=sha256(found.trial_bytes),
    )
    path = activation_path(release_id)
    return _student(snap, prereg, record.dump(), path, ACTIVATE)


def _require_pass(found: Folder, verb: str) -> CheckRef:
    """The last check, which passed: a trial and an activation rest on it."""
    release_id = found.release_id
    done = found.checks()
    last = found.last_check()
    if not done or last is None:
        raise ReleaseError(
            f"{release_id} has not been checked: "
            f"run 'machine release check {release_id} --yes'"
        )
    if not done[-1].passed:
        failed = ", ".join(g.name for g in done[-1].gates if not g.passed)
        raise ReleaseError(
            f"{release_id} failed its gates in check {done[-1].number} ({failed}); "
            f"it cannot be {verb}"
        )
    return last


def _student(
    snap: Snapshot, prereg: Prereg, record: bytes, path: str, step: str
) -> Change:
    data = snap.read(settings.SETTINGS)
    try:
        stored: Any = jsonio.loads(data) if data else {}
    except jsonio.JSONDecodeError:
        stored = {}
    checkpoint = prereg.candidate.checkpoint
    values = {
        **(stored if isinstance(stored, dict) else {}),
        "student": checkpoint,
        "chat": "student",
        "student_release": prereg.id,
        "student_status": "trial" if step == TRIAL else "default",
    }
    return Change(
        summary=f"release {step} {prereg.id}: {checkpoint}",
        files={path: record, settings.SETTINGS: jsonio.canonical(values)},
        trailers={
            "Action": f"release-{step}",
            "Release": prereg.id,
            "Checkpoint": checkpoint,
        },
    )


def _store(snap: Snapshot) -> Store:
    from pathlib import Path

    return Store(Path(snap.repo.path), snap.repo)

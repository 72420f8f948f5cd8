"""``machine release ...`` and ``machine lineage``: gated behavior releases."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import click

from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.core.errors import FAILED
from machine_git.core.errors import INVALID
from machine_git.core.errors import UsageError

if TYPE_CHECKING:
    from machine_git.releases import Stepped
    from machine_git.store.store import Store


@click.group()
def release() -> None:
    """Preregister, check, try and activate a checkpoint as a behavior release.

    \b
    Example usage:
        machine release new BR-001 --template pi-file-repair --run RUN
        machine release check BR-001 --yes
        machine release trial BR-001
        machine release activate BR-001
    """


@release.command(name="new")
@click.argument("release_id")
@click.option("--run", "run_id", help="The training run (default: the newest).")
@click.option("--title", help="What the release is for.")
@click.option(
    "--gates",
    "gates_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A JSON file of gates (metrics, no_regress, holdouts).",
)
@click.option("--template", help="A shipped preregistration (pi-file-repair).")
@project_option
@json_option
def release_new(
    release_id: str,
    run_id: str | None,
    title: str | None,
    gates_file: Path | None,
    template: str | None,
    project: Path | None,
    as_json: bool,
) -> None:
    """Preregister a release before any result exists; its gates are then frozen.

    \b
    Example usage:
        machine release new BR-001 --template pi-file-repair --run traces-1a2b-0f9e
        machine release new BR-002 --run RUN --gates gates.json --title "terser"
    """
    from machine_git import releases

    store = open_store(project)
    record, commit = releases.new(
        store,
        releases.check_id(release_id),
        run_id,
        title=title,
        gates_file=gates_file,
        template=template,
    )
    _elsewhere(store)
    if as_json:
        emit_json({**record.model_dump(mode="json"), "commit": commit})
        return
    gates = record.gates
    holdouts = gates.holdouts
    click.echo(f"preregistered {release_id}: {record.title} ({commit[:12]})")
    click.echo(
        f"  candidate  {record.candidate.checkpoint} (run {record.candidate.run})"
    )
    click.echo(f"  data       {str(record.training.dataset_commit)[:12]}")
    click.echo(
        f"  gates      eval {gates.eval.id} at {gates.eval.commit[:12]}, "
        f"{len(gates.metrics)} metric gates"
        + (", no regressions" if gates.no_regress else "")
        + (f", {holdouts.cases} holdouts" if holdouts else "")
    )


@release.command(name="check")
@click.argument("release_id")
@click.option(
    "--yes", is_flag=True, help="Confirm: this calls the Tinker API (billed)."
)
@click.option(
    "--max-tokens", type=click.IntRange(min=1), default=1024, show_default=True
)
@project_option
@json_option
def release_check(
    release_id: str, yes: bool, max_tokens: int, project: Path | None, as_json: bool
) -> None:
    """Sample the candidate on its frozen gates and holdouts; record pass or fail.

    \b
    Example usage:
        machine release check BR-001 --yes
    """
    from machine_git import releases

    releases.check_id(release_id)
    if not yes:
        raise UsageError(
            f"machine release check {release_id} calls the Tinker API, "
            "which is billed: "
            "add --yes"
        )
    from machine_git.train import stack

    stack.require()
    from machine_git.train import preflight
    from machine_git.train import rendering
    from machine_git.train import sampling

    store = open_store(project)
    record = releases.frozen(store, release_id)
    releases.require_signer(store)  # before the billed sampling, not after
    candidate = record.candidate
    seen = rendering.rendering(candidate.base_model, candidate.renderer)
    info = preflight.check(candidate.base_model, "sample")
    click.echo(f"tinker ok: {info.base_url} ({info.seconds:.1f} s)", err=True)

    def sample(cases: list[Any], base: str, checkpoint: str) -> list[dict[str, Any]]:
        return sampling.sample(
            cases, seen, base_model=base, model_path=checkpoint, max_tokens=max_tokens
        )

    result, commit = releases.check(store, release_id, sample, max_tokens)
    _elsewhere(store)
    if as_json:
        emit_json({**result.model_dump(mode="json"), "commit": commit})
    else:
        verdict = "PASS" if result.passed else "FAIL"
        click.echo(f"{release_id} check {result.number}: {verdict} ({commit[:12]})")
        for gate in result.gates:
            mark = "pass" if gate.passed else "FAIL"
            click.echo(f"  {mark}  {gate.name}: {gate.detail}")
            for case in gate.regressed:
                click.echo(
                    f"        {case.row}: baseline {_short(case.baseline)} -> "
                    f"candidate {_short(case.candidate)} "
                    f"(want {_short(case.reference)})"
                )
    if not result.passed:
        raise click.exceptions.Exit(FAILED)


@release.command(name="trial")
@click.argument("release_id")
@project_option
@json_option
def release_trial(release_id: str, project: Path | None, as_json: bool) -> None:
    """Record an explicit trial: the candidate becomes this project's student, as trial.

    \b
    Example usage:
        machine release trial BR-001
    """
    from machine_git import releases

    store = open_store(project)
    done = releases.trial(store, releases.check_id(release_id))
    _elsewhere(store)
    _show_step(
        release_id,
        "trial",
        done,
        as_json,
        f"trial {release_id}: the student is its candidate, marked trial",
    )


@release.command(name="activate")
@click.argument("release_id")
@project_option
@json_option
def release_activate(release_id: str, project: Path | None, as_json: bool) -> None:
    """Make the candidate the default student: only if every gate passed after a trial.

    \b
    Example usage:
        machine release activate BR-001
    """
    from machine_git import releases

    store = open_store(project)
    done = releases.activate(store, releases.check_id(release_id))
    _elsewhere(store)
    _show_step(
        release_id,
        "active",
        done,
        as_json,
        f"activated {release_id}: the default student",
    )


def _elsewhere(store: Store, warning: bool = True) -> None:
    """Every release command reports tampered signed records outside releases
    (runs, the student, signers): never used, always said."""
    from machine_git import releases

    for tamper in releases.audit_store(store).elsewhere():
        click.echo(f"{'warning: ' if warning else ''}tampered: {tamper}", err=warning)


def _show_step(
    release_id: str, status: str, done: Stepped, as_json: bool, text: str
) -> None:
    # trial and activate report alike: the commit made, or why none was.
    if as_json:
        emit_json(
            {
                "release": release_id,
                "status": status,
                "commit": done.commit,
                "already": done.already,
            }
        )
    elif done.commit is None:
        click.echo(done.already)
    else:
        click.echo(f"{text} ({done.commit[:12]})")


@release.command(name="list")
@project_option
@json_option
def release_list(project: Path | None, as_json: bool) -> None:
    """List releases with their state.

    \b
    Example usage:
        machine release list
    """
    from machine_git import releases

    store = open_store(project)
    found = releases.listing(store)
    if as_json:
        emit_json([item.to_json() for item in found])
        return
    if not found:
        click.echo("no releases yet (machine release new BR-001 --run RUN)")
    for item in found:
        run = item.prereg.candidate.run if item.prereg else "-"
        gone = "(preregistration unreadable)" if item.unreadable else "(no prereg.json)"
        title = item.prereg.title if item.prereg else gone
        click.echo(f"{item.id}  {item.status:<13} {run}  {title}")
    _elsewhere(store, warning=False)


@release.command(name="show")
@click.argument("release_id")
@project_option
@json_option
def release_show(release_id: str, project: Path | None, as_json: bool) -> None:
    """Show a release: preregistration, state and checks.

    \b
    Example usage:
        machine release show BR-001
    """
    from machine_git import releases
    from machine_git.core import jsonio

    store = open_store(project)
    found = releases.show(store, releases.check_id(release_id))
    if as_json:
        emit_json(found.to_json())
    else:
        if found.prereg is not None:
            click.echo(jsonio.canonical(found.prereg.model_dump(mode="json")), nl=False)
        for item in found.checks:
            verdict = {True: "pass", False: "fail"}.get(item["passed"], "unreadable")
            click.echo(f"check {item['number']}: {verdict}")
        click.echo(f"state: {found.status}")
        for line in found.tampered:
            click.echo(f"tampered: {line}")
        _elsewhere(store, warning=False)
    if found.tampered:
        raise click.exceptions.Exit(INVALID)


@click.command()
@click.argument("what")
@click.option("--rows", "with_rows", is_flag=True, help="List the row ids too.")
@project_option
@json_option
def lineage(what: str, with_rows: bool, project: Path | None, as_json: bool) -> None:
    """Trace a release, run or checkpoint back to its data and evals.

    \b
    Example usage:
        machine lineage BR-001
        machine lineage tinker://RUN/sampler_weights/final --rows
    """
    from machine_git.releases import lineage as tracing

    store = open_store(project)
    found = tracing.trace(store, what, with_rows)
    _elsewhere(store)
    if as_json:
        emit_json(found)
        return
    if found["release"]:
        r = found["release"]
        checks = ", ".join(
            f"check {c['number']} {'pass' if c['passed'] else 'fail'}"
            for c in r["checks"]
        )
        click.echo(
            f"release    {r['id']} {r['title']} "
            f"({r['status']}; {checks or 'unchecked'})"
        )
    run = found["run"]
    click.echo(
        f"run        {run['id']} ({run['status']}, {run['steps']} steps, "
        f"{run['base_model']}, {run['train_on_what']})"
    )
    click.echo(f"checkpoint {found['checkpoint'] or '(none yet)'}")
    data = found["dataset"]
    sha = str(data["export_sha256"] or "")[:12]
    click.echo(f"dataset    {data['commit'][:12]} (export sha256 {sha}…)")
    counts = ", ".join(f"{k} {n}" for k, n in data["counts"].items())
    kind = f"{data['kind']} row"
    held = (
        f" ({data['held_out_rows']} held out for {data['held_out_eval']})"
        if data["held_out_eval"]
        else ""
    )
    done = data["trained"]
    if done is None:
        click.echo(
            f"rows       {tracing.UNKNOWN}; {_count(data['exported_rows'], kind)} "
            f"exported{held}; store: {counts}"
        )
    else:
        click.echo(
            f"rows       {_count(done['rows'], kind)} trained of "
            f"{data['exported_rows']} exported{held}; store: {counts}"
        )
        for epoch in done["epochs"]:
            click.echo(
                f"epoch {epoch.get('epoch')}    {_count(epoch.get('rows'), 'row')}, "
                f"{epoch.get('tokens')} tokens, {_count(epoch.get('steps'), 'step')} "
                f"(seed {epoch.get('seed')})"
            )
    made = ", ".join(f"{n} {a}" for a, n in data["history"].items())
    click.echo(f"made by    {made}")
    ev = found["eval"]
    if ev and "baseline" in ev:
        base = ev["baseline"]
        scores = base["scores"] or {}
        click.echo(
            f"eval       {ev['id']} at {ev['commit'][:12]}: baseline {base['model']} "
            f"exact {_pct(scores.get('exact'))}, "
            f"normalized {_pct(scores.get('normalized'))} "
            f"(frozen in {base['frozen_in']}, blob {base['blob'][:12]})"
        )
    elif ev:
        scores = "; ".join(
            f"{r['model']}: exact {_pct(r['scores']['exact'])}, "
            f"normalized {_pct(r['scores']['normalized'])}"
            for r in ev["results"]
        )
        click.echo(
            f"eval       {ev['id']} at {ev['commit'][:12]}: {scores or 'no results'}"
        )
    for row in data.get("rows") or []:
        click.echo(f"  {row['id']}  {row['role']}")


def _count(n: Any, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _short(value: Any, limit: int = 40) -> str:
    text = " ".join(str(value).split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _pct(value: Any) -> str:
    return "-" if value is None else f"{float(value) * 100:.1f}%"


# -- machine release signers ---------------------------------------------------------


@release.group(invoke_without_command=True)
@project_option
@json_option
@click.pass_context
def signers(ctx: click.Context, project: Path | None, as_json: bool) -> None:
    """Who may sign release records, run records and the student of this store.

    Without a subcommand: the allowed signers (the store's allowed_signers
    file), yours and the first one (trusted on first use) marked.

    \b
    Example usage:
        machine release signers
        machine release signers key        # your public key, to send a signer
        machine release signers add bob "ssh-ed25519 AAAA..."
        machine release signers adopt      # records written before signing
    """
    if ctx.invoked_subcommand is not None:
        return
    from machine_git import releases
    from machine_git.releases import trust

    store = open_store(project)
    found = trust.listing(store)
    if as_json:
        emit_json([s.to_json() for s in found])
        return
    if not found:
        click.echo("no signers yet: the first signed record trusts your key")
    for listed in found:
        click.echo(listed.line())
    notes: dict[str, int] = {}
    for note in releases.audit_store(store).adopted.values():
        notes[note] = notes.get(note, 0) + 1
    for note, n in notes.items():  # "adopted by NAME in commit C"
        click.echo(f"{n} commits written before signing: {note}")


@signers.command(name="key")
@project_option
@json_option
def signers_key(project: Path | None, as_json: bool) -> None:
    """Print your signing key (made on first use), for a signer to add.

    \b
    Example usage:
        machine release signers key
    """
    from machine_git.cli.common import existing_store
    from machine_git.releases import trust

    mine = trust.own(existing_store(project))
    if as_json:
        emit_json({"name": mine.name, "key": mine.key, "fingerprint": mine.fingerprint})
        return
    click.echo(f"{mine.name} {mine.key}")


@signers.command(name="add")
@click.argument("name")
@click.argument("key")
@project_option
@json_option
def signers_add(name: str, key: str, project: Path | None, as_json: bool) -> None:
    """Allow a teammate's key to sign (one commit, signed by you).

    KEY is the line 'machine release signers key' printed on their machine, or the
    path of their .pub file.

    \b
    Example usage:
        machine release signers add bob "ssh-ed25519 AAAAC3Nza..."
    """
    from machine_git.releases import trust

    text = key
    if "ssh-" not in key and "ecdsa-" not in key and Path(key).is_file():
        text = Path(key).read_text(errors="replace")
    signer, commit = trust.add(open_store(project), name, text)
    message = (
        f"{name} may already sign ({signer.fingerprint}); nothing changed"
        if commit is None
        else f"added signer {name} ({signer.fingerprint}) ({commit[:12]})"
    )
    if as_json:
        emit_json({"name": name, "fingerprint": signer.fingerprint, "commit": commit})
        return
    click.echo(message)


@signers.command(name="adopt")
@click.option("--yes", is_flag=True, help="Adopt them (one commit, signed by you).")
@project_option
@json_option
def signers_adopt(yes: bool, project: Path | None, as_json: bool) -> None:
    """Vouch for the unsigned records a store holds from before signing.

    Lists each unsigned commit that writes release or run records (or the
    student); with --yes, one commit signed by you records them (by commit
    and tree id), and the audit accepts exactly those. Only commits older
    than the store's first signed commit can be adopted: anything unsigned
    after it is a forgery.

    \b
    Example usage:
        machine release signers adopt          # review the list
        machine release signers adopt --yes
    """
    from machine_git import releases
    from machine_git.core.errors import TamperedReleaseError
    from machine_git.releases import adoption

    store = open_store(project)
    found = releases.audit_store(store)
    listed = adoption.review(
        store, [(t.file, t.commit, t.message) for t in found.tampered]
    )
    refused = [u for u in listed if u.refused is not None]
    commit = None
    if yes and listed and not refused:
        commit = adoption.adopt(store, [u.entry for u in listed])
    if as_json:
        emit_json(
            {
                "unsigned": [
                    {**u.entry.to_json(), "refused": u.refused} for u in listed
                ],
                "commit": commit,
            }
        )
    else:
        for u in listed:
            tail = "" if u.refused is None else f"  (not adoptable: {u.refused})"
            click.echo(f"{u.entry.commit[:12]}  {', '.join(u.entry.wrote)}{tail}")
    if refused:
        raise TamperedReleaseError(
            f"commit {refused[0].entry.commit[:12]} cannot be adopted: "
            f"{refused[0].refused}; nothing was adopted"
        )
    if as_json:
        return
    if not listed:
        click.echo("nothing to adopt: every signed record is signed")
    elif commit is not None:
        click.echo(f"adopted {len(listed)} commits, signed by you ({commit[:12]})")
    elif not yes:
        click.echo(f"to vouch for these {len(listed)} commits: add --yes")

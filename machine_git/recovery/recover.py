"""Getting a damaged store back: the newest intact commit, as a recorded step.

:func:`recover` looks first (diagnosis.py), then, confirmed and under the
writer lock, builds the index of a pack whose index alone is damaged, looks
again, and takes the step (repair.py): the small files repaired, damaged
objects set aside (salvage.py), the intact tree committed. Restoring from a remote
is sync/restore.py (it fetches). The diagnosis and its lines are
used from here by the commands, so they are exported here too.
"""

from __future__ import annotations

from pathlib import Path

from machine_git.core.errors import DamagedStoreError
from machine_git.recovery.diagnosis import Diagnosis
from machine_git.recovery.diagnosis import describe
from machine_git.recovery.diagnosis import diagnose
from machine_git.recovery.diagnosis import way_out
from machine_git.recovery.repair import Recovery
from machine_git.recovery.repair import apply
from machine_git.recovery.salvage import keep_file
from machine_git.recovery.salvage import new_record
from machine_git.store import packs
from machine_git.store.locking import writer_lock

__all__ = [
    "Diagnosis",
    "Recovery",
    "describe",
    "diagnose",
    "recover",
    "way_out",
]


def recover(path: Path, confirm: bool = False) -> Recovery:
    """Go back to the newest intact commit; with ``confirm`` False, only say how."""
    found = diagnose(path, thorough=True)
    if not confirm:
        # An index that does not read hides its pack's objects: recover
        # builds it again first and only then knows what is intact.
        return Recovery(found if found.rebuildable else _refuse_if_lost(path, found))
    with writer_lock(path):
        found = diagnose(path, thorough=True)
        record = None
        if found.rebuildable:
            record = new_record(path)
            for pack in found.rebuildable:
                keep_file(Path(pack).with_suffix(".idx"), record / "packs")
                packs.rebuild_index(Path(pack))
            found = diagnose(path, thorough=True)
        _refuse_if_lost(path, found)
        if not found.damaged:
            return Recovery(found, record=str(record) if record else None)
        assert found.intact is not None  # _refuse_if_lost
        return apply(path, found, found.intact.commit, found.parent, record=record)


def _refuse_if_lost(path: Path, found: Diagnosis) -> Diagnosis:
    if found.damaged and found.intact is None:
        raise DamagedStoreError(
            f"damaged store {path}: {found.problems[0]}, and no commit it has "
            "been at is intact; nothing to go back to (restore it from a "
            "remote: machine recover --from REMOTE)"
        )
    return found

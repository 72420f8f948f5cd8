"""SSH signatures as git makes and checks them: machine's and ssh-keygen's agree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from machine_git.core.errors import UsageError
from machine_git.store import signing
from machine_git.store.signing import Signer
from machine_git.store.store import Change
from machine_git.store.store import Store


def keygen(path: Path, kind: str = "ed25519") -> Signer:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True
    )
    return Signer(path.name, signing.parse_key(path.with_suffix(".pub").read_text()))


def ssh_sign(key: Path, payload: bytes) -> bytes:
    done = subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-n", "git", "-f", str(key)],
        input=payload,
        capture_output=True,
        check=True,
    )
    return done.stdout


def ssh_verify(signer: Signer, payload: bytes, armored: bytes, tmp: Path) -> bool:
    allowed, sig = tmp / "allowed", tmp / "sig"
    allowed.write_bytes(signing.render_signers([signer]))
    sig.write_bytes(armored)
    done = subprocess.run(
        [
            *("ssh-keygen", "-Y", "verify", "-n", "git", "-f", str(allowed)),
            *("-I", signer.name, "-s", str(sig)),
        ],
        input=payload,
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
def test_machine_and_ssh_keygen_agree_on_every_signature(
    tmp_path: Path, kind: str
) -> None:
    # ed25519 is checked in-process, other keys through ssh-keygen itself.
    key = tmp_path / "alice"
    alice = keygen(key, kind)
    mallory = keygen(tmp_path / "mallory")
    payload = b"tree 0123\n\nrelease check BR-001: pass\n"
    armored = ssh_sign(key, payload)
    cases = [
        (payload, [alice], ""),
        (payload + b"x", [alice], "whose signature by alice does not verify"),
        (payload, [mallory], f"signed by {alice.fingerprint}, which is not"),
    ]
    for data, allowed, why in cases:
        signer, said = signing.verify(data, armored, allowed)
        assert said.startswith(why) and (signer is not None) == (why == "")
        assert ssh_verify(alice, data, armored, tmp_path) == (data == payload)
    other = ssh_sign(key, b"another commit")
    assert signing.verify(payload, other, [alice])[0] is None
    assert signing.verify(payload, b"not a signature", [alice]) == (
        None,
        "whose signature is not an SSH signature",
    )


def test_a_signed_store_commit_is_what_git_verify_commit_accepts(
    tmp_path: Path,
) -> None:
    store = Store.create(tmp_path / "s")
    oid = store.write(
        lambda snap: Change("student x", {"settings.json": b'{"student": "x"}\n'})
    )
    assert oid is not None
    commit = store.repo[oid].peel(pygit2.Commit)
    signature, payload = signing.split_commit(commit.read_raw())
    assert signature is not None
    listed_blob = store.repo[commit.tree["allowed_signers"].id].peel(pygit2.Blob)
    allowed = signing.parse_signers(listed_blob.data)
    assert [s.name for s in allowed] == ["test@example.com"]
    assert signing.verify(payload, signature, allowed)[0] == allowed[0]
    listed = tmp_path / "allowed"
    listed.write_bytes(signing.render_signers(allowed))
    done = subprocess.run(
        [
            *("git", "-C", str(store.path)),
            *("-c", f"gpg.ssh.allowedSignersFile={listed}", "verify-commit", str(oid)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The key: made once, outside the store, private.
    key = signing.key_path()
    assert key.parent == Path(os.environ["MACHINE_DATA_DIR"]) / "keys"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert oct(key.parent.stat().st_mode & 0o777) == "0o700"
    # A setting that leaves the student alone is not signed.
    plain = store.write(lambda snap: Change("auto", {"x.json": b"{}\n"}))
    assert plain is not None
    assert signing.split_commit(store.repo[plain].read_raw())[0] is None


def test_names_and_keys_are_checked() -> None:
    with pytest.raises(UsageError, match="not an SSH public key"):
        signing.parse_key("ssh-ed25519 bm90IGEga2V5")
    with pytest.raises(UsageError, match="bad signer name"):
        signing.check_name("bob smith")
    assert signing.parse_signers(b"# a comment\nbob nonsense\n\n") == []

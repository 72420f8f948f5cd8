"""Signed records: git's own SSH signatures on what a release rests on.

Every commit that changes ``releases/``, ``runs/``, ``settings.json`` or
``allowed_signers`` is signed the way ``git commit -S`` signs with
``gpg.format=ssh``: an SSHSIG (namespace ``git``) of the commit's bytes, in
its ``gpgsig`` header, so ``git verify-commit`` checks it with
``gpg.ssh.allowedSignersFile`` pointed at the store's ``allowed_signers``.
The key is this user's, made on first use outside every store
(``<data dir>/keys/signing_ed25519``, 0600, folder 0700) with ``ssh-keygen``
(Debian's openssh-client), which also signs and verifies: the same program
git runs, so what machine accepts git accepts.

``allowed_signers`` is a file of the store's tree, in git's format
(``NAME namespaces="git" ssh-ed25519 AAAA...``). The first signed commit of a
store adds it with its signer's key (trusted on first use); after that it is
changed only by a commit signed by a key it already lists. Who signed is
checked when history is read (``audit.py``), by every command.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from machine_git.core import paths
from machine_git.core.errors import SigningError
from machine_git.core.errors import UntrustedSignerError
from machine_git.core.errors import UsageError

if TYPE_CHECKING:
    from machine_git.store.store import Change
    from machine_git.store.store import Snapshot

SIGNERS = "allowed_signers"
# Unsigned records written before signing, vouched for by a signer
# (releases/adoption.py).
ADOPTED = "adopted.json"
# The top-level entries whose changes must be signed.
PROTECTED = ("releases", "runs", "settings.json", SIGNERS, ADOPTED)
STUDENT_KEYS = ("student", "student_release", "student_status")
NAMESPACE = "git"
KEY_FOLDER = "keys"
KEY_NAME = "signing_ed25519"
_TIMEOUT = 30.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")
_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
_ARMOR = re.compile(
    rb"-----BEGIN SSH SIGNATURE-----\s*(.*?)\s*-----END SSH SIGNATURE-----", re.S
)


def protected(path: str) -> bool:
    """Is ``path`` (a file of the store's tree) one whose changes are signed?"""
    return path.split("/", 1)[0] in PROTECTED


@dataclass(frozen=True)
class Signer:
    """One allowed signer: a name and a public key (``TYPE BASE64``)."""

    name: str
    key: str

    @property
    def blob(self) -> bytes:
        return base64.b64decode(self.key.split()[1])

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.blob)

    def line(self) -> str:
        return f'{self.name} namespaces="{NAMESPACE}" {self.key}'


def fingerprint(blob: bytes) -> str:
    """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode()
    return f"SHA256:{digest.rstrip('=')}"


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise UsageError(
            f"bad signer name {name!r}: letters, digits and . _ @ + - (e.g. alice)"
        )
    return name


def parse_key(text: str) -> str:
    """``TYPE BASE64`` from a public key line (a ``.pub`` file's text), or an error."""
    words = text.split()
    for n, word in enumerate(words[:-1]):
        if word in _KEY_TYPES:
            try:
                blob = base64.b64decode(words[n + 1], validate=True)
            except (binascii.Error, ValueError):
                break
            try:
                named = _string(blob, 0)[0]
            except ValueError:
                break
            if named == word.encode():
                return f"{word} {words[n + 1]}"
            break
    raise UsageError(
        "not an SSH public key: expected 'ssh-ed25519 AAAA...' "
        "(what 'machine release signers key' prints)"
    )


def parse_signers(data: bytes | None) -> list[Signer]:
    """The signers of an ``allowed_signers`` file (lines it cannot read are none)."""
    out: list[Signer] = []
    for raw in (data or b"").decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name = line.split()[0]
        try:
            out.append(Signer(name, parse_key(line[len(name) :])))
        except UsageError:
            continue
    return out


def render_signers(signers: list[Signer]) -> bytes:
    return "".join(f"{s.line()}\n" for s in signers).encode()


# -- this user's key -------------------------------------------------------------------


def key_path() -> Path:
    return paths.data_dir() / KEY_FOLDER / KEY_NAME


def own_key(name: str) -> Signer:
    """This user's signing key (made on first use), as signer ``name``."""
    path = key_path()
    if not path.exists():
        _make_key(path)
    try:
        text = path.with_name(f"{KEY_NAME}.pub").read_text()
    except OSError as e:
        raise SigningError(f"cannot read {path}.pub: {e.strerror}") from None
    return Signer(safe_name(name), parse_key(text))


def safe_name(name: str) -> str:
    """A signer name from an email or user name (``alice@example.com``)."""
    cleaned = re.sub(r"[^A-Za-z0-9._@+-]+", "-", name).strip("-.") or "machine"
    return cleaned[:100]


def _make_key(path: Path) -> None:
    old = os.umask(0o077)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.parent.chmod(0o700)
        tmp = path.with_name(f".{KEY_NAME}.{os.getpid()}")
        for leftover in (tmp, tmp.with_name(f"{tmp.name}.pub")):
            leftover.unlink(missing_ok=True)
        _ssh_keygen(
            ["-q", "-t", "ed25519", "-N", "", "-C", "machine", "-f", str(tmp)], b""
        )
        tmp.chmod(0o600)
        # The public half first: a key file without it is never left behind.
        os.replace(tmp.with_name(f"{tmp.name}.pub"), path.with_name(f"{KEY_NAME}.pub"))
        os.replace(tmp, path)
    except OSError as e:
        raise SigningError(f"cannot create the signing key {path}: {e}") from None
    finally:
        os.umask(old)


def sign(payload: bytes) -> str:
    """The armored SSH signature of ``payload`` with this user's key."""
    path = key_path()
    done = _ssh_keygen(["-Y", "sign", "-n", NAMESPACE, "-f", str(path)], payload)
    return done.stdout.decode()


def _ssh_keygen(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    try:
        done = subprocess.run(
            ["ssh-keygen", *args],
            input=stdin,
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
            env=env,
        )
    except FileNotFoundError:
        raise SigningError(
            "ssh-keygen is missing: install OpenSSH (Debian: openssh-client) "
            "to sign release records"
        ) from None
    except subprocess.TimeoutExpired:
        raise SigningError(f"ssh-keygen took over {_TIMEOUT:.0f}s") from None
    if done.returncode != 0 and args[:2] != ["-Y", "verify"]:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"exit {done.returncode}"
        raise SigningError(f"ssh-keygen failed: {why}")
    return done


# -- verifying -------------------------------------------------------------------------


def split_commit(raw: bytes) -> tuple[bytes | None, bytes]:
    """A commit object's ``gpgsig`` value and the bytes it signs (the rest).

    Parsed here, as git does: pygit2's ``gpg_signature`` can hand back a
    payload with bytes past its end.
    """
    head, sep, body = raw.partition(b"\n\n")
    kept: list[bytes] = []
    signature: list[bytes] | None = None
    inside = False
    for line in head.split(b"\n"):
        if inside and line.startswith(b" "):
            assert signature is not None
            signature.append(line[1:])
            continue
        inside = False
        if line.startswith(b"gpgsig ") and signature is None:
            signature, inside = [line[len(b"gpgsig ") :]], True
            continue
        kept.append(line)
    payload = b"\n".join(kept) + sep + body
    return (None if signature is None else b"\n".join(signature)), payload


def signer_key(armored: bytes) -> tuple[bytes, str] | None:
    """The public key blob an SSH signature names, and its namespace."""
    found = _ARMOR.search(armored)
    if found is None:
        return None
    try:
        raw = base64.b64decode(b"".join(found.group(1).split()), validate=True)
        if not raw.startswith(b"SSHSIG"):
            return None
        blob, at = _string(raw, 10)  # magic, then a uint32 version
        namespace, _ = _string(raw, at)
    except (binascii.Error, ValueError, IndexError):
        return None
    return blob, namespace.decode("utf-8", "replace")


def _ed25519(payload: bytes, armored: bytes, blob: bytes) -> bool | None:
    """An ed25519 SSH signature checked in-process (what ``ssh-keygen -Y
    verify`` checks, a thousand times faster); None for other key types.

    The signed bytes are SSHSIG's: the magic, then the namespace, reserved
    field, hash name and the message's hash, each a length-prefixed string.
    """
    found = _ARMOR.search(armored)
    if found is None or _string(blob, 0)[0] != b"ssh-ed25519":
        return None
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        raw = base64.b64decode(b"".join(found.group(1).split()), validate=True)
        at = 10  # "SSHSIG", then a uint32 version
        _, at = _string(raw, at)  # the public key (matched by the caller)
        namespace, at = _string(raw, at)
        reserved, at = _string(raw, at)
        algorithm, at = _string(raw, at)
        wrapped, at = _string(raw, at)
        kind, inner = _string(wrapped, 0)
        signature, _ = _string(wrapped, inner)
        key, _ = _string(blob, _string(blob, 0)[1])
        if kind != b"ssh-ed25519" or algorithm not in (b"sha256", b"sha512"):
            return False
        digest = hashlib.new(algorithm.decode(), payload).digest()
        signed = b"SSHSIG" + b"".join(
            len(part).to_bytes(4, "big") + part
            for part in (namespace, reserved, algorithm, digest)
        )
        Ed25519PublicKey.from_public_bytes(key).verify(signature, signed)
    except (binascii.Error, ValueError, IndexError, InvalidSignature):
        return False
    return True


def _string(data: bytes, at: int) -> tuple[bytes, int]:
    size = int.from_bytes(data[at : at + 4], "big")
    end = at + 4 + size
    if len(data) < end:
        raise ValueError("truncated")
    return data[at + 4 : end], end


def verify(
    payload: bytes, armored: bytes, signers: list[Signer]
) -> tuple[Signer | None, str]:
    """Who among ``signers`` signed ``payload``; else None and why not."""
    named = signer_key(armored)
    if named is None:
        return None, "whose signature is not an SSH signature"
    blob, namespace = named
    if namespace != NAMESPACE:
        return None, f"signed for {namespace!r}, not git"
    signer = next((s for s in signers if s.blob == blob), None)
    if signer is None:
        return None, f"signed by {fingerprint(blob)}, which is not an allowed signer"
    quick = _ed25519(payload, armored, blob)
    if quick is not None:
        if not quick:
            return None, f"whose signature by {signer.name} does not verify"
        return signer, ""
    with tempfile.TemporaryDirectory(prefix="machine-verify-") as tmp:
        allowed, sig = Path(tmp, "allowed"), Path(tmp, "sig")
        allowed.write_bytes(render_signers([signer]))
        sig.write_bytes(armored)
        done = _ssh_keygen(
            [
                *("-Y", "verify", "-n", NAMESPACE, "-f", str(allowed)),
                *("-I", signer.name, "-s", str(sig)),
            ],
            payload,
        )
    if done.returncode != 0:
        return None, f"whose signature by {signer.name} does not verify"
    return signer, ""


# -- writing: may this user sign? -----------------------------------------------------


def wanted(snap: Snapshot, change: Change) -> bool:
    """Must ``change`` be signed? Yes if it writes a protected file, except a
    ``settings.json`` that leaves the student as it was (``auto on`` needs no
    signer)."""
    for path in change.files:
        if not protected(path):
            continue
        if path != "settings.json":
            return True
        if student_of(change.files[path]) != student_of(snap.read(path)):
            return True
    return False


def student_of(data: bytes | None) -> dict[str, object]:
    """The student keys a ``settings.json`` sets (an unreadable one: marked)."""
    from machine_git.core import jsonio

    try:
        value = jsonio.loads(data) if data else {}
    except ValueError:
        return {"unreadable": True}
    if not isinstance(value, dict):
        return {"unreadable": True}
    return {k: value[k] for k in STUDENT_KEYS if value.get(k) is not None}


def admit(snap: Snapshot, change: Change, author: pygit2.Signature) -> Signer:
    """This user's signer for ``change``; adds ``allowed_signers`` on first use.

    Refuses, before anything is written, a user whose key the store does not
    list: the commit would only be reported as tampering.
    """
    own = own_key(author.email or author.name)
    current = parse_signers(snap.read(SIGNERS))
    if not current:
        proposed = change.files.get(SIGNERS)
        current = parse_signers(proposed)
        if not current:
            change.files[SIGNERS] = render_signers([own])
            return own
    if all(s.blob != own.blob for s in current):
        names = ", ".join(s.name for s in current)
        raise UntrustedSignerError(
            f"your signing key {own.fingerprint} is not an allowed signer of this "
            f"store; ask one of {names} to run: machine release signers add {own.name} "
            f'"{own.key}"'
        )
    return next(s for s in current if s.blob == own.blob)

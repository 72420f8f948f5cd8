"""Random strings with no name: is a run of token characters a key?

A long run that reads as random (entropy near that of random base62 or
base64, few pronounceable pieces) is ``high-entropy``, unless it is a known
non-secret: hex (git SHAs, digests), a UUID, image or archive data, a
digest after its label (``sha256:``, ``integrity=``), base64 of prose, a
typed API object id (``toolu_...``), part of a certificate or public key.
A long run is judged on its head, so a megabyte blob costs no more than a
key.
"""

from __future__ import annotations

from machine_git.secrets.heuristics import BLOB_PREFIXES
from machine_git.secrets.heuristics import DIGEST_PREFIXES
from machine_git.secrets.heuristics import HAS_DIGIT_RE
from machine_git.secrets.heuristics import HEXISH_RE
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import b64_prefix_decode
from machine_git.secrets.heuristics import entropy
from machine_git.secrets.heuristics import is_base64_prose
from machine_git.secrets.heuristics import is_placeholder
from machine_git.secrets.heuristics import typed_id
from machine_git.secrets.heuristics import wordy_fraction

_SKIP_PREFIXES = (*BLOB_PREFIXES, *DIGEST_PREFIXES)
_SKIP_AFTER = (
    "base64,", "h1:", "sha1:", "sha256:", "sha384:", "sha512:", "md5:", "sha1-",
    "sha256-", "sha384-", "sha512-",
)  # fmt: skip
_HASH_CONTEXT_RE = LazyPattern(
    r"(?i)(?:sha-?(?:1|224|256|384|512)|hash|digest|checksum|md5|integrity|etag"
    r"|fingerprint|crc32c?|thumbprint)[\w-]{0,20}[\"']?[ \t]*[:=][ \t]*[\"']?$"
)
_PLAIN_PIECE_RE = LazyPattern(r"[a-z_.-]*")
_UUID_IN_RE = LazyPattern(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_SAMPLE = 512
_PEM_B64_PREFIX = "LS0tLS1CRUdJT"  # base64 of "-----BEGI"


def _entropy_threshold(n: int) -> float:
    # random base62/64 runs score close to log2(min(n, 64)) bits per char;
    # identifiers, paths and words score well below that
    return min(3.9 + 0.015 * (n - 20), 4.5)


def classify(tok: str, text: str, start: int) -> str | None:
    """``high-entropy`` or ``private-key`` for a random-looking run, else None."""
    # a long run (a base64 blob) is judged on its head: enough to tell data
    # from words, and it keeps a megabyte blob from costing milliseconds
    core = tok[:_SAMPLE].rstrip("=")
    n = len(core)
    if n < 20:
        return None
    if core.startswith(_PEM_B64_PREFIX):
        if "PRIVATE KEY" in b64_prefix_decode(core, 96):
            return "private-key"
        return None  # base64 of a certificate or public key: not a secret
    if core.islower() or core.isupper() or not HAS_DIGIT_RE.search(core):
        return None
    if HEXISH_RE.fullmatch(core) or core.startswith(_SKIP_PREFIXES):
        return None
    if core.count("-") + core.count("_") > max(3, n // 8):
        return None  # names: test-8000Hz-le-3ch-24bit, my_var_2_name_x
    if _UUID_IN_RE.search(core):
        core = _UUID_IN_RE.sub("", core)  # judge what is left around a uuid
        n = len(core)
        if n < 20:
            return None
    if typed_id(core):
        return None  # typed object ids: toolu_..., msg_..., chatcmpl-..., cus_...
    return _judge(core, n, text, start)


def _judge(core: str, n: int, text: str, start: int) -> str | None:
    wordy = wordy_fraction(core)
    if "/" in core:
        # a path or url: its longest piece must look random on its own
        pieces = core.split("/")
        piece = max(pieces, key=len)
        if len(piece) < 16 or HEXISH_RE.fullmatch(piece):
            return None
        if wordy > 0.3 and (len(pieces) > 3 or wordy_fraction(piece) > 0.3):
            return None
    elif wordy > 0.4:
        return None
    if entropy(core) < _entropy_threshold(n):
        return None
    # the rarer, costlier checks run only on the few runs that got this far
    if is_placeholder(core) or is_base64_prose(core):
        return None  # AWS docs' ...EXAMPLEKEY; `echo VGhlIHF1aWNr | base64 -d`
    before = text[max(0, start - 48) : start]
    if before.endswith(_SKIP_AFTER):
        return None  # a digest: integrity=, h1:..., sha256:...
    if before.rstrip(" \t\"'").endswith((":", "=")) and _HASH_CONTEXT_RE.search(before):
        return None  # a digest: "sha256": "...", checksum = ...
    if _in_public_pem(text, start):
        return None
    return "high-entropy"


def _in_public_pem(text: str, pos: int) -> bool:
    """Is ``pos`` inside a certificate / public key / signature armor block?"""
    begin = text.rfind("-----BEGIN ", max(0, pos - 20000), pos)
    if begin < 0 or text.find("-----END ", begin, pos) >= 0:
        return False
    if begin > 0 and text[begin - 1] not in "\n\r \t\"'`>n":
        return False  # armor starts a line (or a string, or follows a \n escape)
    header = text[begin : begin + 60]
    return "PRIVATE" not in header and "-----" in header[11:]


def path_prefix_len(tok: str) -> int:
    """Length of the leading plain path pieces (``/hooks/incoming/``) of a run."""
    pos = 0
    while True:
        cut = tok.find("/", pos)
        if cut < 0 or not _PLAIN_PIECE_RE.fullmatch(tok, pos, cut):
            return pos
        pos = cut + 1

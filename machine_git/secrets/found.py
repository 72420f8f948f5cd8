"""What a scan finds: candidate spans from the detectors, merged into findings."""

from __future__ import annotations

from typing import NamedTuple

from machine_git.secrets.heuristics import PLACEHOLDER_RE


class Finding(NamedTuple):
    """A secret found in a text: ``text[start:end]`` is what gets replaced."""

    kind: str
    start: int
    end: int


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


# When detectors flag overlapping spans, the union is redacted and named after
# the most specific detector (the lowest number).
ENGINE = -1  # the engine's provider rules: their names win
PROVIDER = 0  # machine's own provider rules, for what the engine misses
STRUCT = 1  # private keys, JWTs, AWS secret keys next to an access key id
HEADER = 2  # url-credentials, auth-header, cli-secret
ASSIGNED = 3  # env-secret
ENTROPY = 4

Cand = tuple[int, int, int, str]  # start, end, priority, kind


def merge(cands: list[Cand], text: str) -> list[Finding]:
    """Sorted, disjoint findings; candidates inside a placeholder are dropped."""
    if not cands:
        return []
    holes: list[tuple[int, int]] = []
    if "[REDACTED:" in text:
        holes = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
    cands.sort()
    out: list[Finding] = []
    cur_s, cur_e, cur_p, cur_k = -1, -1, 99, ""
    h = 0  # the first placeholder that does not end before the candidate
    for s, e, p, k in cands:
        if e <= s:
            continue
        while h < len(holes) and holes[h][1] <= s:
            h += 1
        if h < len(holes) and holes[h][0] <= s and e <= holes[h][1]:
            continue  # inside a placeholder from an earlier pass
        if s < cur_e:
            cur_e = max(cur_e, e)
            if p < cur_p:
                cur_p, cur_k = p, k
            continue
        if cur_k:
            out.append(Finding(cur_k, cur_s, cur_e))
        cur_s, cur_e, cur_p, cur_k = s, e, p, k
    if cur_k:
        out.append(Finding(cur_k, cur_s, cur_e))
    return out

#!/usr/bin/env bash
# Install Claude Code for the end-to-end tests and print the path of its binary.
#
#   bash tests/e2e/install_claude.sh   # -> <cache>/node_modules/@anthropic-ai/claude-code-linux-x64/claude
#
# Used by tests/e2e (test_real_agents.py), tests/fixtures/claude/make_sessions.py
# and .ci/run. The install goes into a cache folder outside the repository:
# ${MACHINE_CLAUDE_CACHE:-${TMPDIR:-/tmp}/machine-e2e-claude}. Only the first run
# reaches the network (the npm registry); later runs reuse it.
# --ignore-scripts: nothing from the package runs at install time. The package's
# postinstall would only copy the native binary of the platform package (an
# optional dependency npm installs for this os/cpu) over a stub; we run that
# binary where npm put it instead.
set -euo pipefail

CLAUDE_VERSION=2.1.332
CACHE="${MACHINE_CLAUDE_CACHE:-${TMPDIR:-/tmp}/machine-e2e-claude}"
PKG="$CACHE/node_modules/@anthropic-ai/claude-code/package.json"

die() { echo "install_claude.sh: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"

version() { node -p "require(process.argv[1]).version" "$PKG" 2>/dev/null || true; }
binary() {
    local found
    for found in "$CACHE"/node_modules/@anthropic-ai/claude-code-*/claude; do
        [[ -x "$found" ]] && { echo "$found"; return; }
    done
}

# One install at a time: test workers (pytest -n) may each ask at start.
mkdir -p "$CACHE"
exec 9>"$CACHE/.install.lock"
flock 9
if [[ "$(version)" != "$CLAUDE_VERSION" || -z "$(binary)" ]]; then
    mkdir -p "$CACHE"
    [[ -f "$CACHE/package.json" ]] || echo '{"private":true}' >"$CACHE/package.json"
    (cd "$CACHE" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2) || die "npm install failed"
fi
[[ "$(version)" == "$CLAUDE_VERSION" ]] || die "expected claude-code $CLAUDE_VERSION in $CACHE"
BIN="$(binary)"
[[ -n "$BIN" ]] || die "no native claude binary for this platform in $CACHE"
echo "$BIN"

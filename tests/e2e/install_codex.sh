#!/usr/bin/env bash
# Install the Codex CLI for the end-to-end tests and print its `codex` path.
#
#   bash tests/e2e/install_codex.sh    # -> <cache>/node_modules/.bin/codex
#
# Used by tests/e2e (test_real_agents.py), tests/fixtures/codex/make_sessions.py
# and .ci/run. The install goes into a cache folder outside the repository:
# ${MACHINE_CODEX_CACHE:-${TMPDIR:-/tmp}/machine-e2e-codex}. Only the first run
# reaches the network (the npm registry); later runs reuse it.
# --ignore-scripts: nothing from the package runs at install time (the native
# binary comes in the platform package npm installs as an optional dependency,
# and bin/codex.js finds it there).
set -euo pipefail

CODEX_VERSION=0.171.0
CACHE="${MACHINE_CODEX_CACHE:-${TMPDIR:-/tmp}/machine-e2e-codex}"
PKG="$CACHE/node_modules/@openai/codex/package.json"

die() { echo "install_codex.sh: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"

version() { node -p "require(process.argv[1]).version" "$PKG" 2>/dev/null || true; }

# One install at a time: test workers (pytest -n) may each ask at start.
mkdir -p "$CACHE"
exec 9>"$CACHE/.install.lock"
flock 9
if [[ "$(version)" != "$CODEX_VERSION" ]]; then
    mkdir -p "$CACHE"
    [[ -f "$CACHE/package.json" ]] || echo '{"private":true}' >"$CACHE/package.json"
    (cd "$CACHE" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        "@openai/codex@$CODEX_VERSION" >&2) || die "npm install failed"
fi
[[ "$(version)" == "$CODEX_VERSION" ]] || die "expected codex $CODEX_VERSION in $CACHE"
BIN="$CACHE/node_modules/.bin/codex"
[[ -x "$BIN" ]] || die "codex binary missing in $CACHE"
"$BIN" --version >/dev/null 2>&1 || die "codex in $CACHE does not run (platform binary missing?)"
echo "$BIN"

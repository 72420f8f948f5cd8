#!/usr/bin/env bash
# Install Gemini CLI for the end-to-end tests and print its `gemini` path.
#
#   bash tests/e2e/install_gemini.sh   # -> <cache>/node_modules/.bin/gemini
#
# Used by tests/e2e (test_real_agents.py), tests/fixtures/gemini/make_sessions.py
# and .ci/run. The install goes into a cache folder outside the repository:
# ${MACHINE_GEMINI_CACHE:-${TMPDIR:-/tmp}/machine-e2e-gemini}. Only the first run
# reaches the network (the npm registry); later runs reuse it.
# --ignore-scripts: nothing from the package runs at install time (its bundle
# is plain JavaScript that node runs).
set -euo pipefail

GEMINI_VERSION=0.61.0
CACHE="${MACHINE_GEMINI_CACHE:-${TMPDIR:-/tmp}/machine-e2e-gemini}"
PKG="$CACHE/node_modules/@google/gemini-cli/package.json"

die() { echo "install_gemini.sh: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"

version() { node -p "require(process.argv[1]).version" "$PKG" 2>/dev/null || true; }

# One install at a time: test workers (pytest -n) may each ask at start.
mkdir -p "$CACHE"
exec 9>"$CACHE/.install.lock"
flock 9
if [[ "$(version)" != "$GEMINI_VERSION" ]]; then
    mkdir -p "$CACHE"
    [[ -f "$CACHE/package.json" ]] || echo '{"private":true}' >"$CACHE/package.json"
    (cd "$CACHE" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        "@google/gemini-cli@$GEMINI_VERSION" >&2) || die "npm install failed"
fi
[[ "$(version)" == "$GEMINI_VERSION" ]] || die "expected gemini-cli $GEMINI_VERSION in $CACHE"
BIN="$CACHE/node_modules/.bin/gemini"
[[ -x "$BIN" ]] || die "gemini binary missing in $CACHE"
"$BIN" --version >/dev/null 2>&1 || die "gemini in $CACHE does not run"
echo "$BIN"

#!/usr/bin/env bash
# Install the Pi coding agent for the end-to-end tests and print its `pi` path.
#
#   bash tests/e2e/install_pi.sh        # -> /tmp/machine-e2e-pi/node_modules/.bin/pi
#
# Used by tests/e2e/test_pi_extension.py and by .ci/run (which calls it once
# before the suite, so the test finds the install ready). The install goes into
# a cache folder outside the repository: ${MACHINE_PI_CACHE:-${TMPDIR:-/tmp}/machine-e2e-pi}.
# Only the first run reaches the network (the npm registry); later runs reuse it.
# --ignore-scripts: nothing from the package runs at install time.
set -euo pipefail

PI_VERSION=0.73.1
CACHE="${MACHINE_PI_CACHE:-${TMPDIR:-/tmp}/machine-e2e-pi}"
PKG="$CACHE/node_modules/@mariozechner/pi-coding-agent/package.json"

die() { echo "install_pi.sh: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"

version() { node -p "require(process.argv[1]).version" "$PKG" 2>/dev/null || true; }

mkdir -p "$CACHE"
# One install at a time: test workers (pytest -n) each ask for Pi at start.
exec 9>"$CACHE/.install.lock"
flock 9
if [[ "$(version)" != "$PI_VERSION" ]]; then
    [[ -f "$CACHE/package.json" ]] || echo '{"private":true}' >"$CACHE/package.json"
    (cd "$CACHE" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        "@mariozechner/pi-coding-agent@$PI_VERSION" >&2) || die "npm install failed"
fi
[[ "$(version)" == "$PI_VERSION" ]] || die "expected pi $PI_VERSION in $CACHE"
[[ -x "$CACHE/node_modules/.bin/pi" ]] || die "pi binary missing in $CACHE"
echo "$CACHE/node_modules/.bin/pi"

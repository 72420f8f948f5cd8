#!/usr/bin/env bash
# Install OpenCode for the fixture generator and print the path of its binary.
#
#   bash tests/e2e/install_opencode.sh    # -> <cache>/node_modules/opencode-linux-x64/bin/opencode
#
# Used by tests/fixtures/opencode/make_sessions.py. The install goes into a
# cache folder outside the repository:
# ${MACHINE_OPENCODE_CACHE:-${TMPDIR:-/tmp}/machine-e2e-opencode}. Only the first
# run reaches the network (the npm registry); later runs reuse it.
# --ignore-scripts: nothing from the package runs at install time. The
# `opencode` wrapper needs its postinstall, so the native binary is taken from
# the platform package npm installs as an optional dependency.
set -euo pipefail

OPENCODE_VERSION=1.18.33
CACHE="${MACHINE_OPENCODE_CACHE:-${TMPDIR:-/tmp}/machine-e2e-opencode}"
PKG="$CACHE/node_modules/opencode-ai/package.json"

die() { echo "install_opencode.sh: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"

version() { node -p "require(process.argv[1]).version" "$PKG" 2>/dev/null || true; }

if [[ "$(version)" != "$OPENCODE_VERSION" ]]; then
    mkdir -p "$CACHE"
    [[ -f "$CACHE/package.json" ]] || echo '{"private":true}' >"$CACHE/package.json"
    (cd "$CACHE" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        "opencode-ai@$OPENCODE_VERSION" >&2) || die "npm install failed"
fi
[[ "$(version)" == "$OPENCODE_VERSION" ]] || die "expected opencode-ai $OPENCODE_VERSION in $CACHE"
# The plain build needs AVX2; the baseline build runs on any x86-64.
for platform in "opencode-linux-$(uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')" \
    "opencode-linux-x64-baseline"; do
    BIN="$CACHE/node_modules/$platform/bin/opencode"
    if [[ -x "$BIN" ]] && [[ "$("$BIN" --version 2>/dev/null)" == "$OPENCODE_VERSION" ]]; then
        echo "$BIN"
        exit 0
    fi
done
die "no OpenCode $OPENCODE_VERSION binary in $CACHE that runs here"

#!/usr/bin/env bash
# Installs Node-RED and node-red-contrib-modbus under .peers/node-red: the peer
# the polling bench (`cargo bench -p sluice --bench polling`) runs on the same
# fleet as the engine. Benches only: the tests do not need it. Idempotent.
#
# node-red-contrib-modbus is pinned to 5.23.3: later releases depend on a
# modbus-serial tarball hosted outside the npm registry.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.peers/node-red"
PKGS=("node-red@4.1.8" "node-red-contrib-modbus@5.23.3")

say() { printf 'setup-node-red: %s\n' "$*"; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    # shellcheck source=scripts/apt.sh
    source "$ROOT/scripts/apt.sh"
    say "apt: installing nodejs npm"
    debs_install nodejs npm
fi

# The versions installed now, one `name@version` a line.
installed() {
    for pkg in "${PKGS[@]}"; do
        name="${pkg%@*}"
        printf '%s@%s\n' "$name" \
            "$(node -p "require('$DIR/node_modules/$name/package.json').version" 2>/dev/null || true)"
    done
}

if [[ "$(installed)" != "$(printf '%s\n' "${PKGS[@]}")" ]]; then
    say "npm: installing ${PKGS[*]}"
    mkdir -p "$DIR"
    [[ -f "$DIR/package.json" ]] || echo '{"name": "sluice-bench-node-red", "private": true}' >"$DIR/package.json"
    npm install --prefix "$DIR" --no-audit --no-fund --silent "${PKGS[@]}"
else
    say "npm: ${PKGS[*]} present"
fi
say "done"

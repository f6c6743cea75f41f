#!/usr/bin/env bash
# Installs the real protocol peers that the engine's integration tests talk to
# (see engine/tests/support/peers.rs). Idempotent: every step checks first and
# does nothing when its work is already done, so a second run takes well under
# a second.
#
#   .peers/venv               Python venv with pymodbus (and pyserial), python-snap7, virtual-plc, dlt645
#   .peers/libmodbus_server   tests/peers/libmodbus_server.c compiled against libmodbus
#   mosquitto, libmodbus-dev, gcc, pkg-config, postgresql   Debian packages (installed,
#                             never started: the tests make and start their own clusters)
#   chromium, chromium-driver  headless browser and WebDriver for the console's tests
#   socat                     pseudo-terminal pairs: serial lines for the Modbus RTU tests
#   .peers/node               npm sparkplug-payload (Eclipse Tahu): the Sparkplug B tests'
#                             independent decoder (needs node and npm: nodejs, npm)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="$ROOT/.peers"
VENV="$PEERS/venv"
PY="$VENV/bin/python"

# Pinned Python packages, as given to pip; the check below compares what is
# installed against them.
PY_REQS=("pymodbus==3.16.1" "pyserial==3.5" "python-snap7<3" "virtual-plc==0.3.0" "dlt645==3.2.0")
# The pinned npm package, as given to npm.
NPM_PKG="sparkplug-payload@1.0.3"
DEB_PKGS=(mosquitto libmodbus-dev gcc pkg-config postgresql chromium chromium-driver socat openssl curl)

say() { printf 'setup-peers: %s\n' "$*"; }

mkdir -p "$PEERS"

# --- Debian packages ---------------------------------------------------------
# shellcheck source=scripts/apt.sh
source "$ROOT/scripts/apt.sh"
mapfile -t missing < <(debs_missing "${DEB_PKGS[@]}")
# A Debian python3 (unlike pyenv's or python.org's) needs python3-venv to
# make a venv with pip in it.
if [[ ! -x "$PY" ]] && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
# Node.js may come from elsewhere than Debian (a vendor's package has npm inside).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
    say "apt: installing ${missing[*]}"
    debs_install "${missing[@]}"
else
    say "apt: ${DEB_PKGS[*]} present"
fi

# --- Python venv ---------------------------------------------------------------
if [[ ! -x "$PY" ]]; then
    say "venv: creating $VENV"
    # --clear repairs a half-made venv left by an interrupted run.
    python3 -m venv --clear "$VENV"
else
    say "venv: present"
fi

# One interpreter start checks all pins: prints, one a line, the requirements
# that what is installed does not satisfy (nothing when all are fine).
mapfile -t unmet < <("$PY" - "${PY_REQS[@]}" <<'PYEOF'
import sys
from importlib.metadata import version, PackageNotFoundError

def satisfied(req):
    for op in ("==", "<"):
        if op in req:
            name, want = req.split(op, 1)
            break
    else:
        name, op, want = req, None, None
    try:
        have = version(name)
    except PackageNotFoundError:
        return False
    if op == "==":
        return have == want
    if op == "<":
        # Compare the leading numeric components only (enough for "<3").
        major = have.split(".")[0]
        return major.isdigit() and int(major) < int(want)
    return True

for req in sys.argv[1:]:
    if not satisfied(req):
        print(req)
PYEOF
)
if ((${#unmet[@]})); then
    say "pip: installing ${unmet[*]}"
    "$PY" -m pip install --quiet "${unmet[@]}"
else
    say "pip: ${PY_REQS[*]} present"
fi

# --- libmodbus server --------------------------------------------------------
SRC="$ROOT/tests/peers/libmodbus_server.c"
BIN="$PEERS/libmodbus_server"
if [[ ! -x "$BIN" || "$SRC" -nt "$BIN" ]]; then
    say "cc: building $BIN"
    # Build to a temporary name so an interrupted compile never leaves a
    # binary that looks up to date.
    # shellcheck disable=SC2046 # pkg-config output is a list of flags
    gcc -O2 -Wall -Wextra -o "$BIN.tmp" "$SRC" $(pkg-config --cflags --libs libmodbus)
    mv -f "$BIN.tmp" "$BIN"
else
    say "cc: $BIN up to date"
fi

# --- npm: Sparkplug B reference implementation -----------------------------------
NODE_DIR="$PEERS/node"
want="${NPM_PKG##*@}"
have="$(node -p "require('$NODE_DIR/node_modules/sparkplug-payload/package.json').version" 2>/dev/null || true)"
if [[ "$have" != "$want" ]]; then
    say "npm: installing $NPM_PKG"
    mkdir -p "$NODE_DIR"
    npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent "$NPM_PKG"
else
    say "npm: $NPM_PKG present"
fi

say "done"

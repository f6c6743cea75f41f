#!/usr/bin/env bash
# Installs what `cargo xtask dist` needs beyond the test set-up. Idempotent.
#
#   rustup targets   x86_64-unknown-linux-musl, aarch64-unknown-linux-musl (static builds)
#   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross   the cross linker (and C headers) of the aarch64 build
#   qemu-user-static        runs the aarch64 binary here (`--check`)
set -euo pipefail

say() { printf 'setup-dist: %s\n' "$*"; }

for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    rustup target add "$target" >/dev/null
done
say "rustup: musl targets present"

DEB_PKGS=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static)
missing=()
for pkg in "${DEB_PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]})); then
    say "apt: installing ${missing[*]}"
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "apt: ${DEB_PKGS[*]} present"
fi

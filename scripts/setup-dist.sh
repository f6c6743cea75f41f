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
# shellcheck source=scripts/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
mapfile -t missing < <(debs_missing "${DEB_PKGS[@]}")
if ((${#missing[@]})); then
    say "apt: installing ${missing[*]}"
    debs_install "${missing[@]}"
else
    say "apt: ${DEB_PKGS[*]} present"
fi

# Sourced by the set-up scripts: Debian packages, installed only when missing.

# Prints, one a line, those of the packages "$@" that are not installed.
debs_missing() {
    local pkg
    for pkg in "$@"; do
        # `dpkg -s` also succeeds for removed-but-configured packages, so look
        # at the status line itself.
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            printf '%s\n' "$pkg"
        fi
    done
}

# Installs the packages "$@" (through sudo when not root).
debs_install() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

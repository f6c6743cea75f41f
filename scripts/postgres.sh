#!/usr/bin/env bash
# A PostgreSQL 15 cluster of its own in a scratch directory, on a loopback port,
# for the tests and the benches (Debian's `postgresql` package, installed by
# scripts/setup-peers.sh; the server refuses root, so it runs as `postgres`).
#
#   scripts/postgres.sh start DIR PORT [fast|durable]   initdb + pg_ctl start; returns when ready
#   scripts/postgres.sh stop DIR                         SIGINT to the postmaster's PID, then waits
#
# `fast` (the tests) turns fsync and synchronous commit off; `durable` (the
# benches) keeps PostgreSQL's defaults, so a commit is on disk as redb's are.
set -euo pipefail

BIN=/usr/lib/postgresql/15/bin
[[ -x "$BIN/initdb" ]] || { echo "postgres.sh: $BIN/initdb is missing: run scripts/setup-peers.sh" >&2; exit 2; }

as_owner() {
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
start)
    dir=$2 port=$3 mode=${4:-fast}
    mkdir -p "$dir"
    if [[ $(id -u) -eq 0 ]]; then chown postgres: "$dir"; fi
    options="-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200"
    case "$mode" in
    fast) options+=" -c fsync=off -c synchronous_commit=off"; sync=--no-sync ;;
    durable) options+=" -c shared_buffers=256MB"; sync= ;;
    *) echo "postgres.sh: mode is fast or durable, not $mode" >&2; exit 2 ;;
    esac
    as_owner "$BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 $sync >/dev/null
    as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 -o "$options" start >/dev/null
    ;;
stop)
    dir=$2
    pid=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null || true)
    if [[ -n "$pid" ]]; then
        kill -INT "$pid" 2>/dev/null || true
        for _ in $(seq 500); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
    fi
    ;;
*)
    echo "usage: scripts/postgres.sh start DIR PORT [fast|durable] | stop DIR" >&2
    exit 2
    ;;
esac

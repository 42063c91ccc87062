#!/usr/bin/env bash
# Start a throw-away PostgreSQL server on loopback for the store tests.
#   eval "$(scripts/test-postgres.sh start)"   # exports SCALETUNE_TEST_POSTGRES_URL, _PGDIR
#   scripts/test-postgres.sh stop "$_PGDIR"
# SCALETUNE_PG_SETTINGS replaces the server settings (default: -c fsync=off, for tests).
set -euo pipefail

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$dir" ]; then
    echo "installing PostgreSQL from Debian's packages" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
    dir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  echo "$dir"
}

as_pg() {  # the server refuses to run as root
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {  # below the kernel's ephemeral range, as scaletune.cluster.free_port picks:
  # outgoing connections take their source ports from there (scaletune is not installed yet)
  python3 - <<'PY'
import random, socket
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 0
for _ in range(50):
    port = random.randrange(20_000, low) if low > 21_000 else 0
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(probe.getsockname()[1])
        break
else:  # no free port below the range: one from it
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        print(probe.getsockname()[1])
PY
}

case "${1:-}" in
  start)
    bin=$(pg_bin)
    dir=$(mktemp -d /tmp/scaletune-pg.XXXXXX)
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(free_port)
    as_pg "$bin/initdb" -D "$dir/data" -U scaletune --auth=trust -E UTF8 >/dev/null
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
      -o "-h 127.0.0.1 -p $port -k $dir ${SCALETUNE_PG_SETTINGS:--c fsync=off}" start >/dev/null
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U scaletune scaletune_test
    echo "export SCALETUNE_TEST_POSTGRES_URL=postgresql://scaletune@127.0.0.1:$port/scaletune_test"
    echo "export _PGDIR=$dir"
    ;;
  stop)
    dir=${2:?usage: test-postgres.sh stop DIR}
    bin=$(pg_bin)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start | stop DIR" >&2
    exit 2
    ;;
esac

#!/bin/bash
# alternate.sh: one alternating run of River, effectd and the floor on the shared harness, as
# docs/performance.md ("Measured from outside: the shared harness") reports it: two rounds of a
# 100,000 backlog, then two rounds of live at 1,000/s, each run on a fresh database of one
# throwaway PostgreSQL 15 with default settings (fsync on). Run as root from the repository's
# root, with ../shared/peers/riverbench beside it; one line of figures per run on stdout.
set -eu
PG=${PG:-/usr/lib/postgresql/15/bin}
D=${HARNESS_DIR:-/tmp/harness-pg}
PORT=${HARNESS_PORT:-55432}
root=$(pwd)
mkdir -p "$D/bin"
(cd ../shared/peers/riverbench && go build -o "$D/bin/riverbench" . && go build -o "$D/bin/effectdbench" ./cmd/effectdbench)
(cd tools/floorbench && go build -o "$D/bin/floorbench" .)
go build -o "$D/bin/effectd" ./cmd/effectd
if [ ! -d "$D/data" ]; then
  chown postgres "$D"
  su postgres -c "$PG/initdb -D $D/data -A trust -U postgres" >/dev/null
  echo "max_connections = 200" >> "$D/data/postgresql.conf"
fi
su postgres -c "$PG/pg_ctl -D $D/data -o '-p $PORT -k /tmp' -l $D/log start -w" >/dev/null
trap 'su postgres -c "$PG/pg_ctl -D $D/data stop -m fast" >/dev/null' EXIT
U="postgres://postgres@127.0.0.1:$PORT"
run() { # system, harness arguments…
  local db=$1; shift
  su postgres -c "$PG/dropdb -h /tmp -p $PORT --if-exists $db 2>/dev/null; $PG/createdb -h /tmp -p $PORT $db"
  su postgres -c "$PG/psql -h /tmp -p $PORT -d $db -qc CHECKPOINT" >/dev/null
  local out
  case $db in
    river) out=$(DATABASE_URL="$U/river?pool_max_conns=40" "$D/bin/riverbench" -workers 2000 -fetch-cooldown 2ms -fetch-poll 20ms "$@" 2>&1 | tail -1) ;;
    effectd) out=$(DATABASE_URL="$U/effectd?pool_max_conns=40" "$D/bin/effectdbench" -effectd "$D/bin/effectd" "$@" 2>&1 | tail -1) ;;
    floor) out=$(DATABASE_URL="$U/floor?pool_max_conns=40" "$D/bin/floorbench" "$@" 2>&1 | tail -1) ;;
  esac
  echo "$(date -u +%H:%M:%S) $out"
}
cd "$root"
for _ in 1 2; do for s in river effectd floor; do run $s -n 100000 -mode backlog -timeout 5m; done; done
for _ in 1 2; do for s in river effectd floor; do run $s -n 10000 -mode live -rate 1000; done; done

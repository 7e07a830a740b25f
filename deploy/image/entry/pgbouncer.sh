#!/bin/sh
# Entry point of the pgbouncer image (Debian's PgBouncer 1.18) in the foreground as PID 1 (SIGTERM,
# the image's stop signal: an immediate shutdown; stop the service's instances first).
#
# PGBOUNCER_CONFIG: a pgbouncer.ini of your own (mounted). Without it, one is written to the tmp
# volume from the environment: every database of PGBOUNCER_UPSTREAM (host:port, 127.0.0.1:5432)
# on PGBOUNCER_PORT (6432) in PGBOUNCER_POOL_MODE (transaction), PGBOUNCER_DEFAULT_POOL_SIZE (20),
# PGBOUNCER_MAX_CLIENT_CONN (2000), clients authenticated against PGBOUNCER_AUTH_FILE (a
# userlist.txt, e.g. a mounted secret) with PGBOUNCER_AUTH_TYPE (scram-sha-256);
# PGBOUNCER_AUTH_TYPE=trust (a local topology) admits the users of PGBOUNCER_USERS (postgres).
set -eu
config=${PGBOUNCER_CONFIG:-}
if [ -z "$config" ]; then
  config=/tmp/pgbouncer.ini
  auth_type=${PGBOUNCER_AUTH_TYPE:-scram-sha-256}
  auth_file=${PGBOUNCER_AUTH_FILE:-}
  if [ -z "$auth_file" ]; then
    if [ "$auth_type" != trust ]; then
      echo "set PGBOUNCER_AUTH_FILE (a userlist.txt), or PGBOUNCER_AUTH_TYPE=trust for a local topology" >&2
      exit 2
    fi
    auth_file=/tmp/userlist.txt
    printf '%s\n' "${PGBOUNCER_USERS:-postgres}" | tr ',' '\n' | sed 's/.*/"&" ""/' >"$auth_file"
  fi
  upstream=${PGBOUNCER_UPSTREAM:-127.0.0.1:5432}
  cat >"$config" <<INI
[databases]
* = host=${upstream%:*} port=${upstream##*:}
[pgbouncer]
listen_addr = ${PGBOUNCER_LISTEN_ADDR:-0.0.0.0}
listen_port = ${PGBOUNCER_PORT:-6432}
unix_socket_dir =
pool_mode = ${PGBOUNCER_POOL_MODE:-transaction}
default_pool_size = ${PGBOUNCER_DEFAULT_POOL_SIZE:-20}
max_client_conn = ${PGBOUNCER_MAX_CLIENT_CONN:-2000}
auth_type = $auth_type
auth_file = $auth_file
logfile =
pidfile =
INI
fi
exec /usr/sbin/pgbouncer "$config"

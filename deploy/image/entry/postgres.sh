#!/bin/sh
# Entry point of the postgres image (Debian's PostgreSQL 15): on the first start, a cluster in PGDATA
# (the volume), with the superuser `postgres`, then the server in the foreground as PID 1, so a
# stop signal reaches it (SIGINT, the image's stop signal: fast shutdown). Arguments go to postgres.
#
# POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE): the superuser's password, required unless
# POSTGRES_HOST_AUTH_METHOD=trust (a throwaway database); POSTGRES_DB: a database created beside
# `postgres`; PGPORT: the port (5432).
set -eu
bin=/usr/lib/postgresql/15/bin
: "${PGDATA:=/var/lib/postgresql/data}"
password=${POSTGRES_PASSWORD:-}
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
  [ -z "$password" ] || { echo "set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE, not both" >&2; exit 2; }
  password=$(cat "$POSTGRES_PASSWORD_FILE")
fi
method=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "$password" ] && [ "$method" != trust ]; then
    echo "set POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE), or POSTGRES_HOST_AUTH_METHOD=trust for a throwaway database" >&2
    exit 2
  fi
  pwfile=$(mktemp)
  printf '%s\n' "$password" >"$pwfile"
  "$bin/initdb" --pgdata="$PGDATA" --username=postgres --encoding=UTF8 --no-locale \
    --auth-local=trust --auth-host="$method" ${password:+--pwfile="$pwfile"} >&2
  rm -f "$pwfile"
  # Every address (the container's network decides who reaches it); sockets in the tmp volume.
  printf "listen_addresses = '*'\nunix_socket_directories = '/tmp'\n" >>"$PGDATA/postgresql.conf"
  printf 'host all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"
  if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
    printf 'CREATE DATABASE "%s";\n' "$POSTGRES_DB" | "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null
  fi
fi
exec "$bin/postgres" -D "$PGDATA" "$@"

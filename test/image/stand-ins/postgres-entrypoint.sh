# The official postgres image's entrypoint as compose.yaml uses it: on a first start,
# POSTGRES_USER with POSTGRES_PASSWORD and the database POSTGRES_DB, in
# /var/lib/postgresql/data; then the server on every address, password authentication.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
data=/var/lib/postgresql/data
mkdir -p "$data" /run/postgresql
chown postgres:postgres "$data" /run/postgresql
as_postgres() { runuser -u postgres -- "$@"; }
if [ ! -s "$data/PG_VERSION" ]; then
  password=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" > "$password"
  chown postgres "$password"
  as_postgres "$bin/initdb" -D "$data" -U "$POSTGRES_USER" --pwfile="$password" \
    --auth-local=trust --auth-host=scram-sha-256 --no-sync >/dev/null
  rm -f "$password"
  echo "host all all all scram-sha-256" >> "$data/pg_hba.conf"
  as_postgres "$bin/pg_ctl" -D "$data" -o "-c listen_addresses=''" -w start >/dev/null
  as_postgres "$bin/psql" -U "$POSTGRES_USER" -d postgres -qc "create database \"$POSTGRES_DB\""
  as_postgres "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D "$data" -c listen_addresses="*"

#!/bin/sh
# Entry point of the Jointline image.
#
#   init-secrets DIR   create the secrets the compose file needs in DIR, keeping any that exist:
#                      postgres_password, database_url (built from it), django_secret_key,
#                      clickhouse_password and clickhouse_url (built from it).
#                      This is what makes `docker compose -f docker/compose.yml up -d` a one-line start.
#   anything else      run as given (gunicorn, celery, manage.py ...).
set -eu

if [ "${1:-}" = "init-secrets" ]; then
  dir="${2:?init-secrets needs a directory}"
  umask 077
  token() { python -c 'import secrets; print(secrets.token_urlsafe(48))'; }
  [ -s "$dir/postgres_password" ] || token > "$dir/postgres_password"
  [ -s "$dir/django_secret_key" ] || token > "$dir/django_secret_key"
  [ -s "$dir/database_url" ] || printf 'postgres://jointline:%s@postgres:5432/jointline\n' \
    "$(cat "$dir/postgres_password")" > "$dir/database_url"
  [ -s "$dir/clickhouse_password" ] || token > "$dir/clickhouse_password"
  [ -s "$dir/clickhouse_url" ] || printf 'http://jointline:%s@clickhouse:8123/jointline\n' \
    "$(cat "$dir/clickhouse_password")" > "$dir/clickhouse_url"
  # Readable by the app user and by the postgres image's user, which differ; the volume is
  # mounted only into this project's containers.
  chmod 0444 "$dir/postgres_password" "$dir/django_secret_key" "$dir/database_url" \
    "$dir/clickhouse_password" "$dir/clickhouse_url"
  echo "secrets ready in $dir"
  exit 0
fi

exec "$@"

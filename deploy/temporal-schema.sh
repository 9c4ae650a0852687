#!/bin/sh
# Temporal's two PostgreSQL databases, created if missing and migrated to the schema version
# this admin-tools image ships. Runs as the one-shot `temporal-schema` service of
# docker-compose.yml (image temporalio/admin-tools, which has temporal-sql-tool and the
# schema files); the server starts only after it exits 0. Safe on every `docker compose up`:
#
#   create                an existing database is reported and kept;
#   setup-schema -v 0.0   only the version tables, and nothing when a version is recorded;
#   update-schema         only the versions newer than the recorded one.
#
# An upgrade of the admin-tools and server images therefore migrates the databases in place.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the PostgreSQL host}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${POSTGRES_PWD:?POSTGRES_PWD is required}"
schema_root=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}

# temporal-sql-tool takes its connection from the environment.
SQL_PLUGIN=postgres12
SQL_HOST=$POSTGRES_SEEDS
SQL_PORT=${DB_PORT:-5432}
SQL_USER=$POSTGRES_USER
SQL_PASSWORD=$POSTGRES_PWD
export SQL_PLUGIN SQL_HOST SQL_PORT SQL_USER SQL_PASSWORD

# migrate DATABASE SCHEMA_DIR
migrate() {
    db=$1
    versions=$2
    if [ ! -d "$versions" ]; then
        echo "no schema directory $versions: run this in the temporalio/admin-tools image" >&2
        exit 1
    fi
    echo "== $db on $SQL_HOST:$SQL_PORT"
    if out=$(temporal-sql-tool --db "$db" create 2>&1); then
        echo "database $db is there"
    else
        case $out in
            *"already exists"*) echo "database $db already exists" ;;
            *)
                printf '%s\n' "$out" >&2
                exit 1
                ;;
        esac
    fi
    temporal-sql-tool --db "$db" setup-schema -v 0.0
    temporal-sql-tool --db "$db" update-schema -d "$versions"
}

migrate "${DBNAME:-temporal}" "$schema_root/temporal/versioned"
migrate "${VISIBILITY_DBNAME:-temporal_visibility}" "$schema_root/visibility/versioned"
echo "Temporal's schema is up to date"

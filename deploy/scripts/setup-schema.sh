#!/bin/sh
# Creates (when missing) and upgrades the Temporal persistence and visibility databases on
# PostgreSQL. Every step is idempotent: an existing database is kept, an existing schema is only
# moved forward to the versions shipped in this admin-tools image.
#
# Connection settings come from temporal-sql-tool's environment variables:
# SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD.
set -eu

: "${SQL_HOST:?SQL_HOST is required}"
: "${SQL_USER:?SQL_USER is required}"
SQL_PORT="${SQL_PORT:-5432}"
TEMPORAL_DB="${TEMPORAL_DB:-temporal}"
TEMPORAL_VISIBILITY_DB="${TEMPORAL_VISIBILITY_DB:-temporal_visibility}"
SCHEMA_ROOT=/etc/temporal/schema/postgresql/v12

attempts=0
until nc -z -w 5 "$SQL_HOST" "$SQL_PORT"; do
	attempts=$((attempts + 1))
	if [ "$attempts" -ge 30 ]; then
		echo "setup-schema: $SQL_HOST:$SQL_PORT is not reachable" >&2
		exit 1
	fi
	sleep 2
done

setup() {
	db="$1"
	dir="$2"
	echo "setup-schema: database $db"
	temporal-sql-tool --db "$db" create
	temporal-sql-tool --db "$db" setup-schema -v 0.0
	temporal-sql-tool --db "$db" update-schema -d "$dir"
}

setup "$TEMPORAL_DB" "$SCHEMA_ROOT/temporal/versioned"
setup "$TEMPORAL_VISIBILITY_DB" "$SCHEMA_ROOT/visibility/versioned"
echo "setup-schema: done"

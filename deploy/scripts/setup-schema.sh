#!/bin/sh
# Creates (when missing) and upgrades the Temporal persistence and visibility databases on
# PostgreSQL. Every step is idempotent: an existing database is kept, an existing schema is only
# moved forward to the versions embedded in temporal-sql-tool (the schemas of its server release).
# The compose stack runs it in the admin-tools image; the local cluster launcher
# (`go run ./cmd/cluster`) runs it with the temporal-sql-tool built from tools/.
#
# Connection settings come from temporal-sql-tool's environment variables:
# SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD.
set -eu

: "${SQL_HOST:?SQL_HOST is required}"
: "${SQL_USER:?SQL_USER is required}"
SQL_PORT="${SQL_PORT:-5432}"
TEMPORAL_DB="${TEMPORAL_DB:-temporal}"
TEMPORAL_VISIBILITY_DB="${TEMPORAL_VISIBILITY_DB:-temporal_visibility}"
# The embedded schema directories of temporal-sql-tool (--schema-name).
SCHEMA_ROOT=postgresql/v12

# Without nc (the launcher's hosts need not have it), the caller has waited for the database.
if command -v nc >/dev/null 2>&1; then
	attempts=0
	until nc -z -w 5 "$SQL_HOST" "$SQL_PORT"; do
		attempts=$((attempts + 1))
		if [ "$attempts" -ge 30 ]; then
			echo "setup-schema: $SQL_HOST:$SQL_PORT is not reachable" >&2
			exit 1
		fi
		sleep 2
	done
fi

setup() {
	db="$1"
	dir="$2"
	echo "setup-schema: database $db"
	temporal-sql-tool --db "$db" create
	temporal-sql-tool --db "$db" setup-schema -v 0.0
	temporal-sql-tool --db "$db" update-schema --schema-name "$dir"
}

setup "$TEMPORAL_DB" "$SCHEMA_ROOT/temporal"
setup "$TEMPORAL_VISIBILITY_DB" "$SCHEMA_ROOT/visibility"
echo "setup-schema: done"

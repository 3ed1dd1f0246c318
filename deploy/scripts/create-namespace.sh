#!/bin/sh
# Waits until the Temporal frontend at TEMPORAL_ADDRESS reports SERVING, then makes sure the
# namespace NAMESPACE exists, and registers every search attribute listed in SEARCH_ATTRIBUTES
# (space-separated Name=Type pairs, Type one of Keyword, Text, Int, Double, Bool, Datetime,
# KeywordList). Running it again against a set-up cluster changes nothing.
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is required}"
NAMESPACE="${NAMESPACE:-default}"
NAMESPACE_RETENTION="${NAMESPACE_RETENTION:-72h}"
SEARCH_ATTRIBUTES="${SEARCH_ATTRIBUTES:-}"
MAX_ATTEMPTS="${MAX_ATTEMPTS:-60}"

retry() {
	what="$1"
	shift
	n=0
	until "$@"; do
		n=$((n + 1))
		if [ "$n" -ge "$MAX_ATTEMPTS" ]; then
			echo "create-namespace: gave up waiting for $what" >&2
			return 1
		fi
		sleep 2
	done
}

ns_exists() {
	temporal operator namespace describe --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" >/dev/null 2>&1
}

ns_ready() {
	ns_exists || temporal operator namespace create --address "$TEMPORAL_ADDRESS" \
		--namespace "$NAMESPACE" --retention "$NAMESPACE_RETENTION" >/dev/null 2>&1 || ns_exists
}

sa_list() {
	temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" >/dev/null 2>&1
}

retry "the frontend to serve" temporal operator cluster health --address "$TEMPORAL_ADDRESS"
retry "namespace $NAMESPACE" ns_ready
echo "create-namespace: namespace $NAMESPACE is registered"
# A new namespace reaches the frontend's namespace cache some seconds after it is registered; until
# then its search attributes cannot be read or added.
retry "namespace $NAMESPACE to be served" sa_list

for pair in $SEARCH_ATTRIBUTES; do
	name="${pair%%=*}"
	type="${pair#*=}"
	if [ -z "$name" ] || [ "$name" = "$pair" ] || [ -z "$type" ]; then
		echo "create-namespace: search attribute \"$pair\" is not Name=Type" >&2
		exit 1
	fi
	if temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" |
		awk '{ print $1 }' | grep -qx "$name"; then
		echo "create-namespace: search attribute $name already exists"
		continue
	fi
	temporal operator search-attribute create --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" \
		--name "$name" --type "$type"
	echo "create-namespace: search attribute $name ($type) created"
done

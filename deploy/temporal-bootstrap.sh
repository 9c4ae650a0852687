#!/bin/sh
# What codemode needs on a Temporal server, made idempotent: the namespace (with a retention)
# and the search attributes the workflow keeps current (CodeModeStatus, CodeModeRuntime, both
# Keyword). Runs as the one-shot `temporal-bootstrap` service of docker-compose.yml, in the
# temporalio/admin-tools image; works against any server the `temporal` CLI reaches
# (TEMPORAL_ADDRESS, and TEMPORAL_TLS_* / TEMPORAL_API_KEY when the server wants them).
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS must name the Temporal frontend, e.g. temporal:7233}"
namespace=${TEMPORAL_NAMESPACE:-default}
retention=${TEMPORAL_RETENTION:-30d}
attributes=${CODEMODE_SEARCH_ATTRIBUTES:-CodeModeStatus CodeModeRuntime}
attempts=${BOOTSTRAP_ATTEMPTS:-60}
pause=${BOOTSTRAP_PAUSE_SECONDS:-2}

# retry DESCRIPTION COMMAND...: the server's services come up one by one, and a new namespace
# takes a few seconds to reach all of them, so each step is retried before giving up.
retry() {
    what=$1
    shift
    n=1
    until "$@"; do
        if [ "$n" -ge "$attempts" ]; then
            echo "giving up after $attempts attempts: $what" >&2
            return 1
        fi
        n=$((n + 1))
        sleep "$pause"
    done
}

quiet() { "$@" >/dev/null 2>&1; }

echo "waiting for Temporal at $TEMPORAL_ADDRESS"
retry "Temporal at $TEMPORAL_ADDRESS is not healthy" quiet temporal operator cluster health

if quiet temporal operator namespace describe --namespace "$namespace"; then
    echo "namespace $namespace exists"
else
    echo "creating namespace $namespace (retention $retention)"
    # Another bootstrap may create it between our describe and create: check again on failure.
    temporal operator namespace create --namespace "$namespace" --retention "$retention" ||
        quiet temporal operator namespace describe --namespace "$namespace"
fi

has_attribute() {
    temporal operator search-attribute list --namespace "$namespace" 2>/dev/null |
        awk -v name="$1" '$1 == name { found = 1 } END { exit !found }'
}

create_attribute() {
    has_attribute "$1" || quiet temporal operator search-attribute create \
        --namespace "$namespace" --name "$1" --type Keyword || has_attribute "$1"
}

for name in $attributes; do
    if has_attribute "$name"; then
        echo "search attribute $name exists"
    else
        echo "creating search attribute $name (Keyword) on $namespace"
        retry "search attribute $name on $namespace" create_attribute "$name"
    fi
done
echo "namespace $namespace is ready for codemode"

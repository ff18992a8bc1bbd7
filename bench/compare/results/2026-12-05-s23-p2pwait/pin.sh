#!/bin/sh
r=${RANK:-${OMPI_COMM_WORLD_RANK}}
if [ "$PLACE" = pair ]; then c=$(( (r/2) % 2 )); else c=$((r%2)); fi
exec taskset -c $c "$@"

#!/bin/sh
# cohort-perf with rank 0's own statistics (-a 0): p50_us is the lead's own, step_p50_us the group's
exec /work/main/build-o3/tools/cohort-perf/cohort-perf -a 0 "$@"

#!/bin/bash
# cgall.sh PERF OUT: callgrind per call, 5 ops at 8 B, 2 ranks over shm, the recorder's clock
# pinned to its clock_gettime fallback (a mount namespace shows clocksource acpi_pm, so the
# TSC extrapolation, which under valgrind engages or not by valgrind's timing, never runs);
# as 2026-12-03-entry/callgrind/cgall.sh. PERF: a wrapper setting LD_LIBRARY_PATH.
perf=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../../.." && pwd)
unshare -m bash -c "mount --bind /tmp/lane2_fakecs/cs /sys/devices/system/clocksource/clocksource0/current_clocksource &&
 for op in broadcast scatter gather reduce all_reduce; do
  N1=1000 N2=3000 ARGS='--transport shm' $repo/bench/compare/cg_percall.sh $perf $out \$op >/dev/null 2>&1
  python3 $repo/bench/compare/results/2026-12-03-entry/callgrind/cgsum.py $out \$op 1000 3000
 done"

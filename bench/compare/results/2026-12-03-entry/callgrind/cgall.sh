#!/bin/bash
# cgall.sh BUILD: callgrind per call, 5 ops, the recorder's clock pinned to clock_gettime
# (a mount namespace shows clocksource acpi_pm, so coh_trace_us never extrapolates the TSC:
# under valgrind that extrapolation engages or not by valgrind's timing)
v=$1
unshare -m bash -c "mount --bind /tmp/entry/fakecs /sys/devices/system/clocksource/clocksource0/current_clocksource &&
 for op in broadcast scatter gather reduce all_reduce; do
  N1=1000 N2=3000 ARGS='--transport shm' /work/wt/entry/bench/compare/cg_percall.sh /tmp/entry/$v/perf /tmp/entry/cgp-$v \$op >/dev/null 2>&1
  python3 $(dirname "$0")/cgsum.py /tmp/entry/cgp-$v \$op 1000 3000
 done"

#!/bin/bash
# tri.sh ROUNDS: cohort (A), cohort with gate.so (B: poll(fd,0) before each non-blocking recv), Open MPI (O);
# pinned one rank per core, nice -19, 100000 calls of 8 B; order rotated per round; one line per run
D=$(dirname $0)
for r in $(seq 1 $1); do
  case $((r%3)) in 1) o="A B O";; 2) o="B O A";; 0) o="O A B";; esac
  for v in $o; do
    case $v in A) t=tA; E="X=1";; B) t=tB; E="LD_PRELOAD=$D/gate.so";; O) t=tompi; E="X=1";; esac
    f=$D/ns_${t}8_q$r.txt
    $D/ns.sh ${t}8_q$r $E > $f 2>&1
    w=$(grep -o 'rank 0: [0-9.]*' $f | cut -d' ' -f3)
    echo "$v r$r $(date +%T) wall=$w load=$(cut -d' ' -f1 /proc/loadavg) $(grep -E 'OrigData' $f | awk '{printf "%s ", $2}') | $($D/one.py $D/ps_${t}8_q$r 100000 | sed 's/ [a-z_:-]*=-\?0.00[0-9]//g; s/(task.*//; s/\/tmp\/tcp8\/ps_[a-zA-Z0-9]*8_r[0-9]*\.//; s/all_sys/sys_calls/' | tr '\n' '|')"
  done
done

#!/bin/bash
# tri2.sh ROUNDS: A = cohort, B = gate.so, C = gate.so + noyield.so; as tri.sh (pinned, nice -19, 100000 x 8 B)
D=$(dirname $0)
for r in $(seq 1 $1); do
  case $((r%3)) in 1) o="A B C";; 2) o="B C A";; 0) o="C A B";; esac
  for v in $o; do
    case $v in A) t=uA; E="X=1";; B) t=uB; E="LD_PRELOAD=$D/gate.so";; C) t=uC; E="LD_PRELOAD=$D/gate.so:$D/noyield.so";; esac
    f=$D/ns_${t}8_r$r.txt
    $D/ns.sh ${t}8_r$r $E > $f 2>&1
    w=$(grep -o 'rank 0: [0-9.]*' $f | cut -d' ' -f3)
    echo "$v r$r $(date +%T) wall=$w load=$(cut -d' ' -f1 /proc/loadavg) $(grep -E 'OrigData' $f | awk '{printf "%s ", $2}') | $($D/one.py $D/ps_${t}8_r$r 100000 | sed 's/ [a-z_:-]*=-\?0.00[0-9]//g; s/(task.*//; s/\/tmp\/tcp8\/ps_[a-zA-Z0-9]*8_r[0-9]*\.//; s/all_sys/sys_calls/' | tr '\n' '|')"
  done
done

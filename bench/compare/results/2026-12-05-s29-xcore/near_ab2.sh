#!/bin/bash
# near-gated A/B, one op per pair (short launches fit the host's brief near windows):
# prints side pair c2c op inplace size avg p50 p99 (ab.sh's format) plus c2c after
A=/tmp/b29/b/tools/cohort-perf/cohort-perf; B=/work/main/build-o3/tools/cohort-perf/cohort-perf
end=$(( $(date +%s) + ${MIN:-20}*60 )); r=0
while [ $(date +%s) -lt $end ]; do
 for op in all_reduce reduce_scatter all_to_all reduce broadcast; do
  c=$(/tmp/c2c 0 1 20 | awk '{print $4}')
  echo "$(date +%T) c2c $c" >> /tmp/s29/near_ab2.log
  [ "$c" -lt 150 ] || { sleep 3; continue; }
  r=$((r+1))
  for side in A B; do
    P=${!side}; c=$(/tmp/c2c 0 1 20 | awk '{print $4}')
    $P --np 2 --bind auto --coll $op --sizes 262144,1048576,4194304 --time 0.1 --in-place yes \
       --percentiles --json 2>/dev/null | python3 "$(dirname "$0")/json_rows.py" $side $r $c >> /tmp/s29/near_ab2.txt
  done
 done
done

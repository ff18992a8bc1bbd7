#!/bin/bash
# near-gated: two copies (COHORT_SHM_SINGLE_COPY=off) against single copy (auto, XCORE=far)
# for the sizes and ops the near rule does not cover yet; one op per pair
P=/work/main/build-o3/tools/cohort-perf/cohort-perf
end=$(( $(date +%s) + ${MIN:-20}*60 )); r=0
while [ $(date +%s) -lt $end ]; do
 for spec in all_reduce:8388608,16777216 reduce_scatter:8388608,16777216 reduce:8388608,16777216 broadcast:8388608,16777216 all_gather:1048576,4194304,16777216 gather:1048576,4194304,16777216 scatter:1048576,4194304,16777216; do
  op=${spec%%:*}; sz=${spec#*:}
  c=$(/tmp/c2c 0 1 20 | awk '{print $4}')
  echo "$(date +%T) c2c $c" >> /tmp/s29/near_big.log
  [ "$c" -lt 150 ] || { sleep 3; continue; }
  r=$((r+1))
  for side in two one; do
    c=$(/tmp/c2c 0 1 20 | awk '{print $4}')
    if [ $side = two ]; then E="COHORT_SHM_SINGLE_COPY=off"; else E="COHORT_SHM_XCORE=far"; fi
    env $E $P --np 2 --bind auto --coll $op --sizes $sz --time 0.1 --in-place yes \
       --percentiles --json 2>/dev/null | python3 "$(dirname "$0")/json_rows.py" $side $r $c >> /tmp/s29/near_big.txt
  done
 done
done

#!/bin/bash
# near-gated A/B: whenever the cores' round trip is < 150 ns, one A/B pair (ab.sh PAIRS=1)
end=$(( $(date +%s) + ${MIN:-20}*60 ))
while [ $(date +%s) -lt $end ]; do
  c=$(/tmp/c2c | awk '{print $4}')
  echo "$(date +%T) c2c $c" >> /tmp/s29/near_ab.log
  if [ "$c" -lt 150 ]; then
    A=/tmp/b29/b/tools/cohort-perf/cohort-perf B=/work/main/build-o3/tools/cohort-perf/cohort-perf \
    OPS=${OPS:-all_reduce,reduce_scatter,all_to_all,reduce} SIZES=${SIZES:-262144,1048576,4194304} PAIRS=1 T=0.2 \
      bash /work/main/bench/compare/results/2026-12-05-s28-inplace/ab.sh >> /tmp/s29/near_ab.txt 2>&1
  else
    sleep 10
  fi
done

#!/bin/bash
# wait for the near state; then measure off/auto/on for every op (state.sh, one round)
end=$(( $(date +%s) + ${MIN:-25}*60 ))
while [ $(date +%s) -lt $end ]; do
  c=$(/tmp/c2c | awk '{print $4}')
  echo "$(date +%T) c2c $c" >> /tmp/s29/watch.log
  if [ "$c" -lt 150 ]; then
    R=1 T=0.15 /tmp/s29/state.sh >> /tmp/s29/near.txt 2>&1
  else
    sleep 10
  fi
done

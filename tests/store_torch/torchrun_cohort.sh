#!/usr/bin/env bash
# A cohort C program started by a real torchrun, whose agent holds
# MASTER_PORT with its TCPStore (TORCHELASTIC_USE_AGENT_STORE=True): rank 0
# must not try to bind it; cohort rendezvouses through the agent's store
# (docs/launcher.md#torchrun). Two launches: --standalone, and c10d
# rendezvous at cohort-store's TCPStore listener. No COHORT_TOKEN: the token
# goes through the agent's store.
# usage: torchrun_cohort.sh PROGRAM COHORT_STORE PYTHON   (exit 77: no torch 2.x)
set -euo pipefail
prog=$1 store=$2 py=$3
"$py" -c 'import torch, sys; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)' \
  2>/dev/null || { echo "no torch 2.x for $py: skipped"; exit 77; }
tmp=$(mktemp -d)
sp=
trap 'if [ -n "$sp" ]; then kill $sp 2>/dev/null || true; wait $sp 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT
export TORCH_CPP_LOG_LEVEL=ERROR OMP_NUM_THREADS=1 COHORT_TIMEOUT=120
unset COHORT_TOKEN COHORT_STORE COHORT_JOB_ID MASTER_ADDR MASTER_PORT RANK WORLD_SIZE
check() { # name, file
  for r in 0 1 2; do
    grep -q "^cohort rank $r/3 sum=6$" "$2" ||
      { echo "$1: rank $r: wrong or missing result"; cat "$2"; exit 1; }
  done
  echo "$1: ok"
}
if ! timeout 200 "$py" -m torch.distributed.run --standalone --nproc_per_node=3 --max-restarts=0 \
     --no-python "$prog" >"$tmp/a.out" 2>&1; then
  echo "torchrun --standalone failed:"; cat "$tmp/a.out"; exit 1
fi
check "torchrun --standalone" "$tmp/a.out"
"$store" --listen 127.0.0.1:0 --torch-listen 127.0.0.1:0 >"$tmp/store.out" 2>"$tmp/store.err" &
sp=$!
for _ in $(seq 100); do [ "$(wc -l <"$tmp/store.out")" -ge 2 ] && break; sleep 0.05; done
tport=$(sed -n '2s/.*://p' "$tmp/store.out")
if ! timeout 200 "$py" -m torch.distributed.run --nnodes=1 --nproc_per_node=3 --max-restarts=0 \
     --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:"$tport" --rdzv-conf is_host=false \
     --rdzv-id=cohort-prog --no-python "$prog" >"$tmp/b.out" 2>&1; then
  echo "torchrun --rdzv-backend=c10d failed:"; cat "$tmp/b.out"; cat "$tmp/store.err"; exit 1
fi
check "torchrun --rdzv-backend=c10d at cohort-store" "$tmp/b.out"

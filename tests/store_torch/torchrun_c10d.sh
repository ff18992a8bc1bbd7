#!/usr/bin/env bash
# A real torchrun job whose c10d rendezvous goes through cohort-store's
# TCPStore listener: 2 workers, gloo all_reduce, results checked, and the
# rendezvous keys read back from cohort-store with cohort-kv (so the job did
# rendezvous there and not somewhere else).
# usage: torchrun_c10d.sh COHORT_STORE COHORT_KV PYTHON   (exit 77: no torch 2.x)
set -euo pipefail
store=$1 kv=$2 py=$3
here=$(cd "$(dirname "$0")" && pwd)
"$py" -c 'import torch, sys; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)' \
  2>/dev/null || { echo "no torch 2.x for $py (Debian's 1.13 torchrun crashes on Python 3.11): skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'if [ -n "${sp:-}" ]; then kill $sp 2>/dev/null || true; wait $sp 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT
COHORT_JOB_ID=trjob COHORT_TOKEN=trtok "$store" --listen 127.0.0.1:0 --torch-listen 127.0.0.1:0 \
  >"$tmp/store.out" 2>"$tmp/store.err" &
sp=$!
for _ in $(seq 100); do [ "$(wc -l <"$tmp/store.out")" -ge 2 ] && break; sleep 0.05; done
caddr=$(sed -n '1s/^listening on //p' "$tmp/store.out")
tport=$(sed -n '2s/.*://p' "$tmp/store.out")
[ -n "$tport" ] || { echo "cohort-store did not start"; cat "$tmp/store.err"; exit 1; }
echo "cohort-store: cohort $caddr, TCPStore 127.0.0.1:$tport"
export TORCH_CPP_LOG_LEVEL=ERROR OMP_NUM_THREADS=1
# is_host=false: the agent must not try to host the rendezvous store itself.
if ! timeout 240 "$py" -m torch.distributed.run --nnodes=1 --nproc_per_node=2 \
     --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:"$tport" --rdzv-id=cohort-c10d \
     --rdzv-conf is_host=false --max-restarts=0 "$here/allreduce_worker.py" >"$tmp/run.out" 2>&1; then
  echo "torchrun failed:"; cat "$tmp/run.out"; cat "$tmp/store.err"; exit 1
fi
cat "$tmp/run.out" | grep '^rank' || true
for r in 0 1; do
  grep -q "^rank $r/2 sum=3.0" "$tmp/run.out" || { echo "rank $r: wrong or missing result"; cat "$tmp/run.out"; exit 1; }
done
keys=$(COHORT_STORE=$caddr COHORT_JOB_ID=trjob COHORT_TOKEN=trtok "$kv" list)
echo "$keys" | grep -q '^/torch.rendezvous.cohort-c10d' \
  || { echo "no rendezvous keys in cohort-store:"; echo "$keys"; exit 1; }
echo "rendezvous keys in cohort-store: $(echo "$keys" | grep -c rendezvous)"
kill -TERM $sp; wait $sp || { echo "cohort-store exit status $?"; cat "$tmp/store.err"; exit 1; }
sp=
echo "torchrun c10d job through cohort-store: ok"

#!/usr/bin/env bash
# cohort's TCPStore client (COHORT_STORE=torch://host:port/prefix) against
# a real torch 2.x TCPStore server, op by op through cohort-kv, with a torch
# client checking that the keys land where torch sees them.
# usage: torch_client_kv.sh COHORT_KV PYTHON   (exit 77: no torch 2.x)
set -euo pipefail
kv=$1 py=$2
"$py" -c 'import torch, sys; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)' \
  2>/dev/null || { echo "no torch 2.x for $py: skipped"; exit 77; }
tmp=$(mktemp -d)
mp=
trap 'if [ -n "$mp" ]; then kill $mp 2>/dev/null || true; wait $mp 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT
export TORCH_CPP_LOG_LEVEL=ERROR
"$py" - >"$tmp/port" <<'PY' &
import sys, time, torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print(s.port, flush=True)
while not s.check(["/stop"]):   # keys of torch clients carry torch's "/" prefix
    time.sleep(0.05)
PY
mp=$!
for _ in $(seq 600); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
[ -n "$port" ] || { echo "torch TCPStore did not start"; exit 1; }
export COHORT_STORE=torch://127.0.0.1:$port/pfx COHORT_JOB_ID=j COHORT_TOKEN=unused
fail() { echo "FAIL: $*"; exit 1; }
eq() { [ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"; }
"$kv" set a hello
eq "$("$kv" get a)" hello "get after set"
eq "$("$kv" add n 5)" 5 "add"
eq "$("$kv" add n -2)" 3 "add again"
"$kv" append a ", world"
eq "$("$kv" get a)" "hello, world" "append"
eq "$("$kv" cas a "hello, world" swapped)" swapped "compare_set match"
set +e
"$kv" cas a wrong other >/dev/null; rc=$?
"$kv" cas absent x y >/dev/null; rc2=$?
start=$(date +%s%N)
"$kv" --timeout 300 get missing 2>"$tmp/err"; rc3=$?
el=$(( ($(date +%s%N) - start) / 1000000 ))
set -e
[ $rc -ne 0 ] && [ $rc2 -ne 0 ] || fail "a failed compare_set must say so ($rc, $rc2)"
[ $rc3 -ne 0 ] && grep -q "timed out" "$tmp/err" && [ $el -lt 3000 ] ||
  fail "get of a missing key: rc $rc3 after $el ms: $(cat "$tmp/err")"
# the connection pool stays usable after the cancelled wait
eq "$("$kv" get a)" swapped "get after a timed-out wait"
# a key set later by a torch client wakes the waiter
# (torch's client puts "/" before its keys; no prefix on this address)
( sleep 0.5; "$py" -c "
import torch.distributed as d
d.TCPStore('127.0.0.1', $port, is_master=False).set('later', 'x')" 2>/dev/null ) &
setter=$!
eq "$(COHORT_STORE=torch://127.0.0.1:$port "$kv" --timeout 20000 get /later)" x \
  "get waits for a key a torch client sets later"
wait $setter
eq "$("$kv" list | tr '\n' ' ')" "a n " "list under the prefix, relative names"
eq "$("$kv" num-keys)" 2 "num-keys under the prefix"
"$kv" delete a
eq "$("$kv" list | tr '\n' ' ')" "n " "delete"
# torch's client sees cohort's key under the prefix (as "/../pfx/n": torch
# prepends "/", so read it with a raw-prefix-free address instead)
eq "$(COHORT_STORE=torch://127.0.0.1:$port "$kv" get pfx/n)" 3 "the key as torch stores it"
COHORT_STORE=torch://127.0.0.1:$port "$kv" set /stop 1
echo "cohort's TCPStore client against torch's TCPStore: ok"

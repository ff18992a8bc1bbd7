#!/usr/bin/env bash
# etcds://: the etcd backend over TLS against a real etcd started with TLS
# and client-certificate auth (mTLS), certificates made here with openssl.
# Usage: test_etcd_tls.sh BUILD_DIR   (uses BUILD_DIR's cohort-kv and plugin)
# Checks: set/get with CA + client cert + etcd auth (the token goes inside
# TLS); a 2-rank group under cohortrun over etcds://; an untrusted server certificate is refused at once (COHORT_ERR_AUTH,
# exit 4) naming the TLS failure; no client certificate is refused; TLS
# variables with a plain etcd:// address are refused; plain HTTP to a
# member that is not loopback warns that the token crosses unprotected.
set -euo pipefail
build=$(cd "$1" && pwd)
kv=$build/tools/cohort-kv/cohort-kv
tmp=$(mktemp -d /tmp/cohort-etcd-tls.XXXXXX)
etcd_pid=
cleanup() { [ -n "$etcd_pid" ] && kill -9 "$etcd_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/etcd.log" ] && tail -5 "$tmp/etcd.log" >&2; exit 1; }
cd "$tmp"

# --- certificates: a CA, a server cert for 127.0.0.1/localhost, a client
# cert; and a second, unrelated CA.
ossl() { openssl "$@" >/dev/null 2>&1 || fail "openssl $*"; }
ossl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=cohort-test-ca
ossl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.pem -days 2 -subj /CN=rogue-ca
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >srv.ext
printf 'extendedKeyUsage=clientAuth\n' >cli.ext
ossl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1
ossl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile srv.ext
# No CommonName: etcd's gateway refuses (HTTP 400) a client certificate
# with one once auth is on (it would not use it as the user name).
ossl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /O=cohort-test-client
ossl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile cli.ext

# --- one etcd member: clients over https with client-cert auth, peers http
# on loopback. Free ports from the kernel (bind to 0 and read back).
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
for attempt in 1 2 3; do
  cport=$(free_port); pport=$(free_port)
  etcd --name m0 --data-dir "$tmp/data" \
       --listen-client-urls "https://127.0.0.1:$cport" --advertise-client-urls "https://127.0.0.1:$cport" \
       --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
       --initial-cluster "m0=http://127.0.0.1:$pport" \
       --cert-file server.pem --key-file server.key --client-cert-auth --trusted-ca-file ca.pem \
       >"$tmp/etcd.log" 2>&1 &
  etcd_pid=$!
  ctl=(etcdctl --endpoints "https://127.0.0.1:$cport" --cacert ca.pem --cert client.pem --key client.key
       --dial-timeout 2s --command-timeout 5s)
  for _ in $(seq 100); do
    "${ctl[@]}" endpoint health >/dev/null 2>&1 && break 2
    kill -0 "$etcd_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; etcd_pid=; rm -rf "$tmp/data"
done
[ -n "$etcd_pid" ] || fail "etcd with TLS did not start"

# etcd auth on: the job's user has the token as its password, as in
# docs/etcd.md.
ctlq() { "${ctl[@]}" "$@" >/dev/null 2>&1 || fail "etcdctl $*"; }
ctlq user add root:rootpw
ctlq user add tlsjob:s3cret-token
ctlq role add tlsjob
ctlq role grant-permission tlsjob --prefix=true readwrite /cohort/tlsjob/
ctlq user grant-role tlsjob tlsjob
ctlq auth enable

export COHORT_JOB_ID=tlsjob COHORT_TOKEN=s3cret-token COHORT_ETCD_AUTH=on
addr="etcds://127.0.0.1:$cport/cohort"
export COHORT_ETCD_CACERT=$tmp/ca.pem COHORT_ETCD_CERT=$tmp/client.pem COHORT_ETCD_KEY=$tmp/client.key

echo "== set/get over TLS (CA, client certificate, etcd auth)"
"$kv" --addr "$addr" --connect-timeout 10000 set greeting "over tls" || fail "set over etcds://"
out=$("$kv" --addr "$addr" --connect-timeout 10000 get greeting) || fail "get over etcds://"
[ "$out" = "over tls" ] || fail "get returned '$out'"
grep -q "over tls" <<<"$("${ctl[@]}" --user root:rootpw get /cohort/tlsjob/k/greeting)" || fail "key not in etcd"
# The bare host name is checked too (localhost is in the certificate).
out=$("$kv" --addr "etcds://localhost:$cport/cohort" get greeting) || fail "get via localhost"

echo "== a 2-rank group over etcds:// (rendezvous, leases, barrier) under cohortrun"
hello=$build/bench/startup/hello_cohort
if [ -x "$hello" ]; then
  printf '%s\n' "$COHORT_TOKEN" >"$tmp/token"; chmod 600 "$tmp/token"
  out=$("$build/tools/cohortrun/cohortrun" -n 2 --store "$addr" --job-id tlsjob \
        --token-file "$tmp/token" "$hello" 2>&1) || fail "group over etcds://: $out"
  # init also puts each rank's leased alive/<rank> key (it fails without
  # it); finalize revokes the leases, the rendezvous records stay.
  n=$("${ctl[@]}" --user root:rootpw get --prefix /cohort/tlsjob/k/ --keys-only | grep -c . || true)
  [ "$n" -gt 1 ] || fail "the group left no rendezvous keys in etcd ($n keys)"
fi

echo "== untrusted server certificate: refused at once, not retried"
t0=$(date +%s%N)
set +e
out=$(COHORT_ETCD_CACERT=$tmp/rogue.pem "$kv" --addr "$addr" --connect-timeout 8000 get greeting 2>&1)
rc=$?
set -e
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 4 ] || fail "rogue CA: exit $rc (want 4, authentication): $out"
grep -q "TLS" <<<"$out" || fail "rogue CA: message does not say TLS: $out"
grep -q "rogue.pem" <<<"$out" || fail "rogue CA: message does not name the CA file: $out"
[ $ms -lt 5000 ] || fail "rogue CA: took $ms ms (should fail at once)"
echo "  $out"

echo "== no client certificate: the member refuses the handshake"
set +e
out=$(env -u COHORT_ETCD_CERT -u COHORT_ETCD_KEY "$kv" --addr "$addr" --connect-timeout 1500 get greeting 2>&1)
rc=$?
set -e
[ $rc != 0 ] || fail "no client cert: succeeded"
grep -qi "ssl\|tls\|alert\|certificate\|handshake" <<<"$out" || fail "no client cert: unclear error: $out"
echo "  $out"

echo "== TLS settings with a plain etcd:// address are refused"
set +e
out=$("$kv" --addr "etcd://127.0.0.1:$cport/cohort" get greeting 2>&1)
rc=$?
set -e
[ $rc != 0 ] || fail "CACERT with etcd:// accepted"
grep -q "COHORT_ETCD_CACERT is set but .* is plain HTTP: use etcds://" <<<"$out" || fail "unclear: $out"
set +e
out=$(COHORT_ETCD_CACERT=$tmp/missing.pem "$kv" --addr "$addr" get greeting 2>&1)
set -e
grep -q "COHORT_ETCD_CACERT=$tmp/missing.pem: cannot read it" <<<"$out" || fail "missing CA file: $out"
set +e
out=$(env -u COHORT_ETCD_CERT "$kv" --addr "$addr" get greeting 2>&1)
set -e
grep -q "COHORT_ETCD_KEY is set without COHORT_ETCD_CERT" <<<"$out" || fail "key without cert: $out"

echo "== plain HTTP: a warning for a member that is not loopback, none for loopback"
unset COHORT_ETCD_CACERT COHORT_ETCD_CERT COHORT_ETCD_KEY
export COHORT_ETCD_AUTH=auto
# The machine's own name: not textually loopback, and still this host
# (nothing leaves it; port 1 is closed).
host=$(hostname)
set +e
out=$("$kv" --addr "etcd://$host:1/cohort" --connect-timeout 300 get greeting 2>&1)
set -e
grep -q "plain HTTP to a member that is not loopback: the job token" <<<"$out" || fail "no warning for $host: $out"
set +e
out=$("$kv" --addr "etcd://127.0.0.1:1/cohort" --connect-timeout 300 get greeting 2>&1)
set -e
grep -q "not loopback" <<<"$out" && fail "warning for loopback: $out"
echo "== etcds:// tests passed"

#!/bin/bash
# ns.sh TAG [env]: one pinned, nice'd 100000-call run (m.sh) with nstat deltas (TCP segments, ACKs, backlog) and /proc/stat steal
D=$(dirname $0); tag=$1; shift
nstat -n >/dev/null; s0=$(awk '/^cpu /{print $9}' /proc/stat)
PIN=1 NICE=-19 $D/m.sh $tag 8 100000 "$@" 2>&1 | grep -v '^\[' | tr '\n' ' '
s1=$(awk '/^cpu /{print $9}' /proc/stat)
echo "steal_ticks=$((s1-s0))"
nstat 2>/dev/null | awk -v t=$tag '/TcpOutSegs|TcpInSegs|PureAcks|HPAcks|DelayedACK|Backlog|QuickAck|TCPHPHits|TCPOrigDataSent/{printf "%s %s=%.3f/call\n", t, $1, $2/100000}'

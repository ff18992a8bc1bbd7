#!/bin/bash
# bench/compare/tcp_knobs_ab.sh [ROUNDS] - the TCP cells issue #14 missed, cohort's
# transport settings against each other and Open MPI's tcp btl in the same rounds:
# interleaved launches, the order rotating each round (ab_common.sh), so that drift
# hits every variant alike. Needs root for the netns2 configuration (two network
# namespaces joined by a veth pair, one rank in each, as run.sh's netns2).
#
#   CONFIGS="netns2 tcp2"   netns2: 2 namespaces; tcp2: loopback, 2 ranks
#   VARIANTS="default spin200 slice128k bind ompi"
#       default    cohort as shipped
#       spinN      COHORT_TCP_SPIN_US=N (busy-poll N us before sleeping in poll)
#       sliceNk    COHORT_TCP_SEND_SLICE=N KiB (a pass writes at most that much per
#                  send, then reads)
#       duplexNk   COHORT_TCP_DUPLEX_SLICE=N KiB (the duplex rule: sends to a peer
#                  the step also receives from are cut at N KiB; duplex0k: off,
#                  every send whole as before 2026-12-02 09:20 UTC)
#       bufNk      COHORT_TCP_BUFSIZE=N KiB (SO_SNDBUF/SO_RCVBUF: the window bounds how
#                  far a rank's next block runs ahead of the peer's receive)
#       bind       rank i on core i (taskset), as Open MPI binds its 2 ranks
#       colo       both ranks on core 1 (taskset): the placement an unbound pair
#                  can fall into (loopback wake-ups pull a wakee to its waker's
#                  CPU); with bind, the two modes an unbound launch can be in
#       bc_NAME    COHORT_ALGO_BROADCAST=NAME (e.g. bc_tree, bc_tree_rdv, bc_flat); the
#                  other collectives keep their selection
#       cc_NAME    COHORT_TCP_CONGESTION=NAME (cc_system: the system's algorithm on
#                  every connection, as before 2026-12-04; cc_reno, cc_cubic, cc_bbr)
#       ompi       Open MPI, pml ob1, btl tcp,self (run.sh's flags and binding)
#   OPS=all_gather,all_reduce,broadcast SIZES=8,1048576,4194304 T=0.1
#   OSU=1   OSU style: a barrier between iterations, the op alone timed (cohort-perf
#           --osu, mpi_coll_bench -o)
#
# Prints per configuration, op and size: each variant's median over launches of
# the launch's mean time (nccl-tests' time column, run.sh's measure), with the
# launches' min-max and cohort's median p99, and the per-round ratio to Open MPI
# (median [min..max]). Raw outputs and info.txt in OUT (results/tcp-knobs-<date>).
set -u
. "$(dirname "$0")/ab_common.sh"
ab_args tcp-knobs "$@"
ab_tmp tcp-knobs
CONFIGS=${CONFIGS:-"netns2 tcp2"}
VARIANTS=${VARIANTS:-"default spin200 slice128k bind ompi"}
OPS=${OPS:-all_gather,all_reduce,broadcast}
SIZES=${SIZES:-8,1048576,4194304}
T=${T:-0.1}
OSU=${OSU:-}
OSU_MPI=() OSU_COH=() MODE=back-to-back
[ -n "$OSU" ] && OSU_MPI=(-o) OSU_COH=(--osu) MODE=osu
MOPS=$(echo "$OPS" | sed 's/all_reduce/allreduce/; s/all_gather/allgather/; s/broadcast/bcast/; s/reduce_scatter/reduce_scatter/')

NS_A=cohtkA$$ NS_B=cohtkB$$ IP_A=10.233.0.1 IP_B=10.233.0.2
ns_down() { ip netns del $NS_A 2>/dev/null; ip netns del $NS_B 2>/dev/null; rm -rf "$TMP"; }
ns_up() {
    ip netns add $NS_A && ip netns add $NS_B || return 1
    ip link add tkv0$$ type veth peer name tkv1$$ || return 1
    ip link set tkv0$$ netns $NS_A && ip link set tkv1$$ netns $NS_B || return 1
    ip -n $NS_A link set tkv0$$ name coh0 && ip -n $NS_B link set tkv1$$ name coh0 || return 1
    ip -n $NS_A addr add $IP_A/24 dev coh0 && ip -n $NS_B addr add $IP_B/24 dev coh0 || return 1
    local ns
    for ns in $NS_A $NS_B; do ip -n $ns link set lo up && ip -n $ns link set coh0 up || return 1; done
    # mpirun's launch agent for the two "hosts" (run.sh's ns_rsh)
    cat > "$TMP/ns_rsh" <<EOT
#!/bin/sh
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in $IP_A) ns=$NS_A ;; $IP_B) ns=$NS_B ;; *) echo "ns_rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns /bin/sh -c "\$*"
EOT
    chmod +x "$TMP/ns_rsh"
}

if [ -z "$SUMMARIZE_ONLY" ]; then
    trap ns_down EXIT
    if [[ " $CONFIGS " == *" netns2 "* ]] && ! ns_up; then
        echo "cannot create network namespaces (root and ip netns needed): netns2 left out" >&2
        CONFIGS=${CONFIGS//netns2/}
    fi
    mpicc.openmpi -O2 -o "$TMP/mpi_coll_bench" /work/shared/peers/coll/mpi_coll_bench.c 2>/dev/null ||
        mpicc.openmpi -O2 -o "$TMP/mpi_coll_bench" "${PEERS_SRC:-/work/shared/peers/coll}/mpi_coll_bench.c" || exit 2
    printf 'rank 0=%s slot=0\nrank 1=%s slot=1\n' $IP_A $IP_B > "$TMP/rankfile"
    ab_info "# configs: $CONFIGS  variants: $VARIANTS  ops: $OPS  sizes: $SIZES  T=$T  rounds: $ROUNDS  mode: $MODE" \
        "# open mpi: $(mpirun.openmpi --version 2>&1 | head -1)  pml ob1, btl tcp,self; 2 ranks bound one per core" \
        "# net.ipv4.tcp_congestion_control=$(sysctl -n net.ipv4.tcp_congestion_control) tcp_rmem=$(sysctl -n net.ipv4.tcp_rmem | tr '\t' ' ') tcp_wmem=$(sysctl -n net.ipv4.tcp_wmem | tr '\t' ' ')"
fi

# variant V: one launch of every configuration (the file names carry the configuration)
variant() {
    local v=$1 cfg env=() ts0=() ts1=()
    case $v in
        spin*) env=(COHORT_TCP_SPIN_US=${v#spin}) ;;
        slice*k) local k=${v#slice}; env=(COHORT_TCP_SEND_SLICE=$((${k%k} * 1024))) ;;
        duplex*k) local k=${v#duplex}; env=(COHORT_TCP_DUPLEX_SLICE=$((${k%k} * 1024))) ;;
        buf*k) local k=${v#buf}; env=(COHORT_TCP_BUFSIZE=$((${k%k} * 1024))) ;;
        bind) ts0=(taskset -c 0) ts1=(taskset -c 1) ;;
        colo) ts0=(taskset -c 1) ts1=(taskset -c 1) ;;
        bc_*) env=(COHORT_ALGO_BROADCAST=${v#bc_}) ;;
        cc_*) env=(COHORT_TCP_CONGESTION=${v#cc_}) ;;
        default | ompi) ;;
        *) echo "unknown variant $v" >&2; return 1 ;;
    esac
    for cfg in $CONFIGS; do
        echo "## config $cfg"
        if [ "$v" = ompi ]; then
            if [ "$cfg" = netns2 ]; then
                timeout 300 ip netns exec $NS_A mpirun.openmpi --host $IP_A:1,$IP_B:1 -n 2 \
                    --rankfile "$TMP/rankfile" --mca plm_rsh_agent "$TMP/ns_rsh" \
                    --mca oob_tcp_if_include coh0 --mca pml ob1 --mca btl tcp,self \
                    --mca btl_tcp_if_include coh0 "$TMP/mpi_coll_bench" "${OSU_MPI[@]}" -c "$MOPS" -s "$SIZES" -t "$T" -l ompi
            else
                timeout 300 mpirun.openmpi -n 2 --bind-to core --mca pml ob1 --mca btl tcp,self \
                    --mca btl_tcp_if_include lo "$TMP/mpi_coll_bench" "${OSU_MPI[@]}" -c "$MOPS" -s "$SIZES" -t "$T" -l ompi
            fi
            continue
        fi
        local args=(--transport tcp --coll "$OPS" --sizes "$SIZES" --time "$T" --in-place no --percentiles "${OSU_COH[@]}" -l "$v")
        if [ "$cfg" = netns2 ]; then
            local port=$((20000 + RANDOM % 20000)) tok
            tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
            local common=(WORLD_SIZE=2 MASTER_ADDR=$IP_A MASTER_PORT=$port COHORT_JOB_ID=tk$$-$v
                          COHORT_TOKEN=$tok LOCAL_WORLD_SIZE=1 "${env[@]}")
            timeout 300 ip netns exec $NS_B env "${common[@]}" RANK=1 LOCAL_RANK=0 "${ts1[@]}" \
                "$PERF" "${args[@]}" > /dev/null 2>&1 &
            local p=$!
            timeout 300 ip netns exec $NS_A env "${common[@]}" RANK=0 LOCAL_RANK=0 "${ts0[@]}" \
                "$PERF" "${args[@]}"
            wait $p
        else
            local b=()
            [ "$v" = bind ] && b=(--bind core)
            local tsl=()
            # colo: the forked ranks inherit the launcher's one-CPU mask (bind
            # binds them itself: --bind core)
            [ "$v" = colo ] && tsl=(taskset -c 1)
            env "${env[@]}" timeout 300 "${tsl[@]}" "$PERF" --np 2 "${b[@]}" "${args[@]}"
        fi
    done
}

[ -z "$SUMMARIZE_ONLY" ] && ab_rounds $VARIANTS

ab_python - "$OUT" <<'PY'
import statistics as S, sys
from ab_rows import launches, lines, perf_row, MPI_OPS as name
out = sys.argv[1]
# d[(cfg, op, size)][variant][round] = (mean, p99 or None)
d = {}
for v, r, f in launches(out):
    for cfg, op, x in lines(f):
        if not x or cfg is None: continue
        row = perf_row(op, x)
        if x[0] in name and len(x) >= 4 and x[1].isdigit():      # mpi_coll_bench
            d.setdefault((cfg, name[x[0]], int(x[1])), {}).setdefault(v, {})[r] = (float(x[3]), None)
        elif row:                                                   # cohort-perf --percentiles
            d.setdefault((cfg, op, row[0]), {}).setdefault(v, {})[r] = (row[1], row[3])
print(f"{'config':7} {'op':10} {'size':>9}  {'variant':10} {'n':>2} {'median us':>10} {'min-max us':>19} {'p99':>9}  vs ompi (per round)")
for key in sorted(d):
    vs = d[key]; om = vs.get("ompi", {})
    for v in sorted(vs, key=lambda v: (v == "ompi", v)):
        runs = vs[v]; t = [a for a, _ in runs.values()]
        p99 = [b for _, b in runs.values() if b is not None]
        rat = [runs[r][0] / om[r][0] for r in runs if r in om and om[r][0] > 0]
        rs = f"x{S.median(rat):.2f} [{min(rat):.2f}..{max(rat):.2f}]" if rat and v != "ompi" else ""
        print(f"{key[0]:7} {key[1]:10} {key[2]:>9}  {v:10} {len(t):>2} {S.median(t):10.1f} "
              f"{min(t):9.1f}-{max(t):<9.1f} {S.median(p99) if p99 else float('nan'):9.1f}  {rs}")
PY

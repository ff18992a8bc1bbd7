/*
 * tcp_bench.c - loopback numbers for the tcp transport alone (no collective
 * algorithm, no reduction): ping-pong latency (half round trip) and
 * bandwidth, and bidirectional exchange bandwidth between 2 ranks.
 *
 *   tcp_bench [--quick] [--sizes a,b,c]   (sizes in bytes, <= 64 MiB)
 *
 * TCP_BENCH_PIN=1 pins rank r to CPU r.
 * Ranks are forked with the test fixture (hand-built groups). --quick runs
 * few iterations (ctest smoke: the path works, numbers are printed).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

static int quick;
static size_t only[32];
static int nonly;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int iters_for(size_t len)
{
    int it = len <= 4096 ? 20000 : len <= 65536 ? 5000 : len <= (1u << 20) ? 500 : 40;
    return quick ? (it / 100 > 5 ? it / 100 : 5) : it;
}

static int bench_body(tf_rank *r)
{
    if (getenv("TCP_BENCH_PIN")) {
        /* One CPU per rank: measures the transport without the scheduler
         * stacking both ranks on one CPU (wake-affine). */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r->rank % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    if (tf_connect(r))
        return 1;
    const size_t sizes[] = {0, 8, 64, 1024, 4096, 16384, 65536, 262144, 1u << 20, 4u << 20,
                            16u << 20, 64u << 20};
    size_t maxlen = 64u << 20;
    unsigned char *sb = malloc(maxlen), *rb = malloc(maxlen);
    uint64_t *lat = malloc(sizeof(uint64_t) * 40000);
    TF_CHECK(r, sb && rb && lat, "malloc");
    memset(sb, 1, maxlen);
    memset(rb, 0, maxlen);
    int peer = 1 - r->rank;
    uint64_t seq = 0;
    if (r->rank == 0)
        printf("%10s %8s %10s %10s %10s %12s %10s %12s\n", "bytes", "iters", "p50_us", "avg_us",
               "p99_us", "pingpong_GBs", "xchg_p50", "exchange_GBs");
    size_t nsz = nonly ? (size_t)nonly : sizeof sizes / sizeof sizes[0];
    for (size_t k = 0; k < nsz; k++) {
        size_t len = nonly ? only[k] : sizes[k];
        if (len > maxlen)
            continue;
        int it = iters_for(len), warm = it / 10 + 1;
        coh_call c = tf_call(++seq, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, len);
        coh_xfer op;
        for (int i = 0; i < it + warm; i++) {
            uint64_t t0 = tf_now_ns();
            c.seq = ++seq;
            if (r->rank == 0) {
                tf_op(&op, r, &c, COH_MSG_COLL, peer, 1, sb, len, 0);
                TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, &op, 1)));
                tf_op(&op, r, &c, COH_MSG_COLL, peer, 0, rb, len, 1);
                TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, &op, 1)));
            } else {
                tf_op(&op, r, &c, COH_MSG_COLL, peer, 0, rb, len, 0);
                TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, &op, 1)));
                tf_op(&op, r, &c, COH_MSG_COLL, peer, 1, sb, len, 1);
                TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, &op, 1)));
            }
            if (i >= warm)
                lat[i - warm] = tf_now_ns() - t0;
        }
        /* Exchange: both directions in one batch (a ring step for 2 ranks). */
        int xit = it / 2 + 1;
        uint64_t x0 = 0, *xl = lat + it; /* second half of lat[] is free */
        for (int i = 0; i < xit + 1; i++) {
            uint64_t s0 = tf_now_ns();
            if (i == 1)
                x0 = s0;
            c.seq = ++seq;
            coh_xfer ops[2];
            tf_op(&ops[0], r, &c, COH_MSG_COLL, peer, 1, sb, len, 0);
            tf_op(&ops[1], r, &c, COH_MSG_COLL, peer, 0, rb, len, 0);
            TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, 2)));
            if (i >= 1 && it + xit <= 40000)
                xl[i - 1] = tf_now_ns() - s0;
        }
        uint64_t xns = tf_now_ns() - x0;
        if (r->rank == 0) {
            qsort(lat, (size_t)it, sizeof *lat, cmp_u64);
            double sum = 0;
            for (int i = 0; i < it; i++)
                sum += (double)lat[i];
            double half_p50 = (double)lat[it / 2] / 2e3, half_avg = sum / it / 2e3;
            double half_p99 = (double)lat[(it * 99) / 100] / 2e3;
            /* GB/s = 1e9 bytes/s: bytes / (half round trip). */
            double bw = len ? (double)len / (half_avg * 1e3) : 0;
            double xbw = len ? (double)len * xit / (double)xns : 0;
            qsort(xl, (size_t)xit, sizeof *xl, cmp_u64);
            printf("%10zu %8d %10.2f %10.2f %10.2f %12.3f %10.2f %12.3f\n", len, it, half_p50,
                   half_avg, half_p99, bw, (double)xl[xit / 2] / 1e3, xbw);
            fflush(stdout);
        }
    }
    free(sb);
    free(rb);
    free(lat);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            for (char *p = argv[++i]; *p && nonly < 32; p += *p == ',')
                only[nonly++] = (size_t)strtoull(p, &p, 0);
    tf_opts o = {.nranks = 2, .timeout_ms = 60000, .deadline_ms = 600000};
    tf_result res;
    tf_shared *sh = tf_run(&o, bench_body, NULL, &res);
    int bad = res.exit[0] || res.exit[1] || res.hung[0] || res.hung[1];
    if (bad)
        fprintf(stderr, "tcp_bench: rank exit %d/%d: %s | %s\n", res.exit[0], res.exit[1],
                sh->msg[0], sh->msg[1]);
    tf_done(sh);
    return bad;
}

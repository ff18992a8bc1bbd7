/*
 * test_coll_sim.c - every registered algorithm of every collective, on
 * simulated topologies (flat message-only groups, one host with shared
 * memory, several hosts with shared memory inside), world sizes 1..8 and
 * non-contiguous host layouts, checked exactly against the references of
 * cases.c. Ranks are threads over the in-process transports of sim.c, so
 * the whole matrix runs in seconds; test_coll.c runs the same cases over
 * the real transports in real processes.
 *
 * Also: the selection table's defaults and its COHORT_ALGO_* errors,
 * COHORT_CHUNK_BYTES, send/recv with tags, and count 0 / size 1.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cases.h"
#include "coll/coll_int.h"
#include "group/group_internal.h"
#include "sim.h"
#include "support/support.h"

#define CHUNK 64 /* COHORT_CHUNK_BYTES for the matrix: many pieces on small counts */

static cohort_status sim_issue(void *ctx, const cc_case *k, const void *send, void *recv)
{
    cohort_group *g = ctx;
    coh_call c;
    memset(&c, 0, sizeof c);
    c.seq = ++g->seq;
    c.coll = (uint8_t)k->coll;
    c.dtype = (uint8_t)k->dtype;
    c.redop = (int8_t)k->op;
    c.root = k->root;
    c.count = k->count;
    c.file = __FILE__;
    c.line = __LINE__;
    c.send = send;
    c.recv = recv;
    return coh_coll_run(g, &c);
}

typedef struct run_arg {
    const cc_case *cases;
    int ncases;
} run_arg;

static int rank_cases(int rank, cohort_group *g, void *arg)
{
    run_arg *a = arg;
    char msg[1024];
    for (int i = 0; i < a->ncases; i++)
        if (cc_check(rank, g->size, &a->cases[i], sim_issue, g, msg, sizeof msg)) {
            sim_fail(sim_of(g), "%s", msg);
            return 1;
        }
    return 0;
}

static int rank_float_identity(int rank, cohort_group *g, void *arg)
{
    (void)arg;
    char msg[1024];
    if (cc_check_float_identity(rank, g->size, 5 * CHUNK / 4 + 3, sim_issue, g, msg, sizeof msg)) {
        sim_fail(sim_of(g), "%s", msg);
        return 1;
    }
    return 0;
}

static void algo_env(int coll, char *out, size_t len)
{
    int n = snprintf(out, len, "COHORT_ALGO_%s", coh_coll_label(coll));
    for (int i = 12; i < n; i++)
        if (out[i] >= 'a' && out[i] <= 'z')
            out[i] = (char)(out[i] - 32);
}

typedef struct topo {
    const char *name;
    int n;
    int hosts[SIM_MAX];
    int shm, tcp;
} topo;

static const int colls[] = {COH_COLL_ALL_REDUCE, COH_COLL_BROADCAST,      COH_COLL_REDUCE,
                            COH_COLL_ALL_GATHER, COH_COLL_GATHER,         COH_COLL_SCATTER,
                            COH_COLL_REDUCE_SCATTER, COH_COLL_ALL_TO_ALL, COH_COLL_BARRIER};

/* Runs every collective with every algorithm this topology supports (each
 * forced through its COHORT_ALGO_* variable, then "auto"). */
static void run_topology(const topo *t)
{
    static cc_case cases[4096];
    sim_install();
    setenv("COHORT_CHUNK_BYTES", "64", 1);
    sim_world *w = sim_create(t->n, t->hosts, t->shm, t->tcp);
    ck_assert_ptr_nonnull(w);
    int ran = 0;
    for (size_t ci = 0; ci < sizeof colls / sizeof colls[0]; ci++) {
        int coll = colls[ci];
        char var[64];
        algo_env(coll, var, sizeof var);
        int nc = cc_matrix(coll, t->n, cc_full(), CHUNK, cases, 4096);
        run_arg a = {cases, nc};
        coh_call probe;
        memset(&probe, 0, sizeof probe);
        probe.coll = (uint8_t)coll;
        probe.count = 1;
        /* "auto" (no variable) first, then each usable algorithm forced */
        const coh_algo *list[32] = {NULL};
        int nl = 1;
        for (const coh_algo *const *all = coh_coll_algos(); *all; all++)
            if ((*all)->coll == coll && (*all)->supports(sim_group(w, 0), &probe) && nl < 32)
                list[nl++] = *all;
        for (int i = 0; i < nl; i++) {
            const coh_algo *al = list[i];
            if (al)
                setenv(var, al->name, 1);
            else
                unsetenv(var);
            cohort_status st;
            const coh_algo *sel = coh_coll_select(sim_group(w, 0), &probe, &st);
            ck_assert_msg(sel != NULL, "%s: %s: no algorithm", t->name, var);
            if (al)
                ck_assert_ptr_eq(sel, al);
            int rc = sim_run(w, rank_cases, &a);
            ck_assert_msg(rc == 0, "%s: %s=%s: %s", t->name, var, al ? al->name : "auto",
                          sim_error(w));
            ran++;
        }
        unsetenv(var);
    }
    ck_assert_int_gt(ran, 0);
    /* random floats: every rank holds the same bits, under every all_reduce */
    coh_call ar;
    memset(&ar, 0, sizeof ar);
    ar.coll = COH_COLL_ALL_REDUCE;
    for (const coh_algo *const *all = coh_coll_algos(); *all; all++) {
        if ((*all)->coll != COH_COLL_ALL_REDUCE || !(*all)->supports(sim_group(w, 0), &ar))
            continue;
        setenv("COHORT_ALGO_ALL_REDUCE", (*all)->name, 1);
        int rc = sim_run(w, rank_float_identity, NULL);
        ck_assert_msg(rc == 0, "%s: float identity (%s): %s", t->name, (*all)->name,
                      sim_error(w));
    }
    unsetenv("COHORT_ALGO_ALL_REDUCE");
    sim_destroy(w);
    unsetenv("COHORT_CHUNK_BYTES");
    sim_uninstall();
}

/* Messages only (as COHORT_TRANSPORT=tcp), every world size of the brief. */
static const topo flat[] = {
    {"flat-1", 1, {0}, 0, 1},
    {"flat-2", 2, {0}, 0, 1},
    {"flat-3", 3, {0}, 0, 1},
    {"flat-4", 4, {0}, 0, 1},
    {"flat-5", 5, {0}, 0, 1},
    {"flat-8", 8, {0}, 0, 1},
};
START_TEST(test_flat) { run_topology(&flat[_i]); }
END_TEST

/* One host with shared memory: the shm entries plus every message
 * algorithm forced over the same group. */
static const topo onehost[] = {
    {"onehost-2", 2, {0}, 1, 0},
    {"onehost-3", 3, {0}, 1, 0},
    {"onehost-8", 8, {0}, 1, 0},
};
START_TEST(test_onehost) { run_topology(&onehost[_i]); }
END_TEST

/* Several hosts: hierarchical algorithms, with uneven and interleaved
 * layouts and hosts holding a single rank (no segment there). */
static const topo multihost[] = {
    {"hosts-2x2", 4, {0, 0, 1, 1}, 1, 0},
    {"hosts-3-interleaved", 5, {0, 1, 0, 1, 1}, 1, 0},
    {"hosts-1+1+2", 4, {0, 1, 2, 2}, 1, 0},
    {"hosts-round-robin", 6, {0, 1, 2, 0, 1, 2}, 1, 0},
    {"hosts-3+2+3", 8, {0, 0, 0, 1, 1, 2, 2, 2}, 1, 0},
    {"hosts-2+1", 3, {0, 0, 1}, 1, 0},
};
START_TEST(test_multihost) { run_topology(&multihost[_i]); }
END_TEST

/* ---- selection ---- */

static const coh_algo *pick(cohort_group *g, int coll, int dt, size_t count, cohort_status *st)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.coll = (uint8_t)coll;
    c.dtype = (uint8_t)dt;
    c.redop = coll == COH_COLL_ALL_REDUCE ? COHORT_SUM : -1;
    c.count = count;
    return coh_coll_select(g, &c, st);
}

/* The flat broadcast's rule: above 512 KiB, one host, more ranks than CPUs. */
START_TEST(test_flat_pref)
{
    ck_assert(coh_bc_flat_pref(4, 1, 2, 1 << 20));
    ck_assert(coh_bc_flat_pref(3, 1, 2, (512 << 10) + 1));
    ck_assert(!coh_bc_flat_pref(4, 1, 2, 512 << 10)); /* the tree's range */
    ck_assert(!coh_bc_flat_pref(2, 1, 2, 64 << 20));  /* as many ranks as cores */
    ck_assert(!coh_bc_flat_pref(4, 1, 8, 64 << 20));
    ck_assert(!coh_bc_flat_pref(4, 2, 2, 64 << 20)); /* two hosts: the root's link */
    ck_assert(!coh_bc_flat_pref(4, 1, -1, 64 << 20)); /* CPU count unknown */
}
END_TEST

/* tree_coarse's rule: flat's (one host, more ranks than CPUs), from 16 MiB,
 * at least 4 ranks (3: the tree's root sends both copies, as flat's). */
START_TEST(test_coarse_pref)
{
    ck_assert(coh_bc_coarse_pref(4, 1, 2, 16 << 20));
    ck_assert(coh_bc_coarse_pref(8, 1, 2, (size_t)64 << 20));
    ck_assert(coh_bc_coarse_pref(5, 1, 4, 16 << 20));
    ck_assert(!coh_bc_coarse_pref(4, 1, 2, (16 << 20) - 1)); /* flat's range */
    ck_assert(coh_bc_flat_pref(4, 1, 2, (16 << 20) - 1));
    ck_assert(!coh_bc_coarse_pref(3, 1, 2, 64 << 20)); /* 3 ranks: flat */
    ck_assert(coh_bc_flat_pref(3, 1, 2, 64 << 20));
    ck_assert(!coh_bc_coarse_pref(4, 1, 4, 64 << 20));  /* as many cores as ranks */
    ck_assert(!coh_bc_coarse_pref(4, 2, 2, 64 << 20));  /* two hosts: host_flat's */
    ck_assert(!coh_bc_coarse_pref(4, 1, -1, 64 << 20)); /* CPU count unknown */
}
END_TEST

/* host_flat's rule: from 4 MiB, 2-4 hosts, some host with two ranks. */
START_TEST(test_hostflat_pref)
{
    ck_assert(coh_bc_hostflat_pref(4, 2, 4 << 20));
    ck_assert(coh_bc_hostflat_pref(8, 4, 64 << 20));
    ck_assert(coh_bc_hostflat_pref(3, 2, 16 << 20));
    ck_assert(!coh_bc_hostflat_pref(4, 2, (4 << 20) - 1)); /* tree / scatter_allgather */
    ck_assert(!coh_bc_hostflat_pref(4, 1, 64 << 20));  /* one host */
    ck_assert(!coh_bc_hostflat_pref(2, 2, 64 << 20));  /* one rank per host: no relay */
    ck_assert(!coh_bc_hostflat_pref(10, 5, 64 << 20)); /* the root's link: 4 copies at most */
}
END_TEST

/* reduce_scatter's direct rule: inputs up to 64 KiB per rank, one host,
 * more ranks than CPUs (the ring's n-1 dependent steps each wait for a
 * descheduled neighbour there). */
START_TEST(test_rs_direct_pref)
{
    ck_assert(coh_rs_direct_pref(4, 1, 2, 16));
    ck_assert(coh_rs_direct_pref(3, 1, 2, 64 << 10));
    ck_assert(coh_rs_direct_pref(8, 1, 2, 1));
    ck_assert(!coh_rs_direct_pref(4, 1, 2, (64 << 10) + 1)); /* the ring's range */
    ck_assert(!coh_rs_direct_pref(2, 1, 1, 16));             /* two ranks: one exchange either way */
    ck_assert(!coh_rs_direct_pref(4, 1, 4, 16));             /* as many cores as ranks */
    ck_assert(!coh_rs_direct_pref(4, 2, 2, 16));             /* two hosts: CPU counts may differ */
    ck_assert(!coh_rs_direct_pref(4, 1, 0, 16));             /* CPU count unknown */
}
END_TEST

START_TEST(test_select_defaults)
{
    cohort_status st;
    unsetenv("COHORT_ALGO_ALL_REDUCE");
    sim_world *w = sim_create(8, NULL, 0, 1);
    cohort_group *g = sim_group(w, 3);
    ck_assert_str_eq(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 256, &st)->name, "rd");
    ck_assert_str_eq(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 64 << 10, &st)->name,
                     "rabenseifner");
    ck_assert_str_eq(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 4 << 20, &st)->name, "ring");
    /* float16/bfloat16 sums fold once in float32, at every size */
    ck_assert_str_eq(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT16, 256, &st)->name, "direct");
    ck_assert_str_eq(pick(g, COH_COLL_ALL_REDUCE, COHORT_BFLOAT16, 4 << 20, &st)->name, "direct");
    ck_assert_str_eq(pick(g, COH_COLL_BROADCAST, COHORT_FLOAT32, 1, &st)->name, "tree");
    /* 8 ranks on one host: flat when they outnumber the online CPUs */
    ck_assert_str_eq(pick(g, COH_COLL_BROADCAST, COHORT_FLOAT32, 1 << 20, &st)->name,
                     sysconf(_SC_NPROCESSORS_ONLN) < 8 ? "flat" : "scatter_allgather");
    /* ... and from 16 MiB (4 Mi floats) the binomial tree in 4 pieces */
    ck_assert_str_eq(pick(g, COH_COLL_BROADCAST, COHORT_FLOAT32, 4 << 20, &st)->name,
                     sysconf(_SC_NPROCESSORS_ONLN) < 8 ? "tree_coarse" : "scatter_allgather");
    ck_assert_str_eq(pick(g, COH_COLL_BROADCAST, COHORT_FLOAT32, 128 << 10, &st)->name, "tree");
    /* reduce_scatter (count per rank; 8 ranks): direct for small inputs when
     * the ranks outnumber the CPUs, the ring otherwise */
    ck_assert_str_eq(pick(g, COH_COLL_REDUCE_SCATTER, COHORT_FLOAT32, 4, &st)->name,
                     sysconf(_SC_NPROCESSORS_ONLN) < 8 ? "direct" : "ring");
    ck_assert_str_eq(pick(g, COH_COLL_REDUCE_SCATTER, COHORT_FLOAT32, 4 << 10, &st)->name,
                     "ring");
    ck_assert_str_eq(pick(g, COH_COLL_ALL_GATHER, COHORT_FLOAT32, 16, &st)->name, "bruck");
    ck_assert_str_eq(pick(g, COH_COLL_ALL_GATHER, COHORT_FLOAT32, 1 << 20, &st)->name, "ring");
    ck_assert_str_eq(pick(g, COH_COLL_BARRIER, COHORT_UINT8, 0, &st)->name, "dissemination");
    ck_assert_str_eq(pick(g, COH_COLL_ALL_TO_ALL, COHORT_UINT8, 9, &st)->name, "pairwise");
    sim_destroy(w);
    /* two ranks: one exchange for small vectors, then the ring (halving
     * would be the ring without the pipeline) */
    w = sim_create(2, NULL, 0, 1);
    ck_assert_str_eq(pick(sim_group(w, 0), COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 1024, &st)->name,
                     "rd");
    ck_assert_str_eq(
        pick(sim_group(w, 0), COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 64 << 10, &st)->name, "ring");
    sim_destroy(w);
    /* one host with shared memory: shm for everything */
    w = sim_create(4, NULL, 1, 0);
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
        ck_assert_str_eq(pick(sim_group(w, 1), colls[i], COHORT_FLOAT32, 1000, &st)->name, "shm");
    sim_destroy(w);
    /* hosts with several ranks: hierarchical where there is one */
    int hosts[] = {0, 0, 1, 1};
    w = sim_create(4, hosts, 1, 0);
    ck_assert_str_eq(pick(sim_group(w, 2), COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 10, &st)->name,
                     "hier");
    ck_assert_str_eq(pick(sim_group(w, 2), COH_COLL_GATHER, COHORT_FLOAT32, 10, &st)->name,
                     "tree");
    sim_destroy(w);
    /* the same hosts with tcp forced: no hierarchy; broadcasts from 4 MiB
     * flat across the two hosts (1 << 20 floats), 1 MiB scatter+all-gather,
     * small ones the tree */
    w = sim_create(4, hosts, 1, 1);
    ck_assert_str_eq(pick(sim_group(w, 2), COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 10, &st)->name,
                     "rd");
    ck_assert_str_eq(pick(sim_group(w, 2), COH_COLL_BROADCAST, COHORT_FLOAT32, 1 << 20, &st)->name,
                     "host_flat");
    ck_assert_str_eq(pick(sim_group(w, 2), COH_COLL_BROADCAST, COHORT_FLOAT32, 256 << 10, &st)->name,
                     "scatter_allgather");
    ck_assert_str_eq(pick(sim_group(w, 2), COH_COLL_BROADCAST, COHORT_FLOAT32, 1024, &st)->name,
                     "tree");
    sim_destroy(w);
}
END_TEST

/* coh_coll_run's memo (select.c, coh_coll_select_memo): on a group whose
 * COHORT_ALGO_* values were read at creation, as cohort_init's are, a call
 * that differs from the last one of its kind in count, dtype, reduce op or
 * transports must get the choice the table walk gives, not the memo's. */
static const char *memo_pick(cohort_group *g, int coll, int dt, int op, size_t count)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.coll = (uint8_t)coll;
    c.dtype = (uint8_t)dt;
    c.redop = (int8_t)op;
    c.count = count;
    cohort_status st = COHORT_ERR_SYSTEM, st2;
    const coh_algo *a = coh_coll_select_memo(g, &c, &st);
    const coh_algo *walk = coh_coll_select(g, &c, &st2);
    ck_assert_int_eq(st, st2);
    ck_assert_msg(a == walk, "memo picked %s, the table %s (coll %d dtype %d op %d count %zu)",
                  a ? a->name : "none", walk ? walk->name : "none", coll, dt, op, count);
    return a ? a->name : "none";
}

START_TEST(test_select_memo)
{
    unsetenv("COHORT_ALGO_ALL_REDUCE");
    unsetenv("COHORT_ALGO_BROADCAST");
    const int AR = COH_COLL_ALL_REDUCE, BC = COH_COLL_BROADCAST;
    sim_world *w = sim_create(8, NULL, 0, 1);
    cohort_group *g = sim_group(w, 3);
    g->algo_env_read = 1; /* as a group from cohort_init with no variable set */
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT32, COHORT_SUM, 64), "rd");
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT32, COHORT_SUM, 64), "rd"); /* remembered */
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT32, COHORT_SUM, 1 << 20), "ring"); /* count */
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT16, COHORT_SUM, 1 << 20), "direct"); /* dtype */
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT16, COHORT_MAX, 1 << 20), "ring"); /* op */
    ck_assert_str_eq(memo_pick(g, BC, COHORT_FLOAT32, -1, 1), "tree"); /* its own entry */
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT16, COHORT_MAX, 1 << 20), "ring");
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT16, COHORT_SUM, 1 << 20), "direct");
    g->algo_env_read = 0;
    sim_destroy(w);
    /* Transports: the same call once the group has no shared memory. */
    w = sim_create(4, NULL, 1, 0);
    g = sim_group(w, 1);
    g->algo_env_read = 1;
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT32, COHORT_SUM, 64), "shm");
    coh_shm *shm = g->shm;
    g->shm = NULL;
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT32, COHORT_SUM, 64), "rd");
    g->shm = shm;
    ck_assert_str_eq(memo_pick(g, AR, COHORT_FLOAT32, COHORT_SUM, 64), "shm");
    g->algo_env_read = 0;
    sim_destroy(w);
}
END_TEST

START_TEST(test_select_forced_errors)
{
    cohort_status st;
    sim_world *w = sim_create(4, NULL, 0, 1);
    cohort_group *g = sim_group(w, 0);
    setenv("COHORT_ALGO_ALL_REDUCE", "bogus", 1);
    ck_assert_ptr_null(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 10, &st));
    ck_assert_int_eq(st, COHORT_ERR_INVALID);
    const char *m = coh_tls_err()->msg;
    ck_assert_msg(strstr(m, "COHORT_ALGO_ALL_REDUCE=bogus") && strstr(m, "ring") &&
                      strstr(m, "rabenseifner") && strstr(m, "rd"),
                  "message: %s", m);
    /* a real algorithm the group cannot run: shm without shared memory */
    setenv("COHORT_ALGO_ALL_REDUCE", "shm", 1);
    ck_assert_ptr_null(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 10, &st));
    ck_assert_int_eq(st, COHORT_ERR_INVALID);
    m = coh_tls_err()->msg;
    ck_assert_msg(strstr(m, "COHORT_ALGO_ALL_REDUCE=shm") && strstr(m, "usable here") &&
                      strstr(m, "ring") && !strstr(m, "hier"),
                  "message: %s", m);
    /* an algorithm of another collective */
    setenv("COHORT_ALGO_BROADCAST", "ring", 1);
    ck_assert_ptr_null(pick(g, COH_COLL_BROADCAST, COHORT_FLOAT32, 10, &st));
    ck_assert_int_eq(st, COHORT_ERR_INVALID);
    ck_assert_msg(strstr(coh_tls_err()->msg, "COHORT_ALGO_BROADCAST=ring is not an algorithm for "
                                             "broadcast; choices:") &&
                      strstr(coh_tls_err()->msg, "tree"),
                  "%s", coh_tls_err()->msg);
    /* "auto" and empty mean the table */
    setenv("COHORT_ALGO_ALL_REDUCE", "auto", 1);
    ck_assert_ptr_nonnull(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 10, &st));
    setenv("COHORT_ALGO_ALL_REDUCE", "", 1);
    ck_assert_ptr_nonnull(pick(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, 10, &st));
    unsetenv("COHORT_ALGO_ALL_REDUCE");
    unsetenv("COHORT_ALGO_BROADCAST");
    sim_destroy(w);
}
END_TEST

START_TEST(test_chunk_env)
{
    unsetenv("COHORT_CHUNK_BYTES");
    size_t def = coh_coll_chunk_bytes();
    ck_assert_uint_ge(def, 4096);
    setenv("COHORT_CHUNK_BYTES", "100", 1);
    ck_assert_uint_eq(coh_coll_chunk_bytes(), 100);
    setenv("COHORT_CHUNK_BYTES", "-5", 1);
    ck_assert_uint_eq(coh_coll_chunk_bytes(), def);
    setenv("COHORT_CHUNK_BYTES", "lots", 1);
    ck_assert_uint_eq(coh_coll_chunk_bytes(), def);
    unsetenv("COHORT_CHUNK_BYTES");
}
END_TEST

/* A group that cohort_init makes reads COHORT_CHUNK_BYTES once, with the
 * COHORT_ALGO_* variables (a getenv per call walked the environment on every
 * collective); harness groups still read it per call. */
START_TEST(test_chunk_read_once)
{
    setenv("COHORT_CHUNK_BYTES", "100", 1);
    cohort_group *g = coh_group_alloc(0, 1); /* the allocation cohort_init uses */
    ck_assert_ptr_nonnull(g);
    setenv("COHORT_CHUNK_BYTES", "200", 1);
    ck_assert_uint_eq(coh_coll_chunk(g), 100);
    unsetenv("COHORT_CHUNK_BYTES");
    ck_assert_uint_eq(coh_coll_chunk(g), 100);
    coh_group_free(g);
    sim_world *w = sim_create(2, NULL, 0, 1);
    setenv("COHORT_CHUNK_BYTES", "300", 1);
    ck_assert_uint_eq(coh_coll_chunk(sim_group(w, 0)), 300);
    unsetenv("COHORT_CHUNK_BYTES");
    ck_assert_uint_eq(coh_coll_chunk(sim_group(w, 0)), coh_coll_chunk_bytes());
    sim_destroy(w);
}
END_TEST

/* Every table row is well formed and the names are unique per collective. */
START_TEST(test_table)
{
    const coh_algo *const *a = coh_coll_algos();
    int n = 0;
    for (; a[n]; n++) {
        ck_assert(a[n]->name && a[n]->supports && a[n]->preferred && a[n]->run);
        for (int j = 0; j < n; j++)
            ck_assert(!(a[j]->coll == a[n]->coll && !strcmp(a[j]->name, a[n]->name)));
    }
    ck_assert_int_ge(n, 20);
}
END_TEST

/* ---- send/recv ---- */

static cohort_status p2p(cohort_group *g, int is_send, void *buf, size_t count, int peer, int tag)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.coll = is_send ? COH_COLL_SEND : COH_COLL_RECV;
    if (peer >= 0 && peer < g->size) /* (bad peers are the call's to refuse) */
        c.seq = is_send ? ++g->p2p_send_seq[peer] : ++g->p2p_recv_seq[peer];
    c.dtype = COHORT_INT32;
    c.redop = -1;
    c.root = peer;
    c.tag = tag;
    c.count = count;
    c.send = buf;
    c.recv = buf;
    return coh_coll_run(g, &c);
}

/* Each rank sends three tagged messages of different sizes to its right
 * neighbour (one empty) and receives its left neighbour's, in order. */
static int rank_p2p(int rank, cohort_group *g, void *arg)
{
    (void)arg;
    int n = g->size, right = (rank + 1) % n, left = (rank + n - 1) % n;
    static const size_t sizes[] = {5, 0, 1000};
    for (int t = 0; t < 3; t++) {
        int32_t out[1000], in[1000];
        for (size_t i = 0; i < sizes[t]; i++)
            out[i] = rank * 100000 + t * 1000 + (int32_t)i;
        memset(in, 0xff, sizeof in);
        cohort_status st = p2p(g, 1, out, sizes[t], right, 40 + t);
        if (st == COHORT_OK)
            st = p2p(g, 0, in, sizes[t], left, 40 + t);
        if (st != COHORT_OK) {
            sim_fail(sim_of(g), "rank %d: p2p %d: %s", rank, t, cohort_status_name(st));
            return 1;
        }
        for (size_t i = 0; i < sizes[t]; i++)
            if (in[i] != left * 100000 + t * 1000 + (int32_t)i) {
                sim_fail(sim_of(g), "rank %d: message %d element %zu is %d", rank, t, i, in[i]);
                return 1;
            }
    }
    /* invalid peers are refused before anything is sent */
    int32_t x = 0;
    if (p2p(g, 1, &x, 1, rank, 0) != COHORT_ERR_INVALID ||
        p2p(g, 1, &x, 1, n, 0) != COHORT_ERR_INVALID) {
        sim_fail(sim_of(g), "rank %d: send to self / out of range accepted", rank);
        return 1;
    }
    return 0;
}

START_TEST(test_p2p)
{
    sim_install();
    for (int n = 2; n <= 5; n++) {
        sim_world *w = sim_create(n, NULL, 0, 1);
        ck_assert_msg(sim_run(w, rank_p2p, NULL) == 0, "n=%d: %s", n, sim_error(w));
        ck_assert_int_eq(sim_messages(w), 3 * n);
        sim_destroy(w);
    }
    sim_uninstall();
}
END_TEST

/* count 0 still exchanges the contract (zero-byte messages) on every rank,
 * size 1 never communicates. */
static int rank_zero(int rank, cohort_group *g, void *arg)
{
    (void)arg;
    char msg[512];
    cc_case k = {COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, 0, -1, 0};
    if (cc_check(rank, g->size, &k, sim_issue, g, msg, sizeof msg)) {
        sim_fail(sim_of(g), "%s", msg);
        return 1;
    }
    return 0;
}

START_TEST(test_zero_and_one)
{
    sim_install();
    sim_world *w = sim_create(5, NULL, 0, 1);
    ck_assert_msg(sim_run(w, rank_zero, NULL) == 0, "%s", sim_error(w));
    /* dissemination over 5 ranks: 3 rounds, one message per rank each */
    ck_assert_int_eq(sim_messages(w), 15);
    sim_destroy(w);
    w = sim_create(1, NULL, 0, 1);
    ck_assert_msg(sim_run(w, rank_zero, NULL) == 0, "%s", sim_error(w));
    ck_assert_int_eq(sim_messages(w), 0);
    sim_destroy(w);
    sim_uninstall();
}
END_TEST

/* coh_coll_run's own argument checks, for calls built inside cohort
 * (argok 0): the API's calls skip them (argok 1, checked in api.c), every
 * other caller keeps them - an invalid dtype, a reduce op the dtype lacks,
 * a send to this rank itself are refused before any message, each naming
 * its problem. */
static cohort_status run_bad(cohort_group *g, int coll, int dt, int op, int root)
{
    float f[4] = {0};
    coh_call c;
    memset(&c, 0, sizeof c);
    c.seq = 1;
    c.coll = (uint8_t)coll;
    c.dtype = (uint8_t)dt;
    c.redop = (int8_t)op;
    c.root = root;
    c.count = 4;
    c.file = __FILE__;
    c.line = __LINE__;
    c.send = f;
    c.recv = f;
    return coh_coll_run(g, &c);
}

START_TEST(test_run_backstop)
{
    sim_world *w = sim_create(3, NULL, 0, 1);
    cohort_group *g = sim_group(w, 1);
    ck_assert_int_eq(run_bad(g, COH_COLL_ALL_REDUCE, 200, COHORT_SUM, -1), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(g->last.msg, "invalid dtype 200"), "%s", g->last.msg);
    ck_assert_int_eq(run_bad(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_BAND, -1),
                     COHORT_ERR_INVALID);
    ck_assert_msg(strstr(g->last.msg, "reduction"), "%s", g->last.msg);
    ck_assert_int_eq(run_bad(g, COH_COLL_SEND, COHORT_FLOAT32, -1, 1), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(g->last.msg, "peer 1 is not another rank"), "%s", g->last.msg);
    ck_assert_int_eq(coh_group_poisoned(g), 0); /* refused locally, the group stays usable */
    sim_destroy(w);
}
END_TEST

/* coh_coll_run's common test (a live group of several ranks, argok 1) and
 * its full sequence (run_other) give the same outcome for the calls the
 * test sends to the full sequence: one rank copies locally, and a failed
 * group refuses an API-checked call (argok 1) exactly as a call built
 * inside cohort (argok 0) - same status, same message, nothing sent. */
static cohort_status run_call_as(cohort_group *g, int coll, int root, int argok, const float *in,
                                 float *out)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.seq = 7;
    c.coll = (uint8_t)coll;
    c.dtype = COHORT_FLOAT32;
    c.redop = coll == COH_COLL_ALL_REDUCE ? COHORT_SUM : -1;
    c.root = root;
    c.count = 4;
    c.file = __FILE__;
    c.line = __LINE__;
    c.send = in;
    c.recv = out;
    c.argok = (uint8_t)argok;
    return coh_coll_run(g, &c);
}

START_TEST(test_run_paths_agree)
{
    const float in[4] = {1, 2, 3, 4};
    float out[4];
    sim_install();
    sim_world *w = sim_create(1, NULL, 0, 1);
    for (int argok = 0; argok <= 1; argok++) {
        memset(out, 0, sizeof out);
        ck_assert_int_eq(run_call_as(sim_group(w, 0), COH_COLL_ALL_REDUCE, -1, argok, in, out),
                         COHORT_OK);
        ck_assert_msg(!memcmp(out, in, sizeof in), "one rank, argok %d: no local copy", argok);
    }
    sim_destroy(w);
    w = sim_create(3, NULL, 0, 1);
    cohort_group *g = sim_group(w, 1);
    coh_group_fail(g, COHORT_ERR_PEER_LOST, "test: rank 2 is gone");
    cohort_status st[2];
    char msg[2][COH_ERRLEN];
    for (int argok = 0; argok <= 1; argok++) {
        memset(out, 0, sizeof out);
        st[argok] = run_call_as(g, COH_COLL_BROADCAST, 1, argok, in, out);
        snprintf(msg[argok], sizeof msg[argok], "%s", g->last.msg);
        ck_assert_msg(st[argok] != COHORT_OK, "failed group, argok %d: the call ran", argok);
    }
    ck_assert_int_eq(st[0], st[1]);
    ck_assert_str_eq(msg[0], msg[1]);
    ck_assert_int_eq(sim_messages(w), 0);
    sim_destroy(w);
    sim_uninstall();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coll_sim");
    TCase *tc = tcase_create("matrix");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_flat, 0, sizeof flat / sizeof flat[0]);
    tcase_add_loop_test(tc, test_onehost, 0, sizeof onehost / sizeof onehost[0]);
    tcase_add_loop_test(tc, test_multihost, 0, sizeof multihost / sizeof multihost[0]);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("select");
    tcase_set_timeout(ts, 30);
    tcase_add_test(ts, test_table);
    tcase_add_test(ts, test_select_defaults);
    tcase_add_test(ts, test_flat_pref);
    tcase_add_test(ts, test_rs_direct_pref);
    tcase_add_test(ts, test_hostflat_pref);
    tcase_add_test(ts, test_coarse_pref);
    tcase_add_test(ts, test_select_memo);
    tcase_add_test(ts, test_select_forced_errors);
    tcase_add_test(ts, test_chunk_env);
    tcase_add_test(ts, test_chunk_read_once);
    tcase_add_test(ts, test_p2p);
    tcase_add_test(ts, test_zero_and_one);
    tcase_add_test(ts, test_run_backstop);
    tcase_add_test(ts, test_run_paths_agree);
    suite_add_tcase(s, ts);
    return s;
}

COH_TEST_MAIN(suite)

/* test_shm_mem.c - buffers from cohort_mem_alloc and the one-copy broadcast
 * (src/transport/shm/shm_mem.c, bcast_mem_* in src/coll/shm/shm_coll.c):
 * real groups (cohort_init) in real processes. The data for sizes 1 B to
 * 4 MiB at several offsets inside the region, every rank as root, readers
 * prepared for either path (single copy or two copies, pinned); receivers
 * in plain memory or in their own regions (then the root writes part of
 * it: the split); the path really taken (the process's counters: no silent
 * fallback) and the fallbacks (root buffer
 * not registered, COHORT_SHM_MEM=off, single copy probe failed); a reader
 * that cannot map the region (every rank fails, nobody hangs); a reader
 * that dies; the API's argument errors. Ranks outnumbering cpus (every
 * rank pinned to one cpu): from 16 KiB to 128 KiB a broadcast goes in
 * ring pieces, from a region the readers copy it in place (no split);
 * every root scribbles its buffer as soon as its call returns,
 * so a root that returned before its readers were done shows as wrong
 * data. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "support/support.h"
#include "transport/shm/shm_mem.h"

static unsigned char pat(size_t i, int root, int k)
{
    return (unsigned char)(i * 131u + (unsigned)root * 7u + (unsigned)k * 17u + 1u);
}

#define MAXB ((size_t)4 << 20)
#define REGION (MAXB + 3 * 4096)

static const size_t sizes[] = {1, 7, 4096, 4097, 65536, 65537, (size_t)1 << 20, MAXB};
static const size_t offs[] = {0, 3, 4096 + 5};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define NOFFS (sizeof offs / sizeof offs[0])
#define PIECES_MAX ((size_t)8 * 16384) /* 8 ring slots of 16 KiB */

typedef struct mem_case {
    int nranks;
    int expect;  /* 1: calls above ring_max from a region take the one-copy path;
                  * 2: the same without the split (COHORT_SHM_MEM=nosplit);
                  * 3: every rank on one cpu: up to PIECES_MAX the ring
                  * pieces' announcement carries the root's region, which
                  * every reader copies whole (no split); above, as 1 */
    int ring_max; /* COHORT_SHM_RING_BYTES pinned below (0: ring off) */
    const char *env;
} mem_case;

static const mem_case cases[] = {
    /* readers prepared two copies (single copy allowed, never chosen) */
    {2, 1, 0,
     "COHORT_SHM_RING_BYTES=0;COHORT_SHM_SINGLE_COPY=on;"
     "COHORT_SHM_SINGLE_COPY_BYTES=1099511627776"},
    /* readers prepared single copy from 1 B (the ring then takes nothing) */
    {2, 1, 0,
     "COHORT_SHM_RING_BYTES=4096;COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1"},
    /* two copies, and the ring takes <= 4096 whatever the buffer */
    {2, 1, 4096,
     "COHORT_SHM_RING_BYTES=4096;COHORT_SHM_SINGLE_COPY=on;"
     "COHORT_SHM_SINGLE_COPY_BYTES=1099511627776"},
    /* three ranks, small slots: two readers of one region */
    {3, 1, 0,
     "COHORT_SHM_RING_BYTES=0;COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=on;"
     "COHORT_SHM_SINGLE_COPY_BYTES=1099511627776"},
    /* fallbacks, same data: the root's COHORT_SHM_MEM=off, and no ptrace
     * access between the ranks (the probe failed) */
    {2, 0, 0, "COHORT_SHM_RING_BYTES=0;COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_MEM=off"},
    /* the readers never offer their regions: one copy, no split */
    {2, 2, 0, "COHORT_SHM_RING_BYTES=0;COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_MEM=nosplit"},
    {2, 0, 0, "COHORT_SHM_RING_BYTES=0;COHORT_SHM_SINGLE_COPY=probe-fail"},
    /* ranks outnumbering cpus: ring pieces, then the one-copy path */
    {3, 3, 16384, "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1099511627776"},
    {2, 3, 16384, "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1099511627776"},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static int rank_matrix(int rank, void *arg)
{
    const mem_case *m = arg;
    if (m->expect == 3) /* every rank on the first cpu it may use */
        RANK_CHECK(cht_pin_one_cpu() == 0, "sched_setaffinity");
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    if (m->expect == 3) {
        char d[2048];
        RANK_PASS(cohort_describe(g, "broadcast", 65536, COHORT_UINT8, d, sizeof d), g);
        RANK_CHECK(strstr(d, "slot ring in 4 pieces"), "not in ring pieces: %s", d);
    }
    int n = cohort_size(g), me = cohort_rank(g);
    unsigned char *reg = NULL, *plain = malloc(REGION);
    RANK_PASS(cohort_mem_alloc(g, REGION, (void **)&reg), g);
    RANK_CHECK(plain && reg && ((uintptr_t)reg & 4095) == 0, "buffers");
    for (size_t i = 0; i < REGION; i += 4096)
        RANK_CHECK(reg[i] == 0, "region not zeroed at %zu", i);
    int k = 0;
    for (size_t si = 0; si < NSIZES; si++)
        for (size_t oi = 0; oi < NOFFS; oi++)
            for (int kind = 0; kind < 4; kind++, k++) {
                /* kind 0: root in its region, receivers in plain memory;
                 * 1: everybody in its region (the split: the root writes
                 * the tail into each reader's region); 2: root in plain
                 * memory; 3: root in plain memory, receivers in regions
                 * (offered, not taken) */
                int root = k % n, am_root = me == root;
                size_t bytes = sizes[si], off = offs[oi];
                int in_reg = am_root ? kind < 2 : kind == 1 || kind == 3;
                unsigned char *b = (in_reg ? reg : plain) + off;
                if (am_root)
                    for (size_t i = 0; i < bytes; i++)
                        b[i] = pat(i, root, k);
                else
                    memset(b, 0xEE, bytes + 8);
                uint64_t c0[3], c1[3];
                coh_mem_counts(&c0[0], &c0[1], &c0[2]);
                RANK_PASS(cohort_broadcast(g, b, bytes, COHORT_UINT8, root), g);
                if (am_root) /* the call returned: the buffer is the program's again */
                    memset(b, 0x77, bytes);
                coh_mem_counts(&c1[0], &c1[1], &c1[2]);
                int on = m->expect && kind < 2 && bytes > (size_t)m->ring_max;
                int split = m->expect == 1 || (m->expect == 3 && bytes > PIECES_MAX);
                int want = !on                  ? -1
                           : am_root            ? COH_MEM_ROOTED
                           : kind == 1 && split ? COH_MEM_SPLIT
                                                : COH_MEM_READ;
                for (int c = 0; c < 3; c++)
                    RANK_CHECK(c1[c] - c0[c] == (uint64_t)(c == want),
                               "rank %d, root %d, %zu B at +%zu, kind %d: counter %d (0 rooted, "
                               "1 read, 2 split) moved by %llu, want %d",
                               me, root, bytes, off, kind, c, (unsigned long long)(c1[c] - c0[c]),
                               c == want);
                if (!am_root) {
                    for (size_t i = 0; i < bytes; i++)
                        RANK_CHECK(b[i] == pat(i, root, k),
                                   "rank %d: %zu B at +%zu kind %d: byte %zu is %u, want %u", me,
                                   bytes, off, kind, i, b[i], pat(i, root, k));
                    for (size_t i = bytes; i < bytes + 8; i++)
                        RANK_CHECK(b[i] == 0xEE, "rank %d: byte %zu after the message written",
                                   me, i);
                }
            }
    RANK_PASS(cohort_mem_free(g, reg), g);
    free(plain);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(matrix)
{
    const mem_case *m = &cases[_i];
    cht_opts o = {.nranks = m->nranks, .deadline_ms = 120000, .extra_env = m->env};
    cht_result r;
    cht_run_ranks(&o, rank_matrix, (void *)m, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* The contract check stays: a count mismatch against a root in its region
 * fails every rank with COHORT_ERR_CONTRACT, the receive buffer untouched. */
static int rank_mismatch(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t bytes = 1 << 20;
    unsigned char *b;
    RANK_PASS(cohort_mem_alloc(g, bytes, (void **)&b), g);
    memset(b, rank == 0 ? 0x11 : 0xEE, bytes);
    cohort_status st = cohort_broadcast(g, b, rank == 0 ? bytes : bytes - 1, COHORT_UINT8, 0);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "rank %d: %s: %s", rank, cohort_status_name(st),
               cohort_last_error(g));
    if (rank)
        for (size_t i = 0; i < bytes; i++)
            RANK_CHECK(b[i] == 0xEE, "rank %d: byte %zu written by a mismatched call", rank, i);
    cohort_finalize(g);
    return 0;
}

START_TEST(mismatch)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000,
                  .extra_env = "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1099511627776"};
    cht_result r;
    cht_run_ranks(&o, rank_mismatch, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* A rank that cannot map a peer's region (COHORT_SHM_MEM=map-fail:
 * pidfd_getfd of a descriptor that does not exist): every rank returns an
 * error that says why, nobody hangs. _i 0: the readers' buffers are plain
 * memory, so only they map (the root's region) and fail; 1: theirs are
 * regions too, so the root also maps (theirs, for the split) and whichever
 * fails first decides the message (1 MiB: above ring pieces, should the
 * 3 ranks outnumber the cpus); 2: every rank on one cpu, 128 KiB in ring
 * pieces - the readers fail to map the announced region, the root waiting
 * for them ends too. */
static int rank_map_fail(int rank, void *arg)
{
    int split = *(const int *)arg == 1, pieces = *(const int *)arg == 2;
    if (pieces)
        RANK_CHECK(cht_pin_one_cpu() == 0, "sched_setaffinity");
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t bytes = pieces ? (size_t)128 << 10 : (size_t)1 << 20;
    if (pieces) {
        char d[2048];
        RANK_PASS(cohort_describe(g, "broadcast", bytes, COHORT_UINT8, d, sizeof d), g);
        RANK_CHECK(strstr(d, "slot ring in 8 pieces"), "not in ring pieces: %s", d);
    }
    unsigned char *b, *plain = malloc(bytes);
    RANK_CHECK(plain, "malloc");
    RANK_PASS(cohort_mem_alloc(g, bytes, (void **)&b), g);
    cohort_status st = cohort_broadcast(g, rank && !split ? plain : b, bytes, COHORT_UINT8, 0);
    const char *e = cohort_last_error(g);
    RANK_CHECK(st != COHORT_OK, "rank %d: the broadcast succeeded", rank);
    RANK_CHECK(strstr(e, "cannot map") && strstr(e, "cohort_mem_alloc buffer: pidfd_getfd"),
               "rank %d: %s: %s", rank, cohort_status_name(st), e);
    if (rank && !split)
        RANK_CHECK(st == COHORT_ERR_SYSTEM && strstr(e, "cannot map root rank 0's"), "rank %d: %s: %s",
                   rank, cohort_status_name(st), e);
    free(plain);
    cohort_finalize(g);
    return 0;
}

START_TEST(map_fail)
{
    int split = _i;
    /* in ring pieces: never the single copy (which would take 1 MiB) */
    cht_opts o = {.nranks = 3, .deadline_ms = 60000,
                  .extra_env = _i == 2 ? "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=on;"
                                         "COHORT_SHM_SINGLE_COPY_BYTES=1099511627776;"
                                         "COHORT_SHM_MEM=map-fail"
                                       : "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=on;"
                                         "COHORT_SHM_MEM=map-fail"};
    cht_result r;
    cht_run_ranks(&o, rank_map_fail, &split, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* A reader dies between calls: the root's next one-copy broadcast ends
 * with COHORT_ERR_PEER_LOST, well before the timeout. */
static int rank_dies(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t bytes = 1 << 20;
    unsigned char *b;
    RANK_PASS(cohort_mem_alloc(g, bytes, (void **)&b), g);
    RANK_PASS(cohort_broadcast(g, b, bytes, COHORT_UINT8, 0), g);
    if (rank == 1)
        raise(SIGKILL);
    cohort_status st = cohort_broadcast(g, b, bytes, COHORT_UINT8, 0);
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "%s: %s", cohort_status_name(st), cohort_last_error(g));
    cohort_finalize(g);
    return 0;
}

START_TEST(reader_dies)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000,
                  .extra_env = "COHORT_TIMEOUT=30;COHORT_SHM_SINGLE_COPY=on"};
    cht_result r;
    cht_run_ranks(&o, rank_dies, NULL, &r);
    ck_assert_msg(r.status[1] == 128 + SIGKILL, "victim exited %d", r.status[1]);
    ck_assert_msg(r.status[0] == 0 && !r.hung[0], "root exited %d%s", r.status[0],
                  r.hung[0] ? " (hung)" : "");
    ck_assert_msg(r.elapsed_ms < 25000, "took %.0f ms", r.elapsed_ms);
}
END_TEST

/* Descriptors exhausted on the reader (RLIMIT_NOFILE at its lowest free
 * descriptor, so pidfd_getfd gets EMFILE): the reader fails with
 * COHORT_ERR_NOMEM naming the limit, the root with an error too; nobody
 * hangs, and both work again once the limit is back. */
static int rank_no_fds(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t bytes = 1 << 20;
    unsigned char *b, *plain = malloc(bytes);
    RANK_CHECK(plain, "malloc");
    RANK_PASS(cohort_mem_alloc(g, bytes, (void **)&b), g);
    struct rlimit old, low;
    RANK_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit");
    if (rank == 1) {
        int lowest = dup(0); /* the next descriptor the process would get */
        RANK_CHECK(lowest >= 0, "dup");
        close(lowest);
        low = old;
        low.rlim_cur = (rlim_t)lowest;
        RANK_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
    }
    cohort_status st = cohort_broadcast(g, rank ? plain : b, bytes, COHORT_UINT8, 0);
    const char *e = cohort_last_error(g);
    if (rank == 1)
        RANK_CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0, "setrlimit back");
    RANK_CHECK(st != COHORT_OK, "rank %d: the broadcast succeeded", rank);
    if (rank == 1)
        RANK_CHECK(st == COHORT_ERR_NOMEM && strstr(e, "cannot map root rank 0's") &&
                       strstr(e, "Too many open files"),
                   "rank %d: %s: %s", rank, cohort_status_name(st), e);
    free(plain);
    cohort_finalize(g);
    return 0;
}

START_TEST(no_fds)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000,
                  .extra_env = "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=on"};
    cht_result r;
    cht_run_ranks(&o, rank_no_fds, NULL, &r);
    cht_assert_all_ok(&r);
    ck_assert_msg(r.elapsed_ms < 15000, "took %.0f ms", r.elapsed_ms);
}
END_TEST

/* The API's argument errors (one rank: no segment needed). */
static int rank_args(int rank, void *arg)
{
    (void)rank, (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    void *p = (void *)1;
    RANK_CHECK(cohort_mem_alloc(NULL, 64, &p) == COHORT_ERR_INVALID && p == NULL, "NULL g");
    RANK_CHECK(cohort_mem_alloc(g, 64, NULL) == COHORT_ERR_INVALID, "NULL out");
    RANK_CHECK(cohort_mem_alloc(g, 0, &p) == COHORT_ERR_INVALID && p == NULL, "0 bytes");
    RANK_CHECK(cohort_mem_alloc(g, SIZE_MAX, &p) == COHORT_ERR_NOMEM && p == NULL, "SIZE_MAX");
    RANK_PASS(cohort_mem_alloc(g, 100, &p), g);
    memset(p, 1, 4096); /* whole pages */
    char local;
    RANK_CHECK(cohort_mem_free(g, &local) == COHORT_ERR_INVALID, "a foreign pointer");
    RANK_CHECK(cohort_mem_free(g, (char *)p + 1) == COHORT_ERR_INVALID, "inside a region");
    RANK_CHECK(cohort_mem_free(NULL, p) == COHORT_ERR_INVALID, "NULL g");
    RANK_PASS(cohort_mem_free(g, p), g);
    RANK_CHECK(cohort_mem_free(g, p) == COHORT_ERR_INVALID, "double free");
    RANK_PASS(cohort_mem_free(g, NULL), g);
    /* left allocated: cohort_finalize frees it (LeakSanitizer would say) */
    RANK_PASS(cohort_mem_alloc(g, 1 << 20, &p), g);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(api_args)
{
    cht_opts o = {.nranks = 1, .deadline_ms = 60000};
    cht_result r;
    cht_run_ranks(&o, rank_args, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_mem");
    TCase *tc = tcase_create("mem");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, matrix, 0, NCASES);
    tcase_add_test(tc, mismatch);
    tcase_add_loop_test(tc, map_fail, 0, 3);
    tcase_add_test(tc, reader_dies);
    tcase_add_test(tc, no_fds);
    tcase_add_test(tc, api_args);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)

/*
 * test_shm_fault.c - failures around the segment, in real processes:
 *   - a SIGKILLed rank (before a small call, and in the middle of a large
 *     multi-piece one): survivors fail with COHORT_ERR_PEER_LOST naming it
 *     within 2 s (pidfd liveness);
 *   - a SIGSTOPped rank: survivors fail with COHORT_ERR_TIMEOUT after the
 *     group timeout;
 *   - create/destroy leaves no fd, mapping or /dev/shm entry behind;
 *   - a process with a wrong token or generation is refused (AUTH) and the
 *     real group still forms;
 *   - every allocation failure during create is a clean NOMEM;
 *   - a lead that never comes is a TIMEOUT; a bad env var is INVALID;
 *   - a stale segment address in the store: the member asks the store
 *     again and attaches once it names the lead, or fails in bounded time;
 *   - a stray close of the lead's socket: both ranks fail at once, saying so;
 *   - silent local connections to the rendezvous socket (same uid or not)
 *     neither delay the real member nor make the lead's error misleading;
 *   - members that keep their handshake open after attaching delay nobody
 *     else's, and the lead's wait for them is bounded;
 *   - a rank's pid word rewritten after the attach (a decoy process with
 *     the same addresses named there): single copies still reach the
 *     rank, the data exact;
 *   - a lead's header that differs from what this rank would build (each
 *     field alone, and forged layouts that are consistent in themselves:
 *     a slot size that wraps the strides, a compact record 48 bytes
 *     apart) is refused naming the field, in the check itself and in a
 *     live attach whose lead's header another process rewrote.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "group/monitor.h"
#include "harness.h"

#include "support/support.h"
#include "transport/shm/shm_cma.h"
#include "transport/shm/shm_geo.h"
#include "transport/shm/shm_seg.h"

/* A 2-rank group that got through works: an all_reduce of rank + 1 is 3. */
static void check_sum2(cohort_group *g)
{
    int a = g->rank + 1, b = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_SUM, -1, 1);
    RANK_PASS(coh_shm_all_reduce(g->shm, &c, &a, &b, 1), NULL);
    RANK_CHECK(b == 3, "rank %d: sum %d", g->rank, b);
}

static int run_expect(const cht_opts *o, int (*fn)(int, void *), void *arg, const int *want)
{
    cht_result r;
    ck_assert_ptr_nonnull(th_shared_init());
    cht_run_ranks(o, fn, arg, &r);
    for (int i = 0; i < o->nranks; i++) {
        ck_assert_msg(!r.hung[i], "rank %d hung", i);
        ck_assert_msg(r.status[i] == want[i], "rank %d exited %d, wanted %d", i, r.status[i],
                      want[i]);
    }
    return 0;
}

/* ---- SIGKILL ---- */

static int kill_large_mode;

static void *killer(void *arg)
{
    (void)arg;
    th_sleep_ms(30); /* lands in the middle of the looped 4 MiB all_reduces */
    atomic_store(&th_sh()->t_event_ns, coh_now_ns());
    raise(SIGKILL);
    return NULL;
}

static int kill_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 3, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    size_t n = kill_large_mode ? (4u << 20) / 4 : 2;
    float *a = calloc(n, 4), *b = calloc(n, 4);
    RANK_CHECK(a && b, "calloc");
    /* modes 2 and 3: single-copy broadcasts, the victim (rank 2) a reader
     * the root writes into, or the root the others read from */
    int bcast_root = kill_large_mode == 2 ? 0 : 2;
    if (kill_large_mode >= 2)
        RANK_CHECK(g->shm->cma, "single copy not in use: %s", g->shm->copy_info);
    if (rank == 2) {
        if (!kill_large_mode) {
            atomic_store(&th_sh()->t_event_ns, coh_now_ns());
            raise(SIGKILL);
        }
        pthread_t t;
        pthread_create(&t, NULL, killer, NULL);
    }
    for (long it = 0;; it++) {
        size_t B = (1u << 20); /* per rank block of the modes 4-8 (3 ranks: 3 MiB <= 4) */
        if (kill_large_mode == 2 || kill_large_mode == 3) {
            coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_FLOAT32, -1, bcast_root, n);
            st = coh_shm_broadcast(g->shm, &c, a, n * 4, bcast_root);
        } else if (kill_large_mode == 4) {
            coh_call c = th_call(g, COH_COLL_ALL_GATHER, COHORT_UINT8, -1, -1, B);
            st = coh_shm_all_gather(g->shm, &c, a, b, B);
        } else if (kill_large_mode == 5 || kill_large_mode == 6) {
            /* gather: the victim a writer into the root, or the root */
            int root = kill_large_mode == 5 ? 0 : 2;
            coh_call c = th_call(g, COH_COLL_GATHER, COHORT_UINT8, -1, root, B);
            st = coh_shm_gather(g->shm, &c, a, b, B, root);
        } else if (kill_large_mode == 7) {
            coh_call c = th_call(g, COH_COLL_SCATTER, COHORT_UINT8, -1, 2, B);
            st = coh_shm_scatter(g->shm, &c, a, b, B, 2);
        } else if (kill_large_mode == 8) {
            coh_call c = th_call(g, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, B);
            st = coh_shm_all_to_all(g->shm, &c, a, b, B);
        } else if (kill_large_mode == 10) {
            coh_call c = th_call(g, COH_COLL_REDUCE, COHORT_FLOAT32, COHORT_SUM, 0, n);
            st = coh_shm_reduce(g->shm, &c, a, b, n, 0);
        } else if (kill_large_mode == 11) { /* 3 blocks of a third of 4 MiB */
            coh_call c = th_call(g, COH_COLL_REDUCE_SCATTER, COHORT_FLOAT32, COHORT_SUM, -1, n / 3);
            st = coh_shm_reduce_scatter(g->shm, &c, a, b, n / 3);
        } else { /* mode 1: two copies; 9: single copy (=on) */
            coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, n);
            st = coh_shm_all_reduce(g->shm, &c, a, b, n);
        }
        if (st != COHORT_OK)
            break;
        RANK_CHECK(rank != 2 || it < 1000000, "victim still alive");
    }
    uint64_t t = coh_now_ns(), t0 = atomic_load(&th_sh()->t_event_ns);
    double ms = t0 ? (t - t0) / 1e6 : -1;
    fprintf(stderr, "rank %d: %s after %.1f ms: %s\n", rank, cohort_status_name(st), ms,
            th_errmsg(g));
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "got %s: %s", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(strstr(th_errmsg(g), "rank 2 "), "message does not name rank 2: %s", th_errmsg(g));
    RANK_CHECK(t0 && ms < 2000, "took %.1f ms to notice", ms);
    th_group_free(g);
    th_done(2); /* the survivors */
    return 0;
}

START_TEST(sigkill_small)
{
    kill_large_mode = 0;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 20000};
    int want[3] = {0, 0, 128 + SIGKILL};
    run_expect(&o, kill_rank, NULL, want);
}
END_TEST

START_TEST(sigkill_large)
{
    kill_large_mode = 1;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 20000, .extra_env = "COHORT_SHM_SLOT_BYTES=65536"};
    int want[3] = {0, 0, 128 + SIGKILL};
    run_expect(&o, kill_rank, NULL, want);
}
END_TEST

/* A peer dies in the middle of single-copy calls (read and written with
 * process_vm_readv/writev): broadcasts of 4 MiB (the victim a reader, or
 * the root), all_gather, gather (the victim a writer, or the root),
 * scatter (the victim the root) and all_to_all of 1 MiB per rank,
 * all_reduce, reduce (the victim a leaf) and reduce_scatter of 4 MiB:
 * every survivor fails
 * with COHORT_ERR_PEER_LOST naming it, in bounded time. */
START_TEST(sigkill_single_copy)
{
    kill_large_mode = 2 + _i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 20000,
                  .extra_env = "COHORT_SHM_SINGLE_COPY=on"};
    int want[3] = {0, 0, 128 + SIGKILL};
    run_expect(&o, kill_rank, NULL, want);
}
END_TEST

/* The root's buffer is not readable for its whole length (its tail is
 * PROT_NONE): the single copy fails with EFAULT on whichever rank touches
 * it, and every rank returns COHORT_ERR_INVALID naming the failed copy -
 * no hang, no success with half the data. Mode 0: a broadcast's buffer;
 * mode 1: a reduce's recv on the root, whose tail is the leaf's part (the
 * leaf's process_vm_writev meets it; the root's own part is mapped);
 * mode 2: an all_reduce's send on rank 0, whose second half (rank 1's
 * slice, read by rank 1's process_vm_readv) is not mapped. */
static int badbuf_mode;
static int badbuf_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->cma, "single copy not in use: %s", g->shm->copy_info);
    size_t pg = 4096, bytes = badbuf_mode ? 16 * pg : 3 * pg;
    unsigned char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                              -1, 0);
    RANK_CHECK(buf != MAP_FAILED, "mmap");
    memset(buf, 0x5a, badbuf_mode ? bytes : pg);
    if (badbuf_mode == 2) {
        float *out = calloc(bytes / 4, 4);
        RANK_CHECK(out, "calloc");
        if (rank == 0)
            RANK_CHECK(mprotect(buf + 8 * pg, 8 * pg, PROT_NONE) == 0, "mprotect");
        coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, bytes / 4);
        st = coh_shm_all_reduce(g->shm, &c, buf, out, bytes / 4);
        free(out);
    } else if (badbuf_mode) {
        /* 64 KiB: the root reduces 10/16 (40 KiB), the leaf writes the rest */
        float *in = calloc(bytes / 4, 4);
        RANK_CHECK(in, "calloc");
        if (rank == 0)
            RANK_CHECK(mprotect(buf + 10 * pg, 6 * pg, PROT_NONE) == 0, "mprotect");
        coh_call c = th_call(g, COH_COLL_REDUCE, COHORT_FLOAT32, COHORT_SUM, 0, bytes / 4);
        st = coh_shm_reduce(g->shm, &c, in, buf, bytes / 4, 0);
        free(in);
    } else {
        if (rank == 0)
            RANK_CHECK(mprotect(buf + pg, 2 * pg, PROT_NONE) == 0, "mprotect");
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, bytes);
        st = coh_shm_broadcast(g->shm, &c, buf, bytes, 0);
    }
    fprintf(stderr, "rank %d: %s: %s\n", rank, cohort_status_name(st), th_errmsg(g));
    /* both returned before either exits (an exit would be a lost peer) */
    atomic_store(&th_sh()->flag[rank], 1);
    th_wait_flag(1 - rank, 10000);
    RANK_CHECK(st == COHORT_ERR_INVALID, "got %s: %s", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(strstr(th_errmsg(g), "single-copy"), "message does not name the copy: %s",
               th_errmsg(g));
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(single_copy_bad_buffer)
{
    badbuf_mode = _i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 20000,
                  .extra_env = "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=4096"};
    int want[2] = {0, 0};
    run_expect(&o, badbuf_rank, NULL, want);
}
END_TEST

/* A peer fails the group and then exits (mode 0) or frees the buffer this
 * rank is about to copy (mode 1) - what any rank does once its call has
 * returned an error. The copy that then fails must report the peer's
 * cause, not blame the peer's exit or the unmapped buffer: every rank names
 * the first failure (a clean-clone CI run saw rank 0 blame rank 1's exit
 * after rank 1 had reported rank 2's death). */
static int failed_peer_mode;
static int failed_peer_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->cma, "single copy not in use: %s", g->shm->copy_info);
    size_t bytes = 4 * 4096;
    if (rank == 1) {
        unsigned char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        RANK_CHECK(buf != MAP_FAILED, "mmap");
        memset(buf, 0x5a, bytes);
        atomic_store(&th_sh()->val[0], (int64_t)(uintptr_t)buf);
        atomic_store(&th_sh()->flag[2], 1);
        th_wait_flag(3, 10000);
        coh_group_fail(g, COHORT_ERR_TIMEOUT, "injected failure of rank 1 (test)");
        if (failed_peer_mode == 1) {
            munmap(buf, bytes);
            atomic_store(&th_sh()->flag[4], 1);
            th_wait_flag(5, 10000); /* alive until rank 0 has copied */
        }
        th_group_free(g);
        th_done(2);
        return 0;
    }
    th_wait_flag(2, 10000);
    uint64_t addr = (uint64_t)atomic_load(&th_sh()->val[0]);
    atomic_store(&th_sh()->flag[3], 1);
    if (failed_peer_mode == 0) {
        RANK_CHECK(g->shm->pidfd && g->shm->pidfd[1] >= 0, "no pidfd for rank 1");
        struct pollfd pf = {.fd = g->shm->pidfd[1], .events = POLLIN};
        RANK_CHECK(poll(&pf, 1, 10000) == 1, "rank 1 did not exit");
    } else {
        th_wait_flag(4, 10000);
    }
    unsigned char dst[4 * 4096];
    coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 1, bytes);
    shm_op o;
    shm_op_bare(&o, g->shm, &c);
    st = shm_cma_read(&o, 1, dst, addr, bytes);
    atomic_store(&th_sh()->flag[5], 1);
    /* the copy's own status (the peer's cause, whether or not this rank's
     * monitor has seen rank 1's abort in the store yet); then the group's
     * error as a collective's caller applies it (the failure record) */
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "got %s: %s", cohort_status_name(st),
               coh_tp_fail_reason(g));
    st = cht_tp_up(g, st);
    fprintf(stderr, "rank 0: %s: %s\n", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "got %s: %s", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(strstr(th_errmsg(g), "injected failure of rank 1"), "not the peer's cause: %s",
               th_errmsg(g));
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(single_copy_failed_peer)
{
    failed_peer_mode = _i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 20000,
                  .extra_env = "COHORT_SHM_SINGLE_COPY=on"};
    int want[2] = {0, 0};
    run_expect(&o, failed_peer_rank, NULL, want);
}
END_TEST

/* ---- a rewritten pid word ----
 * Each rank's pid sits in its control block, which every local process
 * can write. After the attach a rank's single copies must still reach the
 * peer they attached to, not whoever the word names now. Each rank forks
 * a decoy - a process with the same addresses, holding stale data where
 * the rank's buffers are - and writes the decoy's pid into its own word;
 * then a broadcast (the reader reads the root's buffer) and a 1 MiB reduce
 * (the leaf writes its part into the root's recv) by single copy. Read
 * from the word, the broadcast returns the decoy's stale bytes and the
 * reduce's leaf part lands in the decoy: wrong data, COHORT_OK. */
static int pid_word_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->cma, "single copy not in use: %s", g->shm->copy_info);
    size_t bb = 64 * 1024, rn = (1u << 20) / 4;
    unsigned char *bbuf = malloc(bb);
    float *rs = malloc(rn * 4), *rr = malloc(rn * 4);
    RANK_CHECK(bbuf && rs && rr, "malloc");
    memset(bbuf, 0xaa, bb);
    for (size_t i = 0; i < rn; i++)
        rs[i] = rr[i] = -1.0f;
    int pp[2];
    RANK_CHECK(pipe(pp) == 0, "pipe");
    pid_t decoy = fork();
    RANK_CHECK(decoy >= 0, "fork");
    if (decoy == 0) { /* stale copies of the buffers at the same addresses */
        char b;
        close(pp[1]);
        while (read(pp[0], &b, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(pp[0]);
    for (size_t i = 0; i < bb; i++)
        bbuf[i] = rank == 0 ? (unsigned char)(i * 7 + 1) : 0;
    for (size_t i = 0; i < rn; i++)
        rs[i] = (float)(rank + 1) * (float)(i % 1000);
    atomic_store(&shm_ctl_of(g->shm, g->shm->me)->pid, (int32_t)decoy);
    atomic_store(&th_sh()->flag[rank], 1);
    th_wait_flag(1 - rank, 10000);
    RANK_CHECK(strstr(coh_shm_copy_path(g->shm, COH_COLL_BROADCAST, bb), "single copy"),
               "broadcast of %zu B: %s", bb, coh_shm_copy_path(g->shm, COH_COLL_BROADCAST, bb));
    coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, bb);
    RANK_PASS(coh_shm_broadcast(g->shm, &c, bbuf, bb, 0), NULL);
    size_t bad = 0;
    for (size_t i = 0; i < bb; i++)
        bad += bbuf[i] != (unsigned char)(i * 7 + 1);
    RANK_CHECK(!bad, "rank %d: %zu of %zu broadcast bytes wrong (the decoy's: %s)", rank, bad, bb,
               bbuf[0] == 0xaa ? "yes" : "no");
    uint64_t singles = g->shm->red_singles;
    c = th_call(g, COH_COLL_REDUCE, COHORT_FLOAT32, COHORT_SUM, 0, rn);
    RANK_PASS(coh_shm_reduce(g->shm, &c, rs, rr, rn, 0), NULL);
    RANK_CHECK(g->shm->red_singles == singles + 1, "the reduce did not take the single copy");
    bad = 0;
    for (size_t i = 0; rank == 0 && i < rn; i++)
        bad += rr[i] != 3.0f * (float)(i % 1000);
    RANK_CHECK(!bad, "rank 0: %zu of %zu reduced elements wrong", bad, rn);
    /* and a peer's real death is still seen through its pidfd */
    close(pp[1]);
    RANK_CHECK(waitpid(decoy, NULL, 0) == decoy, "decoy");
    free(bbuf);
    free(rs);
    free(rr);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(pid_word_rewritten)
{
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 30000,
                  .extra_env = "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_MEM=0"};
    int want[2] = {0, 0};
    run_expect(&o, pid_word_rank, NULL, want);
}
END_TEST

/* The rendezvous's last message is queued whole when the lead closes its
 * end with data of the member's still unread in its own queue: the kernel
 * then reports a reset on the member's next recvmsg before the queued
 * message (a CI run under ASan: rank 1 lost its M3, retried a rendezvous
 * that had counted it and failed "connection refused"). The handshake's
 * receive returns the message; a reset with nothing queued stays an error. */
START_TEST(handshake_reset_after_reply)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
    unsigned char m3[48], got[48];
    memset(m3, 0x3c, sizeof m3);
    ck_assert_int_eq(send(sv[0], m3, sizeof m3, 0), (ssize_t)sizeof m3); /* the lead's reply */
    ck_assert_int_eq(send(sv[1], "late", 4, 0), 4); /* unread by the lead */
    close(sv[0]);
    int fd = 0;
    memset(got, 0, sizeof got);
    ck_assert_int_eq(coh_shm_hs_recv(sv[1], got, sizeof got, &fd, coh_now_ns() + 1000000000ull), 0);
    ck_assert(memcmp(got, m3, sizeof m3) == 0);
    ck_assert_int_eq(fd, -1);
    /* nothing more queued: EOF is the reset */
    ck_assert_int_eq(coh_shm_hs_recv(sv[1], got, sizeof got, NULL, coh_now_ns() + 1000000000ull),
                     -ECONNRESET);
    close(sv[1]);
    /* a reset with nothing queued at all */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
    ck_assert_int_eq(send(sv[1], "late", 4, 0), 4);
    close(sv[0]);
    ck_assert_int_eq(coh_shm_hs_recv(sv[1], got, sizeof got, NULL, coh_now_ns() + 1000000000ull),
                     -ECONNRESET);
    close(sv[1]);
}
END_TEST

/* The single-copy reductions' scratch (allocated at the first such call)
 * cannot be allocated on one rank: that rank fails the group with
 * COHORT_ERR_NOMEM naming the scratch, the other returns at once with the
 * group's failure (no hang), for all_reduce (every rank reduces a slice:
 * rank 1 fails) and reduce (the root's scratch: root 1). */
static int scratch_oom_mode;
static int scratch_oom_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->cma, "single copy not in use: %s", g->shm->copy_info);
    size_t n = (1u << 20) / 4;
    float *a = calloc(n, 4), *b = calloc(n, 4);
    RANK_CHECK(a && b, "calloc");
    coh_call c = th_call(g, scratch_oom_mode ? COH_COLL_REDUCE : COH_COLL_ALL_REDUCE,
                         COHORT_FLOAT32, COHORT_SUM, scratch_oom_mode ? 1 : -1, n);
    if (rank == 1)
        coh_alloc_fail_after_here(0);
    uint64_t t0 = coh_now_ns();
    st = scratch_oom_mode ? coh_shm_reduce(g->shm, &c, a, b, n, 1)
                          : coh_shm_all_reduce(g->shm, &c, a, b, n);
    coh_alloc_fail_after_here(-1);
    double ms = (coh_now_ns() - t0) / 1e6;
    fprintf(stderr, "rank %d: %s after %.1f ms: %s\n", rank, cohort_status_name(st), ms,
            th_errmsg(g));
    atomic_store(&th_sh()->flag[rank], 1);
    th_wait_flag(1 - rank, 10000);
    RANK_CHECK(rank == 1 ? st == COHORT_ERR_NOMEM
                         : st == COHORT_ERR_NOMEM || st == COHORT_ERR_ABORTED,
               "got %s: %s", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(strstr(th_errmsg(g), "scratch"), "message does not name the scratch: %s",
               th_errmsg(g));
    RANK_CHECK(ms < 5000, "took %.1f ms", ms);
    free(a);
    free(b);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(single_copy_scratch_oom)
{
    scratch_oom_mode = _i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 20000,
                  .extra_env = "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=4096"};
    int want[2] = {0, 0};
    run_expect(&o, scratch_oom_rank, NULL, want);
}
END_TEST

/* ---- SIGSTOP ---- */

static int stop_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 3, 500, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    if (rank == 2)
        raise(SIGSTOP);
    float a = 1, b;
    uint64_t t0 = coh_now_ns();
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    st = coh_shm_all_reduce(g->shm, &c, &a, &b, 1);
    double ms = (coh_now_ns() - t0) / 1e6;
    fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, cohort_status_name(st), ms,
            th_errmsg(g));
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "got %s: %s", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(ms >= 400 && ms < 3000, "timed out after %.0f ms (timeout 500)", ms);
    if (rank == 0)
        kill(g->peers[2].pid, SIGKILL);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(sigstop_timeout)
{
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 20000};
    int want[3] = {0, 0, 128 + SIGKILL};
    run_expect(&o, stop_rank, NULL, want);
}
END_TEST

/* ---- a long call that always progresses is not a stall ---- */

/* A 16 MiB broadcast in 256-byte pieces to a rank that a thread of the root
 * stops for 200 ms at a time (SIGSTOP) and lets run in between until it has
 * received another 1/SLOW_WINDOWS of the message (read from its buffer with
 * process_vm_readv), so the call lasts at least SLOW_WINDOWS stops however
 * fast the machine, and no window ends before data moved however loaded it
 * is: every wait without progress is far shorter than the 1 s group
 * timeout, the call far longer. COHORT_TIMEOUT bounds a wait without progress (as in the tcp
 * transport, test_tcp_data long_transfer_not_a_stall): before 2026-12-02 the
 * shm wait clock started at the call's first wait and never restarted, and
 * the root failed with COHORT_ERR_TIMEOUT after ~1 s while the broadcast
 * still moved. Windows were first wall time (5 ms: on a quiet machine the
 * call ended in 2 stops), then 1 ms of the receiver's CPU (a machine that
 * copies faster needs fewer of them). Two copies, pinned: where attach's
 * probe finds the kernel's copy faster (auto), the broadcast is one
 * process_vm_readv of 16 MiB that a stop cannot split - the call then ends
 * in one window (202 ms with COHORT_SHM_SINGLE_COPY=on), as it did in the
 * CI run of 2026-12-02 12:13. */
#define SLOW_BYTES (16u << 20)
#define SLOW_TIMEOUT_MS 1000
#define SLOW_STOP_MS 200
#define SLOW_WINDOWS 16
#define SLOW_WINDOW_MAX_MS 300 /* a window that moved some data: long enough */

typedef struct {
    pid_t pid;
    uint64_t addr; /* the receiver's buffer, in its address space */
    _Atomic int done;
    int stops;
    int unreadable; /* errno of a failed read (then windows are wall time) */
} slower_arg;

static unsigned char slow_byte(size_t i)
{
    return (unsigned char)(i * 131u + 7u);
}

/* Whether the 8 bytes at off of the receiver's buffer hold the broadcast's
 * data (the buffer starts zeroed; the pattern has no 8 zero bytes in a row). */
static int slow_arrived_at(slower_arg *a, size_t off)
{
    unsigned char w[8];
    struct iovec l = {w, sizeof w}, r = {(void *)(uintptr_t)(a->addr + off), sizeof w};
    if (process_vm_readv(a->pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof w) {
        if (!a->unreadable)
            a->unreadable = errno ? errno : EIO;
        return 0;
    }
    for (size_t i = 0; i < sizeof w; i++)
        if (w[i] != slow_byte(off + i))
            return 0;
    return 1;
}

/* How much of the message the receiver holds: the pieces land in order, so
 * the arrived part is a prefix, found by bisection. */
static size_t slow_arrived(slower_arg *a)
{
    size_t lo = 0, hi = SLOW_BYTES / 8; /* words [0, lo) arrived, [hi, end) not known */
    if (slow_arrived_at(a, SLOW_BYTES - 8))
        return SLOW_BYTES;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (slow_arrived_at(a, mid * 8))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo * 8;
}

/* The n-th CPU this process may run on (-1: none). */
static int slow_cpu(int n)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && n-- == 0)
            return c;
    return -1;
}

static void slow_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *slower(void *arg)
{
    slower_arg *a = arg;
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (slow_cpu(1) >= 0) /* a CPU of its own, away from both ranks */
        slow_pin(slow_cpu(1));
    while (!atomic_load(&a->done)) {
        kill(a->pid, SIGSTOP);
        th_sleep_ms(SLOW_STOP_MS);
        size_t got0 = slow_arrived(a);
        uint64_t t0 = coh_now_ns();
        kill(a->pid, SIGCONT);
        a->stops++;
        /* A window ends once data moved: 1/SLOW_WINDOWS of the message, or
         * any after SLOW_WINDOW_MAX_MS. Never without progress: on a loaded
         * machine the resumed receiver may not get a CPU for a while, and
         * stopping it again would make the root's wait without progress two
         * stops long, over the timeout (seen once under ASan at load ~20). */
        for (;;) {
            size_t got = slow_arrived(a) - got0;
            if (atomic_load(&a->done) || got >= SLOW_BYTES / SLOW_WINDOWS ||
                (got > 0 && coh_now_ns() - t0 >= SLOW_WINDOW_MAX_MS * 1000000ull))
                break;
            /* a short sleep, not sched_yield: yielding hands this core to
             * the root's main thread for a whole slice (windows of 3.7 ms
             * that moved 2.4 MB instead of 512 KiB); timer slack 1 ns */
            usleep(20);
        }
    }
    return NULL;
}

static int slow_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 2, SLOW_TIMEOUT_MS, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    unsigned char *buf = malloc(SLOW_BYTES);
    RANK_CHECK(buf, "malloc");
    for (size_t i = 0; i < SLOW_BYTES; i++)
        buf[i] = rank == 0 ? slow_byte(i) : 0;
    slower_arg sa = {.pid = g->peers[1].pid};
    pthread_t th;
    /* Both ranks on one CPU, the stopper on another: with a CPU each the
     * ranks keep both busy, the stopper waits a scheduler tick to run and
     * a window overshoots its share several times (3.9 ms windows that
     * moved 7 MB, 3-6 stops in all). */
    int cpu0 = slow_cpu(0);
    if (slow_cpu(1) >= 0)
        slow_pin(cpu0);
    if (rank == 1) {
        /* rank 0 reads how much arrived (Yama's ptrace_scope 1 allows only
         * ancestors unless told; EINVAL without Yama) */
        (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
        atomic_store(&th_sh()->val[0], (int64_t)(uintptr_t)buf);
    }
    /* Both ranks enter the call together, and the stops start then: rank 1
     * stopped while it fills its buffer would not have reached the call,
     * which is a wait without progress. */
    if (rank == 1)
        atomic_store(&th_sh()->flag[0], 1);
    th_wait_flag(0, 60000);
    sa.addr = (uint64_t)atomic_load(&th_sh()->val[0]);
    if (rank == 0)
        RANK_CHECK(pthread_create(&th, NULL, slower, &sa) == 0, "pthread_create");
    uint64_t t0 = coh_now_ns();
    coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, SLOW_BYTES);
    st = coh_shm_broadcast(g->shm, &c, buf, SLOW_BYTES, 0);
    double ms = (coh_now_ns() - t0) / 1e6;
    if (rank == 0) {
        atomic_store(&sa.done, 1);
        pthread_join(th, NULL);
        RANK_CHECK(!sa.unreadable, "reading the receiver's buffer: %s", strerror(sa.unreadable));
    }
    fprintf(stderr, "rank %d: %s after %.0f ms (group timeout %d ms; %d stops of %d ms)%s%s\n",
            rank, cohort_status_name(st), ms, SLOW_TIMEOUT_MS, sa.stops, SLOW_STOP_MS,
            st ? ": " : "", st ? th_errmsg(g) : "");
    RANK_CHECK(st == COHORT_OK, "got %s: %s", cohort_status_name(st), th_errmsg(g));
    long bad = -1;
    for (size_t i = 0; i < SLOW_BYTES && bad < 0; i++)
        if (buf[i] != slow_byte(i))
            bad = (long)i;
    RANK_CHECK(bad < 0, "byte %ld differs", bad);
    /* The test means something only if the call outlasted the timeout. */
    if (rank == 0)
        RANK_CHECK(ms > 1.5 * SLOW_TIMEOUT_MS, "the broadcast took only %.0f ms: it must outlast "
                                               "the %d ms timeout to test it",
                   ms, SLOW_TIMEOUT_MS);
    free(buf);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(long_call_not_a_stall)
{
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 120000,
                  .extra_env = "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_SMALL_BYTES=64;"
                               "COHORT_SHM_SINGLE_COPY=off"};
    int want[2] = {0, 0};
    run_expect(&o, slow_rank, NULL, want);
}
END_TEST

/* ---- leaks ---- */

/* Open fds of this process. Rank 0 hosts the store, whose client sockets
 * come and go with the other ranks: there, sockets are not counted (the
 * segment's own unix socket is covered on the other ranks). */
static int count_fds(void)
{
    const char *rank = getenv("RANK");
    int skip_sockets = rank && !strcmp(rank, "0") && getenv("MASTER_PORT");
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
            continue;
        char path[64], link[128] = "";
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t l = readlink(path, link, sizeof link - 1);
        /* Gone while we scan: only rank 0's store thread closes descriptors
         * concurrently (its clients' sockets, which are not counted). */
        if (l <= 0)
            continue;
        link[l] = 0;
        if (skip_sockets && !strncmp(link, "socket:", 7))
            continue;
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

static int maps_mention(const char *what)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int hit = 0;
    while (f && fgets(line, sizeof line, f))
        hit |= strstr(line, what) != NULL;
    if (f)
        fclose(f);
    return hit;
}

static int leak_rank(int rank, void *arg)
{
    int n = *(int *)arg;
    for (int round = 0; round < 10; round++) {
        cohort_group *g = th_group_bare(rank, n, 10000);
        RANK_CHECK(g, "group");
        /* per round and group: distinct store keys */
        cohort_store_close(g->store);
        char pfx[32];
        snprintf(pfx, sizeof pfx, "1/g%d/", round);
        RANK_CHECK(cohort_store_prefixed(g->store_root, pfx, &g->store) == COHORT_OK, "prefix");
        g->id = (uint32_t)round;
        int fds = count_fds();
        RANK_PASS(cht_tp_up(g, coh_shm_create(g, &g->shm)), g);
        RANK_CHECK(maps_mention("cohort-shm"), "segment not mapped?");
        coh_call c = th_call(g, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
        RANK_CHECK(coh_shm_barrier(g->shm, &c) == COHORT_OK, "barrier: %s", th_errmsg(g));
        coh_shm_destroy(g->shm);
        g->shm = NULL;
        RANK_CHECK(count_fds() == fds, "round %d: %d fds before create, %d after destroy", round,
                   fds, count_fds());
        RANK_CHECK(!maps_mention("cohort-shm"), "round %d: segment still mapped", round);
        th_group_free(g);
    }
    th_done(n);
    return 0;
}

/* /dev/shm entries that could be ours (other jobs and other cohort tests
 * on a shared machine come and go, so only this transport's name counts). */
static int dev_shm_cohort(void)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, "cohort-shm") != NULL;
    if (d)
        closedir(d);
    return n;
}

START_TEST(no_leaks)
{
    static int sizes[] = {1, 2, 4};
    int n = sizes[_i];
    int dev_shm = dev_shm_cohort();
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = n, .deadline_ms = 30000};
    int want[4] = {0, 0, 0, 0};
    run_expect(&o, leak_rank, &n, want);
    ck_assert_int_eq(dev_shm_cohort(), dev_shm);
}
END_TEST

/* ---- authentication ---- */

static int auth_mode; /* 0 wrong token, 1 wrong generation */

static int auth_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    if (rank == 2) { /* the impostor, claiming to be local rank 1 */
        cohort_group *g = th_group_bare(1, 2, 5000);
        RANK_CHECK(g, "group");
        /* An impostor finds the socket name by other means (abstract names
         * are listed in /proc/net/unix); it has no access to the job's
         * store namespace, so its own failure must not reach the group:
         * copy the name into a private namespace and run from there. */
        RANK_CHECK(th_private_ns(g, "impostor/", "shm/0/addr") == COHORT_OK, "segment address");
        if (auth_mode == 0) {
            free(g->token);
            g->token = strdup("not-the-job-token");
        } else {
            g->generation = 2;
        }
        st = cht_tp_up(g, coh_shm_create(g, &g->shm));
        fprintf(stderr, "impostor: %s: %s\n", cohort_status_name(st), th_errmsg(g));
        atomic_store(&th_sh()->flag[1], 1);
        RANK_CHECK(st == COHORT_ERR_AUTH, "impostor got %s: %s", cohort_status_name(st),
                   th_errmsg(g));
        th_group_free(g);
        th_done(3);
        return 0;
    }
    if (rank == 1)
        th_wait_flag(1, 10000);
    cohort_group *g = th_group(rank, 2, 10000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    check_sum2(g);
    th_group_free(g);
    th_done(3);
    return 0;
}

START_TEST(impostor_refused)
{
    auth_mode = _i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 20000};
    int want[3] = {0, 0, 0};
    run_expect(&o, auth_rank, NULL, want);
}
END_TEST

/* ---- silent local connections at the rendezvous (issue 13, broken #4) ----
 * Rank 2 plays a local process that found the abstract name (it is listed
 * in /proc/net/unix) and holds FLOOD_CONNS connections open without a
 * word, reopening each one the lead closes. Modes: 0 same uid, 1 another
 * uid (setuid nobody), 2 same uid while the real member never comes, 3
 * FLOOD_MAX same-uid connections (the lead evicts the oldest pending ones,
 * the flooder reopens them: the member attaches amid that churn). */
static int flood_mode;
#define FLOOD_CONNS 8
#define FLOOD_MAX 200 /* mode 3: more than the lead's 64 pending, churning */
static int flood_conns(void) { return flood_mode == 3 ? FLOOD_MAX : FLOOD_CONNS; }

static int flood_open(const struct sockaddr_un *a, socklen_t l)
{
    int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c >= 0 && connect(c, (const struct sockaddr *)a, l) != 0) {
        close(c);
        return -1;
    }
    return c;
}

static void flooder(void)
{
    cohort_group *g = th_group_bare(1, 2, 5000);
    RANK_CHECK(g, "group");
    coh_monitor_stop(g);
    void *val = NULL;
    size_t vl = 0;
    RANK_CHECK(cohort_store_get(g->store, "shm/0/addr", 10, &val, &vl, 10000) == COHORT_OK,
               "segment address");
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, val, vl < sizeof a.sun_path - 2 ? vl : sizeof a.sun_path - 2);
    socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + vl);
    free(val);
    if (flood_mode == 1)
        RANK_CHECK(setgid(65534) == 0 && setuid(65534) == 0, "setuid nobody");
    int fds[FLOOD_MAX], nf = flood_conns();
    for (int i = 0; i < nf; i++)
        fds[i] = flood_open(&a, al);
    atomic_store(&th_sh()->flag[1], 1);
    /* Hold them, never answering, reopening what the lead closes, until
     * the ranks are done (bounded). */
    uint64_t end = coh_now_ns() + 15000000000ull;
    long reopened = 0;
    while (!atomic_load(&th_sh()->flag[2]) && coh_now_ns() < end) {
        for (int i = 0; i < nf; i++) {
            char b[512];
            if (fds[i] >= 0 && recv(fds[i], b, sizeof b, MSG_DONTWAIT) != 0)
                continue; /* open (EAGAIN) or got the lead's M1: stay silent */
            if (fds[i] >= 0)
                close(fds[i]);
            fds[i] = flood_open(&a, al);
            reopened++;
        }
        th_sleep_ms(1);
    }
    for (int i = 0; i < nf; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    fprintf(stderr, "flooder (mode %d): reopened %ld connections\n", flood_mode, reopened);
    th_done(3);
}

static int flood_rank(int rank, void *arg)
{
    (void)arg;
    if (rank == 2) {
        flooder();
        return 0;
    }
    cohort_status st;
    if (flood_mode == 2) {
        if (rank == 1) { /* the member that never comes */
            th_wait_flag(2, 15000);
            th_done(3);
            return 0;
        }
        cohort_group *g = th_group_bare(0, 2, 1500);
        RANK_CHECK(g, "group");
        uint64_t t0 = coh_now_ns();
        st = cht_tp_up(g, coh_shm_create(g, &g->shm));
        double ms = (coh_now_ns() - t0) / 1e6;
        atomic_store(&th_sh()->flag[2], 1);
        fprintf(stderr, "lead: %s after %.0f ms: %s\n", cohort_status_name(st), ms, th_errmsg(g));
        RANK_CHECK(st == COHORT_ERR_TIMEOUT, "got %s", cohort_status_name(st));
        RANK_CHECK(ms < 2500, "%.0f ms", ms);
        RANK_CHECK(strstr(th_errmsg(g), "rank(s) 1") && strstr(th_errmsg(g), "did not authenticate") &&
                       strstr(th_errmsg(g), " uid "),
                   "message: %s", th_errmsg(g));
        th_group_free(g);
        th_done(3);
        return 0;
    }
    if (rank == 1)
        th_wait_flag(1, 10000);
    uint64_t t0 = coh_now_ns();
    cohort_group *g = th_group(rank, 2, 10000, &st);
    double ms = (coh_now_ns() - t0) / 1e6;
    if (rank == 1)
        fprintf(stderr, "member attached in %.0f ms beside %d silent connections\n", ms,
                flood_conns());
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    /* Strangers cost the real member nothing measurable (a few ms; the
     * bound leaves room for a loaded machine), far below the old 2 s each. */
    RANK_CHECK(rank == 0 || ms < 1000, "member took %.0f ms", ms);
    check_sum2(g);
    if (rank == 0)
        atomic_store(&th_sh()->flag[2], 1);
    th_group_free(g);
    th_done(3);
    return 0;
}

START_TEST(silent_connections)
{
    flood_mode = _i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 30000};
    int want[3] = {0, 0, 0};
    run_expect(&o, flood_rank, NULL, want);
}
END_TEST

/* ---- a member that keeps its handshake open after M3 ----
 * The lead closes a served handshake only once the member closed its end
 * (docs/shm.md "Who closes first"); members 1-4 keep theirs open 3 s
 * after reading M3 (COHORT_SHM_HS_LINGER_MS: stopped or descheduled
 * there). The lead serves every member without waiting for any of them
 * (their M3s within 400 ms of each other; waiting in place, 500 ms each, put
 * 1-2 s between the first and the last), gives each at most its 500 ms
 * after the last was served, says so, and the group works. */
#define LINGER_N 6

static int linger_rank(int rank, void *arg)
{
    (void)arg;
    if (rank >= 1 && rank <= 4)
        setenv("COHORT_SHM_HS_LINGER_MS", "3000", 1);
    cohort_status st;
    cohort_group *g = th_group(rank, LINGER_N, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    if (rank > 0)
        atomic_store(&th_sh()->flag[8 + rank], (int)((g->shm->hs_m3_ns / 1000000) & 0x3fffffff));
    int a = rank + 1, b = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_SUM, -1, 1);
    RANK_PASS(coh_shm_all_reduce(g->shm, &c, &a, &b, 1), g);
    RANK_CHECK(b == LINGER_N * (LINGER_N + 1) / 2, "sum %d", b);
    if (rank == 0) {
        int lo = 0, hi = 0;
        for (int q = 1; q < LINGER_N; q++) {
            int d = (atomic_load(&th_sh()->flag[8 + q]) - atomic_load(&th_sh()->flag[9])) &
                    0x3fffffff;
            d = d >= 0x20000000 ? d - 0x40000000 : d; /* signed ms from rank 1's */
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
        }
        coh_shm *s = g->shm;
        fprintf(stderr, "members' M3 within %d ms; the lead waited %.0f ms for closes after the "
                        "last, %d kept theirs open\n",
                hi - lo, s->hs_linger_ns / 1e6, s->hs_lingered);
        /* promptness bounds, scaled (docs/testing.md) */
        double scale = cht_time_scale();
        RANK_CHECK(hi - lo < 400 * scale, "the members' M3s spread over %d ms: the lead waited for "
                                          "lingering handshakes before serving the next",
                   hi - lo);
        /* 4, or 5 if rank 5 itself was descheduled 500 ms between M3 and
         * its close (a loaded machine: what the bound is for) */
        RANK_CHECK(s->hs_lingered == 4 || s->hs_lingered == 5,
                   "%d members counted as lingering, want 4", s->hs_lingered);
        RANK_CHECK(s->hs_linger_ns < 1e9 * scale, "the lead waited %.0f ms for the closes",
                   s->hs_linger_ns / 1e6);
    }
    th_group_free(g);
    th_done(LINGER_N);
    return 0;
}

START_TEST(lingering_member)
{
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = LINGER_N, .deadline_ms = 60000};
    int want[LINGER_N] = {0};
    run_expect(&o, linger_rank, NULL, want);
}
END_TEST

/* ---- allocation failures ---- */

START_TEST(oom_walk)
{
    int fds = count_fds(), ok = 0;
    for (long k = 0; k < 100 && !ok; k++) {
        cohort_group *g = th_group_bare(0, 1, 1000);
        ck_assert_ptr_nonnull(g);
        coh_alloc_fail_after(k);
        cohort_status st = cht_tp_up(g, coh_shm_create(g, &g->shm));
        coh_alloc_fail_after(-1);
        if (st == COHORT_OK)
            ok = 1;
        else
            ck_assert_msg(st == COHORT_ERR_NOMEM && g->shm == NULL, "k=%ld: %s", k,
                          cohort_status_name(st));
        th_group_free(g);
    }
    ck_assert_msg(ok, "create never succeeded");
    ck_assert_int_eq(count_fds(), fds);
    ck_assert(!maps_mention("cohort-shm"));
}
END_TEST

/* ---- create without a lead, bad configuration ---- */

static int nolead_rank(int rank, void *arg)
{
    (void)arg;
    if (rank == 0) { /* hosts the store but never creates the segment */
        cohort_group *g0 = th_group_bare(0, 2, 300);
        RANK_CHECK(g0, "group");
        th_done(2);
        th_group_free(g0);
        return 0;
    }
    cohort_group *g = th_group_bare(rank, 2, 300);
    RANK_CHECK(g, "group");
    uint64_t t0 = coh_now_ns();
    cohort_status st = cht_tp_up(g, coh_shm_create(g, &g->shm));
    double ms = (coh_now_ns() - t0) / 1e6;
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "got %s: %s", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(ms < 2000, "%.0f ms", ms);
    RANK_CHECK(strstr(th_errmsg(g), "rank 0"), "message: %s", th_errmsg(g));
    th_group_free(g);
    th_done(2);
    return 0;
}

/* ---- a stale segment address ----
 * The member reads an address the lead is not (or no longer) listening on:
 * mode 0, the store keeps naming it: the member fails within its bounded
 * retry (about 2 s) with a message saying the store still names it; mode 1,
 * the real address replaces it 300 ms later: the member retries, attaches
 * and the group works. The member runs in a private store namespace (as
 * the impostor does) holding the stale name; rank 2 plays the store's
 * late update. */
static int stale_mode;
static const char stale_name[] = "cohort-shm-00000000000000000000000000000000";

static int stale_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    if (rank == 2) { /* copies the real address into the member's namespace */
        cohort_group *g = th_group_bare(1, 2, 5000);
        RANK_CHECK(g, "group");
        coh_monitor_stop(g);
        th_wait_flag(1, 10000); /* the member is connecting to the stale name */
        th_sleep_ms(300);
        if (stale_mode == 1)
            RANK_CHECK(th_private_ns(g, "stale/", "shm/0/addr") == COHORT_OK, "segment address");
        th_group_free(g);
        th_done(3);
        return 0;
    }
    if (rank == 1) {
        cohort_group *g = th_group_bare(1, 2, 10000);
        RANK_CHECK(g, "group");
        RANK_CHECK(th_private_ns(g, "stale/", NULL) == COHORT_OK, "ns");
        RANK_CHECK(cohort_store_set(g->store, "shm/0/addr", 10, stale_name,
                                    sizeof stale_name - 1) == COHORT_OK,
                   "set");
        atomic_store(&th_sh()->flag[1], 1);
        uint64_t t0 = coh_now_ns();
        st = cht_tp_up(g, coh_shm_create(g, &g->shm));
        double ms = (coh_now_ns() - t0) / 1e6;
        fprintf(stderr, "member: %s after %.0f ms: %s\n", cohort_status_name(st), ms, th_errmsg(g));
        if (stale_mode == 0) {
            RANK_CHECK(st == COHORT_ERR_SYSTEM, "got %s", cohort_status_name(st));
            RANK_CHECK(strstr(th_errmsg(g), "Connection refused") &&
                           strstr(th_errmsg(g), "while the store still names it"),
                       "message: %s", th_errmsg(g));
            RANK_CHECK(ms >= 1500 && ms < 6000, "gave up after %.0f ms", ms);
            atomic_store(&th_sh()->flag[2], 1); /* the lead may give up now */
            th_group_free(g);
            th_done(3);
            return 0;
        }
        RANK_CHECK(st == COHORT_OK, "got %s: %s", cohort_status_name(st), th_errmsg(g));
        check_sum2(g);
        th_group_free(g);
        th_done(3);
        return 0;
    }
    cohort_group *g = th_group_bare(0, 2, stale_mode == 0 ? 8000 : 10000);
    RANK_CHECK(g, "group");
    st = cht_tp_up(g, coh_shm_create(g, &g->shm));
    if (stale_mode == 0) { /* its member never attached: a timeout naming it */
        RANK_CHECK(st == COHORT_ERR_TIMEOUT, "lead got %s: %s", cohort_status_name(st),
                   th_errmsg(g));
        th_wait_flag(2, 10000);
    } else {
        RANK_CHECK(st == COHORT_OK, "lead got %s: %s", cohort_status_name(st), th_errmsg(g));
        check_sum2(g);
    }
    th_group_free(g);
    th_done(3);
    return 0;
}

START_TEST(stale_address)
{
    stale_mode = _i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 30000};
    int want[3] = {0, 0, 0};
    run_expect(&o, stale_rank, NULL, want);
}
END_TEST

/* ---- a stray close of the lead's rendezvous socket ----
 * Another part of the lead's process closes the listening socket's
 * descriptor (a double close elsewhere): the lead must notice at once
 * (POLLNVAL) instead of waiting out its timeout with members refused, and
 * its members must get its reason through the store. */
static void *stray_closer(void *arg)
{
    char *name = arg;
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_un a;
        socklen_t l = sizeof a;
        if (getsockname(fd, (struct sockaddr *)&a, &l) != 0 || a.sun_family != AF_UNIX ||
            l <= offsetof(struct sockaddr_un, sun_path) + 1 || a.sun_path[0] != 0)
            continue;
        size_t nl = l - offsetof(struct sockaddr_un, sun_path) - 1;
        if (nl == strlen(name) && memcmp(a.sun_path + 1, name, nl) == 0) {
            close(fd);
            atomic_store(&th_sh()->flag[1], 1);
            return NULL;
        }
    }
    return NULL;
}

static void *stray_watch(void *arg)
{
    cohort_group *g = arg;
    /* the lead's own store handle publishes; read it through another */
    cohort_store *st = NULL;
    if (cohort_store_prefixed(g->store_root, "gen1/g0/", &st) != COHORT_OK)
        return NULL;
    void *v = NULL;
    size_t vl = 0;
    if (cohort_store_get(st, "shm/0/addr", 10, &v, &vl, 10000) == COHORT_OK) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)vl, (char *)v);
        free(v);
        stray_closer(name);
    }
    cohort_store_close(st);
    return NULL;
}

static int stray_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    if (rank == 1) {
        cohort_group *g = th_group_bare(1, 2, 10000);
        RANK_CHECK(g, "group");
        th_wait_flag(1, 10000); /* after the stray close */
        uint64_t t0 = coh_now_ns();
        st = cht_tp_up(g, coh_shm_create(g, &g->shm));
        double ms = (coh_now_ns() - t0) / 1e6;
        fprintf(stderr, "member: %s after %.0f ms: %s\n", cohort_status_name(st), ms, th_errmsg(g));
        RANK_CHECK(st == COHORT_ERR_SYSTEM && strstr(th_errmsg(g), "closed by another part"),
                   "member got %s: %s", cohort_status_name(st), th_errmsg(g));
        RANK_CHECK(ms < 5000, "member took %.0f ms", ms);
        th_group_free(g);
        th_done(2);
        return 0;
    }
    cohort_group *g = th_group_bare(0, 2, 10000);
    RANK_CHECK(g, "group");
    pthread_t t;
    pthread_create(&t, NULL, stray_watch, g);
    uint64_t t0 = coh_now_ns();
    st = cht_tp_up(g, coh_shm_create(g, &g->shm));
    double ms = (coh_now_ns() - t0) / 1e6;
    pthread_join(t, NULL);
    fprintf(stderr, "lead: %s after %.0f ms: %s\n", cohort_status_name(st), ms, th_errmsg(g));
    RANK_CHECK(st == COHORT_ERR_SYSTEM && strstr(th_errmsg(g), "closed by another part"),
               "lead got %s: %s", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(ms < 5000, "lead took %.0f ms (its timeout is 10 s)", ms);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(stray_close)
{
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 30000};
    int want[2] = {0, 0};
    run_expect(&o, stray_rank, NULL, want);
}
END_TEST

START_TEST(no_lead_timeout)
{
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 20000};
    int want[2] = {0, 0};
    run_expect(&o, nolead_rank, NULL, want);
}
END_TEST

/* Each tuning variable out of its range or not an integer: the group
 * fails with COHORT_ERR_INVALID naming the variable, its value and the
 * range. */
static const struct {
    const char *name, *value, *range;
} bad_envs[] = {
    {"COHORT_SHM_SLOT_BYTES", "abc", "[64, 268435456]"},
    {"COHORT_SHM_SLOT_BYTES", "12", "[64, 268435456]"},
    {"COHORT_SHM_SLOT_BYTES", "99999999999", "[64, 268435456]"},
    {"COHORT_SHM_SLOT_BYTES", "268435457", "[64, 268435456]"},
    {"COHORT_SHM_SMALL_BYTES", "-1", "[0, 268435456]"},
    {"COHORT_SHM_SMALL_BYTES", "268435457", "[0, 268435456]"},
    {"COHORT_SHM_SMALL_BYTES", "1k", "[0, 268435456]"},
    {"COHORT_SHM_RING_SLOTS", "-1", "[0, 256]"},
    {"COHORT_SHM_RING_SLOTS", "257", "[0, 256]"},
    {"COHORT_SHM_RING_SLOTS", "8x", "[0, 256]"},
    {"COHORT_SHM_RING_BYTES", "-1", "[0, 1048576]"},
    {"COHORT_SHM_RING_BYTES", "1048577", "[0, 1048576]"},
    {"COHORT_SHM_RING_SPLIT", "yes", "want auto, on or off"},
    {"COHORT_SHM_COMPACT_PACK", "2", "want auto, on or off"},
};

START_TEST(bad_env)
{
    const char *name = bad_envs[_i].name, *value = bad_envs[_i].value;
    setenv(name, value, 1);
    cohort_group *g = th_group_bare(0, 1, 1000);
    cohort_status st = cht_tp_up(g, coh_shm_create(g, &g->shm));
    char want[128];
    const char *r = bad_envs[_i].range;
    snprintf(want, sizeof want, r[0] == '[' ? "%s=%s: want an integer in %s" : "%s=%s: %s", name,
             value, r);
    ck_assert_msg(st == COHORT_ERR_INVALID, "%s=%s: %s", name, value, cohort_status_name(st));
    ck_assert_msg(strstr(th_errmsg(g), want), "%s (want \"%s\")", th_errmsg(g), want);
    th_group_free(g);
    unsetenv(name);
}
END_TEST

/* COHORT_SHM_RING_SLOTS rounds down to a power of two; 0 or 1 slot, or
 * COHORT_SHM_RING_BYTES=0, is no ring. Unset (k DEEP), the default for
 * this one-rank group: 8 (64 is for 2 ranks, test_shm_ring back_to_back;
 * docs/shm.md "The ring's depth"). */
#define DEEP ((size_t)-1)
static const struct {
    const char *slots, *bytes;
    size_t k, kbytes;
} ring_envs[] = {
    {"0", NULL, 0, 0},   {"1", NULL, 0, 0},   {"2", NULL, 2, 16384},  {"3", NULL, 2, 16384},
    {"7", NULL, 4, 16384}, {"8", NULL, 8, 16384}, {"63", NULL, 32, 16384}, {"64", "1024", 64, 1024},
    {"256", "1024", 256, 1024},
    {NULL, NULL, DEEP, 16384}, {NULL, "1024", DEEP, 1024}, {NULL, "32768", 8, 32768},
    {"16", "0", 0, 0},
};

START_TEST(ring_env)
{
    if (ring_envs[_i].slots)
        setenv("COHORT_SHM_RING_SLOTS", ring_envs[_i].slots, 1);
    if (ring_envs[_i].bytes)
        setenv("COHORT_SHM_RING_BYTES", ring_envs[_i].bytes, 1);
    cohort_group *g = th_group_bare(0, 1, 1000);
    cohort_status st = cht_tp_up(g, coh_shm_create(g, &g->shm));
    ck_assert_msg(st == COHORT_OK, "%s: %s", cohort_status_name(st), th_errmsg(g));
    size_t k = ring_envs[_i].k == DEEP ? th_ring_default_k(1, ring_envs[_i].kbytes) : ring_envs[_i].k;
    ck_assert_msg(g->shm->ring_k == k && g->shm->ring_bytes == ring_envs[_i].kbytes,
                  "slots %s bytes %s: ring %zu x %zu, want %zu x %zu", ring_envs[_i].slots,
                  ring_envs[_i].bytes, g->shm->ring_k, g->shm->ring_bytes, k,
                  ring_envs[_i].kbytes);
    th_group_free(g);
    unsetenv("COHORT_SHM_RING_SLOTS");
    unsetenv("COHORT_SHM_RING_BYTES");
}
END_TEST

/* ---- a forged segment header ----
 * The header is memory the lead wrote and any local process of the job can
 * still write: a member checks a private copy against its own view of the
 * group and its own computation of the layout (shm_geo.c). */

/* A header the lead would write for n ranks (the defaults' ring, one record
 * a line or two), and the member's view that matches it */
static void valid_header(shm_seg_hdr *h, shm_hdr_want *w, int n, size_t crec, uint64_t S)
{
    memset(h, 0, sizeof *h);
    *w = (shm_hdr_want){n, 0x31524843u, 7, 0x1234567890abcdefull, 1, 0};
    shm_ringcfg rc = {8, 16384, 128, 256, 0, crec};
    shm_geo geo;
    shm_hdr_fill(h, w, (size_t)S, S < 16384 ? (size_t)S : 16384, &rc, 65536, &geo);
    w->size = geo.total;
}

#define HF(f) offsetof(shm_seg_hdr, f), sizeof(((shm_seg_hdr *)0)->f), #f
enum { POKE, ADD }; /* set the field, or add to it */
static const struct {
    size_t off, size;
    const char *field;
    int how;
    uint64_t v;
} hdr_pokes[] = {
    {HF(magic), POKE, 0},
    {HF(version), ADD, 1},
    {HF(version), ADD, (uint64_t)-1},
    {HF(group), ADD, 1},
    {HF(gen), ADD, 1},
    {HF(job_hash), ADD, 1},
    {HF(local_size), ADD, 1},
    {HF(check_contract), POKE, 0},
    {HF(check_contract), POKE, 2},
    {HF(slot_bytes), POKE, 0},
    {HF(slot_bytes), POKE, 100},                       /* not whole lines */
    {HF(slot_bytes), POKE, 268435456ull + 64},         /* over the bound */
    {HF(slot_bytes), POKE, UINT64_MAX - 63},           /* wraps buf_stride to 0 */
    {HF(small_bytes), ADD, 1u << 30},
    {HF(ring_k), POKE, 3},
    {HF(ring_k), POKE, 1},
    {HF(ring_k), POKE, 512},
    {HF(ring_k), POKE, 1ull << 40},
    {HF(ring_bytes), POKE, 0},
    {HF(ring_bytes), POKE, (1u << 20) + 64},
    {HF(tiny_k), POKE, 3},
    {HF(tiny_k), POKE, 2048},
    {HF(tiny_bytes), POKE, 0},
    {HF(tiny_bytes), POKE, 16384 + 64},                /* more than the ring's */
    {HF(ring_split), POKE, 2},
    {HF(crec_stride), POKE, 0},
    {HF(crec_stride), POKE, 16},
    {HF(crec_stride), POKE, 48},
    {HF(crec_stride), POKE, 128},
    {HF(p2p_bytes), POKE, 100},
    {HF(p2p_bytes), POKE, (1u << 20) + 64},
    {HF(buf_stride), ADD, 64},
    {HF(rank_stride), ADD, 4096},
    {HF(ctl_off), ADD, (uint64_t)-4096},
    {HF(slot_off), ADD, 4096},
    {HF(ring_off), ADD, 4096},
    {HF(ring_stride), ADD, (uint64_t)-4096},
    {HF(p2p_off), ADD, 4096},
    {HF(p2p_stride), POKE, 0},
    {HF(total_bytes), ADD, 4096},
};

static void poke(void *base, size_t i)
{
    unsigned char *p = (unsigned char *)base + hdr_pokes[i].off;
    if (hdr_pokes[i].size == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v = hdr_pokes[i].how == ADD ? v + hdr_pokes[i].v : hdr_pokes[i].v;
        memcpy(p, &v, 8);
    } else {
        uint32_t v;
        memcpy(&v, p, 4);
        v = hdr_pokes[i].how == ADD ? v + (uint32_t)hdr_pokes[i].v : (uint32_t)hdr_pokes[i].v;
        memcpy(p, &v, 4);
    }
}

/* Each field changed alone, for 2 and 5 ranks and both record spacings;
 * the unchanged header passes. */
START_TEST(header_check)
{
    static const int ns[] = {2, 5};
    for (size_t a = 0; a < 2; a++)
        for (size_t crec = 32; crec <= 64; crec += 32) {
            shm_seg_hdr h;
            shm_hdr_want w;
            valid_header(&h, &w, ns[a], crec, 512 * 1024);
            const char *bad = shm_hdr_check(&h, &w);
            ck_assert_msg(!bad, "n %d crec %zu: the lead's own header refused: %s", ns[a], crec,
                          bad);
            shm_seg_hdr f = h;
            poke(&f, (size_t)_i);
            bad = shm_hdr_check(&f, &w);
            ck_assert_msg(bad && !strcmp(bad, hdr_pokes[_i].field),
                          "n %d crec %zu: %s %s %llu: check said %s", ns[a], crec,
                          hdr_pokes[_i].field, hdr_pokes[_i].how == ADD ? "+" : "=",
                          (unsigned long long)hdr_pokes[_i].v, bad ? bad : "(accepted)");
        }
}
END_TEST

/* Layouts a hostile lead computes consistently (every offset agrees with
 * the forged number, the mapping has the forged total): the ranges refuse
 * them, where equality alone would not. */
START_TEST(header_forged_layouts)
{
    static const struct {
        uint64_t S;
        size_t crec;
        const char *field;
    } cases[] = {
        {UINT64_MAX - 63, 64, "slot_bytes"}, /* buf_stride 0: every rank's slots one place */
        {(1ull << 63), 64, "slot_bytes"},
        {64, 64, "slot_bytes"},              /* 5 ranks need 4 blocks of 8 B: 64 is enough */
        {512 * 1024, 48, "crec_stride"},     /* records across lines */
        {512 * 1024, 16, "crec_stride"},     /* records over each other */
    };
    for (size_t i = 0; i < COH_ARRAY_LEN(cases); i++) {
        shm_seg_hdr h;
        shm_hdr_want w;
        valid_header(&h, &w, 5, cases[i].crec, cases[i].S);
        const char *bad = shm_hdr_check(&h, &w);
        if (i == 2) { /* the smallest legal slot passes */
            ck_assert_msg(!bad, "64 B slots refused: %s", bad);
            valid_header(&h, &w, 10, 64, 64); /* 9 blocks of 8 B do not fit 64 B */
            bad = shm_hdr_check(&h, &w);
        }
        ck_assert_msg(bad && !strcmp(bad, cases[i].field), "case %zu: check said %s, want %s", i,
                      bad ? bad : "(accepted)", cases[i].field);
    }
    /* a mapping smaller than the header says, or than a header */
    shm_seg_hdr h;
    shm_hdr_want w;
    valid_header(&h, &w, 2, 64, 512 * 1024);
    w.size -= 4096;
    ck_assert_str_eq(shm_hdr_check(&h, &w), "total_bytes");
    w.size = 100;
    ck_assert_str_eq(shm_hdr_check(&h, &w), "size");
}
END_TEST

/* Live: the member rewrites one field of its lead's header in the lead's
 * mapping (process_vm_writev; same uid) after the lead published its
 * address, so after the lead wrote the header, and then attaches. The
 * member fails with COHORT_ERR_PROTOCOL naming the field, and so does the
 * lead, at once: the member's reason reaches it through the abort words. */
static const size_t live_pokes[] = {27 /* crec_stride 48 */, 12 /* slot_bytes wraps */,
                                    14 /* ring_k 3 */, 7 /* check_contract 0 */};

static uint64_t lead_segment(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    uint64_t a = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "memfd:cohort-shm") && strstr(line, "rw-s")) {
            a = strtoull(line, NULL, 16);
            break;
        }
    if (f)
        fclose(f);
    return a;
}

static int forged_rank(int rank, void *arg)
{
    size_t i = *(const size_t *)arg;
    char want[96];
    snprintf(want, sizeof want, "unexpected header: %s (", hdr_pokes[live_pokes[i]].field);
    if (rank == 0) {
        atomic_store(&th_sh()->val[0], (int64_t)getpid());
        cohort_group *g = th_group_bare(0, 2, 20000);
        RANK_CHECK(g, "group");
        uint64_t t0 = coh_now_ns();
        cohort_status st = cht_tp_up(g, coh_shm_create(g, &g->shm));
        double ms = (coh_now_ns() - t0) / 1e6;
        fprintf(stderr, "lead: %s after %.0f ms: %s\n", cohort_status_name(st), ms, th_errmsg(g));
        /* the member's reason through the segment's abort words, long
         * before the 20 s attach timeout */
        RANK_CHECK(st == COHORT_ERR_PROTOCOL, "lead: %s, want PROTOCOL", cohort_status_name(st));
        RANK_CHECK(strstr(th_errmsg(g), want), "lead: \"%s\" lacks \"%s\"", th_errmsg(g), want);
        RANK_CHECK(ms < 10000, "the lead failed after %.0f ms", ms);
        th_group_free(g);
        th_done(2);
        return 0;
    }
    cohort_group *g = th_group_bare(1, 2, 5000);
    RANK_CHECK(g, "group");
    void *val = NULL;
    size_t len = 0;
    RANK_CHECK(cohort_store_get(g->store, "shm/0/addr", 10, &val, &len, 10000) == COHORT_OK,
               "the lead's address");
    free(val);
    pid_t lead = (pid_t)atomic_load(&th_sh()->val[0]);
    uint64_t base = lead_segment(lead);
    RANK_CHECK(base, "no cohort-shm mapping in /proc/%d/maps", (int)lead);
    unsigned char hdr[SHM_HDR_PLAIN_BYTES];
    struct iovec l = {hdr, sizeof hdr}, r = {(void *)(uintptr_t)base, sizeof hdr};
    RANK_CHECK(process_vm_readv(lead, &l, 1, &r, 1, 0) == (ssize_t)sizeof hdr,
               "process_vm_readv: %s", strerror(errno));
    poke(hdr, live_pokes[i]);
    RANK_CHECK(process_vm_writev(lead, &l, 1, &r, 1, 0) == (ssize_t)sizeof hdr,
               "process_vm_writev: %s", strerror(errno));
    cohort_status st = cht_tp_up(g, coh_shm_create(g, &g->shm));
    fprintf(stderr, "member: %s: %s\n", cohort_status_name(st), th_errmsg(g));
    RANK_CHECK(st == COHORT_ERR_PROTOCOL, "member: %s, want PROTOCOL", cohort_status_name(st));
    RANK_CHECK(strstr(th_errmsg(g), want), "member: \"%s\" lacks \"%s\"", th_errmsg(g), want);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(header_forged_live)
{
    size_t i = (size_t)_i;
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 30000};
    int want[2] = {0, 0};
    run_expect(&o, forged_rank, &i, want);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("shm_fault");
    TCase *tc = tcase_create("fault");
    tcase_add_test(tc, sigkill_small);
    tcase_add_test(tc, sigkill_large);
    tcase_add_loop_test(tc, sigkill_single_copy, 0, 10);
    tcase_add_loop_test(tc, single_copy_scratch_oom, 0, 2);
    tcase_add_loop_test(tc, single_copy_bad_buffer, 0, 3);
    tcase_add_loop_test(tc, single_copy_failed_peer, 0, 2);
    tcase_add_test(tc, pid_word_rewritten);
    tcase_add_test(tc, handshake_reset_after_reply);
    tcase_add_test(tc, sigstop_timeout);
    tcase_add_loop_test(tc, no_leaks, 0, 3);
    tcase_add_loop_test(tc, impostor_refused, 0, 2);
    tcase_add_loop_test(tc, silent_connections, 0, 4);
    tcase_add_test(tc, lingering_member);
    tcase_add_test(tc, oom_walk);
    tcase_add_test(tc, no_lead_timeout);
    tcase_add_loop_test(tc, stale_address, 0, 2);
    tcase_add_test(tc, stray_close);
    tcase_add_loop_test(tc, bad_env, 0, (int)COH_ARRAY_LEN(bad_envs));
    tcase_add_loop_test(tc, ring_env, 0, (int)COH_ARRAY_LEN(ring_envs));
    tcase_add_loop_test(tc, header_check, 0, (int)COH_ARRAY_LEN(hdr_pokes));
    tcase_add_test(tc, header_forged_layouts);
    tcase_add_loop_test(tc, header_forged_live, 0, (int)COH_ARRAY_LEN(live_pokes));
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    /* its own case: CK_RUN_CASE=progress runs it alone */
    TCase *tp = tcase_create("progress");
    tcase_add_test(tp, long_call_not_a_stall);
    tcase_set_timeout(tp, 150);
    suite_add_tcase(s, tp);
    return s;
}

COH_TEST_MAIN(make_suite)

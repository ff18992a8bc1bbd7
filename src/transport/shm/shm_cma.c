/*
 * shm_cma.c - the single-copy probe and reads (shm_cma.h).
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "transport/shm/shm_cma.h"
#include "util/futex.h"
#include "util/util.h"

#define CMA_DEFAULT_MIN ((size_t)64 << 10)
/* Published with cma_min when COHORT_SHM_SINGLE_COPY_BYTES was set: the
 * user's size then rules every op, the apart rule's own sizes do not. */
#define CMA_MIN_SET ((uint64_t)1 << 63)

/* The apart rule's smallest call per op (bytes as shm_cma_use counts them:
 * a broadcast's message, all_gather's/gather's/scatter's block per rank,
 * all_to_all's block per pair). 2 ranks with a cpu each, quiet, Intel host
 * (session 16, bench/compare/single_copy_ops_ab.sh, 3 + 3 rounds; ratio =
 * single / two copies of the mean): broadcast 8/16/32 KiB x1.15/x0.73/x0.42;
 * all_gather and all_to_all 4 KiB a block x0.90/x1.01, 8 KiB x0.60-0.72;
 * gather and scatter 8 KiB a block x1.12-1.25, 16 KiB x0.68-0.85; from
 * there up to 16 MiB x0.24-0.83 for every op (docs/shm.md, "Single copy";
 * docs/performance.md, "Issue #14: session 16"). reduce: 24-32 KiB
 * x0.48-0.56 (session 16); session 17, 4 rounds, p50: 16 KiB x0.89 back to
 * back and x0.48 OSU style (the two-copy ring lets the leaf return early,
 * which pays only back to back), 12 KiB x1.1-1.3 back to back; with the
 * leaf reducing a part too, every size above (x0.44-0.64 at 64 KiB-16 MiB);
 * all_reduce from 2 MiB (AR_OOP_TO below). send/recv, split between the
 * two ranks (shm_p2p.c), session 22, 3 rounds, p50 one way: 16 KiB-1 MiB
 * x0.35-0.51 of two copies with the send buffer never rewritten, x0.77-0.89
 * in place, x0.55-0.78 rewritten before each send (fresh_send.c); 4-16 MiB
 * x0.44-0.64 in all three; 8 KiB x0.94 / x1.3 in place. */
/* reduce_scatter apart, from this many bytes in all (the blocks of every
 * rank). Session 26, AMD host in its slow state, 3-4 rounds, mean single /
 * two copies: out of place 16 KiB x0.9-1.1, 32 KiB x0.69-0.80, 64 KiB-64
 * MiB x0.43-0.66; in place (recv == send: the peer's block was just
 * rewritten, its lines modified in the other core) 64 KiB x1.2-1.4, 128
 * KiB x0.95-1.4, 256 KiB x0.92-1.08, 512 KiB-2 MiB x0.87-0.99, 4-16 MiB
 * x0.78-0.95 (docs/shm.md "Reduce_scatter by single copy"). Session 29,
 * after session 28 dropped the in-place copy aside, 6 launches each, p50
 * single / two copies in place: far 256 KiB-4 MiB x1.23-1.29, near
 * x1.9-2.6 - so in place takes two copies (shm_coll.c rs_single). */
#define RS_FROM ((size_t)256 << 10)
/* all_to_all with ranks outnumbering cpus takes the single copy where the
 * 64 KiB probe's kernel copy costs at most 3.0 memcpys (shm_cma_agree's
 * a2a_busy); the reason names the same figure */
#define A2A_CHEAP_X10 30
#define A2A_CHEAP_WORDS "3.0"
/* all_to_all's single copy with ranks outnumbering cpus and the kernel's
 * copy cheap, from this many bytes a pair (shm_cma_agree) */
#define A2A_BUSY_FROM ((size_t)16 << 10)
#define A2A_CROWD_FROM ((size_t)32 << 10)
/* send/recv's, 2 ranks a cpu and the copy cheap (shm_cma_agree) */
#define P2P_BUSY_FROM ((size_t)24 << 10)
/* reduce with 2 ranks a cpu where the kernel's copy is cheap: the single
 * copy for [RED_BUSY_FROM, RED_BUSY_TO) bytes (shm_cma_agree's red_busy) */
#define RED_BUSY_FROM ((size_t)32 << 10)
#define RED_BUSY_TO ((size_t)192 << 10)
/* 2 ranks apart, a rooted call directly after a barrier: the single copy
 * from this many bytes (a block; shm_cma_agree's ring first) */
#define BAR_SINGLE_FROM ((size_t)4 << 10)
static size_t apart_from(int coll)
{
    switch (coll) {
    case COH_COLL_ALL_GATHER:
    case COH_COLL_ALL_TO_ALL:
        return (size_t)8 << 10;
    case COH_COLL_BROADCAST:
    case COH_COLL_SEND:
    case COH_COLL_GATHER:
    case COH_COLL_SCATTER:
    case COH_COLL_REDUCE:
        return (size_t)16 << 10;
    case COH_COLL_ALL_REDUCE:
        return (size_t)2 << 20;
    case COH_COLL_REDUCE_SCATTER:
        return RS_FROM;
    default:
        return SIZE_MAX;
    }
}

/* all_reduce apart, out of place, from this size: two copies again (the
 * descriptors say whether any rank is in place; shm_coll.c ar_single).
 * Session 17, quiet, 3 rounds, p50 single / two copies: out of place
 * 2-16 MiB x0.68-0.74, 32 MiB x0.97-1.03, 64 MiB x1.21-1.26 (the peer's
 * reduced half is read from memory once more); in place 2 MiB x0.93, 4 MiB
 * x0.72, 8-32 MiB x0.39-0.44, 64 MiB x0.70; below 2 MiB in place
 * x1.15-1.30 (the second half's lines are shared with the peer that just
 * read them), out of place 256 KiB-1 MiB x0.75-0.80, 128 KiB x1.4. */
#define AR_OOP_TO ((size_t)32 << 20)

/* all_reduce apart, out of place, from this size up to the apart rule's
 * own size (2 MiB): single copy while the cpus are far apart, two copies
 * while near (shm_xc_flags). 2 ranks apart, p50, single / two copies: AMD
 * host in its slow state (the cores' round trip 330-400 ns), 6 launches
 * each (2026-12-05, bench/compare/results/2026-12-05-s29-xcore): 64 KiB
 * x0.86, 256 KiB x0.75, 1 MiB x0.72; the same host near (49 ns): 64 KiB
 * x3.1, 256 KiB x2.7, 1 MiB x2.5; an Intel host (session 17, far): 128 KiB
 * x1.4, 256 KiB-1 MiB x0.75-0.80 - so from 256 KiB. */
#define XC_AR_FROM ((size_t)256 << 10)
/* Where the kernel's copy is dear (xc_dear), all_reduce (and since session
 * 47 wherever the copy is cheap too, reduce_scatter: XC_RS_FROM) out of
 * place enter the single copy's open phase from this size and take
 * the single copy while the cpus measure far (near: two copies,
 * shm_xc_two_copies). Session 42, 2 ranks apart, the AMD host, every launch
 * far (c2c 420-510 ns), 6 rounds, both modes, p50 single / two copies
 * (results/2026-12-07-s42-far-mid): reduce_scatter 64 KiB 17.9 -> 6.2 us
 * (x0.34-0.35), 128 KiB 35.1 -> 9.4 (x0.27); all_reduce 64 KiB x0.76-0.78,
 * 128 KiB x0.70; 256-512 KiB x0.99-1.01 (both already single far). Two
 * copies far cost 3.4x their near time at 64 KiB (5.4 against 18 us). */
#define XC_DEAR_FROM ((size_t)64 << 10)
/* reduce_scatter the same way wherever the lead's cross-core verdict runs
 * (2 ranks apart), the kernel's copy dear or cheap: from this size in all,
 * out of place, the single copy while far. Session 47, the Intel host
 * (cheap), every launch far, 6 rounds, both modes, two runs, p50 single /
 * two copies out of place (results/2026-12-08-s47-rs-far): 64 KiB
 * x0.61-0.72, 128 KiB x0.51-0.68, 192 KiB x0.47-0.58. In place, which
 * opens and then takes two copies: x0.84-1.04 OSU style, x1.04-1.27 back
 * to back (session 42 on the AMD host: x0.98-1.04). */
#define XC_RS_FROM ((size_t)64 << 10)
/* A round trip of one line between the two cores at or above this is far:
 * between the near states (49-140 ns, one core complex) and the far ones
 * (330-620 ns) this host moves between (bench/compare/c2c.c). */
#define XC_FAR_NS 200u
/* The lead probes at most this often, and only in calls that ask (the
 * adaptive sizes): 16 round trips, ~6 us far, ~1 us near. */
#define XC_EVERY_NS ((uint64_t)10 * 1000 * 1000)
/* After a failed probe the interval doubles, up to 2^7 x 10 ms (1.3 s): a
 * peer that keeps missing them (its cpu shared, a loaded host) costs the
 * lead at most 1 ms in 1.3 s. */
#define XC_BACKOFF_MAX 7u
/* Spin this long before each await also yields the cpu: a peer that shares
 * it (unbound ranks on a loaded host) gets to answer. */
#define XC_SPIN_NS ((uint64_t)20 * 1000)
#define XC_ROUNDS 8   /* round trips per batch; the estimate is the best batch's mean */
#define XC_BATCHES 2
/* A probe ends after this long whatever happened (a peer stopped or
 * descheduled): no measurement, and the call goes on to its own phases,
 * whose waits detect a lost peer. */
#define XC_LIMIT_NS ((uint64_t)1000 * 1000)
/* Near sends calls of at most this many bytes to two copies (what was
 * measured; shm_xc_two_copies) */
#define XC_NEAR_TO ((size_t)4 << 20)
/* The ring's verdict ("the ring's verdict" below): the outcome word's
 * states, and the calls from one probe to the next */
enum { XW_DECIDED = 1u, XW_GAVE_UP = 2u };
#define XW_N_FIRST 64u                  /* calls to the second probe (at least xw_n_min) */
#define XW_N_MAX ((uint64_t)1 << 22)    /* fits the word's 24 bits */
#define XW_EPOCH(v) ((v) >> 32)
#define XW_FROM_WORDS "8192 B" /* SHM_XW_FROM, in copy_info */
/* The lead's timed verdict ("the lead's timed verdict" below): its window
 * from OV_FROM bytes; the first decision at window call OV_N_FIRST (after
 * each class's first explored calls, ov_explore), then every 8 << code
 * window calls, the code from the lead's call rate for one decision every
 * OV_EVERY_NS; a rank waits at most OV_LIMIT_NS for the lead's word. */
#define OV_FROM ((size_t)64 << 10)
/* all_to_all from 16 KiB a pair: 4 ranks, the single copy forced from 16
 * KiB against two copies, 4 rounds, p50 far x0.41-0.83 at 16-48 KiB a pair,
 * near x1.08-1.64 (results/2026-12-07-s44-busy-timed/a2a-16k-premise);
 * its size classes start there (shm_ov_class) */
#define OV_A2A_FROM ((size_t)16 << 10)
/* reduce from 32 KiB (session 46): where the kernel's copy is cheap the
 * probe's rule gave 32-192 KiB the single copy (RED_BUSY_FROM), but on the
 * Intel host in session 45 two copies ran 4 ranks 32-64 KiB x0.78-0.96 of
 * it and 3 ranks x0.87-0.93, the single copy ahead again at 128 KiB
 * (results/2026-12-07-s45-red4-ab, -s45-red3-ab): no fixed bound held on
 * one host, so the lead's times decide from the rule's own start. Its
 * classes start there (shm_ov_class). */
#define OV_RED_FROM RED_BUSY_FROM
#define OV_N_FIRST 20u
#define OV_N_MAX ((uint64_t)8 << 7)
#define OV_EVERY_NS ((uint64_t)10 * 1000 * 1000)
#define OV_LIMIT_NS ((uint64_t)20 * 1000 * 1000)
/* A class's calls 1-OV_RUN, then the last OV_RUN in every OV_PERIOD, run
 * the other path, and only a run's calls from its OV_SETTLE + 1st on are
 * timed, on either path. A call carries the state the call before it left
 * (which rank waits for which; whose lines are where): session 46, Intel
 * host, 3 ranks on 2 cpus, reduce of 32 KiB, the lead's own times in one
 * launch - the single copy 10.6-11.3 us run steadily but 15-17 us as a
 * lone call among two-copy calls, two copies 12-13 us steadily but
 * 10-10.5 us as a lone call among single-copy calls. Timed one call at a
 * time (2 in 256, the first unrecorded), the verdict measured the switch:
 * it moved that reduce to two copies, x1.05-1.13 of the single copy it
 * left (p50 over launches, results/2026-12-07-s46-seeded). */
#define OV_RUN 8u
#define OV_SETTLE 4u
#define OV_PERIOD 512u
/* samples of each path a class needs before a decision moves it */
#define OV_MIN_SAMPLES 3u
/* the word: the epoch (16 bits), decided, the interval's code (3 bits),
 * a path bit per class */
#define OV_EPOCH(v) ((v) >> 48)
#define OV_DECIDED ((uint64_t)1 << 47)
#define OV_CODE(v) ((v) >> 44 & 7u)
#define OV_BITS(v) ((v) & (((uint64_t)1 << SHM_OV_CLASSES) - 1))
_Static_assert(SHM_OV_CLASSES <= 44, "the classes' bits fit below the code");
_Static_assert(SHM_XW_FROM == 8192, "XW_FROM_WORDS names SHM_XW_FROM");

/* A choice variable's value as the index of its name in opts (n names,
 * "|"-joined in the warning); unset or empty: dflt; anything else: a
 * warning and dflt. */
static int env_pick(const char *name, const char *const *opts, int n, int dflt)
{
    const char *v = coh_env_str(name);
    if (!v || !*v)
        return dflt;
    for (int k = 0; k < n; k++)
        if (!strcmp(v, opts[k]))
            return k;
    char list[96] = "";
    for (int k = 0; k < n; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? "|" : "", opts[k]);
    coh_warn("%s=%s: expected %s; using %s", name, v, list, opts[dflt]);
    return dflt;
}

enum { M_OFF, M_AUTO, M_ON, M_PROBE_FAIL };
static int mode(void)
{
    static const char *const o[] = {"off", "auto", "on", "probe-fail"};
    return env_pick("COHORT_SHM_SINGLE_COPY", o, 4, M_AUTO);
}

/* COHORT_SHM_XCORE: how 2 ranks apart learn how far their cpus are -
 * 1 auto (probed during calls), 2 near, 3 far (fixed: tests, A/B) */
static int xc_mode(void)
{
    static const char *const o[] = {"auto", "near", "far"};
    return 1 + env_pick("COHORT_SHM_XCORE", o, 3, 0);
}

/* COHORT_SHM_BUSY: how 3-4 ranks on 2 cpus choose between the single copy
 * and two copies for broadcast from 64 KiB, reduce from 32 KiB and
 * all_to_all from 16 KiB a pair - 0 timed (the lead's timed verdict, seeded
 * by the attach probe's rules), 1 two copies, 2 the single copy (fixed:
 * A/B, tests), 3 the probe's rules alone, never timed (the rules before
 * session 46: A/B, or a program that wants no explored calls) */
enum { OV_M_TIMED, OV_M_TWO, OV_M_SINGLE, OV_M_PROBE };
static int ov_mode(void)
{
    static const char *const o[] = {"timed", "two", "single", "probe"};
    return env_pick("COHORT_SHM_BUSY", o, 4, OV_M_TIMED);
}

/* COHORT_SHM_MEM: 0 off, 1 on (default), 2 map-fail (tests: pidfd_getfd
 * asks for a descriptor that does not exist), 3 nosplit (a reader does not
 * offer its own region: A/B of the split) */
static int mem_mode(void)
{
    static const char *const o[] = {"off", "on", "map-fail", "nosplit"};
    return env_pick("COHORT_SHM_MEM", o, 4, 1);
}

void shm_cma_publish(coh_shm *s)
{
    shm_ctl *me = shm_ctl_of(s, s->me);
    randombytes_buf(&s->probe_word, sizeof s->probe_word);
    s->probe_word |= 1; /* never 0: a zero-filled read cannot pass */
    long v = 0;
    uint64_t min = CMA_DEFAULT_MIN;
    if (coh_env_int("COHORT_SHM_SINGLE_COPY_BYTES", &v) == 1 && v >= 1)
        min = ((uint64_t)v & ~CMA_MIN_SET) | CMA_MIN_SET;
    /* The speed probe's buffer, which a peer reads; touched now so the
     * copies time no page faults (the copies' destination is my slot,
     * touched at attach). mmap, not malloc: a failure only skips the
     * measurement. */
    uint64_t pb = 0, t0 = coh_now_ns();
    if (s->n > 1 && mode() != M_OFF) {
        void *b = mmap(NULL, SHM_CMA_PROBE_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b != MAP_FAILED) {
#ifdef MADV_POPULATE_WRITE
            if (madvise(b, SHM_CMA_PROBE_BYTES, MADV_POPULATE_WRITE) != 0)
#endif
                memset(b, 0x5a, SHM_CMA_PROBE_BYTES);
            s->probe_buf = b;
            pb = (uint64_t)(uintptr_t)b;
        }
    }
    s->probe_ns = coh_now_ns() - t0;
    s->cma_end = SIZE_MAX;
    atomic_store(&me->probe_addr, (uint64_t)(uintptr_t)&s->probe_word);
    atomic_store(&me->probe_val, s->probe_word);
    atomic_store(&me->cma_min, min);
    atomic_store(&me->probe_buf, pb);
    atomic_store(&me->cma_ns, 0);
    atomic_store(&me->cpy_ns, 0);
    atomic_store(&me->cma_ns_s, 0);
    atomic_store(&me->cpy_ns_s, 0);
    atomic_store(&me->cma_ok, 0);
}

void shm_cma_release(coh_shm *s)
{
    if (s->probe_buf)
        munmap(s->probe_buf, SHM_CMA_PROBE_BYTES);
    s->probe_buf = NULL;
}

/* The speed probe: the best of PROBE_REPS process_vm_readv calls from the
 * next rank's probe buffer into my slot, and the best of as many memcpy
 * calls of the same size, at two sizes - SHM_CMA_PROBE_SMALL and
 * SHM_CMA_PROBE_BYTES (each capped at the slot size) - published in ns (0:
 * not measured). My slot is mine to write here (after the attach barrier
 * nobody reads it before the first call). Bounded: SHM_CMA_PROBE_ROUNDS
 * (3) x 12 copies of <= 256 KiB and the 256 KiB buffer's first touch;
 * docs/shm.md "Single copy" has the measured cost. */
#define PROBE_REPS 3
static int time_copies(coh_shm *s, pid_t pid, uint64_t src, size_t len, uint64_t *cma,
                       uint64_t *cpy)
{
    unsigned char *dst = shm_buf(s, s->me, 0) + SHM_LINE;
    uint64_t best_cma = UINT64_MAX, best_cpy = UINT64_MAX;
    for (int i = 0; i < PROBE_REPS; i++) {
        struct iovec l = {.iov_base = dst, .iov_len = len};
        struct iovec r = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
        uint64_t t0 = coh_now_ns();
        ssize_t k = process_vm_readv(pid, &l, 1, &r, 1, 0);
        uint64_t t1 = coh_now_ns();
        if (k != (ssize_t)len)
            return 0;
        best_cma = COH_MIN(best_cma, t1 - t0);
        memcpy(dst, s->probe_buf, len);
        /* keep the copy: the compiler may not drop or shorten it */
        __asm__ volatile("" : : "r"(dst) : "memory");
        best_cpy = COH_MIN(best_cpy, coh_now_ns() - t1);
    }
    *cma = COH_MIN(COH_MAX(best_cma, 1), UINT32_MAX);
    *cpy = COH_MIN(COH_MAX(best_cpy, 1), UINT32_MAX);
    return 1;
}

int shm_cma_median_round(const uint64_t *a, const uint64_t *b)
{
    for (int i = 0; i < SHM_CMA_PROBE_ROUNDS; i++) {
        int below = 0, above = 0;
        for (int j = 0; j < SHM_CMA_PROBE_ROUNDS; j++)
            if (j != i) {
                /* a[i] / b[i] against a[j] / b[j]; ties ordered by round */
                uint64_t x = a[i] * b[j], y = a[j] * b[i];
                below += x < y || (x == y && i < j);
                above += x > y || (x == y && i > j);
            }
        if (below == SHM_CMA_PROBE_ROUNDS / 2 && above == SHM_CMA_PROBE_ROUNDS / 2)
            return i;
    }
    return 0; /* unreachable: the ties' order makes the order total */
}

/* The probe's two sizes for a slot of S bytes (the large one is what the
 * copy_info line names). */
static size_t probe_len(const coh_shm *s, size_t want)
{
    return COH_MIN(want, s->S & ~(size_t)4095);
}

static void measure(coh_shm *s)
{
    shm_ctl *me = shm_ctl_of(s, s->me);
    int q = (s->me + 1) % s->n;
    shm_ctl *c = shm_ctl_of(s, q);
    uint64_t src = atomic_load(&c->probe_buf);
    size_t len = probe_len(s, SHM_CMA_PROBE_BYTES), len_s = probe_len(s, SHM_CMA_PROBE_SMALL);
    if (!s->probe_buf || !src || len < 4096)
        return;
    pid_t pid = s->peer_pid[q];
    /* SHM_CMA_PROBE_ROUNDS readings, back to back; at each size the one
     * whose ratio is the median. A first reading runs cold: in 120-150
     * launches of two processes probing each other as here
     * (bench/compare/probe_rounds.c, the Intel host, 2026-12-08) the first
     * 64 KiB reading came out above 3.2 (the limit until then) in 1-10,
     * the second in 0-3, the median of the first three in none. This
     * attach's one reading was above it in 21 of 360 launches of 2-4 ranks
     * (13 of 120 at 2), the median of three in none, its largest 2.80
     * (results/2026-12-08-s47-probe-median); a launch read dear runs the
     * dear rules (session 46, 2 ranks: x1.3-3.4 in several cells). The
     * median reads x0.90-0.92 of the one reading at the p50, hence the
     * limit's move to 3.0 (A2A_CHEAP_WORDS). No barrier between readings:
     * read back to back, the readings after the first matched those taken
     * in step with the peer (p50 2.69 either way). */
    enum { R = SHM_CMA_PROBE_ROUNDS };
    uint64_t cma_r[R], cpy_r[R], cma_sr[R], cpy_sr[R];
    for (int r = 0; r < R; r++)
        if (!time_copies(s, pid, src, len_s, &cma_sr[r], &cpy_sr[r]) ||
            !time_copies(s, pid, src, len, &cma_r[r], &cpy_r[r]))
            return;
    int ms = shm_cma_median_round(cma_sr, cpy_sr), ml = shm_cma_median_round(cma_r, cpy_r);
    uint64_t cma = cma_r[ml], cpy = cpy_r[ml], cma_s = cma_sr[ms], cpy_s = cpy_sr[ms];
    /* Tests of auto's decision on a machine whose kernel copy is slow:
     * COHORT_SHM_SINGLE_COPY_PROBE_NS=CMA,MEMCPY replaces the measured
     * times at both sizes, =CMA_S,MEMCPY_S,CMA,MEMCPY the small probe's
     * and the large one's (the copies above still ran, so the path is the
     * real one). */
    const char *fake = coh_env_str("COHORT_SHM_SINGLE_COPY_PROBE_NS");
    unsigned long f[4];
    int nf = fake ? sscanf(fake, "%lu,%lu,%lu,%lu", &f[0], &f[1], &f[2], &f[3]) : 0;
    if (nf == 2 && f[0] && f[1])
        cma = cma_s = f[0], cpy = cpy_s = f[1];
    else if (nf == 4 && f[0] && f[1] && f[2] && f[3])
        cma_s = f[0], cpy_s = f[1], cma = f[2], cpy = f[3];
    atomic_store(&me->cma_ns_s, (uint32_t)COH_MIN(cma_s, UINT32_MAX));
    atomic_store(&me->cpy_ns_s, (uint32_t)COH_MIN(cpy_s, UINT32_MAX));
    atomic_store(&me->cma_ns, (uint32_t)COH_MIN(cma, UINT32_MAX));
    atomic_store(&me->cpy_ns, (uint32_t)COH_MIN(cpy, UINT32_MAX));
}

void shm_cma_size_rule(uint64_t sum_cma_s, uint64_t sum_cpy_s, uint64_t sum_cma,
                       uint64_t sum_cpy, uint64_t len_s, uint64_t len, size_t *lo, size_t *hi)
{
    /* d < 0: the kernel's single copy wins at that size (see the caller
     * for the 3/2 threshold). Sums of <= 4096 ranks' uint32 times: no
     * overflow in int64. */
    int64_t ds = 2 * (int64_t)sum_cma_s - 3 * (int64_t)sum_cpy_s;
    int64_t dl = 2 * (int64_t)sum_cma - 3 * (int64_t)sum_cpy;
    *lo = 0;
    *hi = SIZE_MAX;
    if (ds <= 0 && dl <= 0)
        return; /* wins at both sizes: every size */
    if (ds > 0 && dl > 0) {
        *lo = SIZE_MAX; /* loses at both: no size */
        *hi = 0;
        return;
    }
    if (len <= len_s) { /* one size only (a small slot): its verdict */
        if (dl > 0)
            *lo = SIZE_MAX, *hi = 0;
        return;
    }
    /* d is linear in the size between (and beyond) the two probes when
     * each copy's time is a fixed cost plus a per-byte cost: the size x
     * where it crosses 0, rounded up to a page. ds and dl have opposite
     * signs, so |ds| + |dl| > 0 and |ds| / (|ds| + |dl|) < 1. */
    uint64_t a = (uint64_t)(ds < 0 ? -ds : ds), b = (uint64_t)(dl < 0 ? -dl : dl);
    while (a + b >= (uint64_t)1 << 40) /* (len - len_s) * a stays < 2^64 */
        a >>= 1, b >>= 1;
    if (a + b == 0)
        a = b = 1;
    uint64_t x = len_s + ((len - len_s) * a + a + b - 1) / (a + b);
    x = (x + 4095) & ~(uint64_t)4095;
    if (ds > 0)
        *lo = (size_t)x; /* the kernel's copy wins from x up */
    else
        *hi = (size_t)x; /* ... below x only (its per-byte cost is higher) */
}

/* 1 if every peer's probe word reads back as published; else 0 with why. */
static int probe_all(coh_shm *s, int m, char *why, size_t len)
{
    if (m == M_OFF) {
        snprintf(why, len, "COHORT_SHM_SINGLE_COPY=off");
        return 0;
    }
    if (atomic_load(&s->hdr->flags) & SHM_F_NO_PIDFD) {
        snprintf(why, len, "local ranks in different pid namespaces");
        return 0;
    }
    for (int q = 0; q < s->n; q++) {
        if (q == s->me)
            continue;
        shm_ctl *c = shm_ctl_of(s, q);
        uint64_t want = atomic_load(&c->probe_val), got = 0;
        /* probe-fail: address 8, never mapped, so the real failure path runs */
        uint64_t addr = m == M_PROBE_FAIL ? 8 : atomic_load(&c->probe_addr);
        struct iovec l = {.iov_base = &got, .iov_len = sizeof got};
        struct iovec r = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof got};
        ssize_t k = process_vm_readv(s->peer_pid[q], &l, 1, &r, 1, 0);
        int e = errno;
        if (k != (ssize_t)sizeof got) {
            snprintf(why, len, "rank %d cannot read rank %d (pid %d): process_vm_readv: %s%s",
                     s->g->rank, s->g->local_ranks[q], (int)s->peer_pid[q],
                     k < 0 ? strerror(e) : "short read",
                     m == M_PROBE_FAIL ? " (COHORT_SHM_SINGLE_COPY=probe-fail)" : "");
            return 0;
        }
        if (got != want) {
            snprintf(why, len, "rank %d read another value than rank %d published", s->g->rank,
                     s->g->local_ranks[q]);
            return 0;
        }
    }
    return 1;
}

/* Verdicts published in shm_ctl.cma_ok (bits 0-3; bit 4: V_CROWD; bits
 * 5-6: xc_mode() and 7-8: ov_mode(), of which every rank takes the lead's;
 * bits 10-31: bound_cpu()). */
enum { V_NONE, V_CANNOT, V_CAN, V_WANT };
#define V_CROWD 16u

/* 1 + the one cpu this rank may run on; 0 when it may run on more. */
static uint32_t bound_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1)
        return 0;
    for (int c = 0; c < CPU_SETSIZE && c < (1 << 22) - 1; c++)
        if (CPU_ISSET(c, &set))
            return (uint32_t)c + 1;
    return 0;
}

/* V_CROWD when the machine's ranks (at least this group's local ones) are
 * more than twice the cpus the machine offers them (the union of their cpu
 * sets, coh_group_cpus): all_to_all's rule below. Each rank says so; the
 * rule needs every rank to say it (they count alike unless a rank's
 * online count could not be read). */
static uint32_t crowd_bit(const coh_shm *s)
{
    long ranks = COH_MAX((long)s->n, (long)s->g->machine_size), cpus = coh_group_cpus(s->g);
    return cpus > 0 && ranks > 2 * cpus ? V_CROWD : 0;
}

cohort_status shm_cma_agree(shm_op *o)
{
    coh_shm *s = o->s;
    char why[128] = "";
    int m = mode();
    int can = s->n > 1 && probe_all(s, m, why, sizeof why);
    if (can) {
        uint64_t t0 = coh_now_ns();
        measure(s);
        s->probe_ns += coh_now_ns() - t0;
    }
    atomic_store(&shm_ctl_of(s, s->me)->cma_ok,
                 (uint32_t)(!can ? V_CANNOT : m == M_ON ? V_WANT : V_CAN) | crowd_bit(s) |
                     (uint32_t)xc_mode() << 5 | (uint32_t)ov_mode() << 7 | bound_cpu() << 10);
    /* Barrier: every verdict is published before phase 2 is. */
    shm_publish(s);
    cohort_status st = shm_wait_all(o, s->phase);
    if (st != COHORT_OK)
        return st;
    int all_can = s->n > 1, all_want = s->n > 1, all_crowd = s->n > 2;
    uint64_t sum_cma = 0, sum_cpy = 0, sum_cma_s = 0, sum_cpy_s = 0;
    int measured = 1;
    uint32_t cpu[2] = {0, 0};
    for (int q = 0; q < s->n; q++) {
        shm_ctl *c = shm_ctl_of(s, q);
        uint32_t w = atomic_load(&c->cma_ok), v = w & 0x0f;
        all_crowd &= (w & V_CROWD) != 0;
        if (q < 2)
            cpu[q] = w >> 10;
        if (v < V_CAN && all_can) {
            all_can = 0;
            if (!why[0])
                snprintf(why, sizeof why, "rank %d could not read every peer (its log says why)",
                         s->g->local_ranks[q]);
        }
        all_want &= v == V_WANT;
        uint32_t a = atomic_load(&c->cma_ns), b = atomic_load(&c->cpy_ns);
        uint32_t as = atomic_load(&c->cma_ns_s), bs = atomic_load(&c->cpy_ns_s);
        measured &= a && b && as && bs;
        sum_cma += a;
        sum_cpy += b;
        sum_cma_s += as;
        sum_cpy_s += bs;
    }
    /* My probe buffer is read by nobody any more: every peer measured
     * before it published the verdict this rank just waited for. */
    shm_cma_release(s);
    /* auto: the kernel's copy is used where it wins, per call size. Same
     * inputs on every rank (the published times), integer arithmetic: the
     * same rule everywhere. Threshold, from the copies each path makes per
     * byte: the two-copy paths copy every byte twice, pipelined over two
     * cores, so a single copy pays off only while the kernel copies at
     * least 2/3 as fast as memcpy (ratio <= 1.5); measured at two sizes,
     * the size where the ratio crosses 1.5 bounds the range (on the
     * development VM it is ~3-4 at both: two copies everywhere,
     * docs/shm.md "Single copy"). */
    size_t len = probe_len(s, SHM_CMA_PROBE_BYTES), len_s = probe_len(s, SHM_CMA_PROBE_SMALL);
    size_t lo = SIZE_MAX, hi = 0;
    if (all_can && measured)
        shm_cma_size_rule(sum_cma_s, sum_cpy_s, sum_cma, sum_cpy, len_s, len, &lo, &hi);
    unsigned ops = 1u << COH_COLL_BROADCAST | 1u << COH_COLL_ALL_GATHER |
                   1u << COH_COLL_GATHER | 1u << COH_COLL_SCATTER | 1u << COH_COLL_ALL_TO_ALL |
                   1u << COH_COLL_REDUCE | 1u << COH_COLL_SEND;
    /* all_reduce and reduce_scatter by single copy (ar_single, rs_single)
     * were measured only apart (below); =on takes them too, the probe's win
     * does not. */
    if (all_want)
        ops |= 1u << COH_COLL_ALL_REDUCE | 1u << COH_COLL_REDUCE_SCATTER;
    uint64_t lead_w = atomic_load(&shm_ctl_of(s, 0)->cma_min);
    int lead_set = (lead_w & CMA_MIN_SET) != 0;
    size_t lead_min = (size_t)(lead_w & ~CMA_MIN_SET);
    s->cma_min = all_want ? lead_min : COH_MAX(lead_min, lo);
    s->cma_end = all_want ? SIZE_MAX : hi;
    int wins = !all_want && s->cma_min < s->cma_end;
    /* 2 ranks, each bound to a cpu of its own (cohortrun/cohort-perf
     * --bind auto|core, mpirun's default): broadcast (and since session 16
     * the other ops, below) takes single copy where the probe keeps two.
     * The probe compares the kernel's copy with a cached memcpy on one
     * core; the broadcast splits its copy over both cores, while two copies
     * move every line of the slot between the cores each call (3-4x memcpy
     * when the host has the vCPUs far apart).
     * Bound apart, single copy measured x0.22-0.41 of two copies' p50 at
     * 64 KiB-1 MiB (its mean lower in every cell, p99 in 10 of 12).
     * Unbound ranks get it too when the machine's ranks have a cpu each
     * (g->machine_size <= the machine's cpus, the union of its ranks' cpu
     * sets, coh_group_cpus; the rule of the TCP spin default):
     * the scheduler then runs them apart, and the quiet A/B (17:09 UTC,
     * cma_state_ab.sh) found unbound single copy equal to bound (64 KiB
     * 4.1 vs 12.1 us, 1 MiB 78.8 vs 178.8 back to back). The price: a
     * loaded machine that makes the two unbound ranks share one cpu runs
     * their copies one after the other (x1.0-1.8 of two copies, LOADED).
     * Bound to one cpu, never (docs/performance.md "Single copy vs Open
     * MPI's CMA"). */
    int bound_apart = cpu[0] && cpu[1] && cpu[0] != cpu[1];
    int free_apart = !cpu[0] && !cpu[1] && s->g->machine_size >= 2 &&
                     s->g->machine_size <= coh_group_cpus(s->g);
    int apart = !all_want && !wins && all_can && s->n == 2 && (bound_apart || free_apart);
    char where[48] = "";
    if (bound_apart)
        snprintf(where, sizeof where, "are bound to cpus %u and %u", cpu[0] - 1, cpu[1] - 1);
    /* Session 16, quiet, on an Intel host of the same kind (the kernel's
     * copy 2-2.8x a memcpy at the probe): the other ops win apart too -
     * all_gather 32 KiB-16 MiB x0.44-0.83 of two copies' mean, gather and
     * scatter x0.24-0.85, all_to_all x0.34-0.73 - each from its own size
     * (apart_from) unless COHORT_SHM_SINGLE_COPY_BYTES says otherwise;
     * send/recv since its copy is split too (session 22). */
    if (apart)
        s->cma_min = lead_min, s->cma_end = SIZE_MAX,
        ops = 1u << COH_COLL_BROADCAST | 1u << COH_COLL_ALL_GATHER | 1u << COH_COLL_GATHER |
              1u << COH_COLL_SCATTER | 1u << COH_COLL_ALL_TO_ALL | 1u << COH_COLL_REDUCE |
              1u << COH_COLL_ALL_REDUCE | 1u << COH_COLL_REDUCE_SCATTER | 1u << COH_COLL_SEND;
    /* More than 2 ranks per cpu (every rank's V_CROWD; 3 or more ranks):
     * all_to_all takes single copy where the probe keeps two. Each phase of
     * the two-copy all_to_all has every rank fill its whole slot (n-1
     * pieces) before any rank reads, so with 4 ranks a cpu the slots, the
     * send and the receive buffers of 8 ranks at 1 MiB (8 x 3 MiB) outgrow
     * the 16 MiB L3 of the development VM, the copies run at about 9 GB/s
     * (760 us quiet, against 136 us at 4 ranks), and moving each byte once
     * by the kernel wins: LOADED path A/B (2026-12-03, 12 pairs) 8 ranks
     * 1 MiB x0.76 back to back, x0.74 OSU, 4 MiB x0.93 / x0.88; at 2 ranks
     * a cpu it loses (4 ranks 256 KiB x1.7-2.4, 1 MiB x1.1-1.4), so not
     * there (docs/performance.md "all_to_all at 8 ranks on 2 cores
     * (session 11)") unless the kernel's copy is cheap (a2a_busy, below).
     * The other ops were not measured: not changed. */
    int crowd = !all_want && !wins && !apart && all_can && all_crowd;
    /* More local ranks than cpus (oversub, the same on every rank), 3 or
     * more: send/recv take the single copy too, the receiver reading the
     * message whole (p2p_tail: no split). The two-copy channel hands each
     * slot over between sender and receiver, and ranks that share cpus
     * wait for the scheduler at every hand-off (launches fall in two modes:
     * 4 ranks on 2 cpus 64 KiB 3.6 or 7.8-8.0 us, 256 KiB 12.6 or 28.6);
     * the receiver's one read needs no other rank running. Session 22,
     * cohort-perf sendrecv, =on against auto, p50: 4 ranks on 2 cpus
     * 256 KiB-4 MiB 11-12 / 92 / 377-577 us against 13-29 / 88-155 /
     * 379-666 back to back, OSU style 64 KiB 5.7-6.6 against 8.4-8.9, 256
     * KiB 12.6-15.5 against 28-29; 8 ranks 256 KiB-4 MiB x0.53-0.75 back to
     * back, OSU x0.59-0.96; 64 KiB mixed (8 ranks OSU 12.4 against
     * 10.4-12.2, back to back 9.6-13.0 against 11.8-18.7). Not measured
     * with 2 ranks on one cpu: not taken there. Gather and scatter too
     * (session 33): the two-copy root copies every block through its own
     * cpu while the other ranks wait their turn for the two cpus; a leaf's
     * one read of its block needs no other rank running. Intel host, quiet,
     * 3 rounds, p50 of =on (from 64 KiB a block) against auto: 4 ranks on 2
     * cpus 256 KiB-16 MiB x0.44-0.70 back to back, x0.43-0.69 OSU style; 8
     * ranks 1-16 MiB x0.52-0.68 / x0.55-0.62; 64 KiB a block x0.96-1.05
     * (results/2026-12-06-s33-intel-targets/ab/oversc). The 4-rank
     * all_to_all won there too (x0.58-0.80) but lost on a loaded AMD host
     * (session 11, above): taken only where the kernel's copy is cheap,
     * below. */
    int busy = !all_want && !wins && !apart && all_can && s->oversub && s->n > 2;
    /* And all_to_all from 2 ranks a cpu where the kernel's copy is cheap
     * (session 34): the 64 KiB probe's process_vm_readv at most 3.0x its
     * memcpy (3.2 until session 47). The two hosts measured fall on either
     * side of it. Their one reading a rank, before session 47: the Intel
     * host's probe (1,438 attaches in this repo's results) reads x2.2-2.9
     * at the median, above 3.2 in 1.9 %, and there =on took 4 ranks on 2
     * cpus x0.51-0.74 of two copies' p50 from 64 KiB a pair, both modes
     * (results/2026-12-06-s34-a2a-busy; session 33 x0.58-0.80); the AMD
     * host's reads x3.6-5.7 (1,928 attaches, at or below 3.2 in 1.0 %),
     * and there the single copy lost at 4 ranks (session 11, loaded: x1.1-
     * 2.4). The median of three readings (measure) reads x0.90-0.92 of one
     * at the p50 on the Intel host, at most 2.80 in 360 attaches: 3.0 lies
     * between that and the AMD host's low end scaled alike (x3.6 -> 3.3;
     * its median readings not measured yet). With every cpu busy the cpu
     * time per byte decides: two copies cost two memcpys a byte, the
     * single copy one kernel copy and no hand-off between two ranks. */
    int cheap = measured && 10 * sum_cma_s <= A2A_CHEAP_X10 * sum_cpy_s;
    int a2a_busy = busy && !crowd && cheap;
    /* And reduce of RED_BUSY_FROM-RED_BUSY_TO there (session 35): the
     * two-copy reduce has every rank reduce a slice between phases that
     * wait for all the ranks, each a scheduler round when they share cpus;
     * the single copy's root reads the leaves' inputs by the kernel and
     * reduces alone (the leaves a part from 64 KiB, red_share). Intel host,
     * 3 rounds, p50 of =on against auto: 3 ranks on 2 cpus 32-192 KiB
     * x0.75-0.96 back to back, x0.67-0.86 OSU style; 4 ranks 32-128 KiB
     * x0.84-0.90 / x0.91-0.97, 192 KiB x1.01 / x0.95, 256 KiB-1 MiB
     * x1.10-1.14 (the slices spread the reduction again), 16 KiB x2.3 (the
     * ring); 8 ranks (crowded) x1.5-2.0, so not there
     * (results/2026-12-06-s35-red-busy/on-auto). Where the kernel's copy is cheap,
     * as all_to_all's. */
    int red_busy = a2a_busy;
    if (crowd || busy)
        s->cma_min = lead_min, s->cma_end = SIZE_MAX,
        ops = (crowd || a2a_busy ? 1u << COH_COLL_ALL_TO_ALL : 0u) |
              (busy ? 1u << COH_COLL_SEND | 1u << COH_COLL_GATHER | 1u << COH_COLL_SCATTER : 0u) |
              (red_busy ? 1u << COH_COLL_REDUCE : 0u);
    s->cma = all_can && (all_want || wins || apart || crowd || busy);
    /* pidfd_getfd, which the one-copy broadcast's readers use, passes the
     * same ptrace check as the probe's process_vm_readv */
    s->mem_mode = mem_mode();
    s->mem_ok = all_can && s->mem_mode != 0;
    s->cma_ops = s->cma ? ops : 0;
    if (!s->cma)
        s->cma_min = lead_min, s->cma_end = SIZE_MAX;
    for (int k = 0; k < COH_COLL_KIND_COUNT; k++) {
        s->cma_from[k] = apart && !lead_set ? apart_from(k) : s->cma_min;
        s->cma_to[k] = apart && !lead_set ? SIZE_MAX : s->cma_end;
    }
    /* Busy gather and scatter from just above the ring's slot (session
     * 34): a block the ring cannot carry goes through the two-copy phases,
     * where every rank waits for all the others at each phase and ranks
     * sharing cpus wait for the scheduler there (4 ranks on 2 cpus: 16 KiB
     * a block 3.2 us, 20 KiB 10.7); a leaf's one read needs no other rank
     * running. Intel host, quiet, 3 rounds, p50 of =on against auto: 4
     * ranks 20-32 KiB a block x0.59-0.83, 8 ranks x0.67-0.79, both modes,
     * 24 of 24 cells; at 16 KiB a block (the ring's, gather) x1.2-3.7
     * (results/2026-12-06-s34-busy-gs). Never below the default slot
     * (a ring made smaller by COHORT_SHM_RING_BYTES: blocks of a few KiB
     * were not measured), never above COHORT_SHM_SINGLE_COPY_BYTES, which,
     * when set, still decides. */
    size_t gs_from = 0; /* that rule's bound (0: off), for the words below */
    if (busy && !lead_set) {
        size_t rb = s->ring_k ? COH_MAX(s->ring_bytes, (size_t)SHM_DEFAULT_RING_BYTES)
                              : SHM_DEFAULT_RING_BYTES;
        gs_from = COH_MIN(lead_min, rb + 1);
        s->cma_from[COH_COLL_GATHER] = s->cma_from[COH_COLL_SCATTER] = gs_from;
    }
    /* all_to_all with ranks outnumbering cpus where the kernel's copy is
     * cheap: from A2A_BUSY_FROM a pair (2 ranks a cpu), A2A_CROWD_FROM
     * (more) instead of the default 64 KiB (session 35). Intel host, 3
     * rounds, p50 of the single copy against auto: 3 ranks 12-32 KiB a pair
     * x0.61-0.91; 4 ranks 16-32 KiB x0.72-0.86 both modes, 9-12 KiB
     * x0.91-1.18; 8 ranks 24-48 KiB x0.54-0.59 back to back and x0.95-1.05
     * OSU style, 16 KiB x0.75 / x1.31, 8 KiB x1.3-1.9
     * (results/2026-12-06-s35-a2a-from); 6 ranks 32-43 KiB x0.47-0.87;
     * 16 ranks 32 KiB x0.79 back to back but x1.36 OSU style (crowd-6-16),
     * so crowded only up to 4 ranks a cpu. The crowded rule's 64 KiB was
     * measured on the AMD host, where the kernel's copy is dear: kept
     * there. */
    if ((crowd ? s->n <= 4 * coh_group_cpus(s->g) : a2a_busy) && cheap && !lead_set)
        s->cma_from[COH_COLL_ALL_TO_ALL] = crowd ? A2A_CROWD_FROM : A2A_BUSY_FROM;
    /* send/recv the same way, 2 ranks a cpu (session 35): the two-copy
     * channel hands each slot over between the pair, a scheduler round
     * when they share a cpu (its launches fall in two modes, 4 ranks 16 KiB
     * 1.7 or 3.3 us); the receiver's one read needs the sender only to
     * have published. 5 rounds, p50 against auto: 3 ranks 16-48 KiB
     * x0.35-0.69; 4 ranks 24-48 KiB x0.55-0.70 back to back and
     * x0.66-0.88 OSU style, 16 KiB x0.73 / x1.26; 8 ranks (crowded) 24-48
     * KiB x0.73-0.92 / x0.96-1.25 - kept at 64 KiB there
     * (results/2026-12-06-s35-p2p-from). */
    if (a2a_busy && !lead_set)
        s->cma_from[COH_COLL_SEND] = P2P_BUSY_FROM;
    /* the busy reduce's band: from the user's size when set, never past
     * where the slices win again */
    if (red_busy) {
        if (!lead_set)
            s->cma_from[COH_COLL_REDUCE] = RED_BUSY_FROM;
        s->cma_to[COH_COLL_REDUCE] = RED_BUSY_TO;
    }
    /* Ring first, 2 ranks apart (session 35): a broadcast, reduce or gather
     * the ring carries takes it back to back, up to the default slot (larger
     * slots were not measured), and a broadcast, reduce, gather or scatter
     * directly after a barrier takes the single copy from BAR_SINGLE_FROM
     * (shm_cma.h shm_cma_call). Back to back the ring's root publishes and
     * returns, its next call's copy overlapping the reader's; between
     * barriers nobody runs ahead and the ring's two copies show, while the
     * single copy's open and close cost the same either way. Intel host,
     * p50: the ring / the single copy at 16 KiB back to back x0.62-0.81,
     * OSU style (a barrier before each call) x1.53-1.79, 4 rounds each
     * (results/2026-12-06-s34-apart-ring, -s35-ring-first); the single copy /
     * the ring right after a barrier, 3 rounds (-s35-bar-from): broadcast
     * and reduce 4-12 KiB x0.71-0.97, gather and scatter 4-8 KiB a block
     * x0.81-0.94; below 4 KiB x1.26-2.5. Measured with the cpus far apart
     * (the host's usual state); near (shm_xc_two_copies) keeps these sizes
     * on the single copy as it keeps 16 KiB, unmeasured. */
    for (int k = 0; k < COH_COLL_KIND_COUNT; k++)
        s->bar_from[k] = s->cma_from[k];
    if (apart && !lead_set && s->ring_k) {
        static const int rooted[] = {COH_COLL_BROADCAST, COH_COLL_REDUCE, COH_COLL_GATHER,
                                     COH_COLL_SCATTER};
        size_t slot = COH_MIN(s->ring_bytes, (size_t)SHM_DEFAULT_RING_BYTES);
        for (size_t i = 0; i < COH_ARRAY_LEN(rooted); i++) {
            int k = rooted[i];
            /* scatter's ring carries both blocks: 2 x 16 KiB never */
            if (k != COH_COLL_SCATTER && s->cma_from[k] <= slot)
                s->cma_from[k] = slot + 1;
            s->bar_from[k] = COH_MIN(s->cma_from[k], BAR_SINGLE_FROM);
        }
    }
    s->ar_oop_to = apart && !lead_set ? AR_OOP_TO : SIZE_MAX;
    /* the adaptive band below the apart rule's all_reduce size */
    /* the lead's COHORT_SHM_XCORE on every rank: the paths it steers
     * must be the same everywhere (the ring's verdict is read on both) */
    s->xc_adapt = apart && !lead_set ? (int)(atomic_load(&shm_ctl_of(s, 0)->cma_ok) >> 5 & 3u) : 0;
    s->ar_far_to = 0;
    /* The near rules measured only where the kernel's copy is dear (the
     * AMD host, session 40): all_gather's small blocks (SHM_XC_AG_OOP_TO)
     * and the ring right after a barrier (shm_coll.c bar_verdict). Where
     * it is cheap the single copy won at these sizes (Intel: all_gather 8
     * KiB a block x0.60-0.72 of two copies, session 16; after a barrier
     * 4-12 KiB x0.71-0.97 of the ring, session 35), so not there. */
    s->xc_dear = s->xc_adapt && !cheap;
    s->xc_ag_to = s->xc_dear ? SHM_XC_AG_OOP_TO : 0;
    /* the ring's verdict back to back: probed (1), fixed far (2); near
     * fixed keeps the ring (shm_cma.h shm_cma_call) */
    s->xw = !s->xc_dear || !s->ring_k ? 0 : s->xc_adapt == 1 ? 1 : s->xc_adapt == 3 ? 2 : 0;
    s->xw_far = 0;
    s->xw_at = s->xw_seen = s->xw_t = s->xw_p = 0;
    /* Probes further apart than a ring root can run ahead of its reader
     * (it writes phase p once every rank arrived at p - K, K the deeper
     * ring's; a call is at least one phase): no rank reaches the next
     * probe, and writes its outcome, while the other still waits to read
     * this one's - one word serves every probe. */
    s->xw_n_min = 2 * (uint64_t)COH_MAX(s->ring_k, s->tiny_k) + 8;
    s->xw_n = COH_MAX((uint64_t)XW_N_FIRST, s->xw_n_min);
    if (s->xc_adapt) {
        s->ar_far_to = s->cma_from[COH_COLL_ALL_REDUCE];
        s->cma_from[COH_COLL_ALL_REDUCE] = s->xc_dear ? XC_DEAR_FROM : XC_AR_FROM;
        s->cma_from[COH_COLL_REDUCE_SCATTER] = XC_RS_FROM;
        /* neither takes the barrier's sizes: bar_from <= cma_from all the same */
        s->bar_from[COH_COLL_ALL_REDUCE] = s->cma_from[COH_COLL_ALL_REDUCE];
        s->bar_from[COH_COLL_REDUCE_SCATTER] = s->cma_from[COH_COLL_REDUCE_SCATTER];
    }
    /* The lead's timed verdict (below, "the lead's timed verdict"): 3-4
     * ranks on 2 cpus (session 43, where the kernel's copy is dear,
     * results/2026-12-07-s43-lead-timing: the single copy x0.26-0.84 of two
     * copies far, x1.06-2.45 near, 4 ranks, 256 KiB-1 MiB). Since session
     * 46 where it is cheap too: there the probe's rules above (a2a_busy,
     * red_busy) only seed the classes' paths, since one probe of 64 KiB
     * at attach read x2.02-3.40 on one host in one run, against its 3.2
     * limit then, and sent 7 of 65 launches to the dear rules, and since the
     * rules' bounds did not hold on the host they were measured on
     * (OV_RED_FROM). From 64 KiB (reduce: 32 KiB, all_to_all: 16 KiB a
     * pair), above the ring and, for broadcast, above its pieces (a root
     * there runs calls ahead of its readers; every call in the window
     * waits for every rank within a call, which the one decision word
     * leans on). */
    int ov_m = (int)(atomic_load(&shm_ctl_of(s, 0)->cma_ok) >> 7 & 3u);
    int ov_on = busy && !crowd && measured && !lead_set && s->n <= 4 && ov_m != OV_M_PROBE;
    s->ov = ov_on ? 1 + ov_m : 0;
    for (int k = 0; k < COH_COLL_KIND_COUNT; k++)
        s->ov_from[k] = SIZE_MAX;
    if (s->ov) {
        size_t ring = s->ring_k ? s->ring_bytes + 1 : 0;
        size_t pieces = s->ring_k ? COH_MIN(s->ring_k / 4, SHM_PIECES_MAX) * s->ring_bytes + 1 : 0;
        s->ov_from[COH_COLL_BROADCAST] = COH_MAX(COH_MAX(OV_FROM, ring), pieces);
        s->ov_from[COH_COLL_REDUCE] = COH_MAX(OV_RED_FROM, ring);
        /* all_reduce not: the single copy's ar_single took it x0.72-0.84 of
         * two copies far in session 43's premise, but timed against two
         * copies fixed it gained nothing three times over (far x0.82-1.00,
         * x1.04-1.12, x1.10-1.82; results/2026-12-07-s44-busy-timed), its
         * explored calls only cost */
        s->ov_from[COH_COLL_ALL_TO_ALL] = OV_A2A_FROM;
        /* the rooted ops ask shm_cma_call, which answers below bar_from
         * before it asks the verdict: broadcast's window starts there at
         * the least, reduce's bar_from (64 KiB where dear) moves down to
         * its window */
        s->ov_from[COH_COLL_BROADCAST] =
            COH_MAX(s->ov_from[COH_COLL_BROADCAST], s->bar_from[COH_COLL_BROADCAST]);
        s->bar_from[COH_COLL_REDUCE] = COH_MIN(s->bar_from[COH_COLL_REDUCE], s->ov_from[COH_COLL_REDUCE]);
    }
    /* Each class starts on the path the probe's rules give its smallest
     * size (dear: two copies everywhere; cheap: all_to_all and reduce of
     * 32-192 KiB single); the lead's times move it from there. */
    s->ov_bits = 0;
    for (int k = 0; k < SHM_OV_CLASSES; k++)
        if (s->ov == 1 + OV_M_SINGLE ||
            (s->ov == 1 + OV_M_TIMED && shm_cma_use(s, shm_ov_class_coll(k), shm_ov_class_lo(k))))
            s->ov_bits |= (uint64_t)1 << k;
    s->ov_w = s->ov_ep = 0;
    s->ov_at = OV_N_FIRST;
    s->ov_n = OV_N_FIRST;
    s->ov_seen = UINT64_MAX;
    s->ov_seen_coll = -1;
    s->ov_pend = 0;
    s->ov_dt = s->ov_dw = 0;
    memset(s->ov_cnt, 0, sizeof s->ov_cnt);
    memset(s->ov_last, 0, sizeof s->ov_last);
    memset(s->ov_run, 0, sizeof s->ov_run);
    memset(s->ov_nsmp, 0, sizeof s->ov_nsmp);
    memset(s->ov_pos, 0, sizeof s->ov_pos);
    char speed[256] = "";
    if (all_can && measured)
        snprintf(speed, sizeof speed,
                 "; process_vm_readv vs memcpy: %zu KiB %.1f vs %.1f us x%.2f, %zu KiB %.1f vs "
                 "%.1f us x%.2f (mean of %d ranks, each the median of %d readings; measuring "
                 "took %.0f us here)",
                 len_s >> 10, sum_cma_s / 1e3 / s->n, sum_cpy_s / 1e3 / s->n,
                 (double)sum_cma_s / (double)sum_cpy_s, len >> 10, sum_cma / 1e3 / s->n,
                 sum_cpy / 1e3 / s->n, (double)sum_cma / (double)sum_cpy, s->n,
                 SHM_CMA_PROBE_ROUNDS, s->probe_ns / 1e3);
    char range[64];
    if (s->cma_end == SIZE_MAX)
        snprintf(range, sizeof range, ">= %zu B", s->cma_min);
    else
        snprintf(range, sizeof range, ">= %zu B and < %zu B", s->cma_min, s->cma_end);
    char gs_words[112] = "";
    if (gs_from)
        snprintf(gs_words, sizeof gs_words,
                 ", gather and scatter > %zu B per rank (above the ring's slot)", gs_from - 1);
    /* the busy rules' own sizes (reduce, all_to_all, send/recv) */
    char busy_words[160] = "";
    if (red_busy)
        snprintf(busy_words, sizeof busy_words, ", reduce of %zu-%zu B",
                 s->cma_from[COH_COLL_REDUCE], s->cma_to[COH_COLL_REDUCE] - 1);
    if ((s->cma_ops >> COH_COLL_ALL_TO_ALL & 1u) && s->cma_from[COH_COLL_ALL_TO_ALL] != s->cma_min) {
        size_t o = strlen(busy_words);
        snprintf(busy_words + o, sizeof busy_words - o, ", all_to_all from %zu B a pair",
                 s->cma_from[COH_COLL_ALL_TO_ALL]);
    }
    if (busy && s->cma_from[COH_COLL_SEND] != s->cma_min) {
        size_t o = strlen(busy_words);
        snprintf(busy_words + o, sizeof busy_words - o, ", send/recv from %zu B",
                 s->cma_from[COH_COLL_SEND]);
    }
    char rf_words[384] = "";
    if (s->bar_from[COH_COLL_BROADCAST] < s->cma_from[COH_COLL_BROADCAST])
        snprintf(rf_words, sizeof rf_words,
                 "; up to the ring's slot (%zu B) broadcast, reduce and gather by the ring "
                 "back to back, and right after a barrier these and scatter from %zu B (a block)%s",
                 s->cma_from[COH_COLL_BROADCAST] - 1, s->bar_from[COH_COLL_BROADCAST],
                 !s->xc_dear        ? ""
                 : s->xc_adapt == 1 ? " while the cpus measure far apart (the lead's verdict in "
                                      "the barrier), back to back from " XW_FROM_WORDS
                                      " while far (probed in its calls)"
                 : s->xc_adapt == 3 ? ", and back to back from " XW_FROM_WORDS
                                      " (COHORT_SHM_XCORE=far)"
                                    : " - not while near (COHORT_SHM_XCORE=near)");
    if (s->n == 1)
        snprintf(s->copy_info, sizeof s->copy_info, "one local rank: no copies between ranks");
    else if (apart && !lead_set)
        snprintf(s->copy_info, sizeof s->copy_info,
                 "broadcast >= %zu B, all_gather >= %zu B per rank, gather and scatter >= %zu B "
                 "per rank, all_to_all >= %zu B per pair, reduce >= %zu B, all_reduce >= %zu B "
                 "(< %zu B unless in place; out of place from %zu B while the cpus %s), "
                 "reduce_scatter >= %zu B, send/recv >= %zu B: single "
                 "copy "
                 "(process_vm_readv/writev; "
                 "auto: the kernel's copy loses to memcpy at attach's measurement but the 2 ranks "
                 "%s, where one copy by the kernel beats two copies that cross the cores%s); "
                 "else two copies through the segment%s",
                 apart_from(COH_COLL_BROADCAST), apart_from(COH_COLL_ALL_GATHER),
                 apart_from(COH_COLL_GATHER), apart_from(COH_COLL_ALL_TO_ALL),
                 apart_from(COH_COLL_REDUCE), apart_from(COH_COLL_ALL_REDUCE), AR_OOP_TO,
                 s->cma_from[COH_COLL_ALL_REDUCE],
                 s->xc_adapt == 1   ? "measure far apart (probed during calls)"
                 : s->xc_adapt == 3 ? "are far apart (COHORT_SHM_XCORE=far)"
                                    : "are far apart: never (COHORT_SHM_XCORE=near)",
                 s->cma_from[COH_COLL_REDUCE_SCATTER], apart_from(COH_COLL_SEND),
                 bound_apart ? where : "have a cpu each (unbound)",
                 rf_words, speed);
    else if (apart)
        snprintf(s->copy_info, sizeof s->copy_info,
                 "broadcast, all_gather, gather, scatter, all_to_all, reduce, all_reduce, "
                 "reduce_scatter, send/recv %s per "
                 "rank (COHORT_SHM_SINGLE_COPY_BYTES): single copy (process_vm_readv/writev; auto: the "
                 "kernel's copy loses to memcpy at attach's measurement but the 2 ranks %s, where "
                 "one copy by the kernel beats two copies that cross the cores); else two copies "
                 "through the segment%s",
                 range, bound_apart ? where : "have a cpu each (unbound)", speed);
    else if (crowd || busy)
        snprintf(s->copy_info, sizeof s->copy_info,
                 "%s%s%s %s per rank%s%s: single copy (process_vm_readv; auto: the kernel's "
                 "copy loses to memcpy at attach's measurement but %s%s%s); else two copies "
                 "through the segment%s",
                 crowd || a2a_busy ? "all_to_all" : "", (crowd || a2a_busy) && busy ? " and " : "",
                 !busy              ? ""
                 : gs_from          ? "send/recv (read whole by the receiver)"
                                    : "gather, scatter and send/recv (read whole by the receiver)",
                 range, gs_words, busy_words,
                 crowd      ? "the ranks outnumber twice the cpus, where all_to_all's two copies "
                              "outgrow the cache"
                 : a2a_busy ? "the kernel's copy costs at most " A2A_CHEAP_WORDS " memcpys at 64 KiB, where "
                              "all_to_all's two copies cost more cpu a byte and reduce's slices "
                              "wait for every rank"
                            : "",
                 (crowd || a2a_busy) && busy ? "; " : "",
                 busy ? "the ranks outnumber the cpus, where each hand-off of a two-copy "
                        "send and a two-copy root's copies wait for the scheduler"
                      : "",
                 speed);
    else if (s->cma)
        snprintf(s->copy_info, sizeof s->copy_info,
                 "broadcast, all_gather, gather, scatter, all_to_all, reduce, send/recv%s %s "
                 "per rank: single copy (process_vm_readv/writev, %s); else two copies through "
                 "the segment%s",
                 all_want ? ", all_reduce" : "", range,
                 all_want ? "COHORT_SHM_SINGLE_COPY=on" : "auto: the kernel's copy wins there",
                 speed);
    else if (all_can)
        snprintf(s->copy_info, sizeof s->copy_info,
                 "two copies through the segment (single copy by process_vm_readv works here but "
                 "%s; COHORT_SHM_SINGLE_COPY=on on every rank uses it)%s",
                 measured ? "loses to two copies at attach's measurement" : "was not measured",
                 speed);
    else
        snprintf(s->copy_info, sizeof s->copy_info,
                 "two copies through the segment (single copy unavailable: %s)", why);
    if (s->ov) {
        size_t o = strlen(s->copy_info);
        snprintf(s->copy_info + o, sizeof s->copy_info - o,
                 "; broadcast >= %zu B, reduce >= %zu B, all_to_all >= %zu B a pair: %s%s",
                 s->ov_from[COH_COLL_BROADCAST], s->ov_from[COH_COLL_REDUCE],
                 s->ov_from[COH_COLL_ALL_TO_ALL],
                 s->ov == 1   ? "the single copy or two copies, whichever the lead's own calls of "
                                "the op and size time faster (the timed verdict; the ranks share "
                                "the cpus; each size starts on "
                 : s->ov == 2 ? "two copies (COHORT_SHM_BUSY=two)"
                              : "single copy (COHORT_SHM_BUSY=single)",
                 s->ov != 1 ? ""
                 : cheap    ? "the path the rules above give it)"
                            : "two copies, the kernel's copy dear)");
    }
    if (!all_can && s->n > 1 && m == M_ON)
        coh_warn("shm: COHORT_SHM_SINGLE_COPY=on but %s", s->copy_info);
    return COHORT_OK;
}

const char *coh_shm_copy_path(const coh_shm *s, int coll, size_t bytes)
{
    if (!s || s->n == 1)
        return "none (one local rank)";
    if (coll == COH_COLL_SEND || coll == COH_COLL_RECV) {
        if (!s->p2p_bytes)
            return "tcp socket (COHORT_SHM_P2P_BYTES=0: send/recv do not use the segment)";
        if (shm_cma_use(s, COH_COLL_SEND, bytes))
            return s->oversub ? "single copy (cma; send/recv channel: the receiver reads it)"
                              : "single copy (cma; send/recv channel, split: the receiver "
                                "reads the first part, the sender writes the rest)";
        return bytes <= s->p2p_bytes ? "two copies (send/recv channel, eager)"
                                     : "two copies (send/recv channel, pipelined)";
    }
    /* the timed verdict's window: the path its last decision gave */
    if (s->ov && coll >= 0 && coll < COH_COLL_KIND_COUNT && bytes >= s->ov_from[coll]) {
        if (s->ov != 1)
            return s->ov == 2 ? "two copies (segment; COHORT_SHM_BUSY=two)"
                              : "single copy (cma; COHORT_SHM_BUSY=single)";
        return s->ov_bits >> shm_ov_class(coll, bytes) & 1u
                   ? "single copy (cma) now: the lead's own calls of this op and size time it "
                     "faster than two copies, or have not timed both yet and the attach probe's "
                     "rules give the single copy (the timed verdict; 8 calls in 512 take the "
                     "other)"
                   : "two copies (segment) now: the lead's own calls of this op and size time "
                     "them faster than the single copy, or have not timed both yet and the "
                     "attach probe's rules give two copies (the timed verdict; 8 calls in 512 "
                     "take the other)";
    }
    /* bytes is a block (cohort_describe's count); reduce_scatter's sizes are
     * the blocks of every rank (shm_coll.c asks shm_cma_use with its total) */
    if (coll == COH_COLL_REDUCE_SCATTER)
        bytes = bytes > SIZE_MAX / (size_t)s->n ? SIZE_MAX : bytes * (size_t)s->n;
    if (!shm_cma_use(s, coll, bytes))
        return !(s->cma && (s->cma_ops >> coll & 1u) && bytes >= s->bar_from[coll])
                   ? "two copies (segment)"
               : s->xw == 1 && bytes >= SHM_XW_FROM
                   ? "single copy (cma) while the cpus measure far apart (right after a "
                     "barrier: the lead's verdict in the barrier; back to back: the ring's "
                     "verdict, probed in its calls), else two copies"
               : s->xw == 2 && bytes >= SHM_XW_FROM
                   ? "single copy (cma; COHORT_SHM_XCORE=far)"
               : s->xc_adapt == 1 && s->xc_dear
                   ? "single copy (cma) right after a barrier while the cpus measure far apart "
                     "(the lead's verdict in the barrier), else two copies"
               : s->xc_adapt == 2 && s->xc_dear
                   ? "two copies (segment; after a barrier too: COHORT_SHM_XCORE=near)"
                   : "single copy (cma) right after a barrier, else two copies";
    int ar = coll == COH_COLL_ALL_REDUCE, near = s->xc_adapt && shm_xc_two_copies(s, coll, bytes);
    if (near && coll == COH_COLL_ALL_GATHER && bytes <= SHM_XC_AG_OOP_TO && bytes > s->xc_ag_to)
        near = 0; /* small blocks: only where the kernel's copy is dear */
    int ag_ip = coll == COH_COLL_ALL_GATHER && bytes > s->xc_ag_to &&
                !(s->xc_dear && bytes >= SHM_XC_AG_BIG); /* in place only */
    if (near && s->xc_adapt == 2)
        return ag_ip
                   ? "single copy (cma) unless a rank is in place: two copies (segment; "
                     "COHORT_SHM_XCORE=near)"
                   : "two copies (segment; COHORT_SHM_XCORE=near)";
    if (ar && bytes < s->ar_far_to)
        return s->xc_adapt == 1
                   ? "single copy (cma) out of place while the cpus measure far apart (probed "
                     "during calls), else two copies (segment)"
                   : "single copy (cma) out of place (COHORT_SHM_XCORE=far), else two copies "
                     "(segment)";
    if (ar && bytes >= s->ar_oop_to)
        return near && s->xc_adapt == 1
                   ? "single copy (cma) if any rank is in place and the cpus measure far apart "
                     "(probed during calls), else two copies (segment)"
                   : "single copy (cma) if any rank is in place, else two copies (segment)";
    if (near && s->xc_adapt == 1)
        return ag_ip
                   ? "single copy (cma) unless a rank is in place and the cpus measure near "
                     "(probed during calls): two copies (segment)"
                   : "single copy (cma) unless the cpus measure near (probed during calls): two "
                     "copies (segment)";
    return "single copy (cma)";
}

const char *coh_shm_xc_verdict(const coh_shm *s)
{
    if (!s || s->xc_adapt != 1 || s->me != 0)
        return NULL;
    return !s->xc_ns ? "not yet measured" : s->xc_ns >= XC_FAR_NS ? "far" : "near";
}

/* The peer is gone (or never was the process we probed). */
static int peer_exited(coh_shm *s, int q)
{
    if (!s->pidfd || s->pidfd[q] < 0)
        return 0;
    struct pollfd pf = {.fd = s->pidfd[q], .events = POLLIN};
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLIN | POLLHUP));
}

/* One direction of a single copy: process_vm_readv or _writev, looping on
 * partial transfers; every failure becomes the group's error. */
static cohort_status cma_xfer(shm_op *o, int q, void *local, uint64_t addr, size_t len, int wr)
{
    coh_shm *s = o->s;
    pid_t pid = s->peer_pid[q]; /* not the control block's word (shm_seg.h) */
    const char *what = wr ? "write" : "read";
    cohort_status ab;
    if (wr && peer_exited(s, q)) /* never write into whoever has its pid now */
        return (ab = shm_check_abort(s)) != COHORT_OK
                   ? ab
                   : coh_tp_fail_set(o->g, COHORT_ERR_PEER_LOST,
                               "shm %s #%llu: rank %d (pid %d) exited before this rank wrote "
                               "into its buffer (single copy)",
                               coh_coll_name(o->c->coll), (unsigned long long)o->c->seq,
                               s->g->local_ranks[q], (int)pid);
    unsigned char *d = local;
    size_t done = 0;
    while (done < len) {
        struct iovec l = {.iov_base = d + done, .iov_len = len - done};
        struct iovec r = {.iov_base = (void *)(uintptr_t)(addr + done), .iov_len = len - done};
        ssize_t k = wr ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                       : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        int e = k < 0 ? errno : EFAULT;
        if (e == EINTR)
            continue;
        /* A peer that failed the group wrote the segment's abort word before
         * it returned, unmapped its buffer or exited: the copy failed because
         * of that failure, which is the cause every rank must report. */
        if ((ab = shm_check_abort(s)) != COHORT_OK)
            return ab;
        if (e == ESRCH || peer_exited(s, q))
            return coh_tp_fail_set(o->g, COHORT_ERR_PEER_LOST,
                                   "shm %s #%llu: rank %d (pid %d) exited during a single-copy %s "
                                   "(%zu of %zu bytes done)",
                                   coh_coll_name(o->c->coll), (unsigned long long)o->c->seq,
                                   s->g->local_ranks[q], (int)pid, what, done, len);
        return coh_tp_fail_set(o->g, e == EFAULT ? COHORT_ERR_INVALID : COHORT_ERR_SYSTEM,
                               "shm %s #%llu: single-copy %s of %zu bytes at %#llx in rank %d "
                               "(pid %d) failed after %zu bytes: %s%s",
                               coh_coll_name(o->c->coll), (unsigned long long)o->c->seq, what,
                               len, (unsigned long long)addr, s->g->local_ranks[q], (int)pid, done,
                               strerror(e),
                               e == EFAULT ? " (a buffer is not mapped for the call's whole size)"
                                           : "");
    }
    /* A read named the peer for its whole length only if the peer is
     * still alive now (a dead peer's pid could have been reused). */
    if (!wr && peer_exited(s, q))
        return (ab = shm_check_abort(s)) != COHORT_OK
                   ? ab
                   : coh_tp_fail_set(o->g, COHORT_ERR_PEER_LOST,
                               "shm %s #%llu: rank %d (pid %d) exited during a single-copy read",
                               coh_coll_name(o->c->coll), (unsigned long long)o->c->seq,
                               s->g->local_ranks[q], (int)pid);
    return COHORT_OK;
}

cohort_status shm_cma_read(shm_op *o, int q, void *dst, uint64_t addr, size_t len)
{
    return cma_xfer(o, q, dst, addr, len, 0);
}

cohort_status shm_cma_write(shm_op *o, int q, uint64_t addr, const void *src, size_t len)
{
    return cma_xfer(o, q, (void *)(uintptr_t)src, addr, len, 1);
}

/* ---- how far apart the 2 ranks' cpus are, measured during calls ----
 *
 * On a VM the host moves the two vCPUs between one core complex and two
 * from one second to the next, and the line round trip moves with it
 * (49-140 ns near, 330-620 far on the development host); which copy path
 * wins moves with it too, for all_reduce by x2.5-3 (XC_AR_FROM). So a call
 * that depends on it asks: the lead (local rank 0) puts its verdict in its
 * single-copy descriptor (SHM_XC_FAR or SHM_XC_NEAR: from its last probe
 * that measured) and, every XC_EVERY_NS, asks for a probe (SHM_XC_PROBE);
 * the flags are OR'd across the descriptors, so both ranks see the same
 * verdict and run the probe in the same call - a probe and a verdict are
 * agreed like any descriptor. */

/* Token i of the probe with this base: 0 the echoing rank is there, 1-16
 * the round trips, XC_GONE the writer gave up (the other stops at once). */
#define XC_GONE 0xffu

/* Spins until *w holds tok: 1; the other side gave up: 0; the limit: -1. */
static int xc_await(_Atomic uint64_t *w, uint64_t tok, uint64_t end)
{
    uint64_t gone = (tok & ~(uint64_t)XC_GONE) | XC_GONE, yield_at = 0;
    for (unsigned i = 1;; i++) {
        uint64_t v = atomic_load_explicit(w, memory_order_acquire);
        if (v == tok)
            return 1;
        if (v == gone)
            return 0;
        coh_cpu_relax();
        if (!(i & 63)) {
            uint64_t now = coh_now_ns();
            if (now >= end)
                return -1;
            if (!yield_at)
                yield_at = now + XC_SPIN_NS;
            else if (now >= yield_at)
                sched_yield();
        }
    }
}

unsigned shm_xc_flags(coh_shm *s)
{
    if (s->me != 0)
        return 0;
    if (s->xc_adapt != 1)
        return s->xc_adapt == 3 ? SHM_XC_FAR : SHM_XC_NEAR;
    unsigned f = !s->xc_ns ? 0 : s->xc_ns >= XC_FAR_NS ? SHM_XC_FAR : SHM_XC_NEAR;
    uint64_t now = coh_now_ns();
    if (now >= s->xc_next) {
        s->xc_next = now + (XC_EVERY_NS << COH_MIN(s->xc_fails, XC_BACKOFF_MAX));
        f |= SHM_XC_PROBE;
    }
    return f;
}

/* Near, above XC_NEAR_TO, where the kernel's copy is dear (session 41):
 * reduce and reduce_scatter of any size, all_reduce from 16 MiB,
 * all_gather from 8 MiB a block, in place or not, and all_to_all from 4
 * MiB a pair take two copies. 2 ranks apart, the AMD host,
 * p50 two copies / single copy in launches measured near, 6 rounds each
 * mode, three runs (results/2026-12-07-s41-big-near, -s41-big-ab): reduce
 * 8-64 MiB x0.54-0.87 out of place, in place 16-64 MiB x0.78-0.91 (8 MiB
 * x0.80-1.19); all_gather 16-64 MiB in all x0.55-0.87, in place
 * x0.48-0.80 (8 MiB in all, 4 MiB a block: x0.84-1.28, kept); all_reduce
 * 16 MiB x0.51-0.82 out of place, x0.67-0.89 in place, 64 MiB in place
 * x0.65-0.82 (out of place it takes two copies from AR_OOP_TO anyway); 8
 * MiB out of place x0.67-1.01 over two runs, in place x1.53-1.75: kept.
 * Far, two copies x1.4-2.2 in one run and x1.0-1.1 in the next (what
 * decides the far state's cost is more than the round trip the probe
 * reads), so far keeps the single copy, as below 4 MiB; the verdict
 * follows the host within XC_EVERY_NS, shorter than one of these calls.
 * Broadcast stays on the single copy (8 MiB near x1.8-2.0, 64 MiB
 * x0.85-0.97). And (-s41-big-near/others, 6 rounds, every launch near)
 * reduce_scatter 8-64 MiB in all x0.60-0.86 and all_to_all 4-32 MiB a
 * pair x0.73-0.85, both modes, out of place (in place both take two
 * copies in every state: rs_single, a2a_single); gather x0.94-1.94,
 * scatter x0.88-1.24, send/recv x1.25-1.87: kept. */
#define XC_AR_BIG ((size_t)16 << 20)
#define XC_A2A_BIG ((size_t)4 << 20)
static int xc_two_big(int coll, size_t bytes)
{
    switch (coll) {
    case COH_COLL_ALL_REDUCE:
        return bytes >= XC_AR_BIG;
    case COH_COLL_REDUCE:
    case COH_COLL_REDUCE_SCATTER: /* in all */
        return bytes > XC_NEAR_TO;
    case COH_COLL_ALL_TO_ALL: /* a pair */
        return bytes >= XC_A2A_BIG;
    case COH_COLL_ALL_GATHER: /* a block, in place or not */
        return bytes >= SHM_XC_AG_BIG;
    default:
        return 0;
    }
}

/* Near, 2 ranks apart, the AMD host at a 90-100 ns round trip (one launch
 * wholly near, `near.txt` in bench/compare/results/2026-12-05-s29-xcore),
 * p50 two copies / single copy: reduce_scatter 256 KiB-4 MiB in all
 * x0.49-0.80 (in place x0.38-0.53); all_to_all 128-512 KiB a pair
 * x0.54-0.59, 2 MiB a pair x1.23 (single copy wins); reduce 256 KiB-4 MiB
 * x0.62-0.83; all_reduce x0.35-0.96; broadcast 1-4 MiB
 * x0.52-0.55 (256 KiB x1.18: single copy wins); all_gather in place 1-4
 * MiB in all x0.47-0.52 (3 launches; out of place x0.93-0.97, 16 MiB in
 * place x0.99). Reduce from 1 MiB only since session 40: the same host
 * near, 6 rounds, p50 single copy / two copies 256 KiB x0.54 back to back
 * and x0.63 OSU style, 512 KiB x0.71 / x0.84, 1-4 MiB x0.94-1.09 (the
 * single copy's leaf now reduces a part, red_share; 32-128 KiB two
 * copies x1.03-1.56: results/2026-12-07-s40-red-near). Broadcast no more
 * since session 40: near, 8 rounds, p50 single / two copies 1 MiB x0.60
 * back to back and x0.76 OSU style, 4 MiB x0.71 / x0.80 (ops-never-two,
 * near-bc-a2a there; all_to_all split by mode, x0.71-0.75 back to back
 * and x1.34-1.67 OSU style at 256-512 KiB a pair: kept). Near 64 KiB, and
 * gather and scatter: kept on single copy
 * (no pair with both launches near yet: near_big.txt set near two copies
 * against far single copy; results/2026-12-05-s30-gs-near found none).
 * Measured up to 4 MiB here (XC_NEAR_TO); where the copy is dear,
 * xc_two_big adds its own sizes first. */
/* Near where the kernel's copy is dear, reduce_scatter takes two copies
 * only from this size in all. Session 42, the AMD host, every launch near,
 * 6 rounds, p50 single / two copies out of place (results/2026-12-07-s42-
 * far-mid/rs-near): 128 KiB x0.79-0.80, 256 KiB x0.71-0.75 both modes; 512
 * KiB x0.77 back to back but x1.19 OSU style; 1-2 MiB x1.19-1.82. Session
 * 29 measured two copies x0.49-0.80 at 256 KiB - 4 MiB on the same host;
 * what moved since was not traced. Where the copy is cheap: unmeasured,
 * session 29's rule. */
#define XC_RS_NEAR_FROM ((size_t)512 << 10)
int shm_xc_two_copies(const coh_shm *s, int coll, size_t bytes)
{
    if (s->xc_dear && xc_two_big(coll, bytes))
        return 1;
    if (bytes > XC_NEAR_TO)
        return 0;
    switch (coll) {
    case COH_COLL_ALL_REDUCE:
        /* from where its single copy starts (XC_AR_FROM, XC_DEAR_FROM) */
        return 1;
    case COH_COLL_REDUCE_SCATTER: /* in all; from XC_RS_FROM */
        return !s->xc_dear || bytes >= XC_RS_NEAR_FROM;
    case COH_COLL_ALL_TO_ALL:
        return bytes >= ((size_t)64 << 10) && bytes < ((size_t)1 << 20);
    case COH_COLL_REDUCE:
        return bytes >= ((size_t)1 << 20);
    case COH_COLL_BROADCAST: /* from 1 MiB until session 40 (above) */
        return 0;
    case COH_COLL_ALL_GATHER: /* a rank block: in place, or small where xc_ag_to says (ag_single) */
        return (bytes >= ((size_t)512 << 10) && bytes <= ((size_t)2 << 20)) ||
               bytes <= SHM_XC_AG_OOP_TO;
    default:
        return 0;
    }
}

int shm_xc_probe(coh_shm *s)
{
    shm_seg_hdr *h = s->hdr;
    uint64_t base = ++s->xc_epoch << 8, end = coh_now_ns() + XC_LIMIT_NS;
    _Atomic uint64_t *mine = s->me ? &h->xc_pong : &h->xc_ping;
    int r = 1;
    if (s->me != 0) { /* here; then echo every token */
        atomic_store_explicit(mine, base, memory_order_release);
        for (unsigned i = 1; r == 1 && i <= XC_ROUNDS * XC_BATCHES; i++)
            if ((r = xc_await(&h->xc_ping, base | i, end)) == 1)
                atomic_store_explicit(mine, base | i, memory_order_release);
    } else { /* the peer's wake-up is not the round trip: start when it is here */
        uint64_t best = UINT64_MAX;
        r = xc_await(&h->xc_pong, base, end);
        for (unsigned b = 0, i = 1; r == 1 && b < XC_BATCHES; b++) {
            uint64_t t = coh_now_ns();
            for (unsigned k = 0; r == 1 && k < XC_ROUNDS; k++, i++) {
                atomic_store_explicit(mine, base | i, memory_order_release);
                r = xc_await(&h->xc_pong, base | i, end);
            }
            best = COH_MIN(best, (coh_now_ns() - t) / XC_ROUNDS);
        }
        if (r == 1) /* a failed probe leaves the last verdict */
            s->xc_ns = (uint32_t)COH_MAX(COH_MIN(best, UINT32_MAX), 1);
        s->xc_fails = r == 1 ? 0 : s->xc_fails + 1;
    }
    if (r == -1) /* the peer stops waiting for this probe at once */
        atomic_store_explicit(mine, base | XC_GONE, memory_order_release);
    s->xc_probes += r == 1;
    return r;
}

/* ---- the ring's verdict ----
 *
 * Back to back the ring carries broadcast, reduce and gather up to its
 * slot (and scatter's two blocks), and its calls carry no descriptor that
 * every rank reads before the path forks. Where the kernel's copy is dear
 * the ring's two copies cost 4x more far than near (2 ranks apart, the AMD
 * host, 16 KiB broadcast 7.8 against 2.0 us), while the single copy wins
 * far (x0.45 at 16 KiB). So the two ranks agree on a verdict the way they
 * agree on anything else, without a phase: in a probe. The first call in
 * the window (shm_cma_call) at or after xw_at runs one on both ranks - the
 * same call, since both see the same calls and keep the same xw_at - and
 * the lead writes its outcome in xw_word: the verdict, and how many calls
 * until the next probe (its call rate, for one every XC_EVERY_NS). A rank
 * that gives up first writes "gave up" instead; a compare-and-swap lets
 * only the first writer of the probe's epoch decide, so both ranks read
 * the same outcome whoever gave up when. Gave up: the verdict stays and
 * the interval doubles, on both. The verdict changes only inside a call
 * both are in, however far a ring root has run ahead; only the word's
 * reuse leans on that distance's bound (xw_n_min). */

void shm_xw_probe(coh_shm *s, uint64_t seq)
{
    shm_seg_hdr *h = s->hdr;
    int r = shm_xc_probe(s);
    uint64_t ep = s->xc_epoch & 0xffffffffu, now = coh_now_ns();
    uint64_t mine = ep << 32 | XW_GAVE_UP;
    if (r == 1 && s->me == 0) {
        /* the lead's calls since the last probe per XC_EVERY_NS */
        uint64_t n = XW_N_FIRST;
        if (s->xw_t && now > s->xw_t && seq > s->xw_p) {
            uint64_t calls = COH_MIN(seq - s->xw_p, XW_N_MAX);
            n = calls * XC_EVERY_NS / (now - s->xw_t);
        }
        n = COH_MAX(COH_MIN(n, XW_N_MAX), s->xw_n_min);
        mine = ep << 32 | n << 8 | (uint64_t)(s->xc_ns >= XC_FAR_NS) << 2 | XW_DECIDED;
    } else if (r == 1) {
        /* echoed every round trip: the lead decides right after its last */
        uint64_t end = now + XC_LIMIT_NS, yield_at = now + XC_SPIN_NS;
        for (unsigned i = 1;; i++) {
            if (XW_EPOCH(atomic_load_explicit(&h->xw_word, memory_order_acquire)) == ep)
                break;
            coh_cpu_relax();
            if (!(i & 63)) {
                uint64_t t = coh_now_ns();
                if (t >= end)
                    break;
                if (t >= yield_at)
                    sched_yield();
            }
        }
    }
    uint64_t cur = atomic_load_explicit(&h->xw_word, memory_order_acquire);
    while (XW_EPOCH(cur) != ep)
        if (atomic_compare_exchange_weak_explicit(&h->xw_word, &cur, mine, memory_order_acq_rel,
                                                  memory_order_acquire))
            cur = mine;
    if ((cur & 3u) == XW_DECIDED) {
        s->xw_far = (int)(cur >> 2 & 1u);
        /* the lead writes at least xw_n_min; a word another local process
         * rewrote must not bring the probes closer than that (or to every
         * call) */
        s->xw_n = COH_MAX(cur >> 8 & 0xffffffu, s->xw_n_min);
    } else {
        s->xw_n = COH_MIN(s->xw_n * 2, XW_N_MAX);
    }
    s->xw_at = seq + s->xw_n;
    s->xw_probes++;
    if (s->me == 0) {
        s->xw_t = now;
        s->xw_p = seq;
        /* this probe serves the descriptors' verdict too */
        s->xc_next = now + (XC_EVERY_NS << COH_MIN(s->xc_fails, XC_BACKOFF_MAX));
    }
}

int shm_xw_far(coh_shm *s, uint64_t seq)
{
    int far = s->xw == 2 || s->xw_far; /* 2: COHORT_SHM_XCORE=far */
    if (seq != s->xw_seen) {           /* once per call: the path may be asked again */
        s->xw_seen = seq;
        if (s->xw == 1 && seq >= s->xw_at) {
            shm_xw_probe(s, seq);
            far = s->xw_far;
        }
        s->xw_singles += (uint64_t)far;
    }
    return far;
}

/* ---- the lead's timed verdict ----
 *
 * 3-4 ranks on 2 cpus, where the kernel's copy is dear (the AMD host), the
 * single copy wins when the host has the cpus far apart and loses when it
 * has them near, and the host moves between the two within minutes and
 * within a launch (session 39). Ranks that share cpus cannot time a
 * ping-pong, so the source is the lead's own calls: it times each call of
 * the window on the path it took, per op and size class, and decides by
 * the medians of the last SHM_OV_KEEP of each path (session 43 measured
 * that source: the lead's ratio points the way the group's does in all 48
 * cells, results/2026-12-07-s43-lead-timing). The other path's times come
 * from calls the agreed schedule sends there (ov_explore: each class's
 * calls 1-OV_RUN, then OV_RUN in every OV_PERIOD; a run's first OV_SETTLE
 * calls untimed), so every rank knows which calls explore without being
 * told.
 *
 * How the ranks agree, without a phase: each keeps the window's call count
 * (the same on all: they see the same calls) and the count of the next
 * decision. The window call that reaches it takes the decision on every
 * rank: the lead writes its outcome - the path bit of every class and the
 * calls to the next decision - in ov_word; the others wait for it, at most
 * OV_LIMIT_NS, and a rank that stops waiting writes "gave up" instead.
 * Both by compare-and-swap under the decision's epoch, so the first writer
 * decides and every rank takes the same outcome. Gave up: the paths stay
 * and the interval doubles. A path changes only between calls every rank
 * counted alike.
 *
 * One word serves every decision. That leans on the window's calls: each
 * waits, within the call, for every rank to be in it (the two-copy paths
 * claim a phase only when every rank has reached the one before; the
 * single copy's readers and root wait for each other's descriptors and
 * done words), so no rank reaches the next decision, 8 or more window
 * calls on, while another has not yet read this one's word. The ring and
 * the broadcast's pieces, where a root runs calls ahead, are below the
 * window (shm_cma_agree). */

/* a class's first size: 64 KiB, reduce's 32 KiB, all_to_all's 16 KiB a
 * pair, shifted left by the class's power of two */
static const unsigned ov_lo_shift[4] = {16, 15, 16, 14};
static const int ov_colls[4] = {COH_COLL_BROADCAST, COH_COLL_REDUCE, COH_COLL_ALL_REDUCE,
                                COH_COLL_ALL_TO_ALL};

int shm_ov_class(int coll, size_t bytes)
{
    int op = coll == COH_COLL_BROADCAST ? 0
             : coll == COH_COLL_REDUCE  ? 1
             : coll == COH_COLL_ALL_REDUCE ? 2
                                           : 3;
    int sz = 0;
    for (size_t b = bytes >> (ov_lo_shift[op] + 1); b && sz < SHM_OV_SIZES - 1; b >>= 1)
        sz++;
    return op * SHM_OV_SIZES + sz;
}

int shm_ov_class_coll(int k)
{
    return ov_colls[k / SHM_OV_SIZES];
}

size_t shm_ov_class_lo(int k)
{
    return (size_t)1 << (ov_lo_shift[k / SHM_OV_SIZES] + (unsigned)(k % SHM_OV_SIZES));
}

/* Whether call i of a class (from 0) takes the other path */
int shm_ov_explore(uint32_t i)
{
    return (i >= 1 && i <= OV_RUN) || i % OV_PERIOD >= OV_PERIOD - OV_RUN;
}

static uint32_t ov_median(const uint32_t *v, unsigned n)
{
    uint32_t a[SHM_OV_KEEP];
    memcpy(a, v, n * sizeof *a);
    for (unsigned i = 1; i < n; i++) /* insertion sort of <= 5 */
        for (unsigned j = i; j > 0 && a[j - 1] > a[j]; j--) {
            uint32_t x = a[j];
            a[j] = a[j - 1];
            a[j - 1] = x;
        }
    return a[n / 2];
}

/* The lead's outcome: a class with enough times on both paths moves to the
 * other path when that one's median is at least 1/8 below its own (the
 * lead's times of one path spread x1.3-3 within a launch on a host that
 * moves: a bare comparison flipped all_reduce back and forth, and each
 * flip's first calls are cold); the others keep their path. */
static uint64_t ov_bits_now(const coh_shm *s)
{
    uint64_t bits = s->ov_bits;
    for (int k = 0; k < SHM_OV_CLASSES; k++) {
        unsigned n0 = s->ov_nsmp[k][0], n1 = s->ov_nsmp[k][1];
        if (n0 < OV_MIN_SAMPLES || n1 < OV_MIN_SAMPLES)
            continue;
        uint64_t b = (uint64_t)1 << k, m[2];
        m[0] = ov_median(s->ov_smp[k][0], n0);
        m[1] = ov_median(s->ov_smp[k][1], n1);
        int cur = (bits & b) != 0;
        if (8 * m[!cur] < 7 * m[cur])
            bits ^= b;
    }
    return bits;
}

void shm_ov_decide(coh_shm *s)
{
    shm_seg_hdr *h = s->hdr;
    uint64_t ep = ++s->ov_ep & 0xffffu, now = coh_now_ns();
    uint64_t mine = ep << 48; /* gave up */
    if (s->me == 0) {
        /* the calls to the next decision: the window's rate since the
         * last one, for one every OV_EVERY_NS */
        unsigned code = 0;
        if (s->ov_dt && now > s->ov_dt) {
            uint64_t calls = COH_MIN(s->ov_w - s->ov_dw, OV_N_MAX);
            uint64_t n = calls * OV_EVERY_NS / (now - s->ov_dt);
            while (code < 7 && (8u << code) < n)
                code++;
        }
        s->ov_dt = now;
        s->ov_dw = s->ov_w;
        mine |= OV_DECIDED | (uint64_t)code << 44 | ov_bits_now(s);
    } else {
        /* the lead writes it on entering this call: spin a little, then
         * give the cpu away (the lead may need it), then sleep */
        uint64_t end = now + OV_LIMIT_NS, yield_to = now + 200 * 1000;
        for (unsigned i = 1;; i++) {
            if (OV_EPOCH(atomic_load_explicit(&h->ov_word, memory_order_acquire)) == ep)
                break;
            if (i < 64) {
                coh_cpu_relax();
                continue;
            }
            uint64_t t = coh_now_ns();
            if (t >= end)
                break;
            if (t < yield_to) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50 * 1000};
                nanosleep(&ts, NULL);
            }
        }
    }
    uint64_t cur = atomic_load_explicit(&h->ov_word, memory_order_acquire);
    while (OV_EPOCH(cur) != ep)
        if (atomic_compare_exchange_weak_explicit(&h->ov_word, &cur, mine, memory_order_acq_rel,
                                                  memory_order_acquire))
            cur = mine;
    if (cur & OV_DECIDED) {
        s->ov_bits = OV_BITS(cur);
        s->ov_n = (uint64_t)8 << OV_CODE(cur); /* 8-1024 whatever the word says */
    } else {
        s->ov_n = COH_MIN(s->ov_n * 2, OV_N_MAX);
        s->ov_gaveup++;
    }
    s->ov_at = s->ov_w + s->ov_n;
    s->ov_decisions++;
}

void shm_ov_enter(coh_shm *s, const coh_call *c, int coll, size_t bytes)
{
    if (c->seq == s->ov_seen && coll == s->ov_seen_coll)
        return; /* asked again for the same call */
    s->ov_seen = c->seq;
    s->ov_seen_coll = coll;
    int k = shm_ov_class(coll, bytes);
    if (s->ov == 1 && s->ov_w >= s->ov_at)
        shm_ov_decide(s);
    s->ov_w++;
    uint32_t i = s->ov_cnt[k];
    s->ov_cnt[k] = i + 1 ? i + 1 : OV_PERIOD; /* wraps past the first calls */
    int path = s->ov == 2   ? 0
               : s->ov == 3 ? 1
                            : (int)(s->ov_bits >> k & 1u) ^ shm_ov_explore(i);
    /* this call's place in its path's run (saturating) */
    uint8_t run = s->ov_last[k] == path + 1 ? s->ov_run[k] : 0;
    s->ov_run[k] = run < UINT8_MAX ? (uint8_t)(run + 1) : run;
    s->ov_last[k] = (uint8_t)(path + 1);
    int same = run >= OV_SETTLE;
    s->ov_ans = path;
    s->ov_singles += (uint64_t)path;
    if (s->me == 0 && s->ov == 1 && same) {
        s->ov_pend = k * 2 + path + 1;
        s->ov_t0 = coh_now_ns();
    }
}

void shm_ov_done(coh_shm *s, cohort_status st)
{
    if (!s->ov_pend)
        return;
    int k = (s->ov_pend - 1) / 2, p = (s->ov_pend - 1) % 2;
    s->ov_pend = 0;
    if (st != COHORT_OK)
        return;
    uint64_t dt = coh_now_ns() - s->ov_t0;
    s->ov_smp[k][p][s->ov_pos[k][p]] = (uint32_t)COH_MIN(dt, UINT32_MAX);
    s->ov_pos[k][p] = (uint8_t)((s->ov_pos[k][p] + 1) % SHM_OV_KEEP);
    if (s->ov_nsmp[k][p] < SHM_OV_KEEP)
        s->ov_nsmp[k][p]++;
}

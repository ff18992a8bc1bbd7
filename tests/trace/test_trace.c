/*
 * test_trace.c - the flight recorder: ring wraparound, late updates,
 * progress, concurrent writers and dumpers (run it under TSan), the dump
 * file (name, atomic rename, every field parsed back, valid JSON for
 * python3), dumps from coh_group_fail, the SIGUSR1 counter.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../contract/group_util.h"
#include "support/support.h"
#include "trace/jsonl.h"
#include "util/tclock.h"

static coh_call mk(uint64_t seq, int coll, uint64_t count, const char *file, int line)
{
    return cht_call(seq, coll, COHORT_FLOAT32, coll == COH_COLL_ALL_REDUCE ? COHORT_SUM : -1,
                   coll == COH_COLL_BROADCAST ? 1 : -1, 0, count, file, line);
}

/* A fresh empty directory under /tmp (removed by rm_dir). */
static void mk_dir(char *out, size_t len)
{
    snprintf(out, len, "/tmp/cohort-trace-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(out));
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    if (d)
        closedir(d);
    return n;
}

/* Reads a whole file (malloc'd, NUL-terminated). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t r = fread(b, 1, (size_t)n, f);
    b[r] = 0;
    fclose(f);
    if (len)
        *len = r;
    return b;
}

/* ---- the ring ---- */

START_TEST(create_sizes)
{
    coh_trace *t = NULL;
    unsetenv("COHORT_TRACE_SIZE");
    ck_assert_int_eq(coh_trace_create(&t, 0), COHORT_OK);
    ck_assert_int_eq(coh_trace_capacity(t), 2048);
    coh_trace_destroy(t);
    setenv("COHORT_TRACE_SIZE", "16", 1);
    ck_assert_int_eq(coh_trace_create(&t, 0), COHORT_OK);
    ck_assert_int_eq(coh_trace_capacity(t), 16);
    coh_trace_destroy(t);
    ck_assert_int_eq(coh_trace_create(&t, 5), COHORT_OK); /* explicit wins */
    ck_assert_int_eq(coh_trace_capacity(t), 5);
    coh_trace_destroy(t);
    setenv("COHORT_TRACE_SIZE", "lots", 1);
    ck_assert_int_eq(coh_trace_create(&t, 0), COHORT_ERR_INVALID);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(coh_tls_err()->msg,
                     "COHORT_TRACE_SIZE=lots: want an entry count between 1 and 1048576");
    setenv("COHORT_TRACE_SIZE", "0", 1);
    ck_assert_int_eq(coh_trace_create(&t, 0), COHORT_ERR_INVALID);
    unsetenv("COHORT_TRACE_SIZE");
    ck_assert_int_eq(coh_trace_create(&t, 1 << 21), COHORT_ERR_INVALID);
    ck_assert_int_eq(coh_trace_create(NULL, 4), COHORT_ERR_INVALID);
    coh_trace_destroy(NULL);
}
END_TEST

START_TEST(create_oom)
{
    coh_trace *t = NULL;
    for (long k = 0; k < 2; k++) {
        coh_alloc_fail_after(k);
        ck_assert_int_eq(coh_trace_create(&t, 64), COHORT_ERR_NOMEM);
        coh_alloc_fail_after(-1);
        ck_assert_ptr_null(t);
    }
}
END_TEST

/* The recorder's stamps (coh_trace_us: extrapolated from the TSC where the
 * kernel's clocksource is the TSC) stay within a few microseconds of
 * CLOCK_REALTIME read just before and after, across anchor renewals and
 * rate windows (300 ms: many of both; the first ~50 ms have no rate yet).
 *
 * Except right after a step of the system clock (settimeofday, a VM's or
 * an NTP client's correction): the stamps follow it at the next anchor,
 * at most FC_ANCHOR cycles later (docs/trace.md). A loaded run saw one read
 * 500 us off; so the test watches CLOCK_REALTIME - CLOCK_MONOTONIC, which
 * only a step moves, on every read that no preemption split (< 5 us), and
 * leaves out the reads from the last such read before a step to 2 x
 * FC_ANCHOR cycles after it is seen - a wrong extrapolation (a rate 1 %
 * off, an anchor not renewed) leaves that difference alone and still
 * fails. More than a quarter of the reads left out fails too. */
START_TEST(trace_clock_tracks_realtime)
{
    uint64_t end = coh_now_ns() + 300000000ull, worst = 0, n = 0, pend = 0, left_out = 0;
    uint64_t steps = 0, quiet_until = 0, npend = 0;
    int64_t off_prev = 0;
    int have_off = 0;
    char ctx[320] = "", pctx[320] = "";
    while (coh_now_ns() < end) {
        for (int i = 0; i < 1000; i++, n++) {
            uint64_t m0 = coh_now_ns();
            uint32_t s = atomic_load(&coh_fc.seq);
            uint64_t t0 = atomic_load(&coh_fc.tsc0), n0 = atomic_load(&coh_fc.ns0),
                     mult = atomic_load(&coh_fc.mult);
            uint64_t before = coh_wall_us(), t = coh_trace_us(), after = coh_wall_us();
            uint64_t m1 = coh_now_ns();
#if defined(__x86_64__)
            uint64_t tsc = __builtin_ia32_rdtsc();
#else
            uint64_t tsc = 0;
#endif
            uint64_t off = t < before ? before - t : t > after ? t - after : 0;
            npend++;
            if (off > pend) {
                pend = off;
                snprintf(pctx, sizeof pctx,
                         "read %llu: before %llu t %llu after %llu us; monotonic span %llu ns; "
                         "state seq %u tsc0 %llu ns0 %llu mult %llu, tsc after %llu (+%llu)",
                         (unsigned long long)n, (unsigned long long)before,
                         (unsigned long long)t, (unsigned long long)after,
                         (unsigned long long)(m1 - m0), s, (unsigned long long)t0,
                         (unsigned long long)n0, (unsigned long long)mult,
                         (unsigned long long)tsc, (unsigned long long)(tsc - t0));
            }
            if (m1 - m0 >= 5000)
                continue; /* split by a preemption: its offset says nothing */
            int64_t o = (int64_t)(before * 1000) - (int64_t)m0;
            int step = have_off && (o - off_prev > 20000 || off_prev - o > 20000);
            off_prev = o;
            have_off = 1;
            if (step) {
                steps++;
                quiet_until = tsc + 2 * FC_ANCHOR;
            }
            if (step || tsc < quiet_until) {
                left_out += npend; /* the reads since the last clean one */
            } else if (pend > worst) {
                worst = pend;
                memcpy(ctx, pctx, sizeof ctx);
            }
            pend = 0;
            npend = 0;
        }
    }
    if (pend > worst) { /* the reads after the last clean one count */
        worst = pend;
        memcpy(ctx, pctx, sizeof ctx);
    }
    ck_assert_msg(left_out <= n / 4, "CLOCK_REALTIME stepped %llu times; %llu of %llu reads left out",
                  (unsigned long long)steps, (unsigned long long)left_out, (unsigned long long)n);
    ck_assert_msg(worst <= 3,
                  "coh_trace_us was %llu us outside CLOCK_REALTIME (%llu reads; %llu clock "
                  "steps, %llu reads around them left out); %s",
                  (unsigned long long)worst, (unsigned long long)n, (unsigned long long)steps,
                  (unsigned long long)left_out, ctx);
    if (steps)
        fprintf(stderr, "trace_clock_tracks_realtime: CLOCK_REALTIME stepped %llu times; %llu "
                        "reads around them left out\n",
                (unsigned long long)steps, (unsigned long long)left_out);
}
END_TEST

START_TEST(wraparound)
{
    coh_trace *t;
    ck_assert_int_eq(coh_trace_create(&t, 8), COHORT_OK);
    for (uint64_t s = 1; s <= 20; s++) {
        coh_call c = mk(s, COH_COLL_ALL_REDUCE, s * 10, "w.c", (int)s);
        uint64_t i = coh_trace_issue(t, &c);
        ck_assert_uint_eq(i, s - 1);
        coh_trace_start(t, i);
        if (s != 20)
            coh_trace_end(t, i, s == 19 ? COHORT_ERR_TIMEOUT : COHORT_OK);
    }
    ck_assert_uint_eq(coh_trace_recorded(t), 20);
    coh_trace_entry e[32];
    int n = coh_trace_last(t, e, 32);
    ck_assert_int_eq(n, 8);
    for (int k = 0; k < n; k++) {
        uint64_t s = 13 + (uint64_t)k;
        ck_assert_uint_eq(e[k].call.seq, s);
        ck_assert_uint_eq(e[k].call.count, s * 10);
        ck_assert_int_eq(e[k].call.line, (int)s);
        ck_assert_str_eq(e[k].call.file, "w.c");
        ck_assert_int_eq(e[k].call.redop, COHORT_SUM);
        ck_assert_int_eq(e[k].call.root, -1);
        ck_assert(e[k].t_issue_us > 0 && e[k].t_issue_us <= e[k].t_start_us);
        if (s < 19) {
            ck_assert_int_eq(e[k].state, COH_ST_COMPLETED);
            ck_assert_int_eq(e[k].status, COHORT_OK);
            ck_assert(e[k].t_start_us <= e[k].t_end_us);
        }
    }
    ck_assert_int_eq(e[6].state, COH_ST_FAILED);
    ck_assert_int_eq(e[6].status, COHORT_ERR_TIMEOUT);
    ck_assert_int_eq(e[7].state, COH_ST_STARTED);
    ck_assert_uint_eq(e[7].t_end_us, 0);
    /* Asking for fewer gives the newest ones. */
    ck_assert_int_eq(coh_trace_last(t, e, 3), 3);
    ck_assert_uint_eq(e[0].call.seq, 18);
    ck_assert_uint_eq(e[2].call.seq, 20);
    /* Reading single indices: gone, present, not yet written. */
    ck_assert_int_eq(coh_trace_read(t, 3, e), 0);
    ck_assert_int_eq(coh_trace_read(t, 12, e), 1);
    ck_assert_uint_eq(e[0].call.seq, 13);
    ck_assert_int_eq(coh_trace_read(t, 20, e), 0);
    coh_trace_destroy(t);
}
END_TEST

/* Every capacity maps ring indices to slots the same way on issue, end and
 * read: powers of two by a mask, the others by the division (trace.c
 * slot_of). The last `cap` calls read back in order, a reused index's late
 * end leaves the newer call alone, and no slot is shared by two live calls. */
START_TEST(wraparound_any_capacity)
{
    static const int caps[] = {1, 2, 3, 5, 6, 7, 8, 12, 16};
    for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
        int cap = caps[ci];
        coh_trace *t;
        ck_assert_int_eq(coh_trace_create(&t, cap), COHORT_OK);
        uint64_t total = 3 * (uint64_t)cap + 2, old = 0;
        for (uint64_t s = 1; s <= total; s++) {
            coh_call c = mk(s, COH_COLL_BROADCAST, s, "cap.c", (int)s);
            uint64_t i = coh_trace_issue_started(t, &c);
            ck_assert_uint_eq(i, s - 1);
            if (s == 1)
                old = i;
            if (s != total)
                coh_trace_end(t, i, COHORT_OK);
        }
        coh_trace_end(t, old, COHORT_ERR_ABORTED); /* index 0, reused long ago */
        coh_trace_entry e[16];
        int n = coh_trace_last(t, e, 16);
        ck_assert_msg(n == cap, "capacity %d: %d entries read back", cap, n);
        for (int k = 0; k < n; k++) {
            uint64_t s = total - (uint64_t)cap + 1 + (uint64_t)k;
            ck_assert_msg(e[k].call.seq == s, "capacity %d: entry %d holds #%llu, want #%llu",
                          cap, k, (unsigned long long)e[k].call.seq, (unsigned long long)s);
            ck_assert_int_eq(e[k].state, s == total ? COH_ST_STARTED : COH_ST_COMPLETED);
            ck_assert_int_eq(e[k].status, COHORT_OK);
        }
        ck_assert_int_eq(coh_trace_read(t, total - (uint64_t)cap - 1, e), 0);
        ck_assert_int_eq(coh_trace_read(t, total - 1, e), 1);
        ck_assert_uint_eq(e[0].call.seq, total);
        coh_trace_destroy(t);
    }
}
END_TEST

START_TEST(late_update_of_reused_slot)
{
    coh_trace *t;
    ck_assert_int_eq(coh_trace_create(&t, 4), COHORT_OK);
    coh_call c = mk(1, COH_COLL_BARRIER, 0, "a.c", 1);
    uint64_t old = coh_trace_issue(t, &c);
    for (uint64_t s = 2; s <= 5; s++) {
        c = mk(s, COH_COLL_BARRIER, 0, "a.c", (int)s);
        coh_trace_issue(t, &c);
    }
    /* Slot of #1 now holds #5: the late end of #1 must not touch it. */
    coh_trace_start(t, old);
    coh_trace_end(t, old, COHORT_ERR_ABORTED);
    coh_trace_entry e[4];
    ck_assert_int_eq(coh_trace_last(t, e, 4), 4);
    ck_assert_uint_eq(e[3].call.seq, 5);
    ck_assert_int_eq(e[3].state, COH_ST_ISSUED);
    ck_assert_uint_eq(e[3].t_start_us, 0);
    coh_trace_destroy(t);
}
END_TEST

START_TEST(end_without_start)
{
    coh_trace *t;
    ck_assert_int_eq(coh_trace_create(&t, 4), COHORT_OK);
    coh_call c = mk(1, COH_COLL_ALL_REDUCE, 4, "a.c", 1);
    uint64_t i = coh_trace_issue(t, &c);
    coh_trace_end(t, i, COHORT_ERR_ABORTED); /* failed in the queue */
    coh_trace_entry e;
    ck_assert_int_eq(coh_trace_read(t, i, &e), 1);
    ck_assert_int_eq(e.state, COH_ST_FAILED);
    ck_assert_uint_eq(e.t_start_us, e.t_end_us);
    coh_trace_destroy(t);
}
END_TEST

START_TEST(progress)
{
    coh_trace *t;
    ck_assert_int_eq(coh_trace_create(&t, 16), COHORT_OK);
    uint64_t done = 99;
    int has = 1;
    coh_trace_entry cur;
    coh_trace_progress(t, &done, &cur, &has);
    ck_assert_uint_eq(done, 0);
    ck_assert_int_eq(has, 0);
    uint64_t idx[6];
    for (uint64_t s = 1; s <= 4; s++) {
        coh_call c = mk(s, COH_COLL_ALL_REDUCE, 8, "p.c", (int)s);
        idx[s] = coh_trace_issue(t, &c);
    }
    coh_call p2p = mk(9, COH_COLL_SEND, 8, "p.c", 50);
    idx[5] = coh_trace_issue(t, &p2p);
    coh_trace_end(t, idx[5], COHORT_OK); /* a finished send does not count */
    coh_trace_end(t, idx[1], COHORT_OK);
    coh_trace_end(t, idx[2], COHORT_OK);
    coh_trace_start(t, idx[3]);
    coh_trace_progress(t, &done, &cur, &has);
    ck_assert_uint_eq(done, 2);
    ck_assert_int_eq(has, 1);
    ck_assert_uint_eq(cur.call.seq, 3); /* the oldest unfinished */
    ck_assert_int_eq(cur.state, COH_ST_STARTED);
    coh_trace_progress(t, NULL, NULL, NULL);
    coh_trace_progress(NULL, &done, &cur, &has);
    ck_assert_uint_eq(done, 0);
    ck_assert_int_eq(has, 0);
    coh_trace_destroy(t);
}
END_TEST

START_TEST(null_trace)
{
    coh_call c = mk(1, COH_COLL_BARRIER, 0, "a.c", 1);
    ck_assert_uint_eq(coh_trace_issue(NULL, &c), 0);
    coh_trace_start(NULL, 0);
    coh_trace_end(NULL, 0, COHORT_OK);
    coh_trace_arrive(NULL);
    coh_trace_entry e;
    ck_assert_int_eq(coh_trace_last(NULL, &e, 1), 0);
    ck_assert_int_eq(coh_trace_read(NULL, 0, &e), 0);
    ck_assert_int_eq(coh_trace_capacity(NULL), 0);
    ck_assert_uint_eq(coh_trace_recorded(NULL), 0);
    ck_assert_int_eq(coh_trace_signal_take(NULL), 0);
}
END_TEST

/* ---- concurrency: issuing thread, worker thread, readers, dumpers ---- */

#define CONC_CALLS 200000
#define CONC_Q 64

typedef struct conc {
    coh_trace *t;
    cohort_group *g;
    char dir[128];
    /* issuer -> worker: a bounded queue of ring indices (as the engine) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t q[CONC_Q];
    int head, tail, done_issuing;
    atomic_int stop;
    atomic_long torn;  /* inconsistent entries seen by readers */
    atomic_long reads;
} conc;

/* Each call's fields are derived from its seq, so a mix of two calls in
 * one copied entry is detectable. */
static coh_call conc_call(uint64_t s)
{
    return cht_call(s, 1 + (int)(s % 9), (int)(s % COHORT_DTYPE_COUNT), -1, (int)(s % 7), 0, s * 3,
                   (s & 1) ? "odd.c" : "even.c", (int)(s % 1000));
}

static void *issuer(void *arg)
{
    conc *c = arg;
    for (uint64_t s = 1; s <= CONC_CALLS; s++) {
        coh_call call = conc_call(s);
        uint64_t i = coh_trace_issue(c->t, &call);
        pthread_mutex_lock(&c->mu);
        while ((c->tail + 1) % CONC_Q == c->head)
            pthread_cond_wait(&c->cv, &c->mu);
        c->q[c->tail] = i;
        c->tail = (c->tail + 1) % CONC_Q;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_lock(&c->mu);
    c->done_issuing = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void *worker(void *arg)
{
    conc *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (c->head == c->tail && !c->done_issuing)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->head == c->tail) {
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        uint64_t i = c->q[c->head];
        c->head = (c->head + 1) % CONC_Q;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        coh_trace_start(c->t, i);
        coh_trace_end(c->t, i, (i % 5) ? COHORT_OK : COHORT_ERR_TIMEOUT);
    }
}

static void *reader(void *arg)
{
    conc *c = arg;
    static _Thread_local coh_trace_entry e[256];
    while (!atomic_load(&c->stop)) {
        int n = coh_trace_last(c->t, e, 256);
        for (int k = 0; k < n; k++) {
            coh_call want = conc_call(e[k].call.seq);
            if (e[k].call.count != want.count || e[k].call.coll != want.coll ||
                e[k].call.line != want.line || strcmp(e[k].call.file, want.file) ||
                e[k].call.root != want.root)
                atomic_fetch_add(&c->torn, 1);
            if (k && e[k].call.seq <= e[k - 1].call.seq)
                atomic_fetch_add(&c->torn, 1);
        }
        atomic_fetch_add(&c->reads, 1);
        uint64_t done;
        coh_trace_entry cur;
        int has;
        coh_trace_progress(c->t, &done, &cur, &has);
    }
    return NULL;
}

static void *dumper(void *arg)
{
    conc *c = arg;
    while (!atomic_load(&c->stop))
        ck_assert_int_eq(coh_trace_dump(c->g, c->dir, "concurrent"), COHORT_OK);
    return NULL;
}

START_TEST(concurrent_writers_readers_dumpers)
{
    conc c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    ck_assert_int_eq(coh_trace_create(&c.t, 128), COHORT_OK);
    c.g = tg_make(2, 4);
    c.g->trace = c.t;
    mk_dir(c.dir, sizeof c.dir);
    pthread_t ti, tw, tr[2], td[2];
    pthread_create(&ti, NULL, issuer, &c);
    pthread_create(&tw, NULL, worker, &c);
    for (int i = 0; i < 2; i++) {
        pthread_create(&tr[i], NULL, reader, &c);
        pthread_create(&td[i], NULL, dumper, &c);
    }
    pthread_join(ti, NULL);
    pthread_join(tw, NULL);
    atomic_store(&c.stop, 1);
    for (int i = 0; i < 2; i++) {
        pthread_join(tr[i], NULL);
        pthread_join(td[i], NULL);
    }
    ck_assert_int_eq(atomic_load(&c.torn), 0);
    ck_assert(atomic_load(&c.reads) > 0);
    ck_assert_uint_eq(coh_trace_recorded(c.t), CONC_CALLS);
    /* After the writers stopped every entry is complete. */
    coh_trace_entry e[128];
    ck_assert_int_eq(coh_trace_last(c.t, e, 128), 128);
    for (int k = 0; k < 128; k++) {
        ck_assert_uint_eq(e[k].call.seq, CONC_CALLS - 127 + (uint64_t)k);
        ck_assert(e[k].state == COH_ST_COMPLETED || e[k].state == COH_ST_FAILED);
    }
    /* Concurrent dumps left exactly one file and no temporaries. */
    ck_assert_int_eq(count_files(c.dir), 1);
    rm_dir(c.dir);
    cht_group_free(c.g);
}
END_TEST

/* ---- dumps ---- */

START_TEST(dump_round_trip)
{
    char dir[128], path[256];
    mk_dir(dir, sizeof dir);
    cohort_group *g = tg_make(3, 4);
    g->generation = 5;
    snprintf(g->job_id, sizeof g->job_id, "train-42");
    ck_assert_int_eq(coh_trace_create(&g->trace, 8), COHORT_OK);
    coh_call calls[4] = {
        mk(1, COH_COLL_ALL_REDUCE, 1024, "/src/train.c", 88),
        mk(2, COH_COLL_BROADCAST, 3, "/src/train.c", 90),
        cht_call(1, COH_COLL_RECV, COHORT_INT64, -1, 0, 17, 5, "/src/p2p.c", 7),
        mk(3, COH_COLL_BARRIER, 0, "weird \"name\"\n\\\x01\xff\xc3\xa9.c", 9),
    };
    uint64_t idx[4];
    for (int i = 0; i < 4; i++)
        idx[i] = coh_trace_issue(g->trace, &calls[i]);
    coh_trace_start(g->trace, idx[0]);
    coh_trace_end(g->trace, idx[0], COHORT_OK);
    coh_trace_start(g->trace, idx[1]);
    coh_trace_end(g->trace, idx[1], COHORT_ERR_CONTRACT);
    coh_trace_start(g->trace, idx[2]);
    ck_assert_int_eq(coh_trace_dump(g, dir, "why \"not\"\ttab"), COHORT_OK);
    snprintf(path, sizeof path, "%s/train-42-rank3.jsonl", dir);
    size_t len;
    char *text = slurp(path, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(count_files(dir), 1);

    coh_trace_entry want[4];
    ck_assert_int_eq(coh_trace_last(g->trace, want, 4), 4);
    coh_tl_line ln;
    char err[128];
    int lineno = 0;
    for (char *p = text, *nl; *p; p = nl + 1, lineno++) {
        nl = strchr(p, '\n');
        ck_assert_ptr_nonnull(nl); /* every line is terminated */
        int kind = coh_tl_parse(p, (size_t)(nl - p), &ln, err, sizeof err);
        if (lineno == 0) {
            ck_assert_int_eq(kind, COH_TL_HEADER);
            ck_assert_int_eq(ln.u.hdr.version, 1);
            ck_assert_str_eq(ln.u.hdr.job, "train-42");
            ck_assert_int_eq(ln.u.hdr.rank, 3);
            ck_assert_int_eq(ln.u.hdr.size, 4);
            ck_assert_uint_eq(ln.u.hdr.generation, 5);
            ck_assert_uint_eq(ln.u.hdr.group, 0);
            ck_assert_int_eq(ln.u.hdr.pid, getpid());
            ck_assert_str_eq(ln.u.hdr.reason, "why \"not\"\ttab");
            ck_assert_int_eq(ln.u.hdr.capacity, 8);
            ck_assert_uint_eq(ln.u.hdr.recorded, 4);
            ck_assert(ln.u.hdr.time_us >= want[3].t_issue_us);
            ck_assert(ln.u.hdr.host[0]);
            continue;
        }
        ck_assert_msg(kind == COH_TL_ENTRY, "line %d: %s", lineno, err);
        const coh_trace_entry *w = &want[lineno - 1];
        const coh_tl_entry *e = &ln.u.ent;
        ck_assert_uint_eq(e->seq, w->call.seq);
        ck_assert_int_eq(e->coll, w->call.coll);
        ck_assert_int_eq(e->dtype, w->call.dtype);
        ck_assert_int_eq(e->redop, w->call.redop);
        ck_assert_int_eq(e->root, w->call.root);
        ck_assert_int_eq(e->tag, w->call.tag);
        ck_assert_uint_eq(e->count, w->call.count);
        ck_assert_int_eq(e->line, w->call.line);
        ck_assert_int_eq(e->state, w->state);
        ck_assert_int_eq(e->status, w->status);
        ck_assert_uint_eq(e->t_issue_us, w->t_issue_us);
        ck_assert_uint_eq(e->t_start_us, w->t_start_us);
        ck_assert_uint_eq(e->t_end_us, w->t_end_us);
        if (lineno == 4) /* invalid UTF-8 came back as U+00FF, the rest verbatim */
            ck_assert_str_eq(e->file, "weird \"name\"\n\\\x01\xc3\xbf\xc3\xa9.c");
        else
            ck_assert_str_eq(e->file, w->call.file);
    }
    ck_assert_int_eq(lineno, 5);
    /* The exact text of one entry (documented in docs/trace.md). */
    char expect[512];
    snprintf(expect, sizeof expect,
             "{\"seq\":1,\"op\":\"all_reduce\",\"dtype\":\"float32\",\"count\":1024,\"redop\":"
             "\"sum\",\"root\":-1,\"tag\":0,\"file\":\"/src/train.c\",\"line\":88,\"state\":"
             "\"completed\",\"status\":\"COHORT_OK\",\"t_issue_us\":%llu,\"t_start_us\":%llu,"
             "\"t_end_us\":%llu}\n",
             (unsigned long long)want[0].t_issue_us, (unsigned long long)want[0].t_start_us,
             (unsigned long long)want[0].t_end_us);
    ck_assert_ptr_nonnull(strstr(text, expect));
    free(text);

    /* Every line is valid JSON for a strict third-party parser too. */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys\nfor l in open(sys.argv[1],encoding=\"utf-8\"): "
             "json.loads(l)' %s",
             path);
    ck_assert_int_eq(system(cmd), 0);
    rm_dir(dir);
    cht_group_free(g);
}
END_TEST

START_TEST(dump_names_and_errors)
{
    char dir[128], path[256];
    mk_dir(dir, sizeof dir);
    cohort_group *g = tg_make(1, 2);
    g->id = 77;
    snprintf(g->job_id, sizeof g->job_id, "../evil/job");
    ck_assert_int_eq(coh_trace_dump(g, dir, "x"), COHORT_OK); /* no trace: header only */
    snprintf(path, sizeof path, "%s/_._evil_job-g77-rank1.jsonl", dir);
    char *text = slurp(path, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_null(strchr(strchr(text, '\n') + 1, '\n')); /* one line */
    free(text);

    /* Unset and NULL: nothing, successfully. */
    unsetenv("COHORT_TRACE_DIR");
    ck_assert_int_eq(coh_trace_dump(g, NULL, "x"), COHORT_OK);
    ck_assert_int_eq(count_files(dir), 1);
    /* From the environment. */
    setenv("COHORT_TRACE_DIR", dir, 1);
    g->id = 0;
    snprintf(g->job_id, sizeof g->job_id, "envjob");
    ck_assert_int_eq(coh_trace_dump(g, NULL, "x"), COHORT_OK);
    snprintf(path, sizeof path, "%s/envjob-rank1.jsonl", dir);
    ck_assert_int_eq(access(path, R_OK), 0);
    unsetenv("COHORT_TRACE_DIR");

    /* A directory that does not exist: a system error naming it. */
    ck_assert_int_eq(coh_trace_dump(g, "/nonexistent/cohort", "x"), COHORT_ERR_SYSTEM);
    ck_assert_msg(strstr(coh_tls_err()->msg, "trace dump to /nonexistent/cohort/") &&
                      strstr(coh_tls_err()->msg, ": open: No such file or directory (errno 2)"),
                  "%s", coh_tls_err()->msg);
    ck_assert_int_eq(coh_trace_dump(NULL, dir, "x"), COHORT_ERR_INVALID);
    rm_dir(dir);
    cht_group_free(g);
}
END_TEST

START_TEST(public_dump)
{
    char dir[128], path[256];
    mk_dir(dir, sizeof dir);
    cohort_group *g = tg_make(0, 1);
    unsetenv("COHORT_TRACE_DIR");
    ck_assert_int_eq(cohort_trace_dump(g, NULL), COHORT_ERR_INVALID);
    ck_assert_str_eq(g->last.msg,
                     "cohort_trace_dump: no directory: pass one or set COHORT_TRACE_DIR");
    ck_assert_int_eq(cohort_trace_dump(g, dir), COHORT_OK);
    snprintf(path, sizeof path, "%s/unit-rank0.jsonl", dir);
    char *text = slurp(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "\"reason\":\"cohort_trace_dump\""));
    free(text);
    ck_assert_int_eq(cohort_trace_dump(g, "/nonexistent/x"), COHORT_ERR_SYSTEM);
    ck_assert_ptr_nonnull(strstr(g->last.msg, "open: No such file or directory"));
    ck_assert_int_eq(cohort_trace_dump(NULL, dir), COHORT_ERR_INVALID);
    rm_dir(dir);
    cht_group_free(g);
}
END_TEST

START_TEST(group_fail_dumps)
{
    /* coh_group_fail dumps an attached recorder when COHORT_TRACE_DIR is set, with
     * the failure as the reason and the call in flight recorded as failed. */
    char dir[128], path[256];
    mk_dir(dir, sizeof dir);
    setenv("COHORT_TRACE_DIR", dir, 1);
    cohort_group *g = tg_make(0, 2);
    ck_assert_int_eq(coh_trace_create(&g->trace, 4), COHORT_OK);
    coh_trace_attach(g); /* as group_start does: the failure path's hook */
    coh_call c = mk(1, COH_COLL_ALL_REDUCE, 4, "f.c", 3);
    coh_trace_issue(g->trace, &c);
    coh_group_fail(g, COHORT_ERR_TIMEOUT, "timed out after %d ms", 5);
    snprintf(path, sizeof path, "%s/unit-rank0.jsonl", dir);
    char *text = slurp(path, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "\"reason\":\"timed out after 5 ms\""));
    /* the call in flight cannot complete in a failed group (issue 16) */
    ck_assert_ptr_nonnull(strstr(text, "\"state\":\"failed\",\"status\":\"COHORT_ERR_TIMEOUT\""));
    ck_assert_ptr_null(strstr(text, "\"state\":\"issued\""));
    free(text);
    unsetenv("COHORT_TRACE_DIR");
    rm_dir(dir);
    cht_group_free(g);
}
END_TEST

/* ---- a blocking call's issue time: at its first wait or its end ----
 *
 * coh_trace_issue_started reads no clock (before a small call's root
 * publishes, the read sat on its reader's critical path); the issue time is
 * taken at the call's first wait (coh_trace_arrive) or at its end. */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(issue_time_at_first_wait)
{
    coh_trace *t;
    ck_assert_int_eq(coh_trace_create(&t, 8), COHORT_OK);
    coh_call c = mk(1, COH_COLL_BROADCAST, 1, "w.c", 7);
    uint64_t before = coh_trace_us();
    uint64_t i = coh_trace_issue_started(t, &c);
    coh_trace_entry e;
    /* in flight, not waited yet: a reader sees it issued at most now */
    ck_assert_int_eq(coh_trace_read(t, i, &e), 1);
    ck_assert_int_eq(e.state, COH_ST_STARTED);
    ck_assert(e.t_issue_us >= before && e.t_issue_us == e.t_start_us && e.t_end_us == 0);
    sleep_ms(30);
    uint64_t at_wait = coh_trace_us();
    coh_trace_arrive(t);
    ck_assert_int_eq(coh_trace_read(t, i, &e), 1);
    ck_assert(e.t_issue_us >= at_wait && e.t_issue_us <= at_wait + 5000);
    uint64_t issued = e.t_issue_us;
    coh_trace_arrive(t); /* once: a later wait of the same call changes nothing */
    sleep_ms(30);
    coh_trace_arrive(t);
    coh_trace_end(t, i, COHORT_OK);
    ck_assert_int_eq(coh_trace_read(t, i, &e), 1);
    ck_assert_int_eq(e.state, COH_ST_COMPLETED);
    ck_assert_uint_eq(e.t_issue_us, issued);
    ck_assert_uint_eq(e.t_start_us, issued);
    ck_assert(e.t_end_us >= issued + 20000); /* the wait is in its duration */
    coh_trace_destroy(t);
}
END_TEST

START_TEST(issue_time_at_end_without_wait)
{
    coh_trace *t;
    ck_assert_int_eq(coh_trace_create(&t, 8), COHORT_OK);
    coh_call c = mk(1, COH_COLL_ALL_REDUCE, 1, "w.c", 8);
    uint64_t i = coh_trace_issue_started(t, &c);
    sleep_ms(20);
    uint64_t at_end = coh_trace_us();
    coh_trace_end(t, i, COHORT_OK);
    coh_trace_entry e;
    ck_assert_int_eq(coh_trace_read(t, i, &e), 1);
    ck_assert(e.t_issue_us >= at_end && e.t_issue_us == e.t_start_us &&
              e.t_start_us == e.t_end_us);
    /* nothing pending any more: a wait of a later non-blocking call's
     * worker does not touch it */
    coh_trace_arrive(t);
    ck_assert_int_eq(coh_trace_read(t, i, &e), 1);
    ck_assert_uint_eq(e.t_issue_us, e.t_end_us);
    /* a blocking call of more than 256 B reads the clock at issue, as before */
    coh_call big = mk(2, COH_COLL_ALL_REDUCE, 1024, "w.c", 9);
    uint64_t b0 = coh_trace_us();
    uint64_t k = coh_trace_issue_started(t, &big);
    sleep_ms(20);
    coh_trace_arrive(t); /* nothing pending: changes nothing */
    coh_trace_end(t, k, COHORT_OK);
    ck_assert_int_eq(coh_trace_read(t, k, &e), 1);
    ck_assert(e.t_issue_us >= b0 && e.t_issue_us < b0 + 15000 && e.t_issue_us == e.t_start_us &&
              e.t_end_us >= e.t_issue_us + 15000);
    /* an async call (issue, then start) keeps its clock reads */
    uint64_t before = coh_trace_us();
    uint64_t j = coh_trace_issue(t, &c);
    coh_trace_arrive(t);
    ck_assert_int_eq(coh_trace_read(t, j, &e), 1);
    ck_assert_int_eq(e.state, COH_ST_ISSUED);
    ck_assert(e.t_issue_us >= before && e.t_start_us == 0);
    coh_trace_destroy(t);
}
END_TEST

/* Real ranks, each transport: rank 1 calls 300 ms late. The recorder of
 * rank 0, which waited, holds its arrival (the first wait) as the issue
 * time, so the call lasted >= 150 ms there (the barrier before may let the
 * ranks go up to 150 ms apart on a loaded machine); rank 1's, which did not
 * wait, lasted < 150 ms - what the late-arrival analysis compares
 * (docs/trace.md). */
static int late_rank(int rank, void *arg)
{
    (void)arg;
    cohort_group *g = NULL;
    RANK_PASS(cohort_init(&g), NULL);
    for (int k = 0; k < 3; k++) {
        int32_t x = rank, y = 0;
        RANK_PASS(cohort_barrier(g), g);
        if (rank == 1)
            sleep_ms(300);
        uint64_t before = coh_trace_recorded(g->trace);
        RANK_PASS(k == 2 ? cohort_broadcast(g, &x, 1, COHORT_INT32, 1) /* the late root */
                         : cohort_all_reduce(g, &x, &y, 1, COHORT_INT32, COHORT_SUM),
                  g);
        coh_trace_entry e;
        RANK_CHECK(coh_trace_read(g->trace, before, &e) == 1, "call %d not recorded", k);
        RANK_CHECK(e.state == COH_ST_COMPLETED && e.t_issue_us && e.t_issue_us == e.t_start_us &&
                       e.t_end_us >= e.t_start_us,
                   "call %d: state %d, times %llu %llu %llu", k, e.state,
                   (unsigned long long)e.t_issue_us, (unsigned long long)e.t_start_us,
                   (unsigned long long)e.t_end_us);
        uint64_t d = e.t_end_us - e.t_issue_us;
        RANK_CHECK(rank == 0 ? d >= 150000 : d < 150000,
                   "call %d on rank %d lasted %llu us in the recorder", k, rank,
                   (unsigned long long)d);
    }
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(late_arrival_recorded)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000, .transport = cht_transports[_i]};
    cht_result r;
    cht_run_ranks(&o, late_rank, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- SIGUSR1 ---- */

static atomic_int prev_called;
static void prev_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&prev_called, 1);
}

static void *pending_in_thread(void *arg)
{
    (void)arg;
    int first = coh_trace_signal_pending();
    int second = coh_trace_signal_pending();
    return (void *)(intptr_t)(first * 10 + second);
}

START_TEST(sigusr1_counter)
{
    /* Forked test: the handler does not leak into other tests. */
    signal(SIGUSR1, prev_handler);
    coh_trace *a, *b;
    ck_assert_int_eq(coh_trace_create(&a, 4), COHORT_OK);
    ck_assert_int_eq(coh_trace_create(&b, 4), COHORT_OK);
    ck_assert_uint_eq(coh_trace_signal_count(), 0);
    ck_assert_int_eq(coh_trace_signal_pending(), 0);
    coh_trace_install_signal();
    coh_trace_install_signal(); /* once per process */
    ck_assert_int_eq(coh_trace_signal_take(a), 0);
    raise(SIGUSR1);
    ck_assert_uint_eq(coh_trace_signal_count(), 1);
    ck_assert_int_eq(atomic_load(&prev_called), 1); /* the application's handler still runs */
    /* Per thread (one monitor thread per group): once per signal each. */
    ck_assert_int_eq(coh_trace_signal_pending(), 1);
    ck_assert_int_eq(coh_trace_signal_pending(), 0);
    pthread_t th;
    void *r;
    pthread_create(&th, NULL, pending_in_thread, NULL);
    pthread_join(th, &r);
    ck_assert_int_eq((int)(intptr_t)r, 10);
    /* Per recorder. */
    ck_assert_int_eq(coh_trace_signal_take(a), 1);
    ck_assert_int_eq(coh_trace_signal_take(a), 0);
    ck_assert_int_eq(coh_trace_signal_take(b), 1);
    ck_assert_int_eq(coh_trace_signal_take(b), 0);
    raise(SIGUSR1);
    raise(SIGUSR1);
    ck_assert_uint_eq(coh_trace_signal_count(), 3);
    ck_assert_int_eq(coh_trace_signal_pending(), 1); /* two signals, one dump */
    ck_assert_int_eq(coh_trace_signal_pending(), 0);
    ck_assert_int_eq(coh_trace_signal_take(a), 1);
    ck_assert_int_eq(coh_trace_signal_take(a), 0);
    /* A recorder created after the signals does not replay them. */
    coh_trace *c;
    ck_assert_int_eq(coh_trace_create(&c, 4), COHORT_OK);
    ck_assert_int_eq(coh_trace_signal_take(c), 0);
    coh_trace_destroy(a);
    coh_trace_destroy(b);
    coh_trace_destroy(c);
}
END_TEST

START_TEST(sigusr1_opt_out)
{
    setenv("COHORT_TRACE_SIGNAL", "0", 1);
    coh_trace_install_signal();
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    ck_assert(sa.sa_handler == SIG_DFL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trace");
    TCase *t = tcase_create("ring");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, create_sizes);
    tcase_add_test(t, create_oom);
    tcase_add_test(t, wraparound);
    tcase_add_test(t, wraparound_any_capacity);
    tcase_add_test(t, trace_clock_tracks_realtime);
    tcase_add_test(t, late_update_of_reused_slot);
    tcase_add_test(t, end_without_start);
    tcase_add_test(t, progress);
    tcase_add_test(t, null_trace);
    tcase_add_test(t, issue_time_at_first_wait);
    tcase_add_test(t, issue_time_at_end_without_wait);
    cht_add_per_transport(t, late_arrival_recorded);
    suite_add_tcase(s, t);

    t = tcase_create("concurrent");
    tcase_set_timeout(t, 240);
    tcase_add_test(t, concurrent_writers_readers_dumpers);
    suite_add_tcase(s, t);

    t = tcase_create("dump");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, dump_round_trip);
    tcase_add_test(t, dump_names_and_errors);
    tcase_add_test(t, public_dump);
    tcase_add_test(t, group_fail_dumps);
    suite_add_tcase(s, t);

    t = tcase_create("signal");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, sigusr1_counter);
    tcase_add_test(t, sigusr1_opt_out);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)

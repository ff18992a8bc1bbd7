/*
 * cohort-perf - collective benchmark in the style of nccl-tests.
 *
 *   cohort-perf -n 2 -o all_reduce -b 8 -e 64M -f 4 [--check] [--json] ...
 *   cohortrun -n 2 cohort-perf -o all ...        (ranks from the environment)
 *
 * Per op and size: warm-up, then a batch that grows x4 until it takes at
 * least t/10 (calibration), then batches of that size until the slowest rank
 * has spent t seconds in them, each iteration timed on its own. At the end of a size every rank's per-iteration times are
 * combined with a max all_reduce, so p50/p99/max are of "the slowest rank in
 * that iteration" - what a synchronous training step waits for. avg is the
 * max over ranks of the per-rank mean, the convention of nccl-tests and of
 * the peer harness (mpi_coll_bench, gloo_bench), so ratios against them
 * compare like with like.
 *
 * Environment switches (set before cohort_init, inherited by forked ranks):
 * --transport -> COHORT_TRANSPORT, --algo -> COHORT_ALGO_<OP>,
 * --contract off -> COHORT_CONTRACT=off (benchmark-only).
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf.h"

static void usage(FILE *f)
{
    fputs("usage: cohort-perf [-n RANKS] [-o OPS] [-b MIN] [-e MAX] [-f FACTOR] [--sizes LIST]\n"
          "         [-d DTYPE] [-r REDOP] [--root R] [--check] [--json] [--json-out FILE]\n"
          "         [-t SECONDS] [--iters N] [--warmup N] [--max-iters N]\n"
          "         [--transport auto|shm|tcp] [--algo NAME|OP=NAME,...] [--contract on|off]\n"
          "         [--osu] [--bind core|none] [--deadline SECONDS] [-l LABEL]\n"
          "\n"
          "  -n RANKS        fork RANKS ranks on this host (default: ranks from the\n"
          "                  environment, as cohortrun/torchrun/srun/mpirun set it; else 1)\n"
          "  -o OPS          comma list of: all_reduce broadcast reduce all_gather gather\n"
          "                  scatter reduce_scatter all_to_all barrier sendrecv, or 'all'\n"
          "                  (default all_reduce)\n"
          "  -b/-e/-f        sizes MIN, MIN*F, ... <= MAX bytes, suffixes K M G\n"
          "                  (default 16 64M 4)\n"
          "  --sizes LIST    explicit comma list of sizes instead of -b/-e/-f; a size is the\n"
          "                  full buffer (nccl-tests): all_gather/gather output,\n"
          "                  reduce_scatter/scatter/all_to_all input\n"
          "  -d DTYPE        int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32\n"
          "                  float64 (default float32)\n"
          "  -r REDOP        sum prod min max avg band bor bxor (default sum)\n"
          "  --root R        root of broadcast/reduce/gather/scatter (default 0)\n"
          "  --check         verify every result exactly (deterministic inputs); exit 1 on\n"
          "                  a mismatch\n"
          "  --json          write the results as one JSON document on stdout (no table)\n"
          "  --json-out FILE also write the JSON document to FILE\n"
          "  -t SECONDS      time per size (default 0.2); --iters N fixes the count instead\n"
          "  --warmup N      untimed iterations per size before calibration (default 5)\n"
          "  --max-iters N   cap on calibrated iterations (default 1000000)\n"
          "  --transport T   sets COHORT_TRANSPORT\n"
          "  --algo A        sets COHORT_ALGO_<OP>=A for every selected op, or per op:\n"
          "                  all_reduce=ring,broadcast=tree\n"
          "  --contract off  sets COHORT_CONTRACT=off (benchmark only: no contract check)\n"
          "  --osu           barrier between iterations, only the op timed (OSU style)\n"
          "  --bind core     with -n: pin rank r to cpu r % ncpu (default none)\n"
          "  --deadline S    with -n: kill the ranks after S seconds (default none)\n"
          "  -l LABEL        free text carried into the output\n",
          f);
}

/* ---- option parsing ---- */

static int parse_dtype(const char *s, cohort_dtype *out)
{
    static const struct {
        const char *name;
        cohort_dtype dt;
    } alias[] = {{"float", COHORT_FLOAT32}, {"half", COHORT_FLOAT16}, {"double", COHORT_FLOAT64},
                 {"int", COHORT_INT32},     {"bf16", COHORT_BFLOAT16}, {"fp16", COHORT_FLOAT16},
                 {"fp32", COHORT_FLOAT32},  {"fp64", COHORT_FLOAT64}};
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
        if (!strcmp(s, cohort_dtype_name((cohort_dtype)d))) {
            *out = (cohort_dtype)d;
            return 0;
        }
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(s, alias[i].name)) {
            *out = alias[i].dt;
            return 0;
        }
    return -1;
}

static int parse_redop(const char *s, cohort_op *out)
{
    for (int op = 0; op < COHORT_OP_COUNT; op++)
        if (!strcmp(s, cohort_op_name((cohort_op)op))) {
            *out = (cohort_op)op;
            return 0;
        }
    return -1;
}

static int find_op(const char *s)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (!strcmp(s, perf_op_names[i]))
            return i;
    /* Accept nccl-tests / MPI spellings too. */
    static const struct {
        const char *name;
        int op;
    } alias[] = {{"allreduce", OP_ALL_REDUCE},  {"bcast", OP_BROADCAST},
                 {"allgather", OP_ALL_GATHER},  {"reducescatter", OP_REDUCE_SCATTER},
                 {"alltoall", OP_ALL_TO_ALL},   {"pingpong", OP_SENDRECV},
                 {"reduce_scatter_block", OP_REDUCE_SCATTER}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(s, alias[i].name))
            return alias[i].op;
    return -1;
}

static int parse_ops(const char *s, perf_opts *o)
{
    memset(o->ops, 0, sizeof o->ops);
    char *dup = strdup(s), *save = NULL;
    if (!dup)
        return -1;
    int any = 0;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "all")) {
            for (int i = 0; i < OP_COUNT; i++)
                o->ops[i] = 1;
            any = 1;
            continue;
        }
        int op = find_op(t);
        if (op < 0) {
            fprintf(stderr, "cohort-perf: unknown op '%s' (see --help)\n", t);
            free(dup);
            return -1;
        }
        o->ops[op] = 1;
        any = 1;
    }
    free(dup);
    return any ? 0 : -1;
}

static int parse_sizes(const char *s, perf_opts *o)
{
    char *dup = strdup(s), *save = NULL;
    if (!dup)
        return -1;
    o->nsizes = 0;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes >= PERF_MAX_SIZES || perf_parse_size(t, &o->sizes[o->nsizes]) != 0) {
            fprintf(stderr, "cohort-perf: bad size '%s' in --sizes (or more than %d sizes)\n", t,
                    PERF_MAX_SIZES);
            free(dup);
            return -1;
        }
        o->nsizes++;
    }
    free(dup);
    return o->nsizes ? 0 : -1;
}

static int parse_long(const char *s, long min, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < min)
        return -1;
    *out = v;
    return 0;
}

/* Sets COHORT_ALGO_<OP> for the selected ops ("NAME") or the named ones
 * ("all_reduce=ring,broadcast=tree"). */
static int apply_algo(const perf_opts *o)
{
    if (!o->algo)
        return 0;
    char *dup = strdup(o->algo), *save = NULL;
    if (!dup)
        return -1;
    int rc = 0;
    if (!strchr(dup, '=')) {
        for (int i = 0; i < OP_COUNT; i++) {
            if (!o->ops[i] || i == OP_SENDRECV)
                continue;
            char var[64];
            snprintf(var, sizeof var, "COHORT_ALGO_%s", perf_op_names[i]);
            for (char *c = var; *c; c++)
                *c = (char)toupper((unsigned char)*c);
            setenv(var, dup, 1);
        }
    } else {
        for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(t, '=');
            int op = -1;
            if (eq) {
                *eq = 0;
                op = find_op(t);
            }
            if (op < 0 || op == OP_SENDRECV || !eq[1]) {
                fprintf(stderr, "cohort-perf: --algo: expected NAME or OP=NAME,..., got '%s'\n",
                        o->algo);
                rc = -1;
                break;
            }
            char var[64];
            snprintf(var, sizeof var, "COHORT_ALGO_%s", perf_op_names[op]);
            for (char *c = var; *c; c++)
                *c = (char)toupper((unsigned char)*c);
            setenv(var, eq + 1, 1);
        }
    }
    free(dup);
    return rc;
}

/* ---- one rank ---- */

typedef struct perf_state {
    const perf_opts *o;
    cohort_group *g;
    int rank, n;
    size_t esz;
    void *sbuf, *rbuf;
    size_t sbytes, rbytes;
    double *times, *tmax;
    perf_row rows[OP_COUNT * PERF_MAX_SIZES];
    int nrows;
    int failed;
} perf_state;

static int per_rank_op(enum perf_op op)
{
    return op == OP_ALL_GATHER || op == OP_GATHER || op == OP_SCATTER ||
           op == OP_REDUCE_SCATTER || op == OP_ALL_TO_ALL;
}

/* The call's count argument and the buffers' element counts for a size. */
static void shape(const perf_state *s, enum perf_op op, size_t bytes, size_t *count,
                  size_t *send_elems, size_t *recv_elems, size_t *full_bytes)
{
    size_t n = (size_t)s->n;
    size_t elems = bytes / s->esz;
    if (op == OP_BARRIER) {
        *count = *send_elems = *recv_elems = *full_bytes = 0;
        return;
    }
    if (elems < 1)
        elems = 1;
    if (!per_rank_op(op)) {
        *count = *send_elems = *recv_elems = elems;
        *full_bytes = elems * s->esz;
        return;
    }
    /* Per-rank ops: the full buffer is n blocks; round down, at least 1. */
    size_t per = elems / n;
    if (per < 1)
        per = 1;
    *count = per;
    *full_bytes = per * n * s->esz;
    switch (op) {
    case OP_ALL_GATHER:
    case OP_GATHER:
        *send_elems = per;
        *recv_elems = per * n;
        break;
    case OP_SCATTER:
    case OP_REDUCE_SCATTER:
        *send_elems = per * n;
        *recv_elems = per;
        break;
    default: /* all_to_all */
        *send_elems = *recv_elems = per * n;
        break;
    }
}

/* One call. Every call site is in this function, so every rank's contract
 * carries the same file:line. */
static cohort_status do_op(perf_state *s, enum perf_op op, size_t count)
{
    const perf_opts *o = s->o;
    cohort_group *g = s->g;
    switch (op) {
    case OP_ALL_REDUCE:
        return cohort_all_reduce(g, s->sbuf, s->rbuf, count, o->dtype, o->redop);
    case OP_BROADCAST:
        return cohort_broadcast(g, s->rbuf, count, o->dtype, o->root);
    case OP_REDUCE:
        return cohort_reduce(g, s->sbuf, s->rbuf, count, o->dtype, o->redop, o->root);
    case OP_ALL_GATHER:
        return cohort_all_gather(g, s->sbuf, s->rbuf, count, o->dtype);
    case OP_GATHER:
        return cohort_gather(g, s->sbuf, s->rbuf, count, o->dtype, o->root);
    case OP_SCATTER:
        return cohort_scatter(g, s->sbuf, s->rbuf, count, o->dtype, o->root);
    case OP_REDUCE_SCATTER:
        return cohort_reduce_scatter(g, s->sbuf, s->rbuf, count, o->dtype, o->redop);
    case OP_ALL_TO_ALL:
        return cohort_all_to_all(g, s->sbuf, s->rbuf, count, o->dtype);
    case OP_BARRIER:
        return cohort_barrier(g);
    case OP_SENDRECV: {
        /* Ping-pong between ranks 2k and 2k+1; an odd rank out idles. */
        int partner = (s->rank % 2 == 0) ? s->rank + 1 : s->rank - 1;
        if (partner >= s->n)
            return COHORT_OK;
        cohort_status st;
        if (s->rank % 2 == 0) {
            st = cohort_send(g, s->sbuf, count, o->dtype, partner, 0);
            if (st == COHORT_OK)
                st = cohort_recv(g, s->rbuf, count, o->dtype, partner, 0);
        } else {
            st = cohort_recv(g, s->rbuf, count, o->dtype, partner, 0);
            if (st == COHORT_OK)
                st = cohort_send(g, s->sbuf, count, o->dtype, partner, 0);
        }
        return st;
    }
    default:
        return COHORT_ERR_INVALID;
    }
}

static void die(perf_state *s, cohort_status st, const char *what, enum perf_op op, size_t bytes)
{
    fprintf(stderr, "cohort-perf: rank %d: %s %s size %zu: %s: %s\n", s->rank, what,
            perf_op_names[op], bytes, cohort_status_name(st), cohort_last_error(s->g));
    fflush(NULL);
    /* Exit without finalize: peers see this rank gone (PEER_LOST), which is
     * the behaviour under test when something breaks. */
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs k ops after a barrier, timed as a whole; returns the max over ranks
 * of the mean seconds per op (every rank gets the same value, so all ranks
 * agree on the batch size derived from it). */
static double batch(perf_state *s, enum perf_op op, size_t count, size_t bytes, long k)
{
    cohort_status st = cohort_barrier(s->g);
    if (st != COHORT_OK)
        die(s, st, "barrier before", op, bytes);
    double t0 = now_s();
    for (long i = 0; i < k; i++) {
        st = do_op(s, op, count);
        if (st != COHORT_OK)
            die(s, st, "calibration", op, bytes);
        if (s->o->osu && (st = cohort_barrier(s->g)) != COHORT_OK)
            die(s, st, "osu barrier", op, bytes);
    }
    double per = (now_s() - t0) / (double)k, mx = 0;
    st = cohort_all_reduce(s->g, &per, &mx, 1, COHORT_FLOAT64, COHORT_MAX);
    if (st != COHORT_OK)
        die(s, st, "calibration max all_reduce after", op, bytes);
    return mx;
}

/* Which rank's output the hidden --debug-corrupt flips: one that has output. */
static int corrupt_rank(const perf_state *s, enum perf_op op)
{
    if (op == OP_REDUCE || op == OP_GATHER)
        return s->o->root;
    if (op == OP_SENDRECV)
        return s->n >= 2 ? 1 : -1;
    return s->n - 1;
}

/* Fills inputs, poisons outputs, runs one call and checks it. Returns the
 * number of wrong elements summed over ranks (0 without --check). */
static int64_t check_once(perf_state *s, enum perf_op op, size_t count, size_t bytes,
                          size_t send_elems, size_t recv_elems, int fresh)
{
    const perf_opts *o = s->o;
    if (fresh) {
        perf_poison(s->rbuf, recv_elems * s->esz);
        if (op == OP_BROADCAST && s->rank == o->root)
            perf_fill(s->rbuf, o->dtype, o->redop, o->root, 0, recv_elems);
        cohort_status st = do_op(s, op, count);
        if (st != COHORT_OK)
            die(s, st, "check call", op, bytes);
        if (o->debug_corrupt && s->rank == corrupt_rank(s, op) && recv_elems > 0)
            ((unsigned char *)s->rbuf)[0] ^= 0x5a;
    }
    char msg[256];
    int64_t bad = (int64_t)perf_verify(op, s->sbuf, s->rbuf, count, o->dtype, o->redop, o->root,
                                       s->rank, s->n, msg, sizeof msg);
    if (bad)
        fprintf(stderr,
                "cohort-perf: rank %d: CHECK FAILED %s size %zu (%s): %lld wrong; first: %s\n",
                s->rank, perf_op_names[op], bytes, fresh ? "fresh call" : "after timing",
                (long long)bad, msg);
    (void)send_elems;
    int64_t total = 0;
    cohort_status st = cohort_all_reduce(s->g, &bad, &total, 1, COHORT_INT64, COHORT_SUM);
    if (st != COHORT_OK)
        die(s, st, "check sum all_reduce after", op, bytes);
    return total;
}

static void run_size(perf_state *s, enum perf_op op, size_t req_bytes)
{
    const perf_opts *o = s->o;
    size_t count, send_elems, recv_elems, bytes;
    shape(s, op, req_bytes, &count, &send_elems, &recv_elems, &bytes);

    /* Inputs: the deterministic pattern (also touches every page before
     * timing, with or without --check). */
    if (send_elems)
        perf_fill(s->sbuf, o->dtype, o->redop, s->rank, 0, send_elems);
    if (op == OP_BROADCAST)
        perf_fill(s->rbuf, o->dtype, o->redop, o->root, 0, recv_elems);
    else if (recv_elems)
        perf_poison(s->rbuf, recv_elems * s->esz);

    int64_t bad = 0;
    int checkable = o->check && op != OP_BARRIER;
    if (checkable)
        bad += check_once(s, op, count, bytes, send_elems, recv_elems, 1);

    cohort_status st;
    for (long i = 0; i < o->warmup; i++)
        if ((st = do_op(s, op, count)) != COHORT_OK)
            die(s, st, "warm-up", op, bytes);

    /* Calibration: the batch grows x4 from 4 (so that one preempted
     * iteration does not decide alone) until it takes at least t/10. */
    long k = o->iters;
    if (!k) {
        k = 4;
        while (k < o->max_iters && batch(s, op, count, bytes, k) * (double)k < o->target_s / 10)
            k *= 4;
        if (k > o->max_iters)
            k = o->max_iters;
    }

    /* The timed phase: batches of k iterations, each iteration timed on its
     * own (one clock read per iteration back to back), until the slowest
     * rank has spent t in them (every rank takes the same decision from a
     * max all_reduce between batches). Deciding by elapsed time rather than
     * by a count extrapolated from calibration keeps a preempted calibration
     * batch on a busy machine from shrinking the sample. */
    if ((st = cohort_barrier(s->g)) != COHORT_OK)
        die(s, st, "barrier before", op, bytes);
    double *t = s->times, spent = 0;
    long iters = 0;
    for (;;) {
        long m = k < o->max_iters - iters ? k : o->max_iters - iters;
        double b0 = now_s();
        if (!o->osu) {
            double c0 = b0;
            for (long i = iters; i < iters + m; i++) {
                if ((st = do_op(s, op, count)) != COHORT_OK)
                    die(s, st, "timed", op, bytes);
                double c1 = now_s();
                t[i] = c1 - c0;
                c0 = c1;
            }
        } else {
            for (long i = iters; i < iters + m; i++) {
                double c0 = now_s();
                if ((st = do_op(s, op, count)) != COHORT_OK)
                    die(s, st, "timed", op, bytes);
                t[i] = now_s() - c0;
                if ((st = cohort_barrier(s->g)) != COHORT_OK)
                    die(s, st, "osu barrier", op, bytes);
            }
        }
        spent += now_s() - b0;
        iters += m;
        if (o->iters || iters >= o->max_iters)
            break;
        double most = 0;
        if ((st = cohort_all_reduce(s->g, &spent, &most, 1, COHORT_FLOAT64, COHORT_MAX)) !=
            COHORT_OK)
            die(s, st, "time max all_reduce after", op, bytes);
        if (most >= o->target_s)
            break;
    }
    double scale = op == OP_SENDRECV ? 0.5e6 : 1e6; /* seconds -> us; ping-pong one-way */
    double sum = 0;
    for (long i = 0; i < iters; i++) {
        t[i] *= scale;
        sum += t[i];
    }
    double mean = sum / (double)iters, avg = 0;
    if ((st = cohort_all_reduce(s->g, &mean, &avg, 1, COHORT_FLOAT64, COHORT_MAX)) != COHORT_OK)
        die(s, st, "mean max all_reduce after", op, bytes);
    if ((st = cohort_all_reduce(s->g, t, s->tmax, (size_t)iters, COHORT_FLOAT64, COHORT_MAX)) !=
        COHORT_OK)
        die(s, st, "per-iteration max all_reduce after", op, bytes);

    /* The timed loop's last output must be right too (pipelined ops reuse
     * buffers while earlier iterations may still drain). */
    if (checkable)
        bad += check_once(s, op, count, bytes, send_elems, recv_elems, 0);

    perf_row *r = &s->rows[s->nrows++];
    memset(r, 0, sizeof *r);
    r->op = op;
    r->bytes = bytes;
    r->count = count;
    r->iters = iters;
    r->avg_us = avg;
    qsort(s->tmax, (size_t)iters, sizeof(double), perf_cmp_double);
    r->min_us = s->tmax[0];
    r->p50_us = perf_pct(s->tmax, iters, 50);
    r->p99_us = perf_pct(s->tmax, iters, 99);
    r->max_us = s->tmax[iters - 1];
    r->algbw = avg > 0 ? (double)bytes / (avg * 1e-6) / 1e9 : 0;
    r->busbw = r->algbw * perf_busfactor(op, s->n);
    r->check = !checkable ? "-" : bad ? "FAIL" : "ok";
    if (bad)
        s->failed = 1;
    if (s->rank == 0 && !o->json)
        perf_print_row(stdout, o, r);
}

static void *xalloc(size_t bytes)
{
    /* Page-aligned like the peers' buffers, so alignment is not a variable. */
    size_t b = (bytes + 4095) / 4096 * 4096;
    void *p = aligned_alloc(4096, b ? b : 4096);
    if (!p) {
        fprintf(stderr, "cohort-perf: cannot allocate %zu bytes\n", bytes);
        exit(2);
    }
    return p;
}

static int rank_main(const perf_opts *o)
{
    perf_state *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "cohort-perf: out of memory\n");
        return 2;
    }
    s->o = o;
    perf_mem mem;
    memset(&mem, 0, sizeof mem);
    uint64_t hwm, shmem;
    perf_mem_status(&mem.rss_start, &hwm, &shmem);

    cohort_status st = cohort_init(&s->g);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-perf: cohort_init: %s: %s\n", cohort_status_name(st),
                cohort_last_error(NULL));
        return 2;
    }
    s->rank = cohort_rank(s->g);
    s->n = cohort_size(s->g);
    s->esz = cohort_dtype_size(o->dtype);
    if (o->root >= s->n) {
        if (s->rank == 0)
            fprintf(stderr, "cohort-perf: --root %d is not a rank of a %d-rank group\n", o->root,
                    s->n);
        cohort_finalize(s->g);
        return 2;
    }
    /* One tiny collective so that connections and segments exist before
     * the library's memory is read. */
    float one = 1, sum = 0;
    if ((st = cohort_all_reduce(s->g, &one, &sum, 1, COHORT_FLOAT32, COHORT_SUM)) != COHORT_OK)
        die(s, st, "first", OP_ALL_REDUCE, 4);
    perf_mem_status(&mem.rss_init, &hwm, &shmem);

    /* Buffers for the largest shape of any selected op. */
    size_t nsz = 0;
    const size_t *sizes = o->sizes;
    nsz = (size_t)o->nsizes;
    for (int op = 0; op < OP_COUNT; op++) {
        if (!o->ops[op])
            continue;
        for (size_t i = 0; i < nsz; i++) {
            size_t c, se, re, fb;
            shape(s, (enum perf_op)op, sizes[i], &c, &se, &re, &fb);
            if (se * s->esz > s->sbytes)
                s->sbytes = se * s->esz;
            if (re * s->esz > s->rbytes)
                s->rbytes = re * s->esz;
        }
    }
    s->sbuf = xalloc(s->sbytes);
    s->rbuf = xalloc(s->rbytes);
    long cap = o->iters ? o->iters : o->max_iters;
    if (cap < 5)
        cap = 5;
    s->times = xalloc((size_t)cap * sizeof(double));
    s->tmax = xalloc((size_t)cap * sizeof(double));

    if (s->rank == 0 && !o->json)
        perf_print_header(stdout, o, s->n);
    for (int op = 0; op < OP_COUNT; op++) {
        if (!o->ops[op])
            continue;
        if (op == OP_BARRIER) {
            run_size(s, OP_BARRIER, 0);
            continue;
        }
        if (op == OP_SENDRECV && s->n < 2) {
            if (s->rank == 0)
                fprintf(stderr, "cohort-perf: sendrecv needs at least 2 ranks; skipped\n");
            continue;
        }
        for (size_t i = 0; i < nsz; i++)
            run_size(s, (enum perf_op)op, sizes[i]);
    }

    /* Memory at the end, gathered to rank 0. */
    perf_mem_status(&mem.rss_end, &mem.hwm, &mem.shmem);
    perf_mem_segments(&mem.seg_size, &mem.seg_rss, &mem.seg_pss);
    perf_mem *all = calloc((size_t)s->n, sizeof *all);
    if (!all) {
        fprintf(stderr, "cohort-perf: out of memory\n");
        exit(2);
    }
    st = cohort_gather(s->g, &mem, all, PERF_MEM_FIELDS, COHORT_UINT64, 0);
    if (st != COHORT_OK)
        die(s, st, "memory report", OP_GATHER, sizeof mem);
    int64_t failed = s->failed, anyfail = 0;
    st = cohort_all_reduce(s->g, &failed, &anyfail, 1, COHORT_INT64, COHORT_MAX);
    if (st != COHORT_OK)
        die(s, st, "final", OP_ALL_REDUCE, 8);
    if (s->rank == 0) {
        if (!o->json)
            perf_print_mem(stdout, all, s->n);
        else
            perf_write_json(stdout, o, s->n, s->rows, s->nrows, all, (int)anyfail);
        if (o->json_out) {
            FILE *f = fopen(o->json_out, "w");
            if (!f) {
                fprintf(stderr, "cohort-perf: cannot write %s\n", o->json_out);
                anyfail = anyfail ? anyfail : 2;
            } else {
                perf_write_json(f, o, s->n, s->rows, s->nrows, all, (int)anyfail);
                fclose(f);
            }
        }
        if (anyfail == 1 && !o->json)
            printf("# CHECK FAILED (see stderr)\n");
    }
    st = cohort_finalize(s->g);
    if (st != COHORT_OK)
        fprintf(stderr, "cohort-perf: rank %d: cohort_finalize: %s\n", s->rank,
                cohort_status_name(st));
    free(all);
    free(s->sbuf);
    free(s->rbuf);
    free(s->times);
    free(s->tmax);
    free(s);
    return anyfail ? (int)anyfail : (st == COHORT_OK ? 0 : 2);
}

/* ---- main ---- */

enum {
    OPT_SIZES = 256,
    OPT_ROOT,
    OPT_CHECK,
    OPT_JSON,
    OPT_JSON_OUT,
    OPT_ITERS,
    OPT_WARMUP,
    OPT_MAX_ITERS,
    OPT_TRANSPORT,
    OPT_ALGO,
    OPT_CONTRACT,
    OPT_OSU,
    OPT_BIND,
    OPT_DEADLINE,
    OPT_DEBUG_CORRUPT,
};

int main(int argc, char **argv)
{
    static perf_opts o;
    memset(&o, 0, sizeof o);
    o.ops[OP_ALL_REDUCE] = 1;
    o.minbytes = 16;
    o.maxbytes = 64u << 20;
    o.factor = 4;
    o.dtype = COHORT_FLOAT32;
    o.redop = COHORT_SUM;
    o.warmup = 5;
    o.max_iters = 1000000;
    o.target_s = 0.2;

    static const struct option lo[] = {
        {"nranks", required_argument, 0, 'n'},
        {"op", required_argument, 0, 'o'},
        {"minbytes", required_argument, 0, 'b'},
        {"maxbytes", required_argument, 0, 'e'},
        {"stepfactor", required_argument, 0, 'f'},
        {"sizes", required_argument, 0, OPT_SIZES},
        {"datatype", required_argument, 0, 'd'},
        {"op-reduce", required_argument, 0, 'r'},
        {"redop", required_argument, 0, 'r'},
        {"root", required_argument, 0, OPT_ROOT},
        {"check", no_argument, 0, OPT_CHECK},
        {"json", no_argument, 0, OPT_JSON},
        {"json-out", required_argument, 0, OPT_JSON_OUT},
        {"time", required_argument, 0, 't'},
        {"iters", required_argument, 0, OPT_ITERS},
        {"warmup", required_argument, 0, OPT_WARMUP},
        {"max-iters", required_argument, 0, OPT_MAX_ITERS},
        {"transport", required_argument, 0, OPT_TRANSPORT},
        {"algo", required_argument, 0, OPT_ALGO},
        {"contract", required_argument, 0, OPT_CONTRACT},
        {"osu", no_argument, 0, OPT_OSU},
        {"bind", required_argument, 0, OPT_BIND},
        {"deadline", required_argument, 0, OPT_DEADLINE},
        {"label", required_argument, 0, 'l'},
        {"debug-corrupt", no_argument, 0, OPT_DEBUG_CORRUPT}, /* hidden: tests --check */
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c, sizes_given = 0;
    long v;
    while ((c = getopt_long(argc, argv, "+n:o:b:e:f:d:r:t:l:h", lo, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_long(optarg, 1, &v) != 0 || v > 4096) {
                fprintf(stderr, "cohort-perf: -n expects 1..4096 ranks, got '%s'\n", optarg);
                return 2;
            }
            o.nranks = (int)v;
            break;
        case 'o':
            if (parse_ops(optarg, &o) != 0)
                return 2;
            break;
        case 'b':
        case 'e':
            if (perf_parse_size(optarg, c == 'b' ? &o.minbytes : &o.maxbytes) != 0) {
                fprintf(stderr, "cohort-perf: -%c: bad size '%s'\n", c, optarg);
                return 2;
            }
            break;
        case 'f': {
            char *end;
            o.factor = strtod(optarg, &end);
            if (end == optarg || *end || o.factor <= 1.0) {
                fprintf(stderr, "cohort-perf: -f expects a factor > 1, got '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case OPT_SIZES:
            if (parse_sizes(optarg, &o) != 0)
                return 2;
            sizes_given = 1;
            break;
        case 'd':
            if (parse_dtype(optarg, &o.dtype) != 0) {
                fprintf(stderr, "cohort-perf: unknown dtype '%s' (see --help)\n", optarg);
                return 2;
            }
            break;
        case 'r':
            if (parse_redop(optarg, &o.redop) != 0) {
                fprintf(stderr, "cohort-perf: unknown reduce op '%s' (see --help)\n", optarg);
                return 2;
            }
            break;
        case OPT_ROOT:
            if (parse_long(optarg, 0, &v) != 0 || v > 1 << 20) {
                fprintf(stderr, "cohort-perf: --root expects a rank, got '%s'\n", optarg);
                return 2;
            }
            o.root = (int)v;
            break;
        case OPT_CHECK:
            o.check = 1;
            break;
        case OPT_JSON:
            o.json = 1;
            break;
        case OPT_JSON_OUT:
            o.json_out = optarg;
            break;
        case 't': {
            char *end;
            o.target_s = strtod(optarg, &end);
            if (end == optarg || *end || o.target_s <= 0 || o.target_s > 3600) {
                fprintf(stderr, "cohort-perf: -t expects seconds > 0, got '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case OPT_ITERS:
        case OPT_WARMUP:
        case OPT_MAX_ITERS:
            if (parse_long(optarg, c == OPT_WARMUP ? 0 : 1, &v) != 0 || v > 100000000) {
                fprintf(stderr, "cohort-perf: %s expects a count, got '%s'\n",
                        c == OPT_ITERS ? "--iters" : c == OPT_WARMUP ? "--warmup" : "--max-iters",
                        optarg);
                return 2;
            }
            if (c == OPT_ITERS)
                o.iters = v;
            else if (c == OPT_WARMUP)
                o.warmup = v;
            else
                o.max_iters = v;
            break;
        case OPT_TRANSPORT:
            if (strcmp(optarg, "auto") && strcmp(optarg, "shm") && strcmp(optarg, "tcp")) {
                fprintf(stderr, "cohort-perf: --transport expects auto, shm or tcp\n");
                return 2;
            }
            o.transport = optarg;
            break;
        case OPT_ALGO:
            o.algo = optarg;
            break;
        case OPT_CONTRACT:
            if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "cohort-perf: --contract expects on or off\n");
                return 2;
            }
            o.contract_off = !strcmp(optarg, "off");
            break;
        case OPT_OSU:
            o.osu = 1;
            break;
        case OPT_BIND:
            if (strcmp(optarg, "core") && strcmp(optarg, "none")) {
                fprintf(stderr, "cohort-perf: --bind expects core or none\n");
                return 2;
            }
            o.bind = !strcmp(optarg, "core");
            break;
        case OPT_DEADLINE: {
            char *end;
            o.deadline_s = strtod(optarg, &end);
            if (end == optarg || *end || o.deadline_s <= 0) {
                fprintf(stderr, "cohort-perf: --deadline expects seconds > 0\n");
                return 2;
            }
            break;
        }
        case OPT_DEBUG_CORRUPT:
            o.debug_corrupt = 1;
            break;
        case 'l':
            o.label = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cohort-perf: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!sizes_given) {
        if (o.minbytes > o.maxbytes) {
            fprintf(stderr, "cohort-perf: -b %zu is larger than -e %zu\n", o.minbytes, o.maxbytes);
            return 2;
        }
        /* nccl-tests progression: MIN, MIN*F, ... while <= MAX. */
        for (double sz = (double)o.minbytes; sz <= (double)o.maxbytes; sz *= o.factor) {
            if (o.nsizes >= PERF_MAX_SIZES) {
                fprintf(stderr, "cohort-perf: more than %d sizes; raise -f\n", PERF_MAX_SIZES);
                return 2;
            }
            o.sizes[o.nsizes++] = (size_t)sz;
            if (sz == 0)
                break;
        }
    }
    if (o.redop == COHORT_AVG && (o.dtype != COHORT_FLOAT16 && o.dtype != COHORT_BFLOAT16 &&
                                  o.dtype != COHORT_FLOAT32 && o.dtype != COHORT_FLOAT64)) {
        fprintf(stderr, "cohort-perf: -r avg needs a floating-point dtype\n");
        return 2;
    }
    if ((o.redop == COHORT_BAND || o.redop == COHORT_BOR || o.redop == COHORT_BXOR) &&
        (o.dtype == COHORT_FLOAT16 || o.dtype == COHORT_BFLOAT16 || o.dtype == COHORT_FLOAT32 ||
         o.dtype == COHORT_FLOAT64)) {
        fprintf(stderr, "cohort-perf: -r %s needs an integer dtype\n", cohort_op_name(o.redop));
        return 2;
    }
    if (o.iters && o.iters > o.max_iters)
        o.max_iters = o.iters;

    /* Settings the library reads at cohort_init: set them here so forked
     * ranks inherit them. */
    if (o.transport)
        setenv("COHORT_TRANSPORT", o.transport, 1);
    if (o.contract_off)
        setenv("COHORT_CONTRACT", "off", 1);
    if (apply_algo(&o) != 0)
        return 2;

    if (o.nranks > 0)
        return perf_launch(&o, rank_main);
    static const char *const rank_vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                            "PMI_RANK", NULL};
    int have_env = 0;
    for (int i = 0; rank_vars[i]; i++)
        have_env |= getenv(rank_vars[i]) != NULL;
    if (!have_env) {
        o.nranks = 1;
        return perf_launch(&o, rank_main);
    }
    return rank_main(&o);
}

/*
 * cohort-perf - collective benchmark that speaks nccl-tests: the same flags
 * with the same meanings, the same table (out-of-place and in-place columns,
 * #wrong, the "# Avg bus bandwidth" footer), so scripts written for
 * all_reduce_perf read its output unchanged. See docs/tools.md.
 *
 *   cohort-perf --np 2 -b 8 -e 64M -f 2               (all_reduce, 2 forked ranks)
 *   cohortrun -n 4 cohort-perf --coll all -n 20       (ranks from the environment)
 *   all_reduce_perf -b 8 -e 128M -f 2 -g 1            (a symlink named like the nccl-tests binary)
 *
 * Per collective, dtype, reduce op, root and size, two variants (out-of-place,
 * then in-place): checked calls (-c), warm-up (-w), then either -n timed
 * iterations or - cohort's default - batches until --time seconds have been
 * spent, each iteration (of -m calls) timed on its own. Each rank reduces its
 * own times to a mean and percentiles; -a combines those over ranks (0: rank
 * 0's, 1: mean, 2: min, 3: max, cohort's default - the slowest rank). Every
 * column is the same combination of the same per-rank samples, so the time
 * column is never the mean of one distribution next to the median of
 * another.
 *
 * Environment switches (set before cohort_init, inherited by forked ranks):
 * --transport -> COHORT_TRANSPORT, --algo -> COHORT_ALGO_<OP>,
 * --contract off -> COHORT_CONTRACT=off (benchmark-only), -T -> COHORT_TIMEOUT.
 */
#include <ctype.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "bind.h"
#include "cli.h"
#include "perf.h"

static void usage(FILE *f)
{
    fputs("usage: cohort-perf [options]\n"
          "\n"
          "nccl-tests options (same letters, same meanings):\n"
          "  -b, --minbytes SIZE     smallest size (suffixes K M G; default 16)\n"
          "  -e, --maxbytes SIZE     largest size (default 64M)\n"
          "  -f, --stepfactor F      multiply the size by F (default 4)\n"
          "  -i, --stepbytes SIZE    add SIZE instead (fixed increment)\n"
          "  -o, --op OP[,OP]|all    reduce op: sum prod min max avg (and band bor bxor);\n"
          "                          default sum\n"
          "  -d, --datatype T[,T]|all  int8 uint8 int32 uint32 int64 uint64 half float\n"
          "                          double bfloat16 (default float)\n"
          "  -r, --root R|all        root of broadcast/reduce/gather/scatter (default 0;\n"
          "                          all: every rank in turn)\n"
          "  -n, --iters N           timed iterations per size (default: calibrated to\n"
          "                          --time instead)\n"
          "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
          "  -m, --agg_iters N       calls per timed iteration (default 1)\n"
          "  -a, --average 0|1|2|3   rank times combined as rank 0's, mean, min, max\n"
          "                          (default 3: the slowest rank, what a step waits for)\n"
          "  -c, --check N           checked calls per size and variant (default 1; 0: no\n"
          "                          check, #wrong N/A)\n"
          "  -J, --output_file FILE  also write the results as JSON to FILE (cohort-perf's\n"
          "                          document, as --json prints it)\n"
          "  -N, --run_cycles N      run the whole sweep N times (default 1)\n"
          "  -T, --timeout S         a call that takes longer fails (sets COHORT_TIMEOUT)\n"
          "  -t, --nthreads 1, -g, --ngpus 1   one rank per process (only 1 is accepted)\n"
          "  -p, -z, -C, -R, -S, -y, -G 0      accepted for compatibility; no effect (CPU\n"
          "                          collectives are blocking; no CUDA graphs)\n"
          "\n"
          "cohort's own:\n"
          "      --np N              fork N ranks on this host (default: ranks from the\n"
          "                          environment, as cohortrun/torchrun/srun/mpirun set it;\n"
          "                          else 1)\n"
          "      --coll OPS          comma list of all_reduce broadcast reduce all_gather\n"
          "                          gather scatter reduce_scatter all_to_all barrier\n"
          "                          sendrecv, or all (default all_reduce; a program named\n"
          "                          all_reduce_perf, broadcast_perf, ... picks its own)\n"
          "      --sizes LIST        explicit comma list of sizes instead of -b/-e/-f/-i; a\n"
          "                          size is the full buffer (nccl-tests): all_gather/gather\n"
          "                          output, reduce_scatter/scatter/all_to_all input\n"
          "      --time SECONDS      time per size and variant without -n (default 0.2)\n"
          "      --max-iters N       cap on calibrated iterations (default 1000000)\n"
          "      --in-place yes|no   also run the in-place variant (default yes)\n"
          "      --percentiles       p50/p99/max columns after nccl-tests' columns\n"
          "      --memory            per-rank memory table at the end\n"
          "      --json              the results as one JSON document on stdout (no table)\n"
          "      --json-out FILE     same as -J\n"
          "      --transport T       sets COHORT_TRANSPORT (auto, shm, tcp)\n"
          "      --algo A            sets COHORT_ALGO_<OP>=A for every selected op, or per op:\n"
          "                          all_reduce=ring,broadcast=tree\n"
          "      --contract off      sets COHORT_CONTRACT=off (benchmark only: no check)\n"
          "      --osu               barrier between iterations, only the op timed (OSU style)\n"
          "      --mem private|shared  the send and receive buffers: aligned_alloc (default) or\n"
          "                          cohort_mem_alloc (a broadcast root's buffer is then copied\n"
          "                          once by each local reader, docs/shm.md)\n"
          "      --bind none|auto|core  with --np: leave the ranks unpinned (none), pin each to a\n"
          "                          core of its own while they fit on the cores (auto: Open\n"
          "                          MPI's default), or always (core); default COHORT_BIND,\n"
          "                          else none\n"
          "      --sched             after each row: every rank's CPU, migrations and context\n"
          "                          switches per call in the timed phase\n"
          "      --prewarm S         8-byte all_reduces for S seconds before the first row\n"
          "                          (default 0.2; 0: none): a fresh pair of processes' first\n"
          "                          tens of ms of cross-core traffic run slower on these VMs\n"
          "      --deadline S        with --np: kill the ranks after S seconds\n"
          "  -l, --label LABEL       free text carried into the output\n"
          "  -h, --help, -V, --version\n"
          "\n"
          "Exit status: 0 ok, 1 a result was wrong, 2 usage, 3 a call failed (docs/tools.md).\n",
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
                 {"fp32", COHORT_FLOAT32},  {"fp64", COHORT_FLOAT64}, {"char", COHORT_INT8},
                 {"uint", COHORT_UINT32}};
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
        if (!strcmp(s, cohort_dtype_name((cohort_dtype)d)) ||
            !strcmp(s, perf_dtype_name((cohort_dtype)d))) {
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

static int is_float(cohort_dtype dt)
{
    return dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16 || dt == COHORT_FLOAT32 ||
           dt == COHORT_FLOAT64;
}

/* Whether redop applies to dt (avg: floating point; bit ops: integers). */
static int redop_fits(cohort_op op, cohort_dtype dt)
{
    if (op == COHORT_AVG)
        return is_float(dt);
    if (op == COHORT_BAND || op == COHORT_BOR || op == COHORT_BXOR)
        return !is_float(dt);
    return 1;
}

/* "-d float,int32" or "-d all"; "-o sum,max" or "-o all" (nccl-tests: every
 * op; here every op that fits the dtype). */
static int parse_list(const char *s, int *set, int nset, int is_dtype)
{
    memset(set, 0, (size_t)nset * sizeof *set);
    char *dup = strdup(s), *save = NULL;
    if (!dup)
        return -1;
    int any = 0;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "all")) {
            for (int i = 0; i < nset; i++)
                set[i] = 1;
            any = 1;
            continue;
        }
        int v;
        if (is_dtype) {
            cohort_dtype dt;
            v = parse_dtype(t, &dt) == 0 ? (int)dt : -1;
        } else {
            cohort_op op;
            v = parse_redop(t, &op) == 0 ? (int)op : -1;
        }
        if (v < 0) {
            fprintf(stderr, "cohort-perf: unknown %s '%s' (see --help)\n",
                    is_dtype ? "datatype" : "reduce op", t);
            free(dup);
            return -1;
        }
        set[v] = 1;
        any = 1;
    }
    free(dup);
    return any ? 0 : -1;
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

#define EXIT_WRONG 1 /* a result was wrong */
#define EXIT_CALL 3  /* init or a call failed */

typedef struct perf_state {
    perf_opts *o;
    cohort_group *g;
    int rank, n;
    size_t esz;
    void *sbuf, *rbuf;
    size_t sbytes, rbytes;
    double *times, *tmax, *sorted;
    int tsc;                 /* back-to-back iterations timed by the TSC (tsc_usable) */
    perf_row *rows;
    int nrows, caprows;
    int failed;
    char *sched_txt[2];      /* --sched: each variant's line, printed after its row */
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
 * carries the same file:line. In place (docs/concepts.md): send == recv. */
static cohort_status do_op(perf_state *s, enum perf_op op, size_t count, int inplace)
{
    const perf_opts *o = s->o;
    cohort_group *g = s->g;
    void *sb = inplace ? s->rbuf : s->sbuf;
    int root = o->cur_root < 0 ? 0 : o->cur_root;
    switch (op) {
    case OP_ALL_REDUCE:
        return cohort_all_reduce(g, sb, s->rbuf, count, o->dtype, o->redop);
    case OP_BROADCAST:
        return cohort_broadcast(g, s->rbuf, count, o->dtype, root);
    case OP_REDUCE:
        return cohort_reduce(g, sb, s->rbuf, count, o->dtype, o->redop, root);
    case OP_ALL_GATHER:
        return cohort_all_gather(g, sb, s->rbuf, count, o->dtype);
    case OP_GATHER:
        return cohort_gather(g, sb, s->rbuf, count, o->dtype, root);
    case OP_SCATTER:
        return cohort_scatter(g, sb, s->rbuf, count, o->dtype, root);
    case OP_REDUCE_SCATTER:
        return cohort_reduce_scatter(g, sb, s->rbuf, count, o->dtype, o->redop);
    case OP_ALL_TO_ALL:
        return cohort_all_to_all(g, sb, s->rbuf, count, o->dtype);
    case OP_BARRIER:
        return cohort_barrier(g);
    case OP_SENDRECV: {
        /* Ping-pong between ranks 2k and 2k+1; an odd rank out idles. */
        int partner = (s->rank % 2 == 0) ? s->rank + 1 : s->rank - 1;
        if (partner >= s->n)
            return COHORT_OK;
        cohort_status st;
        if (s->rank % 2 == 0) {
            st = cohort_send(g, sb, count, o->dtype, partner, 0);
            if (st == COHORT_OK)
                st = cohort_recv(g, s->rbuf, count, o->dtype, partner, 0);
        } else {
            st = cohort_recv(g, s->rbuf, count, o->dtype, partner, 0);
            if (st == COHORT_OK)
                st = cohort_send(g, sb, count, o->dtype, partner, 0);
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
    exit(EXIT_CALL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One timed iteration: -m calls (plus the hidden skew's sleep). */
static cohort_status iteration(perf_state *s, enum perf_op op, size_t count, int inplace, long i)
{
    const perf_opts *o = s->o;
    cohort_status st = COHORT_OK;
    for (long k = 0; k < o->agg && st == COHORT_OK; k++)
        st = do_op(s, op, count, inplace);
    /* Hidden test hook: a rank preempted between its call's end and its
     * clock read, ranks taking turns - the noise under which "slowest rank
     * per iteration" and "per-rank means" part ways. */
    if (o->debug_skew_ms && i % s->n == s->rank) {
        struct timespec d = {o->debug_skew_ms / 1000, (long)(o->debug_skew_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
    return st;
}

/* Back-to-back iterations are timed one by one (the percentiles need
 * each), and a clock_gettime between them costs 30-40 ns on these VMs -
 * a third of an 8-byte call, which the peers' harnesses (mpi_coll_bench,
 * gloo_bench: one clock read a batch) do not pay. Where the kernel keeps
 * time by the TSC (synchronised across cpus, constant rate), a plain
 * rdtsc between iterations (~10 ns) is scaled to seconds by the batch's
 * own clock_gettime span, so the samples still add up to the batch. */
static int tsc_usable(void)
{
#if defined(__x86_64__)
    char cs[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f)
        return 0;
    int ok = fgets(cs, sizeof cs, f) && !strcmp(cs, "tsc\n");
    fclose(f);
    const char *how = getenv("COHORT_PERF_CLOCK"); /* clock_gettime: the A/B's other side */
    return ok && !(how && !strcmp(how, "clock_gettime"));
#else
    return 0;
#endif
}

/* Runs k iterations after a barrier, timed as a whole; returns the max over
 * ranks of the mean seconds per iteration (every rank gets the same value,
 * so all ranks agree on the batch size derived from it). */
static double batch(perf_state *s, enum perf_op op, size_t count, size_t bytes, long k,
                    int inplace)
{
    cohort_status st = cohort_barrier(s->g);
    if (st != COHORT_OK)
        die(s, st, "barrier before", op, bytes);
    double t0 = now_s();
    for (long i = 0; i < k; i++) {
        st = iteration(s, op, count, inplace, i);
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
        return s->o->cur_root < 0 ? 0 : s->o->cur_root;
    if (op == OP_SENDRECV)
        return s->n >= 2 ? 1 : -1;
    return s->n - 1;
}

/* Puts this rank's inputs where the call reads them: in sbuf (out of place)
 * or in rbuf (in place, at the place docs/concepts.md names), and poisons the
 * output so stale data is caught. */
static void prepare(perf_state *s, enum perf_op op, size_t count, size_t send_elems,
                    size_t recv_elems, int inplace)
{
    const perf_opts *o = s->o;
    int root = o->cur_root < 0 ? 0 : o->cur_root;
    size_t es = s->esz, n = (size_t)s->n;
    if (op == OP_BARRIER)
        return;
    if (op == OP_BROADCAST) {
        perf_poison(s->rbuf, recv_elems * es);
        if (s->rank == root)
            perf_fill(s->rbuf, o->dtype, o->redop, root, 0, recv_elems);
        return;
    }
    if (!inplace) {
        perf_fill(s->sbuf, o->dtype, o->redop, s->rank, 0, send_elems);
        perf_poison(s->rbuf, recv_elems * es);
        return;
    }
    switch (op) {
    case OP_ALL_GATHER:
    case OP_GATHER:
        perf_poison(s->rbuf, count * n * es);
        perf_fill((char *)s->rbuf + (size_t)s->rank * count * es, o->dtype, o->redop, s->rank, 0,
                  count);
        break;
    case OP_SCATTER:
        perf_poison(s->rbuf, (s->rank == root ? count * n : count) * es);
        if (s->rank == root)
            perf_fill(s->rbuf, o->dtype, o->redop, s->rank, 0, count * n);
        break;
    default: /* the whole input in rbuf */
        perf_fill(s->rbuf, o->dtype, o->redop, s->rank, 0, send_elems);
        break;
    }
}

/* Verifies one call's output: the number of wrong elements summed over
 * ranks. In place there is no separate input left to check, and a rank's
 * in-place ping-pong echoes its own data (not checked). */
static int64_t verify(perf_state *s, enum perf_op op, size_t count, size_t bytes, int inplace,
                      const char *when)
{
    const perf_opts *o = s->o;
    int root = o->cur_root < 0 ? 0 : o->cur_root;
    int64_t bad = 0;
    char msg[256];
    if (!(inplace && op == OP_SENDRECV)) {
        const void *out = s->rbuf;
        if (inplace && op == OP_SCATTER && s->rank == root)
            out = (const char *)s->rbuf + (size_t)root * count * s->esz;
        bad = (int64_t)perf_verify(op, inplace ? NULL : s->sbuf, out, count, o->dtype, o->redop,
                                   root, s->rank, s->n, msg, sizeof msg);
    }
    if (bad)
        fprintf(stderr,
                "cohort-perf: rank %d: CHECK FAILED %s %s %s size %zu (%s): %lld wrong; first: %s\n",
                s->rank, perf_op_names[op], inplace ? "in-place" : "out-of-place",
                perf_dtype_name(o->dtype), bytes, when, (long long)bad, msg);
    int64_t total = 0;
    cohort_status st = cohort_all_reduce(s->g, &bad, &total, 1, COHORT_INT64, COHORT_SUM);
    if (st != COHORT_OK)
        die(s, st, "check sum all_reduce after", op, bytes);
    return total;
}

static int64_t check_call(perf_state *s, enum perf_op op, size_t count, size_t bytes,
                          size_t send_elems, size_t recv_elems, int inplace)
{
    prepare(s, op, count, send_elems, recv_elems, inplace);
    cohort_status st = do_op(s, op, count, inplace);
    if (st != COHORT_OK)
        die(s, st, "check call", op, bytes);
    if (s->o->debug_corrupt && s->rank == corrupt_rank(s, op) && recv_elems > 0)
        ((unsigned char *)s->rbuf)[0] ^= 0x5a;
    return verify(s, op, count, bytes, inplace, "checked call");
}

/* --sched: where each rank ran during the timed phase just ended (CPU at its
 * start and end, migrations, voluntary/involuntary context switches per
 * call), gathered to rank 0 and kept for the line after the row. Outside
 * the timed loop; it is how a launch's mode (ranks sharing a CPU,
 * migrating, sleeping) is told apart after the fact. */
static void sched_report(perf_state *s, const int64_t before[PERF_SCHED_FIELDS], int inplace,
                         long iters)
{
    int64_t now[PERF_SCHED_FIELDS], mine[5];
    perf_sched_sample(now);
    mine[0] = before[0];
    mine[1] = now[0];
    mine[2] = before[1] >= 0 && now[1] >= 0 ? now[1] - before[1] : -1;
    mine[3] = now[2] - before[2];
    mine[4] = now[3] - before[3];
    int64_t *all = calloc((size_t)s->n * 5, sizeof *all);
    if (!all) {
        fprintf(stderr, "cohort-perf: out of memory\n");
        exit(EXIT_CALL);
    }
    cohort_status st = cohort_gather(s->g, mine, all, 5, COHORT_INT64, 0);
    if (st != COHORT_OK)
        die(s, st, "sched gather", OP_GATHER, sizeof mine);
    if (s->rank == 0) {
        size_t cap = (size_t)s->n * 96 + 64, len = 0;
        char *b = malloc(cap);
        if (!b) {
            fprintf(stderr, "cohort-perf: out of memory\n");
            exit(EXIT_CALL);
        }
        b[0] = 0;
        for (int r = 0; r < s->n && len < cap; r++) {
            const int64_t *v = all + 5 * r;
            int k = snprintf(b + len, cap - len, "%s r%d cpu %" PRId64 ">%" PRId64 " mig %" PRId64
                             " vcsw %.3f ivcsw %.3f", r ? " |" : "", r, v[0], v[1], v[2],
                             (double)v[3] / (double)iters, (double)v[4] / (double)iters);
            if (k < 0)
                break;
            len += (size_t)k;
        }
        free(s->sched_txt[inplace]);
        s->sched_txt[inplace] = b;
    }
    free(all);
}

static void run_variant(perf_state *s, perf_row *row, int inplace)
{
    const perf_opts *o = s->o;
    enum perf_op op = row->op;
    size_t count, send_elems, recv_elems, bytes;
    shape(s, op, row->bytes, &count, &send_elems, &recv_elems, &bytes);
    perf_res *res = &row->r[inplace];
    memset(res, 0, sizeof *res);
    res->ran = 1;

    /* An in-place ping-pong echoes a rank's own data back: nothing to check. */
    int checkable = o->check > 0 && op != OP_BARRIER && !(inplace && op == OP_SENDRECV);
    int64_t bad = 0;
    for (long c = 0; checkable && c < o->check; c++)
        bad += check_call(s, op, count, bytes, send_elems, recv_elems, inplace);
    /* Inputs for the timed calls (also touches every page before timing). */
    prepare(s, op, count, send_elems, recv_elems, inplace);

    cohort_status st;
    for (long i = 0; i < o->warmup; i++)
        if ((st = do_op(s, op, count, inplace)) != COHORT_OK)
            die(s, st, "warm-up", op, bytes);

    /* Calibration: the batch grows x4 from 4 (so that one preempted
     * iteration does not decide alone) until it takes at least t/10. */
    long k = o->iters;
    if (!k) {
        k = 4;
        while (k < o->max_iters &&
               batch(s, op, count, bytes, k, inplace) * (double)k < o->target_s / 10)
            k *= 4;
        if (k > o->max_iters)
            k = o->max_iters;
    }

    /* The timed phase: batches of k iterations, each iteration timed on its
     * own, until the slowest rank has spent --time in them (every rank takes
     * the same decision from a max all_reduce between batches). */
    if ((st = cohort_barrier(s->g)) != COHORT_OK)
        die(s, st, "barrier before", op, bytes);
    int64_t sch0[PERF_SCHED_FIELDS];
    if (o->sched)
        perf_sched_sample(sch0);
    double *t = s->times, spent = 0;
    long iters = 0;
    for (;;) {
        long m = k < o->max_iters - iters ? k : o->max_iters - iters;
        double b0 = now_s();
        if (!o->osu && s->tsc) {
#if defined(__x86_64__)
            uint64_t first = __rdtsc(), c0 = first;
            for (long i = iters; i < iters + m; i++) {
                if ((st = iteration(s, op, count, inplace, i)) != COHORT_OK)
                    die(s, st, "timed", op, bytes);
                uint64_t c1 = __rdtsc();
                t[i] = (double)(c1 - c0);
                c0 = c1;
            }
            double span = now_s() - b0, per = c0 > first ? span / (double)(c0 - first) : 0;
            for (long i = iters; i < iters + m; i++)
                t[i] *= per;
#endif
        } else if (!o->osu) {
            double c0 = b0;
            for (long i = iters; i < iters + m; i++) {
                if ((st = iteration(s, op, count, inplace, i)) != COHORT_OK)
                    die(s, st, "timed", op, bytes);
                double c1 = now_s();
                t[i] = c1 - c0;
                c0 = c1;
            }
        } else {
            for (long i = iters; i < iters + m; i++) {
                double c0 = now_s();
                if ((st = iteration(s, op, count, inplace, i)) != COHORT_OK)
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
    if (o->sched)
        sched_report(s, sch0, inplace, iters);
    /* Seconds per iteration -> us per call; a ping-pong is one-way. */
    double scale = (op == OP_SENDRECV ? 0.5e6 : 1e6) / (double)o->agg;
    for (long i = 0; i < iters; i++)
        t[i] *= scale;

    /* This rank's own statistics, then their -a combination over ranks. */
    double mine[5], sum = 0;
    for (long i = 0; i < iters; i++)
        sum += t[i];
    memcpy(s->sorted, t, (size_t)iters * sizeof(double));
    qsort(s->sorted, (size_t)iters, sizeof(double), perf_cmp_double);
    /* A mean lies within [min, max]; the rounded sum / iters can land an
     * ulp outside when the samples are (nearly) equal. */
    double mean = sum / (double)iters;
    mine[0] = mean < s->sorted[0]           ? s->sorted[0]
              : mean > s->sorted[iters - 1] ? s->sorted[iters - 1]
                                            : mean;
    mine[1] = perf_pct(s->sorted, iters, 50);
    mine[2] = perf_pct(s->sorted, iters, 99);
    mine[3] = s->sorted[iters - 1];
    mine[4] = s->sorted[0];
    double comb[5];
    if (o->average == 0) {
        /* rank 0's own numbers, as every rank will print/agree on them */
        memcpy(comb, mine, sizeof comb);
        if ((st = cohort_broadcast(s->g, comb, 5, COHORT_FLOAT64, 0)) != COHORT_OK)
            die(s, st, "stats broadcast after", op, bytes);
    } else {
        cohort_op how = o->average == 1 ? COHORT_SUM : o->average == 2 ? COHORT_MIN : COHORT_MAX;
        if ((st = cohort_all_reduce(s->g, mine, comb, 5, COHORT_FLOAT64, how)) != COHORT_OK)
            die(s, st, "stats all_reduce after", op, bytes);
        if (o->average == 1)
            for (int j = 0; j < 5; j++)
                comb[j] /= s->n;
    }
    /* The synchronous-step view (JSON): per iteration, the slowest rank. */
    if ((st = cohort_all_reduce(s->g, t, s->tmax, (size_t)iters, COHORT_FLOAT64, COHORT_MAX)) !=
        COHORT_OK)
        die(s, st, "per-iteration max all_reduce after", op, bytes);
    qsort(s->tmax, (size_t)iters, sizeof(double), perf_cmp_double);

    /* The timed loop's last output must be right too (pipelined ops reuse
     * buffers while earlier iterations may still drain). In place each
     * timed call consumed the previous one's output: only the checked calls
     * count there. */
    if (checkable && !inplace)
        bad += verify(s, op, count, bytes, inplace, "after timing");

    res->iters = iters;
    res->avg_us = comb[0];
    res->p50_us = comb[1];
    res->p99_us = comb[2];
    res->max_us = comb[3];
    res->min_us = comb[4];
    res->step_p50_us = perf_pct(s->tmax, iters, 50);
    res->step_p99_us = perf_pct(s->tmax, iters, 99);
    res->step_max_us = s->tmax[iters - 1];
    res->algbw = res->avg_us > 0 ? (double)bytes / (res->avg_us * 1e-6) / 1e9 : 0;
    res->busbw = res->algbw * perf_busfactor(op, s->n);
    res->wrong = checkable ? bad : -1;
    if (bad)
        s->failed = 1;
}

static void run_row(perf_state *s, enum perf_op op, size_t req_bytes)
{
    perf_opts *o = s->o;
    if (s->nrows == s->caprows) {
        int cap = s->caprows ? 2 * s->caprows : 64;
        perf_row *nr = realloc(s->rows, (size_t)cap * sizeof *nr);
        if (!nr) {
            fprintf(stderr, "cohort-perf: out of memory\n");
            exit(EXIT_CALL);
        }
        s->rows = nr;
        s->caprows = cap;
    }
    perf_row *row = &s->rows[s->nrows++];
    memset(row, 0, sizeof *row);
    size_t count, se, re, bytes;
    shape(s, op, req_bytes, &count, &se, &re, &bytes);
    row->op = op;
    row->bytes = bytes;
    row->count = count;
    row->dtype = o->dtype;
    row->redop = o->redop;
    row->root = perf_op_has_root(op) ? o->cur_root : -1;
    run_variant(s, row, 0);
    if (o->in_place)
        run_variant(s, row, 1);
    if (s->rank == 0 && !o->json) {
        perf_print_row(stdout, o, row);
        for (int v = 0; v < 2 && o->sched; v++)
            if (s->sched_txt[v] && (v == 0 || o->in_place))
                printf("# sched: %s %zu B %s:%s\n", perf_op_names[op], bytes,
                       v ? "in-place" : "out-of-place", s->sched_txt[v]);
    }
}

static void *xalloc(size_t bytes)
{
    /* Page-aligned like the peers' buffers, so alignment is not a variable. */
    size_t b = (bytes + 4095) / 4096 * 4096;
    void *p = aligned_alloc(4096, b ? b : 4096);
    if (!p) {
        fprintf(stderr, "cohort-perf: cannot allocate %zu bytes\n", bytes);
        exit(EXIT_CALL);
    }
    return p;
}

/* "# cohort: broadcast from 65536 B: algorithm shm; transport ...; copy: ..."
 * whenever what the library runs changes along the sweep (rank 0, text
 * output): a comparison then records what decided cohort's speed. Asked
 * again after a row's calls ("after 65536 B's calls"): a verdict agreed
 * inside calls (the ring's, the lead's timed one) can move a size's path
 * while its row runs, and the line before the row shows only the last. */
#define DESC_BYTES 4096 /* one size for both: a shorter copy never compares equal */
static void describe(perf_state *s, enum perf_op op, size_t bytes, int after)
{
    static char last[OP_COUNT][DESC_BYTES];
    if (s->rank != 0 || s->o->json)
        return;
    size_t es = s->esz ? s->esz : 1, n = (size_t)s->n;
    int per_rank = op == OP_ALL_GATHER || op == OP_GATHER || op == OP_SCATTER ||
                   op == OP_REDUCE_SCATTER || op == OP_ALL_TO_ALL;
    size_t count = per_rank ? bytes / n / es : bytes / es;
    if (op != OP_BARRIER && count < 1)
        count = 1;
    char d[DESC_BYTES];
    /* sendrecv: the path of rank 0's send to rank 1 (the pairs are alike) */
    const char *dop = op == OP_SENDRECV ? "send" : perf_op_names[op];
    if (cohort_describe(s->g, dop, count, s->o->dtype, d, sizeof d) != COHORT_OK)
        snprintf(d, sizeof d, "(cohort_describe failed)");
    if (!strcmp(d, last[op]))
        return;
    snprintf(last[op], sizeof last[op], "%s", d);
    if (after)
        printf("# cohort: %s after %zu B's calls: %s\n", perf_op_names[op], bytes, d);
    else
        printf("# cohort: %s from %zu B: %s\n", perf_op_names[op], bytes, d);
}

/* Every (dtype, reduce op, root) combination of op, in nccl-tests' order. */
static void sweep_op(perf_state *s, enum perf_op op)
{
    perf_opts *o = s->o;
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++) {
        if (!o->dtypes[d])
            continue;
        o->dtype = (cohort_dtype)d;
        s->esz = cohort_dtype_size(o->dtype);
        for (int r = 0; r < COHORT_OP_COUNT; r++) {
            if (!o->redops[r])
                continue;
            if (perf_op_has_redop(op) && !redop_fits((cohort_op)r, o->dtype))
                continue;
            o->redop = (cohort_op)r;
            int r0 = o->root < 0 ? 0 : o->root, r1 = o->root < 0 ? s->n - 1 : o->root;
            if (!perf_op_has_root(op))
                r1 = r0;
            for (int root = r0; root <= r1; root++) {
                o->cur_root = root;
                if (op == OP_BARRIER) {
                    describe(s, op, 0, 0);
                    run_row(s, op, 0);
                } else {
                    for (int i = 0; i < o->nsizes; i++) {
                        describe(s, op, o->sizes[i], 0);
                        run_row(s, op, o->sizes[i]);
                        describe(s, op, o->sizes[i], 1);
                    }
                }
                if (!perf_op_has_root(op))
                    break;
            }
            if (!perf_op_has_redop(op))
                break; /* the op ignores it: one pass */
        }
        if (op == OP_BARRIER)
            break; /* no payload: one row */
    }
}

/* --prewarm: 8-byte all_reduces until the slowest rank has spent S seconds
 * in them (batches of 256, each followed by a max all_reduce, so every rank
 * stops after the same batch). On these VMs a fresh pair of processes'
 * first tens of ms of cross-core traffic run slower - a bare two-process
 * ping-pong's first 100,000 round trips 10-48 % slower than the rest in 10
 * of 11 runs (docs/performance.md, cohort-perf's `--prewarm`) - and the
 * first row would time that instead of the library; MPI's start-up
 * traffic pays it before a peer harness's first row. */
static void prewarm(perf_state *s)
{
    double lim = s->o->prewarm_s, t0 = now_s(), most = 0;
    float a[2] = {1, 2}, b[2];
    cohort_status st;
    while (lim > 0 && most < lim) {
        for (int i = 0; i < 256; i++)
            if ((st = cohort_all_reduce(s->g, a, b, 2, COHORT_FLOAT32, COHORT_SUM)) != COHORT_OK)
                die(s, st, "prewarm", OP_ALL_REDUCE, sizeof a);
        double spent = now_s() - t0;
        if ((st = cohort_all_reduce(s->g, &spent, &most, 1, COHORT_FLOAT64, COHORT_MAX)) !=
            COHORT_OK)
            die(s, st, "prewarm max all_reduce", OP_ALL_REDUCE, 8);
    }
}

static int rank_main(const perf_opts *co)
{
    perf_state *s = calloc(1, sizeof *s);
    perf_opts *o = malloc(sizeof *o);
    if (!s || !o) {
        fprintf(stderr, "cohort-perf: out of memory\n");
        return EXIT_CALL;
    }
    *o = *co;
    s->o = o;
    perf_mem mem;
    memset(&mem, 0, sizeof mem);
    uint64_t hwm, shmem;
    perf_mem_status(&mem.rss_start, &hwm, &shmem);

    cohort_status st = cohort_init(&s->g);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-perf: cohort_init: %s: %s\n", cohort_status_name(st),
                cohort_last_error(NULL));
        return EXIT_CALL;
    }
    s->rank = cohort_rank(s->g);
    s->n = cohort_size(s->g);
    if (o->root >= s->n) {
        if (s->rank == 0)
            fprintf(stderr, "cohort-perf: -r %d is not a rank of a %d-rank group\n", o->root,
                    s->n);
        cohort_finalize(s->g);
        return CLI_EXIT_USAGE;
    }
    /* One tiny collective so that connections and segments exist before
     * the library's memory is read. */
    float one = 1, sum = 0;
    if ((st = cohort_all_reduce(s->g, &one, &sum, 1, COHORT_FLOAT32, COHORT_SUM)) != COHORT_OK)
        die(s, st, "first", OP_ALL_REDUCE, 4);
    perf_mem_status(&mem.rss_init, &hwm, &shmem);

    /* Where every rank runs, for the header's "# Using devices" lines. */
    perf_where me, *where = calloc((size_t)s->n, sizeof *where);
    if (!where) {
        fprintf(stderr, "cohort-perf: out of memory\n");
        exit(EXIT_CALL);
    }
    memset(&me, 0, sizeof me);
    me.pid = (int32_t)getpid();
    gethostname(me.host, sizeof me.host - 1);
    cli_bind_describe(me.cpus, sizeof me.cpus);
    if ((st = cohort_gather(s->g, &me, where, sizeof me, COHORT_UINT8, 0)) != COHORT_OK)
        die(s, st, "host gather", OP_GATHER, sizeof me);

    /* Buffers for the largest shape of any selected op and dtype; in place
     * the output buffer also holds the input. */
    for (int op = 0; op < OP_COUNT; op++) {
        if (!o->ops[op])
            continue;
        for (int d = 0; d < COHORT_DTYPE_COUNT; d++) {
            if (!o->dtypes[d])
                continue;
            s->esz = cohort_dtype_size((cohort_dtype)d);
            for (int i = 0; i < o->nsizes; i++) {
                size_t c, se, re, fb;
                shape(s, (enum perf_op)op, o->sizes[i], &c, &se, &re, &fb);
                if (se * s->esz > s->sbytes)
                    s->sbytes = se * s->esz;
                if (re * s->esz > s->rbytes)
                    s->rbytes = re * s->esz;
                if (se * s->esz > s->rbytes)
                    s->rbytes = se * s->esz;
            }
        }
    }
    if (o->mem_shared) {
        /* the library's shared buffers, so broadcast roots take the
         * one-copy path (docs/shm.md "Shared user buffers") */
        if (cohort_mem_alloc(s->g, s->sbytes ? s->sbytes : 1, &s->sbuf) != COHORT_OK ||
            cohort_mem_alloc(s->g, s->rbytes ? s->rbytes : 1, &s->rbuf) != COHORT_OK) {
            fprintf(stderr, "cohort-perf: rank %d: cohort_mem_alloc: %s\n", s->rank,
                    cohort_last_error(s->g));
            exit(EXIT_CALL);
        }
    } else {
        s->sbuf = xalloc(s->sbytes);
        s->rbuf = xalloc(s->rbytes);
    }
    if (s->rank == 0 && !o->json && o->mem_shared)
        printf("# cohort: buffers from cohort_mem_alloc (--mem shared)\n");
    long cap = o->iters ? o->iters : o->max_iters;
    if (cap < 5)
        cap = 5;
    s->times = xalloc((size_t)cap * sizeof(double));
    s->tsc = tsc_usable();
    s->tmax = xalloc((size_t)cap * sizeof(double));
    s->sorted = xalloc((size_t)cap * sizeof(double));

    if (s->rank == 0 && !o->json)
        perf_print_header(stdout, o, s->n, where);
    prewarm(s);
    /* -N: the whole sweep again, as nccl-tests' run cycles. */
    for (long cycle = 0; cycle < o->cycles; cycle++)
        for (int op = 0; op < OP_COUNT; op++) {
            if (!o->ops[op])
                continue;
            if (op == OP_SENDRECV && s->n < 2) {
                if (s->rank == 0 && cycle == 0)
                    fprintf(stderr, "cohort-perf: sendrecv needs at least 2 ranks; skipped\n");
                continue;
            }
            if (s->rank == 0 && !o->json)
                perf_print_table_head(stdout, o, (enum perf_op)op);
            sweep_op(s, (enum perf_op)op);
        }

    /* Memory at the end, gathered to rank 0. */
    perf_mem_status(&mem.rss_end, &mem.hwm, &mem.shmem);
    perf_mem_segments(&mem.seg_size, &mem.seg_rss, &mem.seg_pss);
    perf_mem *all = calloc((size_t)s->n, sizeof *all);
    if (!all) {
        fprintf(stderr, "cohort-perf: out of memory\n");
        exit(EXIT_CALL);
    }
    st = cohort_gather(s->g, &mem, all, PERF_MEM_FIELDS, COHORT_UINT64, 0);
    if (st != COHORT_OK)
        die(s, st, "memory report", OP_GATHER, sizeof mem);
    int64_t failed = s->failed, anyfail = 0;
    st = cohort_all_reduce(s->g, &failed, &anyfail, 1, COHORT_INT64, COHORT_MAX);
    if (st != COHORT_OK)
        die(s, st, "final", OP_ALL_REDUCE, 8);
    int rc = anyfail ? EXIT_WRONG : 0;
    if (s->rank == 0) {
        if (!o->json) {
            perf_print_footer(stdout, o, s->rows, s->nrows);
            if (o->memory)
                perf_print_mem(stdout, all, s->n);
        } else {
            perf_write_json(stdout, o, s->n, s->rows, s->nrows, all, (int)anyfail);
        }
        if (o->json_out) {
            FILE *f = fopen(o->json_out, "w");
            if (!f) {
                fprintf(stderr, "cohort-perf: cannot write %s\n", o->json_out);
                rc = rc ? rc : EXIT_CALL;
            } else {
                perf_write_json(f, o, s->n, s->rows, s->nrows, all, (int)anyfail);
                fclose(f);
            }
        }
    }
    st = cohort_finalize(s->g);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-perf: rank %d: cohort_finalize: %s\n", s->rank,
                cohort_status_name(st));
        rc = rc ? rc : EXIT_CALL;
    }
    free(all);
    free(where);
    if (!o->mem_shared) { /* else cohort_finalize freed them */
        free(s->sbuf);
        free(s->rbuf);
    }
    free(s->times);
    free(s->tmax);
    free(s->sorted);
    free(s->rows);
    free(s->sched_txt[0]);
    free(s->sched_txt[1]);
    free(s);
    free(o);
    return rc;
}

/* ---- main ---- */

enum {
    OPT_SIZES = 256,
    OPT_NP,
    OPT_COLL,
    OPT_JSON,
    OPT_JSON_OUT,
    OPT_TIME,
    OPT_MAX_ITERS,
    OPT_IN_PLACE,
    OPT_PERCENTILES,
    OPT_MEMORY,
    OPT_TRANSPORT,
    OPT_ALGO,
    OPT_CONTRACT,
    OPT_OSU,
    OPT_MEM,
    OPT_BIND,
    OPT_SCHED,
    OPT_PREWARM,
    OPT_DEADLINE,
    OPT_DEBUG_CORRUPT,
    OPT_DEBUG_SKEW,
};

/* nccl-tests' binaries are named <collective>_perf: a link with that name
 * (all_reduce_perf -> cohort-perf) runs that collective. */
static void ops_from_name(const char *argv0, perf_opts *o)
{
    const char *b = strrchr(argv0, '/');
    b = b ? b + 1 : argv0;
    size_t l = strlen(b);
    if (l <= 5 || strcmp(b + l - 5, "_perf"))
        return;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(l - 5), b);
    int op = find_op(name);
    if (op >= 0) {
        memset(o->ops, 0, sizeof o->ops);
        o->ops[op] = 1;
    }
}

static int bad_value(const char *opt, const char *v, const char *want)
{
    fprintf(stderr, "cohort-perf: %s: '%s' is not %s\n", opt, v, want);
    fprintf(stderr, "Try 'cohort-perf --help'.\n");
    return CLI_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    static perf_opts o;
    memset(&o, 0, sizeof o);
    o.ops[OP_ALL_REDUCE] = 1;
    ops_from_name(argv[0], &o);
    o.minbytes = 16;
    o.maxbytes = 64u << 20;
    o.factor = 4;
    o.dtypes[COHORT_FLOAT32] = 1;
    o.redops[COHORT_SUM] = 1;
    o.check = 1;
    o.average = 3;
    o.agg = 1;
    o.cycles = 1;
    o.in_place = 1;
    o.warmup = 5;
    o.max_iters = 1000000;
    o.target_s = 0.2;
    o.prewarm_s = 0.2;
    o.bind = -2; /* not given: COHORT_BIND, after the options */

    static const struct option lo[] = {
        /* nccl-tests */
        {"nthreads", required_argument, 0, 't'},
        {"ngpus", required_argument, 0, 'g'},
        {"minbytes", required_argument, 0, 'b'},
        {"maxbytes", required_argument, 0, 'e'},
        {"stepbytes", required_argument, 0, 'i'},
        {"stepfactor", required_argument, 0, 'f'},
        {"iters", required_argument, 0, 'n'},
        {"agg_iters", required_argument, 0, 'm'},
        {"warmup_iters", required_argument, 0, 'w'},
        {"parallel_init", required_argument, 0, 'p'},
        {"check", required_argument, 0, 'c'},
        {"op", required_argument, 0, 'o'},
        {"datatype", required_argument, 0, 'd'},
        {"root", required_argument, 0, 'r'},
        {"blocking", required_argument, 0, 'z'},
        {"stream_null", required_argument, 0, 'y'},
        {"timeout", required_argument, 0, 'T'},
        {"cudagraph", required_argument, 0, 'G'},
        {"report_cputime", required_argument, 0, 'C'},
        {"report_timestamps", required_argument, 0, 'S'},
        {"output_file", required_argument, 0, 'J'},
        {"average", required_argument, 0, 'a'},
        {"local_register", required_argument, 0, 'R'},
        {"run_cycles", required_argument, 0, 'N'},
        /* cohort's own */
        {"np", required_argument, 0, OPT_NP},
        {"nranks", required_argument, 0, OPT_NP},
        {"coll", required_argument, 0, OPT_COLL},
        {"sizes", required_argument, 0, OPT_SIZES},
        {"warmup", required_argument, 0, 'w'},
        {"time", required_argument, 0, OPT_TIME},
        {"max-iters", required_argument, 0, OPT_MAX_ITERS},
        {"in-place", required_argument, 0, OPT_IN_PLACE},
        {"percentiles", no_argument, 0, OPT_PERCENTILES},
        {"memory", no_argument, 0, OPT_MEMORY},
        {"json", no_argument, 0, OPT_JSON},
        {"json-out", required_argument, 0, OPT_JSON_OUT},
        {"transport", required_argument, 0, OPT_TRANSPORT},
        {"algo", required_argument, 0, OPT_ALGO},
        {"contract", required_argument, 0, OPT_CONTRACT},
        {"osu", no_argument, 0, OPT_OSU},
        {"mem", required_argument, 0, OPT_MEM},
        {"bind", required_argument, 0, OPT_BIND},
        {"sched", no_argument, 0, OPT_SCHED},
        {"prewarm", required_argument, 0, OPT_PREWARM},
        {"deadline", required_argument, 0, OPT_DEADLINE},
        {"label", required_argument, 0, 'l'},
        {"debug-corrupt", no_argument, 0, OPT_DEBUG_CORRUPT}, /* hidden: tests -c */
        {"debug-skew", required_argument, 0, OPT_DEBUG_SKEW}, /* hidden: tests -a */
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    int c, sizes_given = 0, step_given = 0, factor_given = 0;
    long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:G:C:S:J:a:R:N:l:hV", lo,
                            NULL)) != -1) {
        switch (c) {
        case 't':
        case 'g':
            if (strcmp(optarg, "1"))
                return bad_value(c == 't' ? "-t/--nthreads" : "-g/--ngpus", optarg,
                                 "1 (cohort runs one rank per process; fork ranks with --np N or "
                                 "start them with cohortrun/srun/mpirun)");
            break;
        case 'p':
        case 'z':
        case 'y':
        case 'C':
        case 'R':
            if (strcmp(optarg, "0") && strcmp(optarg, "1"))
                return bad_value("option", optarg, "0 or 1");
            break;
        case 'G':
        case 'S':
            if (strcmp(optarg, "0"))
                return bad_value(c == 'G' ? "-G/--cudagraph" : "-S/--report_timestamps", optarg,
                                 "0 (not supported by cohort-perf)");
            break;
        case OPT_NP:
            if (parse_long(optarg, 1, &v) != 0 || v > 4096)
                return bad_value("--np", optarg, "a rank count in 1..4096");
            o.nranks = (int)v;
            break;
        case OPT_COLL:
            if (parse_ops(optarg, &o) != 0)
                return CLI_EXIT_USAGE;
            break;
        case 'b':
        case 'e':
        case 'i':
            if (perf_parse_size(optarg, c == 'b' ? &o.minbytes
                                        : c == 'e' ? &o.maxbytes
                                                   : &o.stepbytes) != 0)
                return bad_value(c == 'b' ? "-b" : c == 'e' ? "-e" : "-i", optarg, "a size");
            if (c == 'i') {
                if (!o.stepbytes)
                    return bad_value("-i", optarg, "a size > 0");
                step_given = 1;
            }
            break;
        case 'f': {
            char *end;
            o.factor = strtod(optarg, &end);
            if (end == optarg || *end || o.factor <= 1.0)
                return bad_value("-f", optarg, "a factor > 1");
            factor_given = 1;
            break;
        }
        case OPT_SIZES:
            if (parse_sizes(optarg, &o) != 0)
                return CLI_EXIT_USAGE;
            sizes_given = 1;
            break;
        case 'd':
            if (parse_list(optarg, o.dtypes, COHORT_DTYPE_COUNT, 1) != 0)
                return CLI_EXIT_USAGE;
            break;
        case 'o':
            if (parse_list(optarg, o.redops, COHORT_OP_COUNT, 0) != 0)
                return CLI_EXIT_USAGE;
            break;
        case 'r':
            if (!strcmp(optarg, "all") || !strcmp(optarg, "-1"))
                o.root = -1;
            else if (parse_long(optarg, 0, &v) != 0 || v > 1 << 20)
                return bad_value("-r", optarg, "a rank or all");
            else
                o.root = (int)v;
            break;
        case 'c':
            if (parse_long(optarg, 0, &v) != 0 || v > 1000000)
                return bad_value("-c", optarg, "a count of checked calls (0: none)");
            o.check = v;
            break;
        case 'a':
            if (parse_long(optarg, 0, &v) != 0 || v > 3)
                return bad_value("-a", optarg, "0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
            o.average = (int)v;
            break;
        case 'N':
            if (parse_long(optarg, 0, &v) != 0 || v > 1000000)
                return bad_value("-N", optarg, "a count of cycles");
            if (v == 0)
                return bad_value("-N", optarg,
                                 "a count >= 1 (nccl-tests' 0, forever, is not supported)");
            o.cycles = v;
            break;
        case 'm':
        case 'n':
        case 'w':
        case OPT_MAX_ITERS:
            if (parse_long(optarg, c == 'w' ? 0 : 1, &v) != 0 || v > 100000000)
                return bad_value(c == 'm' ? "-m" : c == 'n' ? "-n" : c == 'w' ? "-w" : "--max-iters",
                                 optarg, "a count");
            if (c == 'm')
                o.agg = v;
            else if (c == 'n')
                o.iters = v;
            else if (c == 'w')
                o.warmup = v;
            else
                o.max_iters = v;
            break;
        case 'T': {
            char *end;
            double t = strtod(optarg, &end);
            if (end == optarg || *end || t < 0 || t > 1e7)
                return bad_value("-T", optarg, "seconds");
            if (t > 0) /* nccl-tests: 0 = no timeout; cohort's default then applies */
                setenv("COHORT_TIMEOUT", optarg, 1);
            break;
        }
        case 'J':
        case OPT_JSON_OUT:
            o.json_out = optarg;
            break;
        case OPT_JSON:
            o.json = 1;
            break;
        case OPT_TIME: {
            char *end;
            o.target_s = strtod(optarg, &end);
            if (end == optarg || *end || o.target_s <= 0 || o.target_s > 3600)
                return bad_value("--time", optarg, "seconds > 0");
            break;
        }
        case OPT_IN_PLACE:
            if (strcmp(optarg, "yes") && strcmp(optarg, "no"))
                return bad_value("--in-place", optarg, "yes or no");
            o.in_place = !strcmp(optarg, "yes");
            break;
        case OPT_PERCENTILES:
            o.percentiles = 1;
            break;
        case OPT_MEMORY:
            o.memory = 1;
            break;
        case OPT_TRANSPORT:
            if (strcmp(optarg, "auto") && strcmp(optarg, "shm") && strcmp(optarg, "tcp"))
                return bad_value("--transport", optarg, "auto, shm or tcp");
            o.transport = optarg;
            break;
        case OPT_ALGO:
            o.algo = optarg;
            break;
        case OPT_CONTRACT:
            if (strcmp(optarg, "on") && strcmp(optarg, "off"))
                return bad_value("--contract", optarg, "on or off");
            o.contract_off = !strcmp(optarg, "off");
            break;
        case OPT_OSU:
            o.osu = 1;
            break;
        case OPT_MEM:
            if (strcmp(optarg, "private") && strcmp(optarg, "shared"))
                return bad_value("--mem", optarg, "private or shared");
            o.mem_shared = !strcmp(optarg, "shared");
            break;
        case OPT_BIND:
            if ((o.bind = cli_bind_parse(optarg)) < 0)
                return bad_value("--bind", optarg, "none, auto or core");
            o.bind_from = "--bind";
            break;
        case OPT_PREWARM: {
            char *end;
            o.prewarm_s = strtod(optarg, &end);
            if (end == optarg || *end || !(o.prewarm_s >= 0 && o.prewarm_s <= 60))
                return bad_value("--prewarm", optarg, "seconds between 0 and 60");
            break;
        }
        case OPT_SCHED:
            o.sched = 1;
            break;
        case OPT_DEADLINE: {
            char *end;
            o.deadline_s = strtod(optarg, &end);
            if (end == optarg || *end || o.deadline_s <= 0)
                return bad_value("--deadline", optarg, "seconds > 0");
            break;
        }
        case OPT_DEBUG_CORRUPT:
            o.debug_corrupt = 1;
            break;
        case OPT_DEBUG_SKEW:
            if (parse_long(optarg, 0, &v) != 0 || v > 10000)
                return bad_value("--debug-skew", optarg, "milliseconds");
            o.debug_skew_ms = (int)v;
            break;
        case 'l':
            o.label = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            cli_version("cohort-perf");
            return 0;
        default:
            return cli_opt_error("cohort-perf", c, argv, lo);
        }
    }
    if (o.bind == -2) {
        if ((o.bind = cli_bind_from_env("cohort-perf")) < 0)
            return CLI_EXIT_USAGE;
        o.bind_from = cli_env("COHORT_BIND") ? "COHORT_BIND" : "default";
    }
    if (optind < argc) {
        fprintf(stderr, "cohort-perf: unexpected argument '%s'\n", argv[optind]);
        fprintf(stderr, "Try 'cohort-perf --help'.\n");
        return CLI_EXIT_USAGE;
    }
    if (!sizes_given) {
        if (o.minbytes > o.maxbytes) {
            fprintf(stderr, "cohort-perf: -b %zu is larger than -e %zu\n", o.minbytes, o.maxbytes);
            return CLI_EXIT_USAGE;
        }
        if (step_given && factor_given) {
            fprintf(stderr, "cohort-perf: give -f (factor) or -i (increment), not both\n");
            return CLI_EXIT_USAGE;
        }
        /* nccl-tests progression: MIN, MIN*F (or MIN+I), ... while <= MAX. */
        for (double sz = (double)o.minbytes; sz <= (double)o.maxbytes;
             sz = step_given ? sz + (double)o.stepbytes : sz * o.factor) {
            if (o.nsizes >= PERF_MAX_SIZES) {
                fprintf(stderr, "cohort-perf: more than %d sizes; raise -f or -i\n",
                        PERF_MAX_SIZES);
                return CLI_EXIT_USAGE;
            }
            o.sizes[o.nsizes++] = (size_t)sz;
            if (sz == 0)
                break;
        }
    }
    /* Reductions need at least one (dtype, op) pair that fits. */
    int fits = 0;
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
        for (int r = 0; r < COHORT_OP_COUNT; r++)
            fits |= o.dtypes[d] && o.redops[r] && redop_fits((cohort_op)r, (cohort_dtype)d);
    int reducing = o.ops[OP_ALL_REDUCE] || o.ops[OP_REDUCE] || o.ops[OP_REDUCE_SCATTER];
    if (reducing && !fits) {
        fprintf(stderr, "cohort-perf: no reduce op given with -o fits a datatype given with -d "
                        "(avg needs floating point, band/bor/bxor integers)\n");
        return CLI_EXIT_USAGE;
    }
    if (o.iters && o.iters > o.max_iters)
        o.max_iters = o.iters;
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
        if (o.dtypes[d]) {
            o.dtype = (cohort_dtype)d;
            break;
        }
    for (int r = 0; r < COHORT_OP_COUNT; r++)
        if (o.redops[r] && redop_fits((cohort_op)r, o.dtype)) {
            o.redop = (cohort_op)r;
            break;
        }

    /* Settings the library reads at cohort_init: set them here so forked
     * ranks inherit them. */
    if (o.transport)
        setenv("COHORT_TRANSPORT", o.transport, 1);
    if (o.contract_off)
        setenv("COHORT_CONTRACT", "off", 1);
    if (apply_algo(&o) != 0)
        return CLI_EXIT_USAGE;

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

/*
 * perf.h - cohort-perf internals: options, the fork launcher, deterministic
 * inputs and their checks, statistics, memory probes and output.
 *
 * cohort-perf is a client of the public API only (include/cohort.h); it
 * never looks inside the library, so what it measures is what a user gets.
 */
#ifndef COHORT_PERF_H
#define COHORT_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cohort.h"

/* The operations cohort-perf can sweep (its own numbering, not coh_coll). */
enum perf_op {
    OP_ALL_REDUCE = 0,
    OP_BROADCAST,
    OP_REDUCE,
    OP_ALL_GATHER,
    OP_GATHER,
    OP_SCATTER,
    OP_REDUCE_SCATTER,
    OP_ALL_TO_ALL,
    OP_BARRIER,
    OP_SENDRECV,
    OP_COUNT
};

extern const char *const perf_op_names[OP_COUNT];

#define PERF_MAX_SIZES 64

typedef struct perf_opts {
    int nranks;              /* --np: fork this many ranks (0: ranks come from the environment) */
    int ops[OP_COUNT];       /* --coll (or the program's name, all_reduce_perf): 1 = sweep */
    size_t minbytes, maxbytes;
    double factor;           /* -f: multiplicative step (0: -i steps) */
    size_t stepbytes;        /* -i: additive step */
    size_t sizes[PERF_MAX_SIZES]; /* --sizes: explicit list (overrides -b/-e/-f/-i) */
    int nsizes;
    int dtypes[COHORT_DTYPE_COUNT]; /* -d: 1 = sweep this dtype ("all": every one) */
    int redops[COHORT_OP_COUNT];    /* -o: 1 = sweep this reduce op */
    int root;                /* -r: root of rooted ops, -1: every rank in turn ("all") */
    long check;              /* -c: checked calls per size and variant (0: no check, #wrong N/A) */
    int average;             /* -a: rank times combined as 0 rank 0, 1 mean, 2 min, 3 max */
    long agg;                /* -m: calls per timed iteration */
    long cycles;             /* -N: times the whole sweep runs */
    int in_place;            /* --in-place yes|no: also the in-place variant (default yes) */
    int percentiles;         /* --percentiles: p50/p99/max columns after the table's */
    int memory;              /* --memory: the per-rank memory table at the end */
    int json;                /* --json: the JSON document on stdout instead of the table */
    const char *json_out;    /* --json-out / -J FILE: JSON to a file as well */
    long iters;              /* -n: fixed timed iterations (0: calibrate to --time) */
    long warmup;             /* -w: untimed iterations before calibration */
    long max_iters;          /* cap on calibrated iterations */
    double target_s;         /* --time: seconds timed per size and variant */
    const char *transport;   /* --transport: COHORT_TRANSPORT */
    const char *algo;        /* --algo: NAME or op=NAME,op=NAME */
    int contract_off;        /* --contract off */
    int osu;                 /* --osu: barrier between iterations, op alone timed */
    int mem_shared;          /* --mem shared: send/recv buffers from cohort_mem_alloc */
    int bind;                /* --bind / COHORT_BIND: CLI_BIND_AUTO|CORE|NONE (tools/common/bind.h) */
    const char *bind_from;   /* where bind came from: "--bind", "COHORT_BIND", "default" */
    int sched;               /* --sched: per row, each rank's CPU, migrations, context switches */
    double prewarm_s;        /* --prewarm: seconds of 8-byte all_reduces before the first row */
    double deadline_s;       /* --deadline: launcher kills ranks after this */
    int debug_corrupt;       /* hidden: corrupt one received element before checking */
    int debug_skew_ms;       /* hidden: rank r sleeps this long in iterations i % n == r */
    const char *label;       /* -l: free text carried into the output */
    /* The combination being run (set per row by the sweep). */
    cohort_dtype dtype;
    cohort_op redop;
    int cur_root;
} perf_opts;

/* ---- launcher (perf_launch.c) ---- */

/* Forks o->nranks rank processes with the environment cohort_init reads
 * (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, COHORT_JOB_ID,
 * COHORT_TOKEN, COHORT_STORE pointing at a store this process hosts), runs
 * rank_main in each, waits for all. The first rank to fail takes the others
 * down. Returns the exit status for the tool. */
int perf_launch(const perf_opts *o, int (*rank_main)(const perf_opts *));

/* ---- deterministic inputs and checks (perf_check.c) ---- */

/* Writes element i of rank r's input pattern into buf[i - first] for i in
 * [first, first + n). Values are small integers (or +-1/2 for prod, bit
 * patterns for band/bor/bxor) so that every reduction is exact in every dtype
 * for up to 32 ranks. */
void perf_fill(void *buf, cohort_dtype dt, cohort_op op, int r, size_t first, size_t n);

/* Verifies this rank's output of one call; returns the number of wrong
 * elements (0: ok) and describes the first one in msg. count is per rank for
 * the per-rank ops, as passed to the call. */
size_t perf_verify(enum perf_op op, const void *send, const void *recv, size_t count,
                   cohort_dtype dt, cohort_op redop, int root, int rank, int n, char *msg,
                   size_t msglen);

/* Fills buf with a sentinel (NaN-like bytes) so stale output is caught. */
void perf_poison(void *buf, size_t bytes);

/* ---- statistics, memory, output (perf_report.c) ---- */

/* One variant (out-of-place or in-place) of one row. */
typedef struct perf_res {
    int ran;
    long iters;
    double avg_us;           /* -a combination over ranks of each rank's mean per call */
    double p50_us, p99_us, max_us, min_us; /* the same combination of each rank's percentiles */
    double step_p50_us, step_p99_us, step_max_us; /* of the per-iteration max over ranks */
    double algbw, busbw;     /* GB/s (1e9 B/s) from avg_us */
    int64_t wrong;           /* wrong elements summed over ranks; -1: not checked */
} perf_res;

typedef struct perf_row {
    enum perf_op op;
    size_t bytes;            /* nccl-tests convention: the full buffer */
    size_t count;            /* elements as passed to the call (per rank for per-rank ops) */
    cohort_dtype dtype;
    cohort_op redop;         /* meaningful for reductions only */
    int root;                /* -1 for ops without a root */
    perf_res r[2];           /* [0] out-of-place, [1] in-place */
} perf_row;

/* Where a rank runs, for the "# Using devices" lines. */
typedef struct perf_where {
    int32_t pid;
    char host[60];
    char cpus[64];           /* the rank's affinity at start ("0", "0-1") */
} perf_where;

/* nccl-tests' names: "float", "half", "double", "bfloat16", "int32", ... */
const char *perf_dtype_name(cohort_dtype dt);
int perf_op_has_redop(enum perf_op op);
int perf_op_has_root(enum perf_op op);


/* Memory of one rank, KiB. */
typedef struct perf_mem {
    uint64_t rss_start;      /* VmRSS before cohort_init */
    uint64_t rss_init;       /* VmRSS after init and one 8-byte all_reduce (library overhead) */
    uint64_t rss_end;        /* VmRSS at the end (includes the benchmark buffers) */
    uint64_t hwm;            /* VmHWM */
    uint64_t shmem;          /* RssShmem from /proc/self/status */
    uint64_t seg_size;       /* shared (MAP_SHARED) writable mappings: Size, Rss, Pss */
    uint64_t seg_rss;
    uint64_t seg_pss;
} perf_mem;

#define PERF_MEM_FIELDS 8

void perf_mem_status(uint64_t *rss, uint64_t *hwm, uint64_t *shmem);

/* Where and how the calling thread ran (--sched): its CPU now, its
 * migrations so far (-1 where /proc/thread-self/sched does not say), its
 * voluntary and involuntary context switches so far. */
#define PERF_SCHED_FIELDS 4
void perf_sched_sample(int64_t v[PERF_SCHED_FIELDS]);
void perf_mem_segments(uint64_t *size, uint64_t *rss, uint64_t *pss);

double perf_busfactor(enum perf_op op, int n);
int perf_cmp_double(const void *a, const void *b);
/* Percentile (nearest rank) of a sorted array. */
double perf_pct(const double *sorted, long n, double p);

void perf_print_header(FILE *f, const perf_opts *o, int n, const perf_where *w);
/* "# Collective: all_reduce" and the nccl-tests column headers. */
void perf_print_table_head(FILE *f, const perf_opts *o, enum perf_op op);
void perf_print_row(FILE *f, const perf_opts *o, const perf_row *r);
/* "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X". */
void perf_print_footer(FILE *f, const perf_opts *o, const perf_row *rows, int nrows);
void perf_print_mem(FILE *f, const perf_mem *m, int n);
/* The whole run as one JSON document. */
void perf_write_json(FILE *f, const perf_opts *o, int n, const perf_row *rows, int nrows,
                     const perf_mem *m, int failed);

/* Human sizes: "64 MiB" / parse "64M", "4K", "1G", "123". */
int perf_parse_size(const char *s, size_t *out);

#endif

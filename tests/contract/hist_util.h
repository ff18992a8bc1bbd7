/* hist_util.h - builders for per-rank call histories in contract tests. */
#ifndef COHORT_TEST_HIST_UTIL_H
#define COHORT_TEST_HIST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"

/* A training-loop-like history: seq 1..n alternating all_reduce at
 * train.c:88 (1024 floats, sum) and train.c:91 (2048 floats, sum). */
static inline cohort_fingerprint th_fp(uint64_t seq, int coll, uint64_t count, int line)
{
    cohort_fingerprint f;
    memset(&f, 0, sizeof f);
    f.seq = seq;
    f.coll = coll;
    f.dtype = COHORT_FLOAT32;
    f.redop = (coll == COH_COLL_ALL_REDUCE || coll == COH_COLL_REDUCE ||
               coll == COH_COLL_REDUCE_SCATTER)
                  ? COHORT_SUM
                  : -1;
    f.root = -1;
    f.count = coll == COH_COLL_BARRIER ? 0 : count;
    f.group = 0;
    f.generation = 1;
    f.file = "/home/user/src/train.c";
    f.line = line;
    return f;
}

/* The loop body's k-th call (k >= 1): odd k at line 88, even at 91. */
static inline cohort_fingerprint th_loop(uint64_t seq, uint64_t k)
{
    return k % 2 ? th_fp(seq, COH_COLL_ALL_REDUCE, 1024, 88)
                 : th_fp(seq, COH_COLL_ALL_REDUCE, 2048, 91);
}

typedef struct th_world {
    int n;
    coh_hist *h;
} th_world;

/* n ranks, each with calls 1..len of the loop. */
static inline th_world th_make(int n, int len)
{
    th_world w = {n, calloc((size_t)n, sizeof(coh_hist))};
    for (int r = 0; r < n; r++) {
        w.h[r].n = len;
        w.h[r].fp = calloc((size_t)(len + 8), sizeof(cohort_fingerprint));
        for (int i = 0; i < len; i++)
            w.h[r].fp[i] = th_loop((uint64_t)i + 1, (uint64_t)i + 1);
    }
    return w;
}

static inline void th_free(th_world *w)
{
    for (int r = 0; r < w->n; r++)
        free(w->h[r].fp);
    free(w->h);
}

/* Rank r's record for seq (must exist). */
static inline cohort_fingerprint *th_at(th_world *w, int r, uint64_t seq)
{
    for (int i = 0; i < w->h[r].n; i++)
        if (w->h[r].fp[i].seq == seq)
            return &w->h[r].fp[i];
    return NULL;
}

static inline void th_append(th_world *w, int r, cohort_fingerprint f)
{
    w->h[r].fp[w->h[r].n++] = f;
}

static inline void th_missing(th_world *w, int r)
{
    free(w->h[r].fp);
    w->h[r].fp = NULL;
    w->h[r].n = 0;
}

#endif

/*
 * cases.h - the collective test matrix and its checker, shared by the
 * in-process harness (test_coll_sim) and the multi-process tests
 * (test_coll). A case is run on every rank; each rank builds its inputs
 * deterministically, issues the call through a caller-supplied function and
 * checks its own output against a reference computed here independently of
 * src/reduce and src/coll.
 *
 * Inputs of reductions are small integers (|x| <= 14, products of +-1/+-2),
 * so every summation order is exact in every float type, including float16
 * and bfloat16 for up to 8 ranks: results are compared bit for bit (AVG
 * against the correctly rounded quotient). cc_check_float_identity covers
 * general float data: within n * 2^-23 * sum|x| of a double reference, and
 * bitwise identical on every rank.
 *
 * In place is send == recv (docs/concepts.md): for all_gather and gather
 * the rank's own block is read from its slot of recv; scatter's root reads
 * the whole send and writes its own block to the start of recv;
 * reduce_scatter reads size*count from recv and writes the first count.
 */
#ifndef COHORT_TEST_COLL_CASES_H
#define COHORT_TEST_COLL_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "cohort.h"

typedef struct cc_case {
    int coll; /* coh_coll */
    int dtype;
    int op; /* cohort_op, -1 if none */
    size_t count;
    int root;
    int inplace;
} cc_case;

/* Issues one collective on this rank. send/recv as the public API takes
 * them (for broadcast both are the buffer). */
typedef cohort_status (*cc_issue_fn)(void *ctx, const cc_case *k, const void *send, void *recv);

/* Runs case k on rank `rank` of n; returns 0, or 1 with a message. */
int cc_check(int rank, int n, const cc_case *k, cc_issue_fn issue, void *ctx, char *msg,
             size_t len);

/* all_reduce of random float32 and bfloat16 data: close to the double
 * reference and bitwise identical on all ranks (checked with an all_gather
 * of result hashes through `issue`). */
int cc_check_float_identity(int rank, int n, size_t count, cc_issue_fn issue, void *ctx, char *msg,
                            size_t len);

/* Cases for one collective on n ranks; `full` widens dtypes/ops/roots.
 * chunk_bytes is the COHORT_CHUNK_BYTES the run uses (the counts include
 * one chunk exactly and several chunks plus an odd remainder). */
int cc_matrix(int coll, int n, int full, size_t chunk_bytes, cc_case *out, int max);

/* "all_reduce float32 sum count=7 root=2 inplace" */
void cc_describe(const cc_case *k, char *out, size_t len);

/* COHORT_FULL_MATRIX=1 */
int cc_full(void);

#endif

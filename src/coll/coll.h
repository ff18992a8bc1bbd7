/*
 * coll.h - collective algorithms and their selection.
 *
 * An algorithm is a function over the group's transports: message
 * algorithms use coh_net_xfer (every message carries the contract), shm
 * algorithms use the host segment (coh_shm_*), hierarchical ones combine
 * both (shm inside a host, messages between host leaders).
 *
 * Selection is a table walked in order: the first entry whose supports()
 * accepts (op, bytes, world size, topology) runs. COHORT_ALGO_<OP>=name
 * (e.g. COHORT_ALGO_ALL_REDUCE=ring) forces one; an unknown or unsupported
 * forced name is a COHORT_ERR_INVALID naming the variable and the choices.
 * The choice depends only on the contract and the topology, so every rank
 * picks the same algorithm.
 */
#ifndef COH_COLL_H
#define COH_COLL_H

#include "core/group.h"

typedef struct coh_algo {
    const char *name;    /* "ring", "rd", "tree", "pairwise", "dissemination", "shm", "hier" */
    int coll;            /* coh_coll */
    /* 1 if it can run this call on this group (topology, transports). */
    int (*supports)(const cohort_group *g, const coh_call *c);
    /* 1 if the table should pick it by default for this call. */
    int (*preferred)(const cohort_group *g, const coh_call *c);
    cohort_status (*run)(cohort_group *g, coh_call *c);
    /* 1 if an AVG (coh_avg_folds) is divided inside the algorithm while
     * the pieces are in cache - a fold of every rank's contribution:
     * float16/bfloat16 in float32 before the one rounding, float32/float64
     * piece by piece; ring, rd, rabenseifner, the tree reduce and the hier
     * all_reduce, reduce and reduce_scatter: the sum where it becomes
     * whole, as coh_reduce_finish would - so coh_coll_run does not divide
     * the result again. */
    int avg_in_fold;
} coh_algo;

/* Runs the call with the selected algorithm (the engine calls this). Handles
 * size == 1 and count == 0 without communication beyond what the contract
 * check needs. */
cohort_status coh_coll_run(cohort_group *g, coh_call *c);

/* The algorithm that would run (for tests and cohort-perf output). */
const coh_algo *coh_coll_select(const cohort_group *g, const coh_call *c, cohort_status *err);
/* The same choice, remembered per collective kind in the group (the
 * per-call path, coh_coll_run); exact for every group (select.c). */
const coh_algo *coh_coll_select_memo(cohort_group *g, const coh_call *c, cohort_status *err);
/* Reads COHORT_ALGO_<OP> into g once (selection runs on every call), and
 * frees that copy. */
void coh_coll_read_env(cohort_group *g);
void coh_coll_free_env(cohort_group *g);
/* COHORT_ALGO_<OP>=value checked at init: 0 if var names a collective and
 * value is auto or one of its algorithms, else -1 with the reason in msg. */
int coh_coll_check_algo_env(const char *var, const char *value, char *msg, size_t len);

/* All registered algorithms, NULL-terminated (tests iterate it). */
const coh_algo *const *coh_coll_algos(void);

/* Chunk size for pipelined message algorithms (bytes); tests shrink it via
 * COHORT_CHUNK_BYTES so multi-chunk paths run on small buffers. */
size_t coh_coll_chunk_bytes(void);
/* The pipeline piece size for g's calls: the value read when cohort_init
 * made g (g->chunk_bytes); harness groups read COHORT_CHUNK_BYTES per call,
 * as they do the COHORT_ALGO_* variables. */
size_t coh_coll_chunk(const cohort_group *g);
/* 1 when COHORT_CHUNK_BYTES is set to a valid value for g's calls (read
 * with g->chunk_bytes, or per call for harness groups): a set value
 * overrides the size rules on pieces (coh_tree_bcast_plan). */
int coh_coll_chunk_set(const cohort_group *g);

/* What the rendezvous compares between ranks (group/agree.c): the
 * COHORT_ALGO_<OP> value forcing an algorithm for coll, or NULL (unset or
 * auto); that variable's name; the rule COHORT_TCP_OVERSUB feeds (mode: -1
 * auto, 0 off, 1 on; n ranks; oversub: g->oversub): 1 where the barrier
 * after a broadcast is led and small calls after a barrier go flat
 * (algos.c coh_bar_leader). */
const char *coh_coll_forced(const cohort_group *g, int coll);
const char *coh_coll_env_name(int coll);
int coh_bar_lead_pref(int mode, int n, int oversub);

#endif

/*
 * harness.h - shm test harness: a hand-built group per rank process (until
 * the group module's rendezvous lands), a page shared by all ranks of a run
 * for timestamps and flags, and value generators.
 */
#ifndef SHM_TEST_HARNESS_H
#define SHM_TEST_HARNESS_H

#include <stdint.h>

#include "cohort.h"
#include "coll/shm/shm_coll.h"
#include "core/group.h"
#include "support/group.h"
#include "transport/shm/shm.h"

/* Shared between the test process and every rank it forks; create with
 * th_shared_init() before cht_run_ranks. Ranks reach the store the spawner
 * started (CHT_STORE_PARENT: COHORT_STORE in the environment) or, with
 * CHT_STORE_RANK0, one that rank 0 hosts on MASTER_PORT (no thread exists
 * before the spawner forks: what TSan needs); such rank functions end with
 * th_done() so rank 0 keeps the store up until every rank is finished. */
typedef struct th_shared {
    _Atomic uint64_t t_event_ns; /* e.g. when a victim killed itself */
    _Atomic int flag[16];
    _Atomic int64_t val[64];
} th_shared;

th_shared *th_shared_init(void);
th_shared *th_sh(void);
void th_sleep_ms(int ms);
/* In a rank: waits until flag[i] is set (by another rank or thread); past
 * deadline_ms the rank fails. A checked condition, not a sleep-as-sync. */
void th_wait_flag(int i, int deadline_ms);

/* Builds rank `rank` of an n-rank group on one host by hand (the transport
 * alone, without the group module's rendezvous) and creates its shm segment.
 * COHORT_STORE / COHORT_JOB_ID / COHORT_TOKEN come from the environment the
 * spawner sets; without COHORT_STORE the group has no store (enough for
 * n == 1). On failure returns NULL and writes the status to *st. */
cohort_group *th_group(int rank, int n, int timeout_ms, cohort_status *st);
/* Same, without creating the segment (g->shm NULL). */
cohort_group *th_group_bare(int rank, int n, int timeout_ms);
void th_group_free(cohort_group *g);
/* Moves a bare group into the store namespace `prefix` (under the job's
 * root), apart from the group's own keys: what it publishes there, its
 * abort records included, stays out of the group's namespace. With `key`,
 * first copies that key's value from the group's namespace (waiting up to
 * 10 s for it). Stops the group's monitor thread if it had one. */
cohort_status th_private_ns(cohort_group *g, const char *prefix, const char *key);
/* The group's first error, copied under err_mu: the monitor thread writes
 * it when a peer's abort arrives, possibly while this rank's failed call is
 * returning (reading g->err.msg unlocked is a data race; TSan reported it in
 * test_shm_fault). The copy is valid until the next call. */
const char *th_errmsg(cohort_group *g);

/* The ring depth the lead of n local ranks picks when each has a cpu and
 * COHORT_SHM_RING_SLOTS is unset, for slots of ring_bytes: 64 for 2 ranks
 * where the slots fit 1 MiB and half this core's L2, else 8 (docs/shm.md
 * "The ring's depth"). The tests' statement of the rule, checked against
 * the library. */
size_t th_ring_default_k(int n, size_t ring_bytes);
/* End of a rank function in CHT_STORE_RANK0 tests (see above). */
void th_done(int nranks);

/* A contract for one call (seq must advance per call: use th_call_next). */
coh_call th_call(cohort_group *g, int coll, int dtype, int redop, int root, uint64_t count);

size_t th_dtype_size(int dt);
const char *th_dtype_name(int dt);

#endif

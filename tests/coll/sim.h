/*
 * sim.h - an in-process world for the collective algorithms: ranks are
 * threads, each with its own cohort_group whose topology (hosts, leaders,
 * local ranks) is whatever the test describes, and src/coll's transport
 * seam points at an in-memory message transport and a shared-memory
 * stand-in (every rank of a simulated host reads its peers' buffers).
 *
 * This is what lets hierarchical algorithms run over several "hosts" on
 * one machine, and every algorithm run on many world sizes in seconds. It
 * checks what a transport checks: the expected header (coh_hdr_match) and
 * length of every message, FIFO order per pair, and, once headers are real
 * (magic set), that one call never reuses a step number between a pair.
 * The multi-process tests (test_coll.c) cover the real transports.
 */
#ifndef COHORT_TEST_COLL_SIM_H
#define COHORT_TEST_COLL_SIM_H

#include "core/group.h"

#define SIM_MAX 16

typedef struct sim_world sim_world;

/* host_of[r] for r < n: the simulated host of each rank (hosts numbered
 * 0..H-1, every number used). shm: give hosts with several ranks a segment.
 * force_tcp: as COHORT_TRANSPORT=tcp (no segments at all). */
sim_world *sim_create(int n, const int *host_of, int shm, int force_tcp);
void sim_destroy(sim_world *w);
cohort_group *sim_group(sim_world *w, int rank);

/* Runs fn(rank, group, arg) on n threads and joins them. Returns 0 if every
 * thread returned 0; a failing thread's message is in sim_error(). Waits
 * are bounded (10 s) and end early once any rank fails. */
int sim_run(sim_world *w, int (*fn)(int rank, cohort_group *g, void *arg), void *arg);
const char *sim_error(sim_world *w);
/* For rank functions: record a failure (first one wins) and wake waiters. */
void sim_fail(sim_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sim_world *sim_of(cohort_group *g);

/* Installs / removes the simulated transports (coh_coll_set_transport). */
void sim_install(void);
void sim_uninstall(void);

/* Number of messages sent so far (all ranks). */
long sim_messages(sim_world *w);

#endif

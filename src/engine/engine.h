/*
 * engine.h - issuing calls: inline for blocking calls, a per-group worker
 * thread for async ones. Ops of one group complete in issue order: a
 * blocking call issued while async work is queued is queued behind it and
 * waited for. Every finished call is recorded in the flight recorder.
 */
#ifndef COH_ENGINE_H
#define COH_ENGINE_H

#include "core/group.h"

typedef struct coh_engine coh_engine;

cohort_status coh_engine_create(cohort_group *g, coh_engine **out);
/* Fails queued work with the group's error, joins the worker. */
void coh_engine_destroy(coh_engine *e);
/* Runs c now (work == NULL) or queues it and returns a handle. The call's
 * seq has already been assigned. */
cohort_status coh_engine_submit(cohort_group *g, coh_call *c, cohort_work **work);
/* Wakes the worker and every waiter of a work handle (abort). */
void coh_engine_wake(coh_engine *e);

#endif

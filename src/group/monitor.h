/*
 * monitor.h - the group's out-of-band control channel through the store.
 *
 * A monitor thread per group blocks on the store for control records
 * ("ctl/<n>": abort, probe, dump requests) so that aborts reach ranks whose
 * data path is broken, and so that a stalled rank can ask its peers where
 * they are. A rank that does not answer a probe in time is "unresponsive"
 * (e.g. SIGSTOPped).
 */
#ifndef COH_GROUP_MONITOR_H
#define COH_GROUP_MONITOR_H

#include "core/group.h"

/* Registers the control plane's hook on g (abort records, probes, stall
 * reports through g->store; no thread): once per group, when its store is
 * set. coh_monitor_start then adds the thread that reads control records. */
void coh_monitor_attach(cohort_group *g);
cohort_status coh_monitor_start(cohort_group *g);
void coh_monitor_stop(cohort_group *g);
/* Waits (bounded) until the monitor has acted on every control record
 * posted so far, e.g. an abort another rank posted before it reached a
 * barrier this rank has passed. */
cohort_status coh_monitor_sync(cohort_group *g, int timeout_ms);
/* Posts an abort record (best effort, bounded time). */
void coh_monitor_post_abort(cohort_group *g, cohort_status st, const char *reason);
/* Out-of-band contract probe for a call that has not progressed: publishes
 * this rank's fingerprint for the call and compares it with any peer
 * fingerprints already published for the same seq. Returns
 * COHORT_ERR_CONTRACT (group failed) on a mismatch, else OK. */
cohort_status coh_monitor_probe(cohort_group *g, const coh_call *call);
/* Publishes this rank's fingerprint for call c (cohort_finalize's pseudo
 * call) where peers' probes look for it: a peer still waiting in call
 * #c->seq then fails with a contract error naming the skipped call. */
void coh_monitor_announce(cohort_group *g, const coh_call *c);
/* Builds the stall report: who this rank waits for and where they are. */
void coh_monitor_stall_report(cohort_group *g, const coh_wait *w, char *out, size_t outlen);

#endif

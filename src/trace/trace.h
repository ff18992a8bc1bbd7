/*
 * trace.h - the flight recorder: a fixed ring of the group's last N calls
 * (COHORT_TRACE_SIZE, default 2048) with fingerprint, call site, state and
 * timestamps. Recording is a few stores per call (no locks, no allocation):
 * the issuing thread and the async worker write disjoint fields of an entry,
 * and dumps may read a torn entry at worst (documented).
 *
 * Dumped as JSON Lines to COHORT_TRACE_DIR/<job>-rank<R>.jsonl on error,
 * timeout, SIGUSR1 or request (format in docs/trace.md).
 */
#ifndef COH_TRACE_H
#define COH_TRACE_H

#include <stdint.h>

#include "group/group.h"

enum coh_call_state { COH_ST_ISSUED = 0, COH_ST_STARTED, COH_ST_COMPLETED, COH_ST_FAILED };

typedef struct coh_trace_entry {
    coh_call call;          /* fingerprint + call site (buffers ignored) */
    uint64_t t_issue_us, t_start_us, t_end_us; /* wall clock */
    int state;              /* coh_call_state */
    int status;             /* cohort_status when finished */
} coh_trace_entry;

typedef struct coh_trace coh_trace;

cohort_status coh_trace_create(coh_trace **out, int capacity);
void coh_trace_destroy(coh_trace *t);
/* Returns the slot index for later updates. */
uint64_t coh_trace_issue(coh_trace *t, const coh_call *c);
void coh_trace_start(coh_trace *t, uint64_t idx);
void coh_trace_end(coh_trace *t, uint64_t idx, cohort_status st);
/* Last n entries, oldest first, into out (returns count). */
int coh_trace_last(const coh_trace *t, coh_trace_entry *out, int n);
/* Last completed collective seq and the current (first unfinished) entry. */
void coh_trace_progress(const coh_trace *t, uint64_t *last_done, coh_trace_entry *cur,
                        int *has_cur);
/* Writes the dump for g (dir NULL: COHORT_TRACE_DIR, else no-op). `reason`
 * goes into the header line. */
cohort_status coh_trace_dump(cohort_group *g, const char *dir, const char *reason);
/* Installs the SIGUSR1 handler that dumps every live group (once per
 * process; the handler only sets a flag the monitor thread acts on). */
void coh_trace_install_signal(void);
int coh_trace_signal_pending(void);

#endif

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

#include "core/group.h"
#include "core/names.h"

typedef struct coh_trace_entry {
    coh_call call;          /* fingerprint + call site (buffers ignored) */
    uint64_t t_issue_us, t_start_us, t_end_us; /* wall clock */
    int state;              /* coh_call_state */
    int status;             /* cohort_status when finished */
} coh_trace_entry;

typedef struct coh_trace coh_trace;

/* capacity <= 0: COHORT_TRACE_SIZE, default 2048 (1..1048576, else
 * COHORT_ERR_INVALID naming the variable). Error detail: thread-local. */
cohort_status coh_trace_create(coh_trace **out, int capacity);
void coh_trace_destroy(coh_trace *t); /* NULL ok */
/* Records c as ISSUED (wall clock now, coh_trace_us). c->file must stay
 * valid for the trace's lifetime (it is __FILE__). Returns the ring index
 * for later updates. One thread at a time may issue on a recorder (the
 * group's issuing thread). Every function accepts t == NULL (no-op). */
uint64_t coh_trace_issue(coh_trace *t, const coh_call *c);
/* Issued and started at once (a blocking call run on the issuing thread):
 * STARTED, with no clock read - t_issue = t_start are taken at the call's
 * first wait that does not finish at once (coh_trace_arrive, from the
 * transports' waits) or at its end (coh_trace_end): at the recorder's
 * microsecond resolution the same for a call that never waits, and for
 * one that waits, the moment it waited from, which is what the late-
 * arrival analysis compares. A reader sees a call that has not waited yet
 * as issued now. */
uint64_t coh_trace_issue_started(coh_trace *t, const coh_call *c);
/* The blocking call issued last starts to wait: fills its pending issue
 * time (nothing if none is pending). The issuing thread only. */
void coh_trace_arrive(coh_trace *t);
/* STARTED, t_start = now. */
void coh_trace_start(coh_trace *t, uint64_t idx);
/* STARTED right after issue on the same thread: t_start = t_issue (saves a
 * clock read on the blocking path). */
void coh_trace_start_now_issued(coh_trace *t, uint64_t idx);
/* COMPLETED (st == OK) or FAILED, t_end = now. An index whose slot was
 * reused meanwhile is ignored. */
void coh_trace_end(coh_trace *t, uint64_t idx, cohort_status st);
/* Last n entries, oldest first, into out (returns count). Safe while
 * writers run; entries being rewritten at that moment are skipped. */
int coh_trace_last(const coh_trace *t, coh_trace_entry *out, int n);
/* Last completed collective seq (send/recv excluded; 0 if none) and the
 * current (oldest unfinished, any kind) entry. */
void coh_trace_progress(const coh_trace *t, uint64_t *last_done, coh_trace_entry *cur,
                        int *has_cur);
/* Copies ring index idx (0 .. coh_trace_recorded()-1) into e; returns 0 if
 * it was overwritten or is being rewritten right now. */
int coh_trace_read(const coh_trace *t, uint64_t idx, coh_trace_entry *e);
/* Ring size, and how many calls were ever recorded (older ones are gone). */
int coh_trace_capacity(const coh_trace *t);
uint64_t coh_trace_recorded(const coh_trace *t);
/* Writes the dump for g (dir NULL: COHORT_TRACE_DIR, else no-op returning
 * COHORT_OK). `reason` goes into the header line. The file is
 * <dir>/<job>-rank<R>.jsonl for the world group and
 * <dir>/<job>-g<id>-rank<R>.jsonl for a sub-group (R: group rank), written
 * to a temporary name and renamed, so readers never see a partial dump.
 * Never takes g->err_mu; safe from the monitor thread and from
 * coh_group_fail. Format: docs/trace.md. */
cohort_status coh_trace_dump(cohort_group *g, const char *dir, const char *reason);
/* Registers the failure path's hook that dumps g's recorder (to
 * COHORT_TRACE_DIR, if set) when g fails: once per group, with g->trace set. */
void coh_trace_attach(cohort_group *g);
/* Installs the SIGUSR1 handler (once per process; COHORT_TRACE_SIGNAL=0
 * skips it). The handler only counts signals; a previously installed
 * handler is still called. */
void coh_trace_install_signal(void);
/* 1 once per SIGUSR1 per calling thread, else 0: a group's monitor thread
 * polls it and dumps (`if (coh_trace_signal_pending()) coh_trace_dump(g,
 * NULL, "SIGUSR1");`); each monitor thread sees every signal once, so every
 * live group dumps. (A thread's first call reports a signal received
 * before it started.) */
int coh_trace_signal_pending(void);
/* Same, per recorder instead of per thread (for callers that poll several
 * groups from one thread). */
int coh_trace_signal_take(coh_trace *t);
/* SIGUSR1 received since the handler was installed (never reset). */
unsigned coh_trace_signal_count(void);
/* COHORT_TRACE_SIZE or the default into *out; -1 if the variable is bad. */
int coh_trace_default_capacity(int *out);

#endif

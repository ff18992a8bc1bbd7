/*
 * acct.h - memory budgets of the store server, usable by any listener of it
 * (the cohort protocol, a TCPStore-compatible one): the server as a whole,
 * each job (tenant), each connection.
 *
 * A charge goes to a chain of budgets, innermost first (connection, job,
 * server) and succeeds only if every one of them has room; otherwise
 * nothing is charged and the first budget without room is named, so the
 * refusal can say which limit it hit. Stored data is charged to (job,
 * server): it outlives connections. What a connection holds while it is
 * served (a request body arriving, reply bytes queued) is charged to
 * (connection, job, server). With the job limits summing to at most the
 * server's, no job can take memory another job is entitled to.
 */
#ifndef COH_STORE_ACCT_H
#define COH_STORE_ACCT_H

#include <stddef.h>

typedef struct coh_budget {
    size_t used, limit;
    const char *what;   /* "connection", "job", "server": for messages */
    const char *option; /* the limit's option name: "max_conn_memory" ... */
} coh_budget;

#define COH_ACCT_LEVELS 3

/* The budgets one charge goes to; unused levels are NULL. */
typedef struct coh_acct {
    coh_budget *b[COH_ACCT_LEVELS];
} coh_acct;

/* Charges n to every budget of a, or to none; returns NULL on success, or
 * the first budget that had no room. Cannot overflow whatever n is. */
coh_budget *coh_acct_charge(const coh_acct *a, size_t n);
/* Charges n even over the limits (a few bytes of an error reply that must
 * go out); the overshoot is bounded by the caller. */
void coh_acct_force(const coh_acct *a, size_t n);
void coh_acct_release(const coh_acct *a, size_t n);
/* Room left in a (the least over its levels). */
size_t coh_acct_room(const coh_acct *a);
/* "job memory limit reached (N of max_job_memory M bytes in use)" */
void coh_budget_describe(const coh_budget *b, char *out, size_t outlen);

#endif

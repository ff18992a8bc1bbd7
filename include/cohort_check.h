/*
 * cohort_check.h - the contract check for collectives that cohort does not
 * carry (since 0.2).
 *
 * An MPI communicator, a torch.distributed process group or an NCCL
 * communicator moves its data through another library. A checker lets
 * such a front end tell cohort "this rank is about to make call K of
 * external group G with fingerprint F"; cohort compares F with the same
 * call on a neighbouring member (member i with member i+1 mod n: if the
 * members do not all agree, some adjacent pair differs) and, on a
 * difference, every member gets the same majority report cohort gives for
 * its own calls (call, field, values per member, odd member(s), both call
 * sites). A monitor thread catches what the calling thread cannot see
 * while it is blocked inside the other library: a mismatch found by
 * another member, a stall, a wait-for cycle of blocking point-to-point
 * calls. It hands them to the front end's handler, which ends the job the
 * backend's way (MPI_Abort, aborting the process group, exiting).
 *
 * Cost: one fingerprint record per call into a ring in the world group's
 * shared segment (ranks of one host) or the store (pipelined, no round
 * trip; ranks on different hosts), and one comparison after the backend
 * call returns - a read of a cache line the neighbour wrote on its way in.
 * No round trip is added to any call. See docs/check.md.
 *
 * Threads: every function may be called from any thread. Calls of one
 * external group must be announced in the order the backend requires
 * (the order MPI and torch require of the program anyway); calls of
 * different groups may come from different threads at once.
 *
 * Ownership: the checker borrows the world group (which must outlive it and
 * should be used for nothing else while the checker runs: after a failure
 * the checker aborts it). Strings passed in fingerprints are copied (or
 * their hash is kept) before the call returns, except `op` and `redop`,
 * which must be string literals or otherwise live as long as the checker.
 */
#ifndef COHORT_CHECK_H
#define COHORT_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "cohort.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cohort_check cohort_check;
typedef struct cohort_check_group cohort_check_group;

/* What the handler is told. */
typedef enum cohort_check_event_kind {
    COHORT_CHECK_MISMATCH = 1, /* members disagree on a call (fatal) */
    COHORT_CHECK_STALL = 2,    /* a call has waited COHORT_STALL_WARN (a warning; repeats) */
    COHORT_CHECK_TIMEOUT = 3,  /* a call has waited COHORT_TIMEOUT (fatal) */
    COHORT_CHECK_DEADLOCK = 4, /* blocking point-to-point calls wait on each other in a cycle (fatal) */
    COHORT_CHECK_ABORTED = 5,  /* the world group failed for another reason (fatal) */
} cohort_check_event_kind;

typedef struct cohort_check_event {
    int kind;             /* cohort_check_event_kind */
    cohort_status status; /* COHORT_ERR_CONTRACT, _TIMEOUT, ...; COHORT_OK for a stall warning */
    const char *text;     /* the report, the same on every member (fatal kinds) */
} cohort_check_event;

/* Called on the checker's monitor thread (never inside the call that
 * registered it): once for the first fatal event - the checker is failed
 * from then on - and for every stall warning before that. The text is
 * valid during the call. It should report and return: for a fatal event the
 * checker then waits (bounded, 5 s) until every rank's handler has
 * returned, and only then calls the options' `abort` and lets failing
 * calls return - so a rank ending the job at once (MPI_Abort kills every
 * rank) cannot cut another rank's report short. */
typedef void (*cohort_check_handler)(void *arg, const cohort_check_event *ev);

/* Resolves a return address (cohort_check_fp.pc) to "file:line" for
 * reports; writes at most len bytes (NUL included). Called only while a
 * report is built, never on the fast path. Return 0 if unknown. */
typedef int (*cohort_check_site_resolver)(void *arg, const void *pc, char *out, size_t len);

typedef struct cohort_check_options {
    cohort_check_handler handler; /* may be NULL: failures are logged and returned */
    void *handler_arg;            /* also passed to abort */
    /* After a fatal event, once every rank reported it (bounded): end the
     * job the backend's way (MPI_Abort, abort the process group, exit).
     * May be NULL: failing calls return the failure. */
    cohort_check_handler abort;
    cohort_check_site_resolver resolver; /* may be NULL: "<pc 0x...>" */
    void *resolver_arg;
    int stall_warn_ms;  /* 0: COHORT_STALL_WARN (default 30 s); < 0: never */
    int timeout_ms;     /* 0: COHORT_TIMEOUT (default: never); < 0: never */
    int deadlock_ms;    /* a wait-for cycle stable this long is reported; 0: 1000 */
    int transport;      /* 0: shared segment between ranks of one host, store across
                         * hosts; 1: the store for every pair (tests) */
    /* 1: a call that finds a failure returns it at once instead of waiting
     * (bounded, 15 s) for the report; the caller then waits for it with
     * cohort_check_report_wait without holding what the handler needs
     * (Python's GIL: the handler is Python, the calls are made with the
     * GIL held). 0 (default): failing calls return once the report is out. */
    int no_report_wait;
} cohort_check_options;

/* Sets every field to its default. */
COHORT_API void cohort_check_options_init(cohort_check_options *o);

/* After a call returned a failure (with o.no_report_wait): waits until the
 * report is out on this rank (the handler ran), at most timeout_ms (< 0:
 * 15 s). Returns COHORT_OK if the checker has not failed, else the
 * failure's status (report in cohort_check_last_error). */
COHORT_API cohort_status cohort_check_report_wait(cohort_check *c, int timeout_ms);

/* Collective over `world` (every rank calls it): starts the checker and
 * its monitor thread. o may be NULL (defaults). */
COHORT_API cohort_status cohort_check_create(cohort_group *world, const cohort_check_options *o,
                                             cohort_check **out);

/* The closing check, collective over the world (call it last, from one
 * thread, e.g. in MPI_Finalize): waits until this rank's calls have all
 * been compared, then until every rank has arrived here or some rank
 * reported a failure. A rank whose own calls all matched therefore still
 * learns of a mismatch found elsewhere instead of finishing cleanly while
 * the others abort. Returns COHORT_OK, the failure (report in
 * cohort_check_last_error), or COHORT_ERR_TIMEOUT after timeout_ms
 * (< 0: COHORT_TIMEOUT, else no limit) naming the ranks that did not
 * arrive. */
COHORT_API cohort_status cohort_check_close(cohort_check *c, int timeout_ms);

/* Stops the monitor thread and frees the checker and its groups (not the
 * world group). Not collective; returns at once on a failed checker.
 * Accepts NULL. */
COHORT_API void cohort_check_destroy(cohort_check *c);

/* A deterministic id for an external group made collectively by its
 * members: the parent's id (0 for the world's counterpart), the parent's
 * creation counter and the members' world ranks in group order. Every
 * member computes the same id without talking. */
COHORT_API uint64_t cohort_check_group_id(uint64_t parent_id, uint64_t creation_seq,
                                          const int *world_ranks, int n);

/* Registers an external group on this member: its id (the same on every
 * member), its members' world ranks in group order (member i is the
 * group's rank i), and this rank's index. Local (no communication); every
 * member must register the group before its first call. *out is owned by
 * the checker until cohort_check_group_remove or destroy. */
COHORT_API cohort_status cohort_check_group_add(cohort_check *c, uint64_t id,
                                                const int *world_ranks, int n,
                                                cohort_check_group **out);
/* Names the group in reports ("MPI_COMM_WORLD", "comm 3 (split of
 * MPI_COMM_WORLD)"); copied, at most 63 bytes kept. */
COHORT_API void cohort_check_group_name(cohort_check *c, cohort_check_group *grp, const char *name);

/* 1 when the group has two members on this host, which compare each
 * other's fingerprints through shared memory: after a synchronising
 * backend call returned, cohort_check_wait then compares this rank's call
 * with every other member's, so a front end may skip the wait before the
 * backend call and still never hand a mismatched call's result to the
 * program. 0 otherwise (more members: each rank compares only its
 * predecessor's fingerprint; another host: it comes through the store). */
COHORT_API int cohort_check_group_mutual(const cohort_check_group *grp);

/* Forgets a group (its pending comparisons are finished first when the
 * neighbour's fingerprints are already there). Accepts NULL. */
COHORT_API void cohort_check_group_remove(cohort_check *c, cohort_check_group *grp);

/* One call's fingerprint. Fields that do not apply: 0 / NULL / -1. */
typedef struct cohort_check_fp {
    const char *op;       /* "MPI_Allreduce"; compared by name (required) */
    uint64_t sig_hash;    /* hash of the data's type signature (0: none) */
    const char *sig;      /* its readable form, for reports ("2 x int32") */
    uint64_t count;       /* elements (of the signature's unit) */
    const char *redop;    /* "MPI_SUM"; NULL: none */
    int root;             /* root or peer as a member index; -1: none */
    uint64_t args_hash;   /* other arguments that must agree (e.g. a counts
                           * array), hashed; 0: none */
    const char *args;     /* their readable form, for reports */
    const char *file;     /* call site; NULL: use pc */
    int line;
    const void *pc;       /* return address, resolved lazily (file == NULL) */
} cohort_check_fp;

/* The call is about to enter the backend: assigns its sequence number in
 * grp (returned in *seq, 1-based) and publishes the fingerprint to the
 * member's neighbour. Cheap: no communication is waited for. Returns
 * COHORT_ERR_CONTRACT (or the failure) when the checker has already
 * failed; the report is in cohort_check_last_error. */
COHORT_API cohort_status cohort_check_begin(cohort_check *c, cohort_check_group *grp,
                                            const cohort_check_fp *fp, uint64_t *seq);

/* Flags for cohort_check_end. */
#define COHORT_CHECK_SYNCED 1u /* the backend call's return implies every
                                * member entered it (all_reduce, barrier,
                                * all_gather, all_to_all, reduce_scatter):
                                * the neighbour's fingerprint is compared now,
                                * waiting for it if it is still in flight
                                * across hosts */

/* The backend call returned (or, for a nonblocking call, was started):
 * compares with the neighbour's fingerprint for the same call when it is
 * there (always, with COHORT_CHECK_SYNCED), else later - at this member's
 * next call or on the monitor thread. Returns COHORT_ERR_CONTRACT with the
 * report (every member gets the same one) on a mismatch: the backend's
 * result must then not be used. */
COHORT_API cohort_status cohort_check_end(cohort_check *c, cohort_check_group *grp, uint64_t seq,
                                          unsigned flags);

/* This rank found the call's arguments inconsistent on its own (e.g. an
 * MPI_Allgather whose send and receive amounts differ): fails the checker
 * with "<group name>: <text>" as the report every rank gets. Returns
 * COHORT_ERR_CONTRACT once the report is out (as a failing begin does). */
COHORT_API cohort_status cohort_check_fail_local(cohort_check *c, cohort_check_group *grp,
                                                 const char *text);

/* Waits until the neighbour's fingerprint for call `seq` was compared
 * (for calls that do not synchronise, when the front end wants the check
 * before it goes on - e.g. before MPI_Finalize). timeout_ms = 0: compares
 * what is there and returns at once (COHORT_ERR_TIMEOUT if the neighbour's
 * fingerprint has not arrived). timeout_ms < 0: no limit
 * (the monitor's stall reports and COHORT_TIMEOUT still apply). Returns
 * COHORT_ERR_TIMEOUT when it was not compared in time, or the failure. */
COHORT_API cohort_status cohort_check_wait(cohort_check *c, cohort_check_group *grp, uint64_t seq,
                                           int timeout_ms);

/* A blocking point-to-point call waits for world rank `peer` (-1: any
 * source): published for stall reports and deadlock detection. is_send: 1
 * for a send waiting for its receive, 0 for a receive or probe; tag: the
 * call's tag (-1: any tag); grp: the group it is on (NULL: unknown). A
 * send and a receive that wait for each other with compatible tags on the
 * same group match, so they never make a cycle. One per thread; a second
 * begin replaces the first. pc/file as in cohort_check_fp. */
COHORT_API void cohort_check_wait_begin(cohort_check *c, cohort_check_group *grp, int peer, int tag,
                                        int is_send, const char *op, const char *file, int line,
                                        const void *pc);
COHORT_API void cohort_check_wait_end(cohort_check *c);

/* The checker's first failure (the report) or "". */
COHORT_API const char *cohort_check_last_error(const cohort_check *c);
/* COHORT_OK, or the status of the first failure. */
COHORT_API cohort_status cohort_check_status(const cohort_check *c);

/* Counters (since create), e.g. for tests and cost reports. */
typedef struct cohort_check_stats {
    uint64_t calls;       /* begin calls in groups of two or more */
    uint64_t compared;    /* comparisons made (this member checked its predecessor) */
    uint64_t lazy;        /* of those, made after end returned */
    uint64_t ring_waits;  /* begin waited for a full ring to drain */
    uint64_t sync_waits;  /* end (COHORT_CHECK_SYNCED) found the neighbour's record not yet
                           * visible and waited for it */
    uint64_t unlocked;    /* begin and end calls that took no mutex (the biased lock's
                           * fast path: one calling thread; docs/check.md, "Locking") */
    uint64_t ticks;       /* the monitor thread's ticks (10 ms while a call lasts, else
                           * 50 ms: docs/check.md, "Cost") */
} cohort_check_stats;
COHORT_API void cohort_check_get_stats(const cohort_check *c, cohort_check_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* COHORT_CHECK_H */

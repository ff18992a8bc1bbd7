/*
 * cohort_trace.h - reading flight-recorder dumps back and running the
 * contract's history analysis over them (since 0.3). cohort-trace is built
 * on this; so can any other reader of the dumps.
 *
 * A dump (cohort_trace_dump, COHORT_TRACE_DIR/<job>-rank<R>.jsonl) is JSON
 * Lines: a header line, then one line per recorded call, oldest first
 * (format: docs/trace.md). cohort_trace_parse_line reads one line of any
 * origin: it is a pure function over (pointer, length), needs no NUL,
 * allocates nothing, never reads past len, and turns any input into either
 * a record or COHORT_TRACE_INVALID with a reason.
 *
 * cohort_trace_analyze is the analysis behind COHORT_ERR_CONTRACT's
 * message, so a tool's report and the library's error always agree.
 */
#ifndef COHORT_TRACE_H
#define COHORT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "cohort.h" /* cohort_fingerprint, cohort_status, COHORT_API */

#ifdef __cplusplus
extern "C" {
#endif

/* The kind of a recorded call: the values of cohort_fingerprint.coll and
 * cohort_trace_entry.coll. */
typedef enum cohort_call_kind {
    COHORT_CALL_NONE = 0,
    COHORT_CALL_ALL_REDUCE = 1,
    COHORT_CALL_BROADCAST = 2,
    COHORT_CALL_REDUCE = 3,
    COHORT_CALL_ALL_GATHER = 4,
    COHORT_CALL_GATHER = 5,
    COHORT_CALL_SCATTER = 6,
    COHORT_CALL_REDUCE_SCATTER = 7,
    COHORT_CALL_ALL_TO_ALL = 8,
    COHORT_CALL_BARRIER = 9,
    COHORT_CALL_SEND = 10,
    COHORT_CALL_RECV = 11,
    COHORT_CALL_INTERNAL = 12, /* group-internal traffic (split, debug=sync) */
    COHORT_CALL_FINALIZE = 13, /* cohort_finalize's closing exchange */
} cohort_call_kind;

/* Where a recorded call got to. */
typedef enum cohort_call_state {
    COHORT_CALL_ISSUED = 0,    /* queued, not started (pending at the dump) */
    COHORT_CALL_STARTED = 1,   /* running (pending at the dump) */
    COHORT_CALL_COMPLETED = 2,
    COHORT_CALL_FAILED = 3,
} cohort_call_state;

#define COHORT_TRACE_TEXT 1024 /* reason: the library's message length */

/* A dump's first line. */
typedef struct cohort_trace_header {
    int version;
    char job[128];
    int rank, size;
    uint32_t generation, group;
    char host[128];
    long pid;
    char reason[COHORT_TRACE_TEXT]; /* why it was dumped */
    uint64_t time_us;               /* wall clock of the dump */
    int capacity;                   /* ring size */
    uint64_t recorded; /* calls ever recorded (recorded > capacity: the oldest were lost) */
} cohort_trace_header;

/* One recorded call. */
typedef struct cohort_trace_entry {
    uint64_t seq;   /* collectives: the group's call number; send/recv: per peer pair */
    int coll;       /* cohort_call_kind */
    int dtype;      /* cohort_dtype */
    int redop;      /* cohort_op, -1 none */
    int root, tag;  /* root, or the peer of a send/recv; -1 none */
    uint64_t count;
    char file[256]; /* call site ("" unknown); long paths keep their tail */
    int line;
    int state;      /* cohort_call_state */
    int status;     /* cohort_status */
    uint64_t t_issue_us, t_start_us, t_end_us; /* wall clock; 0: not reached */
} cohort_trace_entry;

enum {
    COHORT_TRACE_INVALID = 0, /* not a record: err says why */
    COHORT_TRACE_HEADER = 1,  /* out->hdr */
    COHORT_TRACE_ENTRY = 2,   /* out->ent */
    COHORT_TRACE_OTHER = 3,   /* a valid record of another kind (a contract history) */
};

typedef struct cohort_trace_line {
    int kind; /* COHORT_TRACE_* */
    cohort_trace_header hdr;
    cohort_trace_entry ent;
} cohort_trace_line;

/* Parses one line (a trailing "\n" or "\r\n" allowed) and returns out->kind.
 * On COHORT_TRACE_INVALID, err (may be NULL) says why, e.g. "byte 17:
 * expected ':'". s NULL or out NULL: COHORT_TRACE_INVALID. */
COHORT_API int cohort_trace_parse_line(const char *s, size_t len, cohort_trace_line *out,
                                       char *err, size_t errlen);

/* The fingerprint of a recorded call of group/generation (file points into
 * e), as the contract compares it. Nothing for NULL arguments. */
COHORT_API void cohort_trace_entry_fingerprint(const cohort_trace_entry *e, uint32_t group,
                                               uint32_t generation, cohort_fingerprint *fp);

/* ---- analysis ---- */

/* One rank's calls, oldest first. fp NULL: the rank is missing (no dump);
 * fp non-NULL with n 0: present, no calls. Pass collectives only: send and
 * recv numbers are per peer pair, so they do not align between ranks. */
typedef struct cohort_trace_history {
    int n;
    const cohort_fingerprint *fp;
} cohort_trace_history;

enum {
    COHORT_TRACE_DIV_NONE = 0,
    COHORT_TRACE_DIV_FIELD = 1,   /* different calls at seq; field names the first difference */
    COHORT_TRACE_DIV_EXTRA = 2,   /* the odd ranks made an extra call at seq */
    COHORT_TRACE_DIV_SKIPPED = 3, /* the odd ranks skipped the majority's call at seq */
    COHORT_TRACE_DIV_SHIFTED = 4, /* one call out of step, direction unprovable */
};

typedef struct cohort_trace_divergence {
    int kind;          /* COHORT_TRACE_DIV_* */
    uint64_t seq;
    const char *field; /* "count", "dtype", ... (static); "" unless kind is FIELD */
    int has_majority;  /* 0: a tie, nobody is blamed */
    int ref_rank;      /* a rank of the majority (the lowest on a tie) */
} cohort_trace_divergence;

/* Compares nranks histories (hist[r]: rank r). Returns 1 when they diverge,
 * 0 when they agree, -1 for bad arguments (NULL hist, nranks < 1, n < 0,
 * n > 0 with fp NULL). report (may be NULL; reportlen bytes) gets the
 * library's message: the majority report on a divergence, else a short
 * summary naming missing ranks and ranks behind the others. div (may be
 * NULL) gets the first divergence as data; odd (may be NULL, nranks
 * bytes) odd[r] = 1 for each rank the report blames. */
COHORT_API int cohort_trace_analyze(const cohort_trace_history *hist, int nranks, char *report,
                                    size_t reportlen, cohort_trace_divergence *div,
                                    unsigned char *odd);

/* ---- names, as the reports and dumps print them; never NULL ---- */

/* cohort_call_kind: "all_reduce", "send", ...; "unknown_op" out of range. */
COHORT_API const char *cohort_call_kind_name(int op);
/* cohort_call_state: "issued", "started", "completed", "failed"; "unknown". */
COHORT_API const char *cohort_call_state_name(int state);
/* A dtype or reduce op as dumps spell them: "float32", "sum"; "none" for
 * redop -1; "invalid_dtype" / "invalid_op" out of range. */
COHORT_API const char *cohort_trace_dtype_name(int dtype);
COHORT_API const char *cohort_trace_redop_name(int redop);
/* A call site's file as reports print it: its basename; "?" for NULL/"". */
COHORT_API const char *cohort_trace_site(const char *file);
/* Ranks as reports list them: sorted ranks[0..n) as "0-2,5" into out
 * (always terminated when outlen > 0; cut if it does not fit). */
COHORT_API void cohort_trace_format_ranks(char *out, size_t outlen, const int *ranks, int n);

#ifdef __cplusplus
}
#endif
#endif /* COHORT_TRACE_H */

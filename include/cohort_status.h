/* cohort_status.h - the one status enum shared by every cohort header. */
#ifndef COHORT_STATUS_H
#define COHORT_STATUS_H

/* COHORT_API marks the library's public functions, the only symbols
 * libcohort.so exports: the library is built with -fvisibility=hidden, so
 * everything else in it (coh_* internals) stays private to it. A program
 * may define COHORT_API itself first (e.g. empty). */
#ifndef COHORT_API
#if defined(__GNUC__) || defined(__clang__)
#define COHORT_API __attribute__((visibility("default")))
#else
#define COHORT_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ----------------------------------------------------------- */

/* Append-only: values are never renumbered or reused. */
typedef enum cohort_status {
    COHORT_OK = 0,
    COHORT_ERR_INVALID = 1,     /* bad argument or configuration */
    COHORT_ERR_CONTRACT = 2,    /* ranks disagree on a call */
    COHORT_ERR_PEER_LOST = 3,   /* a rank died or its connection closed */
    COHORT_ERR_TIMEOUT = 4,     /* a deadline passed */
    COHORT_ERR_ABORTED = 5,     /* the group was poisoned by an earlier error */
    COHORT_ERR_AUTH = 6,        /* identity, token or generation refused */
    COHORT_ERR_STORE = 7,       /* the store is unreachable or failed */
    COHORT_ERR_SYSTEM = 8,      /* an OS call failed (errno in the detail) */
    COHORT_ERR_NOMEM = 9,       /* allocation failed */
    COHORT_ERR_PROTOCOL = 10,   /* malformed frame, bad magic or version */
    COHORT_ERR_NOT_FOUND = 11,  /* key absent (non-waiting store calls) */
    COHORT_ERR_TOO_LARGE = 12,  /* over a configured limit */
    COHORT_ERR_UNSUPPORTED = 13 /* feature not built or not applicable */
} cohort_status;

/* Never returns NULL. */
COHORT_API const char *cohort_strerror(cohort_status s);
/* "COHORT_ERR_TIMEOUT" style names for logs and tests. Never NULL. */
COHORT_API const char *cohort_status_name(cohort_status s);

#ifdef __cplusplus
}
#endif
#endif /* COHORT_STATUS_H */

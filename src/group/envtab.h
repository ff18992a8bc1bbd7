/*
 * envtab.h - the one table of COHORT_* environment variables.
 *
 * cohort_init refuses an environment holding a COHORT_* name that is not in
 * the table (with a did-you-mean) or a value the table's rule rejects, so a
 * typo fails at init instead of being ignored. Every COHORT_* variable read
 * anywhere (library, cohortrun, tools, tests) must have a row: the test
 * test_group_env checks the sources and docs/concepts.md against it.
 */
#ifndef COH_ENVTAB_H
#define COH_ENVTAB_H

#include <stddef.h>

#include "cohort_status.h"

typedef enum coh_env_kind {
    COH_ENV_STRING,  /* any non-empty value (paths, addresses, secrets) */
    COH_ENV_CHOICE,  /* one of choices, '|'-separated */
    COH_ENV_LIST,    /* a ','-separated list of choices */
    COH_ENV_INT,     /* a decimal integer in [lo, hi] */
    COH_ENV_SECONDS, /* a finite number of seconds in (0, hi] */
    COH_ENV_ALGO,    /* COHORT_ALGO_<OP>: auto or an algorithm of <OP> */
} coh_env_kind;

/* Who reads the variable (documentation and the launcher's view). */
typedef enum coh_env_user {
    COH_ENV_LIB,      /* libcohort (cohort_init and what it starts) */
    COH_ENV_LAUNCHER, /* set by cohortrun for its workers */
    COH_ENV_TOOLS,    /* read by cohort's tools, tests or scripts only */
} coh_env_user;

typedef struct coh_envvar {
    const char *name; /* ends in '_' for a prefix family (COHORT_ALGO_) */
    coh_env_kind kind;
    coh_env_user user;
    const char *choices; /* CHOICE / LIST */
    long lo, hi;         /* INT; SECONDS: hi only */
} coh_envvar;

/* The rows, terminated by a NULL name. */
const coh_envvar *coh_env_table(void);
/* The row for a full variable name, or NULL. */
const coh_envvar *coh_env_lookup(const char *name);
/* Checks one name=value against the table: COHORT_OK, or INVALID with a
 * message naming the variable (and the closest known name for a typo). */
cohort_status coh_env_check_one(const char *name, const char *value, char *msg, size_t len);
/* Checks every COHORT_* variable of the process environment; on failure
 * records the message (cohort_last_error(NULL)) and returns INVALID. */
cohort_status coh_env_check_all(void);

/* Strict integer parsing for settings (RANK=4294967296 must not become 0):
 * 1 and *out on success, 0 if unset/empty, -1 if not an integer in [lo, hi]. */
int coh_env_int_in(const char *name, long lo, long hi, long *out);

#endif

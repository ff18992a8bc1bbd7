/*
 * tokenfile.h - token files of the store tools (cohort-store, cohort-kv, and
 * launchers that start a standalone store).
 *
 * Format: one job per line, "job_id token", separated by blanks; blank lines
 * and lines starting with '#' are ignored. A file holding a single line with
 * one word is "just a token" (for cohort-kv with --job given).
 */
#ifndef COH_STORE_TOKENFILE_H
#define COH_STORE_TOKENFILE_H

#include "cohort_status.h"

typedef struct coh_tokenfile {
    int n;
    char **jobs;   /* NULL entry: a token-only line */
    char **tokens;
} coh_tokenfile;

/* Reads path. On failure the detail is in cohort_last_error(NULL)
 * (COHORT_ERR_INVALID naming the line, or COHORT_ERR_SYSTEM). Warns on
 * stderr when the file is readable by group or others. */
cohort_status coh_tokenfile_read(const char *path, coh_tokenfile *out);
/* The token for job (or the token-only line's); NULL if none. */
const char *coh_tokenfile_find(const coh_tokenfile *tf, const char *job);
void coh_tokenfile_free(coh_tokenfile *tf);

#endif

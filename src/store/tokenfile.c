/* tokenfile.c - "job_id token" files for the store tools (cohort_store.h).
 *
 * Tokens are secrets: the read buffer is wiped after parsing, freed tokens
 * are wiped, and a file readable by others gets a warning (not an error: a
 * CI secret mounted 0644 should still work, but visibly). */
#include "cohort_store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "util/util.h"

struct cohort_store_tokenfile {
    int n;
    char **jobs; /* NULL entry: a token-only line */
    char **tokens;
};

static int add(cohort_store_tokenfile *tf, const char *job, const char *tok)
{
    char **j = coh_realloc(tf->jobs, (size_t)(tf->n + 1) * sizeof *j);
    if (!j)
        return -1;
    tf->jobs = j;
    char **t = coh_realloc(tf->tokens, (size_t)(tf->n + 1) * sizeof *t);
    if (!t)
        return -1;
    tf->tokens = t;
    tf->jobs[tf->n] = job ? coh_strdup(job) : NULL;
    tf->tokens[tf->n] = coh_strdup(tok);
    if ((job && !tf->jobs[tf->n]) || !tf->tokens[tf->n]) {
        coh_free(tf->jobs[tf->n]);
        coh_free(tf->tokens[tf->n]);
        return -1;
    }
    tf->n++;
    return 0;
}

/* Line numbers in errors point at the offending line; a line with one word
 * is a bare token (cohort-kv with --job), two words a job and its token. */
cohort_status cohort_store_tokenfile_read(const char *path, cohort_store_tokenfile **out)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "token file: NULL argument");
    cohort_store_tokenfile *tf = coh_calloc(1, sizeof *tf);
    if (!tf)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "token file %s", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        coh_free(tf);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "fopen", e, "token file %s", path);
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
        fprintf(stderr, "warning: token file %s is readable by group or others (chmod 600)\n",
                path);
    char line[4096];
    int ln = 0;
    cohort_status rc = COHORT_OK;
    while (fgets(line, sizeof line, f)) {
        ln++;
        size_t l = strlen(line);
        if (l == sizeof line - 1 && line[l - 1] != '\n') {
            rc = coh_err_set(NULL, COHORT_ERR_INVALID, "token file %s:%d: line too long", path, ln);
            break;
        }
        char *save = NULL;
        char *a = strtok_r(line, " \t\r\n", &save);
        if (!a || a[0] == '#')
            continue;
        char *b = strtok_r(NULL, " \t\r\n", &save);
        char *c = b ? strtok_r(NULL, " \t\r\n", &save) : NULL;
        if (c) {
            rc = coh_err_set(NULL, COHORT_ERR_INVALID,
                             "token file %s:%d: expected 'job_id token', found more words", path,
                             ln);
            break;
        }
        if (add(tf, b ? a : NULL, b ? b : a) < 0) {
            rc = coh_err_set(NULL, COHORT_ERR_NOMEM, "token file %s", path);
            break;
        }
    }
    /* A read error (EISDIR: a directory opens fine) is not "no token". */
    if (rc == COHORT_OK && ferror(f))
        rc = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "read", errno, "token file %s", path);
    sodium_memzero(line, sizeof line);
    fclose(f);
    if (rc == COHORT_OK && tf->n == 0)
        rc = coh_err_set(NULL, COHORT_ERR_INVALID, "token file %s holds no token", path);
    if (rc) {
        cohort_store_tokenfile_free(tf);
        return rc;
    }
    *out = tf;
    return COHORT_OK;
}

int cohort_store_tokenfile_count(const cohort_store_tokenfile *tf) { return tf ? tf->n : 0; }

const char *const *cohort_store_tokenfile_jobs(const cohort_store_tokenfile *tf)
{
    return tf ? (const char *const *)tf->jobs : NULL;
}

const char *const *cohort_store_tokenfile_tokens(const cohort_store_tokenfile *tf)
{
    return tf ? (const char *const *)tf->tokens : NULL;
}

const char *cohort_store_tokenfile_find(const cohort_store_tokenfile *tf, const char *job)
{
    if (!tf)
        return NULL;
    for (int i = 0; i < tf->n; i++)
        if (!tf->jobs[i] || (job && !strcmp(tf->jobs[i], job)))
            return tf->tokens[i];
    return NULL;
}

void cohort_store_tokenfile_free(cohort_store_tokenfile *tf)
{
    if (!tf)
        return;
    for (int i = 0; i < tf->n; i++) {
        coh_free(tf->jobs[i]);
        if (tf->tokens[i])
            sodium_memzero(tf->tokens[i], strlen(tf->tokens[i]));
        coh_free(tf->tokens[i]);
    }
    coh_free(tf->jobs);
    coh_free(tf->tokens);
    coh_free(tf);
}

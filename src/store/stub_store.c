/* stub_store.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "cohort_store.h"
#include <stddef.h>

cohort_status cohort_store_server_start(cohort_store_server **out, const cohort_store_server_opts *opts)
{
    (void)out;
    (void)opts;
    return COHORT_ERR_UNSUPPORTED;
}

int cohort_store_server_port(const cohort_store_server *s)
{
    (void)s;
    return 0;
}

cohort_status cohort_store_server_add_job(cohort_store_server *s, const char *job_id, const char *token)
{
    (void)s;
    (void)job_id;
    (void)token;
    return COHORT_ERR_UNSUPPORTED;
}

void cohort_store_server_stop(cohort_store_server *s)
{
    (void)s;
}

cohort_status cohort_store_server_run(cohort_store_server *s, volatile int *stop_flag)
{
    (void)s;
    (void)stop_flag;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_server_create(cohort_store_server **out, const cohort_store_server_opts *opts)
{
    (void)out;
    (void)opts;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_connect(cohort_store **out, const char *addr, const char *job_id, const char *token, int timeout_ms)
{
    (void)out;
    (void)addr;
    (void)job_id;
    (void)token;
    (void)timeout_ms;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_prefixed(cohort_store *s, const char *prefix, cohort_store **out)
{
    (void)s;
    (void)prefix;
    (void)out;
    return COHORT_ERR_UNSUPPORTED;
}

void cohort_store_close(cohort_store *s)
{
    (void)s;
}

void cohort_store_set_timeout(cohort_store *s, int timeout_ms)
{
    (void)s;
    (void)timeout_ms;
}

const char * cohort_store_last_error(const cohort_store *s)
{
    (void)s;
    return NULL;
}

cohort_status cohort_store_set(cohort_store *s, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)s;
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_get(cohort_store *s, const void *key, size_t klen, void **val, size_t *vlen, int timeout_ms)
{
    (void)s;
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    (void)timeout_ms;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_add(cohort_store *s, const void *key, size_t klen, int64_t delta, int64_t *result)
{
    (void)s;
    (void)key;
    (void)klen;
    (void)delta;
    (void)result;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_compare_set(cohort_store *s, const void *key, size_t klen, const void *expected, size_t elen, const void *desired, size_t dlen, void **cur, size_t *curlen)
{
    (void)s;
    (void)key;
    (void)klen;
    (void)expected;
    (void)elen;
    (void)desired;
    (void)dlen;
    (void)cur;
    (void)curlen;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_check(cohort_store *s, const void *const *keys, const size_t *klens, int n, int *all_exist)
{
    (void)s;
    (void)keys;
    (void)klens;
    (void)n;
    (void)all_exist;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_wait(cohort_store *s, const void *const *keys, const size_t *klens, int n, int timeout_ms)
{
    (void)s;
    (void)keys;
    (void)klens;
    (void)n;
    (void)timeout_ms;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_wait_any(cohort_store *s, const void *const *keys, const size_t *klens, int n, int timeout_ms, int *which)
{
    (void)s;
    (void)keys;
    (void)klens;
    (void)n;
    (void)timeout_ms;
    (void)which;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_delete(cohort_store *s, const void *key, size_t klen, int *deleted)
{
    (void)s;
    (void)key;
    (void)klen;
    (void)deleted;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_num_keys(cohort_store *s, int64_t *n)
{
    (void)s;
    (void)n;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_list(cohort_store *s, const char *sub, char ***keys, size_t **klens, int *n)
{
    (void)s;
    (void)sub;
    (void)keys;
    (void)klens;
    (void)n;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_multi_get(cohort_store *s, const void *const *keys, const size_t *klens, int n, void **vals, size_t *vlens, int timeout_ms)
{
    (void)s;
    (void)keys;
    (void)klens;
    (void)n;
    (void)vals;
    (void)vlens;
    (void)timeout_ms;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_multi_set(cohort_store *s, const void *const *keys, const size_t *klens, const void *const *vals, const size_t *vlens, int n)
{
    (void)s;
    (void)keys;
    (void)klens;
    (void)vals;
    (void)vlens;
    (void)n;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_append(cohort_store *s, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)s;
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_barrier(cohort_store *s, const char *name, int n, int timeout_ms)
{
    (void)s;
    (void)name;
    (void)n;
    (void)timeout_ms;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_sets(cohort_store *s, const char *key, const char *val)
{
    (void)s;
    (void)key;
    (void)val;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_store_gets(cohort_store *s, const char *key, char **val, int timeout_ms)
{
    (void)s;
    (void)key;
    (void)val;
    (void)timeout_ms;
    return COHORT_ERR_UNSUPPORTED;
}


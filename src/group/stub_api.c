/* stub_api.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "cohort.h"
#include <stddef.h>

size_t cohort_dtype_size(cohort_dtype dt)
{
    (void)dt;
    return 0;
}

const char * cohort_dtype_name(cohort_dtype dt)
{
    (void)dt;
    return NULL;
}

const char * cohort_op_name(cohort_op op)
{
    (void)op;
    return NULL;
}

void cohort_options_init(cohort_options *o)
{
    (void)o;
}

cohort_status cohort_init(cohort_group **group)
{
    (void)group;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_init_opts(cohort_group **group, const cohort_options *o)
{
    (void)group;
    (void)o;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_finalize(cohort_group *group)
{
    (void)group;
    return COHORT_ERR_UNSUPPORTED;
}

int cohort_rank(const cohort_group *g)
{
    (void)g;
    return 0;
}

int cohort_size(const cohort_group *g)
{
    (void)g;
    return 0;
}

uint32_t cohort_generation(const cohort_group *g)
{
    (void)g;
    return 0;
}

const char * cohort_last_error(const cohort_group *g)
{
    (void)g;
    return NULL;
}

cohort_status cohort_abort(cohort_group *g, const char *reason)
{
    (void)g;
    (void)reason;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_split(cohort_group *g, int color, int key, cohort_group **out)
{
    (void)g;
    (void)color;
    (void)key;
    (void)out;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_new_group(cohort_group *g, const int *ranks, int n, cohort_group **out)
{
    (void)g;
    (void)ranks;
    (void)n;
    (void)out;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_all_reduce_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_op op)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)op;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_broadcast_at(const char *file, int line, cohort_group *g, void *buf, size_t count, cohort_dtype dt, int root)
{
    (void)file;
    (void)line;
    (void)g;
    (void)buf;
    (void)count;
    (void)dt;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_reduce_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_op op, int root)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)op;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_all_gather_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_gather_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, int root)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_scatter_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, int root)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_reduce_scatter_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_op op)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)op;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_all_to_all_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_barrier_at(const char *file, int line, cohort_group *g)
{
    (void)file;
    (void)line;
    (void)g;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_send_at(const char *file, int line, cohort_group *g, const void *buf, size_t count, cohort_dtype dt, int peer, int tag)
{
    (void)file;
    (void)line;
    (void)g;
    (void)buf;
    (void)count;
    (void)dt;
    (void)peer;
    (void)tag;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_recv_at(const char *file, int line, cohort_group *g, void *buf, size_t count, cohort_dtype dt, int peer, int tag)
{
    (void)file;
    (void)line;
    (void)g;
    (void)buf;
    (void)count;
    (void)dt;
    (void)peer;
    (void)tag;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_all_reduce_async_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_op op, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)op;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_broadcast_async_at(const char *file, int line, cohort_group *g, void *buf, size_t count, cohort_dtype dt, int root, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)buf;
    (void)count;
    (void)dt;
    (void)root;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_reduce_async_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_op op, int root, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)op;
    (void)root;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_all_gather_async_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_gather_async_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, int root, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)root;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_scatter_async_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, int root, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)root;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_reduce_scatter_async_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_op op, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)op;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_all_to_all_async_at(const char *file, int line, cohort_group *g, const void *send, void *recv, size_t count, cohort_dtype dt, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dt;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_barrier_async_at(const char *file, int line, cohort_group *g, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_send_async_at(const char *file, int line, cohort_group *g, const void *buf, size_t count, cohort_dtype dt, int peer, int tag, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)buf;
    (void)count;
    (void)dt;
    (void)peer;
    (void)tag;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_recv_async_at(const char *file, int line, cohort_group *g, void *buf, size_t count, cohort_dtype dt, int peer, int tag, cohort_work **work)
{
    (void)file;
    (void)line;
    (void)g;
    (void)buf;
    (void)count;
    (void)dt;
    (void)peer;
    (void)tag;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_work_test(cohort_work *w, int *done)
{
    (void)w;
    (void)done;
    return COHORT_ERR_UNSUPPORTED;
}

void cohort_work_free(cohort_work *w)
{
    (void)w;
}


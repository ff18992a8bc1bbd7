/*
 * backend.h - the store client's backend vtable. cohort_store_connect picks
 * the backend from the address scheme: "host:port" / "tcp://" -> tcp (the
 * cohort store protocol), "etcd://" -> etcd (optional, COHORT_ETCD: a plugin, etcd_load.c). The
 * prefix wrapper is backend-independent (src/store/client.c).
 *
 * Every op has the same meaning as the public cohort_store_* function; keys
 * arrive already prefixed. Backends record failures in the handle's error
 * (coh_store_err) and return the status.
 */
#ifndef COH_STORE_BACKEND_H
#define COH_STORE_BACKEND_H

#include "cohort_store.h"
#include "util/util.h"

typedef struct coh_store_backend {
    const char *scheme; /* "tcp", "etcd" */
    cohort_status (*connect)(cohort_store *s, const char *addr, const char *job_id,
                             const char *token, uint32_t generation, int timeout_ms);
    void (*close)(cohort_store *s);
    cohort_status (*set)(cohort_store *s, const void *k, size_t kl, const void *v, size_t vl);
    cohort_status (*get)(cohort_store *s, const void *k, size_t kl, void **v, size_t *vl,
                         int timeout_ms);
    cohort_status (*add)(cohort_store *s, const void *k, size_t kl, int64_t d, int64_t *res);
    cohort_status (*compare_set)(cohort_store *s, const void *k, size_t kl, const void *e,
                                 size_t el, const void *d, size_t dl, void **cur, size_t *curl);
    cohort_status (*check)(cohort_store *s, const void *const *k, const size_t *kl, int n,
                           int *all);
    cohort_status (*wait)(cohort_store *s, const void *const *k, const size_t *kl, int n,
                          int any, int timeout_ms, int *which);
    cohort_status (*del)(cohort_store *s, const void *k, size_t kl, int *deleted);
    cohort_status (*num_keys)(cohort_store *s, const void *prefix, size_t pl, int64_t *n);
    cohort_status (*list)(cohort_store *s, const void *prefix, size_t pl, char ***keys,
                          size_t **klens, int *n);
    cohort_status (*multi_get)(cohort_store *s, const void *const *k, const size_t *kl, int n,
                               void **v, size_t *vl, int timeout_ms);
    cohort_status (*multi_set)(cohort_store *s, const void *const *k, const size_t *kl,
                               const void *const *v, const size_t *vl, int n);
    cohort_status (*append)(cohort_store *s, const void *k, size_t kl, const void *v, size_t vl);
    cohort_status (*barrier)(cohort_store *s, const void *name, size_t nl, int n, int timeout_ms);
    /* Optional (NULL: set_nowait is a set, flush has nothing to wait for). */
    cohort_status (*set_nowait)(cohort_store *s, const void *k, size_t kl, const void *v,
                                size_t vl);
    cohort_status (*flush)(cohort_store *s);
} coh_store_backend;

/* For backends (src/store/client.c implements these):
 * - coh_store_err(s): where an op records its failure detail (it is copied
 *   into cohort_store_last_error(s) when the op returns an error; NULL-safe).
 * - coh_store_priv / coh_store_set_priv: the backend's connection state. A
 *   prefixed view shares its root's, so ops called on a view see the root's.
 * - coh_store_timeout(s): the handle's default timeout (ms) for ops that
 *   take none (set, add, ...); waiting ops get theirs resolved already.
 * - coh_store_addr(s): the address the handle was connected with. */
coh_err *coh_store_err(cohort_store *s);
void *coh_store_priv(cohort_store *s);
void coh_store_set_priv(cohort_store *s, void *priv);
int coh_store_timeout(cohort_store *s);
const char *coh_store_addr(cohort_store *s);
/* The backend a handle uses (tools: is this a tcp handle?). */
const coh_store_backend *coh_store_backend_of(cohort_store *s);
/* The prefix a view puts before every key (NULL, *len 0 for a root): for
 * backend calls outside the vtable (coh_store_etcd_put_lease). */
const void *coh_store_prefix(cohort_store *s, size_t *len);

extern const coh_store_backend coh_store_tcp_backend;
/* torch://host:port: a PyTorch TCPStore (torch_client.c). */
extern const coh_store_backend coh_store_torch_backend;
/* The etcd backend, from the plugin libcohort-etcd.so loaded on first use
 * (etcd_load.c); NULL when it cannot be loaded or COHORT_ETCD is off, and
 * then coh_store_etcd_unavailable() says why (names each file tried and
 * dlerror's reason). */
const coh_store_backend *coh_store_etcd_backend(void);
const char *coh_store_etcd_unavailable(void);

/* Connect with an explicit generation: the server refuses generations older
 * than the newest it has seen for the job (COHORT_ERR_AUTH, "stale
 * generation"). 0: tools and humans, never raises the job's generation. */
cohort_status coh_store_connect_gen(cohort_store **out, const char *addr, const char *job_id,
                                    const char *token, uint32_t generation, int timeout_ms);

#endif

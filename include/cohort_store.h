/*
 * cohort_store.h - the rendezvous key-value store (usable on its own).
 *
 * A store server holds keys per job: a client proves its job id with a MAC
 * over a fresh server nonce keyed by the job token, and then sees only that
 * job's keys. Keys and values are binary-safe (pointer + length). Waiting
 * calls are woken by the server when keys change; nothing polls.
 *
 * Client handles are thread-safe: calls from several threads are serialised
 * on the one connection (a waiting call does not block calls on other
 * handles; open a second handle for a background waiter).
 */
#ifndef COHORT_STORE_H
#define COHORT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "cohort_status.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef struct cohort_store cohort_store;
typedef struct cohort_store_server cohort_store_server;

/* ---- server ---------------------------------------------------------------- */

typedef struct cohort_store_server_opts {
    const char *bind_addr;  /* "127.0.0.1", "0.0.0.0", "::"; NULL: 0.0.0.0 */
    int port;               /* 0: pick a free port */
    /* Jobs the server accepts: parallel arrays of n_jobs job ids and tokens.
     * The embedded server of a job has exactly one. */
    const char *const *job_ids;
    const char *const *tokens;
    int n_jobs;
    size_t max_key;         /* 0: 4 KiB */
    size_t max_value;       /* 0: 64 MiB */
    int max_clients;        /* 0: 65536 */
    size_t max_memory;      /* 0: 1 GiB: everything, all jobs */
    /* A connection that holds half a frame this long without sending a byte
     * is closed. 0: 10000 ms. (since 0.1) */
    int frame_timeout_ms;
    /* A connection must authenticate this long after it was accepted, bytes
     * or not. 0: 5000 ms. (since 0.2) */
    int auth_timeout_ms;
    /* Connections accepted but not yet authenticated, at most. At this cap
     * (and at max_clients or the descriptor limit) the oldest of them that
     * had 250 ms to authenticate is closed to make room; authenticated
     * clients are never closed for room. 0: 1024. (since 0.2) */
    int max_unauth;
    /* Memory of one job: its keys, values, waiters, barriers, and what its
     * connections hold (request bodies as they arrive, reply bytes queued).
     * 0: max_memory / n_jobs, so no job can take another's share. (since 0.2) */
    size_t max_job_memory;
    /* What one connection may hold: the request body arriving, input not yet
     * handled, reply bytes queued. 0: the largest request frame + 8 MiB.
     * (since 0.2) */
    size_t max_conn_memory;
} cohort_store_server_opts;

/* Starts the server on its own thread; returns once it listens. */
COHORT_API cohort_status cohort_store_server_start(cohort_store_server **out,
                                                   const cohort_store_server_opts *opts);
COHORT_API int cohort_store_server_port(const cohort_store_server *s);
/* Adds a job (id, token) to a running server (thread-safe). */
COHORT_API cohort_status cohort_store_server_add_job(cohort_store_server *s, const char *job_id,
                                                     const char *token);
/* Stops the thread, closes every client (they see COHORT_ERR_STORE), frees. */
COHORT_API void cohort_store_server_stop(cohort_store_server *s);
/* Runs the server loop on the calling thread until cohort_store_server_stop()
 * is called from another thread or a signal handler sets *stop_flag. */
COHORT_API cohort_status cohort_store_server_run(cohort_store_server *s, volatile int *stop_flag);
/* Creates a server without starting its thread (for cohort-store). */
COHORT_API cohort_status cohort_store_server_create(cohort_store_server **out,
                                                    const cohort_store_server_opts *opts);

/* ---- client ---------------------------------------------------------------- */

/* addr: "host:port", "[v6]:port" or "tcp://host:port"; with the etcd backend
 * built, "etcd://host:port[,host:port]/prefix". Retries with exponential
 * backoff and jitter until timeout_ms (the server may start later). */
COHORT_API cohort_status cohort_store_connect(cohort_store **out, const char *addr,
                                              const char *job_id, const char *token,
                                              int timeout_ms);
/* A view of s whose keys all live under prefix (e.g. "gen3/grp0/"). It shares
 * the parent's connection; free it before the parent. */
COHORT_API cohort_status cohort_store_prefixed(cohort_store *s, const char *prefix,
                                               cohort_store **out);
COHORT_API void cohort_store_close(cohort_store *s);
/* Default timeout for calls that take none, ms. */
COHORT_API void cohort_store_set_timeout(cohort_store *s, int timeout_ms);
/* Human-readable detail of the last failure on this handle ("" if none). */
COHORT_API const char *cohort_store_last_error(const cohort_store *s);

/* Returns once the server has applied the set. */
COHORT_API cohort_status cohort_store_set(cohort_store *s, const void *key, size_t klen,
                                          const void *val, size_t vlen);
/* Pipelined set: returns once the request is handed to the connection (no
 * round trip), like TCPStore's set. The server applies it in order with the
 * handle's other calls, so a later get on this handle sees it. A failure to
 * apply it (store memory limit) is reported by the handle's next call, which
 * is then not performed, or by cohort_store_flush; a lost connection fails
 * every later call as usual. Backends without pipelining (etcd) do a set. */
COHORT_API cohort_status cohort_store_set_nowait(cohort_store *s, const void *key, size_t klen,
                                                 const void *val, size_t vlen);
/* Waits until every earlier set_nowait of the handle was applied (one round
 * trip); returns the first failure among them, if any. */
COHORT_API cohort_status cohort_store_flush(cohort_store *s);
/* Waits until key exists (timeout_ms < 0: handle default). *val is malloc'd;
 * free() it. COHORT_ERR_TIMEOUT if it never appears. */
COHORT_API cohort_status cohort_store_get(cohort_store *s, const void *key, size_t klen, void **val,
                                          size_t *vlen, int timeout_ms);
/* Atomic add on a 64-bit counter (missing key counts as 0). */
COHORT_API cohort_status cohort_store_add(cohort_store *s, const void *key, size_t klen,
                                          int64_t delta, int64_t *result);
/* If the current value equals expected (expected NULL/elen 0 with a missing
 * key: create), set desired. *cur (malloc'd, may be NULL) receives the value
 * after the call, so the caller can tell whether it won. */
COHORT_API cohort_status cohort_store_compare_set(cohort_store *s, const void *key, size_t klen,
                                                  const void *expected, size_t elen,
                                                  const void *desired, size_t dlen, void **cur,
                                                  size_t *curlen);
/* Non-blocking: *all_exist = 1 if every key exists. */
COHORT_API cohort_status cohort_store_check(cohort_store *s, const void *const *keys,
                                            const size_t *klens, int n, int *all_exist);
/* Waits until every key exists, or timeout. */
COHORT_API cohort_status cohort_store_wait(cohort_store *s, const void *const *keys,
                                           const size_t *klens, int n, int timeout_ms);
/* Waits until any key exists; *which = its index. */
COHORT_API cohort_status cohort_store_wait_any(cohort_store *s, const void *const *keys,
                                               const size_t *klens, int n, int timeout_ms,
                                               int *which);
COHORT_API cohort_status cohort_store_delete(cohort_store *s, const void *key, size_t klen,
                                             int *deleted);
/* Keys of this job (under this handle's prefix). */
COHORT_API cohort_status cohort_store_num_keys(cohort_store *s, int64_t *n);
/* Keys under this handle's prefix whose names start with sub; *keys and each
 * element are malloc'd (free each, then the array). */
COHORT_API cohort_status cohort_store_list(cohort_store *s, const char *sub, char ***keys,
                                           size_t **klens, int *n);
/* Waits for every key; vals[i] malloc'd. */
COHORT_API cohort_status cohort_store_multi_get(cohort_store *s, const void *const *keys,
                                                const size_t *klens, int n, void **vals,
                                                size_t *vlens, int timeout_ms);
COHORT_API cohort_status cohort_store_multi_set(cohort_store *s, const void *const *keys,
                                                const size_t *klens, const void *const *vals,
                                                const size_t *vlens, int n);
/* Appends to a value (creates it). */
COHORT_API cohort_status cohort_store_append(cohort_store *s, const void *key, size_t klen,
                                             const void *val, size_t vlen);
/* Server-side barrier: returns when n clients have entered barrier `name`
 * (each name is single use), or timeout. */
COHORT_API cohort_status cohort_store_barrier(cohort_store *s, const char *name, int n,
                                              int timeout_ms);

/* NUL-terminated string conveniences. */
COHORT_API cohort_status cohort_store_sets(cohort_store *s, const char *key, const char *val);
/* *val is a malloc'd NUL-terminated copy. */
COHORT_API cohort_status cohort_store_gets(cohort_store *s, const char *key, char **val,
                                           int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* COHORT_STORE_H */

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

/* A listener speaking PyTorch TCPStore's protocol (torch 1.13 and 2.x; see
 * docs/torch-store.md), added to a server made by cohort_store_server_create
 * before it runs. Its clients do not authenticate: they all act in job
 * job_id (NULL: the server's only job). host is the bind address (NULL: all);
 * port 0 picks one. COHORT_ERR_INVALID for a NULL, running or already
 * listening server, a port outside 0..65535, an unknown job. (since 0.3) */
COHORT_API cohort_status cohort_store_server_torch_listen(cohort_store_server *s, const char *host,
                                                          int port, const char *job_id);
/* The torch listener's port; 0 without one (or s NULL). (since 0.3) */
COHORT_API int cohort_store_server_torch_port(const cohort_store_server *s);

/* ---- token files (since 0.3) -------------------------------------------------- */

/* A token file names the jobs a standalone server accepts (cohort-store
 * --token-file) or the token a client presents (cohort-kv --token-file):
 * one job per line, "job_id token" separated by blanks; blank lines and
 * lines starting with '#' are ignored; a line with a single word is a bare
 * token (a client that names its job elsewhere). Tokens are secrets: the
 * read buffer and freed tokens are wiped, and a file readable by group or
 * others gets a warning on stderr. */
typedef struct cohort_store_tokenfile cohort_store_tokenfile;

/* Reads path into *out. COHORT_ERR_INVALID naming the line (more than two
 * words, a line over 4 KiB, no token at all, NULL arguments),
 * COHORT_ERR_SYSTEM when it cannot be opened; detail in
 * cohort_last_error(NULL). On failure *out is NULL. */
COHORT_API cohort_status cohort_store_tokenfile_read(const char *path,
                                                     cohort_store_tokenfile **out);
/* Lines read (>= 1); 0 for NULL. */
COHORT_API int cohort_store_tokenfile_count(const cohort_store_tokenfile *tf);
/* Parallel arrays of count entries, valid until the free: job ids (a NULL
 * entry is a bare-token line) and tokens. They fit
 * cohort_store_server_opts.job_ids / tokens. NULL for NULL. */
COHORT_API const char *const *cohort_store_tokenfile_jobs(const cohort_store_tokenfile *tf);
COHORT_API const char *const *cohort_store_tokenfile_tokens(const cohort_store_tokenfile *tf);
/* The token of job, or of the first bare-token line before it; NULL if
 * none (or tf NULL). */
COHORT_API const char *cohort_store_tokenfile_find(const cohort_store_tokenfile *tf,
                                                   const char *job);
/* Wipes the tokens and frees (NULL: nothing). */
COHORT_API void cohort_store_tokenfile_free(cohort_store_tokenfile *tf);

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

/* ---- administration (tcp backend; since 0.3) ---------------------------------- */

/* What the server reports to a client of a job (cohort-kv stats). */
typedef struct cohort_store_stats {
    int64_t conns;       /* connections to the server, all jobs */
    int64_t job_conns;   /* authenticated connections of this job */
    int64_t waiters;     /* this job's requests waiting (get/wait/multi_get/barrier) */
    int64_t keys;        /* this job's keys */
    int64_t mem_used;    /* bytes charged to max_memory, all jobs */
    int64_t max_memory;
    uint32_t generation; /* the job's newest generation */
} cohort_store_stats;

/* The server's counters. COHORT_ERR_UNSUPPORTED on a handle of another
 * backend (etcd), COHORT_ERR_INVALID for NULL arguments. */
COHORT_API cohort_status cohort_store_get_stats(cohort_store *s, cohort_store_stats *out);
/* One round trip to the server. COHORT_ERR_UNSUPPORTED on another backend. */
COHORT_API cohort_status cohort_store_ping(cohort_store *s);
/* Operator command (the handle must be connected with generation 0: an
 * operator, not a rank): sets the job's generation to gen and closes the
 * job's connections of any other non-zero generation. *prev (may be NULL)
 * gets the old one. COHORT_ERR_AUTH from a rank's handle,
 * COHORT_ERR_UNSUPPORTED on another backend. */
COHORT_API cohort_status cohort_store_set_generation(cohort_store *s, uint32_t gen,
                                                     uint32_t *prev);

/* NUL-terminated string conveniences. */
COHORT_API cohort_status cohort_store_sets(cohort_store *s, const char *key, const char *val);
/* *val is a malloc'd NUL-terminated copy. */
COHORT_API cohort_status cohort_store_gets(cohort_store *s, const char *key, char **val,
                                           int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* COHORT_STORE_H */

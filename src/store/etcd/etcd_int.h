/*
 * etcd_int.h - private to src/store/etcd: an etcd v3 client over the JSON
 * gateway (libcurl + jansson), independent of cohort_store so that the
 * backend glue (etcd_backend.c) stays a thin adapter.
 *
 * Layers:
 *   etcd_http.c   endpoints, one HTTP connection (coh_etcd_conn), unary calls
 *                 with failover / retry / re-authentication, watch streams
 *   etcd_kv.c     the store operations mapped onto range/put/txn/watch
 *   etcd_lease.c  the per-handle lease and its keep-alive thread
 *
 * Key layout (docs/etcd.md): every key of a job lives under
 *   /<prefix>/<job>/k/<user key>      user keys (what list/num_keys see)
 *   /<prefix>/<job>/m/...             backend metadata (generation, op
 *                                     markers, barriers)
 * so one etcd role with a prefix permission on /<prefix>/<job>/ covers a job.
 *
 * Threads: a coh_etcd is used by one thread at a time (the glue serialises
 * calls on e->mu); the keep-alive thread owns its own connection and touches
 * only e->lease under e->lease.mu. coh_etcd_cfg is immutable after open.
 */
#ifndef COH_STORE_ETCD_INT_H
#define COH_STORE_ETCD_INT_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "util/util.h"

/* etcd's default --max-txn-ops: bigger batches are split. */
#define ETCD_TXN_MAX_OPS 128
/* Largest key a caller may pass (same bound as the cohort store server). */
#define ETCD_MAX_KEY 4096
/* Largest response body accepted (a list of a huge job, say). */
#define ETCD_MAX_RESPONSE ((size_t)1 << 30)

enum { ETCD_AUTH_AUTO = 0, ETCD_AUTH_ON = 1, ETCD_AUTH_OFF = 2 };

/* Immutable after coh_etcd_open: shared by the op and keep-alive threads. */
typedef struct coh_etcd_cfg {
    int n_ep;
    char **urls;       /* "http://host:port" (https for etcds://) per endpoint */
    char *ep_list;     /* "host:port,host:port" for messages */
    char *job;         /* auth user name */
    char *password;    /* job token; never logged, wiped on close */
    int auth_mode;     /* ETCD_AUTH_* (COHORT_ETCD_AUTH) */
    char *root;        /* "/<prefix>/<job>/" */
    size_t root_len;
    char *kroot;       /* root + "k/": user keys */
    size_t kroot_len;
    char *mroot;       /* root + "m/": backend metadata */
    size_t mroot_len;
    int req_timeout_ms; /* one HTTP attempt (COHORT_ETCD_REQUEST_TIMEOUT, ms) */
    int tls;            /* etcds://: https, peer and host verified */
    int remote_plain;   /* plain http to a member that is not loopback */
    char *cacert;       /* COHORT_ETCD_CACERT (NULL: the system's CAs) */
    char *cert, *key;   /* COHORT_ETCD_CERT / COHORT_ETCD_KEY: client certificate */
    int lease_ttl_s;    /* COHORT_ETCD_LEASE_TTL */
} coh_etcd_cfg;

/* One HTTP client: a curl handle with its connection cache, the endpoint it
 * talks to, and the auth token that member issued (simple tokens are local
 * to the member that issued them, so a failover re-authenticates). */
typedef struct coh_etcd_conn {
    const coh_etcd_cfg *cfg;
    CURL *curl;
    CURL *wcurl;        /* watch streams (op connection only); closed per wait */
    int ep;             /* current endpoint index */
    char *auth;         /* etcd auth token (coh_malloc'd) or NULL */
    int auth_ep;        /* endpoint that issued auth */
    int auth_on;        /* 1: the cluster enforces auth */
    char *body;         /* response accumulator */
    size_t len, cap;
    int failovers;      /* endpoint switches so far (tests, logs) */
    char ebuf[CURL_ERROR_SIZE]; /* curl's detail of the last failure (TLS) */
} coh_etcd_conn;

typedef struct coh_etcd_lease {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int granted;        /* a lease exists (thread running) */
    int stop;           /* asks the keep-alive thread to exit */
    int lost;           /* the lease expired or was refused: leased keys are gone */
    int64_t id;
    int ttl_s;          /* granted TTL */
    pthread_t thr;
    coh_etcd_conn conn; /* owned by the keep-alive thread once it runs */
    char why[512];      /* why it was lost */
} coh_etcd_lease;

typedef struct coh_etcd {
    coh_etcd_cfg cfg;
    coh_etcd_conn conn;
    pthread_mutex_t mu;     /* serialises ops on the handle */
    int timeout_ms;         /* default op timeout (handle default) */
    uint64_t client_id;     /* random: names this handle's op marker key */
    uint64_t op_seq;        /* conditional txns' marker sequence */
    /* The last counter this handle added to, with its value and revision
     * after that add: the next add on it guesses from here (one round trip
     * instead of two when nobody else wrote it meanwhile). */
    unsigned char *ac_key;
    size_t ac_kl;
    int64_t ac_rev, ac_val;
    coh_etcd_lease lease;
} coh_etcd;

/* ---- etcd_http.c ---- */

/* Parses "etcd://host:port[,host:port...]/prefix" (etcds://: TLS) and connects: checks the
 * cluster answers (retrying with backoff until timeout_ms), authenticates
 * when auth is on, and enforces the job's generation (a newer one recorded
 * in etcd -> COHORT_ERR_AUTH "stale generation"). */
cohort_status coh_etcd_open(coh_etcd **out, const char *addr, const char *job, const char *token,
                            uint32_t generation, int timeout_ms, coh_err *err);
/* Revokes the lease (its keys vanish now), stops the keep-alive thread,
 * removes the op marker key, wipes the token, frees. NULL ok. */
void coh_etcd_close(coh_etcd *e);

cohort_status coh_etcd_conn_init(coh_etcd_conn *c, const coh_etcd_cfg *cfg, coh_err *err);
void coh_etcd_conn_fini(coh_etcd_conn *c);

/* POSTs body to path (e.g. "/v3/kv/range"), failing over between endpoints
 * on transport errors and retrying transient cluster errors until deadline.
 * *out is the parsed reply (json_decref it). Statuses: OK, STORE (cluster
 * unreachable or failing; names the endpoints), AUTH (refused, permission
 * denied), TOO_LARGE, INVALID, PROTOCOL (not an etcd gateway), NOT_FOUND
 * (lease not found), NOMEM. body is not consumed. */
cohort_status coh_etcd_call(coh_etcd_conn *c, coh_err *err, const char *path, json_t *body,
                            uint64_t deadline, json_t **out);

/* Watch stream events, delivered to the callback. */
typedef struct etcd_event {
    int is_delete;
    const unsigned char *key; /* full etcd key */
    size_t klen;
    const unsigned char *val;
    size_t vlen;
    int64_t mod_rev;
} etcd_event;
/* Return 1 when done (the stream is closed), 0 to continue, <0 on failure
 * with err set. */
typedef int (*etcd_event_fn)(void *arg, const etcd_event *ev);
/* Called after each watch response that carried events: return 1 if done. */
typedef int (*etcd_batch_fn)(void *arg);

enum { ETCD_WATCH_DONE = 0, ETCD_WATCH_TIMEOUT = 1, ETCD_WATCH_RESTART = 2,
       ETCD_WATCH_ERROR = 3 };
/* Opens one watch stream on the connection's current endpoint with a watch
 * per key (keys[i] full etcd keys; with ends != NULL, each watch covers the
 * range [keys[i], ends[i])) from start_rev, and feeds events until
 * batch() says done, the deadline passes (TIMEOUT), the stream breaks or is
 * cancelled by the server (RESTART: the caller re-reads and re-watches,
 * possibly elsewhere), or fails for good (ERROR, err set, *st the status). */
int coh_etcd_watch(coh_etcd_conn *c, coh_err *err, const void *const *keys, const size_t *klens,
                   const void *const *ends, const size_t *elens, int n, int64_t start_rev, uint64_t deadline, etcd_event_fn ev,
                   etcd_batch_fn batch, void *arg, cohort_status *st);

/* Sleeps ms, cut short at the deadline, without burning CPU. */
void coh_etcd_pause(int ms, uint64_t deadline);
/* Jittered exponential backoff for retry round r: 10 ms doubling to 500 ms. */
int coh_etcd_backoff_ms(int round);

/* Failover to the next endpoint (after a broken watch stream). */
void coh_etcd_next_endpoint(coh_etcd_conn *c, const char *why);

/* ---- JSON helpers (etcd_http.c) ---- */
/* A JSON string with the base64 of p[0..n). NULL on OOM. */
json_t *etcd_b64(const void *p, size_t n);
/* Same for the concatenation a + b (a full key from root and user key). */
json_t *etcd_b64_2(const void *a, size_t an, const void *b, size_t bn);
/* Decodes a base64 string field of obj into a coh_malloc'd buffer (NUL
 * terminated, not counted); absent field -> empty. -1 bad base64, -2 OOM. */
int etcd_unb64(json_t *obj, const char *field, unsigned char **out, size_t *outlen);
/* int64 fields arrive as JSON strings ("revision":"9"); absent -> 0. */
int64_t etcd_int(json_t *obj, const char *field);
/* The range end that selects every key starting with p[0..n). */
json_t *etcd_prefix_end(const void *p, size_t n);

/* ---- etcd_kv.c: the store ops. Keys are user keys (already prefixed by
 * the cohort prefix wrapper), mapped under cfg.root + "k/". timeout_ms < 0:
 * the handle default. Same contracts as cohort_store_*. ---- */
cohort_status coh_etcd_set(coh_etcd *e, coh_err *err, const void *k, size_t kl, const void *v,
                           size_t vl);
cohort_status coh_etcd_get(coh_etcd *e, coh_err *err, const void *k, size_t kl, void **v,
                           size_t *vl, int timeout_ms);
cohort_status coh_etcd_add(coh_etcd *e, coh_err *err, const void *k, size_t kl, int64_t d,
                           int64_t *res);
cohort_status coh_etcd_compare_set(coh_etcd *e, coh_err *err, const void *k, size_t kl,
                                   const void *ex, size_t el, const void *de, size_t dl,
                                   void **cur, size_t *curl);
cohort_status coh_etcd_check(coh_etcd *e, coh_err *err, const void *const *k, const size_t *kl,
                             int n, int *all);
cohort_status coh_etcd_wait(coh_etcd *e, coh_err *err, const void *const *k, const size_t *kl,
                            int n, int any, int timeout_ms, int *which);
cohort_status coh_etcd_del(coh_etcd *e, coh_err *err, const void *k, size_t kl, int *deleted);
cohort_status coh_etcd_num_keys(coh_etcd *e, coh_err *err, const void *p, size_t pl,
                                int64_t *n);
cohort_status coh_etcd_list(coh_etcd *e, coh_err *err, const void *p, size_t pl, char ***keys,
                            size_t **klens, int *n);
cohort_status coh_etcd_multi_get(coh_etcd *e, coh_err *err, const void *const *k,
                                 const size_t *kl, int n, void **v, size_t *vl, int timeout_ms);
cohort_status coh_etcd_multi_set(coh_etcd *e, coh_err *err, const void *const *k,
                                 const size_t *kl, const void *const *v, const size_t *vl, int n);
cohort_status coh_etcd_append(coh_etcd *e, coh_err *err, const void *k, size_t kl, const void *v,
                              size_t vl);
cohort_status coh_etcd_barrier(coh_etcd *e, coh_err *err, const void *name, size_t nl, int n,
                               int timeout_ms);
/* Enforces the generation at connect (see coh_etcd_open). */
cohort_status coh_etcd_check_generation(coh_etcd *e, coh_err *err, uint32_t gen,
                                        uint64_t deadline);

/* ---- etcd_lease.c ---- */
/* Puts user key k bound to the handle's lease, granting the lease and
 * starting its keep-alive thread on first use. STORE if the lease was lost. */
cohort_status coh_etcd_put_lease(coh_etcd *e, coh_err *err, const void *k, size_t kl,
                                 const void *v, size_t vl);
/* Stops the keep-alive thread and revokes the lease (close path). */
void coh_etcd_lease_stop(coh_etcd *e);
/* 1 while a granted lease is believed alive; 0 none yet; -1 lost. */
int coh_etcd_lease_state(coh_etcd *e, int64_t *id);

#endif

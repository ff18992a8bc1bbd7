/*
 * server_int.h - internals of the store server (server.c: event loop and
 * connections; server_kv.c: per-job keyspace, waiters, barriers).
 *
 * Threading: everything here is owned by the one server thread, except the
 * job list's links and tokens (jobs_mu, for cohort_store_server_add_job) and
 * the stop flag / eventfd.
 *
 * Lifetimes: a closed connection is unlinked at once (its waiters released,
 * fd closed) but freed only at the end of the loop iteration (reap list), so
 * epoll events already fetched for it in the same batch see c->closed.
 */
#ifndef COH_STORE_SERVER_INT_H
#define COH_STORE_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <sodium.h>

#include "cohort_store.h"
#include "store/acct.h"
#include "store/proto.h"
#include "util/util.h"

/* Intrusive circular doubly-linked list (head is a sentinel). */
typedef struct dl {
    struct dl *prev, *next;
} dl;
static inline void dl_init(dl *h) { h->prev = h->next = h; }
static inline int dl_empty(const dl *h) { return h->next == h; }
static inline void dl_push(dl *h, dl *n)
{
    n->prev = h->prev;
    n->next = h;
    h->prev->next = n;
    h->prev = n;
}
static inline void dl_del(dl *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
#define dl_entry(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* A stored value, shared by the keyspace and the output queues that send it
 * (a GET of 1 MiB queues a reference, not a copy). */
typedef struct blob {
    uint32_t refs;
    size_t len;
    size_t cost;     /* bytes charged while stored (sizeof + room) */
    size_t room;     /* bytes of storage allocated (an APPEND grows in place
                        into it while no reply holds a reference) */
    /* A value deleted or replaced while queued replies still reference it
     * stays charged (cost) to these budgets until its last reference goes:
     * a client that does not read cannot pin uncharged memory. */
    coh_budget *orphan[2];
    uint8_t *data;   /* into storage: all of it, or the value inside an
                        adopted request frame (a large SET is not copied) */
    uint8_t storage[];
} blob;

/* Hash table node: keys are bytes (SipHash with a per-server random key). */
typedef struct hnode {
    struct hnode *next;
    uint64_t h;
    uint32_t klen;
    uint8_t *key;
} hnode;

typedef struct htab {
    hnode **b;
    size_t nb, n;
} htab;

/* A key: present (val != NULL) or only waited on (pins > 0). */
typedef struct kent {
    hnode hn;
    blob *val;
    dl waiters;    /* wlink.node of waiters still missing this key */
    uint32_t pins; /* waiters referring to this entry */
} kent;

/* A server-side barrier (names are single use). */
typedef struct bar {
    hnode hn;
    uint32_t n, arrived;
    int done;
    dl waiters;
} bar;

struct waiter;
typedef struct wlink {
    dl node;           /* in the owner's waiters list while linked */
    struct waiter *w;
    void *owner;       /* kent* (keys) or bar* (BARRIER) */
    uint32_t idx;
    uint8_t linked;
} wlink;

/* A request the server answers later: GET, WAIT, MULTI_GET, BARRIER. */
typedef struct waiter {
    dl cnode;          /* in conn->waiters */
    struct conn *c;
    uint32_t id;
    uint8_t op, flags;
    uint32_t n;
    uint32_t remaining;
    size_t mem;        /* bytes charged to the job and the server */
    wlink links[];
} waiter;

typedef struct job {
    struct job *next;
    char *id;
    size_t idlen;
    char *token;       /* guarded by jobs_mu (add_job may replace it) */
    uint32_t gen;      /* newest non-zero generation seen */
    htab keys;
    htab bars;
    size_t npresent;
    size_t nwaiters;
    size_t nconns;
    dl conns;
    coh_budget mem;    /* stored data + what its connections hold */
    int mem_warned;    /* the limit hit was logged (once per job, then rate-limited) */
} job;

/* Output segment: owned bytes, or a reference to a blob's bytes. */
typedef struct oseg {
    struct oseg *next;
    blob *ref;
    const uint8_t *p;
    size_t len, off, cap;
    uint8_t buf[];
} oseg;

typedef struct conn {
    struct cohort_store_server *srv;
    int fd;
    int closed;
    int authed;
    int closing;       /* ERROR queued: flush, then close; read nothing more */
    job *job;
    uint32_t gen;
    char peer[64];
    dl node;           /* srv->conns */
    dl jnode;          /* job->conns once authed */
    dl pnode;          /* srv->pend while unauthenticated or mid-frame */
    dl waiters;
    /* input state: a partial header, a partial body, or bytes to skip */
    uint8_t hdr[COH_PROTO_HDR];
    uint8_t hdr_have;
    int in_body;
    coh_frame_hdr fh;
    uint8_t *body;
    size_t body_have;
    size_t body_cap;   /* bytes of the body buffer (grows as bytes arrive), charged */
    uint64_t skip;
    blob *body_blob;   /* the body buffer, while its frame is handled; a SET
                          may adopt it (and sets this to NULL) */
    uint64_t last_rx_ns;
    uint64_t accept_ns; /* the authentication deadline counts from here */
    dl unode;          /* srv->unauth (oldest first) until authenticated */
    /* output */
    oseg *oq_head, *oq_tail;
    size_t out_bytes;
    coh_budget mem;    /* body buffer + unread input + copied reply bytes */
    size_t out_owned;  /* reply bytes charged (owned segments' capacity) */
    /* Input read but not yet handled (the per-turn work bound or
     * backpressure stopped the frame loop): handled before reading more. */
    uint8_t *ibuf;
    size_t ibuf_off, ibuf_len;
    int ready;         /* on srv->ready: has ibuf to handle */
    struct conn *ready_next;
    uint32_t ev;       /* epoll events registered */
    int in_flush;
    struct conn *flush_next;
    struct conn *reap_next;
    struct coh_torch_conn *torch; /* TCPStore protocol (torch_server.c); NULL: cohort's */
} conn;

struct cohort_store_server {
    int epfd, lfd, evfd, reserve_fd;
    int port;
    char bind[64];
    pthread_t thr;
    int thr_started;
    atomic_int stop;
    /* run() on a foreign thread: stop() waits for it to leave the loop */
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv;
    int running;
    pthread_mutex_t jobs_mu;
    job *jobs;
    uint32_t max_key, max_value, max_frame;
    int max_clients;
    size_t max_job_memory, max_conn_memory;
    int frame_timeout_ms;
    int auth_timeout_ms;
    int max_unauth;
    coh_budget mem;    /* everything, all jobs (limit: max_memory) */
    const coh_budget *refused; /* the budget of the last refused charge */
    size_t refused_want;
    int nconns;
    int nunauth;
    dl conns, pend;
    dl unauth;         /* unauthenticated connections, oldest first */
    /* Accepting is paused (listen socket out of epoll) while the process
     * is out of descriptors; it resumes at accept_resume_ns or as soon as a
     * connection closes. */
    int accept_paused;
    int accept_backoff_ms;
    uint64_t accept_resume_ns;
    conn *flush_head;
    conn *ready_head;  /* connections with input to handle before reading */
    conn *reap;
    uint8_t *scratch;
    size_t scratch_cap;
    /* Spare 4 KiB reply segments: a reply per request would otherwise be a
     * malloc and a free, and at the heap's top glibc trims and regrows it
     * (brk + page faults: 8 % of the server's time at 64 clients). */
    struct oseg *spare;
    int nspare;
    unsigned char hkey[crypto_shorthash_KEYBYTES];
    coh_wr w;          /* reply scratch */
    int tlfd, tport;   /* TCPStore listener (torch_server.c), -1 / 0: none */
    struct coh_torch_srv *torch;
};

/* ---- server.c: output helpers used by server_kv.c ---- */
/* Queues bytes (copied) / a blob reference on c; marks c for flushing. */
int coh_srv_send(conn *c, const void *p, size_t n);
int coh_srv_send_blob(conn *c, blob *b);
/* Queues bytes as they are, bypassing a torch connection's reply rewriting. */
int coh_srv_send_raw(conn *c, const void *p, size_t n);
/* Reads nothing more from c and closes it once its queued bytes are written
 * (at the end of the loop iteration if nothing is queued). */
void coh_srv_close_later(conn *c);
/* c has so many replies queued that its requests wait (backpressure). */
int coh_srv_backlogged(conn *c);
/* Error reply to request (op, id): status + message. */
void coh_srv_reply_err(conn *c, uint8_t op, uint32_t id, cohort_status st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* OK reply: coh_srv_reply_begin returns the server's scratch writer with the
 * header and status written; append the body, then coh_srv_reply_end sends
 * it (or a NOMEM / TOO_LARGE error if the body could not be built). */
coh_wr *coh_srv_reply_begin(conn *c, uint8_t op, uint32_t id);
void coh_srv_reply_end(conn *c, uint8_t op, uint32_t id);
void coh_srv_reply_ok(conn *c, uint8_t op, uint32_t id); /* empty body */
/* 1 if n bytes of copied reply fit c's budgets; else answers (op, id) with
 * COHORT_ERR_TOO_LARGE naming the limit (logged) and returns 0. */
int coh_srv_reply_room(conn *c, uint8_t op, uint32_t id, size_t n);

/* What a connection's buffers are charged to: it, its job (once
 * authenticated), the server. */
static inline coh_acct coh_srv_acct_conn(conn *c)
{
    coh_acct a = {{&c->mem, c->job ? &c->job->mem : NULL, &c->srv->mem}};
    return a;
}
/* What stored data of job j is charged to. */
static inline coh_acct coh_srv_acct_job(struct cohort_store_server *s, job *j)
{
    coh_acct a = {{&j->mem, &s->mem, NULL}};
    return a;
}
/* A refused charge: logs it (rate-limited, per budget kind) and writes the
 * message for the reply to msg. */
void coh_srv_limit_hit(conn *c, const coh_budget *b, size_t want, const char *doing, char *msg,
                       size_t msglen);

/* ---- server_kv.c ---- */
void coh_kv_job_init(job *j);
void coh_kv_job_free(struct cohort_store_server *s, job *j);
/* Runs one decoded request of an authenticated connection. */
void coh_kv_handle(conn *c, const coh_req *q);
/* Drops every waiter of c (disconnect). */
void coh_kv_drop_waiters(conn *c);
void coh_blob_unref(blob *b);
/* A blob of n bytes of storage (data = storage), refs 1; NULL on OOM. */
blob *coh_blob_alloc(size_t n);

#endif

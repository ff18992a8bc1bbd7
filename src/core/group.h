/*
 * group.h - the group object every module works on.
 *
 * A call flows: public API (src/group/api.c) builds a coh_call (the
 * contract) -> engine (inline, or the async worker) -> coll selects an
 * algorithm -> algorithm moves data through g->net (tcp messages, every
 * message carries the contract in its coh_hdr) and/or g->shm (the host's
 * shared segment, whose slot headers carry the same contract).
 *
 * Errors are sticky: the first failure (coh_group_fail) records the detail,
 * poisons the group, wakes every waiter and tells the peers (store + abort
 * frames). Later calls return COHORT_ERR_ABORTED carrying the cause.
 *
 * Lock order: g->err_mu is a leaf. The engine's queue lock is taken before
 * any transport lock.
 */
#ifndef COH_GROUP_H
#define COH_GROUP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "cohort.h"
#include "util/util.h"

/* Collective kinds (the contract's "op" field). Append-only: they go on the wire. */
typedef enum coh_coll {
    COH_COLL_NONE = 0,
    COH_COLL_ALL_REDUCE = 1,
    COH_COLL_BROADCAST = 2,
    COH_COLL_REDUCE = 3,
    COH_COLL_ALL_GATHER = 4,
    COH_COLL_GATHER = 5,
    COH_COLL_SCATTER = 6,
    COH_COLL_REDUCE_SCATTER = 7,
    COH_COLL_ALL_TO_ALL = 8,
    COH_COLL_BARRIER = 9,
    COH_COLL_SEND = 10,
    COH_COLL_RECV = 11,
    COH_COLL_INTERNAL = 12, /* group-internal traffic (split, debug=sync) */
    COH_COLL_FINALIZE = 13, /* cohort_finalize: published so that peers still
                             * in a call learn this rank left instead */
    COH_COLL_KIND_COUNT
} coh_coll;

const char *coh_coll_name(int coll); /* "all_reduce" */

/* ---- structured error detail (errinfo.c): the data behind g->err's
 * message, for cohort_error_info_get ---- */
typedef struct coh_err_detail {
    cohort_status status;
    char kind[16];
    char call[32];
    uint64_t seq;
    char field[16];
    int n;                  /* per-rank entries (0: none) */
    char (*values)[64];     /* "" unknown */
    char (*files)[256];     /* "" unknown */
    int *lines;
    unsigned char *culprit;
} coh_err_detail;
/* A zeroed detail with n per-rank entries; NULL on OOM. */
coh_err_detail *coh_err_detail_new(int n);
void coh_err_detail_free(coh_err_detail *d);
/* Attaches d (ownership passes) as the detail of g's first failure when
 * that failure has status d->status; replace: also over an earlier detail
 * (the global contract report over the local view). Else frees d. */
void coh_err_detail_attach(cohort_group *g, coh_err_detail *d, int replace);

/* One call's contract plus its buffers: the fingerprint is fields seq..line. */
typedef struct coh_call {
    uint64_t seq;       /* group collective seq (1-based), or per-pair p2p seq */
    uint8_t coll;       /* coh_coll */
    uint8_t dtype;      /* cohort_dtype */
    int8_t redop;       /* cohort_op, -1 when the op has none */
    uint8_t argok;      /* 1: the API's argument checks passed for these fields
                         * (api.c: check_args or its site memo), so coh_coll_run
                         * need not repeat them; 0 for calls built inside cohort */
    int32_t root;       /* root (broadcast/reduce/gather/scatter), peer (p2p), else -1 */
    int32_t tag;        /* p2p tag, else 0 */
    uint64_t count;     /* elements, as passed by the user */
    const char *file;   /* call site */
    int line;
    uint32_t site;      /* hash of file:line (goes on the wire, not compared) */
    /* buffers (not part of the fingerprint) */
    const void *send;
    void *recv;
    /* debug=buffers: checksum of the input when issued */
    uint64_t in_sum;
} coh_call;

struct coh_net;      /* src/transport/tcp/tcp.h */
struct coh_shm;      /* src/transport/shm/shm.h */
struct coh_trace;    /* src/trace/trace.h */
struct coh_engine;   /* src/engine/engine.h */
struct coh_monitor;  /* src/group/monitor.c */

struct coh_wait;
struct coh_transport_ops; /* src/transport/transport.h */

/* ---- the failure path's hooks ------------------------------------------
 * Every module a failure has to reach - the transports, the engine's
 * worker, the control plane (monitor), the flight recorder - registers a
 * hook on the group when it is attached to it. coh_group_fail and
 * coh_group_remote_abort reach them only through these hooks and name none
 * of them, so the failure path has one direction: lower modules report a
 * status up (coh_group_fail), the group reaches down only through what was
 * registered. On a failure every hook's abort runs, then every wake, then
 * every after, each in ascending `order`; all fields but name may be NULL. */
typedef struct coh_hook_ops {
    const char *name;
    int order; /* COH_HOOK_* below */
    /* Tell this module's peers the group failed (the segment's abort word,
     * abort frames, the store's abort record). from_peer: the failure was
     * learnt from a peer (coh_group_remote_abort): do not send it back. */
    void (*abort)(void *self, cohort_status st, const char *reason, int from_peer);
    /* From any thread: make every blocked wait of this module return. */
    void (*wake)(void *self);
    /* Slow reporting once every waiter is awake (the recorder's dump). */
    void (*after)(void *self, const char *reason);
    /* While a call waits (coh_wait_check), from the control plane: the
     * out-of-band contract probe (COHORT_OK, or the status the group failed
     * with) and the stall report. */
    cohort_status (*probe)(void *self, const struct coh_call *c);
    void (*stall_report)(void *self, const struct coh_wait *w, char *out, size_t outlen);
} coh_hook_ops;
/* Fast channels first: the segment's abort word, then tcp abort frames,
 * then the store's abort record; the dump last. */
enum { COH_HOOK_SHM = 0, COH_HOOK_TCP = 1, COH_HOOK_CONTROL = 2, COH_HOOK_ENGINE = 3,
       COH_HOOK_TRACE = 4 };
typedef struct coh_hook {
    const coh_hook_ops *ops;
    void *self;
} coh_hook;
#define COH_MAX_HOOKS 8
/* Register / remove (self identifies the entry) a hook. Call while no other
 * thread can fail g with the module half built: when the module is attached
 * (create) and detached (destroy). */
void coh_group_add_hook(cohort_group *g, const coh_hook_ops *ops, void *self);
void coh_group_remove_hook(cohort_group *g, const void *self);

/* A transport attached to the group: its ops table (transport.h) and its
 * handle; cohort_finalize and coh_group_free walk these. */
typedef struct coh_transport_ref {
    const struct coh_transport_ops *ops;
    void *t;
} coh_transport_ref;
#define COH_MAX_TRANSPORTS 2

typedef struct coh_peer {
    int host;           /* index into hosts */
    int local_index;    /* index among ranks of its host, in group-rank order */
    int other_machine;  /* on another machine (kernel): hostname/boot id differ, not
                         * only the network namespace; 0 for groups built by hand */
    int32_t pid;
    char addr[80];      /* tcp listen address "ip:port" */
} coh_peer;

struct cohort_group {
    int rank, size;
    uint32_t generation;
    uint32_t id;               /* group id: 0 for the world (2n for a process's n-th
                                * world of the same job, init.c world_instance),
                                * hashed and odd for sub-groups */
    int joined;                /* the rendezvous claimed join/<rank> */
    char job_id[64];
    int timeout_ms;            /* per-call timeout (COHORT_TIMEOUT) */
    int stall_warn_ms;         /* COHORT_STALL_WARN */
    int check_contract;        /* 1 unless COHORT_CONTRACT=off (benchmarks only) */
    int debug_sync;            /* COHORT_DEBUG=sync */
    int debug_buffers;         /* COHORT_DEBUG=buffers */
    int force_transport;       /* 0 auto, 1 shm, 2 tcp */
    pid_t pid;                 /* the process that made the group */
    unsigned fork_gen;         /* coh_fork_generation() when it was made */
    /* COHORT_ALGO_<OP> values read when the group was made (coll/select.c);
     * groups made otherwise (test harnesses) read the environment per call. */
    char *algo_env[32];
    int algo_env_read;
    /* COHORT_CHUNK_BYTES, read with algo_env (coh_coll_chunk): a getenv
     * per call walked the whole environment, 8-11 % of each rank's CPU in
     * an 8 B TCP broadcast (docs/performance.md). 0 where !algo_env_read. */
    size_t chunk_bytes;
    /* 1 when COHORT_CHUNK_BYTES was set to a valid value (it then overrides
     * every size rule on pieces, e.g. the 2-member tree's one piece). */
    int chunk_set;
    /* COHORT_TCP_OVERSUB, read with algo_env (-1 auto, 0 off, 1 on), and
     * the last message-algorithm broadcast that completed: the seq a barrier
     * must have to directly follow it and that broadcast's root (coll/rd.c,
     * coh_bar_leader). Every rank records the same, the contract having
     * agreed on the broadcast's seq and root. */
    int bar_lead_mode;
    int bar_root;
    uint64_t bar_seq;
    /* the seq a broadcast must have to directly follow the last barrier
     * that completed (coll/algos.c, coh_bc_after_barrier_flat) */
    uint64_t bcf_seq;
    /* coh_coll_run's memo of the last selection per collective kind
     * (coll/select.c), used only where algo_env_read: the choice is a
     * function of the call's count, dtype and reduce op and of the group's
     * topology, so a call that repeats the last call's (a training loop)
     * skips the table walk. shm/net: the transports the choice saw. */
    struct coh_sel_memo {
        const struct coh_algo *algo; /* NULL: empty */
        uint64_t count;
        const void *shm, *net;
        uint32_t key; /* dtype | (uint8_t)redop << 8 */
    } sel_memo[32];
    /* The direct lane (engine.c, run_lane; coll/lane.h): bit coll of lane_mask
     * is set when the full path's selection for that kind chose the shm
     * transport's row on a group where nothing else can change the path
     * (COHORT_ALGO_* fixed at creation, no COHORT_DEBUG=sync|buffers):
     * then a blocking call of that kind with count > 0 and no async work
     * pending goes from the
     * engine straight to the transport, skipping coh_coll_run, the
     * selection memo and the algorithm trampoline. Decided once per
     * kind (lane_seen), by the first call that reaches the selection;
     * lane_shm: the segment it saw (a different g->shm turns it off). */
    uint32_t lane_mask, lane_seen;
    const void *lane_shm;

    /* The call in progress on the issuing thread (api.c): its site, set by
     * one uncontended compare-and-swap per call, so a second thread calling
     * on the group at the same time is refused naming both call sites
     * instead of corrupting the sequence numbers. */
    _Atomic(const char *) busy_file; /* NULL when no call is being issued */
    _Atomic int busy_site;           /* line << 8 | coll of that call */
    /* Call sites repeat (a training loop): the site hashes of recent
     * file:line pairs (api.c), and the arguments of the site's last call
     * that passed issue's argument checks (ok): a call from the same site
     * with the same arguments passes them again, so they are skipped. The
     * contract is still built from each call and checked across ranks.
     * Per group, not per thread: only the thread holding busy_file touches
     * it, and a thread-local in a shared library costs a __tls_get_addr
     * call per access. */
    struct {
        const char *file;
        int line;
        uint32_t site;
        uint64_t count;
        int32_t root, tag;
        uint8_t coll, dtype, bufs, ok; /* bufs: send != NULL | (recv != NULL) << 1 */
        int8_t redop;
    } site_memo[16];

    /* contract sequence numbers */
    uint64_t seq;              /* last issued collective seq */
    uint64_t *p2p_send_seq;    /* per peer: last p2p send seq */
    uint64_t *p2p_recv_seq;    /* per peer: last p2p recv seq */

    /* sticky error */
    _Atomic int poisoned;      /* 0, or the cohort_status of the first failure */
    pthread_mutex_t err_mu;
    coh_err err;               /* first failure; later calls report it */
    /* The collective seq of the call whose contract check caused err, as
     * the rank that detected it numbered it, or 0 unknown (not a
     * collective's contract failure, or learnt from a peer that did not
     * say). Under err_mu. */
    uint64_t err_seq;
    coh_err last;              /* last error returned to the user */
    struct coh_err_detail *detail; /* structured form of err (errinfo.c), under err_mu */
    _Atomic int err_reported;  /* the user has been given the first error */
    _Atomic int contract_state; /* src/contract: COH_CSTATE_* bits (zero-initialised) */

    /* topology */
    coh_peer *peers;           /* [size] */
    int n_hosts;
    char (*hosts)[128];        /* [n_hosts] printable host names */
    int my_host;
    int *local_ranks;          /* group ranks on my host, ascending */
    int local_size, local_rank;
    int machine_size;       /* ranks on this machine, whatever their network namespace
                               (same hostname and boot id): who shares its CPUs */
    int *leaders;              /* [n_hosts]: lowest group rank per host */
    long machine_cpus;         /* the cpus this machine offers the group's ranks on it:
                                  the union of the cpu sets (affinity: cgroup cpuset,
                                  taskset, numactl) they publish at the rendezvous, at most
                                  its online cpus; online cpus when some record has no set
                                  (an older library); 0 unknown. The same on every rank of
                                  the machine (group/init.c, coh_machine_cpus) */
    int machine_cpus_sets;     /* 1: machine_cpus is that union; 0: online cpus */
    int oversub;               /* some machine's ranks outnumber its cpus (machine_cpus as
                                  each machine's ranks find it): the same on every rank
                                  (group/init.c, coh_machines_oversub) */

    int park_ahead;            /* set by an algorithm for its call: the tcp transport leaves
                                  a large message from a peer the current batch expects
                                  nothing from in the kernel (parked) instead of stashing
                                  it (the broadcast tree's relays; xfer.c rx_dispatch) */

    /* data plane */
    struct coh_net *net;       /* tcp messages to every peer (NULL if size == 1) */
    struct coh_shm *shm;       /* host-local segment (NULL if local_size == 1 or tcp forced) */
    coh_transport_ref tp[COH_MAX_TRANSPORTS]; /* the attached transports, attach order */
    int n_tp;
    /* the failure path's hooks, ascending order (under err_mu) */
    coh_hook hooks[COH_MAX_HOOKS];
    int n_hooks;

    /* control plane */
    cohort_store *store;       /* prefixed: "<gen>/g<id>/" */
    cohort_store *store_root;  /* the job's connection (owned by the world group) */
    char store_addr[256];
    char *token;               /* kept for sub-group rendezvous; never logged */
    cohort_store_server *server; /* embedded server (world rank 0) */
    struct coh_monitor *monitor; /* watches the store for aborts and state probes */
    int lease_alive;           /* etcd: every rank holds "alive/<rank>" under a lease */
    _Atomic int store_down;    /* a control-plane store call failed: skip the
                                * out-of-band probes instead of blocking waits */

    struct coh_trace *trace;
    struct coh_engine *engine;
    cohort_group *parent;      /* NULL for the world */
    int n_children;            /* sub-groups: ids are parent id + counter */
};

/* Bumped in every child of fork() (pthread_atfork, installed on first
 * use): a group whose fork_gen differs was made before a fork - without a
 * getpid() system call on every collective. */
unsigned coh_fork_generation(void);
extern _Atomic unsigned coh_fork_gen;
static inline int coh_group_forked(const cohort_group *g)
{
    return atomic_load_explicit(&coh_fork_gen, memory_order_relaxed) != g->fork_gen;
}

/* Set on threads cohort runs in the background (the monitor): failures they
 * find poison the group but do not write g->last, which the calling thread
 * reads without a lock. */
extern _Thread_local int coh_group_background_thread;

/* Records the first failure (later ones only go to g->last), poisons g,
 * wakes every waiter, posts the abort to the store and abort frames to peers
 * (unless st is COHORT_ERR_ABORTED received from a peer). Returns st. */
cohort_status coh_group_fail(cohort_group *g, cohort_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Marks g poisoned from a remote abort (no re-broadcast). */
void coh_group_remote_abort(cohort_group *g, cohort_status st, const char *reason);
/* The same, naming the collective call that failed (err_seq; 0: unknown).
 * A failure already recorded with st and no call learns the call. */
cohort_status coh_group_fail_at(cohort_group *g, cohort_status st, uint64_t seq, const char *fmt,
                                ...) __attribute__((format(printf, 4, 5)));
void coh_group_remote_abort_at(cohort_group *g, cohort_status st, const char *reason,
                               uint64_t seq);
/* g->err_seq, read under err_mu. */
uint64_t coh_group_failed_seq(cohort_group *g);
/* A poisoned g whose failure has status st and names no call learns that
 * it was call seq (a second channel's word on the same failure). */
void coh_group_note_failed_seq(cohort_group *g, cohort_status st, uint64_t seq);
/* At the entry of call c on a poisoned g: the failure's own status when c
 * is the collective call that failed (a rank that reaches a mismatched call
 * after the others detected it is still a party to it), else
 * COHORT_ERR_ABORTED. COHORT_OK when g is not poisoned. */
cohort_status coh_group_entry(cohort_group *g, const coh_call *c);

static inline int coh_group_poisoned(const cohort_group *g)
{
    return atomic_load_explicit(&((cohort_group *)g)->poisoned, memory_order_acquire);
}

/* The cpus g's ranks on this machine share (g->machine_cpus, from the
 * rendezvous); where that is unknown (0: a record with no count, or a
 * group the rendezvous did not build), the machine's online cpus. For the
 * rules that compare ranks with cpus after the rendezvous. */
static inline long coh_group_cpus(const cohort_group *g)
{
    return g->machine_cpus > 0 ? g->machine_cpus : sysconf(_SC_NPROCESSORS_ONLN);
}

/* Wait bookkeeping shared by every wait loop (shm futex waits, tcp poll).
 * coh_wait_check() is cheap; call it at least every COH_WAIT_SLICE_MS while
 * blocked. It returns COHORT_OK to keep waiting, or the status to fail with
 * (after recording it through coh_group_fail): ABORTED when poisoned,
 * TIMEOUT past the deadline (with the stall report), and it emits a stall
 * report every stall_warn_ms, each with fresh numbers. */
#define COH_WAIT_SLICE_MS 50
typedef struct coh_wait {
    cohort_group *g;
    const coh_call *call;
    uint64_t start_ns, deadline_ns, stall_ns, probe_ns;
    int stalled, probed;
    uint64_t report_ns;     /* when report was taken */
    const int *waiting_for; /* group ranks awaited, may be NULL */
    int n_waiting_for;
    /* why the transport cannot make progress, when it knows (set while
     * waiting; the timeout error carries it): e.g. the shm stash's cap */
    char note[256];
    char report[COH_ERRLEN]; /* the stall report, reused by the timeout error */
} coh_wait;
void coh_wait_init(coh_wait *w, cohort_group *g, const coh_call *call);
/* The same, with the caller's CLOCK_MONOTONIC reading of now (ns). */
void coh_wait_init_at(coh_wait *w, cohort_group *g, const coh_call *call, uint64_t now);
cohort_status coh_wait_check(coh_wait *w);
/* Restarts w's clocks (timeout, stall report, probe) from now, after the
 * call progressed: COHORT_TIMEOUT bounds a wait without progress, not a
 * call (as the tcp transport's xfer_run). g and call are kept. */
void coh_wait_restart(coh_wait *w, uint64_t now);
/* Returns 1 once the call has made no progress for ~100 ms: transports
 * then publish / compare fingerprints out of band (see contract). */
int coh_wait_slow(const coh_wait *w);

/* Where a call's input starts: in place (send == recv) an all_gather's or a
 * gather's input is this rank's block of recv (COHORT_DEBUG=buffers hashes
 * it there; the algorithms read it there, algos.c own_block). */
static inline const void *coh_call_input(const cohort_group *g, const coh_call *c, size_t esz)
{
    if (c->send == c->recv && (c->coll == COH_COLL_ALL_GATHER || c->coll == COH_COLL_GATHER))
        return (const char *)c->recv + (size_t)g->rank * c->count * esz;
    return c->send;
}

/* The call's peer `peer` is known dead (EOF, pidfd, lease): fails g with
 * COHORT_ERR_PEER_LOST naming rank and host. */
cohort_status coh_group_peer_lost(cohort_group *g, int peer, const char *how);

#endif

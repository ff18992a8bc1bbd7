/*
 * cohort.h - process groups and collectives that never hang silently.
 *
 * Every collective and point-to-point call carries a contract (sequence
 * number, operation, count, dtype, reduce op, root/peer/tag, call site).
 * Ranks compare contracts before any payload is used, so a mismatched call
 * ends in COHORT_ERR_CONTRACT on every rank with a precise message instead
 * of a hang or silently wrong data.
 *
 * Threads: a group may be used from one thread at a time for issuing calls;
 * cohort_abort() and cohort_work_test()/cohort_work_wait() may be called from
 * any thread. The library is not fork-safe: fork before cohort_init().
 */
#ifndef COHORT_H
#define COHORT_H

#include <stddef.h>
#include <stdint.h>

#include "cohort_status.h"
#include "cohort_store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COHORT_VERSION_MAJOR 0
#define COHORT_VERSION_MINOR 1
#define COHORT_VERSION_PATCH 0

/* ---- data types and reductions ---------------------------------------- */

typedef enum cohort_dtype {
    COHORT_INT8 = 0,
    COHORT_UINT8,
    COHORT_INT32,
    COHORT_UINT32,
    COHORT_INT64,
    COHORT_UINT64,
    COHORT_FLOAT16,
    COHORT_BFLOAT16,
    COHORT_FLOAT32,
    COHORT_FLOAT64,
    COHORT_DTYPE_COUNT
} cohort_dtype;

typedef enum cohort_op {
    COHORT_SUM = 0,
    COHORT_PROD,
    COHORT_MIN,
    COHORT_MAX,
    COHORT_AVG,  /* float types only */
    COHORT_BAND, /* integer types only */
    COHORT_BOR,
    COHORT_BXOR,
    COHORT_OP_COUNT
} cohort_op;

COHORT_API size_t cohort_dtype_size(cohort_dtype dt);      /* 0 if invalid */
COHORT_API const char *cohort_dtype_name(cohort_dtype dt); /* "float32" */
COHORT_API const char *cohort_op_name(cohort_op op);       /* "sum" */

/* ---- groups ------------------------------------------------------------ */

typedef struct cohort_group cohort_group;
typedef struct cohort_work cohort_work;

/* Programmatic form of the environment variables (see docs/concepts.md).
 * Zero/NULL fields fall back to the environment, then to defaults. */
typedef struct cohort_options {
    int rank;                 /* -1: from env */
    int world_size;           /* -1: from env */
    const char *master_addr;  /* MASTER_ADDR */
    int master_port;          /* MASTER_PORT; 0: from env */
    const char *store_url;    /* COHORT_STORE: "tcp://h:p" or "etcd://..." */
    const char *job_id;       /* COHORT_JOB_ID */
    const char *token;        /* COHORT_TOKEN (secret; never logged) */
    uint32_t generation;      /* COHORT_GENERATION; 0: from env (default 1) */
    int timeout_ms;           /* COHORT_TIMEOUT (seconds in env); 0: default */
    const char *transport;    /* COHORT_TRANSPORT: "auto", "shm", "tcp" */
} cohort_options;

/* Sets every field to "from environment". */
COHORT_API void cohort_options_init(cohort_options *o);

/* Join the group described by the environment (torchrun names, then
 * cohort's, then Slurm / Open MPI). Rank 0 hosts the store unless
 * COHORT_STORE is set. On failure *group is NULL and cohort_last_error(NULL)
 * says which variable or peer was at fault. */
COHORT_API cohort_status cohort_init(cohort_group **group);
COHORT_API cohort_status cohort_init_opts(cohort_group **group, const cohort_options *o);

/* Leaves the group and frees it (whatever it returns). Collective on a
 * healthy group: it checks that every message sent to this rank was
 * received, and returns a failure this rank has not been told about yet -
 * e.g. COHORT_ERR_CONTRACT when its last call was the send-only part (a
 * broadcast root, a send) of a mismatched call; message in
 * cohort_last_error(NULL). Waits for the other ranks at most COHORT_TIMEOUT
 * (capped at 30 s); a rank that has not arrived by then (still busy after
 * its last call) is logged and left unchecked - not an error. Does not wait
 * on a group that already returned an error. Accepts NULL. */
COHORT_API cohort_status cohort_finalize(cohort_group *group);

COHORT_API int cohort_rank(const cohort_group *g);
COHORT_API int cohort_size(const cohort_group *g);
COHORT_API uint32_t cohort_generation(const cohort_group *g);

/* The last error on this group, with who/what/which peer; "" if none.
 * With g == NULL: the last group-less failure on this thread. */
COHORT_API const char *cohort_last_error(const cohort_group *g);

/* The structured form of the failure that poisoned g (since 0.2): what
 * the message of cohort_last_error(g) names, as data, for bindings and
 * tools that should not parse text. NULL when g has not failed, or failed
 * in a way that has no structured form (only the message has the detail).
 * One allocation: free it with cohort_error_info_free(). Safe from any
 * thread; a contract report that completes later replaces the first
 * rank-local view (call it again after the failing call returned). */
typedef struct cohort_error_info {
    cohort_status status;      /* of the first failure (COHORT_ERR_CONTRACT, ...) */
    const char *kind;          /* "mismatch": ranks made different calls; "extra" / "skipped":
                                * the culprits made an extra call / skipped one at seq;
                                * "shifted": a call out of step, direction unprovable;
                                * "local": one rank's view (this rank and one peer);
                                * "peer_lost": the culprit died or its connection closed */
    const char *call;          /* "all_reduce"; "" if none */
    uint64_t seq;              /* the call's sequence number; 0 if none */
    const char *field;         /* "count", "dtype", "op", "redop", "root", "peer", "tag", "seq",
                                * ...; "" if none */
    int nranks;                /* entries in the per-rank arrays (the group size); 0 if none */
    const char *const *values; /* values[r]: rank r's value of field ("1024", "float32",
                                * "all_reduce"); NULL where unknown */
    const char *const *files;  /* files[r], lines[r]: rank r's call site; NULL / 0 where unknown */
    const int *lines;
    int nculprits;
    const int *culprits;       /* the ranks the report blames, ascending (none on a tie) */
} cohort_error_info;

COHORT_API cohort_error_info *cohort_error_info_get(const cohort_group *g);
COHORT_API void cohort_error_info_free(cohort_error_info *info);

/* Poisons the group: every waiter (any thread) and every later call returns
 * COHORT_ERR_ABORTED with this reason; peers are told through the store and
 * the data connections. */
COHORT_API cohort_status cohort_abort(cohort_group *g, const char *reason);

/* Sub-groups, collective over g (every rank of g must call). color < 0:
 * this rank joins no new group and *out is NULL. */
#define COHORT_UNDEFINED (-1)
COHORT_API cohort_status cohort_split(cohort_group *g, int color, int key, cohort_group **out);
/* Collective over g; ranks not listed get *out == NULL. */
COHORT_API cohort_status cohort_new_group(cohort_group *g, const int *ranks, int n,
                                          cohort_group **out);

/* ---- collectives --------------------------------------------------------
 * Every function is a macro over its _at form so that the call site is
 * recorded in the contract. count 0 is legal. send == recv means in place.
 * Counts are per rank for all_gather/gather/scatter/reduce_scatter and per
 * peer for all_to_all. */

#define COHORT_CALLSITE __FILE__, __LINE__

COHORT_API cohort_status cohort_all_reduce_at(const char *file, int line, cohort_group *g,
                                              const void *send, void *recv, size_t count,
                                              cohort_dtype dt, cohort_op op);
COHORT_API cohort_status cohort_broadcast_at(const char *file, int line, cohort_group *g, void *buf,
                                             size_t count, cohort_dtype dt, int root);
COHORT_API cohort_status cohort_reduce_at(const char *file, int line, cohort_group *g,
                                          const void *send, void *recv, size_t count,
                                          cohort_dtype dt, cohort_op op, int root);
COHORT_API cohort_status cohort_all_gather_at(const char *file, int line, cohort_group *g,
                                              const void *send, void *recv, size_t count,
                                              cohort_dtype dt);
COHORT_API cohort_status cohort_gather_at(const char *file, int line, cohort_group *g,
                                          const void *send, void *recv, size_t count,
                                          cohort_dtype dt, int root);
COHORT_API cohort_status cohort_scatter_at(const char *file, int line, cohort_group *g,
                                           const void *send, void *recv, size_t count,
                                           cohort_dtype dt, int root);
COHORT_API cohort_status cohort_reduce_scatter_at(const char *file, int line, cohort_group *g,
                                                  const void *send, void *recv, size_t count,
                                                  cohort_dtype dt, cohort_op op);
COHORT_API cohort_status cohort_all_to_all_at(const char *file, int line, cohort_group *g,
                                              const void *send, void *recv, size_t count,
                                              cohort_dtype dt);
COHORT_API cohort_status cohort_barrier_at(const char *file, int line, cohort_group *g);
COHORT_API cohort_status cohort_send_at(const char *file, int line, cohort_group *g,
                                        const void *buf, size_t count, cohort_dtype dt, int peer,
                                        int tag);
COHORT_API cohort_status cohort_recv_at(const char *file, int line, cohort_group *g, void *buf,
                                        size_t count, cohort_dtype dt, int peer, int tag);

#define cohort_all_reduce(...) cohort_all_reduce_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_broadcast(...) cohort_broadcast_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_reduce(...) cohort_reduce_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_all_gather(...) cohort_all_gather_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_gather(...) cohort_gather_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_scatter(...) cohort_scatter_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_reduce_scatter(...) cohort_reduce_scatter_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_all_to_all(...) cohort_all_to_all_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_barrier(g) cohort_barrier_at(COHORT_CALLSITE, (g))
#define cohort_send(...) cohort_send_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_recv(...) cohort_recv_at(COHORT_CALLSITE, __VA_ARGS__)

/* ---- async ----------------------------------------------------------------
 * Buffers handed to an async call belong to cohort until wait/test reports
 * completion: do not read recv or write send before then (COHORT_DEBUG=buffers
 * detects it). Ops of one group complete in issue order. */

COHORT_API cohort_status cohort_all_reduce_async_at(const char *file, int line, cohort_group *g,
                                                    const void *send, void *recv, size_t count,
                                                    cohort_dtype dt, cohort_op op,
                                                    cohort_work **work);
COHORT_API cohort_status cohort_broadcast_async_at(const char *file, int line, cohort_group *g,
                                                   void *buf, size_t count, cohort_dtype dt,
                                                   int root, cohort_work **work);
COHORT_API cohort_status cohort_reduce_async_at(const char *file, int line, cohort_group *g,
                                                const void *send, void *recv, size_t count,
                                                cohort_dtype dt, cohort_op op, int root,
                                                cohort_work **work);
COHORT_API cohort_status cohort_all_gather_async_at(const char *file, int line, cohort_group *g,
                                                    const void *send, void *recv, size_t count,
                                                    cohort_dtype dt, cohort_work **work);
COHORT_API cohort_status cohort_gather_async_at(const char *file, int line, cohort_group *g,
                                                const void *send, void *recv, size_t count,
                                                cohort_dtype dt, int root, cohort_work **work);
COHORT_API cohort_status cohort_scatter_async_at(const char *file, int line, cohort_group *g,
                                                 const void *send, void *recv, size_t count,
                                                 cohort_dtype dt, int root, cohort_work **work);
COHORT_API cohort_status cohort_reduce_scatter_async_at(const char *file, int line, cohort_group *g,
                                                        const void *send, void *recv, size_t count,
                                                        cohort_dtype dt, cohort_op op,
                                                        cohort_work **work);
COHORT_API cohort_status cohort_all_to_all_async_at(const char *file, int line, cohort_group *g,
                                                    const void *send, void *recv, size_t count,
                                                    cohort_dtype dt, cohort_work **work);
COHORT_API cohort_status cohort_barrier_async_at(const char *file, int line, cohort_group *g,
                                                 cohort_work **work);
COHORT_API cohort_status cohort_send_async_at(const char *file, int line, cohort_group *g,
                                              const void *buf, size_t count, cohort_dtype dt,
                                              int peer, int tag, cohort_work **work);
COHORT_API cohort_status cohort_recv_async_at(const char *file, int line, cohort_group *g,
                                              void *buf, size_t count, cohort_dtype dt, int peer,
                                              int tag, cohort_work **work);

#define cohort_all_reduce_async(...) cohort_all_reduce_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_broadcast_async(...) cohort_broadcast_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_reduce_async(...) cohort_reduce_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_all_gather_async(...) cohort_all_gather_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_gather_async(...) cohort_gather_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_scatter_async(...) cohort_scatter_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_reduce_scatter_async(...)                                                           \
    cohort_reduce_scatter_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_all_to_all_async(...) cohort_all_to_all_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_barrier_async(...) cohort_barrier_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_send_async(...) cohort_send_async_at(COHORT_CALLSITE, __VA_ARGS__)
#define cohort_recv_async(...) cohort_recv_async_at(COHORT_CALLSITE, __VA_ARGS__)

/* timeout_ms < 0: the group's timeout. Returns the op's final status. */
COHORT_API cohort_status cohort_work_wait(cohort_work *w, int timeout_ms);
/* *done = 1 once finished; returns the op's status when done, else OK. */
COHORT_API cohort_status cohort_work_test(cohort_work *w, int *done);
/* Frees a finished work handle; a pending one is waited for first. NULL ok. */
COHORT_API void cohort_work_free(cohort_work *w);

/* ---- shared buffers ------------------------------------------------------
 * Memory the other ranks of this host can read directly (since 0.4), as
 * MPI_Alloc_mem / MPI_Win_allocate_shared or NCCL's registered buffers: a
 * broadcast on g whose root's buffer lies inside such a region is copied
 * once, by each local reader with memcpy from its own mapping of the
 * root's region, instead of twice through the segment or by the kernel
 * (docs/shm.md "Shared user buffers"). Any buffer still works anywhere;
 * only the root's buffer decides, receivers may use any memory (a
 * receiver's region lets the root write part of the message into it).
 *
 * cohort_mem_alloc: *out = bytes (rounded up to whole pages) of zeroed,
 * page-aligned memory owned by this rank; not collective. A sealed memfd,
 * never in the file system, that only a process allowed to read this
 * rank's memory (ptrace rules, as process_vm_readv) can map. Errors:
 * COHORT_ERR_INVALID (g or out NULL, bytes 0), COHORT_ERR_NOMEM,
 * COHORT_ERR_SYSTEM (memfd_create, mmap ...: cohort_last_error(g)); on
 * error *out is NULL.
 * cohort_mem_free: p must be a pointer cohort_mem_alloc returned for g
 * (else COHORT_ERR_INVALID); NULL is OK. Must not be called while a call
 * that uses the buffer is in flight (an async one: before its wait). The
 * peers' mappings keep the memory alive until they drop them (at most 8
 * regions per peer are kept mapped) or the group ends. Regions still
 * allocated are freed by cohort_finalize. */
COHORT_API cohort_status cohort_mem_alloc(cohort_group *g, size_t bytes, void **out);
COHORT_API cohort_status cohort_mem_free(cohort_group *g, void *p);

/* ---- diagnostics ----------------------------------------------------------- */

/* What a collective would run on this group, for benchmarks and logs:
 * one line into buf, e.g. "algorithm shm; transport shm (2 ranks, 2 on
 * this host, 1 hosts; this machine: 2 ranks on 1 cpus (their cpu sets):
 * ranks outnumber cpus); copy: two copies through the segment (...)": the
 * cpus are those the machine's ranks may run on together (the union of
 * their affinity masks), which the rules for ranks outnumbering cpus
 * read. op is a collective's name
 * as in cohort_fingerprint ("all_reduce", "broadcast", ...; "send" and
 * "recv" name the path to a peer on this host), count and dt
 * as the call would pass them (root 0, reduce op sum where one applies).
 * COHORT_ERR_INVALID for an unknown op or a buffer under 2 bytes. */
COHORT_API cohort_status cohort_describe(cohort_group *g, const char *op, size_t count,
                                         cohort_dtype dt, char *buf, size_t len);

/* Writes this rank's flight recorder as JSON Lines to
 * COHORT_TRACE_DIR/<job>-rank<R>.jsonl (or dir if non-NULL). */
COHORT_API cohort_status cohort_trace_dump(cohort_group *g, const char *dir);

/* Validates one call's fingerprints gathered from every rank (the lesson's
 * validate_collective, generalised): returns COHORT_OK when all agree, else
 * COHORT_ERR_CONTRACT and a majority-based report in msg. */
typedef struct cohort_fingerprint {
    uint64_t seq;
    int coll;         /* cohort_coll_kind */
    int dtype;        /* cohort_dtype */
    int redop;        /* cohort_op, -1 if none */
    int root;         /* root, peer, -1 if none */
    int tag;          /* p2p tag, 0 if none */
    uint64_t count;
    uint32_t group;   /* group id */
    uint32_t generation;
    const char *file; /* call site */
    int line;
} cohort_fingerprint;

COHORT_API cohort_status cohort_validate_fingerprints(const cohort_fingerprint *by_rank, int n,
                                                      char *msg, size_t msglen);

/* Splits "host:port" or "[v6]:port" the way the library reads COHORT_STORE,
 * MASTER_ADDR and COHORT_BIND_ADDR (one grammar for the library and the
 * tools; since 0.3): host (brackets dropped) into host[hostlen], the port's
 * 1-5 digits into port[portlen] (the caller checks the range). No scheme,
 * no path, a port required. COHORT_ERR_INVALID, with nothing written and
 * no message set (the caller names the option), for anything else: NULL
 * arguments, an empty host, a bare IPv6 literal, a host that does not fit. */
COHORT_API cohort_status cohort_hostport_split(const char *addr, char *host, size_t hostlen,
                                               char *port, size_t portlen);

#ifdef __cplusplus
}
#endif
#endif /* COHORT_H */

/*
 * check_int.h - private to src/check: the external-collective checker.
 *
 * Per rank, one outbound ring of fingerprint records in the world group's
 * shared segment (coh_shm_aux, one region per local rank): every call of
 * every external group appends one record addressed to the member's
 * successor in that group (member i+1 mod n). The successor drains the
 * rings of its same-host predecessors (its calling thread at its own calls,
 * its monitor thread in between) and compares each record with its own
 * fingerprint for the same (group, seq). Across hosts - or with
 * transport = 1 - the record goes to the store instead ("q/<to>/<from>/<n>",
 * pipelined set) and the successor's monitor thread fetches it.
 *
 * Ring (RING_N records of one cache line each, then RING_N done words and
 * RING_N args words, chk_slot):
 * the writer fills a record, then stores stamp = index + 1 (release). A
 * record has exactly one reader, which stores done[slot] = stamp after
 * consuming it; the writer reuses a slot only once its previous record is
 * done (it waits otherwise: the reader's monitor drains every tick). A
 * reader walks each writer's ring with its own cursor and skips records
 * addressed to others; a slot whose stamp is past its cursor held a record
 * for someone else (one for this reader cannot be reused before it was
 * consumed), so the cursor may pass it.
 *
 * Why this layout (docs/check.md, "Cost"): the reader writes nothing into
 * a record's line, so a record costs one line moved to the reader and the
 * writer's invalidation of the reader's old copy; the done words sit in
 * lines of their own, 8 to a line, which the writer reads one line per 8
 * slots (CHK_DONE_PER_LINE at a time, ring_reserve) while the reader
 * writes the line before. (Until 2026-12-02: 80-byte records at an 80-byte
 * stride with done in the record - a record over two lines, one of them
 * shared with the next record, into which the reader wrote done: about
 * four line transfers per record instead of two and a quarter.)
 *
 * Lock order: c->mu, then nothing (store calls under c->mu use the
 * user-thread connection only; the monitor thread's own connection is used
 * without c->mu).
 *
 * The lock is biased (docs/check.md, "Locking"): "holding c->mu" below
 * means holding the checker's lock, which the bias thread - the first
 * thread to call begin/end - takes in begin/end without the mutex: it
 * marks fast_busy and proceeds if slow_req is 0 (plain stores and loads,
 * no atomic read-modify-write, no fence). Every other holder first
 * revokes: slow_req++, membarrier(2) (the bias thread's marking and its
 * read of slow_req are then ordered as if both sides had fenced), waits
 * for fast_busy == 0, then takes the mutex; while slow_req > 0 the bias
 * thread takes the mutex too. The monitor revokes once per tick; a
 * begin/end from a second thread switches the bias off for good (bias =
 * CHK_BIAS_OFF, slow_req never back to 0): the mutex as before.
 */
#ifndef COH_CHECK_INT_H
#define COH_CHECK_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cohort_check.h"
#include "core/group.h"
#include "util/util.h"

#define CHK_RING_N 2048u
#define CHK_REC_BYTES 64u     /* one cache line (x86-64, aarch64 server parts) */
#define CHK_DONE_PER_LINE 8u  /* done words per cache line */
#define CHK_AUX_HDR_BYTES 4096u
#define CHK_HIST 16           /* calls kept per group for reports */
#define CHK_OP_MAX 32
#define CHK_SITE_MAX 160
#define CHK_TEXT_MAX 200      /* readable signature / arguments in reports */
#define CHK_PCACHE 64         /* op/redop name hashes cached by pointer */

/* The compared part of a fingerprint (exact). */
typedef struct chk_cfp {
    uint64_t seq;
    uint64_t op_hash, sig_hash, count, redop_hash, args_hash;
    int32_t root;
} chk_cfp;

/* A fingerprint record as the store path sends it (coh_chk_rec_encode). */
typedef struct chk_rec {
    int32_t reader;         /* world rank of the consumer */
    int32_t root;
    uint64_t gid, seq;
    uint64_t op_hash, sig_hash, count, redop_hash, args_hash;
} chk_rec;

/* One ring record in shared memory (little-endian host layout): exactly
 * one cache line, aligned to one, nothing else in it. args_hash does not
 * fit; it is zero for every call but those with per-member arguments (the
 * v-collectives' counts, communicator-making calls), and for those it
 * goes to the slot's args word (CHK_ARGS_OFF) and the reader field's
 * CHK_SLOT_ARGS bit says so: such a record costs a second line. */
#define CHK_SLOT_ARGS 0x80000000u
typedef struct chk_slot {
    _Alignas(CHK_REC_BYTES) _Atomic uint64_t stamp; /* index + 1 when complete, 0 while written */
    uint32_t reader;        /* world rank of the consumer (< 2^31), | CHK_SLOT_ARGS */
    int32_t root;
    uint64_t gid, seq;
    uint64_t op_hash, sig_hash, count, redop_hash;
} chk_slot;
_Static_assert(sizeof(chk_slot) == CHK_REC_BYTES, "a record is one cache line");
_Static_assert(_Alignof(chk_slot) == CHK_REC_BYTES, "a record starts a cache line");
_Static_assert(CHK_RING_N % CHK_DONE_PER_LINE == 0, "done lines hold whole groups of slots");

/* The aux region: [chk_aux_hdr, CHK_AUX_HDR_BYTES][RING_N records][RING_N
 * done words: the stamp each slot's reader consumed][RING_N args words]. */
#define CHK_RING_OFF CHK_AUX_HDR_BYTES
#define CHK_DONE_OFF (CHK_RING_OFF + CHK_RING_N * CHK_REC_BYTES)
#define CHK_ARGS_OFF (CHK_DONE_OFF + CHK_RING_N * 8u)
#define CHK_AUX_BYTES (CHK_ARGS_OFF + CHK_RING_N * 8u)

/* Published position (seqlock on ver: odd = being written). */
enum { CHK_POS_IDLE = 0, CHK_POS_CALL = 1, CHK_POS_WAIT = 2 };
typedef struct chk_pos {
    int32_t state, peer; /* peer: world rank waited for (CHK_POS_WAIT), -1 any */
    int32_t tag, is_send; /* CHK_POS_WAIT: the call's tag (-1 any), 1 for a send */
    uint64_t gid, seq, episode, start_ns;
    uint64_t last_gid, last_seq, last_end_ns;
    char op[CHK_OP_MAX];
    char last_op[CHK_OP_MAX];
    char site[CHK_SITE_MAX];      /* filled by the owner's monitor (lazily) */
    char last_site[CHK_SITE_MAX];
} chk_pos;

typedef struct chk_aux_hdr {
    _Atomic uint64_t head;      /* records written */
    /* Futex word: the low 32 bits of head, stored after each record, and
     * the count of readers asleep on it (a record is written with one
     * wake-up system call only when someone sleeps). Same cache line as
     * head, which the writer already dirties. */
    _Atomic uint32_t wake;
    _Atomic uint32_t sleepers;
    _Alignas(64) _Atomic uint32_t pos_ver;
    chk_pos pos;
} chk_aux_hdr;
_Static_assert(sizeof(chk_aux_hdr) <= CHK_AUX_HDR_BYTES, "aux header fits");

/* The blocking point-to-point wait in progress (cohort_check_wait_begin),
 * private to the process: a quick send or receive writes only this (no
 * lock, nothing shared, no clock read). The monitor publishes it to the
 * position - private copy and shared segment - once it has seen the same
 * wait at two ticks (lazy publication; docs/check.md, "Deadlock"). ver:
 * CHK_WS_* in its low two bits; one wait at a time per process (a second
 * thread's concurrent wait is not tracked). pub: the ver the monitor
 * published (0: none); wait_end and the monitor order ver against pub
 * with seq_cst accesses, so either the monitor sees the wait ended and
 * publishes nothing, or wait_end sees it published and retracts it. */
enum { CHK_WS_IDLE = 0, CHK_WS_FILLING = 1, CHK_WS_WAITING = 2 };
typedef struct chk_wslot {
    _Atomic uint64_t ver;
    _Atomic uint64_t pub;
    /* Relaxed atomics (plain moves on x86): the monitor reads them while a
     * new wait may be filling them, and tells by ver whether it got one. */
    _Atomic int32_t peer, tag, is_send, line;
    _Atomic uint64_t gid;
    _Atomic uintptr_t pc, op; /* op: the caller's name, which outlives the checker */
    _Atomic uint64_t file[CHK_SITE_MAX / 8]; /* base name, NUL-terminated; "" if none */
} chk_wslot;

/* One call in a group's history (for reports). */
typedef struct chk_hent {
    chk_cfp f;
    const char *op, *sig, *redop, *args, *file; /* interned, owned by the checker */
    const void *pc;
    int line;
} chk_hent;

/* A FIFO of compared parts. */
typedef struct chk_q {
    chk_cfp *v;
    size_t head, n, cap;
} chk_q;

struct cohort_check_group {
    uint64_t id;
    int n, me;                 /* members, my index */
    int *world;                /* [n] world ranks */
    int pred, succ;            /* world ranks of my neighbours */
    int pred_ring, succ_ring;  /* 1: through the shared segment, 0: the store */
    chk_aux_hdr *pred_aux;     /* pred_ring: the predecessor's aux region (looked up once) */
    uint64_t seq;              /* last call announced */
    chk_q mine;                /* my calls not yet compared */
    chk_q theirs;              /* the predecessor's calls I have not made yet */
    chk_hent hist[CHK_HIST];   /* by seq % CHK_HIST */
    char name[64];
    int removed;               /* freed by the front end; kept until compared */
    int late;                  /* calls recorded after the checker failed */
    struct cohort_check_group *next; /* in c->groups */
};

/* A record for a group not registered yet (the predecessor was faster). */
typedef struct chk_orphan {
    uint64_t gid;
    chk_cfp f;
    struct chk_orphan *next;
} chk_orphan;

typedef struct chk_intern {
    uint64_t *key;
    char **val;
    size_t cap, n;
} chk_intern;

#define CHK_BIAS_OFF ((uintptr_t)1) /* no thread: always the mutex */

struct cohort_check {
    cohort_group *world;
    cohort_check_options o;
    int size;
    /* What begin and end reach on every call, packed: two lines of
     * scalars, the stats' line, the position's first two lines (its
     * fixed fields), in that order (docs/check.md, "Cache lines per
     * call"; before 2026-12-02 these were spread over about ten lines).
     * The first line holds the biased lock (above), which the bias
     * thread's calls keep and the monitor visits once per tick; the
     * monitor writes nothing else here more often than that. */
    _Alignas(64) _Atomic uintptr_t bias; /* 0: none yet; a thread's token; CHK_BIAS_OFF */
    _Atomic uint32_t fast_busy;          /* the bias thread holds the lock without mu */
    _Atomic uint32_t slow_req;           /* holders and candidates through mu (revokes) */
    _Atomic int failed;        /* cohort_check_event_kind of the first failure, 0 if none */
    int rank;
    uint64_t head;             /* my records written */
    uint64_t ring_free;        /* slots below this index are known free (ring_reserve) */
    chk_slot *my_ring;
    uint64_t *cursor;          /* [size]: my read position in each writer's ring */
    chk_aux_hdr *my_aux;
    /* second line */
    _Atomic uint64_t *my_done; /* [CHK_RING_N]: my ring's done words */
    const void *pos_pc;
    /* What the shared position already holds, so a call copies strings
     * only when they change: the literal whose text is in pos.op (NULL:
     * none or not a literal), and whether pos.op/site changed since
     * last_op/last_site were copied. */
    const char *pos_op_lit;
    int pos_site_line; /* begin formatted pos.site as "<base>:<this line>" (-1: another writer) */
    int pos_last_dirty;
    /* CHK_PW_* a call changed in the private position and the shared copy
     * lacks: a call marks, the monitor writes at its next tick (readers -
     * other ranks' stall and deadlock reports - act on positions that
     * lasted seconds), so a call writes no shared line for it. */
    unsigned pos_dirty;
    int pos_site_done;
    int stall_warned;
    int waiters;               /* calling threads waiting on cv: comparisons signal
                                * only then (a wake-up per call would cost a
                                * context switch per call) */
    /* The last signature interned (a call is usually like the one before). */
    uint64_t last_sig_hash;
    const char *last_sig;
    _Alignas(64) cohort_check_stats stats;
    _Alignas(64) chk_pos pos;  /* private copy; the shared one is written alongside */
    _Alignas(64) pthread_mutex_t mu;

    pthread_cond_t cv;         /* report ready, comparisons made (calling threads) */
    pthread_cond_t mon_cv;     /* the monitor's sleep: a failure, or stop */
    cohort_check_group *groups;
    chk_orphan *orphans;
    chk_intern names;

    /* shared segment (NULL: every pair uses the store) */
    void *shm;                 /* struct coh_shm * of the world */
    uint64_t *my_args;         /* [CHK_RING_N]: my ring's args words */
    /* store path */
    cohort_store *st_user, *st_user_root;
    cohort_store *st_mon, *st_mon_root;
    uint64_t *sent;            /* [size]: records sent to each rank through the store */
    uint64_t *recvd;           /* [size]: records read from each rank through the store */
    unsigned char *remote_pred; /* [size]: 1 if some group has that rank as a store-path pred */

    /* lit_hash's cache (check.c), under the lock. */
    struct {
        const char *p;
        uint64_t h;
    } pcache[CHK_PCACHE];
    uint64_t pos_published;    /* episode last written to the store */
    int pos_pub_live;          /* the store shows a position (not idle) */
    /* the lazy p2p wait (monitor side, under c->mu for the pos fields) */
    chk_wslot wslot;
    uint64_t wseen_ver, wseen_ns; /* the wait the monitor saw at its last tick, and when */
    uint64_t wpub_episode;     /* pos.episode of the published wait */
    uint64_t dl_episode_seen;  /* deadlock candidate: my episode */
    uint64_t dl_since_ns;

    /* failure */
    cohort_status status;
    int fail_posted;           /* local detection posted to the store */
    char *fail_value;          /* what to post ("M ..." / "R ..."), owned */
    int report_ready;
    char err[COH_ERRLEN];      /* the report */

    _Atomic int closed;        /* cohort_check_close succeeded: the world may now be
                                * finalized under the monitor without it being a failure */
    /* waiting for a same-host neighbour's record: spin this long, then
     * sleep on its futex word (COHORT_CHECK_SPIN_US; 0 when ranks
     * outnumber cores) */
    uint64_t spin_ns, yield_ns;
    /* monitor */
    pthread_t thr;
    int thr_started, stop;
};

/* check.c */
/* The checker's lock for everything but begin/end (any thread): a thread
 * that is not the bias thread revokes first. Returns what unlock needs. */
int coh_chk_lock(cohort_check *c);
void coh_chk_unlock(cohort_check *c, int revoked);
/* The monitor's tick: keeps the bias thread on the mutex until unrevoke,
 * so the tick's many short sections take c->mu directly (one membarrier
 * per tick, not one per section). */
void coh_chk_revoke(cohort_check *c);
void coh_chk_unrevoke(cohort_check *c);
void coh_chk_fail(cohort_check *c, int kind, cohort_status st, const char *value,
                  const char *local_text);
int coh_chk_drain_locked(cohort_check *c, int writer, int lazy);
void coh_chk_handle_store_rec(cohort_check *c, int writer, const chk_rec *r);
const char *coh_chk_intern(cohort_check *c, int kind, uint64_t h, const char *s);
cohort_check_group *coh_chk_find(cohort_check *c, uint64_t gid);
#define CHK_PW_OP 1u   /* also the op name */
#define CHK_PW_SITE 2u /* also the call site */
#define CHK_PW_LAST 4u /* also the last op and site */
#define CHK_PW_FIXED 8u /* the fixed fields (always written) */
/* Writes the shared position now: what, and whatever calls marked dirty
 * since the last write. c->mu held. */
void coh_chk_pos_write(cohort_check *c, unsigned what);

/* The monitor's tick: publishes a p2p wait that lasts (check.c). */
void coh_chk_wait_publish(cohort_check *c);

/* check_mon.c */
void *coh_chk_monitor(void *arg);
void coh_chk_site(cohort_check *c, const char *file, int line, const void *pc, char *out,
                  size_t len);

/* check_wire.c: formats that cross processes (docs/check.md), parsers
 * fuzzed (tests/fuzz/fuzz_check_wire.c). */
size_t coh_chk_rec_encode(const chk_rec *r, unsigned char out[80]);
int coh_chk_rec_decode(const void *buf, size_t len, chk_rec *r);
/* A group's history: header line + one line per call. */
char *coh_chk_hist_format(const cohort_check_group *g, const char *const *sites, size_t *len);
typedef struct chk_hline {
    chk_cfp f;
    int line;
    char op[CHK_OP_MAX], sig[CHK_TEXT_MAX], redop[CHK_OP_MAX], args[CHK_TEXT_MAX],
        file[CHK_SITE_MAX];
} chk_hline;
/* Parses a history; *out (malloc'd, *n entries) and the header's gid and
 * member. Returns 0, or -1 with why. */
int coh_chk_hist_parse(const char *v, size_t len, uint64_t *gid, int *member, chk_hline **out,
                       int *n, char *why, size_t whylen);
size_t coh_chk_pos_format(const chk_pos *p, char *out, size_t len);
int coh_chk_pos_parse(const char *v, size_t len, chk_pos *p);
/* The failure record "M <gid> <seq> <member> <text>" / "R <kind> <text>". */
int coh_chk_fail_parse(const char *v, size_t len, int *kind, uint64_t *gid, uint64_t *seq,
                       int *member, const char **text);

#endif

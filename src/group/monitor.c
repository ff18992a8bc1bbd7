/* monitor.c - the group's out-of-band control channel through the store.
 *
 * Records "ctl/<k>" (k from the counter "ctl/n") are appended by any rank:
 *   "A <rank> <status> <reason>"  abort: every rank poisons its group; the
 *   "A <rank> <status>:<seq> <reason>"  form names the collective call
 *                                 that failed (the group's err_seq);
 *                                 group/ctl_wire.c parses it (any store
 *                                 client can write these bytes)
 *   "S <rank> <k>"                 state probe: answer under "state/<k>/<me>"
 *   "D <rank>"                     dump the flight recorder
 * Each rank's monitor thread waits for the next record on its own store
 * connection (server-notified, no polling) and acts on it, so aborts and
 * probes work even when the data path is broken or the main thread is stuck
 * inside a transport. A rank whose process is stopped cannot answer, and is
 * reported as unresponsive.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract/contract.h"
#include "group/ctl_wire.h"
#include "group/monitor.h"
#include "contract/fp_record.h"
#include "store/backend.h"
#include "trace/trace.h"
#include "transport/transport.h"
#include "util/ratelimit.h"

struct coh_monitor {
    cohort_group *g;
    cohort_store *root;  /* own connection: the thread blocks on it */
    cohort_store *s;     /* prefixed view of root */
    cohort_store *post;  /* prefixed view of the group's connection, short timeout */
    pthread_t th;
    int started;
    atomic_int stop;
    _Atomic int64_t handled; /* records 1..handled are acted on */
};

/* Control records ride on the data path's waits: a partitioned store must
 * cost each wait at most this once (then store_down skips it). */
#define POST_TIMEOUT_MS 500

static void note_store(cohort_group *g, cohort_status st)
{
    if (st == COHORT_ERR_STORE || st == COHORT_ERR_TIMEOUT) {
        if (!atomic_exchange(&g->store_down, 1))
            coh_warn("the store is unreachable (%s): aborts and stall reports now travel on the "
                     "data path only",
                     cohort_status_name(st));
    }
}

static cohort_status post_record(cohort_group *g, const char *rec, int64_t *kout)
{
    struct coh_monitor *m = g->monitor;
    cohort_store *s = m ? m->post : g->store;
    if (!s || atomic_load(&g->store_down))
        return COHORT_ERR_STORE;
    int64_t k = 0;
    cohort_status st = cohort_store_add(s, "ctl/n", 5, 1, &k);
    note_store(g, st);
    if (st != COHORT_OK)
        return st;
    char key[48];
    snprintf(key, sizeof key, "ctl/%lld", (long long)k);
    st = cohort_store_set(s, key, strlen(key), rec, strlen(rec));
    if (kout)
        *kout = k;
    return st;
}

/* This rank's state for a probe: "<last_done> <cur_seq> <coll> <peer> <line> <file>". */
static void my_state(cohort_group *g, char *out, size_t len)
{
    uint64_t last = 0;
    coh_trace_entry cur;
    int has = 0;
    coh_trace_progress(g->trace, &last, &cur, &has);
    if (has)
        snprintf(out, len, "%llu %llu %d %d %d %s", (unsigned long long)last,
                 (unsigned long long)cur.call.seq, cur.call.coll,
                 (cur.call.coll == COH_COLL_SEND || cur.call.coll == COH_COLL_RECV)
                     ? cur.call.root
                     : -1,
                 cur.call.line, cur.call.file ? cur.call.file : "?");
    else
        snprintf(out, len, "%llu 0 0 -1 0 -", (unsigned long long)last);
}

static void handle_record(struct coh_monitor *m, const char *rec, size_t len, int64_t idx)
{
    cohort_group *g = m->g;
    int from = -1;
    if (rec[0] == 'A') {
        /* any store client can write these bytes: group/ctl_wire.c bounds them */
        coh_ctl_abort a;
        char err[96];
        if (coh_ctl_abort_parse(rec, len, g->size, &a, err, sizeof err) != 0) {
            /* rate-limited: a client writing garbage in a loop must not flood the log */
            coh_warn_rl("group %u: control record ctl/%lld ignored: %s", g->id, (long long)idx,
                        err);
        } else if (a.from != g->rank) {
            if (a.note[0])
                coh_warn_rl("group %u: abort record ctl/%lld from rank %d: %s", g->id,
                            (long long)idx, a.from, a.note);
            coh_group_remote_abort_at(g, a.st, a.reason, a.seq);
        }
    } else if (rec[0] == 'S') {
        long long k = 0;
        if (sscanf(rec, "S %d %lld", &from, &k) == 2 && from != g->rank) {
            char key[64], val[512];
            snprintf(key, sizeof key, "state/%lld/%d", k, g->rank);
            my_state(g, val, sizeof val);
            cohort_store_set(m->s, key, strlen(key), val, strlen(val));
        }
    } else if (rec[0] == 'D') {
        coh_trace_dump(g, NULL, "dump requested by a peer");
    }
}

/* The world's rank 0 of generation G drops what earlier generations left in
 * the job's keyspace ("gen<k>/..." for k < G: rendezvous records, control
 * records, contract reports): their processes are refused by the store
 * already, and a job that restarts often would otherwise grow the store by
 * every generation's keys. Off the init path: this thread, its own
 * connection, best effort. */
static void drop_old_generations(struct coh_monitor *m)
{
    cohort_group *g = m->g;
    if (g->parent || g->rank != 0 || g->generation < 2)
        return;
    char **keys = NULL;
    size_t *kl = NULL;
    int n = 0;
    if (cohort_store_list(m->root, "gen", &keys, &kl, &n) != COHORT_OK)
        return;
    int dropped = 0;
    for (int i = 0; i < n; i++) {
        unsigned gen = 0;
        int used = 0;
        if (!atomic_load(&m->stop) && sscanf(keys[i], "gen%u/%n", &gen, &used) == 1 && used > 0 &&
            gen < g->generation) {
            int del = 0;
            if (cohort_store_delete(m->root, keys[i], kl[i], &del) == COHORT_OK)
                dropped += del;
        }
        free(keys[i]);
    }
    free(keys);
    free(kl);
    if (dropped)
        coh_debug("dropped %d store keys of generations before %u", dropped, g->generation);
}

static void *monitor_main(void *arg)
{
    struct coh_monitor *m = arg;
    cohort_group *g = m->g;
    coh_group_background_thread = 1;
    drop_old_generations(m);
    int64_t next = 1;
    char stopkey[32], ctl[48];
    snprintf(stopkey, sizeof stopkey, "stop/%d", g->rank);
    while (!atomic_load(&m->stop)) {
        snprintf(ctl, sizeof ctl, "ctl/%lld", (long long)next);
        const void *kp[2] = {ctl, stopkey};
        size_t kl[2] = {strlen(ctl), strlen(stopkey)};
        int which = -1;
        /* 1 s timeout only to act on SIGUSR1 (a flag set by the handler). */
        cohort_status st = cohort_store_wait_any(m->s, kp, kl, 2, 1000, &which);
        if (coh_trace_signal_pending())
            coh_trace_dump(g, NULL, "SIGUSR1");
        if (st == COHORT_ERR_TIMEOUT)
            continue;
        if (st != COHORT_OK) {
            if (!atomic_load(&m->stop))
                coh_debug("monitor: store wait failed: %s", cohort_store_last_error(m->s));
            break; /* store gone: data-path errors still reach the user */
        }
        if (which == 1)
            break;
        void *v = NULL;
        size_t vl = 0;
        if (cohort_store_get(m->s, ctl, strlen(ctl), &v, &vl, 1000) == COHORT_OK) {
            char *rec = coh_malloc(vl + 1);
            if (rec) {
                memcpy(rec, v, vl);
                rec[vl] = 0;
                handle_record(m, rec, vl, next);
                coh_free(rec);
            }
            free(v);
        }
        atomic_store(&m->handled, next);
        next++;
    }
    return NULL;
}

static void hook_abort(void *g, cohort_status st, const char *reason, int from_peer)
{
    if (!from_peer) /* a peer posted it already */
        coh_monitor_post_abort(g, st, reason);
}
static cohort_status hook_probe(void *g, const coh_call *c) { return coh_monitor_probe(g, c); }
static void hook_stall(void *g, const coh_wait *w, char *out, size_t outlen)
{
    coh_monitor_stall_report(g, w, out, outlen);
}
static const coh_hook_ops control_hook = {.name = "control",
                                          .order = COH_HOOK_CONTROL,
                                          .abort = hook_abort,
                                          .probe = hook_probe,
                                          .stall_report = hook_stall};

void coh_monitor_attach(cohort_group *g) { coh_group_add_hook(g, &control_hook, g); }

cohort_status coh_monitor_start(cohort_group *g)
{
    struct coh_monitor *m = coh_calloc(1, sizeof *m);
    if (!m)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "monitor: out of memory");
    m->g = g;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gen%u/g%u/", g->generation, g->id);
    cohort_status st = coh_store_connect_gen(&m->root, g->store_addr, g->job_id, g->token,
                                             g->generation, g->timeout_ms);
    if (st == COHORT_OK)
        st = cohort_store_prefixed(m->root, prefix, &m->s);
    if (st == COHORT_OK)
        st = cohort_store_prefixed(g->store_root, prefix, &m->post);
    if (st != COHORT_OK) {
        coh_err_set(NULL, st, "monitor: store: %s",
                    m->root ? cohort_store_last_error(m->root) : "connect failed");
        if (m->post)
            cohort_store_close(m->post);
        if (m->s)
            cohort_store_close(m->s);
        if (m->root)
            cohort_store_close(m->root);
        coh_free(m);
        return st;
    }
    cohort_store_set_timeout(m->post, POST_TIMEOUT_MS);
    coh_trace_install_signal();
    int rc = pthread_create(&m->th, NULL, monitor_main, m);
    if (rc) {
        cohort_store_close(m->post);
        cohort_store_close(m->s);
        cohort_store_close(m->root);
        coh_free(m);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "pthread_create", rc, "monitor thread");
    }
    m->started = 1;
    g->monitor = m;
    return COHORT_OK;
}

void coh_monitor_stop(cohort_group *g)
{
    struct coh_monitor *m = g->monitor;
    if (!m)
        return;
    atomic_store(&m->stop, 1);
    char key[32];
    snprintf(key, sizeof key, "stop/%d", g->rank);
    cohort_store_set(m->post, key, strlen(key), "1", 1);
    if (m->started)
        pthread_join(m->th, NULL);
    g->monitor = NULL;
    cohort_store_close(m->post);
    cohort_store_close(m->s);
    cohort_store_close(m->root);
    coh_free(m);
}

cohort_status coh_monitor_sync(cohort_group *g, int timeout_ms)
{
    struct coh_monitor *m = g->monitor;
    if (!m || atomic_load(&g->store_down))
        return COHORT_ERR_STORE;
    int64_t k = 0;
    cohort_status st = cohort_store_add(m->post, "ctl/n", 5, 0, &k);
    note_store(g, st);
    if (st != COHORT_OK)
        return st;
    uint64_t dl = coh_deadline_ns(timeout_ms);
    while (atomic_load(&m->handled) < k) {
        if (coh_now_ns() >= dl)
            return COHORT_ERR_TIMEOUT;
        struct timespec ts = {0, 1000000}; /* the monitor acts within microseconds */
        nanosleep(&ts, NULL);
    }
    return COHORT_OK;
}

void coh_monitor_post_abort(cohort_group *g, cohort_status st, const char *reason)
{
    if (!g->store)
        return;
    char rec[COH_ERRLEN + 96];
    coh_ctl_abort_format(rec, sizeof rec, g->rank, st, coh_group_failed_seq(g), reason);
    if (post_record(g, rec, NULL) != COHORT_OK)
        coh_debug("could not post the abort to the store (peers learn it from the data path)");
}

/* ---- out-of-band contract probe ---- */


/* etcd: a peer whose leased "alive/<r>" key is gone has died (its lease
 * expired) even if no connection noticed - e.g. a host that vanished. */
static cohort_status check_leases(cohort_group *g)
{
    struct coh_monitor *m = g->monitor;
    cohort_store *s = m ? m->post : g->store;
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank)
            continue;
        char k[32];
        snprintf(k, sizeof k, "alive/%d", r);
        const void *kp = k;
        size_t kl = strlen(k);
        int have = 1;
        cohort_status st = cohort_store_check(s, &kp, &kl, 1, &have);
        if (st != COHORT_OK) {
            note_store(g, st);
            return COHORT_OK;
        }
        if (!have)
            return coh_group_peer_lost(g, r, "its etcd lease expired (seen through the store)");
    }
    return COHORT_OK;
}

void coh_monitor_announce(cohort_group *g, const coh_call *c)
{
    if (!g->store || atomic_load(&g->store_down))
        return;
    char key[64], val[512];
    snprintf(key, sizeof key, "fp/%llu/%d", (unsigned long long)c->seq, g->rank);
    coh_fp_record_format(val, sizeof val, c);
    struct coh_monitor *m = g->monitor;
    cohort_store *s = m ? m->post : g->store;
    cohort_status st = cohort_store_set(s, key, strlen(key), val, strlen(val));
    if (st == COHORT_OK && c->coll == COH_COLL_FINALIZE) {
        /* For point-to-point waiters, whose sequence numbers are per pair:
         * "<seq> <peer>:<sent>:<received> ..." for every peer this rank
         * exchanged messages with, so a waiter can tell a message still in
         * flight (sent before finalize) from one that will never come. */
        snprintf(key, sizeof key, "fin/%d", g->rank);
        size_t cap = 32 + (size_t)g->size * 8, pos = 0;
        char *fv = coh_malloc(cap);
        if (fv) {
            pos = (size_t)snprintf(fv, cap, "%llu", (unsigned long long)c->seq);
            for (int r = 0; r < g->size; r++) {
                uint64_t sn = g->p2p_send_seq ? g->p2p_send_seq[r] : 0;
                uint64_t rc = g->p2p_recv_seq ? g->p2p_recv_seq[r] : 0;
                if (!sn && !rc)
                    continue;
                char item[80];
                int w = snprintf(item, sizeof item, " %d:%llu:%llu", r, (unsigned long long)sn,
                                 (unsigned long long)rc);
                if (pos + (size_t)w + 1 > cap) {
                    char *nv = coh_realloc(fv, cap * 2 + (size_t)w);
                    if (!nv)
                        break;
                    fv = nv;
                    cap = cap * 2 + (size_t)w;
                }
                memcpy(fv + pos, item, (size_t)w + 1);
                pos += (size_t)w;
            }
            st = cohort_store_set(s, key, strlen(key), fv, pos);
            coh_free(fv);
        }
    }
    if (st != COHORT_OK)
        note_store(g, st);
}

/* A send or recv whose peer has called cohort_finalize can never complete. */
static cohort_status check_p2p_peer_left(cohort_group *g, const coh_call *c)
{
    if (c->root < 0 || c->root >= g->size)
        return COHORT_OK;
    struct coh_monitor *m = g->monitor;
    cohort_store *s = m ? m->post : g->store;
    char key[32];
    snprintf(key, sizeof key, "fin/%d", c->root);
    const void *kp = key;
    size_t kl = strlen(key);
    int have = 0;
    if (cohort_store_check(s, &kp, &kl, 1, &have) != COHORT_OK || !have)
        return COHORT_OK;
    void *v = NULL;
    size_t vl = 0;
    if (cohort_store_get(s, key, kl, &v, &vl, 500) != COHORT_OK)
        return COHORT_OK;
    char *buf = coh_malloc(vl + 1);
    if (!buf) {
        free(v);
        return COHORT_OK;
    }
    memcpy(buf, v, vl);
    buf[vl] = 0;
    free(v);
    /* How many messages the peer sent to / received from this rank before
     * it left: a message it sent is in flight, not missing. */
    char *p = buf, *end;
    unsigned long long at = strtoull(p, &end, 10), sent = 0, rcvd = 0;
    p = end;
    while (*p == ' ') {
        int r = (int)strtol(p + 1, &end, 10);
        if (*end != ':')
            break;
        unsigned long long a = strtoull(end + 1, &end, 10);
        if (*end != ':')
            break;
        unsigned long long b = strtoull(end + 1, &end, 10);
        p = end;
        if (r == g->rank) {
            sent = a;
            rcvd = b;
            break;
        }
    }
    coh_free(buf);
    int send = c->coll == COH_COLL_SEND;
    if ((send ? rcvd : sent) >= c->seq)
        return COHORT_OK; /* matched before it left: the data is on its way */
    return coh_group_fail(g, COHORT_ERR_CONTRACT,
                          "%s #%llu (%s:%d) %s rank %d (tag %d): rank %d left the group (called "
                          "cohort_finalize, its call #%llu) without the matching %s",
                          coh_coll_name(c->coll), (unsigned long long)c->seq, c->file, c->line,
                          send ? "to" : "from", c->root, c->tag, c->root, at,
                          send ? "recv" : "send");
}

cohort_status coh_monitor_probe(cohort_group *g, const coh_call *c)
{
    if (g->lease_alive && !atomic_load(&g->store_down)) {
        cohort_status ls = check_leases(g);
        if (ls != COHORT_OK)
            return ls;
    }
    if (c && g->store && !atomic_load(&g->store_down) &&
        (c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV))
        return check_p2p_peer_left(g, c);
    if (!c || !g->store || !g->check_contract || c->coll == COH_COLL_SEND ||
        c->coll == COH_COLL_RECV || atomic_load(&g->store_down))
        return COHORT_OK;
    char key[64], val[512];
    snprintf(key, sizeof key, "fp/%llu/%d", (unsigned long long)c->seq, g->rank);
    coh_fp_record_format(val, sizeof val, c);
    struct coh_monitor *m = g->monitor;
    cohort_store *s = m ? m->post : g->store;
    cohort_status pst = cohort_store_set(s, key, strlen(key), val, strlen(val));
    if (pst != COHORT_OK) {
        note_store(g, pst);
        return COHORT_OK; /* best effort: the stall report still comes */
    }
    coh_hdr mine;
    coh_hdr_from_call(&mine, g, c, COH_MSG_COLL, 0, 0);
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank)
            continue;
        snprintf(key, sizeof key, "fp/%llu/%d", (unsigned long long)c->seq, r);
        const void *kp = key;
        size_t kl = strlen(key);
        int have = 0;
        if (cohort_store_check(s, &kp, &kl, 1, &have) != COHORT_OK || !have)
            continue;
        void *v = NULL;
        size_t vl = 0;
        if (cohort_store_get(s, key, kl, &v, &vl, 500) != COHORT_OK)
            continue;
        coh_fp_record fp;
        char why[96];
        int bad = coh_fp_record_parse(v, vl, &fp, why, sizeof why);
        free(v);
        if (bad)
            continue; /* bytes any store client can write (fp_record.h); the data path still checks */
        coh_call theirs;
        memset(&theirs, 0, sizeof theirs);
        int coll = fp.coll, dtype = fp.dtype, redop = fp.redop, root = fp.root, tag = fp.tag,
            line = fp.line;
        unsigned long long count = fp.count;
        const char *file = fp.file;
        theirs.seq = c->seq;
        theirs.coll = (uint8_t)coll;
        theirs.dtype = (uint8_t)dtype;
        theirs.count = count;
        theirs.redop = (int8_t)redop;
        theirs.root = root;
        theirs.tag = tag;
        theirs.line = line;
        theirs.file = file;
        coh_hdr got;
        coh_hdr_from_call(&got, g, &theirs, COH_MSG_COLL, 0, 0);
        got.src = r;
        got.line = (uint32_t)line;
        if (coh_hdr_match(&mine, &got) != COH_FIELD_NONE)
            return coh_contract_mismatch(g, c, r, &mine, &got);
    }
    return COHORT_OK;
}

/* ---- stall reports ---- */

void coh_monitor_stall_report(cohort_group *g, const coh_wait *w, char *out, size_t outlen)
{
    const coh_call *c = w->call;
    size_t pos = 0;
    double waited = (double)(coh_now_ns() - w->start_ns) / 1e9;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (pos < outlen) {                                                                        \
            int n_ = snprintf(out + pos, outlen - pos, __VA_ARGS__);                               \
            if (n_ > 0)                                                                            \
                pos += (size_t)n_;                                                                 \
        }                                                                                          \
    } while (0)
    if (c)
        APPEND("stall: %s #%llu (%s:%d) on rank %d has waited %.1f s", coh_coll_name(c->coll),
               (unsigned long long)c->seq, c->file, c->line, g->rank, waited);
    else
        APPEND("stall on rank %d after %.1f s", g->rank, waited);
    int64_t k = 0;
    char rec[64];
    snprintf(rec, sizeof rec, "S %d", g->rank);
    /* The record carries its own index so answers are keyed by it. */
    struct coh_monitor *m = g->monitor;
    cohort_store *s = m ? m->post : g->store;
    cohort_status ast = (!s || atomic_load(&g->store_down)) ? COHORT_ERR_STORE
                                                              : cohort_store_add(s, "ctl/n", 5, 1, &k);
    if (ast != COHORT_OK) {
        note_store(g, ast);
        APPEND("; peers' state unavailable (store unreachable)");
        return;
    }
    char key[64];
    snprintf(rec, sizeof rec, "S %d %lld", g->rank, (long long)k);
    snprintf(key, sizeof key, "ctl/%lld", (long long)k);
    cohort_store_set(s, key, strlen(key), rec, strlen(rec));
    uint64_t dl = coh_deadline_ns(1000);
    int *wait_peer = coh_calloc((size_t)g->size, sizeof(int));
    int64_t *cur_seq = coh_calloc((size_t)g->size, sizeof(int64_t));
    for (int r = 0; r < g->size; r++) {
        if (wait_peer)
            wait_peer[r] = -2;
        if (r == g->rank)
            continue;
        snprintf(key, sizeof key, "state/%lld/%d", (long long)k, r);
        void *v = NULL;
        size_t vl = 0;
        if (cohort_store_get(s, key, strlen(key), &v, &vl, coh_ms_left(dl)) != COHORT_OK) {
            APPEND("; rank %d: unresponsive (no answer within 1 s: stopped, hung or dead)", r);
            continue;
        }
        coh_ctl_state rs;
        char why[96];
        int bad = coh_ctl_state_parse(v, vl, g->size, &rs, why, sizeof why);
        free(v);
        if (bad) {
            /* bytes any store client can write: never an index (ctl_wire.h) */
            APPEND("; rank %d: unreadable state record (%s)", r, why);
            continue;
        }
        unsigned long long last = rs.last, seq = rs.seq;
        int coll = rs.coll, peer = rs.peer, line = rs.line;
        const char *file = rs.file;
        if (wait_peer) {
            wait_peer[r] = coll ? peer : -2;
            cur_seq[r] = (int64_t)seq;
        }
        if (coll)
            APPEND("; rank %d: last completed #%llu, now in %s #%llu (%s:%d)%s", r, last,
                   coh_coll_name(coll), seq, file, line,
                   (c && c->coll != COH_COLL_SEND && c->coll != COH_COLL_RECV &&
                    coll != COH_COLL_SEND && coll != COH_COLL_RECV && seq != c->seq)
                       ? (seq < c->seq ? " - behind" : " - ahead")
                       : "");
        else
            APPEND("; rank %d: not in any call, last completed #%llu%s", r, last,
                   (c && c->coll != COH_COLL_SEND && c->coll != COH_COLL_RECV && last < c->seq)
                       ? " - it has not reached this call (skipped it, or still computing)"
                       : "");
    }
    /* Point-to-point wait-for cycle through this rank. */
    if (wait_peer && c && (c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV)) {
        wait_peer[g->rank] = c->root;
        int cur = g->rank, steps = 0;
        int *path = coh_calloc((size_t)g->size + 1, sizeof(int));
        if (path) {
            path[steps++] = cur;
            while (steps <= g->size) {
                int nx = wait_peer[cur];
                if (nx < 0)
                    break;
                if (nx == g->rank) {
                    APPEND("; deadlock cycle:");
                    for (int i = 0; i < steps; i++)
                        APPEND(" rank %d waits for rank %d%s", path[i], wait_peer[path[i]],
                               i + 1 < steps ? "," : "");
                    break;
                }
                path[steps++] = nx;
                cur = nx;
            }
            coh_free(path);
        }
    }
    coh_free(wait_peer);
    coh_free(cur_seq);
#undef APPEND
}

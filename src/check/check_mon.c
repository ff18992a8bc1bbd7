/*
 * check_mon.c - the checker's monitor thread: what the calling thread
 * cannot do while it is blocked inside the other library.
 *
 * Every tick: drain the same-host predecessors' rings and the
 * store records of predecessors on other hosts (comparing them with this
 * rank's pending calls), resolve this rank's current call site once the
 * call lasts, publish the position to the store when some member lives on
 * another host, report stalls, look for a wait-for cycle of blocking
 * point-to-point calls, and act on a failure - this rank's own or another
 * rank's (seen as the world group being aborted).
 *
 * The tick is 10 ms while something may need the monitor soon: a call in
 * progress at two ticks in a row (it may be blocked in the backend, where
 * only the monitor finds a mismatch or a stall), a point-to-point wait, a
 * calling thread waiting on the checker, or a predecessor on another host
 * (its records come only through this thread). Otherwise - calls that
 * come and go within a tick - it is 50 ms: each wake-up costs tens of us
 * of CPU and a membarrier(2) interrupt of the calling thread (measured in
 * a gloo program on 2 cores, docs/pytorch.md), and nothing it does is due
 * sooner then (positions are read after seconds; a call that lasts brings
 * the 10 ms tick back from the next tick on).
 *
 * A failure is one record "fail" in the checker's store namespace, written
 * once (compare_set: the first detector wins), then the world group is
 * aborted so that every rank's world monitor wakes at once. A mismatch's
 * report is built by its detector from every member's history
 * ("h/<gid>/<member>") with cohort's analysis and published as
 * "report/<gid>"; every rank hands that same text to its handler.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check/check_int.h"
#include "contract/contract.h"
#include "transport/shm/shm.h"

#define TICK_MS 10      /* while a call lasts (above) */
#define TICK_IDLE_MS 50 /* while calls come and go within a tick */
#define HIST_WAIT_MS 3000   /* for every member's history (loaded machines) */
#define LATE_WAIT_MS 1000   /* for this rank to reach the failing call */
#define REPORT_WAIT_MS 8000 /* for the detector's report */
#define FAIL_WAIT_MS 3000   /* for the failure record after the world aborted */
#define SHOWN_WAIT_MS 5000  /* for every rank to have reported before the job is ended */

void coh_chk_site(cohort_check *c, const char *file, int line, const void *pc, char *out,
                  size_t len)
{
    if (file) {
        snprintf(out, len, "%s:%d", coh_site_base(file), line);
        return;
    }
    if (pc && c->o.resolver && c->o.resolver(c->o.resolver_arg, pc, out, len) && out[0])
        return;
    if (pc)
        snprintf(out, len, "pc %p", pc);
    else
        snprintf(out, len, "unknown call site");
}

/* ---- positions ---- */

/* Reads world rank w's position: same host from its aux header, else from
 * the store (published by its monitor). Returns 0 if unknown. Without
 * c->mu (the store is the monitor's connection). */
static int read_pos(cohort_check *c, int w, chk_pos *p, uint64_t *age_ns)
{
    uint64_t now = coh_now_ns();
    if (w == c->rank) {
        pthread_mutex_lock(&c->mu);
        *p = c->pos;
        pthread_mutex_unlock(&c->mu);
        *age_ns = p->state ? now - p->start_ns : 0;
        return 1;
    }
    const cohort_group *g = c->world;
    if (c->shm && g->peers[w].host == g->my_host) {
        chk_aux_hdr *h = coh_shm_aux(c->shm, g->peers[w].local_index);
        for (int tries = 0; tries < 100; tries++) {
            uint32_t v1 = atomic_load_explicit(&h->pos_ver, memory_order_acquire);
            if (v1 & 1)
                continue;
            memcpy(p, &h->pos, sizeof *p);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&h->pos_ver, memory_order_relaxed) == v1) {
                p->op[CHK_OP_MAX - 1] = p->last_op[CHK_OP_MAX - 1] = 0;
                p->site[CHK_SITE_MAX - 1] = p->last_site[CHK_SITE_MAX - 1] = 0;
                *age_ns = p->state && now > p->start_ns ? now - p->start_ns : 0;
                return 1;
            }
        }
        return 0;
    }
    if (!c->st_mon)
        return 0;
    char key[32];
    snprintf(key, sizeof key, "pos/%d", w);
    int exists = 0;
    const void *kp[1] = {key};
    size_t kl[1] = {strlen(key)};
    if (cohort_store_check(c->st_mon, kp, kl, 1, &exists) != COHORT_OK || !exists)
        return 0;
    void *v = NULL;
    size_t vl = 0;
    if (cohort_store_get(c->st_mon, key, strlen(key), &v, &vl, 500) != COHORT_OK)
        return 0;
    int ok = coh_chk_pos_parse(v, vl, p) == 0;
    free(v);
    /* Published with start_ns = the call's age at publication. */
    *age_ns = ok ? p->start_ns : 0;
    return ok;
}

static const char *gname(cohort_check *c, uint64_t gid, char *buf, size_t len)
{
    pthread_mutex_lock(&c->mu);
    cohort_check_group *g = coh_chk_find(c, gid);
    if (g)
        snprintf(buf, len, "%s", g->name);
    else
        snprintf(buf, len, "group %016" PRIx64, gid);
    pthread_mutex_unlock(&c->mu);
    return buf;
}

static void describe(cohort_check *c, const chk_pos *p, uint64_t age_ns, char *out, size_t len)
{
    char gn[80];
    const char *site = p->site[0] ? p->site : "call site not resolved yet";
    if (p->state == CHK_POS_CALL)
        snprintf(out, len, "in %s #%" PRIu64 " of %s (%s) for %.1f s", p->op, p->seq,
                 gname(c, p->gid, gn, sizeof gn), site, (double)age_ns / 1e9);
    else if (p->state == CHK_POS_WAIT && p->peer >= 0)
        snprintf(out, len, "waits for rank %d in %s (%s) for %.1f s", p->peer, p->op, site,
                 (double)age_ns / 1e9);
    else if (p->state == CHK_POS_WAIT)
        snprintf(out, len, "waits for any rank in %s (%s) for %.1f s", p->op, site,
                 (double)age_ns / 1e9);
    else if (p->last_seq)
        snprintf(out, len, "in no checked call (last finished %s #%" PRIu64 " of %s, %s)",
                 p->last_op, p->last_seq, gname(c, p->last_gid, gn, sizeof gn),
                 p->last_site[0] ? p->last_site : "call site not resolved");
    else
        snprintf(out, len, "in no checked call (none made yet)");
}

/* ---- failure: publish, gather, report ---- */

static void finish(cohort_check *c, int kind, cohort_status st, const char *text)
{
    pthread_mutex_lock(&c->mu);
    int zero = 0;
    if (atomic_compare_exchange_strong(&c->failed, &zero, kind))
        c->status = st;
    snprintf(c->err, sizeof c->err, "%s", text);
    pthread_mutex_unlock(&c->mu);
    cohort_check_event ev = {kind, st, text};
    coh_info("checker: report ready");
    if (c->o.handler)
        c->o.handler(c->o.handler_arg, &ev);
    else
        coh_error("checker: %s", text);
    /* Handlers report; what ends the job (MPI_Abort kills every rank at
     * once, and the store lives in world rank 0) waits until every rank
     * has reported, bounded. */
    if (c->st_mon) {
        int64_t v = 0;
        cohort_store_add(c->st_mon, "shown", 5, 1, &v);
        uint64_t dl = coh_deadline_ns(SHOWN_WAIT_MS);
        while (v < c->size && coh_ms_left(dl) > 0) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            if (cohort_store_add(c->st_mon, "shown", 5, 0, &v) != COHORT_OK)
                break;
        }
    }
    /* Only now do failing calls return: their caller may end the job too. */
    pthread_mutex_lock(&c->mu);
    c->report_ready = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->o.abort)
        c->o.abort(c->o.handler_arg, &ev);
}

static cohort_status kind_status(int kind)
{
    switch (kind) {
    case COHORT_CHECK_MISMATCH:
    case COHORT_CHECK_DEADLOCK: return COHORT_ERR_CONTRACT;
    case COHORT_CHECK_TIMEOUT: return COHORT_ERR_TIMEOUT;
    default: return COHORT_ERR_ABORTED;
    }
}

/* Names for the analysis: small tables of (hash, text), filled from all
 * members' histories; coll/dtype/redop/tag hold indices into them. */
typedef struct ntab {
    uint64_t h[4 * CHK_HIST * 64];
    const char *t[4 * CHK_HIST * 64];
    int n;
} ntab;

static int nt_idx(ntab *nt, uint64_t h, const char *text)
{
    for (int i = 0; i < nt->n; i++)
        if (nt->h[i] == h)
            return i;
    if (nt->n >= (int)COH_ARRAY_LEN(nt->h))
        return 0;
    nt->h[nt->n] = h;
    nt->t[nt->n] = text;
    return nt->n++;
}

static const char *nt_name(void *arg, int i)
{
    ntab *nt = arg;
    if (i < 0 || i >= nt->n)
        return "?";
    if (nt->t[i] && nt->t[i][0])
        return nt->t[i];
    return nt->h[i] ? "(unnamed)" : "none";
}

/* The readable form of a hashed value without text: its hash. */
static void text_or_hash(char *buf, size_t len, const char *t, uint64_t h)
{
    if (t && t[0])
        snprintf(buf, len, "%s", t);
    else if (h)
        snprintf(buf, len, "hash %016" PRIx64, h);
    else
        snprintf(buf, len, "none");
}

/* The detector's analysis of every member's history. */
static void analyze(cohort_check *c, int n, char **vals, size_t *vlens, const int *world,
                    const char *name, char *out, size_t outlen)
{
    coh_hist *hist = coh_calloc((size_t)n, sizeof *hist);
    chk_hline **lines = coh_calloc((size_t)n, sizeof *lines);
    ntab *nt = coh_calloc(1, sizeof *nt);
    char (*texts)[CHK_TEXT_MAX] = coh_calloc((size_t)n * CHK_HIST * 2, CHK_TEXT_MAX);
    if (!hist || !lines || !nt || !texts) {
        snprintf(out, outlen, "out of memory building the report");
        goto done;
    }
    coh_contract_names names = {.op = nt_name, .dtype = nt_name, .redop = nt_name,
                                .tag = nt_name, .arg = nt};
    names.field[COH_FIELD_OP] = "operation";
    names.field[COH_FIELD_DTYPE] = "type signature";
    names.field[COH_FIELD_TAG] = "arguments";
    for (int m = 0; m < n; m++) {
        if (!vals[m])
            continue; /* missing: fp NULL */
        uint64_t gid;
        int member, k;
        char why[80];
        if (coh_chk_hist_parse(vals[m], vlens[m], &gid, &member, &lines[m], &k, why,
                               sizeof why) != 0 ||
            member != m) {
            coh_warn("checker: member %d's history: %s", m, why);
            continue;
        }
        hist[m].n = k;
        hist[m].fp = coh_calloc((size_t)(k ? k : 1), sizeof(cohort_fingerprint));
        if (!hist[m].fp) {
            hist[m].n = 0;
            continue;
        }
        for (int i = 0; i < k; i++) {
            chk_hline *e = &lines[m][i];
            cohort_fingerprint *fp = &hist[m].fp[i];
            char *st = texts[((size_t)m * CHK_HIST + (size_t)i) * 2];
            char *at = texts[((size_t)m * CHK_HIST + (size_t)i) * 2 + 1];
            text_or_hash(st, CHK_TEXT_MAX, e->sig, e->f.sig_hash);
            text_or_hash(at, CHK_TEXT_MAX, e->args, e->f.args_hash);
            fp->seq = e->f.seq;
            fp->coll = nt_idx(nt, e->f.op_hash ^ 0x1, e->op);
            fp->dtype = nt_idx(nt, e->f.sig_hash ^ 0x2, st);
            fp->redop = nt_idx(nt, e->f.redop_hash ^ 0x3, e->redop);
            fp->tag = nt_idx(nt, e->f.args_hash ^ 0x4, at);
            fp->root = e->f.root;
            fp->count = e->f.count;
            fp->group = (uint32_t)gid;
            fp->file = e->file[0] ? e->file : NULL;
            fp->line = e->line;
        }
    }
    char body[COH_ERRLEN];
    coh_contract_analyze_names(hist, n, &names, body, sizeof body);
    int ident = 1;
    for (int m = 0; m < n; m++)
        ident &= world[m] == m;
    char map[256] = "";
    if (!ident) {
        size_t p = (size_t)snprintf(map, sizeof map, " (members' world ranks: ");
        for (int m = 0; m < n && p < sizeof map; m++)
            p += (size_t)snprintf(map + p, sizeof map - p, "%s%d", m ? "," : "", world[m]);
        if (p < sizeof map)
            snprintf(map + p, sizeof map - p, ")");
    }
    snprintf(out, outlen, "%s: %s%s", name, body, map);
done:
    for (int m = 0; hist && m < n; m++)
        coh_free(hist[m].fp);
    for (int m = 0; lines && m < n; m++)
        coh_free(lines[m]);
    coh_free(hist), coh_free(lines), coh_free(nt), coh_free(texts);
}

/* This member's history of g, sites resolved. */
static char *my_history(cohort_check *c, uint64_t gid, uint64_t seq, size_t *len, int **world,
                        int *n, int *me, char *name, size_t nlen)
{
    pthread_mutex_lock(&c->mu);
    cohort_check_group *g = coh_chk_find(c, gid);
    /* This rank may not have reached the failing call yet (another pair of
     * ranks compared first), or not even registered the group (torch's
     * init_process_group has returned on the others): give it a moment to
     * get there, since group_add and begin work even now, so the report
     * shows what it called instead of "made no calls" or "no history". */
    if (!g || g->seq < seq) {
        struct timespec ts;
        coh_abstime_ms(&ts, LATE_WAIT_MS);
        int r = 0;
        while ((!g || g->seq < seq) && !c->stop && r != ETIMEDOUT) {
            c->waiters++;
            r = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
            c->waiters--;
            g = coh_chk_find(c, gid);
        }
        if (g && g->seq < seq)
            coh_info("checker: group %016" PRIx64 " is at call %" PRIu64 ", not %" PRIu64
                     "; publishing its history as it is", gid, g->seq, seq);
    }
    if (!g) {
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    cohort_check_group copy = *g;
    *world = coh_malloc(sizeof(int) * (size_t)g->n);
    if (*world)
        memcpy(*world, g->world, sizeof(int) * (size_t)g->n);
    pthread_mutex_unlock(&c->mu);
    if (!*world)
        return NULL;
    *n = copy.n;
    *me = copy.me;
    snprintf(name, nlen, "%s", copy.name);
    char sites[CHK_HIST][CHK_SITE_MAX];
    const char *sp[CHK_HIST];
    for (int i = 0; i < CHK_HIST; i++) {
        sites[i][0] = 0;
        sp[i] = sites[i];
        uint64_t s = copy.hist[i].f.seq;
        if (s && s <= copy.seq && copy.seq - s < CHK_HIST) /* a call kept in the history */
            coh_chk_site(c, copy.hist[i].file, copy.hist[i].line, copy.hist[i].pc, sites[i],
                         sizeof sites[i]);
    }
    return coh_chk_hist_format(&copy, sp, len);
}

static void report_mismatch(cohort_check *c, uint64_t gid, uint64_t seq, int detector,
                            const char *fallback)
{
    char key[64], name[64] = "";
    int *world = NULL, n = 0, me = -1;
    size_t hl = 0;
    char *h = my_history(c, gid, seq, &hl, &world, &n, &me, name, sizeof name);
    coh_info("checker: mismatch in group %016" PRIx64 " found by member %d; this rank is member %d",
             gid, detector, me);
    char *final = coh_malloc(COH_ERRLEN);
    if (!final) {
        coh_free(h), coh_free(world);
        finish(c, COHORT_CHECK_MISMATCH, COHORT_ERR_CONTRACT, fallback);
        return;
    }
    snprintf(final, COH_ERRLEN, "%s", fallback);
    if (h) {
        snprintf(key, sizeof key, "h/%016" PRIx64 "/%d", gid, me);
        cohort_store_set(c->st_mon, key, strlen(key), h, hl);
    }
    if (h && me == detector) {
        char (*keys)[64] = coh_calloc((size_t)n, sizeof *keys);
        const void **kp = coh_calloc((size_t)n, sizeof *kp);
        size_t *kl = coh_calloc((size_t)n, sizeof *kl), *vl = coh_calloc((size_t)n, sizeof *vl);
        char **vals = coh_calloc((size_t)n, sizeof *vals);
        if (keys && kp && kl && vl && vals) {
            for (int m = 0; m < n; m++) {
                snprintf(keys[m], sizeof keys[m], "h/%016" PRIx64 "/%d", gid, m);
                kp[m] = keys[m];
                kl[m] = strlen(keys[m]);
            }
            cohort_store_wait(c->st_mon, kp, kl, n, HIST_WAIT_MS);
            for (int m = 0; m < n; m++) {
                int ex = 0;
                const void *k1[1] = {kp[m]};
                if (cohort_store_check(c->st_mon, k1, &kl[m], 1, &ex) == COHORT_OK && ex)
                    cohort_store_get(c->st_mon, kp[m], kl[m], (void **)&vals[m], &vl[m], 1000);
            }
            char *body = coh_malloc(COH_ERRLEN);
            if (body) {
                analyze(c, n, vals, vl, world, name, body, COH_ERRLEN);
                int missing = 0;
                for (int m = 0; m < n; m++)
                    missing += !vals[m];
                if (missing)
                    snprintf(final, COH_ERRLEN, "%s [%d member(s) sent no history]", body,
                             missing);
                else
                    snprintf(final, COH_ERRLEN, "%s", body);
                coh_free(body);
            }
            for (int m = 0; m < n; m++)
                free(vals[m]);
        }
        coh_free(keys), coh_free(kp), coh_free(kl), coh_free(vl), coh_free(vals);
        snprintf(key, sizeof key, "report/%016" PRIx64, gid);
        cohort_store_set(c->st_mon, key, strlen(key), final, strlen(final));
        coh_info("checker: report published");
    } else {
        char *v = NULL;
        snprintf(key, sizeof key, "report/%016" PRIx64, gid);
        if (cohort_store_gets(c->st_mon, key, &v, REPORT_WAIT_MS) == COHORT_OK && v)
            snprintf(final, COH_ERRLEN, "%s", v);
        free(v);
    }
    coh_free(h), coh_free(world);
    finish(c, COHORT_CHECK_MISMATCH, COHORT_ERR_CONTRACT, final);
    coh_free(final);
}

static void handle_failure(cohort_check *c)
{
    pthread_mutex_lock(&c->mu);
    char *mine = c->fail_value ? coh_strdup(c->fail_value) : NULL;
    pthread_mutex_unlock(&c->mu);
    void *cur = NULL;
    size_t curlen = 0;
    coh_info("checker: handling a failure (%s)", mine ? "found here" : "found elsewhere");
    if (mine && c->st_mon) {
        /* The first detector's record wins; then wake every rank. */
        cohort_status st = cohort_store_compare_set(c->st_mon, "fail", 4, NULL, 0, mine,
                                                    strlen(mine), &cur, &curlen);
        if (st != COHORT_OK) {
            free(cur);
            cur = NULL;
        }
        char reason[300];
        snprintf(reason, sizeof reason, "external-collective checker failed on rank %d", c->rank);
        cohort_abort(c->world, reason);
    } else if (c->st_mon) {
        cohort_store_get(c->st_mon, "fail", 4, &cur, &curlen, FAIL_WAIT_MS);
    }
    if (!cur && mine) {
        /* No store: this rank's own record is all there is. */
        cur = mine;
        curlen = strlen(mine);
        mine = NULL;
    }
    int kind;
    uint64_t gid, seq;
    int member;
    const char *text;
    if (!cur || coh_chk_fail_parse(cur, curlen, &kind, &gid, &seq, &member, &text) != 0) {
        char why[COH_ERRLEN];
        pthread_mutex_lock(&c->world->err_mu);
        snprintf(why, sizeof why, "the world group failed: %s", c->world->err.msg);
        pthread_mutex_unlock(&c->world->err_mu);
        finish(c, COHORT_CHECK_ABORTED, COHORT_ERR_ABORTED, why);
    } else {
        char *t = coh_malloc(COH_ERRLEN);
        if (t) {
            size_t tl = (size_t)((const char *)cur + curlen - text);
            if (tl >= COH_ERRLEN)
                tl = COH_ERRLEN - 1;
            memcpy(t, text, tl);
            t[tl] = 0;
            if (kind == COHORT_CHECK_MISMATCH)
                report_mismatch(c, gid, seq, member, t);
            else
                finish(c, kind, kind_status(kind), t);
            coh_free(t);
        } else {
            finish(c, kind, kind_status(kind), "checker: out of memory");
        }
    }
    free(cur);
    coh_free(mine);
}

/* ---- remote records ---- */

static void fetch_remote(cohort_check *c)
{
    for (int w = 0; w < c->size; w++) {
        pthread_mutex_lock(&c->mu);
        int want = c->remote_pred[w];
        uint64_t next = c->recvd[w] + 1;
        pthread_mutex_unlock(&c->mu);
        if (!want || !c->st_mon)
            continue;
        for (int batch = 0; batch < 256; batch++, next++) {
            char key[64];
            snprintf(key, sizeof key, "q/%d/%d/%" PRIu64, c->rank, w, next);
            const void *kp[1] = {key};
            size_t kl[1] = {strlen(key)};
            int ex = 0;
            if (cohort_store_check(c->st_mon, kp, kl, 1, &ex) != COHORT_OK || !ex)
                break;
            void *v = NULL;
            size_t vl = 0;
            if (cohort_store_get(c->st_mon, key, kl[0], &v, &vl, 1000) != COHORT_OK)
                break;
            chk_rec r;
            int ok = coh_chk_rec_decode(v, vl, &r) == 0 && r.reader == c->rank;
            free(v);
            cohort_store_delete(c->st_mon, key, kl[0], NULL);
            pthread_mutex_lock(&c->mu);
            c->recvd[w] = next;
            if (ok) {
                coh_chk_handle_store_rec(c, w, &r);
            } else {
                char text[200], value[260];
                snprintf(text, sizeof text,
                         "checker: an unreadable fingerprint record from rank %d", w);
                snprintf(value, sizeof value, "R 5 %s", text);
                coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_PROTOCOL, value, text);
            }
            pthread_mutex_unlock(&c->mu);
        }
    }
}

/* ---- stalls and deadlocks ---- */

static void stall_report(cohort_check *c, const chk_pos *me, uint64_t age, char *out, size_t len)
{
    pthread_mutex_lock(&c->mu);
    cohort_check_group *g = coh_chk_find(c, me->gid);
    int n = g ? g->n : 0;
    int *world = n ? coh_malloc(sizeof(int) * (size_t)n) : NULL;
    if (world)
        memcpy(world, g->world, sizeof(int) * (size_t)n);
    char name[64];
    snprintf(name, sizeof name, "%s", g ? g->name : "?");
    pthread_mutex_unlock(&c->mu);
    size_t p = (size_t)snprintf(out, len, "stall: %s #%" PRIu64 " of %s (%s) on rank %d has waited %.1f s",
                                me->op, me->seq, name, me->site[0] ? me->site : "?", c->rank,
                                (double)age / 1e9);
    char lag[256] = "";
    size_t lp = 0;
    for (int m = 0; world && m < n && p < len; m++) {
        chk_pos q;
        uint64_t qa;
        char d[400];
        if (world[m] == c->rank)
            continue;
        if (!read_pos(c, world[m], &q, &qa)) {
            snprintf(d, sizeof d, "position unknown");
        } else {
            describe(c, &q, qa, d, sizeof d);
            if (!(q.state == CHK_POS_CALL && q.gid == me->gid && q.seq == me->seq) &&
                lp < sizeof lag)
                lp += (size_t)snprintf(lag + lp, sizeof lag - lp, "%s%d", lp ? "," : "", m);
        }
        p += (size_t)snprintf(out + p, len - p, "; member %d (rank %d) %s", m, world[m], d);
    }
    if (lag[0] && p < len)
        snprintf(out + p, len - p, "; not in this call: member(s) %s", lag);
    coh_free(world);
}

static void check_stall(cohort_check *c)
{
    pthread_mutex_lock(&c->mu);
    chk_pos me = c->pos;
    int warned = c->stall_warned;
    pthread_mutex_unlock(&c->mu);
    if (me.state != CHK_POS_CALL)
        return;
    uint64_t age = coh_now_ns() - me.start_ns;
    int fatal = c->o.timeout_ms > 0 && age >= (uint64_t)c->o.timeout_ms * 1000000ull;
    int warn = c->o.stall_warn_ms > 0 &&
               age >= (uint64_t)c->o.stall_warn_ms * 1000000ull * (uint64_t)(warned + 1);
    if (!fatal && !warn)
        return;
    char *text = coh_malloc(COH_ERRLEN);
    if (!text)
        return;
    stall_report(c, &me, age, text, COH_ERRLEN);
    if (fatal) {
        char *value = coh_malloc(COH_ERRLEN + 48);
        if (value) {
            snprintf(value, COH_ERRLEN + 48, "R %d timed out (COHORT_TIMEOUT): %s",
                     COHORT_CHECK_TIMEOUT, text);
            pthread_mutex_lock(&c->mu);
            coh_chk_fail(c, COHORT_CHECK_TIMEOUT, COHORT_ERR_TIMEOUT, value, text);
            pthread_mutex_unlock(&c->mu);
            coh_free(value);
        }
    } else {
        pthread_mutex_lock(&c->mu);
        if (c->pos.episode == me.episode)
            c->stall_warned = warned + 1;
        pthread_mutex_unlock(&c->mu);
        if (c->o.handler) {
            cohort_check_event ev = {COHORT_CHECK_STALL, COHORT_OK, text};
            c->o.handler(c->o.handler_arg, &ev);
        } else {
            coh_warn("checker: %s", text);
        }
    }
    coh_free(text);
}

#define DL_MAX 64

static void check_deadlock(cohort_check *c)
{
    pthread_mutex_lock(&c->mu);
    chk_pos me = c->pos;
    pthread_mutex_unlock(&c->mu);
    uint64_t now = coh_now_ns();
    if (me.state != CHK_POS_WAIT || me.peer < 0 ||
        now - me.start_ns < (uint64_t)c->o.deadlock_ms * 1000000ull / 2) {
        c->dl_episode_seen = 0;
        return;
    }
    /* Follow who waits for whom from here. */
    int ranks[DL_MAX];
    chk_pos pos[DL_MAX];
    int n = 0, w = c->rank;
    chk_pos cur = me;
    for (;;) {
        if (n == DL_MAX)
            return;
        ranks[n] = w;
        pos[n++] = cur;
        if (cur.state != CHK_POS_WAIT || cur.peer < 0 || cur.peer >= c->size)
            return;
        w = cur.peer;
        if (w == c->rank)
            break;
        for (int i = 0; i < n; i++)
            if (ranks[i] == w)
                return; /* a cycle without this rank: its members report it */
        uint64_t age;
        if (!read_pos(c, w, &cur, &age))
            return;
    }
    /* A send and the receive it waits for (or the other way round) match:
     * that pair progresses, so the cycle is not a deadlock. */
    for (int i = 0; i < n; i++) {
        const chk_pos *a = &pos[i], *b = &pos[(i + 1) % n];
        int ra = ranks[i];
        if (a->gid != b->gid || b->peer != ra || a->is_send == b->is_send)
            continue;
        const chk_pos *rcv = a->is_send ? b : a, *snd = a->is_send ? a : b;
        if (rcv->tag < 0 || rcv->tag == snd->tag)
            return;
    }
    /* A cycle through this rank. The lowest rank in it reports, once the
     * same waits (episodes) have lasted deadlock_ms. */
    uint64_t sig = 0;
    int lowest = c->rank;
    for (int i = 0; i < n; i++) {
        sig = coh_hash64(&pos[i].episode, sizeof pos[i].episode, sig ^ (uint64_t)ranks[i]);
        if (ranks[i] < lowest)
            lowest = ranks[i];
    }
    sig |= 1;
    if (c->dl_episode_seen != sig) {
        c->dl_episode_seen = sig;
        c->dl_since_ns = now;
        return;
    }
    if (now - c->dl_since_ns < (uint64_t)c->o.deadlock_ms * 1000000ull / 2 || lowest != c->rank)
        return;
    char *text = coh_malloc(COH_ERRLEN);
    char *value = coh_malloc(COH_ERRLEN + 16);
    if (!text || !value) {
        coh_free(text), coh_free(value);
        return;
    }
    size_t p = (size_t)snprintf(text, COH_ERRLEN, "deadlock: ");
    for (int i = 0; i < n && p < COH_ERRLEN; i++)
        p += (size_t)snprintf(text + p, COH_ERRLEN - p, "%srank %d waits for rank %d in %s at %s",
                              i ? ", " : "", ranks[i], pos[i].peer, pos[i].op,
                              pos[i].site[0] ? pos[i].site : "an unknown call site");
    if (p < COH_ERRLEN)
        snprintf(text + p, COH_ERRLEN - p,
                 " - every rank of the cycle is blocked in a point-to-point call waiting for the "
                 "next one");
    snprintf(value, COH_ERRLEN + 16, "R %d %s", COHORT_CHECK_DEADLOCK, text);
    pthread_mutex_lock(&c->mu);
    coh_chk_fail(c, COHORT_CHECK_DEADLOCK, COHORT_ERR_CONTRACT, value, text);
    pthread_mutex_unlock(&c->mu);
    coh_free(text), coh_free(value);
}

/* ---- the loop ---- */

static void resolve_own_site(cohort_check *c)
{
    pthread_mutex_lock(&c->mu);
    int need = c->pos.state != CHK_POS_IDLE && !c->pos_site_done &&
               coh_now_ns() - c->pos.start_ns > 50 * 1000 * 1000ull;
    const void *pc = c->pos_pc;
    uint64_t ep = c->pos.episode;
    pthread_mutex_unlock(&c->mu);
    if (!need)
        return;
    char site[CHK_SITE_MAX];
    coh_chk_site(c, NULL, 0, pc, site, sizeof site);
    pthread_mutex_lock(&c->mu);
    if (c->pos.episode == ep) {
        snprintf(c->pos.site, sizeof c->pos.site, "%s", site);
        c->pos_site_line = -1;
        c->pos_site_done = 1;
        c->pos_last_dirty = 1;
        coh_chk_pos_write(c, CHK_PW_SITE);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Publishes this rank's position for ranks on other hosts (store). */
static void publish_pos(cohort_check *c)
{
    if (!c->st_mon || (c->shm && c->world->n_hosts == 1))
        return;
    pthread_mutex_lock(&c->mu);
    chk_pos p = c->pos;
    int done = c->pos_site_done;
    pthread_mutex_unlock(&c->mu);
    uint64_t now = coh_now_ns();
    char buf[1024], key[32];
    snprintf(key, sizeof key, "pos/%d", c->rank);
    if (p.state == CHK_POS_IDLE || now - p.start_ns < 200 * 1000 * 1000ull || !done) {
        /* The position the store shows ended (a wait or call that lasted,
         * now over): say idle, or ranks on other hosts keep reading the old
         * wait and a peer that waits for this (computing) rank closes a
         * cycle with it - a false deadlock, or one reported at the old
         * wait's site (test_check S_STORE_STALE). */
        if (c->pos_pub_live && p.episode != c->pos_published) {
            p.state = CHK_POS_IDLE;
            p.start_ns = 0;
            size_t l = coh_chk_pos_format(&p, buf, sizeof buf);
            if (cohort_store_set(c->st_mon, key, strlen(key), buf, l) == COHORT_OK)
                c->pos_pub_live = 0;
        }
        return;
    }
    if (c->pos_published == p.episode && now - p.start_ns < 2000 * 1000 * 1000ull)
        return;
    p.start_ns = now - p.start_ns; /* the age, for readers on other hosts */
    size_t l = coh_chk_pos_format(&p, buf, sizeof buf);
    if (cohort_store_set(c->st_mon, key, strlen(key), buf, l) == COHORT_OK) {
        c->pos_published = p.episode;
        c->pos_pub_live = 1;
    }
}

void *coh_chk_monitor(void *arg)
{
    cohort_check *c = arg;
    coh_group_background_thread = 1;
    int handled = 0;
    int seen_call = 0;     /* a call was in progress at the last tick */
    uint64_t seen_ep = 0;  /* its episode */
    for (;;) {
        pthread_mutex_lock(&c->mu);
        if (c->stop) {
            pthread_mutex_unlock(&c->mu);
            break;
        }
        int failed = atomic_load(&c->failed) != 0;
        pthread_mutex_unlock(&c->mu);
        /* The tick's sections take c->mu directly: one revoke of the
         * biased lock for all of them (check_int.h). */
        coh_chk_revoke(c);
        /* After the closing check, ranks finalize and leave: a world that
         * fails then (a peer gone) is not the program's failure. */
        if (!handled && (failed || (coh_group_poisoned(c->world) && !atomic_load(&c->closed)))) {
            handle_failure(c);
            handled = 1;
        }
        int fast = 0;
        if (!handled) {
            pthread_mutex_lock(&c->mu);
            c->stats.ticks++;
            if (c->shm)
                for (int i = 0; i < c->world->local_size; i++) {
                    int w = c->world->local_ranks[i];
                    if (w != c->rank)
                        coh_chk_drain_locked(c, w, 1);
                }
            if (c->pos_dirty)
                coh_chk_pos_write(c, 0); /* what calls changed since the last tick */
            int in_call = c->pos.state != CHK_POS_IDLE;
            fast = (in_call && seen_call && c->pos.episode == seen_ep) || c->waiters > 0;
            seen_call = in_call;
            seen_ep = c->pos.episode;
            for (int w = 0; w < c->size && !fast; w++)
                fast = c->remote_pred[w];
            pthread_mutex_unlock(&c->mu);
            fetch_remote(c);
            coh_chk_wait_publish(c);
            fast |= c->wseen_ver != 0; /* a wait: published if seen at the next tick */
            resolve_own_site(c);
            publish_pos(c);
            check_stall(c);
            check_deadlock(c);
        }
        coh_chk_unrevoke(c);
        /* Reads only stop (written under the mutex by destroy, whichever
         * way it holds the lock): no revoke while asleep. A failure found
         * in this tick (its signal came while this thread was awake) is
         * handled at once. */
        pthread_mutex_lock(&c->mu);
        if (!c->stop && (handled || !atomic_load(&c->failed))) {
            struct timespec ts;
            coh_abstime_ms(&ts, fast ? TICK_MS : TICK_IDLE_MS);
            pthread_cond_timedwait(&c->mon_cv, &c->mu, &ts);
        }
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

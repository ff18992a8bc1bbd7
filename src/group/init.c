/* init.c - group lifecycle: init from the environment, rendezvous through
 * the store, sub-groups, abort, finalize. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll/fail/fail.h"
#include "contract/contract.h"
#include "engine/engine.h"
#include "group/agree.h"
#include "group/group_internal.h"
#include "transport/shm/shm_mem.h"
#include "group/monitor.h"
#include "group/record.h"
#include "store/backend.h"
#include "store/etcd/etcd.h"
#include "trace/trace.h"
#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"

/* ---- host identity ---- */

void coh_host_identity(char *id, size_t idlen, char *name, size_t namelen)
{
    char host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    struct stat st;
    unsigned long netns = 0;
    if (stat("/proc/self/ns/net", &st) == 0)
        netns = (unsigned long)st.st_ino;
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            boot[0] = 0;
        fclose(f);
        boot[strcspn(boot, "\n")] = 0;
    }
    snprintf(id, idlen, "%s/%s/netns:%lu", host, boot, netns);
    /* Printable name: the hostname, plus the namespace when not the init
     * one, so that reports tell namespace-"hosts" apart. */
    struct stat init_ns;
    if (stat("/proc/1/ns/net", &init_ns) == 0 && init_ns.st_ino != st.st_ino)
        snprintf(name, namelen, "%s[netns:%lu]", host, netns);
    else
        snprintf(name, namelen, "%s", host);
}

/* Whether ranks a and b run on one machine: a host id is hostname/boot
 * id/netns:N, and the part before "/netns:" names the machine, whose cpus
 * namespace "hosts" share. */
static int same_machine(const char *a, const char *b)
{
    const char *cut = strstr(a, "/netns:");
    size_t len = cut ? (size_t)(cut - a) : strlen(a);
    return !strncmp(b, a, len) && (b[len] == 0 || b[len] == '/');
}

/* The highest cpu of a canonical cpulist: its last number. */
static long list_top(const char *s)
{
    const char *p = s + strlen(s);
    while (p > s && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtol(p, NULL, 10);
}

long coh_machine_cpus(int n, const char (*ids)[256], const long *cpus, const char *const *sets,
                      int r, int *k)
{
    long online = LONG_MAX, top = -1;
    int ranks = 0, unknown = 0;
    for (int q = 0; q < n; q++) {
        if (!same_machine(ids[r], ids[q]))
            continue;
        ranks++;
        unknown |= cpus[q] <= 0;
        online = cpus[q] > 0 && cpus[q] < online ? cpus[q] : online;
        if (sets) {
            long t = list_top(sets[q]);
            top = t > top ? t : top;
        }
    }
    if (k)
        *k = ranks;
    if (!sets || top < 0)
        return unknown || online == LONG_MAX ? 0 : online;
    size_t words = (size_t)top / 64 + 1;
    uint64_t *bits = coh_calloc(words, sizeof *bits);
    if (!bits)
        return unknown || online == LONG_MAX ? 0 : online;
    for (int q = 0; q < n; q++)
        if (same_machine(ids[r], ids[q]))
            coh_cpulist_or(sets[q], bits);
    long u = 0;
    for (size_t w = 0; w < words; w++)
        u += __builtin_popcountll(bits[w]);
    coh_free(bits);
    /* A mask may name cpus that are not online (the online count a test
     * fakes, or a cpu taken offline): the least online count caps it. */
    return online != LONG_MAX && online < u ? online : u;
}

int coh_machines_oversub(int n, const char (*ids)[256], const long *cpus,
                         const char *const *sets)
{
    for (int r = 0; r < n; r++) {
        int first = 1, k = 0;
        for (int q = 0; q < r && first; q++)
            first = !same_machine(ids[r], ids[q]); /* counted at its first rank */
        if (!first)
            continue;
        long c = coh_machine_cpus(n, ids, cpus, sets, r, &k);
        if (c > 0 && k > c)
            return 1;
    }
    return 0;
}

/* ---- allocation ---- */

cohort_group *coh_group_alloc(int rank, int size)
{
    cohort_group *g = coh_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->rank = rank;
    g->size = size;
    g->pid = getpid();
    g->fork_gen = coh_fork_generation();
    g->check_contract = 1;
    coh_coll_read_env(g);
    pthread_mutex_init(&g->err_mu, NULL);
    g->peers = coh_calloc((size_t)size, sizeof *g->peers);
    g->p2p_send_seq = coh_calloc((size_t)size, sizeof *g->p2p_send_seq);
    g->p2p_recv_seq = coh_calloc((size_t)size, sizeof *g->p2p_recv_seq);
    if (!g->peers || !g->p2p_send_seq || !g->p2p_recv_seq) {
        coh_group_free(g);
        return NULL;
    }
    return g;
}

void coh_group_free(cohort_group *g)
{
    if (!g)
        return;
    coh_monitor_stop(g);
    coh_mem_release_group(g); /* its cohort_mem_alloc regions */
    if (g->engine)
        coh_engine_destroy(g->engine);
    /* Each destroy detaches its transport from g->tp (attach order). */
    while (g->n_tp > 0)
        g->tp[0].ops->destroy(g->tp[0].t);
    if (g->store)
        cohort_store_close(g->store);
    if (!g->parent) {
        if (g->store_root)
            cohort_store_close(g->store_root);
        if (g->server)
            cohort_store_server_stop(g->server);
    }
    if (g->trace)
        coh_trace_destroy(g->trace);
    coh_coll_free_env(g);
    if (g->token) {
        memset(g->token, 0, strlen(g->token));
        coh_free(g->token);
    }
    coh_free(g->peers);
    coh_free(g->p2p_send_seq);
    coh_free(g->p2p_recv_seq);
    coh_free(g->hosts);
    coh_free(g->local_ranks);
    coh_free(g->leaders);
    coh_err_detail_free(g->detail);
    pthread_mutex_destroy(&g->err_mu);
    coh_free(g);
}

/* ---- rendezvous ---- */

/* Names the ranks whose keys "<what>/<r>" are missing (after a timeout). */
static void missing_ranks(cohort_group *g, const char *what, char *out, size_t outlen)
{
    int *miss = coh_malloc(sizeof(int) * (size_t)g->size);
    int n = 0;
    if (!miss) {
        snprintf(out, outlen, "?");
        return;
    }
    for (int r = 0; r < g->size; r++) {
        char k[64];
        snprintf(k, sizeof k, "%s/%d", what, r);
        const void *kp = k;
        size_t kl = strlen(k);
        int all = 0;
        if (cohort_store_check(g->store, &kp, &kl, 1, &all) == COHORT_OK && !all)
            miss[n++] = r;
    }
    coh_fmt_ranks(out, outlen, miss, n);
    if (!n)
        snprintf(out, outlen, "none (store error)");
    coh_free(miss);
}

/* The records present now ("rank/<r>" keys): the ranks that joined, and
 * the world size each announced. Returns the count, or -1. */
static int present_records(cohort_group *g, int *ranks, int *sizes)
{
    char **keys = NULL;
    size_t *kls = NULL;
    int nk = 0, np = 0;
    if (cohort_store_list(g->store, "rank/", &keys, &kls, &nk) != COHORT_OK)
        return -1;
    const void **kp = coh_calloc((size_t)nk + 1, sizeof *kp);
    void **vals = coh_calloc((size_t)nk + 1, sizeof *vals);
    size_t *vl = coh_calloc((size_t)nk + 1, sizeof *vl);
    int *rk = coh_calloc((size_t)nk + 1, sizeof *rk);
    int m = 0;
    if (kp && vals && vl && rk) {
        for (int i = 0; i < nk; i++) {
            int r;
            char tail;
            if (sscanf(keys[i], "rank/%d%c", &r, &tail) != 1 || r < 0 || r >= g->size)
                continue; /* a rank beyond this rank's world: reported by its size */
            kp[m] = keys[i];
            rk[m++] = r;
        }
        for (int i = 0; i < m; i++)
            vl[i] = strlen(kp[i]);
        /* vl doubles as key lengths for the request, then holds value lengths */
        size_t *klen = coh_calloc((size_t)m + 1, sizeof *klen);
        if (klen) {
            memcpy(klen, vl, sizeof *klen * (size_t)m);
            if (cohort_store_multi_get(g->store, kp, klen, m, vals, vl, 1000) == COHORT_OK) {
                for (int i = 0; i < m; i++) {
                    char buf[32];
                    size_t l = COH_MIN(vl[i], sizeof buf - 1);
                    memcpy(buf, vals[i], l);
                    buf[l] = 0;
                    ranks[np] = rk[i];
                    sizes[np++] = atoi(buf);
                }
            } else {
                np = -1;
            }
            coh_free(klen);
        } else {
            np = -1;
        }
        for (int i = 0; i < m; i++)
            free(vals[i]);
    } else {
        np = -1;
    }
    /* Ranks this rank's world does not have: their records still count
     * for the size check (a rank 5 in a world of 4 says WORLD_SIZE differs). */
    for (int i = 0; i < nk; i++) {
        int r;
        if (np >= 0 && sscanf(keys[i], "rank/%d", &r) == 1 && r >= g->size && np < 2 * g->size) {
            ranks[np] = r;
            sizes[np++] = -1; /* size unknown here; r itself is out of this world */
        }
        free(keys[i]);
    }
    free(keys);
    free(kls);
    coh_free(kp), coh_free(vals), coh_free(vl), coh_free(rk);
    return np;
}

/* Waits for every rank's record. While waiting it reports progress (which
 * ranks are missing, every 10 s after the first 5, on the lowest rank
 * present) and fails fast when the records present already show that the
 * ranks disagree on the world size. */
static cohort_status wait_records(cohort_group *g, const void **kp, size_t *kl, int n,
                                  void **vals, size_t *vl)
{
    uint64_t start = coh_now_ns();
    uint64_t dl = coh_deadline_ns(g->timeout_ms);
    uint64_t next_report = start + 5000000000ull;
    int *ranks = coh_calloc(2 * (size_t)n + 1, sizeof *ranks);
    int *sizes = coh_calloc(2 * (size_t)n + 1, sizeof *sizes);
    char *seen = coh_calloc((size_t)n + 1, 1);
    cohort_status st;
    for (;;) {
        int left = coh_ms_left(dl);
        st = cohort_store_multi_get(g->store, kp, kl, n, vals, vl, COH_MIN(left, 1000));
        if (st != COHORT_ERR_TIMEOUT || coh_ms_left(dl) == 0 || !ranks || !sizes || !seen)
            break;
        for (int r = 0; r < n; r++) {
            free(vals[r]);
            vals[r] = NULL;
        }
        int np = present_records(g, ranks, sizes);
        if (np < 0)
            continue;
        /* Disagreement on the world size, visible in the records already. */
        int bad = 0;
        for (int i = 0; i < np; i++)
            bad |= sizes[i] != g->size;
        if (bad) {
            /* Grouped by value, ranks ascending: "this rank (2) has 4;
             * ranks 0-1 have 3". Size -1: a rank outside this world. */
            for (int i = 1; i < np; i++)
                for (int j = i; j > 0 && (sizes[j - 1] > sizes[j] ||
                                          (sizes[j - 1] == sizes[j] && ranks[j - 1] > ranks[j]));
                     j--) {
                    int t = sizes[j], u = ranks[j];
                    sizes[j] = sizes[j - 1], ranks[j] = ranks[j - 1];
                    sizes[j - 1] = t, ranks[j - 1] = u;
                }
            char desc[512] = "", list[256];
            size_t dp = 0;
            int *grp = coh_calloc((size_t)np + 1, sizeof *grp);
            for (int i = 0; grp && i < np;) {
                int j = i, k = 0;
                while (j < np && sizes[j] == sizes[i]) {
                    if (ranks[j] != g->rank)
                        grp[k++] = ranks[j];
                    j++;
                }
                coh_fmt_ranks(list, sizeof list, grp, k);
                if (k && dp < sizeof desc) {
                    if (sizes[i] < 0)
                        dp += (size_t)snprintf(desc + dp, sizeof desc - dp,
                                               "; rank%s %s exist%s (beyond a world of %d)",
                                               k > 1 ? "s" : "", list, k > 1 ? "" : "s", g->size);
                    else if (sizes[i] == g->size)
                        dp += (size_t)snprintf(desc + dp, sizeof desc - dp, ", as %s rank%s %s",
                                               k > 1 ? "do" : "does", k > 1 ? "s" : "", list);
                    else
                        dp += (size_t)snprintf(desc + dp, sizeof desc - dp, "; rank%s %s ha%s %d",
                                               k > 1 ? "s" : "", list, k > 1 ? "ve" : "s",
                                               sizes[i]);
                }
                i = j;
            }
            coh_free(grp);
            /* "as do" goes right after this rank's own value */
            char *as = strstr(desc, ", as ");
            char head[160];
            snprintf(head, sizeof head, "this rank (%d) has %d", g->rank, g->size);
            char mine[256] = "";
            if (as) {
                char *end = strstr(as + 1, "; ");
                size_t l = end ? (size_t)(end - as) : strlen(as);
                snprintf(mine, sizeof mine, "%.*s", (int)l, as);
                memmove(as, as + l, strlen(as + l) + 1);
            }
            st = coh_err_set(&g->err, COHORT_ERR_INVALID,
                             "rendezvous of group %u (generation %u): the ranks disagree on the "
                             "world size (WORLD_SIZE): %s%s%s",
                             g->id, g->generation, head, mine, desc);
            break;
        }
        uint64_t now = coh_now_ns();
        if (now >= next_report) {
            next_report = now + 10000000000ull;
            memset(seen, 0, (size_t)n);
            int lowest = n;
            for (int i = 0; i < np; i++)
                if (ranks[i] < n) {
                    seen[ranks[i]] = 1;
                    lowest = COH_MIN(lowest, ranks[i]);
                }
            int nm = 0;
            for (int r = 0; r < n; r++)
                if (!seen[r])
                    ranks[nm++] = r;
            if (nm && lowest == g->rank) {
                char miss[256];
                coh_fmt_ranks(miss, sizeof miss, ranks, nm);
                coh_warn("group %u (generation %u): waiting for rank%s %s to join (%d of %d "
                         "joined), %.0f s of %.0f s",
                         g->id, g->generation, nm > 1 ? "s" : "", miss, n - nm, n,
                         (double)(now - start) / 1e9, g->timeout_ms / 1e3);
            }
        }
    }
    coh_free(ranks), coh_free(sizes), coh_free(seen);
    return st;
}

/* The store host's wait, at most wait_ms, until every rank of g has set
 * <what>/<rank> (a rank it would take the store away from). */
static void wait_every_rank(cohort_group *g, const char *what, int wait_ms)
{
    char key[48];
    uint64_t dl = coh_deadline_ns(wait_ms);
    for (int r = 0; r < g->size; r++) {
        snprintf(key, sizeof key, "%s/%d", what, r);
        const void *kp = key;
        size_t kl = strlen(key);
        if (cohort_store_wait(g->store, &kp, &kl, 1, coh_ms_left(dl)) != COHORT_OK)
            break;
    }
}

/* Every rank fails the same way on settings that differ, but a rank 0
 * that hosts the store and leaves at once takes it away from ranks still
 * reading the records (they failed with "store server shutting down"
 * instead, test_agree). Each rank says it has seen the difference; the
 * host waits for all of them, a few seconds at most. */
static void differ_linger(cohort_group *g)
{
    char key[32];
    snprintf(key, sizeof key, "differ/%d", g->rank);
    if (cohort_store_set(g->store, key, strlen(key), "1", 1) != COHORT_OK || !g->server)
        return;
    wait_every_rank(g, "differ", COH_MIN(g->timeout_ms, 5000));
}


cohort_status coh_group_rendezvous(cohort_group *g)
{
    cohort_status st;
    char key[64], val[COH_RDV_RECORD_MAX + 1];
    char hostid[256], hostname[128];
    coh_host_identity(hostid, sizeof hostid, hostname, sizeof hostname);

    /* A rank number must join once: a second process claiming it is a
     * launch error, reported instead of silently corrupting the group. */
    snprintf(key, sizeof key, "join/%d", g->rank);
    int64_t joined = 0;
    st = cohort_store_add(g->store, key, strlen(key), 1, &joined);
    if (st != COHORT_OK)
        return coh_err_set(&g->err, st, "rendezvous: store add %s: %s", key,
                           cohort_store_last_error(g->store));
    if (joined != 1)
        return coh_err_set(&g->err, COHORT_ERR_INVALID,
                           "rendezvous: rank %d joined group %u twice (two processes with the same "
                           "RANK?)",
                           g->rank, g->id);
    g->joined = 1;

    char addr[128] = "-";
    if (g->size > 1) {
        st = coh_net_listen(g, &g->net, addr, sizeof addr);
        if (st != COHORT_OK)
            return coh_err_set(&g->err, st, "rendezvous: tcp listen: %s", cohort_last_error(NULL));
    }
    snprintf(key, sizeof key, "rank/%d", g->rank);
    /* The sixth field, the machine's online cpus, came in session 11: a
     * record without it (an older library) reads as unknown (0), and an
     * older library reads the first five (coh_machines_oversub). The
     * seventh, session 13: the cpus this rank may run on (its affinity,
     * which a cgroup cpuset, taskset or numactl narrows), whose union over
     * a machine's ranks is what they share. A mask whose list does not fit
     * the field is left out: the group then counts online cpus, as with
     * an older library. */
    coh_rdv_record me = {.size = g->size, .pid = (int)getpid()};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    me.cpus = ncpu > 0 && ncpu <= COH_RDV_CPUS_MAX ? ncpu : 0;
    if (coh_cpulist_self(me.cpuset, sizeof me.cpuset) < 0) {
        me.cpuset[0] = 0;
        coh_debug("group %u: rank %d: its cpu set does not fit the rendezvous record (%d bytes); "
                  "the group counts online cpus",
                  g->id, g->rank, COH_RDV_CPULIST_MAX);
    }
    /* The eighth, session 38: the settings every rank must share
     * (agree.c), compared below before a transport starts. */
    if (coh_agree_format(g, me.cfg, sizeof me.cfg) < 0)
        return coh_err_set(&g->err, COHORT_ERR_INVALID,
                           "rendezvous: this rank's settings do not fit its record (%d bytes)",
                           COH_RDV_CFG_MAX);
    snprintf(me.addr, sizeof me.addr, "%s", addr);
    snprintf(me.id, sizeof me.id, "%s", hostid);
    snprintf(me.name, sizeof me.name, "%s", hostname);
    if (coh_rdv_record_format(val, sizeof val, &me) < 0)
        return coh_err_set(&g->err, COHORT_ERR_INVALID,
                           "rendezvous: this rank's record does not fit (address '%s', host id "
                           "'%s', host name '%s': empty, too long or holding a space)",
                           addr, hostid, hostname);
    st = cohort_store_set(g->store, key, strlen(key), val, strlen(val));
    if (st != COHORT_OK)
        return coh_err_set(&g->err, st, "rendezvous: store set: %s",
                           cohort_store_last_error(g->store));

    /* Everyone's record. */
    int n = g->size;
    char (*keys)[32] = coh_calloc((size_t)n, sizeof *keys);
    const void **kp = coh_calloc((size_t)n, sizeof *kp);
    size_t *kl = coh_calloc((size_t)n, sizeof *kl);
    void **vals = coh_calloc((size_t)n, sizeof *vals);
    size_t *vl = coh_calloc((size_t)n, sizeof *vl);
    char (*ids)[256] = coh_calloc((size_t)n, sizeof *ids);
    char (*names)[128] = coh_calloc((size_t)n, sizeof *names);
    int *host_of = coh_calloc((size_t)n, sizeof *host_of);
    long *cpus = coh_calloc((size_t)n, sizeof *cpus);
    char **sets = coh_calloc((size_t)n, sizeof *sets);
    char **cfgs = coh_calloc((size_t)n, sizeof *cfgs);
    int *first = coh_calloc((size_t)n, sizeof *first);
    int all_sets = 1;
    if (!keys || !kp || !kl || !vals || !vl || !ids || !names || !host_of || !cpus || !sets ||
        !cfgs || !first) {
        st = coh_err_set(&g->err, COHORT_ERR_NOMEM, "rendezvous: out of memory for %d ranks", n);
        goto out;
    }
    for (int r = 0; r < n; r++) {
        snprintf(keys[r], sizeof keys[r], "rank/%d", r);
        kp[r] = keys[r];
        kl[r] = strlen(keys[r]);
    }
    st = wait_records(g, kp, kl, n, vals, vl);
    if (st == COHORT_ERR_TIMEOUT) {
        char miss[256];
        missing_ranks(g, "rank", miss, sizeof miss);
        st = coh_err_set(&g->err, COHORT_ERR_TIMEOUT,
                         "rendezvous of group %u (generation %u) timed out after %d ms: rank(s) %s "
                         "never joined (check WORLD_SIZE=%d and that every rank started)",
                         g->id, g->generation, g->timeout_ms, miss, g->size);
        goto out;
    }
    if (st == COHORT_ERR_INVALID)
        goto out; /* the world sizes disagree: wait_records said how */
    if (st != COHORT_OK) {
        st = coh_err_set(&g->err, st, "rendezvous: store: %s", cohort_store_last_error(g->store));
        goto out;
    }
    int nh = 0;
    for (int r = 0; r < n; r++) {
        coh_rdv_record rec;
        char why[128];
        if (coh_rdv_record_parse(vals[r], vl[r], &rec, why, sizeof why) != 0) {
            st = coh_err_set(&g->err, COHORT_ERR_PROTOCOL,
                             "rendezvous of group %u (generation %u): malformed record for rank "
                             "%d: %s",
                             g->id, g->generation, r, why);
            goto out;
        }
        cpus[r] = rec.cpus;
        all_sets &= rec.cpuset[0] != 0;
        if (rec.cpuset[0] && !(sets[r] = coh_strdup(rec.cpuset))) {
            st = coh_err_set(&g->err, COHORT_ERR_NOMEM, "rendezvous: out of memory");
            goto out;
        }
        if (rec.cfg[0] && !(cfgs[r] = coh_strdup(rec.cfg))) {
            st = coh_err_set(&g->err, COHORT_ERR_NOMEM, "rendezvous: out of memory");
            goto out;
        }
        int size = rec.size, pid = rec.pid;
        const char *a = rec.addr, *id = rec.id, *nm = rec.name;
        if (size != g->size) {
            st = coh_err_set(&g->err, COHORT_ERR_INVALID,
                             "rendezvous of group %u (generation %u): the ranks disagree on the "
                             "world size (WORLD_SIZE): this rank (%d) has %d; rank %d has %d",
                             g->id, g->generation, g->rank, g->size, r, size);
            goto out;
        }
        _Static_assert(sizeof g->peers[r].addr > COH_RDV_ADDR_MAX, "a record's address fits a peer's");
        g->peers[r].pid = pid;
        snprintf(g->peers[r].addr, sizeof g->peers[r].addr, "%s", a);
        snprintf(ids[r], sizeof ids[r], "%s", id);
        snprintf(names[r], sizeof names[r], "%s", nm);
        int h;
        for (h = 0; h < nh; h++)
            if (!strcmp(ids[host_of[h]], id))
                break;
        if (h == nh)
            host_of[nh++] = r; /* first rank of each host, by rank order */
        g->peers[r].host = h;
        first[r] = host_of[h];
    }
    g->n_hosts = nh;
    g->hosts = coh_calloc((size_t)nh, sizeof *g->hosts);
    g->leaders = coh_calloc((size_t)nh, sizeof *g->leaders);
    g->local_ranks = coh_calloc((size_t)n, sizeof *g->local_ranks);
    if (!g->hosts || !g->leaders || !g->local_ranks) {
        st = coh_err_set(&g->err, COHORT_ERR_NOMEM, "rendezvous: out of memory");
        goto out;
    }
    for (int h = 0; h < nh; h++) {
        g->leaders[h] = host_of[h];
        snprintf(g->hosts[h], sizeof g->hosts[h], "%s", names[host_of[h]]);
    }
    g->my_host = g->peers[g->rank].host;
    int counts[1];
    counts[0] = 0;
    for (int r = 0; r < n; r++) {
        int li = 0;
        for (int q = 0; q < r; q++)
            if (g->peers[q].host == g->peers[r].host)
                li++;
        g->peers[r].local_index = li;
        if (g->peers[r].host == g->my_host) {
            if (r == g->rank)
                g->local_rank = counts[0];
            g->local_ranks[counts[0]++] = r;
        }
    }
    g->local_size = counts[0];
    /* A host id is hostname/boot id/netns: the part before the namespace
     * names the machine, whose CPUs namespace "hosts" share. */
    const char *mine = ids[g->rank], *cut = strstr(mine, "/netns:");
    size_t mlen = cut ? (size_t)(cut - mine) : strlen(mine);
    g->machine_size = 0;
    for (int r = 0; r < n; r++) {
        int same = !strncmp(ids[r], mine, mlen) && (ids[r][mlen] == 0 || ids[r][mlen] == '/');
        g->peers[r].other_machine = !same;
        g->machine_size += same;
    }
    /* Every rank's cpu set, or (some record without one: an older
     * library) none, so that every rank counts alike. */
    const char *const *cs = all_sets ? (const char *const *)sets : NULL;
    g->machine_cpus = coh_machine_cpus(n, (const char(*)[256])ids, cpus, cs, g->rank, NULL);
    g->machine_cpus_sets = cs != NULL;
    g->oversub = coh_machines_oversub(n, (const char(*)[256])ids, cpus, cs);
    coh_debug("group %u: rank %d/%d, %d host(s), %d local rank(s), %d on this machine with %ld "
              "cpus (%s), a machine oversubscribed: %d",
              g->id, g->rank, g->size, nh, g->local_size, g->machine_size, g->machine_cpus,
              cs ? "the union of their cpu sets" : "online", g->oversub);

    /* Before any transport: ranks that differ in a setting that picks
     * algorithms would otherwise wait for each other (agree.c). */
    {
        char why[COH_ERRLEN - 96];
        if (coh_agree_check(g, (const char *const *)cfgs, first, why, sizeof why) != 0) {
            st = coh_err_set(&g->err, COHORT_ERR_INVALID,
                             "rendezvous of group %u (generation %u): %s", g->id, g->generation,
                             why);
            differ_linger(g);
            goto out;
        }
    }
    /* Shared memory inside the host unless tcp is forced. */
    if (g->local_size > 1 && g->force_transport != 2) {
        st = coh_shm_create(g, &g->shm);
        if (st != COHORT_OK) {
            st = coh_coll_transport_failed(g, st);
            /* Fatal even in auto mode: the segment is collective over the
             * host's ranks, and a silent per-rank fallback would make ranks
             * pick different algorithms. */
            char why[COH_ERRLEN];
            snprintf(why, sizeof why, "%s", g->err.msg[0] ? g->err.msg : cohort_last_error(NULL));
            st = coh_err_set(&g->err, st,
                             "shared memory between the %d ranks of host %s: %s (COHORT_TRANSPORT=tcp "
                             "avoids it)",
                             g->local_size, g->hosts[g->my_host], why);
            goto out;
        }
    } else if (g->force_transport == 1 && g->n_hosts > 1) {
        st = coh_err_set(&g->err, COHORT_ERR_INVALID,
                         "COHORT_TRANSPORT=shm but the group spans %d hosts", g->n_hosts);
        goto out;
    }
    if (g->net) {
        st = coh_net_connect(g->net);
        if (st != COHORT_OK) {
            /* As coh_net_connect reports it: the group's first failure. */
            st = coh_coll_transport_failed(g, st);
            int p = coh_group_poisoned(g);
            st = p ? (cohort_status)p : st;
            if (!g->err.msg[0])
                coh_err_set(&g->err, st, "tcp connect: %s", cohort_last_error(NULL));
            goto out;
        }
    }
    st = COHORT_OK;
out:
    if (vals)
        for (int r = 0; r < n; r++)
            free(vals[r]);
    coh_free(keys);
    coh_free(kp);
    coh_free(kl);
    coh_free(vals);
    coh_free(vl);
    coh_free(ids);
    coh_free(names);
    coh_free(host_of);
    coh_free(cpus);
    if (sets)
        for (int r = 0; r < n; r++)
            coh_free(sets[r]);
    coh_free(sets);
    if (cfgs)
        for (int r = 0; r < n; r++)
            coh_free(cfgs[r]);
    coh_free(cfgs);
    coh_free(first);
    return st;
}

/* Common tail of world and sub-group creation: store prefix, rendezvous,
 * engine, recorder, monitor. */
static cohort_status group_start(cohort_group *g)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gen%u/g%u/", g->generation, g->id);
    cohort_status st = cohort_store_prefixed(g->store_root, prefix, &g->store);
    if (st != COHORT_OK)
        return coh_err_set(&g->err, st, "store prefix: %s", cohort_store_last_error(g->store_root));
    cohort_store_set_timeout(g->store, g->timeout_ms);
    coh_monitor_attach(g);
    long cap = 2048;
    coh_env_int("COHORT_TRACE_SIZE", &cap);
    if (cap < 16)
        cap = 16;
    st = coh_trace_create(&g->trace, (int)cap);
    if (st != COHORT_OK)
        return coh_err_set(&g->err, st, "flight recorder: out of memory");
    coh_trace_attach(g);
    st = coh_group_rendezvous(g);
    if (st != COHORT_OK)
        return st;
    /* With etcd, each rank also holds a leased key: when a rank dies its
     * lease expires and the peers learn it through the store, a liveness
     * signal independent of the data connections (monitor.c checks it
     * while a call waits). Other backends: UNSUPPORTED, nothing to do. */
    if (!strncmp(g->store_addr, "etcd://", 7) || !strncmp(g->store_addr, "etcds://", 8)) {
        char ak[32];
        snprintf(ak, sizeof ak, "alive/%d", g->rank);
        cohort_status ls = coh_store_etcd_put_lease(g->store, ak, strlen(ak), "1", 1);
        if (ls != COHORT_OK)
            return coh_err_set(&g->err, ls, "etcd lease for %s: %s", ak, cohort_last_error(NULL));
        g->lease_alive = 1;
    }
    st = coh_engine_create(g, &g->engine);
    if (st != COHORT_OK)
        return coh_err_set(&g->err, st, "engine: %s", cohort_last_error(NULL));
    st = coh_monitor_start(g);
    if (st != COHORT_OK)
        return coh_err_set(&g->err, st, "monitor: %s", cohort_last_error(NULL));
    return COHORT_OK;
}

/* Connects to the job's store within COHORT_TIMEOUT. A store that is not
 * up yet (rank 0 starts later) is retried in slices, with a line after 5 s
 * and then every 10 s saying what this rank waits for. A slice that ends
 * early failed for another reason than "not reachable yet": returned. */
static cohort_status store_connect_reporting(cohort_group *g, const char *what)
{
    uint64_t start = coh_now_ns(), dl = coh_deadline_ns(g->timeout_ms);
    int slice = 5000;
    for (;;) {
        int left = coh_ms_left(dl);
        int t = COH_MIN(left, slice);
        uint64_t t0 = coh_now_ns();
        cohort_status st = coh_store_connect_gen(&g->store_root, g->store_addr, g->job_id,
                                                 g->token, g->generation, t);
        int took = (int)((coh_now_ns() - t0) / 1000000);
        if (st == COHORT_OK || took + 100 < t)
            return st;
        if (t == left) {
            /* The store's message counts the last slice: say the whole wait. */
            char msg[COH_ERRLEN], *w = strstr(cohort_last_error(NULL), "within ");
            snprintf(msg, sizeof msg, "%s", cohort_last_error(NULL));
            if (w && slice > 5000) {
                char *num = msg + (w - cohort_last_error(NULL)) + 7, *end;
                strtol(num, &end, 10);
                if (end > num && !strncmp(end, " ms", 3)) {
                    char tail[COH_ERRLEN];
                    snprintf(tail, sizeof tail, "%s", end);
                    snprintf(num, sizeof msg - (size_t)(num - msg), "%d%s", g->timeout_ms, tail);
                }
            }
            return coh_err_set(NULL, st, "%s", msg);
        }
        if (g->store_root) {
            cohort_store_close(g->store_root);
            g->store_root = NULL;
        }
        coh_warn("waiting for the store at %s (%s) to accept this rank, %.0f s of %.0f s: %s",
                 g->store_addr, what, (double)(coh_now_ns() - start) / 1e9, g->timeout_ms / 1e3,
                 cohort_last_error(NULL));
        slice = 10000;
    }
}

cohort_status cohort_init(cohort_group **group) { return cohort_init_opts(group, NULL); }

/* Under torchrun without COHORT_TOKEN (torchrun_env.c): rank 0 makes the
 * job's secret and publishes it in torchrun's store, per generation; the
 * others read it (waiting up to the init timeout). */
static cohort_status token_through_store(cohort_group *g)
{
    char key[48];
    if (g->id)
        snprintf(key, sizeof key, "token/gen%u/g%u", g->generation, g->id);
    else
        snprintf(key, sizeof key, "token/gen%u", g->generation);
    char tok[65];
    if (g->rank == 0) {
        unsigned char raw[32];
        cohort_status st = coh_random(raw, sizeof raw);
        if (st != COHORT_OK)
            return st;
        for (size_t i = 0; i < sizeof raw; i++)
            snprintf(tok + 2 * i, 3, "%02x", raw[i]);
        memset(raw, 0, sizeof raw);
        st = cohort_store_set(g->store_root, key, strlen(key), tok, strlen(tok));
        if (st != COHORT_OK)
            return coh_err_set(NULL, st, "publishing the job's token in torchrun's store: %s",
                               cohort_store_last_error(g->store_root));
    } else {
        void *v = NULL;
        size_t vl = 0;
        cohort_status st =
            cohort_store_get(g->store_root, key, strlen(key), &v, &vl, g->timeout_ms);
        if (st != COHORT_OK)
            return coh_err_set(NULL, st,
                               "reading the job's token from torchrun's store (rank 0 publishes "
                               "it): %s",
                               cohort_store_last_error(g->store_root));
        if (vl != 64) {
            free(v);
            return coh_err_set(NULL, COHORT_ERR_PROTOCOL,
                               "the job's token in torchrun's store is %zu bytes, not 64", vl);
        }
        memcpy(tok, v, 64);
        tok[64] = 0;
        free(v);
    }
    char *t = coh_strdup(tok);
    memset(tok, 0, sizeof tok);
    if (!t)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "cohort_init: out of memory");
    if (g->token) {
        memset(g->token, 0, strlen(g->token));
        coh_free(g->token);
    }
    g->token = t;
    return COHORT_OK;
}

/* The worlds this process has joined, per job (store, job id, generation).
 * A world's keys (join/<r>, rank/<r>, ...) stay in a store that outlives
 * it - cohortrun's, torchrun's, etcd - so a second cohort_init of the same
 * job after cohort_finalize found its own old join/<r> and failed "rank 1
 * joined group 0 twice (two processes with the same RANK?)" (session 38).
 * The n-th world of a job in a process is group 2n instead (sub-groups are
 * odd): every rank that makes its worlds in the same order meets in it.
 * Counted once a rendezvous claimed join/<r> (a retry after a store that
 * was not up yet keeps its number). */
#define WORLD_SLOTS 16
static struct {
    uint64_t key;
    uint32_t n;
} worlds[WORLD_SLOTS];
static unsigned worlds_next;
static pthread_mutex_t worlds_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t world_key(const cohort_group *g)
{
    uint64_t h = coh_hash64(g->store_addr, strlen(g->store_addr), g->generation);
    return coh_hash64(g->job_id, strlen(g->job_id), h) | 1u;
}

/* The number of worlds of g's job this process has joined; bump: count
 * one more. */
static uint32_t world_instance(const cohort_group *g, int bump)
{
    uint64_t k = world_key(g);
    uint32_t n = 0;
    pthread_mutex_lock(&worlds_mu);
    int i;
    for (i = 0; i < WORLD_SLOTS && worlds[i].key != k; i++)
        ;
    if (i < WORLD_SLOTS)
        n = worlds[i].n;
    if (bump) {
        if (i == WORLD_SLOTS) {
            i = (int)(worlds_next++ % WORLD_SLOTS);
            worlds[i].key = k;
            worlds[i].n = 0;
        }
        n = ++worlds[i].n;
    }
    pthread_mutex_unlock(&worlds_mu);
    return n;
}

/* A world made again by a process whose rank 0 hosts the store
 * (MASTER_ADDR:MASTER_PORT): rank 0's previous store stops once every
 * rank has left the previous world, and a rank quick to make the next one
 * may still reach it - then lose it mid-rendezvous ("store server shutting
 * down") while rank 0 waits on its new store for a rank that never comes.
 * So rank 0 marks its store as the one of world g->id, and the others
 * wait for the mark, reconnecting while the store they reach goes away. */
static cohort_status meet_new_host(cohort_group *g, const coh_settings *s)
{
    char key[48];
    snprintf(key, sizeof key, "gen%u/host/g%u", g->generation, g->id);
    if (s->host_store) {
        cohort_status st = cohort_store_sets(g->store_root, key, "1");
        if (st != COHORT_OK)
            return coh_err_set(NULL, st, "marking this rank's store as world %u's: %s", g->id,
                               cohort_store_last_error(g->store_root));
        return COHORT_OK;
    }
    uint64_t dl = coh_deadline_ns(g->timeout_ms);
    for (;;) {
        const void *kp = key;
        size_t kl = strlen(key);
        cohort_status st = cohort_store_wait(g->store_root, &kp, &kl, 1, coh_ms_left(dl));
        if (st == COHORT_OK)
            return COHORT_OK;
        if (st == COHORT_ERR_TIMEOUT || coh_ms_left(dl) <= 0)
            return coh_err_set(NULL, COHORT_ERR_TIMEOUT,
                               "the store at %s never became world %u's within %d ms (rank 0 "
                               "hosts it: has rank 0 made this world again too?)",
                               g->store_addr, g->id, g->timeout_ms);
        /* the previous world's store went away: rank 0's next one comes */
        cohort_store_close(g->store_root);
        g->store_root = NULL;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        st = store_connect_reporting(g, "rank 0 hosts it at MASTER_ADDR:MASTER_PORT: has rank 0 "
                                        "started?");
        if (st != COHORT_OK)
            return coh_err_set(NULL, st, "reconnecting to the store at %s: %s", g->store_addr,
                               g->store_root ? cohort_store_last_error(g->store_root)
                                             : cohort_last_error(NULL));
    }
}

/* cohort_init_opts' body; *written is the token file this rank wrote
 * (rank 0 under srun/mpirun without COHORT_TOKEN), for the caller to remove
 * should init fail. */
static cohort_status init_group(cohort_group **group, const cohort_options *o, char *written,
                                size_t wlen)
{
    coh_settings s;
    cohort_status st = coh_settings_resolve(o, &s);
    if (st != COHORT_OK)
        return st;
    if (s.token_file[0] && s.rank == 0)
        snprintf(written, wlen, "%s", s.token_file);
    coh_log_set_rank(s.rank);
    cohort_group *g = coh_group_alloc(s.rank, s.size);
    if (!g)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "cohort_init: out of memory");
    g->generation = s.generation;
    g->id = 0;
    snprintf(g->job_id, sizeof g->job_id, "%s", s.job_id);
    g->timeout_ms = s.timeout_ms;
    g->stall_warn_ms = s.stall_warn_ms;
    g->force_transport = s.force_transport;
    g->debug_sync = s.debug_sync;
    g->debug_buffers = s.debug_buffers;
    g->check_contract = s.check_contract;
    g->token = coh_strdup(s.token);
    snprintf(g->store_addr, sizeof g->store_addr, "%s", s.store_addr);
    memset(s.token, 0, sizeof s.token);
    if (!g->token) {
        coh_group_free(g);
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "cohort_init: out of memory");
    }

    if (s.host_store) {
        cohort_store_server_opts so;
        memset(&so, 0, sizeof so);
        const char *jid = g->job_id;
        const char *tok = g->token;
        so.bind_addr = coh_env_str("COHORT_STORE_BIND");
        if (!so.bind_addr && s.singleton)
            so.bind_addr = "127.0.0.1"; /* nobody else will connect */
        so.port = s.store_port;
        so.job_ids = &jid;
        so.tokens = &tok;
        so.n_jobs = 1;
        st = cohort_store_server_start(&g->server, &so);
        if (st != COHORT_OK) {
            char why[COH_ERRLEN];
            snprintf(why, sizeof why, "%s", cohort_last_error(NULL));
            coh_err_set(NULL, st, "rank 0 could not host the store on port %d (MASTER_PORT): %s",
                        s.store_port, why);
            coh_group_free(g);
            return st;
        }
        if (s.store_port == 0) /* a lone start: the free port the server got */
            snprintf(g->store_addr, sizeof g->store_addr, "127.0.0.1:%d",
                     cohort_store_server_port(g->server));
    }
    st = store_connect_reporting(g, s.host_store     ? "hosted by this rank"
                                    : s.store_port ? "rank 0 hosts it at MASTER_ADDR:MASTER_PORT: "
                                                     "has rank 0 started?"
                                                   : "COHORT_STORE");
    if (st != COHORT_OK) {
        char why[COH_ERRLEN];
        snprintf(why, sizeof why, "%s",
                 g->store_root ? cohort_store_last_error(g->store_root) : cohort_last_error(NULL));
        /* The store's own message usually names the address already. */
        if (strstr(why, g->store_addr))
            coh_err_set(NULL, st, "%s", why);
        else
            coh_err_set(NULL, st, "connecting to the store at %s: %s", g->store_addr, why);
        coh_group_free(g);
        return st;
    }
    g->id = 2 * world_instance(g, 0);
    if (g->id && s.store_port && (st = meet_new_host(g, &s)) != COHORT_OK) {
        coh_group_free(g);
        return st;
    }
    if (s.token_via_store && (st = token_through_store(g)) != COHORT_OK) {
        coh_group_free(g);
        return st;
    }
    st = group_start(g);
    if (g->joined)
        world_instance(g, 1);
    if (st != COHORT_OK) {
        coh_err_set(NULL, st, "%s", g->err.msg[0] ? g->err.msg : "group start failed");
        coh_group_free(g);
        return st;
    }
    coh_info("joined: rank %d of %d, generation %u, %d host(s)", g->rank, g->size, g->generation,
             g->n_hosts);
    *group = g;
    return COHORT_OK;
}

cohort_status cohort_init_opts(cohort_group **group, const cohort_options *o)
{
    if (!group)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_init: group is NULL");
    *group = NULL;
    char written[sizeof ((coh_settings *)0)->token_file] = "";
    cohort_status st = init_group(group, o, written, sizeof written);
    /* The job's token file: once rank 0's init returns every rank has read
     * it (they joined), and if rank 0's init failed the job cannot start
     * with it either - the secret leaves the filesystem both ways. */
    if (written[0])
        unlink(written);
    return st;
}

/* The closing check. A rank whose part in a call was send-only (a broadcast
 * root, a reduce leaf, a send) finishes before any receiver has compared
 * its header; a mismatch found there reaches it at its next call. After the
 * last call there is none, so finalize is collective: every rank drains its
 * connections up to each peer's goodbye (what nobody received is a broken
 * contract), meets the others in the store ("finalize/n", posted after its
 * own findings), lets the monitor act on every abort posted before that, and
 * returns a failure nobody has told this rank about yet. Bounded by
 * COHORT_TIMEOUT (at most 30 s): a rank still busy after its last call is
 * logged and left unchecked, not an error. A poisoned group skips it. */
static cohort_status finalize_wait(cohort_group *g, uint64_t *tidx_out);

static cohort_status finalize_check(cohort_group *g)
{
    if (g->size < 2 || !g->store)
        return COHORT_OK;
    uint64_t tidx = UINT64_MAX;
    cohort_status st = finalize_wait(g, &tidx);
    if (tidx != UINT64_MAX)
        coh_trace_end(g->trace, tidx, coh_group_poisoned(g) ? (cohort_status)coh_group_poisoned(g) : st);
    return st;
}

static cohort_status finalize_wait(cohort_group *g, uint64_t *tidx_out)
{
    int wait_ms = COH_MIN(g->timeout_ms < 0 ? 30000 : g->timeout_ms, 30000);
    uint64_t dl = coh_deadline_ns(wait_ms);
    int p = coh_group_poisoned(g);
    int late = 0;
    /* finalize takes the next sequence number, like a call: a peer still
     * waiting in its call #seq finds "finalize" there at its next probe
     * (100 ms) and fails with a contract error naming the call this rank
     * skipped; the abort that follows ends this rank's wait too. Recorded
     * in the flight recorder so the mismatch report shows it. */
    if (!p) {
        coh_call fc;
        memset(&fc, 0, sizeof fc);
        fc.seq = ++g->seq;
        fc.coll = COH_COLL_FINALIZE;
        fc.redop = -1;
        fc.root = -1;
        fc.file = "cohort_finalize";
        fc.site = coh_site_hash(fc.file, 0);
        *tidx_out = coh_trace_issue(g->trace, &fc);
        coh_trace_start(g->trace, *tidx_out);
        coh_monitor_announce(g, &fc);
    }
    for (int i = 0; !p && i < g->n_tp; i++) {
        cohort_status cs = g->tp[i].ops->close_check
                               ? g->tp[i].ops->close_check(g->tp[i].t, wait_ms)
                               : COHORT_OK;
        if (cs == COHORT_ERR_TIMEOUT)
            late = 1;
        else if (cs != COHORT_OK)
            coh_coll_transport_failed(g, cs); /* what it found fails the group */
    }
    /* Arrive only after this rank's findings are posted; a rank that already
     * has its error arrives without waiting, so nobody waits for it. */
    int64_t n = 0;
    int arrived = !atomic_load(&g->store_down) &&
                  cohort_store_add(g->store, "finalize/n", 10, 1, &n) == COHORT_OK;
    if (arrived && n == g->size)
        cohort_store_set(g->store, "finalize/all", 12, "1", 1);
    p = coh_group_poisoned(g);
    if (p && atomic_load(&g->err_reported))
        return COHORT_OK; /* the user has the error already */
    if (!p && arrived && !late) {
        const void *kp = "finalize/all";
        size_t kl = 12;
        cohort_status st = COHORT_ERR_TIMEOUT;
        while (!coh_group_poisoned(g) && coh_ms_left(dl) > 0) {
            st = cohort_store_wait(g->store, &kp, &kl, 1, COH_MIN(coh_ms_left(dl), 100));
            if (st != COHORT_ERR_TIMEOUT)
                break;
        }
        if (st == COHORT_OK)
            coh_monitor_sync(g, 2000); /* aborts posted before the others arrived */
        else if (!coh_group_poisoned(g))
            coh_warn("cohort_finalize: not every rank arrived within %d ms (%s); leaving anyway",
                     wait_ms, cohort_status_name(st));
    }
    p = coh_group_poisoned(g);
    if (!p || !coh_group_claim_report(g))
        return COHORT_OK;
    pthread_mutex_lock(&g->err_mu);
    coh_err_set(&g->last, (cohort_status)p, "%s", g->err.msg);
    coh_err_set(NULL, (cohort_status)p, "%s", g->err.msg); /* g is gone after finalize */
    pthread_mutex_unlock(&g->err_mu);
    return (cohort_status)p;
}

cohort_status cohort_finalize(cohort_group *g)
{
    if (!g)
        return COHORT_OK;
    cohort_status ret = finalize_check(g);
    /* The world's rank 0 may host the store: keep it up until every rank
     * has left (bounded), so nobody's finalize or last call loses it. */
    char key[64];
    snprintf(key, sizeof key, "left/%d", g->rank);
    if (g->store)
        cohort_store_set(g->store, key, strlen(key), "1", 1);
    if (g->server && g->store) {
        /* After a failure the others may still be building the contract
         * report through this store: a few seconds of grace. */
        wait_every_rank(g, "left",
                            coh_group_poisoned(g) ? 5000 : COH_MIN(g->timeout_ms, 30000));
    }
    coh_group_free(g);
    return ret;
}

int cohort_rank(const cohort_group *g) { return g ? g->rank : -1; }
int cohort_size(const cohort_group *g) { return g ? g->size : -1; }
uint32_t cohort_generation(const cohort_group *g) { return g ? g->generation : 0; }

const char *cohort_last_error(const cohort_group *g)
{
    if (!g)
        return coh_tls_err()->msg;
    return g->last.msg;
}

cohort_status cohort_abort(cohort_group *g, const char *reason)
{
    if (!g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_abort: group is NULL");
    coh_group_fail(g, COHORT_ERR_ABORTED, "aborted by rank %d: %s", g->rank,
                   reason ? reason : "cohort_abort() called");
    return COHORT_OK;
}

/* ---- sub-groups ---- */

/* Exchanges (color, key) through the store under the parent's call seq and
 * builds the sub-group of this rank's color. */
cohort_status coh_group_split_members(cohort_group *g, int color, int key, uint64_t seq,
                                      cohort_group **out);

cohort_status coh_group_split_members(cohort_group *g, int color, int key, uint64_t seq,
                                      cohort_group **out)
{
    char k[64], v[64];
    snprintf(k, sizeof k, "split/%llu/%d", (unsigned long long)seq, g->rank);
    snprintf(v, sizeof v, "%d %d", color, key);
    cohort_status st = cohort_store_set(g->store, k, strlen(k), v, strlen(v));
    if (st != COHORT_OK)
        return coh_group_fail(g, st, "split #%llu: store: %s", (unsigned long long)seq,
                              cohort_store_last_error(g->store));
    int n = g->size;
    char (*keys)[48] = coh_calloc((size_t)n, sizeof *keys);
    const void **kp = coh_calloc((size_t)n, sizeof *kp);
    size_t *kl = coh_calloc((size_t)n, sizeof *kl);
    void **vals = coh_calloc((size_t)n, sizeof *vals);
    size_t *vl = coh_calloc((size_t)n, sizeof *vl);
    int *colors = coh_calloc((size_t)n, sizeof *colors);
    int *keyv = coh_calloc((size_t)n, sizeof *keyv);
    int *members = coh_calloc((size_t)n, sizeof *members);
    cohort_group *sub = NULL;
    if (!keys || !kp || !kl || !vals || !vl || !colors || !keyv || !members) {
        st = coh_group_fail(g, COHORT_ERR_NOMEM, "split: out of memory");
        goto out;
    }
    for (int r = 0; r < n; r++) {
        snprintf(keys[r], sizeof keys[r], "split/%llu/%d", (unsigned long long)seq, r);
        kp[r] = keys[r];
        kl[r] = strlen(keys[r]);
    }
    st = cohort_store_multi_get(g->store, kp, kl, n, vals, vl, g->timeout_ms);
    if (st != COHORT_OK) {
        st = coh_group_fail(g, st, "split #%llu: waiting for every rank's color: %s",
                            (unsigned long long)seq, cohort_store_last_error(g->store));
        goto out;
    }
    for (int r = 0; r < n; r++) {
        char buf[64];
        size_t l = COH_MIN(vl[r], sizeof buf - 1);
        memcpy(buf, vals[r], l);
        buf[l] = 0;
        if (sscanf(buf, "%d %d", &colors[r], &keyv[r]) != 2) {
            st = coh_group_fail(g, COHORT_ERR_PROTOCOL, "split: malformed record of rank %d", r);
            goto out;
        }
    }
    *out = NULL;
    if (color < 0) {
        st = COHORT_OK;
        goto out;
    }
    /* Members of my color ordered by (key, parent rank), as MPI_Comm_split. */
    int m = 0;
    for (int r = 0; r < n; r++)
        if (colors[r] == color)
            members[m++] = r;
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0; j--) {
            int a = members[j - 1], b = members[j];
            if (keyv[a] > keyv[b] || (keyv[a] == keyv[b] && a > b)) {
                members[j - 1] = b;
                members[j] = a;
            } else
                break;
        }
    int myrank = -1;
    for (int i = 0; i < m; i++)
        if (members[i] == g->rank)
            myrank = i;
    sub = coh_group_alloc(myrank, m);
    if (!sub) {
        st = coh_group_fail(g, COHORT_ERR_NOMEM, "split: out of memory");
        goto out;
    }
    g->n_children++;
    sub->parent = g;
    sub->generation = g->generation;
    /* Deterministic on every member: parent id, the split's seq, color. */
    uint64_t idin[3] = {g->id, seq, (uint64_t)(uint32_t)color};
    sub->id = (uint32_t)coh_hash64(idin, sizeof idin, 0x5eed) | 1u;
    memcpy(sub->job_id, g->job_id, sizeof sub->job_id);
    sub->timeout_ms = g->timeout_ms;
    sub->stall_warn_ms = g->stall_warn_ms;
    sub->force_transport = g->force_transport;
    sub->debug_sync = g->debug_sync;
    sub->debug_buffers = g->debug_buffers;
    sub->check_contract = g->check_contract;
    sub->token = coh_strdup(g->token);
    sub->store_root = g->store_root;
    memcpy(sub->store_addr, g->store_addr, sizeof sub->store_addr);
    if (!sub->token) {
        st = coh_group_fail(g, COHORT_ERR_NOMEM, "split: out of memory");
        goto out;
    }
    st = group_start(sub);
    if (st != COHORT_OK) {
        coh_group_fail(g, st, "split: creating sub-group %u: %s", sub->id, sub->err.msg);
        goto out;
    }
    *out = sub;
    sub = NULL;
out:
    if (sub)
        coh_group_free(sub);
    if (vals)
        for (int r = 0; r < n; r++)
            free(vals[r]);
    coh_free(keys);
    coh_free(kp);
    coh_free(kl);
    coh_free(vals);
    coh_free(vl);
    coh_free(colors);
    coh_free(keyv);
    coh_free(members);
    return st;
}

/*
 * agree.c - the settings every rank of a group must share (agree.h).
 *
 * Each setting below changes which algorithm or which exchange a call
 * takes. Ranks that differ in one do not fail on their own: they wait for
 * messages that never come, or a later call fails with a report that
 * blames something else. Measured in session 38, 2 and 4 ranks of
 * cohort-perf, one variable set on one rank only: COHORT_TRANSPORT shm
 * against tcp timed out in the tcp connect ("1 lower rank never
 * connected"); COHORT_ALGO_ALL_REDUCE shm against ring and COHORT_DEBUG
 * sync against none stalled the first call until the timeout;
 * COHORT_SHM_BAR_SCATTER 0 on one of 4 ranks was reported as a skipped
 * call ("sequence number differs"); COHORT_TCP_OVERSUB off against auto
 * and COHORT_CHUNK_BYTES 4096 against 1 MiB as "the ranks chose different
 * algorithms" at some later call; COHORT_CONTRACT off on one rank over tcp
 * ran checked on one side only (shm's attach refused it already). The
 * variables the same runs showed to be
 * per rank (the single-copy and cross-core settings, whose inputs the ranks
 * publish to each other; spin and yield times; buffer sizes;
 * COHORT_DEBUG=buffers) are not compared: a check that refuses a correct
 * job is a check users switch off.
 *
 * Each rank writes what its group holds (what creation read, not the
 * environment now) into the rendezvous record's eighth field; every rank
 * compares every record with rank 0's (group-wide keys) or with its host's
 * first rank's (host keys) in rank order, so every rank reports the same
 * difference and fails cohort_init before a transport starts.
 */
#include "group/agree.h"

#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "transport/shm/shm.h"
#include "util/util.h"

typedef struct agree_key {
    const char *key, *var;
    const char *none; /* how the value "-" reads */
    int host;         /* compared between the ranks of one host only */
} agree_key;

/* The fixed keys, always written; algo.<op> only when forced. */
static const agree_key keys[] = {
    {"transport", "COHORT_TRANSPORT", NULL, 0},
    {"contract", "COHORT_CONTRACT", NULL, 0},
    {"debug", "COHORT_DEBUG", "without sync", 0}, /* buffers: per rank */
    {"chunk", "COHORT_CHUNK_BYTES", "unset", 0},
    {"oversub", "COHORT_TCP_OVERSUB", NULL, 0},
    {"bar_scatter", "COHORT_SHM_BAR_SCATTER", NULL, 1},
};
enum { K_OVERSUB = 4 };

static int put(char *buf, size_t len, size_t *at, const char *k, const char *v)
{
    int w = snprintf(buf + *at, len - *at, "%s%s=%s", *at ? "," : "", k, v);
    if (w < 0 || (size_t)w >= len - *at)
        return -1;
    *at += (size_t)w;
    return 0;
}

int coh_agree_format(const cohort_group *g, char *buf, size_t len)
{
    static const char *const tr[] = {"auto", "shm", "tcp"};
    char chunk[24] = "-";
    size_t at = 0;
    if (coh_coll_chunk_set(g))
        snprintf(chunk, sizeof chunk, "%zu", coh_coll_chunk(g));
    int mode = g->algo_env_read ? g->bar_lead_mode : -1;
    const char *vals[] = {
        tr[g->force_transport >= 0 && g->force_transport <= 2 ? g->force_transport : 0],
        g->check_contract ? "on" : "off",
        g->debug_sync ? "sync" : "-",
        chunk,
        mode < 0 ? "auto" : mode ? "on" : "off",
        coh_shm_bar_scatter_setting() ? "1" : "0",
    };
    _Static_assert(COH_ARRAY_LEN(vals) == COH_ARRAY_LEN(keys), "a value per fixed key");
    for (size_t i = 0; i < COH_ARRAY_LEN(keys); i++)
        if (put(buf, len, &at, keys[i].key, vals[i]) != 0)
            return -1;
    for (int c = 0; c < COH_COLL_KIND_COUNT; c++) {
        const char *v = coh_coll_forced(g, c);
        char k[48];
        if (!v)
            continue;
        snprintf(k, sizeof k, "algo.%s", coh_coll_name(c));
        if (put(buf, len, &at, k, v) != 0)
            return -1;
    }
    return (int)at;
}

/* COHORT_TCP_OVERSUB as the group's calls apply it: the led barrier and
 * the flat calls after it (coh_bar_lead_pref), so "auto" equals "on"
 * where some machine's ranks outnumber its cpus. */
static int oversub_effective(const char *v, const cohort_group *g)
{
    int mode = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -1;
    return coh_bar_lead_pref(mode, g->size, g->oversub);
}

static void shown(char *out, size_t len, const char *var, const char *v, int k,
                  const cohort_group *g)
{
    if (k == K_OVERSUB && !strcmp(v, "auto"))
        snprintf(out, len, "%s=auto (%s for this group)", var,
                 oversub_effective(v, g) ? "on" : "off");
    else if (!strcmp(v, "-") && k >= 0 && keys[k].none)
        snprintf(out, len, "%s %s", var, keys[k].none);
    else
        snprintf(out, len, "%s=%s", var, v);
}

/* Rank a's and rank b's values of key differ in effect: 1 and the report. */
static int differs(const cohort_group *g, const char *const *cfg, int a, int b, const char *key,
                   const char *var, int k, char *msg, size_t len)
{
    char va[COH_RDV_CFG_VAL_MAX + 1] = "auto", vb[COH_RDV_CFG_VAL_MAX + 1] = "auto";
    int ha = coh_rdv_cfg_get(cfg[a], key, va, sizeof va);
    int hb = coh_rdv_cfg_get(cfg[b], key, vb, sizeof vb);
    /* a fixed key missing on one side: a library that does not write it */
    if (k >= 0 && (!ha || !hb))
        return 0;
    if (k == K_OVERSUB ? oversub_effective(va, g) == oversub_effective(vb, g) : !strcmp(va, vb))
        return 0;
    char sa[160], sb[160];
    shown(sa, sizeof sa, var, va, k, g);
    shown(sb, sizeof sb, var, vb, k, g);
    snprintf(msg, len,
             "the ranks run with different settings: rank %d has %s, rank %d %s; every rank of "
             "%s must run with the same value (set it for the whole job, not per rank)",
             a, sa, b, sb, k >= 0 && keys[k].host ? "a host" : "a group");
    return 1;
}

int coh_agree_check(const cohort_group *g, const char *const *cfg, const int *first_of_host,
                    char *msg, size_t len)
{
    int n = g->size;
    /* a record without the field (an older library): nothing to compare */
    for (int r = 0; r < n; r++)
        if (!cfg[r] || !cfg[r][0])
            return 0;
    for (int r = 1; r < n; r++) {
        /* the usual case, the same bytes: nothing to compare key by key */
        if (!strcmp(cfg[r], cfg[0]) && !strcmp(cfg[r], cfg[first_of_host[r]]))
            continue;
        for (int k = 0; k < (int)COH_ARRAY_LEN(keys); k++) {
            int a = keys[k].host ? first_of_host[r] : 0;
            if (a != r && differs(g, cfg, a, r, keys[k].key, keys[k].var, k, msg, len))
                return -1;
        }
        for (int c = 0; c < COH_COLL_KIND_COUNT; c++) {
            char key[48];
            snprintf(key, sizeof key, "algo.%s", coh_coll_name(c));
            if (differs(g, cfg, 0, r, key, coh_coll_env_name(c), -1, msg, len))
                return -1;
        }
    }
    return 0;
}

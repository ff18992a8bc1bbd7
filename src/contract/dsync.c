/* dsync.c - COHORT_DEBUG=sync, the store-based contract check: before each
 * collective every rank publishes its fingerprint and compares everyone's.
 * It lives with the contract (which owns the fingerprint and its
 * comparison); the engine only decides when to call it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "contract/fp_record.h"

/* COHORT_DEBUG=sync: the lesson's "barrier as a probe". Before each
 * collective every rank publishes its fingerprint under the call's seq and
 * reads everyone's, so the first divergent call stops every rank right
 * where it happens, with all ranks' values. It costs a store round trip per
 * call and serialises the job: a debugging mode, never a fix. */
cohort_status coh_contract_debug_sync(cohort_group *g, const coh_call *c)
{
    if (c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV || g->size == 1 || !g->store)
        return COHORT_OK;
    char key[64], val[512];
    snprintf(key, sizeof key, "dsync/%llu/%d", (unsigned long long)c->seq, g->rank);
    coh_fp_record_format(val, sizeof val, c);
    cohort_status st = cohort_store_set(g->store, key, strlen(key), val, strlen(val));
    if (st != COHORT_OK)
        return coh_group_fail(g, st, "COHORT_DEBUG=sync: publishing %s #%llu: %s",
                              coh_coll_name(c->coll), (unsigned long long)c->seq,
                              cohort_store_last_error(g->store));
    int n = g->size;
    cohort_fingerprint *fp = coh_calloc((size_t)n, sizeof *fp);
    char (*files)[256] = coh_calloc((size_t)n, sizeof *files);
    if (!fp || !files) {
        coh_free(fp), coh_free(files);
        return coh_group_fail(g, COHORT_ERR_NOMEM, "COHORT_DEBUG=sync: out of memory");
    }
    /* Each rank's record, waited for within the call's timeout: a rank
     * that never arrives is a stall, reported by name. */
    uint64_t dl = coh_deadline_ns(g->timeout_ms);
    for (int r = 0; r < n && st == COHORT_OK; r++) {
        snprintf(key, sizeof key, "dsync/%llu/%d", (unsigned long long)c->seq, r);
        void *v = NULL;
        size_t vl = 0;
        st = cohort_store_get(g->store, key, strlen(key), &v, &vl, coh_ms_left(dl));
        if (st == COHORT_ERR_TIMEOUT) {
            st = coh_group_fail(g, COHORT_ERR_TIMEOUT,
                                "COHORT_DEBUG=sync: %s #%llu (%s:%d): rank %d never reached call "
                                "#%llu within %d ms (it skipped it, or is stuck before it)",
                                coh_coll_name(c->coll), (unsigned long long)c->seq, c->file,
                                c->line, r, (unsigned long long)c->seq, g->timeout_ms);
            break;
        }
        if (st != COHORT_OK) {
            st = coh_group_fail(g, st, "COHORT_DEBUG=sync: %s", cohort_store_last_error(g->store));
            break;
        }
        coh_fp_record rec;
        char why[96];
        int bad = coh_fp_record_parse(v, vl, &rec, why, sizeof why);
        free(v);
        if (bad) {
            st = coh_group_fail(g, COHORT_ERR_PROTOCOL,
                                "COHORT_DEBUG=sync: %s #%llu (%s:%d): rank %d's record is "
                                "malformed: %s",
                                coh_coll_name(c->coll), (unsigned long long)c->seq, c->file,
                                c->line, r, why);
            break;
        }
        snprintf(files[r], sizeof files[r], "%s", rec.file);
        int coll = rec.coll, dt = rec.dtype, redop = rec.redop, root = rec.root, tag = rec.tag,
            line = rec.line;
        unsigned long long count = rec.count;
        fp[r] = (cohort_fingerprint){.seq = c->seq, .coll = coll, .dtype = dt, .redop = redop,
                                     .root = root, .tag = tag, .count = count, .group = g->id,
                                     .generation = g->generation, .file = files[r], .line = line};
    }
    if (st == COHORT_OK) {
        char msg[COH_ERRLEN];
        if (cohort_validate_fingerprints(fp, n, msg, sizeof msg) != COHORT_OK)
            st = coh_group_fail(g, COHORT_ERR_CONTRACT, "%s (stopped by COHORT_DEBUG=sync)", msg);
    }
    coh_free(fp);
    coh_free(files);
    return st;
}


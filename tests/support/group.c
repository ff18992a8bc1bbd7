/* group.c - see group.h. */
#include "support/group.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/names.h"
#include "trace/trace.h"

int cht_group_init(cohort_group *g, int rank, int size, const cht_group_opts *o)
{
    g->rank = rank;
    g->size = size;
    g->generation = 1;
    g->id = 0;
    snprintf(g->job_id, sizeof g->job_id, "%s", o->job ? o->job : "unit");
    g->timeout_ms = o->timeout_ms;
    g->stall_warn_ms = o->stall_warn_ms;
    g->check_contract = o->check_contract;
    pthread_mutex_init(&g->err_mu, NULL);
    size_t n = (size_t)size;
    int bad = 0;
    if (o->token)
        bad |= !(g->token = strdup(o->token));
    if (o->parts & CHT_G_PEERS)
        bad |= !(g->peers = calloc(n, sizeof *g->peers));
    if (o->parts & CHT_G_P2P) {
        bad |= !(g->p2p_send_seq = calloc(n, sizeof(uint64_t)));
        bad |= !(g->p2p_recv_seq = calloc(n, sizeof(uint64_t)));
    }
    if (o->parts & CHT_G_HOST) {
        if ((g->hosts = calloc(1, sizeof *g->hosts))) {
            snprintf(g->hosts[0], sizeof g->hosts[0], "localhost");
            g->n_hosts = 1;
        }
        bad |= !g->hosts;
    }
    if (o->parts & CHT_G_LOCAL) {
        bad |= !(g->local_ranks = calloc(n, sizeof(int)));
        bad |= !(g->leaders = calloc(1, sizeof(int)));
        for (int r = 0; g->local_ranks && r < size; r++) {
            g->local_ranks[r] = r;
            if (g->peers)
                g->peers[r].local_index = r;
        }
        g->local_size = size;
        g->local_rank = rank;
        g->machine_size = size; /* one machine, as cohort_init finds it */
        /* as the rendezvous finds it: the ranks' (this process's) cpu set,
         * at most the online cpus */
        long on = sysconf(_SC_NPROCESSORS_ONLN), cpus = on;
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
            cpus = CPU_COUNT(&set) < on ? CPU_COUNT(&set) : on;
        g->machine_cpus = cpus > 0 ? cpus : 0;
        g->oversub = cpus > 0 && size > cpus;
    }
    return bad ? -1 : 0;
}

cohort_group *cht_group_new(int rank, int size, const cht_group_opts *o)
{
    cohort_group *g = calloc(1, sizeof *g);
    if (g && cht_group_init(g, rank, size, o) != 0) {
        cht_group_free(g);
        g = NULL;
    }
    return g;
}

void cht_group_release(cohort_group *g)
{
    coh_trace_destroy(g->trace);
    g->trace = NULL;
    coh_err_detail_free(g->detail); /* cohort_error_info's data */
    g->detail = NULL;
    free(g->peers);
    free(g->p2p_send_seq);
    free(g->p2p_recv_seq);
    free(g->hosts);
    free(g->local_ranks);
    free(g->leaders);
    free(g->token);
    g->peers = NULL;
    g->p2p_send_seq = g->p2p_recv_seq = NULL;
    g->hosts = NULL;
    g->local_ranks = g->leaders = NULL;
    g->token = NULL;
    pthread_mutex_destroy(&g->err_mu);
}

void cht_group_free(cohort_group *g)
{
    if (!g)
        return;
    cht_group_release(g);
    free(g);
}

coh_call cht_call(uint64_t seq, int coll, int dtype, int redop, int root, int tag, uint64_t count,
                  const char *file, int line)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.seq = seq;
    c.coll = (uint8_t)coll;
    c.dtype = (uint8_t)dtype;
    c.redop = (int8_t)redop;
    c.root = root;
    c.tag = tag;
    c.count = count;
    c.file = file;
    c.line = line;
    c.site = coh_site_hash(file, line);
    return c;
}

/*
 * group.h - hand-built groups and calls for tests below the group module
 * (contract, trace, transports, collective algorithms): no rendezvous, no
 * store unless the test adds one. One factory fills what every hand-built
 * group needs; the parts a variant needs are asked for with flags, and the
 * variant adds its own transport (tests/transport_shm/harness.c: a shm
 * segment and store; tests/transport_tcp/fixture.c: a tcp listener;
 * tests/coll/sim.c: a simulated multi-host topology).
 */
#ifndef COHORT_TEST_SUPPORT_GROUP_H
#define COHORT_TEST_SUPPORT_GROUP_H

#include <stdint.h>

#include "coll/fail/fail.h"
#include "core/group.h"

enum {
    CHT_G_PEERS = 1 << 0, /* peers[size] */
    CHT_G_P2P = 1 << 1,   /* p2p_send_seq / p2p_recv_seq [size] */
    CHT_G_HOST = 1 << 2,  /* one host, "localhost" */
    CHT_G_LOCAL = 1 << 3, /* every rank local: local_ranks, local_size, leaders[1] (with PEERS:
                             peers[r].local_index = r) */
};

typedef struct cht_group_opts {
    const char *job;    /* job_id; NULL: "unit" */
    const char *token;  /* copied into g->token; NULL: none */
    int timeout_ms;
    int stall_warn_ms;  /* -1: never warn */
    int check_contract;
    int parts;          /* CHT_G_* */
} cht_group_opts;

/* Fills a zeroed group: rank, size, generation 1, group id 0, the options
 * and the parts asked for. Returns 0, or -1 when out of memory (whatever
 * was allocated is released by cht_group_release). */
int cht_group_init(cohort_group *g, int rank, int size, const cht_group_opts *o);
/* calloc + cht_group_init; NULL when out of memory. */
cohort_group *cht_group_new(int rank, int size, const cht_group_opts *o);
/* Frees what a hand-built group holds (the parts, token, trace, error
 * detail, err_mu), not g itself; the variant's transport goes first. */
void cht_group_release(cohort_group *g);
void cht_group_free(cohort_group *g); /* release + free(g); NULL ok */

/* The test owns the group, as src/coll does: a transport returns a failure
 * as a status plus a record (transport/transport.h), and the owner makes it
 * the group's failure (coll/fail); reported as the group's first failure. */
static inline cohort_status cht_tp_up(cohort_group *g, cohort_status st)
{
    if (st == COHORT_OK)
        return st;
    st = coh_coll_transport_failed(g, st);
    int p = coh_group_poisoned(g);
    return p ? (cohort_status)p : st;
}

/* The one call builder: the contract of one call (site from file:line, as
 * the API layer computes it). */
coh_call cht_call(uint64_t seq, int coll, int dtype, int redop, int root, int tag, uint64_t count,
                  const char *file, int line);

#endif

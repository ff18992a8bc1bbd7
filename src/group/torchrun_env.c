/*
 * torchrun_env.c - starting under torchrun (docs/launcher.md#torchrun).
 *
 * torchrun's agent hosts a TCPStore at MASTER_ADDR:MASTER_PORT for its
 * workers and says so with TORCHELASTIC_USE_AGENT_STORE=True: that port is
 * taken, so rank 0 must not try to host cohort's store there. cohort uses
 * the agent's store instead, through the TCPStore client backend
 * (torch://, src/store/torch_client.c), with every key under
 * "cohort/<TORCHELASTIC_RUN_ID>/". The job's secret, when COHORT_TOKEN is
 * not set, is made by rank 0 and passed through that store (init.c) - the
 * agent's store has no authentication, so anyone who can reach it could
 * read it, exactly as they could already take over the torch job itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "group/group_internal.h"

int coh_env_torchrun_agent_store(void)
{
    const char *use = coh_env_str("TORCHELASTIC_USE_AGENT_STORE");
    return coh_env_str("TORCHELASTIC_RUN_ID") && use &&
           (!strcasecmp(use, "true") || !strcmp(use, "1"));
}

cohort_status coh_env_torchrun_store(const cohort_options *o, coh_settings *s)
{
    const char *maddr = (o && o->master_addr) ? o->master_addr : coh_env_str("MASTER_ADDR");
    long port = 0;
    if (o && o->master_port)
        port = o->master_port;
    else if (coh_env_int("MASTER_PORT", &port) != 1)
        port = 0;
    if (!maddr || port <= 0 || port > 65535)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) MASTER_ADDR and "
                           "MASTER_PORT must name the agent's store; they are '%s' and '%s'",
                           maddr ? maddr : "(unset)",
                           getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "(unset)");
    const char *run = coh_env_str("TORCHELASTIC_RUN_ID");
    char runs[128];
    size_t i = 0;
    for (; run[i] && i < sizeof runs - 1; i++) {
        char c = run[i];
        runs[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          c == '-' || c == '.' || c == '_'
                      ? c
                      : '_';
    }
    runs[i] = 0;
    int n = strchr(maddr, ':') && maddr[0] != '['
                ? snprintf(s->store_addr, sizeof s->store_addr, "torch://[%s]:%ld/cohort/%s",
                           maddr, port, runs)
                : snprintf(s->store_addr, sizeof s->store_addr, "torch://%s:%ld/cohort/%s",
                           maddr, port, runs);
    if (n < 0 || (size_t)n >= sizeof s->store_addr)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "MASTER_ADDR is too long");
    s->store_port = (int)port;
    s->host_store = 0;
    /* A restart of the workers is a new generation (own keys, own token). */
    long rc;
    if (!(o && o->generation) && !coh_env_str("COHORT_GENERATION") &&
        coh_env_int("TORCHELASTIC_RESTART_COUNT", &rc) == 1 && rc >= 0 && rc < 0x7ffffffe)
        s->generation = (uint32_t)rc + 1;
    return COHORT_OK;
}

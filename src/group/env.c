/* env.c - resolving a group's settings from options and the environment:
 * cohort's own / torchrun names first, then Slurm, then Open MPI, so that
 * cohortrun, torchrun-style scripts, srun and mpirun all start cohort
 * programs unchanged. Every missing or malformed variable is named. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group/envtab.h"
#include "group/group_internal.h"
#include "group/pmi.h"

void cohort_options_init(cohort_options *o)
{
    memset(o, 0, sizeof *o);
    o->rank = -1;
    o->world_size = -1;
}

/* Reads the first set variable of names[] as an int in [lo, hi]. Returns 1
 * if found, 0 if none is set, -1 (with the error recorded) if one is
 * malformed or out of range (RANK=4294967296 must not wrap to 0). */
static int env_first_int(const char *const *names, long lo, long hi, long *out,
                         const char **which)
{
    int slurm = coh_env_slurm_step();
    for (int i = 0; names[i]; i++) {
        if (!slurm && !strncmp(names[i], "SLURM_", 6))
            continue; /* a batch script is not task 0 of its allocation */
        int r = coh_env_int_in(names[i], lo, hi, out);
        if (r == 1) {
            *which = names[i];
            return 1;
        }
        if (r < 0) {
            coh_err_set(NULL, COHORT_ERR_INVALID,
                        "environment variable %s='%s' is not an integer in [%ld, %ld]", names[i],
                        getenv(names[i]), lo, hi);
            return -1;
        }
    }
    return 0;
}

/* A number of seconds in (0, 1e7]: nan, inf and garbage are refused. */
static int env_seconds(const char *t, int *ms)
{
    char *end;
    double d = strtod(t, &end);
    if (end == t || *end || !isfinite(d) || d <= 0 || d > 1e7)
        return -1;
    *ms = d * 1000 < 1 ? 1 : (int)(d * 1000);
    return 0;
}

cohort_status coh_settings_resolve(const cohort_options *o, coh_settings *s)
{
    memset(s, 0, sizeof *s);
    /* Strict environment: a COHORT_* name cohort does not know (a typo) or
     * a value it would not accept fails here, before anything else. */
    if (coh_env_check_all() != COHORT_OK)
        return COHORT_ERR_INVALID;
    long v;
    const char *which = NULL;
    static const char *const rank_names[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                             "PMI_RANK", NULL};
    static const char *const size_names[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
                                             "PMI_SIZE", NULL};
    static const char *const lrank_names[] = {"LOCAL_RANK", "SLURM_LOCALID",
                                              "OMPI_COMM_WORLD_LOCAL_RANK", NULL};

    if ((!o || (o->rank < 0 && o->world_size < 0)) && !coh_env_launched()) {
        /* Started alone, by no launcher: a world of one (MPI's singleton
         * init), hosting its own store on a free loopback port. */
        s->singleton = 1;
        s->rank = 0;
        s->rank_src = "a lone start (no RANK)";
    } else if (o && o->rank >= 0) {
        s->rank = o->rank;
        s->rank_src = "options.rank";
    } else {
        int r = env_first_int(rank_names, 0, INT_MAX, &v, &which);
        if (r < 0)
            return COHORT_ERR_INVALID;
        if (r == 0)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "RANK is not set (nor SLURM_PROCID / OMPI_COMM_WORLD_RANK): start the "
                               "program with cohortrun, or set RANK and WORLD_SIZE");
        s->rank = (int)v;
        s->rank_src = which;
    }
    if (s->singleton) {
        s->size = 1;
        s->size_src = "a lone start (no WORLD_SIZE)";
    } else if (o && o->world_size >= 0) {
        s->size = o->world_size;
        s->size_src = "options.world_size";
    } else {
        int r = env_first_int(size_names, 1, 1 << 20, &v, &which);
        if (r < 0)
            return COHORT_ERR_INVALID;
        if (r == 0)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "WORLD_SIZE is not set (nor SLURM_NTASKS / OMPI_COMM_WORLD_SIZE)");
        s->size = (int)v;
        s->size_src = which;
    }
    if (s->size < 1 || s->size > 1 << 20)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "%s=%d is not a valid world size",
                           s->size_src, s->size);
    if (s->rank < 0 || s->rank >= s->size)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "%s=%d is out of range for %s=%d",
                           s->rank_src, s->rank, s->size_src, s->size);
    s->local_rank = -1;
    {
        int r = env_first_int(lrank_names, 0, INT_MAX, &v, &which);
        if (r < 0)
            return COHORT_ERR_INVALID;
        if (r == 1)
            s->local_rank = (int)v;
    }

    /* Job identity: cohort's own, then the launcher's job ids. */
    const char *job = (o && o->job_id) ? o->job_id : coh_env_str("COHORT_JOB_ID");
    if (!job)
        job = coh_env_str("SLURM_JOB_ID");
    if (!job)
        job = coh_env_str("OMPI_MCA_ess_base_jobid");
    if (!job)
        job = coh_env_str("PMIX_NAMESPACE");
    if (!job)
        job = "default";
    if (strlen(job) >= sizeof s->job_id)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "COHORT_JOB_ID is longer than %zu bytes",
                           sizeof s->job_id - 1);
    snprintf(s->job_id, sizeof s->job_id, "%s", job);

    const char *tok = (o && o->token) ? o->token : coh_env_str("COHORT_TOKEN");
    if (tok && strlen(tok) >= sizeof s->token)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "COHORT_TOKEN is longer than %zu bytes",
                           sizeof s->token - 1);
    if (tok)
        snprintf(s->token, sizeof s->token, "%s", tok);

    s->generation = 1;
    if (o && o->generation)
        s->generation = o->generation;
    else {
        int r = coh_env_int("COHORT_GENERATION", &v);
        if (r < 0 || (r == 1 && (v < 1 || v > 0x7fffffff)))
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_GENERATION='%s' is not a positive integer",
                               getenv("COHORT_GENERATION"));
        if (r == 1)
            s->generation = (uint32_t)v;
    }

    s->timeout_ms = 600 * 1000;
    if (o && o->timeout_ms)
        s->timeout_ms = o->timeout_ms;
    else {
        /* Seconds, fractions allowed (tests use short timeouts). */
        const char *t = coh_env_str("COHORT_TIMEOUT");
        if (t && env_seconds(t, &s->timeout_ms) < 0)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_TIMEOUT='%s' is not a positive number of seconds", t);
    }
    /* What the environment does not say - where rank 0 runs (Open MPI and
     * MPICH across nodes), the job's secret (not exported) - the launcher's
     * PMI may (pmi.c): PMIx under Open MPI, PMI-1 under MPICH's Hydra. */
    const char *url = (o && o->store_url) ? o->store_url : coh_env_str("COHORT_STORE");
    int torch = !url && coh_env_torchrun_agent_store();
    const char *maddr = (o && o->master_addr) ? o->master_addr : coh_env_str("MASTER_ADDR");
    char job_master[256] = "", pmi_job[64] = "";
    const char *master_src = "MASTER_ADDR", *no_pmi = NULL;
    int need_master = !url && !torch && !maddr && !s->singleton;
    if (need_master) {
        cohort_status ms = coh_env_master_default(s, job_master, sizeof job_master, &master_src);
        if (ms != COHORT_OK)
            return ms;
        if (job_master[0]) {
            maddr = job_master;
            need_master = 0;
        }
    }
    int need_token = !tok && !s->singleton && !coh_env_torchrun_agent_store();
    coh_pmi_result pr;
    memset(&pr, 0, sizeof pr);
    cohort_status ps = COHORT_ERR_UNSUPPORTED;
    if ((need_master || need_token) && coh_pmi_available(&no_pmi)) {
        ps = coh_pmi_exchange(s->rank, s->size, need_token, s->timeout_ms, &pr);
        if (ps == COHORT_ERR_UNSUPPORTED) {
            /* no launcher to ask after all: as without PMI */
            static __thread char why[300];
            snprintf(why, sizeof why, "%s", cohort_last_error(NULL));
            no_pmi = why;
        } else if (ps != COHORT_OK) {
            return ps;
        }
    }
    if (ps == COHORT_OK) {
        if (need_token) {
            snprintf(s->token, sizeof s->token, "%s", pr.token);
            tok = s->token;
        }
        if (need_master) {
            snprintf(job_master, sizeof job_master, "%s", pr.master);
            maddr = job_master;
            master_src = pr.via;
        }
        snprintf(pmi_job, sizeof pmi_job, "%s", pr.job);
        explicit_bzero(&pr, sizeof pr);
        if (!strcmp(s->job_id, "default")) {
            /* Hydra's kvsname: the only job id MPICH's launcher gives */
            snprintf(s->job_id, sizeof s->job_id, "%s", pmi_job);
            for (char *c = s->job_id; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' || *c == '_'))
                    *c = '_';
        }
    }
    if (need_master && !maddr)
        /* before the token file below: a failed init leaves none behind */
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "neither COHORT_STORE nor MASTER_ADDR is set, and the job does not say "
                           "where rank 0 runs (no Slurm step node list; ranks on several nodes; "
                           "no launcher PMI: %s): set MASTER_ADDR (and MASTER_PORT), e.g. mpirun "
                           "-x MASTER_ADDR=node0 -x MASTER_PORT=29500, or give a store URL",
                           no_pmi ? no_pmi : "not asked");
    if (tok) {
        /* given, or from the launcher's PMI */
    } else if (s->singleton) {
        /* Nobody else will join: any fresh secret will do. */
        unsigned char raw[32];
        cohort_status rs = coh_random(raw, sizeof raw);
        if (rs != COHORT_OK)
            return rs;
        for (size_t i = 0; i < sizeof raw; i++)
            snprintf(s->token + 2 * i, 3, "%02x", raw[i]);
        memset(raw, 0, sizeof raw);
    } else if (!tok && coh_env_torchrun_agent_store()) {
        /* Rank 0 makes one and passes it through torchrun's store (init.c). */
        s->token_via_store = 1;
        snprintf(s->token, sizeof s->token, "via-torchrun-store");
    } else if (!tok) {
        cohort_status ts = coh_env_token_exchange(s);
        if (ts != COHORT_OK)
            return ts;
    }
    s->stall_warn_ms = 30 * 1000;
    {
        const char *t = coh_env_str("COHORT_STALL_WARN");
        if (t && env_seconds(t, &s->stall_warn_ms) < 0)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_STALL_WARN='%s' is not a positive number of seconds", t);
    }

    const char *tr = (o && o->transport) ? o->transport : coh_env_str("COHORT_TRANSPORT");
    s->force_transport = 0;
    if (tr) {
        if (!strcmp(tr, "auto"))
            s->force_transport = 0;
        else if (!strcmp(tr, "shm"))
            s->force_transport = 1;
        else if (!strcmp(tr, "tcp"))
            s->force_transport = 2;
        else
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_TRANSPORT='%s': expected auto, shm or tcp", tr);
    }
    const char *dbg = coh_env_str("COHORT_DEBUG");
    if (dbg) {
        s->debug_sync = strstr(dbg, "sync") != NULL;
        s->debug_buffers = strstr(dbg, "buffers") != NULL;
        if (!s->debug_sync && !s->debug_buffers)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_DEBUG='%s': expected sync, buffers or sync,buffers", dbg);
    }
    const char *cc = coh_env_str("COHORT_CONTRACT");
    s->check_contract = !(cc && !strcmp(cc, "off"));

    /* Where the store is. */
    if (url) {
        if (strlen(url) >= sizeof s->store_addr)
            return coh_err_set(NULL, COHORT_ERR_INVALID, "COHORT_STORE is too long");
        snprintf(s->store_addr, sizeof s->store_addr, "%s", url);
        s->host_store = 0;
        return COHORT_OK;
    }
    if (coh_env_torchrun_agent_store())
        return coh_env_torchrun_store(o, s);
    if (!maddr && s->singleton) {
        maddr = "127.0.0.1";
        master_src = "a lone start";
    }
    long port = 0;
    if (o && o->master_port)
        port = o->master_port;
    else {
        int r = coh_env_int("MASTER_PORT", &port);
        if (r < 0)
            return coh_err_set(NULL, COHORT_ERR_INVALID, "MASTER_PORT='%s' is not a port number",
                               getenv("MASTER_PORT"));
        if (r == 0 && !s->singleton) {
            /* Under srun or mpirun without MASTER_PORT: a port derived from
             * the job's id, the same on every rank. */
            const char *psrc;
            port = coh_env_port_default(s, &psrc);
            if (port == 0 && pmi_job[0]) {
                /* MPICH across nodes: from Hydra's kvsname (FNV-1a) */
                uint32_t h = 2166136261u;
                for (const char *c = pmi_job; *c; c++)
                    h = (h ^ (unsigned char)*c) * 16777619u;
                port = 20000 + (long)(h % 12000);
            }
        }
    }
    if (!maddr)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "MASTER_ADDR is not set");
    (void)master_src;
    if (s->singleton && port == 0) {
        /* a free port, read back once the store listens (init.c) */
        snprintf(s->store_addr, sizeof s->store_addr, "127.0.0.1:0");
        s->store_port = 0;
        s->host_store = 1;
        return COHORT_OK;
    }
    if (port <= 0 || port > 65535)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "MASTER_PORT is %s",
                           port ? "out of range" : "not set");
    if (strchr(maddr, ':') && maddr[0] != '[')
        snprintf(s->store_addr, sizeof s->store_addr, "[%s]:%ld", maddr, port);
    else
        snprintf(s->store_addr, sizeof s->store_addr, "%s:%ld", maddr, port);
    s->store_port = (int)port;
    s->host_store = s->rank == 0;
    return COHORT_OK;
}

/*
 * launch_env.c - what a job started by srun, mpirun or by hand tells a rank,
 * beyond RANK/WORLD_SIZE (docs/launcher.md "Under Slurm or mpirun"):
 *
 *   - a program started alone (no rank variable of any launcher) is a world
 *     of one, as MPI's singleton init;
 *   - MASTER_ADDR, when not given: loopback when every rank runs on this
 *     node, else the first host of the Slurm step's node list (where srun
 *     puts task 0);
 *   - MASTER_PORT, when not given: derived from the job's id, the same on
 *     every rank;
 *   - the job's secret, when COHORT_TOKEN is not exported: rank 0 writes a
 *     fresh random token to a mode-0600 file in a private directory of the
 *     user's (COHORT_TOKEN_DIR, default ~/.cohort/tokens) named after the
 *     job and step, every other rank reads it from there (the directory must
 *     be on a filesystem the job's nodes share, as home directories on
 *     clusters are), and rank 0 deletes it once every rank has joined.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "group/group_internal.h"
#include "util/hostlist.h"

/* srun sets SLURM_STEP_ID in a step; a batch script has SLURM_PROCID and
 * SLURM_NTASKS of the whole allocation but is one process, not task 0 of
 * them, so Slurm's rank variables count only inside a step. */
int coh_env_slurm_step(void)
{
    const char *id = coh_env_str("SLURM_STEP_ID");
    if (!id)
        id = coh_env_str("SLURM_STEPID");
    if (!id)
        return 0;
    char *end;
    unsigned long v = strtoul(id, &end, 10);
    /* the batch and extern steps have large reserved ids */
    return *end == 0 && v < 0xfffffff0UL;
}

int coh_env_launched(void)
{
    static const char *const names[] = {"RANK",         "WORLD_SIZE",     "OMPI_COMM_WORLD_RANK",
                                        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                                        "PMIX_RANK",    NULL};
    for (int i = 0; names[i]; i++)
        if (getenv(names[i]))
            return 1;
    return coh_env_slurm_step() && (getenv("SLURM_PROCID") || getenv("SLURM_NTASKS"));
}

/* Value of an integer variable, or -1 if unset or malformed. */
static long env_long(const char *name)
{
    long v = 0;
    return coh_env_int(name, &v) == 1 ? v : -1;
}

cohort_status coh_env_master_default(const coh_settings *s, char *out, size_t len,
                                     const char **src)
{
    out[0] = 0;
    *src = NULL;
    /* Every rank on this node: loopback. */
    static const char *const local[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                        "MPI_LOCALNRANKS", NULL};
    for (int i = 0; local[i]; i++)
        if (env_long(local[i]) == s->size) {
            snprintf(out, len, "127.0.0.1");
            *src = local[i];
            return COHORT_OK;
        }
    if (coh_env_slurm_step()) {
        if (env_long("SLURM_STEP_NUM_NODES") == 1) {
            snprintf(out, len, "127.0.0.1");
            *src = "SLURM_STEP_NUM_NODES=1";
            return COHORT_OK;
        }
        const char *name = "SLURM_STEP_NODELIST";
        const char *list = coh_env_str(name);
        if (!list) {
            name = "SLURM_JOB_NODELIST";
            list = coh_env_str(name);
        }
        if (list) {
            char err[160];
            if (coh_hostlist_first(list, out, len, err, sizeof err) < 0)
                return coh_err_set(NULL, COHORT_ERR_INVALID, "%s='%.200s': %s", name, list, err);
            *src = name;
            /* srun's block and cyclic distributions put task 0 on the
             * list's first node; others (arbitrary, plane, a het job) may
             * not. Rank 0 knows its node: it says so instead of hosting
             * the store where nobody looks. */
            const char *mine = coh_env_str("SLURMD_NODENAME");
            if (s->rank == 0 && mine && strcmp(mine, out))
                return coh_err_set(NULL, COHORT_ERR_INVALID,
                                   "rank 0 runs on %s, not on %s, the first node of %s: this "
                                   "task distribution does not put task 0 first; set MASTER_ADDR "
                                   "(e.g. MASTER_ADDR=$(scontrol show hostnames | head -1) with "
                                   "srun -m block)",
                                   mine, out, name);
            return COHORT_OK;
        }
    }
    return COHORT_OK;
}

/* Derived ports: 20000..31999, below Linux's default ephemeral range
 * (32768..60999), where any outgoing connection of the node may hold the
 * port rank 0 needs. */
#define PORT_BASE 20000
#define PORT_SPAN 12000

long coh_env_port_default(const coh_settings *s, const char **src)
{
    *src = NULL;
    long job = env_long("SLURM_JOB_ID");
    if (coh_env_slurm_step() && job >= 0) {
        /* From the job and step, so the steps of one job that run at the
         * same time do not collide. */
        long step = env_long("SLURM_STEP_ID");
        if (step < 0)
            step = env_long("SLURM_STEPID");
        *src = "SLURM_JOB_ID/SLURM_STEP_ID";
        return PORT_BASE + (job + 7919 * (step < 0 ? 0 : step)) % PORT_SPAN;
    }
    job = env_long("OMPI_MCA_ess_base_jobid");
    if (job >= 0) {
        *src = "OMPI_MCA_ess_base_jobid";
        return PORT_BASE + job % PORT_SPAN;
    }
    /* MPICH's Hydra: no job id, but ranks of one node share their proxy
     * parent; only good when every rank is on this node. */
    if (getenv("PMI_RANK") && env_long("MPI_LOCALNRANKS") == s->size) {
        *src = "the local Hydra proxy's pid";
        return PORT_BASE + (long)getppid() % PORT_SPAN;
    }
    return 0;
}

/* A process's start time (clock ticks since boot, /proc/PID/stat field
 * 22), or 0 if unknown. */
static unsigned long long proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* the command name (field 2) may hold spaces and ')': skip past the last ')' */
    char *p = strrchr(buf, ')');
    unsigned long long st = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                            "%*d %*d %*d %llu",
                     &st) != 1)
        return 0;
    return st;
}

/* The job's key for the token file: launcher, job and step, as few
 * characters as a file name allows. */
static int token_key(const coh_settings *s, char *key, size_t len)
{
    const char *job = coh_env_str("SLURM_JOB_ID");
    if (job && coh_env_slurm_step()) {
        const char *step = coh_env_str("SLURM_STEP_ID");
        if (!step)
            step = coh_env_str("SLURM_STEPID");
        const char *rs = coh_env_str("SLURM_RESTART_COUNT");
        snprintf(key, len, "slurm-%s.%s.%s", job, step ? step : "0", rs ? rs : "0");
    } else if ((job = coh_env_str("OMPI_MCA_ess_base_jobid"))) {
        snprintf(key, len, "ompi-%s", job);
    } else if ((job = coh_env_str("PMIX_NAMESPACE"))) {
        snprintf(key, len, "pmix-%s", job);
    } else if (getenv("PMI_RANK") && env_long("MPI_LOCALNRANKS") == s->size) {
        /* MPICH's Hydra gives no job id, but the ranks of one node share
         * their proxy parent (the derived port uses it too); only when every
         * rank is on this node. Its pid and start time: a reused pid is not
         * the same job. */
        pid_t pp = getppid();
        snprintf(key, len, "hydra-%ld.%llu", (long)pp, proc_start_time(pp));
    } else {
        return -1;
    }
    for (char *c = key; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '.' || *c == '_'))
            *c = '_';
    return 0;
}

/* The private directory: created 0700 if missing; refused if another user
 * owns it or anyone else may enter it (like ssh's ~/.ssh). */
static cohort_status token_dir(char *dir, size_t len)
{
    const char *d = coh_env_str("COHORT_TOKEN_DIR");
    if (d) {
        snprintf(dir, len, "%s", d);
    } else {
        const char *home = coh_env_str("HOME");
        if (!home)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_TOKEN is not set and neither is HOME or COHORT_TOKEN_DIR "
                               "(where the ranks would share the job's token)");
        char parent[400];
        snprintf(parent, sizeof parent, "%s/.cohort", home);
        if (mkdir(parent, 0700) < 0 && errno != EEXIST)
            return coh_err_sys(NULL, COHORT_ERR_INVALID, "mkdir", errno,
                               "creating %s for the job's token", parent);
        snprintf(dir, len, "%s/tokens", parent);
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return coh_err_sys(NULL, COHORT_ERR_INVALID, "mkdir", errno,
                           "creating the token directory %s", dir);
    struct stat st;
    if (stat(dir, &st) < 0)
        return coh_err_sys(NULL, COHORT_ERR_INVALID, "stat", errno, "token directory %s", dir);
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "token directory %s must be a directory of yours that nobody else "
                           "can enter (mode %04o, owner %u): run 'chmod 700 %s'",
                           dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, dir);
    return COHORT_OK;
}

/* Reads one line from a 0600 file of ours; 1 = read, 0 = absent, -1 = bad. */
static int read_token(const char *path, char *tok, size_t len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : (coh_err_sys(NULL, COHORT_ERR_INVALID, "open", errno,
                                                  "token file %s", path), -1);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077)) {
        close(fd);
        coh_err_set(NULL, COHORT_ERR_INVALID,
                    "token file %s is not a file of yours with mode 0600: refused", path);
        return -1;
    }
    ssize_t n = read(fd, tok, len - 1);
    close(fd);
    if (n <= 0) {
        coh_err_set(NULL, COHORT_ERR_INVALID, "token file %s is empty or unreadable", path);
        return -1;
    }
    tok[n] = 0;
    tok[strcspn(tok, "\r\n")] = 0;
    if (!tok[0]) {
        coh_err_set(NULL, COHORT_ERR_INVALID, "token file %s holds no token", path);
        return -1;
    }
    return 1;
}

cohort_status coh_env_token_exchange(coh_settings *s)
{
    char key[128];
    if (token_key(s, key, sizeof key) < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TOKEN is not set: cohortrun sets it; under srun, Open MPI's "
                           "mpirun or MPICH's mpiexec on one node ranks share one through "
                           "~/.cohort/tokens (COHORT_TOKEN_DIR), "
                           "which needs a job id this launcher does not give; export a shared "
                           "secret to every rank instead (COHORT_TOKEN=$(openssl rand -hex 16), "
                           "mpirun -x COHORT_TOKEN)");
    char dir[512];
    cohort_status st = token_dir(dir, sizeof dir);
    if (st != COHORT_OK)
        return st;
    snprintf(s->token_file, sizeof s->token_file, "%s/%s.token", dir, key);
    if (s->rank == 0) {
        /* A fresh secret, written whole under a temporary name and renamed
         * into place: a reader sees no file or the complete one. */
        unsigned char raw[32];
        st = coh_random(raw, sizeof raw);
        if (st != COHORT_OK)
            return st;
        for (size_t i = 0; i < sizeof raw; i++)
            snprintf(s->token + 2 * i, 3, "%02x", raw[i]);
        memset(raw, 0, sizeof raw);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", s->token_file, (long)getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return coh_err_sys(NULL, COHORT_ERR_INVALID, "open", errno,
                               "writing the job's token to %s", tmp);
        size_t tl = strlen(s->token);
        int ok = write(fd, s->token, tl) == (ssize_t)tl && write(fd, "\n", 1) == 1 &&
                 fsync(fd) == 0;
        int err = errno;
        close(fd);
        if (!ok || rename(tmp, s->token_file) < 0) {
            err = ok ? errno : err;
            unlink(tmp);
            return coh_err_sys(NULL, COHORT_ERR_INVALID, ok ? "rename" : "write", err,
                               "writing the job's token to %s", s->token_file);
        }
        return COHORT_OK;
    }
    /* Everyone else waits (bounded by COHORT_TIMEOUT) for rank 0's file. */
    uint64_t dl = coh_deadline_ns(s->timeout_ms);
    int sleep_ms = 5;
    for (;;) {
        int r = read_token(s->token_file, s->token, sizeof s->token);
        if (r < 0)
            return COHORT_ERR_INVALID;
        if (r == 1)
            return COHORT_OK;
        if (coh_ms_left(dl) <= 0)
            return coh_err_set(NULL, COHORT_ERR_TIMEOUT,
                               "rank %d waited %d ms for rank 0 to write the job's token to %s: "
                               "COHORT_TOKEN_DIR must be on a filesystem every node of the job "
                               "shares (or export COHORT_TOKEN to every rank)",
                               s->rank, s->timeout_ms, s->token_file);
        struct timespec ts = {0, (long)sleep_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (sleep_ms < 100)
            sleep_ms *= 2;
    }
}

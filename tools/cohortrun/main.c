/* main.c - cohortrun: start N workers of a cohort job, host its store, keep
 * their output apart, tear the job down on the first failure, restart it
 * under a new generation if asked. See docs/launcher.md.
 *
 * Order at start-up matters:
 *   1. signals the launcher handles are blocked (read through a signalfd)
 *      before any thread or child exists, so neither the store's thread nor
 *      a child can take them by accident;
 *   2. the orphan guard is forked while the process is single-threaded;
 *   3. the store server starts (its thread inherits the blocked mask);
 *   4. generations run until success, a final failure or an interrupt.
 */
#include "cohortrun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort.h"

#define TOKEN_BYTES 32
#define TOKEN_FILE_MAX 4096

void crun_msg(const char *fmt, ...)
{
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "cohortrun: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    (void)crun_write_all(2, buf, len);
}

void crun_note(const crun_cfg *cfg, const char *fmt, ...)
{
    if (cfg->quiet)
        return;
    char buf[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    crun_msg("%s", buf);
}

static int random_hex(char *out, size_t nbytes)
{
    unsigned char raw[64];
    if (nbytes > sizeof raw)
        return -1;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t r = getrandom(raw + got, nbytes - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof raw);
    return 0;
}

/* The token from a file that only its owner may read (like ssh keys): a
 * secret readable by others is refused, not silently used. */
static int read_token_file(const char *path, char *tok, size_t toklen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        crun_msg("--token-file '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        crun_msg("--token-file '%s' is not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_mode & 077) {
        crun_msg("--token-file '%s' is accessible by group or others (mode %04o); run "
                 "'chmod 600 %s'",
                 path, (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, tok, toklen - 1);
    close(fd);
    if (n < 0) {
        crun_msg("--token-file '%s': %s", path, strerror(errno));
        return -1;
    }
    tok[n] = 0;
    while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
        tok[--n] = 0;
    if (n == 0 || strchr(tok, '\n')) {
        crun_msg("--token-file '%s' must hold one non-empty line", path);
        return -1;
    }
    return 0;
}

/* execve does not search PATH: resolve here, in the parent. */
static char *resolve_program(const char *name)
{
    if (strchr(name, '/'))
        return strdup(name);
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    size_t nl = strlen(name);
    while (*path) {
        const char *end = strchr(path, ':');
        size_t dl = end ? (size_t)(end - path) : strlen(path);
        char *cand = malloc(dl + nl + 3);
        if (!cand)
            return NULL;
        if (dl == 0)
            snprintf(cand, nl + 3, "./%s", name);
        else
            snprintf(cand, dl + nl + 2, "%.*s/%s", (int)dl, path, name);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            return cand;
        free(cand);
        if (!end)
            break;
        path = end + 1;
    }
    return NULL;
}

/* "tcp://host:port", "host:port", "etcd://host:port,.../prefix": the first
 * host and port. */
static void host_of_url(const char *url, char *host, size_t hl, int *port)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t l = strcspn(p, ",/");
    char hp[256];
    if (l >= sizeof hp)
        l = sizeof hp - 1;
    memcpy(hp, p, l);
    hp[l] = 0;
    char *colon = strrchr(hp, ':');
    *port = 0;
    if (colon) {
        *colon = 0;
        *port = atoi(colon + 1);
    }
    char *h = hp;
    if (h[0] == '[') {
        h++;
        char *rb = strchr(h, ']');
        if (rb)
            *rb = 0;
    }
    snprintf(host, hl, "%s", h);
}

/* One block, one write: the summary of a failed generation. */
/* Generation gen's MASTER_ADDR/MASTER_PORT (torchport.c says why it is not
 * the store), chosen on node 0 and published before node 0 joins. */
static int torch_endpoint(crun_job *job, uint32_t gen)
{
    const crun_cfg *cfg = job->cfg;
    if (cfg->nnodes == 1) {
        snprintf(job->torch_addr, sizeof job->torch_addr, "%s",
                 cfg->store_url ? "127.0.0.1" : job->master_addr);
    } else if (cfg->master_host[0]) {
        snprintf(job->torch_addr, sizeof job->torch_addr, "%s", cfg->master_host);
    } else {
        /* --store without --master: node 0's address as the store sees it. */
        char sh[256];
        int sp = 0;
        host_of_url(cfg->store_url, sh, sizeof sh, &sp);
        if (crun_local_addr_toward(sh, sp, job->torch_addr, sizeof job->torch_addr) < 0) {
            crun_msg("cannot tell this node's address toward the store at %s for MASTER_ADDR; "
                     "give --master HOST:PORT with this node's address",
                     cfg->store_url);
            return -1;
        }
    }
    int port = job->fixed_torch_port > 0 ? job->fixed_torch_port
                                         : crun_torch_port(job->job_id, gen);
    if (port < 0) {
        crun_msg("no free port for MASTER_PORT on this node (generation %u): %s", gen,
                 strerror(errno));
        return -1;
    }
    job->torch_port = port;
    if (job->coord)
        return crun_coord_put_torch(job->coord, gen, job->torch_addr, port);
    return 0;
}

static void print_summary(const crun_job *job, uint32_t gen, const crun_result *r, int restarting)
{
    const crun_cfg *cfg = job->cfg;
    char buf[8192];
    size_t n = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (n < sizeof buf)                                                                        \
            n += (size_t)snprintf(buf + n, sizeof buf - n, __VA_ARGS__);                           \
    } while (0)
    const crun_fail *f = &r->fail;
    if (f->rank < 0) {
        ADD("cohortrun: generation %u failed: %s\n", gen, f->desc);
    } else if (r->local) {
        ADD("cohortrun: rank %d failed first: %s (pid %d, local rank %d, node %d, generation %u)\n",
            f->rank, f->desc, (int)r->pid, f->rank - cfg->node_rank * cfg->nproc, f->node, gen);
        if (r->n_tail > 0) {
            ADD("cohortrun: last %d line(s) of rank %d's stderr:\n", r->n_tail, f->rank);
            for (int i = 0; i < r->n_tail; i++)
                ADD("cohortrun: | %s\n", r->tail[i]);
        } else {
            ADD("cohortrun: rank %d wrote nothing to stderr\n", f->rank);
        }
    } else {
        ADD("cohortrun: rank %d on node %d failed first: %s (generation %u); its stderr is in "
            "node %d's output\n",
            f->rank, f->node, f->desc, gen, f->node);
    }
    if (r->n_termed > 0) {
        ADD("cohortrun: stopped %d other worker(s) on this node with SIGTERM", r->n_termed);
        if (r->n_killed > 0)
            ADD(", %d of them needed SIGKILL after %d ms", r->n_killed, cfg->grace_ms);
        ADD("\n");
    }
    if (restarting)
        ADD("cohortrun: restarting every worker: restart %u of %d, generation %u\n", gen,
            cfg->max_restarts, gen + 1);
    else if (!f->restartable)
        ADD("cohortrun: exiting with code %d\n", r->code);
    else if (job->interrupted)
        ADD("cohortrun: interrupted: not restarting; exiting with code %d\n", r->code);
    else
        ADD("cohortrun: no restart left (--max-restarts %d); exiting with code %d\n",
            cfg->max_restarts, r->code);
#undef ADD
    if (n > sizeof buf)
        n = sizeof buf;
    (void)crun_write_all(2, buf, n);
}

int main(int argc, char **argv)
{
    crun_cfg cfg;
    int rc = crun_parse(&cfg, argc, argv);
    if (rc == -1)
        return 0;
    if (rc)
        return rc;

    crun_job job;
    memset(&job, 0, sizeof job);
    job.cfg = &cfg;
    job.sigfd = job.guard_fd = -1;
    job.guard_pid = -1;
    cohort_store_server *server = NULL;
    char token[TOKEN_FILE_MAX];
    char job_id[64];
    char *prog = NULL;
    rc = CRUN_EXIT_LAUNCHER;

    prog = resolve_program(cfg.argv[0]);
    if (!prog) {
        crun_msg("'%s': command not found", cfg.argv[0]);
        return CRUN_EXIT_NOTFOUND;
    }
    job.prog_path = prog;

    /* Identity: a job whose other parts we do not start ourselves (other
     * nodes, an external store) must be told its id and token; a job on one
     * node gets fresh ones. */
    int shared_identity = cfg.nnodes > 1 || cfg.store_url;
    if (cfg.token_file) {
        if (read_token_file(cfg.token_file, token, sizeof token) < 0)
            goto out;
    } else if (shared_identity) {
        const char *t = getenv("COHORT_TOKEN");
        if (!t || !*t || strlen(t) >= sizeof token) {
            crun_msg("a job on several nodes or on an external store needs its token: "
                     "--token-file FILE (mode 0600) or COHORT_TOKEN in the environment");
            rc = CRUN_EXIT_USAGE;
            goto out;
        }
        snprintf(token, sizeof token, "%s", t);
    } else if (random_hex(token, TOKEN_BYTES) < 0) {
        crun_msg("getrandom: %s", strerror(errno));
        goto out;
    }
    job.token = token;
    if (cfg.job_id) {
        snprintf(job_id, sizeof job_id, "%s", cfg.job_id);
    } else if (shared_identity) {
        const char *j = getenv("COHORT_JOB_ID");
        if (!j || !*j || strlen(j) >= sizeof job_id) {
            crun_msg("a job on several nodes or on an external store needs its id: --job-id ID "
                     "or COHORT_JOB_ID in the environment");
            rc = CRUN_EXIT_USAGE;
            goto out;
        }
        snprintf(job_id, sizeof job_id, "%s", j);
    } else {
        char hex[13];
        if (random_hex(hex, 6) < 0) {
            crun_msg("getrandom: %s", strerror(errno));
            goto out;
        }
        snprintf(job_id, sizeof job_id, "cohortrun-%s", hex);
    }
    job.job_id = job_id;
    job.fixed_torch_port = cfg.nnodes == 1 && cfg.master_port > 0 ? cfg.master_port : 0;

    /* 1. Signals: blocked for every thread to come, read via signalfd. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
        (job.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        crun_msg("signalfd: %s", strerror(errno));
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);

    /* 2. The orphan guard, while single-threaded. */
    job.guard_fd = crun_guard_start(&job.guard_pid);
    if (job.guard_fd < 0)
        goto out;

    /* 3. The store: hosted here unless --store names one or another node
     * hosts it. */
    if (cfg.store_url) {
        snprintf(job.store_url, sizeof job.store_url, "%s", cfg.store_url);
        if (cfg.master_host[0]) {
            snprintf(job.master_addr, sizeof job.master_addr, "%s", cfg.master_host);
            job.master_port = cfg.master_port;
        } else {
            host_of_url(cfg.store_url, job.master_addr, sizeof job.master_addr, &job.master_port);
        }
    } else if (cfg.node_rank == 0) {
        const char *bind = cfg.bind_addr ? cfg.bind_addr : cfg.nnodes > 1 ? "0.0.0.0" : "127.0.0.1";
        const char *ids[1] = {job_id};
        const char *toks[1] = {token};
        cohort_store_server_opts so;
        memset(&so, 0, sizeof so);
        so.bind_addr = bind;
        /* Across nodes the others reach the store at --master's port. On
         * one node --master-port is the workers' MASTER_PORT, which the
         * program binds (torchport.c): the store takes any port. */
        so.port = cfg.nnodes > 1 && cfg.master_port > 0 ? cfg.master_port : 0;
        so.job_ids = ids;
        so.tokens = toks;
        so.n_jobs = 1;
        cohort_status s = cohort_store_server_start(&server, &so);
        if (s != COHORT_OK) {
            server = NULL;
            crun_msg("cannot start the job's store on %s:%d: %s: %s", bind, so.port,
                     cohort_status_name(s), cohort_last_error(NULL));
            goto out;
        }
        job.master_port = cohort_store_server_port(server);
        /* Workers connect to what they were told: --master's host, else the
         * bound address, else loopback (bound to every interface). */
        const char *host = cfg.master_host[0] ? cfg.master_host
                           : strcmp(bind, "0.0.0.0") && strcmp(bind, "::") ? bind
                                                                           : "127.0.0.1";
        snprintf(job.master_addr, sizeof job.master_addr, "%s", host);
    } else {
        snprintf(job.master_addr, sizeof job.master_addr, "%s", cfg.master_host);
        job.master_port = cfg.master_port;
    }
    if (!cfg.store_url) {
        int v6 = strchr(job.master_addr, ':') != NULL;
        snprintf(job.store_url, sizeof job.store_url, "tcp://%s%s%s:%d", v6 ? "[" : "",
                 job.master_addr, v6 ? "]" : "", job.master_port);
    }

    if (cfg.nnodes > 1 && crun_coord_open(&job.coord, &cfg, job.store_url, job_id, token) < 0)
        goto out;

    /* 4. Generations. */
    uint32_t gen = 1;
    crun_result res;
    for (;;) {
        if (cfg.node_rank == 0 && torch_endpoint(&job, gen) < 0) {
            rc = CRUN_EXIT_LAUNCHER;
            break;
        }
        if (job.coord) {
            int j = crun_coord_join(job.coord, gen, job.sigfd);
            if (j > 0) {
                char sn[32];
                crun_note(&cfg, "got %s while waiting for the other nodes", crun_signame(j, sn, sizeof sn));
                rc = 128 + j;
                break;
            }
            if (j < 0) {
                rc = CRUN_EXIT_LAUNCHER;
                break;
            }
        }
        if (job.coord && cfg.node_rank != 0 &&
            crun_coord_get_torch(job.coord, gen, job.torch_addr, sizeof job.torch_addr,
                                 &job.torch_port) < 0) {
            rc = CRUN_EXIT_LAUNCHER;
            break;
        }
        crun_run_generation(&job, gen, &res);
        if (res.kind == CRUN_GEN_OK) {
            rc = 0;
            break;
        }
        if (res.kind == CRUN_GEN_INTERRUPTED) {
            char sn[32];
            crun_note(&cfg, "stopped by %s", crun_signame(res.signo, sn, sizeof sn));
            rc = res.code;
            break;
        }
        if (res.kind == CRUN_GEN_LAUNCH_ERROR) {
            rc = res.code;
            break;
        }
        /* Restart only what may succeed next time: not after an interrupt
         * (the user wants out) nor after an agent's own failure (records
         * with restartable = 0); restart (gen - 1) + 1 of max_restarts. */
        int restart = res.fail.restartable && !job.interrupted && (int)gen <= cfg.max_restarts;
        print_summary(&job, gen, &res, restart);
        rc = res.code;
        if (!restart)
            break;
        gen++;
    }
    /* Every agent acknowledges the end, so that node 0 does not take the
     * store away while another agent still reads the outcome. */
    if (job.coord)
        crun_coord_leave(job.coord, gen);

out:
    crun_coord_close(job.coord);
    if (server)
        cohort_store_server_stop(server);
    /* Closing the pipe tells the guard we are done (it exits on EOF). */
    if (job.guard_fd >= 0)
        close(job.guard_fd);
    if (job.sigfd >= 0)
        close(job.sigfd);
    explicit_bzero(token, sizeof token);
    free(prog);
    free(cfg.py_argv);
    return rc;
}

/* train.c - data-parallel training of a logistic regression in plain C.
 *
 *   cohortrun -n 4 ./train --ckpt-dir /tmp/ckpt [--steps 60]
 *             [--mismatch-at STEP] [--kill-at STEP]
 *
 * Each rank generates its own shard of a synthetic, linearly separable-ish
 * data set (deterministic: fixed seeds), computes the gradient of the
 * logistic loss on a mini-batch, and all-reduces gradient + loss (average
 * over ranks, float64) once per step, so every rank applies the same update.
 * Rank 0 prints the loss every few steps and writes a checkpoint (step +
 * model) every --ckpt-every steps atomically (temp file, fsync, rename). On
 * start, rank 0 loads the last checkpoint, if any, and broadcasts it, so a
 * restarted job resumes where the last checkpoint left it, on every rank.
 *
 * Everything that decides the numbers is a function of (seed, rank, step):
 * batches are picked by step, the reduction order is the library's fixed
 * one, so a run that is killed and resumed ends with the very same final
 * loss as one that was not disturbed.
 *
 * Demonstrations of failure:
 *   --mismatch-at S  the last rank passes a shorter count to all_reduce at
 *                    step S: every rank gets COHORT_ERR_CONTRACT with the
 *                    same precise message, prints it, and exits (code 3).
 *   --kill-at S      rank 1 SIGKILLs itself at step S, but only in the first
 *                    incarnation (COHORT_RESTART_COUNT=0): under
 *                    `cohortrun --max-restarts 1` the job restarts under the
 *                    next generation and resumes from the last checkpoint.
 *
 * SIGTERM (what cohortrun sends the survivors of a failure) only sets a
 * flag: a rank finishes what it is doing - typically receiving the group's
 * error and printing it - and leaves at the next step boundary.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort.h"

#define EXIT_COLLECTIVE 3 /* a collective failed (contract, peer lost, ...) */
#define EXIT_STOPPED 143  /* left on SIGTERM */

typedef struct opts {
    int steps, dim, samples, batch, print_every, ckpt_every;
    double lr;
    uint64_t seed;
    const char *ckpt_dir;
    int mismatch_at, kill_at;
} opts;

static volatile sig_atomic_t stop_requested;
static void on_term(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- deterministic data ---------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static double unif(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1.0p-52 - 1.0; }

typedef struct shard {
    int n, dim;
    double *x; /* n x dim */
    double *y; /* n, 0 or 1 */
} shard;

/* The true model depends on the seed only; the samples on seed and rank. */
static int make_shard(const opts *o, int rank, shard *sh)
{
    sh->n = o->samples;
    sh->dim = o->dim;
    sh->x = malloc((size_t)sh->n * (size_t)sh->dim * sizeof(double));
    sh->y = malloc((size_t)sh->n * sizeof(double));
    double *wt = malloc((size_t)o->dim * sizeof(double));
    if (!sh->x || !sh->y || !wt) {
        free(wt);
        return -1;
    }
    uint64_t s = o->seed;
    for (int j = 0; j < o->dim; j++)
        wt[j] = 3.0 * unif(&s);
    s = o->seed * 1000003u + (uint64_t)rank + 1;
    for (int i = 0; i < sh->n; i++) {
        double z = 0.25; /* the true bias */
        for (int j = 0; j < o->dim; j++) {
            double v = unif(&s);
            sh->x[(size_t)i * (size_t)o->dim + (size_t)j] = v;
            z += wt[j] * v;
        }
        /* Label noise: flip with probability 1/(1+e^{2|z|}) via the logistic. */
        double p = 1.0 / (1.0 + exp(-2.0 * z));
        sh->y[i] = (unif(&s) + 1.0) * 0.5 < p ? 1.0 : 0.0;
    }
    free(wt);
    return 0;
}

/* Gradient of the mean logistic loss over rows [first, first+count) (wrapping)
 * into g[0..dim] (weights, bias) and the loss into g[dim+1]. */
static void gradient(const shard *sh, const double *w, int first, int count, double *g)
{
    int d = sh->dim;
    memset(g, 0, (size_t)(d + 2) * sizeof(double));
    for (int k = 0; k < count; k++) {
        int i = (first + k) % sh->n;
        const double *x = sh->x + (size_t)i * (size_t)d;
        double z = w[d];
        for (int j = 0; j < d; j++)
            z += w[j] * x[j];
        double p = 1.0 / (1.0 + exp(-z));
        double e = p - sh->y[i];
        for (int j = 0; j < d; j++)
            g[j] += e * x[j];
        g[d] += e;
        /* log(1+e^z) - y z, computed stably */
        g[d + 1] += (z > 0 ? z + log1p(exp(-z)) : log1p(exp(z))) - sh->y[i] * z;
    }
    for (int j = 0; j < d + 2; j++)
        g[j] /= count;
}

/* ---- checkpoints ----------------------------------------------------------- */

typedef struct ckpt_hdr {
    char magic[8]; /* "COHCKPT1" */
    uint32_t dim;
    uint32_t pad;
    uint64_t step; /* steps completed */
} ckpt_hdr;

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Writes <dir>/model.ckpt atomically: readers see the old or the new file,
 * never a torn one (temp file in the same directory, fsync, rename). */
static int save_ckpt(const char *dir, int dim, uint64_t step, const double *w)
{
    char tmp[4096], path[4096];
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    snprintf(tmp, sizeof tmp, "%s/.model.ckpt.tmp.%d", dir, (int)getpid());
    ckpt_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "COHCKPT1", 8);
    h.dim = (uint32_t)dim;
    h.step = step;
    size_t wl = (size_t)(dim + 1) * sizeof(double);
    uint64_t sum = fnv1a(w, wl, fnv1a(&h, sizeof h, 1469598103934665603ull));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        goto fail;
    if (write(fd, &h, sizeof h) != (ssize_t)sizeof h || write(fd, w, wl) != (ssize_t)wl ||
        write(fd, &sum, sizeof sum) != (ssize_t)sizeof sum || fsync(fd) < 0) {
        close(fd);
        unlink(tmp);
        goto fail;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        unlink(tmp);
        goto fail;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* the rename itself is durable */
        close(dfd);
    }
    return 0;
fail:
    fprintf(stderr, "train: cannot write checkpoint %s: %s\n", path, strerror(errno));
    return -1;
}

/* 1: loaded; 0: no checkpoint; -1: present but unusable (message printed). */
static int load_ckpt(const char *dir, int dim, uint64_t *step, double *w)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "train: cannot open checkpoint %s: %s\n", path, strerror(errno));
        return -1;
    }
    ckpt_hdr h;
    size_t wl = (size_t)(dim + 1) * sizeof(double);
    uint64_t sum = 0;
    int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h && !memcmp(h.magic, "COHCKPT1", 8) &&
             h.dim == (uint32_t)dim && read(fd, w, wl) == (ssize_t)wl &&
             read(fd, &sum, sizeof sum) == (ssize_t)sizeof sum &&
             sum == fnv1a(w, wl, fnv1a(&h, sizeof h, 1469598103934665603ull));
    close(fd);
    if (!ok) {
        fprintf(stderr, "train: checkpoint %s is not a valid %d-feature checkpoint\n", path, dim);
        return -1;
    }
    *step = h.step;
    return 1;
}

/* ---- main ---------------------------------------------------------------- */

static int fail_collective(cohort_group *g, int step, const char *what, cohort_status st)
{
    fprintf(stderr, "rank %d: step %d: %s failed: %s: %s\n", cohort_rank(g), step, what,
            cohort_status_name(st), cohort_last_error(g));
    cohort_finalize(g);
    return EXIT_COLLECTIVE;
}

static int parse(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"steps", required_argument, NULL, 's'},
        {"dim", required_argument, NULL, 'd'},
        {"samples", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'},
        {"lr", required_argument, NULL, 'l'},
        {"seed", required_argument, NULL, 'S'},
        {"print-every", required_argument, NULL, 'p'},
        {"ckpt-every", required_argument, NULL, 'c'},
        {"ckpt-dir", required_argument, NULL, 'C'},
        {"mismatch-at", required_argument, NULL, 'M'},
        {"kill-at", required_argument, NULL, 'K'},
        {NULL, 0, NULL, 0},
    };
    *o = (opts){.steps = 60, .dim = 16, .samples = 2048, .batch = 256, .print_every = 10,
                .ckpt_every = 10, .lr = 0.5, .seed = 42, .mismatch_at = -1, .kill_at = -1};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == '?')
            return -1;
        char *end = NULL;
        double v = strtod(optarg, &end);
        if (c != 'C' && (end == optarg || *end)) {
            fprintf(stderr, "train: %s: '%s' is not a number\n", argv[optind - 1], optarg);
            return -1;
        }
        switch (c) {
        case 's': o->steps = (int)v; break;
        case 'd': o->dim = (int)v; break;
        case 'n': o->samples = (int)v; break;
        case 'b': o->batch = (int)v; break;
        case 'l': o->lr = v; break;
        case 'S': o->seed = (uint64_t)v; break;
        case 'p': o->print_every = (int)v; break;
        case 'c': o->ckpt_every = (int)v; break;
        case 'C': o->ckpt_dir = optarg; break;
        case 'M': o->mismatch_at = (int)v; break;
        case 'K': o->kill_at = (int)v; break;
        default: return -1;
        }
    }
    if (o->steps < 0 || o->dim < 1 || o->dim > 4096 || o->samples < 1 || o->batch < 1 ||
        o->print_every < 1 || o->ckpt_every < 1 || optind != argc) {
        fprintf(stderr, "usage: train [--steps N] [--dim D] [--samples N] [--batch B] [--lr X] "
                        "[--seed S] [--print-every K] [--ckpt-every K] [--ckpt-dir DIR] "
                        "[--mismatch-at STEP] [--kill-at STEP]\n");
        return -1;
    }
    return 0;
}

/* Buffers owned by main, freed at exit whatever the path out. */
static void *owned[4];
static void free_buffers_hook(void)
{
    for (int i = 0; i < 4; i++)
        free(owned[i]);
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o) < 0)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);

    cohort_group *g = NULL;
    if (cohort_init(&g) != COHORT_OK) {
        fprintf(stderr, "train: cohort_init: %s\n", cohort_last_error(NULL));
        return EXIT_COLLECTIVE;
    }
    int rank = cohort_rank(g), size = cohort_size(g);
    const char *rc_env = getenv("COHORT_RESTART_COUNT");
    int restart_count = rc_env ? atoi(rc_env) : 0;

    static shard sh;
    int d = o.dim;
    double *w = calloc((size_t)d + 2, sizeof(double)); /* weights, bias, [step slot] */
    double *gbuf = malloc(((size_t)d + 2) * sizeof(double));
    /* Every exit path (errors included) releases the buffers. */
    owned[0] = w;
    owned[1] = gbuf;
    atexit(free_buffers_hook);
    int shard_rc = make_shard(&o, rank, &sh);
    owned[2] = sh.x;
    owned[3] = sh.y;
    if (shard_rc < 0 || !w || !gbuf) {
        fprintf(stderr, "train: rank %d: out of memory\n", rank);
        cohort_abort(g, "out of memory building the data shard");
        cohort_finalize(g);
        return 1;
    }

    /* Resume: rank 0 reads the checkpoint and broadcasts (step, model). */
    uint64_t step0 = 0;
    if (rank == 0 && o.ckpt_dir) {
        mkdir(o.ckpt_dir, 0755);
        int r = load_ckpt(o.ckpt_dir, d, &step0, w);
        if (r < 0) {
            cohort_abort(g, "rank 0 found an unusable checkpoint");
            cohort_finalize(g);
            return 1;
        }
        printf("train: generation %u, %d ranks: %s\n", cohort_generation(g), size,
               r ? "resuming from the checkpoint" : "starting from scratch");
        if (r)
            printf("train: checkpoint at step %llu\n", (unsigned long long)step0);
    }
    w[d + 1] = (double)step0; /* exact for any realistic step count */
    cohort_status st = cohort_broadcast(g, w, (size_t)d + 2, COHORT_FLOAT64, 0);
    if (st != COHORT_OK)
        return fail_collective(g, 0, "broadcast of the checkpoint", st);
    int first = (int)w[d + 1];

    for (int step = first; step < o.steps; step++) {
        if (stop_requested) {
            fprintf(stderr, "rank %d: SIGTERM: leaving at step %d\n", rank, step);
            cohort_finalize(g);
            return EXIT_STOPPED;
        }
        if (step == o.kill_at && rank == 1 % size && restart_count == 0) {
            fprintf(stderr, "rank %d: --kill-at %d: killing myself (SIGKILL)\n", rank, step);
            raise(SIGKILL);
        }
        gradient(&sh, w, (int)(((int64_t)step * o.batch) % sh.n), o.batch, gbuf);
        size_t count = (size_t)d + 2;
        if (step == o.mismatch_at && rank == size - 1) {
            fprintf(stderr, "rank %d: --mismatch-at %d: passing count %zu instead of %zu\n", rank,
                    step, count - 1, count);
            count--; /* the bug being demonstrated */
        }
        st = cohort_all_reduce(g, gbuf, gbuf, count, COHORT_FLOAT64, COHORT_AVG);
        if (st != COHORT_OK)
            return fail_collective(g, step, "all_reduce of the gradients", st);
        for (int j = 0; j <= d; j++)
            w[j] -= o.lr * gbuf[j];
        if (rank == 0 && (step % o.print_every == 0 || step == o.steps - 1))
            printf("step %4d  loss %.6f\n", step, gbuf[d + 1]);
        if (rank == 0 && o.ckpt_dir && (step + 1) % o.ckpt_every == 0 &&
            save_ckpt(o.ckpt_dir, d, (uint64_t)step + 1, w) < 0) {
            cohort_abort(g, "rank 0 could not write a checkpoint");
            cohort_finalize(g);
            return 1;
        }
    }

    /* Final loss over every rank's whole shard. */
    double loss[1];
    double *full = malloc(((size_t)d + 2) * sizeof(double));
    if (!full) {
        cohort_abort(g, "out of memory");
        cohort_finalize(g);
        return 1;
    }
    gradient(&sh, w, 0, sh.n, full);
    loss[0] = full[d + 1];
    free(full);
    st = cohort_all_reduce(g, loss, loss, 1, COHORT_FLOAT64, COHORT_AVG);
    if (st != COHORT_OK)
        return fail_collective(g, o.steps, "all_reduce of the final loss", st);
    if (rank == 0)
        printf("final loss %.17g after %d steps (generation %u)\n", loss[0], o.steps,
               cohort_generation(g));
    /* Collective: it also returns what only a receiver saw (e.g. this rank's
     * last call was the sending half of a mismatched one). */
    st = cohort_finalize(g);
    if (st != COHORT_OK) {
        fprintf(stderr, "rank %d: cohort_finalize: %s: %s\n", rank, cohort_status_name(st),
                cohort_last_error(NULL));
        return 1;
    }
    return 0;
}

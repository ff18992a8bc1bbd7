/* cohort-soak - a soak worker: mixed collectives with checked results, and
 * injected faults, run under `cohortrun --max-restarts` by scripts/soak.sh.
 *
 * Each generation runs until the deadline or until its injected fault; a
 * state file (written by rank 0 after every checked batch) carries the
 * iteration count and statistics across restarts. Faults, one per
 * generation, chosen by the restart count: a rank SIGKILLs itself
 * mid-collective (small or large message), a rank exits, a rank aborts the
 * group with a contract mismatch. Every surviving rank must see the
 * documented error (checked here) before the launcher restarts the job.
 *
 * Usage: cohort-soak --state FILE --until UNIX_TIME [--fault-every K] [--log FILE]
 * (an absolute end, so restarts do not extend the run). */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cohort.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

typedef struct {
    long iters, faults, restarts, rss_start_kb, rss_end_kb, errors_seen;
    double t_start;
} soak_state;

static void load(const char *path, soak_state *s)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fscanf(f, "%ld %ld %ld %ld %ld %ld", &s->iters, &s->faults, &s->restarts,
               &s->rss_start_kb, &s->rss_end_kb, &s->errors_seen) != 6)
        memset(s, 0, sizeof *s);
    fclose(f);
}

static void save(const char *path, const soak_state *s)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%ld %ld %ld %ld %ld %ld\n", s->iters, s->faults, s->restarts, s->rss_start_kb,
            s->rss_end_kb, s->errors_seen);
    fclose(f);
    rename(tmp, path);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "soak: WRONG RESULT: " __VA_ARGS__);                                   \
            fputc('\n', stderr);                                                                   \
            exit(3);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    const char *state = NULL, *logpath = NULL;
    double until = 0;
    long fault_every = 2000;
    static const char usage_text[] =
        "usage: cohort-soak --state FILE --until UNIX_TIME [--fault-every K] [--log FILE]\n"
        "A soak worker run under cohortrun --max-restarts by scripts/soak.sh\n"
        "(docs/reliability.md): mixed checked collectives and one injected fault per\n"
        "generation until UNIX_TIME.\n"
        "  --state FILE       iteration count and statistics kept across restarts\n"
        "  --until UNIX_TIME  absolute end (restarts do not extend the run)\n"
        "  --fault-every K    iterations between injected faults (default 2000)\n"
        "  --log FILE         append one line per generation's outcome\n"
        "  -h, --help, -V, --version\n"
        "Exit status: 0 done, 1 a setup step failed, 2 usage, 3 a wrong result, 4 or 10\n"
        "the generation ended by its fault (cohortrun restarts the job).\n";
    static const struct option lo[] = {
        {"state", required_argument, 0, 's'},
        {"until", required_argument, 0, 'u'},
        {"log", required_argument, 0, 'l'},
        {"fault-every", required_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", lo, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 's':
            state = optarg;
            break;
        case 'u':
            until = strtod(optarg, &end);
            if (end == optarg || *end || until <= 0) {
                fprintf(stderr, "cohort-soak: --until '%s' is not a UNIX time\n", optarg);
                return 2;
            }
            break;
        case 'l':
            logpath = optarg;
            break;
        case 'f':
            fault_every = strtol(optarg, &end, 10);
            if (end == optarg || *end || fault_every < 1) {
                fprintf(stderr, "cohort-soak: --fault-every '%s' is not a count > 0\n", optarg);
                return 2;
            }
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        case 'V':
            cli_version("cohort-soak");
            return 0;
        default:
            return cli_opt_error("cohort-soak", c, argv, lo);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cohort-soak: unexpected argument '%s'\nTry 'cohort-soak --help'.\n",
                argv[optind]);
        return 2;
    }
    if (!state) {
        fprintf(stderr, "cohort-soak: --state FILE is required\n");
        return 2;
    }
    /* cohortrun SIGTERMs the other workers when the victim dies; a soak
     * worker keeps going until its own call reports the fault (bounded by
     * the peer-loss bound), logs it, and exits - the launcher's SIGKILL
     * after its grace period still ends a stuck one. */
    signal(SIGTERM, SIG_IGN);
    cohort_group *g;
    if (cohort_init(&g) != COHORT_OK) {
        fprintf(stderr, "soak: init: %s\n", cohort_last_error(NULL));
        return 1;
    }
    int rank = cohort_rank(g), n = cohort_size(g);
    long restart = getenv("COHORT_RESTART_COUNT") ? atol(getenv("COHORT_RESTART_COUNT")) : 0;
    soak_state s;
    load(state, &s);
    if (restart == 0 && rank == 0) {
        memset(&s, 0, sizeof s);
        s.rss_start_kb = -1;
    }
    s.restarts = restart;
    /* Every rank agrees on where the run is (rank 0's state). */
    int64_t base = s.iters;
    if (cohort_broadcast(g, &base, 1, COHORT_INT64, 0) != COHORT_OK) {
        fprintf(stderr, "soak: %s\n", cohort_last_error(g));
        return 1;
    }
    double t_end = now_s() + (until - (double)time(NULL));
    int fault_kind = (int)(restart % 4);
    long fault_at = base + fault_every; /* one fault per generation */
    if (fault_kind == 3 && fault_at % 50 == 0)
        fault_at++; /* the mismatch is injected on a small call, not the 4 MiB one */
    int victim = 1 + (int)(restart % (n - 1));
    enum { BIG = 1 << 20 };
    float *big = malloc(sizeof(float) * BIG), *bigo = malloc(sizeof(float) * BIG);
    int32_t *ib = malloc(sizeof(int32_t) * 4096 * n), *io = malloc(sizeof(int32_t) * 4096 * n);
    if (!big || !bigo || !ib || !io)
        return 1;
    long it = base;
    cohort_status st = COHORT_OK;
    long rss_warm = -1;
    for (;; it++) {
        /* Ranks must agree on the last iteration: rank 0 decides and
         * broadcasts it (otherwise the ones that stop first look dead). */
        if (it % 64 == 0) {
            int32_t stop = rank == 0 && now_s() >= t_end;
            st = cohort_broadcast(g, &stop, 1, COHORT_INT32, 0);
            if (st != COHORT_OK || stop)
                break;
        }
        if (it == base + 2500 && rss_warm < 0)
            rss_warm = rss_kb(); /* after warm-up: buffers, segments and the
                                  * 2048-entry flight recorder are all touched */
        if (it == fault_at && rank == victim) {
            if (fault_kind == 0)
                raise(SIGKILL);            /* killed mid-job, small messages in flight */
            if (fault_kind == 1)
                _exit(7);                  /* exits without finalize */
        }
        int large = it % 50 == 0;
        size_t c = large ? BIG : (size_t)(1 + it % 4000);
        if (it == fault_at && fault_kind == 2 && rank == victim)
            raise(SIGKILL);                /* killed during a large all_reduce */
        for (size_t i = 0; i < c && !large; i++)
            ib[i] = (int32_t)(rank + i + it);
        if (large) {
            for (size_t i = 0; i < c; i += 4096)
                big[i] = (float)rank;
            st = cohort_all_reduce(g, big, bigo, c, COHORT_FLOAT32, COHORT_SUM);
            if (st == COHORT_OK)
                CHECK(bigo[0] == (float)(n * (n - 1) / 2), "large all_reduce it=%ld", it);
        } else {
            size_t cc = (it == fault_at && fault_kind == 3 && rank == victim) ? c + 1 : c;
            switch (it % 4) {
            case 0:
                st = cohort_all_reduce(g, ib, io, cc, COHORT_INT32, COHORT_SUM);
                if (st == COHORT_OK)
                    for (size_t i = 0; i < c; i++)
                        CHECK(io[i] == (int32_t)(n * (n - 1) / 2 + n * (i + it)), "all_reduce");
                break;
            case 1:
                st = cohort_all_gather(g, ib, io, cc, COHORT_INT32);
                if (st == COHORT_OK)
                    for (int r = 0; r < n; r++)
                        CHECK(io[r * c] == (int32_t)(r + it), "all_gather");
                break;
            case 2:
                st = cohort_broadcast(g, ib, cc, COHORT_INT32, (int)(it % n));
                if (st == COHORT_OK)
                    CHECK(ib[0] == (int32_t)(it % n + it), "broadcast");
                break;
            default:
                st = cohort_barrier(g);
                if (st == COHORT_OK && cc != c)
                    st = cohort_all_reduce(g, ib, io, cc, COHORT_INT32, COHORT_SUM);
                break;
            }
        }
        if (st != COHORT_OK)
            break;
        if (rank == 0 && it % 64 == 0) {
            s.iters = it + 1;
            s.rss_end_kb = rss_kb();
            save(state, &s);
        }
    }
    long rss_end = rss_kb();
    if (logpath) {
        /* One line per rank per generation: what it saw, and its memory. */
        FILE *lf = fopen(logpath, "a");
        if (lf) {
            fprintf(lf, "gen %ld rank %d iters %ld status %s rss_warm_kb %ld rss_end_kb %ld %s\n",
                    restart + 1, rank, it - base, cohort_status_name(st), rss_warm, rss_end,
                    st == COHORT_OK ? "ok"
                    : ((fault_kind <= 2 && (st == COHORT_ERR_PEER_LOST || st == COHORT_ERR_ABORTED)) ||
                       (fault_kind == 3 && st == COHORT_ERR_CONTRACT))
                        ? "expected"
                        : "UNEXPECTED");
            fclose(lf);
        }
    }
    if (st != COHORT_OK) {
        /* The documented outcome of each injected fault. */
        int ok = (fault_kind <= 2 && (st == COHORT_ERR_PEER_LOST || st == COHORT_ERR_ABORTED)) ||
                 (fault_kind == 3 && st == COHORT_ERR_CONTRACT);
        fprintf(stderr, "soak: generation %ld fault %d at iteration %ld: %s: %s%s\n", restart + 1,
                fault_kind, it, cohort_status_name(st), cohort_last_error(g),
                ok ? "" : " (UNEXPECTED)");
        if (rank == 0) {
            s.iters = it;
            s.faults++;
            s.errors_seen++;
            s.rss_end_kb = rss_kb();
            if (s.rss_start_kb < 0 && rss_warm > 0)
                s.rss_start_kb = rss_warm;
            save(state, &s);
        }
        cohort_finalize(g);
        return ok ? 10 : 4; /* non-zero: the launcher restarts the job */
    }
    if (rank == 0) {
        s.iters = it;
        s.rss_end_kb = rss_kb();
        if (s.rss_start_kb < 0 && rss_warm > 0)
            s.rss_start_kb = rss_warm;
        save(state, &s);
        printf("soak: done: %ld iterations, %ld faults survived, %ld restarts, RSS %ld kB -> %ld "
               "kB\n",
               s.iters, s.faults, s.restarts, s.rss_start_kb, s.rss_end_kb);
    }
    cohort_finalize(g);
    free(big);
    free(bigo);
    free(ib);
    free(io);
    return 0;
}

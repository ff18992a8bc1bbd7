/* mpi_prog.c - the cohort program run_mpi_netns.sh starts with Open MPI's
 * mpirun and MPICH's mpiexec across two "nodes" (network namespaces), with
 * nothing exported by hand: rank 0's host and the job's secret come from the
 * launcher's PMI (src/group/pmi.c).
 *
 *   mpi_prog ok   init; every rank scans every process's command line and
 *                 environment (/proc) for the job's token - it must be in
 *                 none; all_reduce with exact sums; barrier; finalize.
 *                 Prints "rank R of N on HOST: sum ok, token in no cmdline
 *                 or environment (P processes)".
 *   mpi_prog exported   the same without the scan (the token was exported)
 *
 * Built once more per MPI implementation with COHORT_TEST_WITH_MPI: an MPI
 * program (MPI_Init before cohort_init, MPI_Finalize at the end), where
 * cohort leaves the launcher's PMI to MPI.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort.h"
#include "core/group.h"
#include "support/support.h"
#ifdef COHORT_TEST_WITH_MPI
#include <mpi.h>
#endif

/* 1 if needle occurs in the file (read whole, up to 1 MiB). */
static int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

/* Processes whose command line or environment holds the token (-1: none
 * scanned). */
static int scan(const char *token, int *scanned, char *where, size_t wlen)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int hits = 0;
    *scanned = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char p[300];
        const char *files[] = {"cmdline", "environ"};
        for (int i = 0; i < 2; i++) {
            snprintf(p, sizeof p, "/proc/%s/%s", e->d_name, files[i]);
            if (file_has(p, token)) {
                hits++;
                snprintf(where, wlen, "%s", p);
            }
        }
        (*scanned)++;
    }
    closedir(d);
    return hits;
}

int main(int argc, char **argv)
{
    int exported = argc > 1 && !strcmp(argv[1], "exported");
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef COHORT_TEST_WITH_MPI
    MPI_Init(&argc, &argv);
#define DONE(rc) (MPI_Finalize(), (rc))
#else
#define DONE(rc) (rc)
#endif
    cohort_group *g = cht_launched_init();
    if (!g)
        return DONE(2);
    int r = cohort_rank(g), n = cohort_size(g);
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    int scanned = 0;
    char where[300] = "";
    int hits = exported ? 0
               : g->token && strlen(g->token) >= 16 ? scan(g->token, &scanned, where, sizeof where)
                                                    : -1;
    int sum_ok = cht_launched_sum_run(g);
    int ok = sum_ok && hits == 0;
    printf("rank %d of %d on %s: %s, token in %s (%d processes scanned)\n", r, n, host,
           sum_ok ? "sum ok" : "FAILED", hits == 0 ? "no cmdline or environment" : where, scanned);
    return DONE(ok ? 0 : 1);
}

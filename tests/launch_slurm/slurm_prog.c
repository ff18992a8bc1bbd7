/* slurm_prog.c - the cohort program the Slurm test runs with srun and
 * sbatch (run_slurm.sh). No MASTER_ADDR, no COHORT_TOKEN: everything comes
 * from the job.
 *
 *   slurm_prog ok         init, all_reduce of the ranks, barrier, finalize
 *   slurm_prog mismatch   rank 1 passes another count: every rank must get
 *                         COHORT_ERR_CONTRACT (exit 3)
 *   slurm_prog kill       rank 2 SIGKILLs itself mid-loop: the others must
 *                         get COHORT_ERR_PEER_LOST naming rank 2 (exit 4)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort.h"
#include "support/support.h"

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    setvbuf(stdout, NULL, _IOLBF, 0);
    cohort_group *g = cht_launched_init();
    if (!g)
        return 2;
    int r = cohort_rank(g), n = cohort_size(g);
    cohort_status st;
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    if (!strcmp(mode, "ok")) {
        int ok = cht_launched_sum_run(g);
        printf("rank %d of %d on %s node %s: %s\n", r, n, host,
               getenv("SLURMD_NODENAME") ? getenv("SLURMD_NODENAME") : "-", ok ? "sum ok" : "FAILED");
        return ok ? 0 : 1;
    }
    if (!strcmp(mode, "mismatch")) {
        float buf[64] = {0};
        size_t count = r == 1 ? 32 : 64;
        st = cohort_all_reduce(g, buf, buf, count, COHORT_FLOAT32, COHORT_SUM);
        printf("rank %d: %s: %s\n", r, cohort_status_name(st),
               st == COHORT_OK ? "" : cohort_last_error(g));
        cohort_finalize(g);
        return st == COHORT_ERR_CONTRACT ? 3 : 1;
    }
    if (!strcmp(mode, "kill")) {
        for (int it = 0; it < 100000; it++) {
            if (r == 2 && it == 50)
                kill(getpid(), SIGKILL);
            int v = 1, s = 0;
            st = cohort_all_reduce(g, &v, &s, 1, COHORT_INT32, COHORT_SUM);
            if (st != COHORT_OK)
                break;
        }
        printf("rank %d: %s: %s\n", r, cohort_status_name(st),
               st == COHORT_OK ? "" : cohort_last_error(g));
        cohort_finalize(g);
        return st == COHORT_ERR_PEER_LOST ? 4 : 1;
    }
    fprintf(stderr, "usage: slurm_prog ok|mismatch|kill\n");
    return 2;
}

/*
 * mpi_mem.c - memory of an MPI library per rank, measured the way
 * cohort-perf measures cohort (bench/compare/run.sh builds it with mpicc at
 * run time; it is not part of the cohort build).
 *
 *   mpirun -n N ./mpi_mem MAXBYTES ITERS
 *
 * VmRSS before MPI_Init, after MPI_Init + one 4-byte allreduce, and after an
 * allreduce sweep 8 B .. MAXBYTES (x4) out of place on float32 with buffers
 * of the same size as cohort-perf's; VmHWM, RssShmem, and Size/Rss/Pss of
 * the writable MAP_SHARED mappings (the shared-memory segments, whatever
 * their names). One JSON line per rank on rank 0's stdout, in KiB.
 */
#include <ctype.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t field(const char *line, const char *name)
{
    size_t l = strlen(name);
    return strncmp(line, name, l) ? UINT64_MAX : strtoull(line + l, NULL, 10);
}

static void status(uint64_t *rss, uint64_t *hwm, uint64_t *shmem)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    *rss = *hwm = *shmem = 0;
    while (f && fgets(line, sizeof line, f)) {
        uint64_t v;
        if ((v = field(line, "VmRSS:")) != UINT64_MAX)
            *rss = v;
        else if ((v = field(line, "VmHWM:")) != UINT64_MAX)
            *hwm = v;
        else if ((v = field(line, "RssShmem:")) != UINT64_MAX)
            *shmem = v;
    }
    if (f)
        fclose(f);
}

static void segments(uint64_t *size, uint64_t *rss, uint64_t *pss)
{
    char line[512];
    int shared = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    *size = *rss = *pss = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (isxdigit((unsigned char)line[0]) && !isupper((unsigned char)line[0])) {
            char perms[8] = "";
            shared = sscanf(line, "%*s %7s", perms) == 1 && perms[1] == 'w' && perms[3] == 's';
            continue;
        }
        uint64_t v;
        if (!shared)
            continue;
        if ((v = field(line, "Size:")) != UINT64_MAX)
            *size += v;
        else if ((v = field(line, "Rss:")) != UINT64_MAX)
            *rss += v;
        else if ((v = field(line, "Pss:")) != UINT64_MAX)
            *pss += v;
    }
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    uint64_t m[8], hwm, shm;
    status(&m[0], &hwm, &shm);
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 0) : (64u << 20);
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    float one = 1, sum;
    MPI_Allreduce(&one, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    status(&m[1], &hwm, &shm);
    size_t bytes = (maxb + 4095) / 4096 * 4096;
    float *s = aligned_alloc(4096, bytes), *r = aligned_alloc(4096, bytes);
    memset(s, 0, bytes);
    memset(r, 0, bytes);
    for (size_t b = 8; b <= maxb; b = b == 8 ? 16 : b * 4)
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(s, r, (int)(b / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    status(&m[2], &m[3], &m[4]);
    segments(&m[5], &m[6], &m[7]);
    uint64_t *all = malloc(sizeof m * (size_t)n);
    MPI_Gather(m, 8, MPI_UINT64_T, all, 8, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int q = 0; q < n; q++) {
            uint64_t *x = all + 8 * q;
            printf("{\"rank\": %d, \"rss_start\": %llu, \"rss_init\": %llu, \"rss_end\": %llu, "
                   "\"hwm\": %llu, \"rss_shmem\": %llu, \"shared_size\": %llu, "
                   "\"shared_rss\": %llu, \"shared_pss\": %llu}\n",
                   q, (unsigned long long)x[0], (unsigned long long)x[1],
                   (unsigned long long)x[2], (unsigned long long)x[3], (unsigned long long)x[4],
                   (unsigned long long)x[5], (unsigned long long)x[6], (unsigned long long)x[7]);
        }
    free(all);
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}

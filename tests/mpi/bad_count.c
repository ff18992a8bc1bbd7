/* bad_count.c - rank 3 passes 512 elements to an MPI_Allreduce where the
 * others pass 1024 (the lesson's count invariant). Expected under
 * libcohort-mpi: every rank prints "MPI_Allreduce #3 (bad_count.c:...): count
 * differs: ranks 0-2 have 1024, rank 3 has 512", exit 71. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static float a[1024], b[1024];
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(a, b, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(a, b, rank == 3 ? 512 : 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

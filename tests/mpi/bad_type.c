/* bad_type.c - rank 3 reduces MPI_INT where the others reduce MPI_FLOAT:
 * the same bytes, another type signature. A correct use of a contiguous
 * type of two floats against 2 x MPI_FLOAT comes first and must pass. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static float a[1024], b[1024];
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_FLOAT, &pair);
    MPI_Type_commit(&pair);
    /* equal signatures: 512 x {2 x float} on even ranks, 1024 x float on odd */
    if (rank % 2)
        MPI_Bcast(a, 1024, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else
        MPI_Bcast(a, 512, pair, 0, MPI_COMM_WORLD);
    MPI_Allreduce(a, b, 1024, rank == 3 ? MPI_INT : MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Type_free(&pair);
    MPI_Finalize();
    return 0;
}

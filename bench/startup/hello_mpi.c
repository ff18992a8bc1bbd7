/* hello_mpi.c - the MPI side of the start-up benchmark: init, one barrier,
 * finalize. Built by run.sh with mpicc.openmpi and mpicc.mpich. */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

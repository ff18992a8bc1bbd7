/* good_errh.c - error handlers under the layer behave as MPI says (the
 * layer keeps its own handler where the program has the default, to
 * explain a backend error by a mismatch first): get returns what was set
 * (a counted reference the program may free), a new communicator inherits
 * its parent's, and with MPI_ERRORS_RETURN an erroneous call returns its
 * error instead of ending the job. Prints "errhandlers ok". */
#include <mpi.h>
#include <stdio.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "good_errh.c:%d: %s\n", __LINE__, #c);                                 \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Errhandler e;
    CHECK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &e) == MPI_SUCCESS);
    CHECK(e == MPI_ERRORS_ARE_FATAL);
    CHECK(MPI_Errhandler_free(&e) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &e) == MPI_SUCCESS);
    CHECK(e == MPI_ERRORS_RETURN);
    CHECK(MPI_Errhandler_free(&e) == MPI_SUCCESS);
    MPI_Comm dup;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_errhandler(dup, &e) == MPI_SUCCESS);
    CHECK(e == MPI_ERRORS_RETURN); /* inherited */
    CHECK(MPI_Errhandler_free(&e) == MPI_SUCCESS);
    int x = 0;
    CHECK(MPI_Bcast(&x, 1, MPI_INT, 12345, dup) != MPI_SUCCESS); /* invalid root: returned */
    CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_ARE_FATAL) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_errhandler(dup, &e) == MPI_SUCCESS);
    CHECK(e == MPI_ERRORS_ARE_FATAL);
    CHECK(MPI_Errhandler_free(&e) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRHANDLER_NULL) != MPI_SUCCESS);
    MPI_Comm_free(&dup);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("errhandlers ok\n");
    MPI_Finalize();
    return 0;
}

/* good_all.c - a correct program using every checked collective, blocking
 * and nonblocking, on MPI_COMM_WORLD and on communicators from split, dup,
 * create and a Cartesian topology, with types whose signatures match
 * although the datatypes differ (2 x MPI_INT vs contiguous(2, MPI_INT),
 * a vector against its elements; a freed handle reused for another
 * type), MPI_IN_PLACE, zero counts, v-variants
 * with per-rank counts, and point-to-point exchanges. Under libcohort-mpi
 * it must never be flagged, and it prints a checksum of every result that
 * must equal the bare run's. Any number of ranks >= 2. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double sum;

static void acc(const int *v, int n)
{
    for (int i = 0; i < n; i++)
        sum += v[i] * (1.0 + i % 7);
}

static void round_on(MPI_Comm comm, int iter)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int n = 64;
    int *a = malloc(sizeof(int) * (size_t)n * size), *b = malloc(sizeof(int) * (size_t)n * size);
    int *cnt = malloc(sizeof(int) * size), *dsp = malloc(sizeof(int) * size);
    for (int i = 0; i < n * size; i++)
        a[i] = rank * 1000 + i + iter;
    MPI_Datatype two;
    MPI_Type_contiguous(2, MPI_INT, &two);
    MPI_Type_commit(&two);
    MPI_Datatype vec; /* 4 blocks of 2 ints, stride 3: 8 ints of signature */
    MPI_Type_vector(4, 2, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);

    MPI_Barrier(comm);
    /* same signature, different datatypes: 32 x {2 x int} vs 64 x int */
    if (rank % 2)
        MPI_Bcast(a, 32, two, 0, comm);
    else
        MPI_Bcast(a, 64, MPI_INT, 0, comm);
    acc(a, 64);
    MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, comm);
    acc(b, n);
    MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INT, MPI_MAX, comm);
    acc(a, n);
    MPI_Allreduce(a, b, 0, MPI_INT, MPI_SUM, comm); /* zero count */
    MPI_Reduce(a, b, n, MPI_INT, MPI_SUM, size - 1, comm);
    if (rank == size - 1)
        acc(b, n);
    MPI_Scan(a, b, 8, MPI_INT, MPI_SUM, comm);
    acc(b, 8);
    MPI_Exscan(a, b, 8, MPI_INT, MPI_SUM, comm);
    if (rank)
        acc(b, 8);
    MPI_Gather(a, 8, MPI_INT, b, 4, two, 0, comm); /* 8 ints == 4 pairs */
    if (!rank)
        acc(b, 8 * size);
    MPI_Scatter(a, 8, MPI_INT, b, 8, MPI_INT, 0, comm);
    acc(b, 8);
    MPI_Allgather(a, 4, two, b, 8, MPI_INT, comm);
    acc(b, 8 * size);
    MPI_Alltoall(a, 4, MPI_INT, b, 4, MPI_INT, comm);
    acc(b, 4 * size);
    for (int i = 0; i < size; i++)
        cnt[i] = 1 + i % 3, dsp[i] = 4 * i;
    MPI_Allgatherv(a, cnt[rank], MPI_INT, b, cnt, dsp, MPI_INT, comm);
    acc(b, 4 * size);
    MPI_Gatherv(a, cnt[rank], MPI_INT, b, cnt, dsp, MPI_INT, 0, comm);
    MPI_Scatterv(a, cnt, dsp, MPI_INT, b, cnt[rank], MPI_INT, 0, comm);
    acc(b, cnt[rank]);
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
    int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++) {
        sc[i] = 1 + (rank + i) % 2; /* what I send to i */
        rc[i] = 1 + (i + rank) % 2; /* what i sends to me */
        sd[i] = rd[i] = 4 * i;
    }
    MPI_Alltoallv(a, sc, sd, MPI_INT, b, rc, rd, MPI_INT, comm);
    acc(b, 4 * size);
    MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * size);
    int *sdb = malloc(sizeof(int) * size), *rdb = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++)
        ty[i] = MPI_INT, sdb[i] = rdb[i] = 16 * i;
    MPI_Alltoallw(a, sc, sdb, ty, b, rc, rdb, ty, comm);
    /* empty messages match whatever their datatypes (MPICH's
     * alltoallw_zeros): 1 x a zero-size type against 0 x MPI_INT */
    MPI_Datatype empty;
    MPI_Type_contiguous(0, MPI_INT, &empty);
    MPI_Type_commit(&empty);
    for (int i = 0; i < size; i++)
        sc[i] = rc[i] = 0;
    sc[rank] = 1;
    MPI_Datatype *ety = malloc(sizeof(MPI_Datatype) * size);
    for (int i = 0; i < size; i++)
        ety[i] = i == rank ? empty : MPI_INT;
    MPI_Alltoallw(a, sc, sdb, ety, b, rc, rdb, ty, comm);
    free(ety);
    MPI_Type_free(&empty);
    for (int i = 0; i < size; i++)
        cnt[i] = 2;
    MPI_Reduce_scatter(a, b, cnt, MPI_INT, MPI_SUM, comm);
    acc(b, 2);
    MPI_Reduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, comm);
    acc(b, 2);
    /* a vector of 8 ints against 8 ints */
    if (rank == 0)
        MPI_Bcast(a, 1, vec, 0, comm);
    else
        MPI_Bcast(b, 8, MPI_INT, 0, comm);
    /* nonblocking, checked at the call, completed together */
    MPI_Request r[8];
    MPI_Status st[8];
    int k = 0;
    MPI_Ibarrier(comm, &r[k++]);
    MPI_Iallreduce(a, b, n, MPI_INT, MPI_SUM, comm, &r[k++]);
    MPI_Ibcast(a + n, 16, MPI_INT, 0, comm, &r[k++]);
    MPI_Waitall(k, r, st);
    acc(b, n);
    k = 0;
    MPI_Iallgather(a, 2, MPI_INT, b, 2, MPI_INT, comm, &r[k++]);
    MPI_Ireduce(a + 2 * size, b + 2 * size, 4, MPI_INT, MPI_MIN, 0, comm, &r[k++]);
    MPI_Ialltoall(a + 8 * size, 1, MPI_INT, b + 8 * size, 1, MPI_INT, comm, &r[k++]);
    MPI_Iscan(a, b + 12 * size, 2, MPI_INT, MPI_SUM, comm, &r[k++]);
    MPI_Waitall(k, r, st);
    acc(b, 2 * size);
    /* point to point: a ring, sends and receives in an order that never
     * waits in a cycle for long */
    int x = rank, y = -1;
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    if (size == 1) {
        /* a blocking send to oneself before the receive may never return */
        y = x;
    } else if (rank % 2 == 0) {
        MPI_Send(&x, 1, MPI_INT, to, 7, comm);
        MPI_Recv(&y, 1, MPI_INT, from, 7, comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&y, 1, MPI_INT, from, 7, comm, MPI_STATUS_IGNORE);
        MPI_Send(&x, 1, MPI_INT, to, 7, comm);
    }
    sum += y;
    /* A freed datatype's handle handed out again for another type (both
     * MPIs do: MPICH from its handle free list, Open MPI from malloc): the
     * layer caches signatures per handle and must not give the new type
     * the old one's - a pair of floats, then a pair of ints (matched here
     * against 2 x MPI_INT) where the float pair was. */
    MPI_Datatype fpair, ipair;
    MPI_Type_contiguous(2, MPI_FLOAT, &fpair);
    MPI_Type_commit(&fpair);
    MPI_Bcast(b + 4, 1, fpair, 0, comm); /* cached by the layer */
    MPI_Type_free(&fpair);
    MPI_Type_contiguous(2, MPI_INT, &ipair);
    MPI_Type_commit(&ipair);
    if (rank % 2)
        MPI_Bcast(b, 2, MPI_INT, 0, comm);
    else
        MPI_Bcast(b, 1, ipair, 0, comm);
    acc(b, 2);
    MPI_Type_free(&ipair);
    MPI_Type_free(&two);
    MPI_Type_free(&vec);
    free(a), free(b), free(cnt), free(dsp), free(sc), free(sd), free(rc), free(rd), free(ty);
    free(sdb), free(rdb);
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 3;
    for (int it = 0; it < iters; it++) {
        round_on(MPI_COMM_WORLD, it);
        MPI_Comm half, dup, cart, sub;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half); /* reversed order */
        MPI_Comm_dup(half, &dup);
        round_on(dup, it);
        int dims[1] = {0}, periods[1] = {1};
        MPI_Dims_create(size, 1, dims);
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 1, &cart);
        round_on(cart, it);
        MPI_Group wg, g2;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        int first[2] = {0, 1};
        MPI_Group_incl(wg, 2, first, &g2);
        MPI_Comm_create(MPI_COMM_WORLD, g2, &sub); /* MPI_COMM_NULL on ranks >= 2 */
        if (sub != MPI_COMM_NULL) {
            round_on(sub, it);
            MPI_Comm_free(&sub);
        }
        MPI_Group_free(&g2);
        MPI_Group_free(&wg);
        MPI_Comm_free(&cart);
        MPI_Comm_free(&dup);
        MPI_Comm_free(&half);
    }
    double total = 0;
    MPI_Reduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("checksum %.17g\n", total);
    MPI_Finalize();
    return 0;
}

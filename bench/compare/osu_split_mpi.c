/* bench/compare/osu_split_mpi.c - osu_split.c's loop over MPI_Barrier and
 * MPI_Bcast (root 0), the same stamps and file format (osu_split.py); a
 * fifth argument "scatter" times MPI_Scatter (root 0, BYTES in all).
 * Build: mpicc -O2 osu_split_mpi.c; run: mpirun -n 2 ./a.out N BYTES OSU OUT. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sched.h>
static inline uint64_t now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return (uint64_t)t.tv_sec*1000000000ull+t.tv_nsec;}
int main(int argc,char**argv){
  int N=argc>1?atoi(argv[1]):20000; size_t sz=argc>2?strtoul(argv[2],0,0):8; int osu=argc>3?atoi(argv[3]):1;
  const char*out=argc>4?argv[4]:"/tmp/ts/t";
  MPI_Init(&argc,&argv);
  int r, n; MPI_Comm_rank(MPI_COMM_WORLD,&r); MPI_Comm_size(MPI_COMM_WORLD,&n);
  int sc=argc>5&&!strcmp(argv[5],"scatter");
  uint64_t *a=calloc(N,8),*b=calloc(N,8),*c=calloc(N,8);
  char *buf=calloc(1,sz+64), *rb=calloc(1,sz+64);
#define OP() (sc ? MPI_Scatter(buf,(int)(sz/4/(size_t)n),MPI_FLOAT,rb,(int)(sz/4/(size_t)n),MPI_FLOAT,0,MPI_COMM_WORLD) : MPI_Bcast(buf,(int)(sz/4),MPI_FLOAT,0,MPI_COMM_WORLD))
  for(int w=0;w<200;w++){ if(osu) MPI_Barrier(MPI_COMM_WORLD); OP();}
  MPI_Barrier(MPI_COMM_WORLD);
  for(int i=0;i<N;i++){ a[i]=now(); if(osu) MPI_Barrier(MPI_COMM_WORLD); b[i]=now(); OP(); c[i]=now(); }
  char fn[256]; snprintf(fn,sizeof fn,"%s.%d",out,r); FILE*f=fopen(fn,"w");
  for(int i=0;i<N;i++) fprintf(f,"%llu %llu %llu\n",(unsigned long long)a[i],(unsigned long long)b[i],(unsigned long long)c[i]);
  fclose(f); MPI_Barrier(MPI_COMM_WORLD); MPI_Finalize(); return 0;}

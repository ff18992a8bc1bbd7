/* bench/compare/osu_split.c - where an OSU-style broadcast's time goes, per
 * iteration and rank (session 12, issue #14 tcp2osu): each rank loops
 * { t_a; barrier; t_b; broadcast(root 0); t_c } and writes its CLOCK_MONOTONIC
 * stamps (one clock for every process of the machine) to OUT.<rank>;
 * osu_split.py lines the two ranks up: the root's and the receiver's timed
 * broadcast, which rank left the barrier first and by how much, and the time
 * from the root's broadcast start to the receiver's return (its histogram).
 * Build: cc -O2 -Iinclude osu_split.c -Lbuild -lcohort; run under cohortrun
 * (COHORT_TRANSPORT=tcp COHORT_BIND=core cohortrun -n 2 ./a.out N BYTES OSU OUT).
 * osu_split_mpi.c is the same loop over MPI_Barrier/MPI_Bcast. A fifth
 * argument "scatter" times a scatter (root 0, BYTES in all) instead
 * (session 16: the whole iteration - barrier and call - against MPICH's and
 * Open MPI's, which the OSU-style cells alone do not show). */
#define _GNU_SOURCE
#include <cohort.h>
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
  int sc=argc>5&&!strcmp(argv[5],"scatter");
  cohort_group*g; if(cohort_init(&g)){fprintf(stderr,"init\n");return 1;}
  int r=cohort_rank(g), n=cohort_size(g);
  uint64_t *a=calloc(N,8),*b=calloc(N,8),*c=calloc(N,8);
  char *buf=calloc(1,sz+64), *rb=calloc(1,sz+64);
#define OP() (sc ? cohort_scatter(g,buf,rb,sz/4/(size_t)n,COHORT_FLOAT32,0) : cohort_broadcast(g,buf,sz/4,COHORT_FLOAT32,0))
  for(int w=0;w<200;w++){ if(osu) cohort_barrier(g); OP();}
  cohort_barrier(g);
  for(int i=0;i<N;i++){ a[i]=now(); if(osu) cohort_barrier(g); b[i]=now(); OP(); c[i]=now(); }
  char fn[256]; snprintf(fn,sizeof fn,"%s.%d",out,r); FILE*f=fopen(fn,"w");
  for(int i=0;i<N;i++) fprintf(f,"%llu %llu %llu\n",(unsigned long long)a[i],(unsigned long long)b[i],(unsigned long long)c[i]);
  fclose(f); cohort_barrier(g); cohort_finalize(g); return 0;}

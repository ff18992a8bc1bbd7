/* bench/compare/fresh_send.c - a collective whose send buffer each rank
 * rewrites before every call, as a program's compute does (cohort-perf and
 * the peers' benchmarks never rewrite it, which flatters a single copy: the
 * kernel then reads lines no core holds modified), a barrier, then only the
 * call timed; prints the slowest rank's mean us per call (session 16, the
 * single-copy rule for 2 ranks apart: docs/shm.md "Single copy").
 * Build: cc -O2 -Iinclude bench/compare/fresh_send.c -Lbuild -lcohort
 * Run:   COHORT_SHM_SINGLE_COPY=off|auto cohortrun -n 2 ./a.out OP BYTES N
 *        (OP: bcast|all_gather|gather|scatter|all_to_all|send; BYTES: the whole
 *        buffer, nccl-tests' convention; send: rank 0 sends BYTES to rank 1,
 *        one way, the time the slower of the two took) */
#define _GNU_SOURCE
#include <cohort.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  const char*op=argv[1]; size_t B=strtoul(argv[2],0,0); int N=atoi(argv[3]);
  cohort_group*g; if(cohort_init(&g)) return 1;
  int n=cohort_size(g), r=cohort_rank(g);
  unsigned char *sb=aligned_alloc(4096,(B+4095)/4096*4096), *rb=aligned_alloc(4096,(B+4095)/4096*4096);
  memset(sb,1,B); memset(rb,2,B);
  double tot=0;
  for(int i=-50;i<N;i++){
    size_t per=B/(size_t)n;
    if(!strcmp(op,"bcast")) memset(sb,i,B); else memset(sb,i,!strcmp(op,"all_gather")||!strcmp(op,"gather")?per:B);
    cohort_barrier(g);
    double t0=now(); cohort_status st;
    if(!strcmp(op,"bcast")) st=cohort_broadcast(g,sb,B,COHORT_UINT8,0);
    else if(!strcmp(op,"all_gather")) st=cohort_all_gather(g,sb,rb,per,COHORT_UINT8);
    else if(!strcmp(op,"gather")) st=cohort_gather(g,sb,rb,per,COHORT_UINT8,0);
    else if(!strcmp(op,"scatter")) st=cohort_scatter(g,sb,rb,per,COHORT_UINT8,0);
    else if(!strcmp(op,"send")) st=r==0?cohort_send(g,sb,B,COHORT_UINT8,1,0):r==1?cohort_recv(g,rb,B,COHORT_UINT8,0,0):COHORT_OK;
    else st=cohort_all_to_all(g,sb,rb,per,COHORT_UINT8);
    double t=now()-t0; if(st){fprintf(stderr,"err %d\n",st);return 2;}
    if(i>=0) tot+=t;
  }
  double mine=tot/N*1e6, mx; cohort_all_reduce(g,&mine,&mx,1,COHORT_FLOAT64,COHORT_MAX);
  if(r==0) printf("%s %zu %.2f\n",op,B,mx);
  cohort_finalize(g); return 0;}

/* first-cell probe: N ranks via cohortrun-less fork? use the env from cohort-perf-like launch */
#define _GNU_SOURCE
#include <cohort.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  double idle=argc>1?atof(argv[1]):0; int mode=argc>2?atoi(argv[2]):0;
  cohort_group *g; if(cohort_init(&g)!=COHORT_OK){fprintf(stderr,"init: %s\n",cohort_last_error(NULL));return 1;}
  int r=cohort_rank(g); float b[2]={0};
  double t0=now();
  if(mode==0||mode>=2){ volatile long x=0; while(now()-t0<idle) x++; } /* busy, no calls */
  else { struct timespec ts={(time_t)idle,(long)((idle-(long)idle)*1e9)}; nanosleep(&ts,0); }
  cohort_barrier(g);
  if(mode==2) for(int i=0;i<500000;i++) cohort_all_reduce(g,b,b+1,1,COHORT_FLOAT32,COHORT_SUM);
  if(mode==3) for(int i=0;i<500000;i++) cohort_broadcast(g,b,2,COHORT_FLOAT32,0);
  for(int chunk=0;chunk<12;chunk++){
    struct rusage ru0,ru1; getrusage(RUSAGE_SELF,&ru0);
    double a=now();
    for(int i=0;i<50000;i++) cohort_broadcast(g,b,2,COHORT_FLOAT32,0);
    double us=(now()-a)/50000*1e6; getrusage(RUSAGE_SELF,&ru1);
    long flt=ru1.ru_minflt-ru0.ru_minflt, nv=ru1.ru_nivcsw-ru0.ru_nivcsw;
    double mx; cohort_all_reduce(g,&us,&mx,1,COHORT_FLOAT64,COHORT_MAX);
    if(r==0) printf("%.3f(f%ld,c%ld) ",mx,flt,nv);
  }
  if(r==0) printf(" (idle %.1f s mode %d)\n",idle,mode);
  cohort_finalize(g); return 0;}

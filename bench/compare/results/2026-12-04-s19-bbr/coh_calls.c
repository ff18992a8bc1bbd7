/* per-call CLOCK_MONOTONIC stamps of back-to-back cohort broadcasts of B bytes */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cohort.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  size_t bytes=argc>1?strtoul(argv[1],0,0):1<<20; int iters=argc>2?atoi(argv[2]):2000;
  const char*dir=argc>3?argv[3]:"/tmp/tt";
  cohort_group*g; if(cohort_init(&g)){fprintf(stderr,"init: %s\n",cohort_last_error(NULL));return 1;}
  int r=cohort_rank(g); char*buf=aligned_alloc(4096,bytes); memset(buf,r+1,bytes);
  double*a=malloc(sizeof(double)*iters*2);
  for(int w=0;w<50;w++) cohort_broadcast(g,buf,bytes,COHORT_UINT8,0);
  cohort_barrier(g);
  for(int i=0;i<iters;i++){a[2*i]=now(); if(cohort_broadcast(g,buf,bytes,COHORT_UINT8,0)){fprintf(stderr,"%s\n",cohort_last_error(g));return 1;} a[2*i+1]=now();}
  char p[256]; snprintf(p,sizeof p,"%s/coh.%d",dir,r); FILE*f=fopen(p,"w");
  for(int i=0;i<iters;i++) fprintf(f,"%.3f %.3f\n",a[2*i],a[2*i+1]); fclose(f);
  cohort_finalize(g); return 0;}

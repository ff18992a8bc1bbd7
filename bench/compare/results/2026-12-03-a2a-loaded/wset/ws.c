// memcpy rate per thread vs the working set: 2 threads (one per cpu), each copying
// 128 KiB pieces from its half of a shared buffer of W bytes into the other half,
// walking the whole set; best of 5 passes of >= 64 MiB copied. Prints GB/s per thread.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static size_t W;
static unsigned char *buf;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void *run(void *a){
  int id=(int)(long)a; cpu_set_t s; CPU_ZERO(&s); CPU_SET(id,&s); sched_setaffinity(0,sizeof s,&s);
  size_t half=W/2, P=128<<10; unsigned char *src=buf+(id?half/2:0), *dst=buf+half+(id?half/2:0);
  size_t part=half/2; double best=1e9;
  for(int r=0;r<5;r++){ size_t tot=0; double t0=now();
    while(tot< (64u<<20)){ for(size_t o=0;o+P<=part;o+=P){memcpy(dst+o,src+o,P);} tot+=part; }
    double dt=now()-t0; double rate=tot/dt/1e9; if(dt/ (tot/1e9) < best) best=dt/(tot/1e9); (void)rate; }
  printf("W %5zu MiB thread %d: %.1f GB/s\n", W>>20, id, 1.0/best); return 0; }
int main(int c,char**v){ W=(size_t)atol(v[1])<<20; buf=aligned_alloc(4096,W); memset(buf,1,W);
  pthread_t t[2]; for(long i=0;i<2;i++) pthread_create(&t[i],0,run,(void*)i); for(int i=0;i<2;i++) pthread_join(t[i],0); }

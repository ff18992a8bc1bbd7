#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>
/* two processes (fork), one shared line each way: ping-pong from the very start */
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  _Atomic long *m = mmap(0,4096,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  _Atomic long *a=m, *b=m+16;
  const long CH=100000, NCH=12;
  pid_t p=fork();
  if(!p){ for(long i=1;i<=CH*NCH;i++){ while(atomic_load_explicit(a,memory_order_acquire)!=i) _mm_pause(); atomic_store_explicit(b,i,memory_order_release);} _exit(0);}
  for(long c=0;c<NCH;c++){ double t0=now(); for(long i=c*CH+1;i<=(c+1)*CH;i++){ atomic_store_explicit(a,i,memory_order_release); while(atomic_load_explicit(b,memory_order_acquire)!=i) _mm_pause(); } printf("%.0f ",(now()-t0)/CH*1e9); }
  printf(" ns round trip per 100k-chunk\n"); wait(0); return 0;}

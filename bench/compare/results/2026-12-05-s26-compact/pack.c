/* floor: producer runs ahead <= K records; consumer polls tag, reads fp+payload,
 * stores its done count. stride 128 (tag line + header line written), 64 (tag
 * line only), 32 (two records a line). ns per record. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define NREC 1024
#define K 256
static unsigned HN = NREC; static long fulls; static unsigned PD;
static int stride, hdrline;
static unsigned char *buf, *hbuf; static int sep;
static _Alignas(64) _Atomic uint32_t done;
static _Alignas(64) _Atomic uint32_t pub; /* producer's arrive word */
static long N = 2000000;
static _Alignas(64) volatile uint64_t sink;
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static inline unsigned char *rec(uint32_t i){return buf + (size_t)(i % NREC) * stride;}
static void *prod(void *a){(void)a;pin(0);uint32_t seen=0;
 for(uint32_t i=1;i<=N;i++){
  if(i - seen > K){ fulls++; while((seen=atomic_load_explicit(&done,memory_order_acquire)), i-seen>K) ; }
  unsigned char *r=rec(i);
  if(PD) __builtin_prefetch(rec(i+PD),1,3);
  _Atomic uint32_t *t=(_Atomic uint32_t*)r;
  atomic_store_explicit(t,i-1,memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  if(hdrline){ unsigned char *h = sep ? hbuf + (size_t)(i % HN) * 64 : r + 64; if(hdrline==2){ uint64_t tmp[8]; for(int w=0;w<8;w++) tmp[w]=i*w; memcpy(h,tmp,64);} else for(int w=0;w<8;w++) atomic_store_explicit((_Atomic uint64_t*)(h+8*w),i*w,memory_order_relaxed);}
  if(stride>=64){ atomic_store_explicit((_Atomic uint64_t*)(r+8),i,memory_order_relaxed);
   atomic_store_explicit((_Atomic uint64_t*)(r+16),7,memory_order_relaxed);
   atomic_store_explicit((_Atomic uint64_t*)(r+24),9,memory_order_relaxed);
   memcpy(r+32,&i,4);}
  else { atomic_store_explicit((_Atomic uint32_t*)(r+4),i*3,memory_order_relaxed); /* digest */
   atomic_store_explicit((_Atomic uint64_t*)(r+8),i,memory_order_relaxed); /* seq */
   memcpy(r+16,&i,4);} /* payload 8B at 16 */
  atomic_store_explicit(t,i,memory_order_release);
  atomic_store_explicit(&pub,i,memory_order_release);
 } return 0;}
static void *cons(void *a){(void)a;pin(1);uint64_t s=0;
 for(uint32_t i=1;i<=N;i++){ unsigned char *r=rec(i); _Atomic uint32_t *t=(_Atomic uint32_t*)r;
  while(atomic_load_explicit(t,memory_order_acquire)!=i) ;
  uint64_t a8; memcpy(&a8, r+(stride>=64?32:16), 8); s+=a8 + atomic_load_explicit((_Atomic uint64_t*)(r+8),memory_order_relaxed);
  atomic_store_explicit(&done,i,memory_order_release);}
 sink=s; return 0;}
int main(int c,char**v){stride=atoi(v[1]);hdrline=stride==128; if(c>3)hdrline=atoi(v[3]); if(c>4)sep=atoi(v[4]); if(c>5)HN=atoi(v[5]); if(c>6)PD=atoi(v[6]); hbuf=aligned_alloc(4096,NREC*64); memset(hbuf,0,NREC*64); if(c>2)N=atol(v[2]);
 buf=aligned_alloc(4096,(size_t)NREC*stride);memset(buf,0,(size_t)NREC*stride);
 for(int rep=0;rep<5;rep++){ atomic_store(&done,0); fulls=0; memset(buf,0,(size_t)NREC*stride);
 pthread_t a,b;struct timespec t0,t1;clock_gettime(CLOCK_MONOTONIC,&t0);
 pthread_create(&b,0,cons,0);pthread_create(&a,0,prod,0);pthread_join(a,0);pthread_join(b,0);
 clock_gettime(CLOCK_MONOTONIC,&t1);
 printf("stride %d fulls %ld: %.1f ns/rec\n",stride,fulls,((t1.tv_sec-t0.tv_sec)*1e9+(t1.tv_nsec-t0.tv_nsec))/N);}
 return 0;}

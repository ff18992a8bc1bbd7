/*
 * cma_split.c - the kernel's copy alone between two processes, as cohort's 2-rank single-copy
 * broadcast uses it (the reader reads the head with process_vm_readv while the root writes
 * the tail with process_vm_writev) against Open MPI vader's (the reader reads the whole
 * message, the root waits). Modes, each run as its own block of iterations (steady state;
 * the root's buffer is never rewritten, as in both benchmarks): whole-read, half-read-alone,
 * split (both halves at once), half-write-alone; per-call p50/p90 of each side's copy.
 * Unpinned; prints one line per mode.
 *
 *   cc -O2 -o /tmp/cma_split bench/compare/cma_split.c && /tmp/cma_split BYTES [ITERS]
 *
 * docs/performance.md "Single copy vs Open MPI's CMA: placement and host state".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>
typedef struct { _Atomic uint64_t go, done_r, done_w; uint64_t raddr, waddr; pid_t rpid, wpid; double tr[4][20000], tw[4][20000]; } shr;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
static double pct(double*v,int n,int p){double*c=malloc(n*sizeof*c);memcpy(c,v,n*sizeof*c);qsort(c,n,sizeof*c,cmp);double r=c[(long)n*p/100];free(c);return r;}
int main(int argc,char**argv){
  size_t N=strtoul(argv[1],0,0); int iters=argc>2?atoi(argv[2]):2000; if(iters>20000)iters=20000;
  shr*s=mmap(0,sizeof*s,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  char*rootbuf=aligned_alloc(4096,N); memset(rootbuf,7,N); s->waddr=(uint64_t)rootbuf; s->wpid=getpid();
  pid_t c=fork();
  if(c==0){ char*rb=aligned_alloc(4096,N); memset(rb,0,N); s->raddr=(uint64_t)rb; atomic_store(&s->done_r,1);
    for(uint64_t it=1;;it++){ uint64_t g; while((g=atomic_load(&s->go))<it*8) ; int mode=g%8; if(mode==7) _exit(0);
      double t0=now();
      if(mode==0||mode==1||mode==2){ size_t len=mode==0?N:N/2; struct iovec l={rb,len},r={rootbuf,len}; if(process_vm_readv(s->wpid,&l,1,&r,1,0)!=(ssize_t)len) {perror("r");_exit(1);} }
      s->tr[mode][(it-1)%iters]=now()-t0; atomic_store(&s->done_r,it+1); }
  }
  while(atomic_load(&s->done_r)!=1); 
  uint64_t it=0;
  for(int mode=0;mode<4;mode++) for(int rep=0;rep<iters;rep++){ it++;
      atomic_store(&s->go,it*8+mode); double t0=now();
      if(mode==2||mode==3){ size_t len=N/2; struct iovec l={rootbuf+N/2,len},r={(char*)s->raddr+N/2,len}; if(process_vm_writev(c,&l,1,&r,1,0)!=(ssize_t)len){perror("w");exit(1);} }
      s->tw[mode][rep]=now()-t0;
      while(atomic_load(&s->done_r)!=it+1); }
  it++; atomic_store(&s->go,it*8+7); waitpid(c,0,0);
  const char*nm[4]={"whole-read","half-read-alone","split(read head|write tail)","half-write-alone"};
  for(int m=0;m<4;m++){ int n=iters; /* reader index = (it-1)/4 == rep */
    printf("%zu %-28s reader p50 %7.2f p90 %7.2f | root p50 %7.2f p90 %7.2f\n",N,nm[m],pct(s->tr[m],n,50),pct(s->tr[m],n,90),pct(s->tw[m],n,50),pct(s->tw[m],n,90)); }
}

# The temporary per-phase clock of bcast_single (not in the library): run from the
# repository root, build with -DCMA_PROF in a separate build dir, restore the file after;
# also change tools/cohort-perf/perf_launch.c's `_exit(rc)` after rank_main to `exit(rc)`
# so the destructor runs. Each rank writes /tmp/cma64/prof.<pid>: per size and role, p50/p90
# of claim | desc (publish the descriptor, wait for every rank's, check the contract) |
# copy (process_vm_readv/writev of its half + the pidfd check) | done (publish, wait for all).
# CMA_NOSPLIT=1 in the environment: the reader reads the whole message, the root writes nothing.
p = 'src/coll/shm/shm_coll.c'
s = open(p).read()
prof = r'''
#ifdef CMA_PROF
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#define PROF_N 400000
static double prof_t[5][PROF_N]; static size_t prof_bytes[PROF_N]; static int prof_n, prof_root[PROF_N];
static double prof_now(void){struct timespec ts; clock_gettime(CLOCK_MONOTONIC,&ts); return ts.tv_sec*1e6+ts.tv_nsec/1e3;}
static int prof_cmp(const void*a,const void*b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
__attribute__((destructor)) static void prof_dump(void){
  if(!prof_n) return;
  static const size_t sz[]={4096,16384,65536,262144,1048576};
  static double v[PROF_N];
  const char *nm[4]={"claim","desc","copy","done"}; char fn[64]; snprintf(fn,64,"/tmp/cma64/prof.%d",(int)getpid()); FILE*pf=fopen(fn,"w"); if(!pf) return;
  for(int r=0;r<2;r++) for(unsigned z=0;z<5;z++){
    int cnt=0; for(int i=0;i<prof_n;i++) if(prof_bytes[i]==sz[z]&&prof_root[i]==r) cnt++;
    if(cnt<20) continue;
    fprintf(pf,"# cmaprof pid %d %s %zu B n=%d:",(int)getpid(),r?"root":"reader",sz[z],cnt);
    for(int ph=0;ph<4;ph++){int k=0; for(int i=0;i<prof_n;i++) if(prof_bytes[i]==sz[z]&&prof_root[i]==r) v[k++]=prof_t[ph+1][i]-prof_t[ph][i];
      qsort(v,k,sizeof(double),prof_cmp); fprintf(pf," %s p50 %.2f p90 %.2f |",nm[ph],v[k/2],v[k*9/10]);}
    fprintf(pf,"\n");
  }
}
#define PROF(k) do { if (pi >= 0) prof_t[k][pi] = prof_now(); } while (0)
#else
#define PROF(k) do { } while (0)
#endif
'''
s = s.replace("/* ---- broadcast ---- */", prof + "\n/* ---- broadcast ---- */", 1)
for old, new in [
    ('''    int me = s->me, am_root = me == root;
    if ((st = cs_claim(o)) != COHORT_OK)
        return st;
    uint32_t p = s->phase + 1;''',
     '''    int me = s->me, am_root = me == root;
#ifdef CMA_PROF
    int pi = prof_n < PROF_N ? prof_n++ : -1;
    if (pi >= 0) { prof_bytes[pi] = bytes; prof_root[pi] = am_root; }
#endif
    PROF(0);
    if ((st = cs_claim(o)) != COHORT_OK)
        return st;
    PROF(1);
    uint32_t p = s->phase + 1;'''),
    ('''    size_t tail = bytes / (size_t)s->n & ~(size_t)4095;''',
     '''    PROF(2);
    size_t tail = getenv("CMA_NOSPLIT") ? 0 : bytes / (size_t)s->n & ~(size_t)4095;'''),
    ('''    shm_publish(s); /* done with the peers' buffers and slots */
    return cs_wait_all(o, p + 1);''',
     '''    PROF(3);
    shm_publish(s); /* done with the peers' buffers and slots */
    st = cs_wait_all(o, p + 1);
    PROF(4);
    return st;''')]:
    assert old in s
    s = s.replace(old, new)
open(p, 'w').write(s)

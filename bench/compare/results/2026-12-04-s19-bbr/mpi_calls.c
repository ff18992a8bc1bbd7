#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){MPI_Init(&argc,&argv);int r;MPI_Comm_rank(MPI_COMM_WORLD,&r);
  size_t bytes=argc>1?strtoul(argv[1],0,0):1<<20; int iters=argc>2?atoi(argv[2]):2000;
  const char*dir=argc>3?argv[3]:"/tmp/tt";
  char*buf=aligned_alloc(4096,bytes); memset(buf,r+1,bytes); double*a=malloc(sizeof(double)*iters*2);
  for(int w=0;w<50;w++) MPI_Bcast(buf,(int)bytes,MPI_BYTE,0,MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  for(int i=0;i<iters;i++){a[2*i]=now(); MPI_Bcast(buf,(int)bytes,MPI_BYTE,0,MPI_COMM_WORLD); a[2*i+1]=now();}
  char p[256]; snprintf(p,sizeof p,"%s/mpi.%d",dir,r); FILE*f=fopen(p,"w");
  for(int i=0;i<iters;i++) fprintf(f,"%.3f %.3f\n",a[2*i],a[2*i+1]); fclose(f);
  MPI_Finalize(); return 0;}

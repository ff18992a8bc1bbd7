#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
int main(int c,char**v){MPI_Init(&c,&v);int r;MPI_Comm_rank(MPI_COMM_WORLD,&r);
 size_t sz=c>1?atol(v[1]):1<<20; int n=c>2?atoi(v[2]):2000; int op=c>3?atoi(v[3]):1; int fill=c>4?atoi(v[4]):0;
 char *a=calloc(1,1<<20),*b=calloc(1,1<<20); double *t=malloc(sizeof(double)*n);
 if(fill){memset(a,1,1<<20);memset(b,1,1<<20);}
 for(int i=0;i<n/10+5;i++) op?MPI_Bcast(a,(int)(sz/4),MPI_FLOAT,0,MPI_COMM_WORLD):MPI_Allreduce(a,b,(int)(sz/4),MPI_FLOAT,MPI_SUM,MPI_COMM_WORLD);
 MPI_Barrier(MPI_COMM_WORLD);
 for(int i=0;i<n;i++){double t0=MPI_Wtime(); op?MPI_Bcast(a,(int)(sz/4),MPI_FLOAT,0,MPI_COMM_WORLD):MPI_Allreduce(a,b,(int)(sz/4),MPI_FLOAT,MPI_SUM,MPI_COMM_WORLD); t[i]=(MPI_Wtime()-t0)*1e6;}
 qsort(t,n,sizeof*t,cmp);
 printf("rank %d %s %zu min %.3f p10 %.3f p25 %.3f p50 %.3f\n",r,op?"bcast":"allreduce",sz,t[0],t[n/10],t[n/4],t[n/2]);
 MPI_Finalize();}

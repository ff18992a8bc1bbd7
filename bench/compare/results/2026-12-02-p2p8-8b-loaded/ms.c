#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "transport/shm/shm_seg.h"
static double ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(void){ shm_op o; double best=1e9;
  for(int rep=0;rep<20;rep++){double t0=ns(); for(int i=0;i<1000000;i++){memset(&o,0,sizeof o); __asm__ volatile(""::"r"(&o):"memory");} double t=(ns()-t0)/1e6; if(t<best)best=t;}
  printf("sizeof(shm_op) %zu, memset: min mean %.1f ns\n", sizeof o, best);}

#include <stdio.h>
#include <time.h>
static double now_s(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){ double a=now_s(), x=0; for(int i=0;i<10000000;i++) x+=now_s(); double b=now_s(); printf("%.1f ns per clock read (%g)\n",(b-a)/1e7*1e9, x>0?1.0:0.0); return 0;}

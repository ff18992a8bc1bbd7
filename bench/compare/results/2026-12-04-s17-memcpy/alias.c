#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(void){
  unsigned char *a = aligned_alloc(4096, 1<<20), *b = aligned_alloc(4096, 1<<20);
  memset(a, 1, 1<<20); memset(b, 2, 1<<20);
  size_t sizes[] = {4096, 6000, 8192};
  int offs[] = {0, 1, 5, 16, 31, 32, 64, 4095, 4090};
  for (int si = 0; si < 3; si++) for (int oi = 0; oi < 9; oi++) {
    size_t n = sizes[si]; unsigned char *s = a + 64, *d = b + 64 + offs[oi];
    /* dst a few bytes after src modulo 4 KiB */
    double best = 1e18;
    for (int r = 0; r < 5; r++) { double t0 = now(); for (int i = 0; i < 20000; i++) { memcpy(d, s, n); __asm__ volatile("" ::: "memory"); } double t = (now() - t0) / 20000; if (t < best) best = t; }
    printf("n %zu dst-src mod 4K = %d: %.1f ns (%.1f GB/s)\n", n, offs[oi], best, n / best);
  }
}

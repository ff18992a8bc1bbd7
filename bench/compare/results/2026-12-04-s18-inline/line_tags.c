/* line_tags.c - one-way latency of a small message between two cores, by
 * where its payload lies relative to the tag the consumer polls (ping-pong,
 * half the round trip; a ring of 128 entries per direction, as cohort's tiny
 * ring). Modes, payload P bytes:
 *   inline1 : tag + <= 32 B payload in one line (cohort's record, <= 32 B)
 *   slot    : tag line, then the payload in a slot elsewhere (cohort today, > 32 B)
 *   buddy   : tag line + 32 B, the rest in the next line (no tag there)
 *   linetag : every line carries its own tag; the consumer polls all lines
 *             of the message at once (NCCL's LL/LL128 idea)
 * gcc -O2 -pthread line_tags.c -o line_tags; ./line_tags MODE P [iters] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>

#define N 128
#define LINE 64
enum { INLINE1, SLOT, BUDDY, LINETAG };
static int mode;
static size_t P;
static long iters = 200000;
typedef struct { _Alignas(64) unsigned char b[4 * LINE]; } ent; /* up to 4 lines */
typedef struct { ent rec[N]; _Alignas(4096) unsigned char slot[N][256]; } chan;
static chan *ch[2];

static inline uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }

/* line l of a linetag message: 8 B tag at offset 0, 56 B of data */
static void put(chan *c, uint32_t k, const unsigned char *src)
{
    ent *e = &c->rec[k % N];
    _Atomic uint64_t *tag0 = (_Atomic uint64_t *)e->b;
    switch (mode) {
    case INLINE1: case BUDDY:
        memcpy(e->b + 32, src, P); /* line 0 from byte 32, then line 1 */
        atomic_store_explicit(tag0, k, memory_order_release);
        break;
    case SLOT:
        memcpy(c->slot[k % N], src, P);
        atomic_store_explicit(tag0, k, memory_order_release);
        break;
    case LINETAG: {
        size_t off = 0;
        for (int l = 0; off < P; l++) {
            size_t n = P - off < 56 ? P - off : 56;
            memcpy(e->b + l * LINE + 8, src + off, n);
            atomic_store_explicit((_Atomic uint64_t *)(e->b + l * LINE), k, memory_order_release);
            off += n;
        }
        break;
    }
    }
}

static void get(chan *c, uint32_t k, unsigned char *dst)
{
    ent *e = &c->rec[k % N];
    _Atomic uint64_t *tag0 = (_Atomic uint64_t *)e->b;
    if (mode != LINETAG) {
        while (atomic_load_explicit(tag0, memory_order_acquire) != k)
            _mm_pause();
        memcpy(dst, mode == SLOT ? c->slot[k % N] : e->b + 32, P);
        return;
    }
    int nl = (int)((P + 55) / 56);
    for (;;) {
        int ok = 1;
        for (int l = 0; l < nl; l++) /* every line's tag each round: the misses overlap */
            ok &= atomic_load_explicit((_Atomic uint64_t *)(e->b + l * LINE), memory_order_acquire) == k;
        if (ok)
            break;
        _mm_pause();
    }
    size_t off = 0;
    for (int l = 0; off < P; l++) {
        size_t n = P - off < 56 ? P - off : 56;
        memcpy(dst + off, e->b + l * LINE + 8, n);
        off += n;
    }
}

static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }

static void *pong(void *arg)
{
    (void)arg;
    pin(1);
    unsigned char buf[256];
    for (uint32_t k = 1; k <= (uint32_t)iters; k++) {
        get(ch[0], k, buf);
        put(ch[1], k, buf);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "slot";
    mode = !strcmp(m, "inline1") ? INLINE1 : !strcmp(m, "slot") ? SLOT : !strcmp(m, "buddy") ? BUDDY : LINETAG;
    P = argc > 2 ? strtoul(argv[2], 0, 0) : 64;
    if (argc > 3) iters = atol(argv[3]);
    if ((mode == INLINE1 && P > 32) || (mode == BUDDY && P > 96) || P > 168) { fprintf(stderr, "size\n"); return 2; }
    for (int i = 0; i < 2; i++) { ch[i] = aligned_alloc(4096, sizeof(chan)); memset(ch[i], 0, sizeof(chan)); }
    pthread_t t;
    pthread_create(&t, 0, pong, 0);
    pin(0);
    unsigned char buf[256];
    memset(buf, 7, sizeof buf);
    uint64_t t0 = 0;
    for (uint32_t k = 1; k <= (uint32_t)iters; k++) {
        if (k == 1000) t0 = now();
        put(ch[0], k, buf);
        get(ch[1], k, buf);
    }
    uint64_t t1 = now();
    pthread_join(t, 0);
    printf("%-8s %3zu B: one way %.1f ns\n", m, P, (t1 - t0) / 2.0 / (iters - 999));
    return 0;
}

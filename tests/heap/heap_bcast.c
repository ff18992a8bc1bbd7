/* heap_bcast.c - a program that mallocs its broadcast buffers and never
 * calls cohort_mem_alloc, run as 2 ranks by cohortrun (tests/heap):
 * `heap_bcast heap` expects every broadcast from a block of at least the
 * preloaded heap's threshold to take the one-copy path or, the first time
 * the root uses that region lately, the usual path counted as such
 * (coh_mem_counts, coh_mem_first: no silent fallback), smaller ones the
 * usual path, every one-copy call seen by root and reader alike, a buffer
 * broadcast again to take the one-copy path, more buffers cycled than
 * the readers keep mapped never to, and cohort_describe to say so;
 * `heap_bcast plain` (no preload) expects the old path for every size.
 * The data is checked in both. Exit 0 ok, 1 not. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"
#include "heap/heap.h"
#include "transport/shm/shm_mem.h"

static unsigned char pat(size_t i, int root, int k)
{
    return (unsigned char)(i * 131u + (unsigned)root * 7u + (unsigned)k * 17u + 1u);
}

int main(int argc, char **argv)
{
    int heap = argc > 1 && !strcmp(argv[1], "heap");
    if (argc < 2 || (!heap && strcmp(argv[1], "plain"))) {
        fprintf(stderr, "usage: heap_bcast heap|plain\n");
        return 2;
    }
    coh_heap_stats_fn stats = (coh_heap_stats_fn)dlsym(RTLD_DEFAULT, COH_HEAP_STATS);
    uint64_t min = UINT64_MAX;
    if (stats) {
        coh_heap_stats s;
        stats(&s);
        min = s.min_bytes;
    }
    if (heap != (stats != NULL)) {
        fprintf(stderr, "heap_bcast: expected the heap %s, it is %s\n",
                heap ? "preloaded" : "absent", stats ? "preloaded" : "absent");
        return 1;
    }
    cohort_group *g;
    if (cohort_init(&g) != COHORT_OK) {
        fprintf(stderr, "heap_bcast: cohort_init failed\n");
        return 1;
    }
    int me = cohort_rank(g), n = cohort_size(g), bad = 0;
    /* the sizes around the threshold; an offset inside the block too */
    const size_t sizes[] = {(size_t)256 << 10, (size_t)1 << 20, ((size_t)4 << 20) + 4096 + 3};
    const size_t offs[] = {0, 4096 + 5};
    uint64_t want_root = 0, want_read = 0;
    /* blocks of the heap placed where an earlier, freed one was: a peer's
     * cached mapping of the old region must not serve the new one (its id
     * differs; the data check catches a stale mapping) */
    uintptr_t seen[64];
    int nseen = 0, reused = 0;
    int k = 0;
    for (int root = 0; root < n; root++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (size_t oi = 0; oi < 2; oi++, k++) {
                size_t bytes = sizes[si], off = offs[oi];
                unsigned char *block = malloc(bytes + off), *buf = block + off;
                if (!block) {
                    fprintf(stderr, "heap_bcast: malloc\n");
                    return 1;
                }
                for (size_t i = 0; i < bytes; i++)
                    buf[i] = me == root ? pat(i, root, k) : 0xee;
                if (cohort_broadcast(g, buf, bytes, COHORT_UINT8, root) != COHORT_OK) {
                    fprintf(stderr, "heap_bcast: rank %d: broadcast: %s\n", me,
                            cohort_last_error(g));
                    return 1;
                }
                size_t wrong = 0;
                for (size_t i = 0; i < bytes; i++)
                    wrong += buf[i] != pat(i, root, k);
                if (wrong) {
                    fprintf(stderr, "heap_bcast: rank %d: %zu wrong bytes of %zu from root %d\n",
                            me, wrong, bytes, root);
                    bad = 1;
                }
                /* the root's whole block is a region from min (the reader's
                 * own region does not decide the path) */
                if (bytes + off >= min) {
                    *(me == root ? &want_root : &want_read) += 1;
                    for (int j = 0; j < nseen; j++)
                        reused += seen[j] == (uintptr_t)block;
                    if (nseen < 64)
                        seen[nseen++] = (uintptr_t)block;
                }
                free(block);
            }
    /* a region released on free (above the heap's 32 MiB cache limit) and
     * a new one in its place: the readers' cached mapping of the old one
     * (its id) must not serve the new one */
    coh_heap_lookup_fn lookup = (coh_heap_lookup_fn)dlsym(RTLD_DEFAULT, COH_HEAP_LOOKUP);
    uintptr_t first = 0;
    uint64_t first_id = 0;
    for (int rep = 0; rep < 2 && n > 1; rep++, k++) {
        size_t big = (size_t)40 << 20, bytes = (size_t)1 << 20;
        unsigned char *block = malloc(big);
        if (!block)
            return 1;
        coh_heap_region r = {0};
        if (heap) {
            if (!lookup || !lookup(block, bytes, &r)) {
                fprintf(stderr, "heap_bcast: rank %d: the 40 MiB block is not shared\n", me);
                bad = 1;
            }
            if (rep == 0)
                first = (uintptr_t)block, first_id = r.id;
            else if (first != (uintptr_t)block || first_id == r.id) {
                fprintf(stderr, "heap_bcast: rank %d: the second 40 MiB block %s\n", me,
                        first != (uintptr_t)block ? "is elsewhere" : "kept the id");
                bad = 1;
            }
        }
        /* twice each: a region takes the one-copy path from its second
         * broadcast (the first sighting goes the usual way), so the first
         * block's region is mapped by the reader when the second arrives */
        for (int twice = 0; twice < 2; twice++, k++) {
            for (size_t i = 0; i < bytes; i++)
                block[i] = me == 0 ? pat(i, 0, k) : 0xee;
            if (cohort_broadcast(g, block, bytes, COHORT_UINT8, 0) != COHORT_OK)
                return 1;
            size_t wrong = 0;
            for (size_t i = 0; i < bytes; i++)
                wrong += block[i] != pat(i, 0, k);
            if (wrong) {
                fprintf(stderr,
                        "heap_bcast: rank %d: %zu wrong bytes in released-region round %d.%d\n",
                        me, wrong, rep, twice);
                bad = 1;
            }
            if (heap)
                *(me == 0 ? &want_root : &want_read) += 1;
        }
        free(block);
    }
    /* more buffers than a reader keeps mapped per root (128): cycled twice,
     * the mappings evicted and made again, the data right every time */
    enum { NB = 136 };
    unsigned char *many[NB];
    uint64_t r0, rd0, sp0, r1, rd1, sp1;
    coh_mem_counts(&r0, &rd0, &sp0);
    for (int b = 0; b < NB; b++)
        if (!(many[b] = malloc((size_t)1 << 20)))
            return 1;
    for (int rep = 0; rep < 2 * NB && n > 1; rep++, k++) {
        unsigned char *buf = many[rep % NB];
        size_t bytes = (size_t)1 << 20;
        for (size_t i = 0; i < bytes; i += 4096)
            buf[i] = me == 0 ? pat(i, 0, k) : 0xee;
        if (cohort_broadcast(g, buf, bytes, COHORT_UINT8, 0) != COHORT_OK)
            return 1;
        size_t wrong = 0;
        for (size_t i = 0; i < bytes; i += 4096)
            wrong += buf[i] != pat(i, 0, k);
        if (wrong) {
            fprintf(stderr, "heap_bcast: rank %d: %zu wrong pages in buffer %d\n", me, wrong,
                    rep % NB);
            bad = 1;
        }
        if (bytes >= min)
            *(me == 0 ? &want_root : &want_read) += 1;
    }
    coh_mem_counts(&r1, &rd1, &sp1);
    if (heap && n > 1 && me == 0 && r1 - r0 > NB / 4) {
        fprintf(stderr, "heap_bcast: rank 0: %llu of %d broadcasts cycling %d buffers took the "
                        "one-copy path (each would map anew)\n",
                (unsigned long long)(r1 - r0), 2 * NB, NB);
        bad = 1;
    }
    /* one buffer broadcast again and again: the one-copy path from the
     * second time at the latest */
    coh_mem_counts(&r0, &rd0, &sp0);
    for (int rep = 0; rep < 5 && n > 1; rep++, k++) {
        unsigned char *buf = many[7];
        for (size_t i = 0; i < 4096; i++)
            buf[i] = me == 0 ? pat(i, 0, k) : 0xee;
        if (cohort_broadcast(g, buf, (size_t)1 << 20, COHORT_UINT8, 0) != COHORT_OK)
            return 1;
        for (size_t i = 0; i < 4096; i++)
            if (buf[i] != pat(i, 0, k)) {
                fprintf(stderr, "heap_bcast: rank %d: repeated buffer wrong at %zu\n", me, i);
                bad = 1;
                break;
            }
        if (((size_t)1 << 20) >= min)
            *(me == 0 ? &want_root : &want_read) += 1;
    }
    coh_mem_counts(&r1, &rd1, &sp1);
    if (heap && n > 1 && ((size_t)1 << 20) >= min &&
        (me == 0 ? r1 - r0 : rd1 + sp1 - rd0 - sp0) < 4) {
        fprintf(stderr, "heap_bcast: rank %d: a buffer broadcast 5 times took the one-copy path "
                        "%llu times\n", me,
                (unsigned long long)(me == 0 ? r1 - r0 : rd1 + sp1 - rd0 - sp0));
        bad = 1;
    }
    for (int b = 0; b < NB; b++)
        free(many[b]);
    /* regions larger than a reader keeps mapped in all (256 MiB) cycled:
     * 4 of 100 MiB, 64 KiB broadcast from each (only those pages touched) */
    enum { NH = 4 };
    unsigned char *huge[NH];
    for (int b = 0; b < NH; b++)
        if (!(huge[b] = malloc((size_t)100 << 20)))
            return 1;
    for (int rep = 0; rep < 2 * NH && n > 1; rep++, k++) {
        size_t bytes = (size_t)64 << 10;
        unsigned char *buf = huge[rep % NH] + ((size_t)50 << 20);
        for (size_t i = 0; i < bytes; i++)
            buf[i] = me == 0 ? pat(i, 0, k) : 0xee;
        if (cohort_broadcast(g, buf, bytes, COHORT_UINT8, 0) != COHORT_OK)
            return 1;
        size_t wrong = 0;
        for (size_t i = 0; i < bytes; i++)
            wrong += buf[i] != pat(i, 0, k);
        if (wrong) {
            fprintf(stderr, "heap_bcast: rank %d: %zu wrong bytes in 100 MiB block %d\n", me,
                    wrong, rep % NH);
            bad = 1;
        }
        if (((size_t)100 << 20) >= min)
            *(me == 0 ? &want_root : &want_read) += 1;
    }
    for (int b = 0; b < NH; b++)
        free(huge[b]);
    uint64_t rooted, read, split, firsts = coh_mem_first(1);
    coh_mem_counts(&rooted, &read, &split);
    /* as root: every heap call one copy or a counted first sighting; as
     * reader: exactly the other ranks' one-copy calls (n = 2) */
    uint64_t mine[2] = {rooted, read + split}, all[4] = {0};
    if (cohort_all_gather(g, mine, all, 2, COHORT_UINT64) != COHORT_OK)
        return 1;
    uint64_t peer_rooted = n == 2 ? all[2 * (1 - me)] : 0;
    if (rooted + firsts != want_root || (n == 2 && read + split != peer_rooted) ||
        read + split > want_read || (heap && n > 1 && (me == 0 ? rooted : read + split) == 0)) {
        fprintf(stderr,
                "heap_bcast: rank %d: one-copy broadcasts as root %llu + %llu first sightings "
                "(expected %llu in all), as reader %llu + %llu split (the peer's one-copy calls "
                "as root: %llu; heap calls as reader %llu)\n",
                me, (unsigned long long)rooted, (unsigned long long)firsts,
                (unsigned long long)want_root, (unsigned long long)read,
                (unsigned long long)split, (unsigned long long)peer_rooted,
                (unsigned long long)want_read);
        bad = 1;
    }
    if (heap && !reused) {
        fprintf(stderr, "heap_bcast: rank %d: no heap block reused a freed one's address\n", me);
        bad = 1;
    }
    char d[1024];
    if (cohort_describe(g, "broadcast", (size_t)4 << 20, COHORT_UINT8, d, sizeof d) != COHORT_OK ||
        (strstr(d, "shared heap") != NULL) != heap) {
        fprintf(stderr, "heap_bcast: rank %d: cohort_describe: %s\n", me, d);
        bad = 1;
    }
    if (cohort_barrier(g) != COHORT_OK)
        bad = 1;
    cohort_finalize(g);
    if (!bad)
        printf("heap_bcast %s: rank %d ok: one copy as root %llu (%llu first sightings), as "
               "reader %llu (%llu split); %d blocks at a freed one's address\n",
               argv[1], me, (unsigned long long)rooted, (unsigned long long)firsts,
               (unsigned long long)read, (unsigned long long)split, reused);
    return bad;
}

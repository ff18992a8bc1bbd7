/*
 * fuzz_store_replay.c - runs the store parser fuzz target on every file of
 * tests/fuzz/corpus/store_proto, then on 200000 seeded mutations of them
 * (bit flips, byte sets, truncations, splices, length-field edits), so CI
 * exercises the parser under the sanitizers on every run without libFuzzer.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXF 256
static uint8_t *files[MAXF];
static size_t lens[MAXF];
static int nfiles;

static void load_corpus(void)
{
    const char *src = getenv("COHORT_SOURCE_DIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/store_proto", src ? src : ".");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "corpus %s missing", dir);
    struct dirent *e;
    while ((e = readdir(d)) && nfiles < MAXF) {
        if (e->d_name[0] == '.')
            continue;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f)
            continue;
        uint8_t *b = malloc(1 << 16);
        size_t n = fread(b, 1, 1 << 16, f);
        fclose(f);
        files[nfiles] = b;
        lens[nfiles++] = n;
    }
    closedir(d);
}

START_TEST(replay_corpus)
{
    load_corpus();
    ck_assert_msg(nfiles >= 10, "only %d corpus files", nfiles);
    for (int i = 0; i < nfiles; i++)
        LLVMFuzzerTestOneInput(files[i], lens[i]);
}
END_TEST

START_TEST(seeded_mutations)
{
    load_corpus();
    ck_assert(nfiles > 0);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    uint8_t buf[1 << 16];
    for (int it = 0; it < 200000; it++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int fi = (int)(x % (uint64_t)nfiles);
        size_t n = lens[fi];
        memcpy(buf, files[fi], n);
        int edits = 1 + (int)((x >> 8) % 4);
        for (int e = 0; e < edits && n; e++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            size_t pos = (size_t)(x >> 16) % n;
            switch ((x >> 4) % 6) {
            case 0: buf[pos] ^= (uint8_t)(1u << (x % 8)); break;
            case 1: buf[pos] = (uint8_t)(x >> 40); break;
            case 2: n = pos; break; /* truncate */
            case 3: /* a length field (header bytes 8..11) set to an extreme */
                if (n >= 12) {
                    static const uint32_t ext[] = {0, 1, 0xFFFFFFFFu, 0x7FFFFFFFu, 1u << 20};
                    uint32_t v = ext[(x >> 20) % 5];
                    memcpy(buf + 8, &v, 4);
                }
                break;
            case 4: /* splice another corpus file after this one */
                if (n + lens[(fi + 1) % nfiles] <= sizeof buf) {
                    memcpy(buf + n, files[(fi + 1) % nfiles], lens[(fi + 1) % nfiles]);
                    n += lens[(fi + 1) % nfiles];
                }
                break;
            default: /* a u32 inside the payload set to an extreme */
                if (pos + 4 <= n) {
                    uint32_t v = (x & 1) ? 0xFFFFFFFFu : (uint32_t)(x >> 33) % 70;
                    memcpy(buf + pos, &v, 4);
                }
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("fuzz_store_replay");
    TCase *t = tcase_create("replay");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, replay_corpus);
    tcase_add_test(t, seeded_mutations);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(make_suite)

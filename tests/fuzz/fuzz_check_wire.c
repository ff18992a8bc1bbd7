/*
 * fuzz_check_wire.c - libFuzzer target for the external-collective
 * checker's formats (src/check/check_wire.c), which a rank parses from
 * store values other processes wrote: fingerprint records, group
 * histories, published positions, the failure record. The first input
 * byte picks the parser.
 *
 * Properties beyond "no crash, no out-of-bounds read" (ASan):
 *  - a decoded record encodes back to the same 80 bytes;
 *  - a parsed position, formatted again, parses to the same position;
 *  - every parsed string is NUL-terminated inside its field.
 * replay_main.c replays the checked-in corpus in every normal build.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check/check_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *v = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0: {
        chk_rec r;
        if (coh_chk_rec_decode(v, n, &r) == 0) {
            unsigned char back[80];
            must(coh_chk_rec_encode(&r, back) == 80 && n == 80);
            must(!memcmp(back, v, 80));
        }
        break;
    }
    case 1: {
        uint64_t gid;
        int member, k;
        chk_hline *h;
        char why[80];
        if (coh_chk_hist_parse(v, n, &gid, &member, &h, &k, why, sizeof why) == 0) {
            must(k >= 0 && k <= CHK_HIST && member >= 0);
            for (int i = 0; i < k; i++) {
                must(strlen(h[i].op) < sizeof h[i].op);
                must(strlen(h[i].sig) < sizeof h[i].sig);
                must(strlen(h[i].file) < sizeof h[i].file);
                must(!i || h[i].f.seq == h[i - 1].f.seq + 1);
            }
            free(h);
        } else {
            must(why[0] != 0);
        }
        break;
    }
    case 2: {
        chk_pos p, q;
        if (coh_chk_pos_parse(v, n, &p) == 0) {
            char buf[1024];
            size_t l = coh_chk_pos_format(&p, buf, sizeof buf);
            must(coh_chk_pos_parse(buf, l, &q) == 0);
            must(!memcmp(&p, &q, sizeof p));
        }
        break;
    }
    case 3: {
        int kind, member;
        uint64_t gid, seq;
        const char *text;
        if (coh_chk_fail_parse(v, n, &kind, &gid, &seq, &member, &text) == 0)
            must(text >= v && text <= v + n && kind >= COHORT_CHECK_MISMATCH &&
                 kind <= COHORT_CHECK_ABORTED);
        break;
    }
    }
    return 0;
}

/*
 * fuzz_ctl_abort.c - libFuzzer target for the store's abort record
 * "A <rank> <status>[:<seq>] <reason>" (src/group/ctl_wire.c), which the
 * monitor thread reads from bytes any store client can write
 * (src/group/monitor.c).
 *
 * Properties beyond "no crash, no out-of-bounds access":
 *  - the first input byte picks the group size (1..64), the rest is the
 *    record, so the rank bound is fuzzed too;
 *  - an accepted record names a rank inside the group, a known error status
 *    and a non-empty reason of at most 1023 bytes without control bytes
 *    other than '\n' and '\t';
 *  - formatting the parsed fields and parsing them again gives the same
 *    fields and no note (a fixpoint);
 *  - a refused record says why.
 * The checked-in corpus replays in every normal ctest run (replay_main.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "group/ctl_wire.h"

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
    int gsize = 1 + data[0] % 64;
    static coh_ctl_abort a, b;
    char err[96];
    err[0] = 0;
    if (coh_ctl_abort_parse((const char *)data + 1, size - 1, gsize, &a, err, sizeof err) != 0) {
        must(err[0] != 0);
        return 0;
    }
    must(a.from >= 0 && a.from < gsize);
    must(a.st >= COHORT_ERR_INVALID && a.st <= COHORT_ERR_UNSUPPORTED);
    size_t n = strlen(a.reason);
    must(n >= 1 && n < sizeof a.reason);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)a.reason[i];
        must((c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t');
    }
    static char rec[COH_ERRLEN + 96];
    int w = coh_ctl_abort_format(rec, sizeof rec, a.from, a.st, a.seq, a.reason);
    must(w > 0 && (size_t)w < sizeof rec);
    must(coh_ctl_abort_parse(rec, (size_t)w, gsize, &b, err, sizeof err) == 0);
    must(b.from == a.from && b.st == a.st && b.seq == a.seq && !strcmp(b.reason, a.reason));
    must(b.note[0] == 0);
    return 0;
}

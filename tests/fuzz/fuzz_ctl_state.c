/*
 * fuzz_ctl_state.c - libFuzzer target for the two records the monitor reads
 * from every rank's keys (src/group/ctl_wire.c): the fingerprint of a call
 * without progress (fp/<seq>/<r>: every number within its field's type, a
 * non-empty file without control bytes), and the state record a stall report
 * reads (state/<k>/<r>: "<last> <seq> <coll> <peer> <line>
 * <file>", src/group/ctl_wire.c), bytes any store client can write.
 *
 * Properties beyond "no crash, no out-of-bounds access": the first input
 * byte picks the group size (1..64); an accepted record has a known
 * operation, a peer of -1 or inside the group (and only for a send/recv),
 * a line >= 0 and a non-empty file of at most 255 bytes without control
 * bytes; a refused record says why. The checked-in corpus replays in every
 * normal ctest run (replay_main.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"
#include "contract/fp_record.h"
#include "group/ctl_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    int gsize = 1 + data[0] % 64;
    coh_fp_record f;
    char ferr[96] = "";
    if (coh_fp_record_parse((const char *)data + 1, size - 1, &f, ferr, sizeof ferr) != 0) {
        must(ferr[0] != 0);
    } else {
        must(f.coll >= 0 && f.coll <= 255 && f.dtype >= 0 && f.dtype <= 255);
        must(f.redop >= -128 && f.redop <= 127 && f.line >= 0);
        size_t fn = strlen(f.file);
        must(fn >= 1 && fn <= 255);
        for (size_t i = 0; i < fn; i++)
            must((unsigned char)f.file[i] >= ' ' && (unsigned char)f.file[i] != 0x7f);
    }
    coh_ctl_state s;
    char err[96] = "";
    if (coh_ctl_state_parse((const char *)data + 1, size - 1, gsize, &s, err, sizeof err) != 0) {
        must(err[0] != 0);
        return 0;
    }
    must(s.coll >= 0 && s.coll < COH_COLL_KIND_COUNT);
    must(s.peer == -1 || (s.peer >= 0 && s.peer < gsize &&
                          (s.coll == COH_COLL_SEND || s.coll == COH_COLL_RECV)));
    must(s.line >= 0);
    size_t n = strlen(s.file);
    must(n >= 1 && n <= 255);
    for (size_t i = 0; i < n; i++)
        must((unsigned char)s.file[i] >= ' ' && (unsigned char)s.file[i] != 0x7f);
    return 0;
}

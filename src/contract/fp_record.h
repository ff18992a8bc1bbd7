/* fp_record.h - a call's fingerprint as a text record in the store, for the
 * checks that compare through the store instead of the data path: the
 * out-of-band probe of a call without progress (fp/<seq>/<r>,
 * group/monitor.c) and COHORT_DEBUG=sync (dsync/<seq>/<r>, dsync.c):
 *   "<coll> <dtype> <count> <redop> <root> <tag> <line> <file>"
 * Bytes any holder of the job's token can write: every number must be
 * canonical decimal within its field's type (coll and dtype 0..255, redop
 * -128..127, root and tag int32, count uint64, line >= 0); the file is the
 * rest, cut to 255 bytes, control bytes as '?'. tests/fuzz/fuzz_ctl_state.c. */
#ifndef COH_CONTRACT_FP_RECORD_H
#define COH_CONTRACT_FP_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "core/group.h"

typedef struct coh_fp_record {
    int coll, dtype, redop;
    int32_t root, tag;
    uint64_t count;
    int line;
    char file[256];
} coh_fp_record;

/* Writes c's record into out (snprintf's return). */
int coh_fp_record_format(char *out, size_t len, const coh_call *c);

/* 0 on success; -1 with a reason in err. */
int coh_fp_record_parse(const char *rec, size_t len, coh_fp_record *f, char *err, size_t errlen);

#endif

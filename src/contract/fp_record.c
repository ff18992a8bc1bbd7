/* fp_record.c - a call's fingerprint as a store text record (fp_record.h). */
#include "contract/fp_record.h"

#include <stdio.h>
#include <string.h>

#include "util/txt.h"

int coh_fp_record_format(char *out, size_t len, const coh_call *c)
{
    return snprintf(out, len, "%d %d %llu %d %d %d %d %s", c->coll, c->dtype,
                    (unsigned long long)c->count, c->redop, c->root, c->tag, c->line,
                    c->file ? c->file : "?");
}

int coh_fp_record_parse(const char *rec, size_t len, coh_fp_record *f, char *err, size_t errlen)
{
    static const char *what[] = {"operation", "data type", "count", "reduce op",
                                 "root",      "tag",       "line"};
    static const int64_t lo[] = {0, 0, 0, -128, INT32_MIN, INT32_MIN, 0};
    static const int64_t hi[] = {255, 255, 0, 127, INT32_MAX, INT32_MAX, INT32_MAX};
    int64_t v[7] = {0};
    memset(f, 0, sizeof *f);
    size_t i = 0;
    for (int k = 0; k < 7; k++) {
        int r = k == 2 ? coh_txt_u64(rec, len, &i, 20, UINT64_MAX, &f->count)
                       : coh_txt_i64(rec, len, &i, lo[k], hi[k], &v[k]);
        if (r || coh_txt_sep(rec, len, &i)) {
            snprintf(err, errlen, "the %s is not a number in its range", what[k]);
            return -1;
        }
    }
    f->coll = (int)v[0];
    f->dtype = (int)v[1];
    f->redop = (int)v[3];
    f->root = (int32_t)v[4];
    f->tag = (int32_t)v[5];
    f->line = (int)v[6];
    if (coh_txt_rest(rec, len, i, f->file, sizeof f->file) == 0) {
        snprintf(err, errlen, "no file");
        return -1;
    }
    return 0;
}

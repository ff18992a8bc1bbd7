/* names.c - printable names for every contract field value, and their
 * reverse lookups (the dump parser). Reports must never print "(null)", so
 * every function here returns a string even for values out of range. */
#include <string.h>

#include "core/group.h"
#include "core/names.h"

static const char *const coll_names[COH_COLL_KIND_COUNT] = {
    [COH_COLL_NONE] = "none",
    [COH_COLL_ALL_REDUCE] = "all_reduce",
    [COH_COLL_BROADCAST] = "broadcast",
    [COH_COLL_REDUCE] = "reduce",
    [COH_COLL_ALL_GATHER] = "all_gather",
    [COH_COLL_GATHER] = "gather",
    [COH_COLL_SCATTER] = "scatter",
    [COH_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [COH_COLL_ALL_TO_ALL] = "all_to_all",
    [COH_COLL_BARRIER] = "barrier",
    [COH_COLL_SEND] = "send",
    [COH_COLL_RECV] = "recv",
    [COH_COLL_INTERNAL] = "internal",
    [COH_COLL_FINALIZE] = "finalize",
};

const char *coh_coll_name(int coll)
{
    if (coll >= 0 && coll < COH_COLL_KIND_COUNT && coll_names[coll])
        return coll_names[coll];
    return "unknown_op";
}

int coh_coll_from_name(const char *s)
{
    for (int i = 0; i < COH_COLL_KIND_COUNT; i++)
        if (coll_names[i] && !strcmp(s, coll_names[i]))
            return i;
    return -1;
}

static const char *const field_names[] = {
    [COH_FIELD_NONE] = "nothing",
    [COH_FIELD_GROUP] = "group id",
    [COH_FIELD_GENERATION] = "generation",
    [COH_FIELD_SEQ] = "sequence number",
    [COH_FIELD_OP] = "op",
    [COH_FIELD_DTYPE] = "dtype",
    [COH_FIELD_COUNT] = "count",
    [COH_FIELD_REDOP] = "reduce op",
    [COH_FIELD_ROOT] = "root",
    [COH_FIELD_TAG] = "tag",
    [COH_FIELD_STEP] = "algorithm step",
};

const char *coh_field_name(int f)
{
    if (f >= 0 && f < (int)COH_ARRAY_LEN(field_names))
        return field_names[f];
    return "unknown field";
}

/* Used when src/reduce's cohort_dtype_name/cohort_op_name return NULL (not
 * built yet, or an out-of-range value); the parser accepts both spellings. */
static const char *const dtype_fallback[COHORT_DTYPE_COUNT] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64",
};
static const char *const redop_fallback[COHORT_OP_COUNT] = {
    "sum", "prod", "min", "max", "avg", "band", "bor", "bxor",
};

const char *coh_dtype_str(int dt)
{
    if (dt < 0 || dt >= COHORT_DTYPE_COUNT)
        return "invalid_dtype";
    const char *n = cohort_dtype_name((cohort_dtype)dt);
    return n ? n : dtype_fallback[dt];
}

int coh_dtype_from_name(const char *s)
{
    for (int i = 0; i < COHORT_DTYPE_COUNT; i++) {
        const char *n = cohort_dtype_name((cohort_dtype)i);
        if ((n && !strcmp(s, n)) || !strcmp(s, dtype_fallback[i]))
            return i;
    }
    return -1;
}

const char *coh_redop_str(int op)
{
    if (op == -1)
        return "none";
    if (op < 0 || op >= COHORT_OP_COUNT)
        return "invalid_op";
    const char *n = cohort_op_name((cohort_op)op);
    return n ? n : redop_fallback[op];
}

int coh_redop_from_name(const char *s)
{
    if (!strcmp(s, "none"))
        return -1;
    for (int i = 0; i < COHORT_OP_COUNT; i++) {
        const char *n = cohort_op_name((cohort_op)i);
        if ((n && !strcmp(s, n)) || !strcmp(s, redop_fallback[i]))
            return i;
    }
    return -2;
}

static const char *const state_names[] = {
    [COH_ST_ISSUED] = "issued",
    [COH_ST_STARTED] = "started",
    [COH_ST_COMPLETED] = "completed",
    [COH_ST_FAILED] = "failed",
};

const char *coh_state_name(int st)
{
    if (st >= 0 && st < (int)COH_ARRAY_LEN(state_names))
        return state_names[st];
    return "unknown";
}

int coh_state_from_name(const char *s)
{
    for (int i = 0; i < (int)COH_ARRAY_LEN(state_names); i++)
        if (!strcmp(s, state_names[i]))
            return i;
    return -1;
}

int coh_status_from_name(const char *s)
{
    /* The status enum is append-only and small; stop at the first unknown. */
    for (int i = 0; i < 64; i++) {
        const char *n = cohort_status_name((cohort_status)i);
        if (!strcmp(n, "COHORT_ERR_UNKNOWN"))
            break;
        if (!strcmp(s, n))
            return i;
    }
    return -1;
}

const char *coh_site_base(const char *file)
{
    if (!file || !*file)
        return "?";
    const char *b = strrchr(file, '/');
    return b && b[1] ? b + 1 : file;
}

uint32_t coh_site_hash(const char *file, int line)
{
    /* Basename only: the same source file has different absolute paths on
     * different hosts (build trees), and reports print basenames anyway. */
    const char *b = coh_site_base(file);
    uint64_t h = coh_hash64(b, strlen(b), 0x5173u);
    h = coh_hash64(&line, sizeof line, h);
    return (uint32_t)(h ^ (h >> 32));
}

int coh_site_equal(const char *fa, int la, const char *fb, int lb)
{
    return la == lb && !strcmp(coh_site_base(fa), coh_site_base(fb));
}

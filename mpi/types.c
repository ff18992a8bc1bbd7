/*
 * types.c - type signatures, as MPI matches them: the sequence of basic
 * types of `count` elements of a datatype, displacements ignored, so that
 * 2 x MPI_INT equals 1 x contiguous(2, MPI_INT) while MPI_FLOAT differs
 * from MPI_INT.
 *
 * A datatype is flattened once (MPI_Type_get_envelope / get_contents,
 * recursively) into runs of basic types, then reduced to its primitive
 * unit U and multiplicity m (the sequence is U repeated m times, U not
 * itself a repetition). count x datatype is then U repeated count * m
 * times: the fingerprint carries hash(U) and count * m, which compare equal
 * exactly when the two full signatures are equal. Cached per handle; the
 * entry is dropped when the program frees the datatype (MPI_Type_free).
 *
 * Limits: a signature of more than RUNS_MAX runs is summarised as its byte
 * size ("derived type of N bytes"); a unit whose first and last basic types
 * are equal is taken as primitive (so U x 2 and contiguous(2, U) of such a
 * U would differ) - docs/mpi.md.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

#define RUNS_MAX 4096

typedef struct run {
    const char *t; /* basic type name (a literal or an interned copy) */
    uint64_t n;
} run;

typedef struct runs {
    run *r;
    size_t n, cap;
    int overflow;
} runs;

static void push(runs *R, const char *t, uint64_t n)
{
    if (R->overflow || !n)
        return;
    if (R->n && R->r[R->n - 1].t == t) {
        R->r[R->n - 1].n += n;
        return;
    }
    if (R->n >= RUNS_MAX) {
        R->overflow = 1;
        return;
    }
    if (R->n == R->cap) {
        size_t nc = R->cap ? R->cap * 2 : 16;
        run *nr = realloc(R->r, nc * sizeof *nr);
        if (!nr) {
            R->overflow = 1;
            return;
        }
        R->r = nr, R->cap = nc;
    }
    R->r[R->n++] = (run){t, n};
}

/* Appends S k times. */
static void append_rep(runs *R, const runs *S, uint64_t k)
{
    if (S->overflow) {
        R->overflow = 1;
        return;
    }
    if (!k || !S->n)
        return;
    if (S->n == 1) {
        push(R, S->r[0].t, S->r[0].n * k);
        return;
    }
    if (k > RUNS_MAX || S->n * k > RUNS_MAX) {
        R->overflow = 1;
        return;
    }
    for (uint64_t i = 0; i < k; i++)
        for (size_t j = 0; j < S->n; j++)
            push(R, S->r[j].t, S->r[j].n);
}

/* ---- basic types: names by handle ---- */

typedef struct basic {
    MPI_Datatype dt;
    const char *name;
} basic;

#define B(x) {x, #x}
static basic basics[] = {
    B(MPI_CHAR), B(MPI_SIGNED_CHAR), B(MPI_UNSIGNED_CHAR), B(MPI_BYTE), B(MPI_WCHAR),
    B(MPI_SHORT), B(MPI_UNSIGNED_SHORT), B(MPI_INT), B(MPI_UNSIGNED), B(MPI_LONG),
    B(MPI_UNSIGNED_LONG), B(MPI_LONG_LONG_INT), B(MPI_UNSIGNED_LONG_LONG), B(MPI_FLOAT),
    B(MPI_DOUBLE), B(MPI_LONG_DOUBLE), B(MPI_INT8_T), B(MPI_INT16_T), B(MPI_INT32_T),
    B(MPI_INT64_T), B(MPI_UINT8_T), B(MPI_UINT16_T), B(MPI_UINT32_T), B(MPI_UINT64_T),
    B(MPI_C_BOOL), B(MPI_C_FLOAT_COMPLEX), B(MPI_C_DOUBLE_COMPLEX),
    B(MPI_C_LONG_DOUBLE_COMPLEX), B(MPI_AINT), B(MPI_OFFSET), B(MPI_COUNT), B(MPI_PACKED),
    B(MPI_INTEGER), B(MPI_REAL), B(MPI_DOUBLE_PRECISION), B(MPI_COMPLEX), B(MPI_LOGICAL),
    B(MPI_CHARACTER), B(MPI_DOUBLE_COMPLEX),
};

/* Predefined pair types are basic handles whose signature has two parts. */
typedef struct pair {
    MPI_Datatype dt;
    MPI_Datatype a, b;
} pair;
static pair pairs[] = {
    {MPI_FLOAT_INT, MPI_FLOAT, MPI_INT}, {MPI_DOUBLE_INT, MPI_DOUBLE, MPI_INT},
    {MPI_LONG_INT, MPI_LONG, MPI_INT},   {MPI_2INT, MPI_INT, MPI_INT},
    {MPI_SHORT_INT, MPI_SHORT, MPI_INT}, {MPI_LONG_DOUBLE_INT, MPI_LONG_DOUBLE, MPI_INT},
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Names of named types outside the table, interned (never freed). */
static char **extra_names;
static size_t n_extra;

static const char *intern_name(const char *s)
{
    for (size_t i = 0; i < n_extra; i++)
        if (!strcmp(extra_names[i], s))
            return extra_names[i];
    char **nv = realloc(extra_names, (n_extra + 1) * sizeof *nv);
    if (!nv)
        return "MPI_(unknown)";
    extra_names = nv;
    char *c = strdup(s);
    if (!c)
        return "MPI_(unknown)";
    extra_names[n_extra++] = c;
    return c;
}

static const char *basic_name(MPI_Datatype dt)
{
    for (size_t i = 0; i < sizeof basics / sizeof basics[0]; i++)
        if (basics[i].dt == dt)
            return basics[i].name;
    char nm[MPI_MAX_OBJECT_NAME + 1] = "";
    int len = 0;
    PMPI_Type_get_name(dt, nm, &len);
    return intern_name(nm[0] ? nm : "MPI_(unnamed predefined type)");
}

static void flatten(MPI_Datatype dt, runs *R, int depth);

static void flatten_rep(MPI_Datatype dt, uint64_t k, runs *R, int depth)
{
    runs S = {0};
    flatten(dt, &S, depth + 1);
    append_rep(R, &S, k);
    free(S.r);
}

static int is_named(MPI_Datatype dt)
{
    int ni, na, nd, comb;
    PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb);
    return comb == MPI_COMBINER_NAMED;
}

static void flatten(MPI_Datatype dt, runs *R, int depth)
{
    if (R->overflow)
        return;
    if (depth > 64) {
        R->overflow = 1;
        return;
    }
    int ni, na, nd, comb;
    PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb);
    if (comb == MPI_COMBINER_NAMED) {
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
            if (pairs[i].dt == dt) {
                push(R, basic_name(pairs[i].a), 1);
                push(R, basic_name(pairs[i].b), 1);
                return;
            }
        push(R, basic_name(dt), 1);
        return;
    }
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    if (!ints || !addrs || !types) {
        free(ints), free(addrs), free(types);
        R->overflow = 1;
        return;
    }
    PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, types);
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
        flatten(types[0], R, depth + 1);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        flatten_rep(types[0], (uint64_t)ints[0], R, depth);
        break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR:
        flatten_rep(types[0], (uint64_t)ints[0] * (uint64_t)ints[1], R, depth);
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
        flatten_rep(types[0], (uint64_t)ints[0] * (uint64_t)ints[1], R, depth);
        break;
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED: {
        runs S = {0};
        flatten(types[0], &S, depth + 1);
        for (int i = 0; i < ints[0] && !R->overflow; i++)
            append_rep(R, &S, (uint64_t)ints[1 + i]);
        free(S.r);
        break;
    }
    case MPI_COMBINER_STRUCT:
        for (int i = 0; i < ints[0] && !R->overflow; i++)
            flatten_rep(types[i], (uint64_t)ints[1 + i], R, depth);
        break;
    case MPI_COMBINER_SUBARRAY: {
        uint64_t k = 1;
        int nd2 = ints[0];
        for (int i = 0; i < nd2; i++)
            k *= (uint64_t)ints[1 + nd2 + i]; /* subsizes */
        flatten_rep(types[0], k, R, depth);
        break;
    }
    case MPI_COMBINER_DARRAY: {
        /* Every element is the old type: its count is size / old size. */
        int sz = 0, osz = 0;
        PMPI_Type_size(dt, &sz);
        PMPI_Type_size(types[0], &osz);
        flatten_rep(types[0], osz > 0 ? (uint64_t)(sz / osz) : 0, R, depth);
        break;
    }
    default: {
        /* F90 parameterised types and anything newer: named by the
         * combiner and its integers. */
        char nm[96];
        int p = snprintf(nm, sizeof nm, "combiner%d(", comb);
        for (int i = 0; i < ni && p < (int)sizeof nm - 12; i++)
            p += snprintf(nm + p, sizeof nm - (size_t)p, "%s%d", i ? "," : "", ints[i]);
        snprintf(nm + p, sizeof nm - (size_t)p, ")");
        push(R, intern_name(nm), 1);
        break;
    }
    }
    for (int i = 0; i < nd; i++)
        if (!is_named(types[i]))
            PMPI_Type_free(&types[i]);
    free(ints), free(addrs), free(types);
}

/* ---- canonical form ---- */

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The smallest k such that the run list is runs[0..k) repeated. */
static size_t run_period(const runs *R)
{
    size_t n = R->n;
    if (n < 2 || R->r[0].t == R->r[n - 1].t)
        return n; /* see the file comment */
    size_t *f = malloc(n * sizeof *f);
    if (!f)
        return n;
    f[0] = 0;
    for (size_t i = 1, k = 0; i < n; i++) {
        while (k && (R->r[i].t != R->r[k].t || R->r[i].n != R->r[k].n))
            k = f[k - 1];
        if (R->r[i].t == R->r[k].t && R->r[i].n == R->r[k].n)
            k++;
        f[i] = k;
    }
    size_t p = n - f[n - 1];
    free(f);
    return n % p == 0 ? p : n;
}

static void canon(MPI_Datatype dt, cm_sig *out, char *text, size_t tlen)
{
    runs R = {0};
    flatten(dt, &R, 0);
    uint64_t h = 0xcbf29ce484222325ull;
    if (!R.overflow && !R.n) {
        /* No basic types at all: any count of it is the empty signature,
         * which matches any other empty one (0 x MPI_INT). */
        snprintf(text, tlen, "empty type");
        out->hash = 0;
        out->m = 0;
        free(R.r);
        return;
    }
    if (R.overflow) {
        int sz = 0;
        PMPI_Type_size(dt, &sz);
        snprintf(text, tlen, "derived type of %d bytes (too long to compare by signature)", sz);
        out->hash = fnv(text, strlen(text), h);
        out->m = 1;
        free(R.r);
        return;
    }
    uint64_t m;
    size_t units;
    if (R.n == 1) {
        m = R.r[0].n;
        R.r[0].n = 1;
        units = 1;
    } else {
        units = run_period(&R);
        m = R.n / units;
    }
    size_t p = 0;
    text[0] = 0;
    if (units > 1 && p < tlen)
        p += (size_t)snprintf(text + p, tlen - p, "{");
    for (size_t i = 0; i < units; i++) {
        h = fnv(R.r[i].t, strlen(R.r[i].t) + 1, h);
        h = fnv(&R.r[i].n, sizeof R.r[i].n, h);
        if (p < tlen) {
            if (R.r[i].n > 1)
                p += (size_t)snprintf(text + p, tlen - p, "%s%s x%llu", i ? ", " : "", R.r[i].t,
                                      (unsigned long long)R.r[i].n);
            else
                p += (size_t)snprintf(text + p, tlen - p, "%s%s", i ? ", " : "", R.r[i].t);
        }
    }
    if (units > 1 && p < tlen)
        snprintf(text + p, tlen - p, "}");
    out->hash = h | 1;
    out->m = m;
    free(R.r);
}

/* ---- the cache: handle -> signature ---- */

typedef struct centry {
    uintptr_t key; /* 0: empty */
    cm_sig sig;
    char *text;
} centry;

static centry *cache;
static size_t cache_cap, cache_n;

static uintptr_t key_of(MPI_Datatype dt)
{
    uintptr_t k = 0;
    memcpy(&k, &dt, sizeof dt < sizeof k ? sizeof dt : sizeof k);
    return k ^ 0x5bd1e995u; /* never 0 for a real handle */
}

static centry *find(uintptr_t k)
{
    if (!cache_cap)
        return NULL;
    size_t i = (k * 0x9e3779b97f4a7c15ull >> 20) & (cache_cap - 1);
    while (cache[i].key) {
        if (cache[i].key == k)
            return &cache[i];
        i = (i + 1) & (cache_cap - 1);
    }
    return NULL;
}

static void insert(uintptr_t k, const cm_sig *sig, char *text)
{
    if ((cache_n + 1) * 2 > cache_cap) {
        size_t nc = cache_cap ? cache_cap * 2 : 256;
        centry *nv = calloc(nc, sizeof *nv);
        if (!nv) {
            free(text);
            return;
        }
        for (size_t i = 0; i < cache_cap; i++)
            if (cache[i].key) {
                size_t j = (cache[i].key * 0x9e3779b97f4a7c15ull >> 20) & (nc - 1);
                while (nv[j].key)
                    j = (j + 1) & (nc - 1);
                nv[j] = cache[i];
            }
        free(cache);
        cache = nv, cache_cap = nc;
    }
    size_t i = (k * 0x9e3779b97f4a7c15ull >> 20) & (cache_cap - 1);
    while (cache[i].key)
        i = (i + 1) & (cache_cap - 1);
    cache[i].key = k;
    cache[i].sig = *sig;
    cache[i].text = text;
    cache[i].sig.text = text;
    cache_n++;
}

/* The last lookup per thread, valid while no datatype was freed since. */
static _Atomic unsigned long type_gen = 1;
static CM_TLS MPI_Datatype tl_dt;
static CM_TLS cm_sig tl_sig;
static CM_TLS unsigned long tl_gen;

void cm_type_sig(MPI_Datatype dt, cm_sig *out)
{
    if (dt == MPI_DATATYPE_NULL) {
        out->hash = 0, out->text = NULL, out->m = 0;
        return;
    }
    unsigned long gen = atomic_load_explicit(&type_gen, memory_order_acquire);
    if (tl_gen == gen && tl_dt == dt) {
        *out = tl_sig;
        return;
    }
    uintptr_t k = key_of(dt);
    pthread_mutex_lock(&mu);
    centry *e = find(k);
    if (e) {
        *out = e->sig;
        pthread_mutex_unlock(&mu);
        tl_dt = dt, tl_sig = *out, tl_gen = gen;
        return;
    }
    char text[200];
    cm_sig s;
    canon(dt, &s, text, sizeof text);
    /* Texts are never freed while the process runs: the checker keeps
     * pointers to what it interned, and a freed type's entry may be
     * re-created for a new handle. Bounded by the number of distinct
     * datatypes the program makes. */
    char *t = strdup(text);
    s.text = t;
    insert(k, &s, t);
    *out = s;
    pthread_mutex_unlock(&mu);
    tl_dt = dt, tl_sig = s, tl_gen = gen;
}

void cm_type_forget(MPI_Datatype dt)
{
    atomic_fetch_add(&type_gen, 1);
    uintptr_t k = key_of(dt);
    pthread_mutex_lock(&mu);
    centry *e = find(k);
    if (e) {
        /* Backward-shift deletion keeps the probe chains intact. */
        size_t i = (size_t)(e - cache);
        e->key = 0;
        cache_n--;
        for (size_t j = (i + 1) & (cache_cap - 1); cache[j].key; j = (j + 1) & (cache_cap - 1)) {
            centry c = cache[j];
            cache[j].key = 0;
            cache_n--;
            insert(c.key, &c.sig, c.text);
        }
    }
    pthread_mutex_unlock(&mu);
}

/* ---- reduce ops ---- */

typedef struct opname {
    MPI_Op op;
    const char *name;
} opname;
#define O(x) {x, #x}
static opname ops[] = {O(MPI_SUM),  O(MPI_PROD), O(MPI_MAX),    O(MPI_MIN),  O(MPI_LAND),
                       O(MPI_LOR),  O(MPI_LXOR), O(MPI_BAND),   O(MPI_BOR),  O(MPI_BXOR),
                       O(MPI_MAXLOC), O(MPI_MINLOC), O(MPI_REPLACE), O(MPI_NO_OP)};

const char *cm_op_name(MPI_Op op)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].op == op)
            return ops[i].name;
    return "user-defined op";
}

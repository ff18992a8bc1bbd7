/* pmi_wire.h - the PMI-1 "simple" wire protocol MPICH's Hydra speaks to its
 * ranks over the inherited PMI_FD: one line per message, space-separated
 * key=value fields, the first one cmd=NAME. Replies come from the
 * launcher: the parser bounds everything and refuses what it does not
 * understand (tests/fuzz/fuzz_pmi_wire.c). */
#ifndef COH_PMI_WIRE_H
#define COH_PMI_WIRE_H

#include <stddef.h>

#define COH_PMI_LINE_MAX 2048 /* Hydra's vallen_max is 1024 */
#define COH_PMI_FIELDS_MAX 8
#define COH_PMI_KEY_MAX 64
#define COH_PMI_VAL_MAX 1024

typedef struct coh_pmi_msg {
    int n; /* fields; f[0] is cmd */
    struct {
        char key[COH_PMI_KEY_MAX + 1];
        char val[COH_PMI_VAL_MAX + 1];
    } f[COH_PMI_FIELDS_MAX];
} coh_pmi_msg;

/* Parses one line (len bytes, without or with its '\n'). 0 on success, -1
 * with a description in err: no cmd first, an empty or over-long key or
 * value, a field without '=', too many fields, a NUL or control byte, a
 * duplicated key. */
int coh_pmi_parse(const char *line, size_t len, coh_pmi_msg *m, char *err, size_t errlen);

/* The value of key, or NULL. */
const char *coh_pmi_get(const coh_pmi_msg *m, const char *key);

/* A value that can travel in a field: 1..COH_PMI_VAL_MAX printable bytes,
 * no space and no '='. */
int coh_pmi_value_ok(const char *v);

/* Writes m as a line ending in '\n'; returns its length, or -1 if it does
 * not fit in len or a field could not be parsed back. */
int coh_pmi_format(const coh_pmi_msg *m, char *out, size_t len);

#endif

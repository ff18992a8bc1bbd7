/*
 * fuzz_pmi_wire.c - libFuzzer target for the PMI-1 wire parser
 * (src/group/pmi_wire.c), which reads the replies MPICH's launcher writes on
 * PMI_FD (src/group/pmi.c).
 *
 * Properties beyond "no crash, no out-of-bounds access":
 *  - a parsed line has 1..8 fields, cmd=NAME first, keys of 1..64 and
 *    values of 0..1024 printable bytes without space, unique keys;
 *  - formatting a parsed message and parsing it again gives the same fields
 *    (a fixpoint), and coh_pmi_get finds each field's value;
 *  - coh_pmi_value_ok accepts no value with a space, '=' or control byte.
 * The checked-in corpus replays in every normal ctest run (replay_main.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "group/pmi_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static coh_pmi_msg m, m2;
    char err[96];
    if (coh_pmi_parse((const char *)data, size, &m, err, sizeof err) == 0) {
        must(m.n >= 1 && m.n <= COH_PMI_FIELDS_MAX);
        must(!strcmp(m.f[0].key, "cmd") && m.f[0].val[0]);
        for (int i = 0; i < m.n; i++) {
            size_t kl = strlen(m.f[i].key), vl = strlen(m.f[i].val);
            must(kl >= 1 && kl <= COH_PMI_KEY_MAX && vl <= COH_PMI_VAL_MAX);
            must(!strpbrk(m.f[i].key, " =\n"));
            must(!strpbrk(m.f[i].val, " \n"));
            must(coh_pmi_get(&m, m.f[i].key) == m.f[i].val);
            for (int j = 0; j < i; j++)
                must(strcmp(m.f[i].key, m.f[j].key));
        }
        static char line[COH_PMI_FIELDS_MAX * (COH_PMI_KEY_MAX + COH_PMI_VAL_MAX + 2) + 2];
        int n = coh_pmi_format(&m, line, sizeof line);
        must(n > 0 && line[n - 1] == '\n');
        if (n - 1 <= COH_PMI_LINE_MAX) {
            must(coh_pmi_parse(line, (size_t)n, &m2, err, sizeof err) == 0);
            must(m2.n == m.n);
            for (int i = 0; i < m.n; i++)
                must(!strcmp(m.f[i].key, m2.f[i].key) && !strcmp(m.f[i].val, m2.f[i].val));
        }
    } else {
        must(err[0] != 0);
    }
    /* the value check, on the input as a string */
    char v[COH_PMI_VAL_MAX + 2];
    size_t vl = size < sizeof v - 1 ? size : sizeof v - 1;
    memcpy(v, data, vl);
    v[vl] = 0;
    if (coh_pmi_value_ok(v)) {
        must(strlen(v) >= 1 && strlen(v) <= COH_PMI_VAL_MAX);
        for (const char *c = v; *c; c++)
            must(*c > ' ' && *c < 0x7f && *c != '=');
    }
    return 0;
}

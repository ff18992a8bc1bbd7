/* pmi_wire.c - parsing and writing PMI-1 wire lines (pmi_wire.h). */
#include "group/pmi_wire.h"

#include <stdio.h>
#include <string.h>

static int bad(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    return -1;
}

/* printable, not a field separator */
static int field_byte(unsigned char c) { return c > ' ' && c < 0x7f; }

int coh_pmi_parse(const char *line, size_t len, coh_pmi_msg *m, char *err, size_t errlen)
{
    m->n = 0;
    if (len > 0 && line[len - 1] == '\n')
        len--;
    if (len > COH_PMI_LINE_MAX)
        return bad(err, errlen, "line longer than 2048 bytes");
    size_t i = 0;
    for (;;) {
        while (i < len && line[i] == ' ')
            i++;
        if (i == len)
            break;
        size_t ks = i;
        while (i < len && line[i] != '=' && line[i] != ' ') {
            if (!field_byte((unsigned char)line[i]))
                return bad(err, errlen, "control or non-ASCII byte in a key");
            i++;
        }
        size_t kl = i - ks;
        if (i == len || line[i] != '=')
            return bad(err, errlen, "field without '='");
        if (kl == 0 || kl > COH_PMI_KEY_MAX)
            return bad(err, errlen, kl ? "key longer than 64 bytes" : "empty key");
        i++; /* '=' */
        size_t vs = i;
        while (i < len && line[i] != ' ') {
            /* '=' may appear in a value (msg=...=...) */
            if (!field_byte((unsigned char)line[i]))
                return bad(err, errlen, "control or non-ASCII byte in a value");
            i++;
        }
        size_t vl = i - vs;
        if (vl > COH_PMI_VAL_MAX)
            return bad(err, errlen, "value longer than 1024 bytes");
        if (m->n == COH_PMI_FIELDS_MAX)
            return bad(err, errlen, "more than 8 fields");
        memcpy(m->f[m->n].key, line + ks, kl);
        m->f[m->n].key[kl] = 0;
        memcpy(m->f[m->n].val, line + vs, vl);
        m->f[m->n].val[vl] = 0;
        for (int j = 0; j < m->n; j++)
            if (!strcmp(m->f[j].key, m->f[m->n].key))
                return bad(err, errlen, "a key given twice");
        m->n++;
    }
    if (m->n == 0 || strcmp(m->f[0].key, "cmd") || !m->f[0].val[0])
        return bad(err, errlen, "no cmd=NAME first");
    return 0;
}

const char *coh_pmi_get(const coh_pmi_msg *m, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->f[i].key, key))
            return m->f[i].val;
    return NULL;
}

int coh_pmi_value_ok(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > COH_PMI_VAL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!field_byte((unsigned char)v[i]) || v[i] == '=')
            return 0;
    return 1;
}

int coh_pmi_format(const coh_pmi_msg *m, char *out, size_t len)
{
    size_t o = 0;
    for (int i = 0; i < m->n; i++) {
        int w = snprintf(out + o, len - o, "%s%s=%s", i ? " " : "", m->f[i].key, m->f[i].val);
        if (w < 0 || (size_t)w >= len - o)
            return -1;
        o += (size_t)w;
    }
    if (o + 2 > len)
        return -1;
    out[o++] = '\n';
    out[o] = 0;
    return (int)o;
}

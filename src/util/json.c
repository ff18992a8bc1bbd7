/* json.c - the one JSON string escaper (see cohort_json.h). */
#include "cohort_json.h"

#include <string.h>

/* Where escaped text goes: a bounded buffer or a FILE. */
typedef struct sink {
    char *buf;
    size_t buflen, *pos;
    FILE *f;
} sink;

static void emit(sink *k, const char *p, size_t n)
{
    if (k->f) {
        fwrite(p, 1, n, k->f);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (*k->pos + 1 < k->buflen) {
            k->buf[*k->pos] = p[i];
            k->buf[*k->pos + 1] = 0;
        }
        (*k->pos)++;
    }
}

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    unsigned min, cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, min = 0x80, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, min = 0x800, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, min = 0x10000, cp = c & 0x07;
    else
        return 0;
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k;
}

static void escape(sink *k, const unsigned char *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    emit(k, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c;
            emit(k, e, 2);
            i++;
        } else if (c == '\n') {
            emit(k, "\\n", 2);
            i++;
        } else if (c == '\t') {
            emit(k, "\\t", 2);
            i++;
        } else if (c == '\r') {
            emit(k, "\\r", 2);
            i++;
        } else if (c >= 0x20 && c < 0x80) {
            emit(k, (const char *)p + i, 1);
            i++;
        } else {
            size_t l = c < 0x20 ? 0 : utf8_len(p + i, n - i);
            if (l) {
                emit(k, (const char *)p + i, l);
                i += l;
            } else {
                /* A control byte or a byte that is not UTF-8: \u00XX. */
                memcpy(e, "\\u00", 4);
                e[4] = hex[c >> 4];
                e[5] = hex[c & 15];
                emit(k, e, 6);
                i++;
            }
        }
    }
    emit(k, "\"", 1);
}

void cohort_json_strn(char *buf, size_t buflen, size_t *pos, const void *s, size_t n)
{
    if (!pos)
        return;
    sink k = {buf, buf ? buflen : 0, pos, NULL};
    escape(&k, s ? s : (const void *)"", s ? n : 0);
}

void cohort_json_str(char *buf, size_t buflen, size_t *pos, const char *s)
{
    cohort_json_strn(buf, buflen, pos, s, s ? strlen(s) : 0);
}

void cohort_json_fputn(FILE *f, const void *s, size_t n)
{
    if (!f)
        return;
    sink k = {NULL, 0, NULL, f};
    escape(&k, s ? s : (const void *)"", s ? n : 0);
}

void cohort_json_fputs(FILE *f, const char *s)
{
    cohort_json_fputn(f, s, s ? strlen(s) : 0);
}

/*
 * cohort_json.h - the one JSON string writer of the library and the tools
 * (the flight recorder's JSON Lines, cohort-trace, cohort-perf, cohort-kv),
 * exported so that a tool or binding quotes names, keys and values exactly
 * as the dumps do (since 0.3).
 *
 * Any byte string becomes a valid JSON string literal: quotes, backslashes
 * and control bytes are escaped, valid UTF-8 passes through, and each byte of
 * invalid UTF-8 (stray continuation bytes, overlong forms, surrogates, code
 * points past U+10FFFF, truncated sequences) is written as \u00XX - U+0080..
 * U+00FF standing for the byte, so the output stays valid for every parser
 * and the original byte is still recognisable.
 */
#ifndef COHORT_JSON_H
#define COHORT_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "cohort_status.h" /* COHORT_API */

#ifdef __cplusplus
extern "C" {
#endif

/* Appends s (NULL: "") as a JSON string literal, quotes included, at
 * buf[*pos]. Never writes past buflen (buf stays NUL-terminated); *pos
 * advances by the full length needed, so *pos >= buflen means it was cut.
 * buf NULL (or buflen 0) only measures; pos NULL does nothing. */
COHORT_API void cohort_json_str(char *buf, size_t buflen, size_t *pos, const char *s);

/* The same for n bytes of s (NUL bytes included, as \u0000; s NULL: ""). */
COHORT_API void cohort_json_strn(char *buf, size_t buflen, size_t *pos, const void *s, size_t n);

/* Writes s (NULL: "") as a JSON string literal to f, never cut (f NULL:
 * nothing). */
COHORT_API void cohort_json_fputs(FILE *f, const char *s);
/* ... and n bytes of s. */
COHORT_API void cohort_json_fputn(FILE *f, const void *s, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* COHORT_JSON_H */

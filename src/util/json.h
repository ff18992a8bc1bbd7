/*
 * json.h - the one JSON string writer of the library and the tools (the
 * flight recorder's JSON Lines, cohort-trace, cohort-perf, cohort-kv).
 *
 * Any byte string becomes a valid JSON string literal: quotes, backslashes
 * and control bytes are escaped, valid UTF-8 passes through, and each byte of
 * invalid UTF-8 (stray continuation bytes, overlong forms, surrogates, code
 * points past U+10FFFF, truncated sequences) is written as \u00XX - U+0080..
 * U+00FF standing for the byte, so the output stays valid for every parser
 * and the original byte is still recognisable.
 */
#ifndef COH_UTIL_JSON_H
#define COH_UTIL_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Appends s (NULL: "") as a JSON string literal, quotes included, at
 * buf[*pos]. Never writes past buflen (buf stays NUL-terminated); *pos
 * advances by the full length needed, so *pos >= buflen means it was cut. */
void coh_json_str(char *buf, size_t buflen, size_t *pos, const char *s);

/* The same for n bytes of s (NUL bytes included, as \u0000). */
void coh_json_strn(char *buf, size_t buflen, size_t *pos, const void *s, size_t n);

/* Writes s (NULL: "") as a JSON string literal to f, never cut. */
void coh_json_fputs(FILE *f, const char *s);
/* ... and n bytes of s. */
void coh_json_fputn(FILE *f, const void *s, size_t n);

#endif

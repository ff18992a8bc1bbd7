/*
 * jsonl.h - the flight recorder's JSON Lines format: writing header and
 * entry lines, and parsing any one line back (cohort-trace, the contract
 * report, the fuzz target). Format and examples: docs/trace.md.
 *
 * The parser is a pure function over (pointer, length): no NUL needed, no
 * allocation, no global state. Any input gives either a parsed record or
 * COH_TL_INVALID with a reason; it never reads past len.
 */
#ifndef COH_TRACE_JSONL_H
#define COH_TRACE_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"
#include "cohort_json.h" /* cohort_json_str: the one JSON string escaper */
#include "cohort_trace.h"

#define COH_TL_VERSION 1

enum coh_tl_kind {
    COH_TL_INVALID = 0,
    COH_TL_HEADER = 1,   /* {"cohort_trace":1,"job":...}: first line of a dump */
    COH_TL_ENTRY = 2,    /* {"seq":7,"op":"all_reduce",...}: one call */
    COH_TL_CONTRACT = 3, /* {"cohort_contract":1,"rank":3,...}: first line of a
                          * contract history published in the store */
};

/* The header and entry records are the public ones (cohort_trace.h), so
 * that cohort_trace_parse_line hands out what this parser fills. */
typedef cohort_trace_header coh_tl_header;
typedef cohort_trace_entry coh_tl_entry;
_Static_assert(COH_ERRLEN == COHORT_TRACE_TEXT, "cohort_trace_header.reason is an error text");

typedef struct coh_tl_contract {
    int version;
    int rank;
    uint32_t generation, group;
    int has_detected;           /* this rank detected the mismatch itself */
    char detected[COH_ERRLEN];  /* its local message */
} coh_tl_contract;

typedef struct coh_tl_line {
    int kind; /* coh_tl_kind */
    union {
        coh_tl_header hdr;
        coh_tl_entry ent;
        coh_tl_contract con;
    } u;
} coh_tl_line;

/* Parses one line (a trailing '\n' / "\r\n" is allowed). Returns out->kind;
 * on COH_TL_INVALID, err (may be NULL) says why, e.g. "byte 17: expected
 * ':'". */
int coh_tl_parse(const char *s, size_t len, coh_tl_line *out, char *err, size_t errlen);

/* Writers: format one line including the trailing '\n' into buf and return
 * its length; lines longer than buflen are cut at a field boundary and the
 * cut is reported by a return value >= buflen (snprintf style). */
size_t coh_tl_fmt_header(char *buf, size_t buflen, const coh_tl_header *h);
size_t coh_tl_fmt_entry(char *buf, size_t buflen, const coh_trace_entry *e);
size_t coh_tl_fmt_contract(char *buf, size_t buflen, const coh_tl_contract *c);

/* Converts a parsed entry back into a fingerprint (file points into e). */
void coh_tl_entry_fp(const coh_tl_entry *e, uint32_t group, uint32_t generation,
                     cohort_fingerprint *fp);

#endif

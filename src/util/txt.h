/* txt.h - bounded token readers for the text records ranks exchange
 * through the store (rendezvous, state and fingerprint records): bytes any
 * holder of the job's token can write. Each reads at rec[*i] of a len-byte
 * record (no NUL needed), advances *i past what it took, and returns 0, or
 * -1 without a partial value. Canonical decimal only, as printf writes it: no
 * sign where none is allowed, no '+', no leading zeros, no spaces, no
 * overflow (sscanf's %d is undefined on it). */
#ifndef COH_UTIL_TXT_H
#define COH_UTIL_TXT_H

#include <stddef.h>
#include <stdint.h>

/* Digits only, at most maxd of them, value <= hi. */
int coh_txt_u64(const char *rec, size_t len, size_t *i, int maxd, uint64_t hi, uint64_t *out);

/* An optional '-' (only where lo < 0; "-0" refused), then as coh_txt_u64,
 * value within [lo, hi]. */
int coh_txt_i64(const char *rec, size_t len, size_t *i, int64_t lo, int64_t hi, int64_t *out);

/* One ' '. */
int coh_txt_sep(const char *rec, size_t len, size_t *i);

/* The rest of the record from i as text: cut to outlen - 1 bytes, control
 * bytes (and DEL) as '?'. Returns its length. */
size_t coh_txt_rest(const char *rec, size_t len, size_t i, char *out, size_t outlen);

#endif

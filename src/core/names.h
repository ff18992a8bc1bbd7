/*
 * names.h - printable names for every contract field value and their
 * reverse lookups, shared by the contract's reports and the flight
 * recorder's dumps and parser (names.c). coh_coll_name is in group.h.
 */
#ifndef COH_CORE_NAMES_H
#define COH_CORE_NAMES_H

#include <stdint.h>

/* Contract fields, in the order they are reported. */
enum coh_field {
    COH_FIELD_NONE = 0,
    COH_FIELD_GROUP,
    COH_FIELD_GENERATION,
    COH_FIELD_SEQ,
    COH_FIELD_OP,      /* collective kind */
    COH_FIELD_DTYPE,
    COH_FIELD_COUNT,
    COH_FIELD_REDOP,
    COH_FIELD_ROOT,    /* root or peer */
    COH_FIELD_TAG,
    COH_FIELD_STEP,    /* same call, different algorithm step: internal bug */
};
const char *coh_field_name(int f);

/* A flight-recorder entry's state (trace.h). */
enum coh_call_state { COH_ST_ISSUED = 0, COH_ST_STARTED, COH_ST_COMPLETED, COH_ST_FAILED };

/* ---- names; never NULL ---- */
const char *coh_dtype_str(int dt);    /* cohort_dtype_name, or a built-in name */
const char *coh_redop_str(int op);    /* cohort_op_name; "none" for -1 */
const char *coh_state_name(int st);   /* coh_call_state: "issued" ... */
int coh_coll_from_name(const char *s);   /* -1 if unknown */
int coh_dtype_from_name(const char *s);  /* -1 if unknown */
int coh_redop_from_name(const char *s);  /* -1 for "none", -2 if unknown */
int coh_state_from_name(const char *s);  /* -1 if unknown */
int coh_status_from_name(const char *s); /* -1 if unknown */
/* Call sites: reports print the basename; the wire carries a hash. The API
 * layer sets coh_call.site = coh_site_hash(file, line) so a receiver can
 * name the sender's file when it knows it (its own files). */
const char *coh_site_base(const char *file); /* "?" for NULL */
uint32_t coh_site_hash(const char *file, int line);
int coh_site_equal(const char *fa, int la, const char *fb, int lb); /* basename + line */

#endif

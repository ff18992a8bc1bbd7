/* ctl_wire.h - the store's abort control record (group/monitor.c):
 *   "A <rank> <status> <reason>"        or
 *   "A <rank> <status>:<seq> <reason>"  (names the collective call that failed)
 * Any client of the store can write these bytes, so the parser is pure,
 * bounded and strict about what names a rank: a record whose rank is not a
 * plain decimal in 0..size-1 is refused (never a wrong rank blamed); a status
 * outside the known errors becomes the generic COHORT_ERR_ABORTED; a call
 * number that does not read as 1..UINT64_MAX is dropped (the failure then
 * names no call); control bytes in the reason become '?' except '\n' and
 * '\t' (contract reports span lines); an over-long reason is cut.
 * tests/fuzz/fuzz_ctl_abort.c, tests/group/test_ctl_wire.c. */
#ifndef COH_GROUP_CTL_WIRE_H
#define COH_GROUP_CTL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cohort_status.h"
#include "util/util.h"

typedef struct coh_ctl_abort {
    int from;               /* 0..size-1 */
    cohort_status st;       /* COHORT_ERR_INVALID..COHORT_ERR_UNSUPPORTED */
    uint64_t seq;           /* the failed call, 0 when none is named */
    char reason[COH_ERRLEN]; /* NUL-terminated, never empty */
    char note[160];         /* what was mapped or cut ("" when the record was exact) */
} coh_ctl_abort;

/* Parses len bytes (no NUL needed; a NUL inside counts as a control byte)
 * for a group of size ranks. 0 on success (a->note says what was mapped),
 * -1 with a description in err when the record is refused. */
int coh_ctl_abort_parse(const char *rec, size_t len, int size, coh_ctl_abort *a, char *err,
                        size_t errlen);

/* Writes the record (seq 0: the form without a call number); returns its
 * length, cut to fit out like snprintf. */
int coh_ctl_abort_format(char *out, size_t len, int rank, cohort_status st, uint64_t seq,
                         const char *reason);

/* The state record a rank writes under state/<k>/<r> when a peer's stall
 * report asks ("S <rank> <k>", group/monitor.c):
 *   "<last completed seq> <current seq> <coll> <peer> <line> <file>"
 * coll 0 means not in a call; peer is the other side of a send/recv, else
 * -1. The stall report follows peer from rank to rank to find a wait-for
 * cycle, so a peer outside 0..size-1 (or a coll outside the known kinds) is
 * refused, never used as an index; file is the rest of the record, cut to
 * 255 bytes, control bytes as '?'. tests/fuzz/fuzz_ctl_state.c. */
typedef struct coh_ctl_state {
    uint64_t last, seq;
    int coll; /* 0: not in a call */
    int peer; /* -1, or 0..size-1 for a send/recv */
    int line; /* >= 0 */
    char file[256];
} coh_ctl_state;

int coh_ctl_state_parse(const char *rec, size_t len, int size, coh_ctl_state *s, char *err,
                        size_t errlen);


#endif

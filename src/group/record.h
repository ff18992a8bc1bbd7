/* record.h - a rank's rendezvous record: what it publishes under rank/<r>
 * in the store and every rank reads back (group/init.c). One line of
 * space-separated fields:
 *
 *     <world size> <pid> <data address> <host id> <host name> [<online cpus>]
 *
 * The sixth field came in session 11 (records without it read as cpus 0,
 * unknown); fields after the sixth, from a newer library, are ignored.
 * The parser bounds every field and refuses what does not fit instead of
 * truncating it (a too-long token must not spill into the next field):
 * tests/fuzz/fuzz_rdv_record.c. */
#ifndef COH_GROUP_RECORD_H
#define COH_GROUP_RECORD_H

#include <stddef.h>

#define COH_RDV_ADDR_MAX 79 /* a peer's addr in core/group.h */
#define COH_RDV_ID_MAX 255
#define COH_RDV_NAME_MAX 127
#define COH_RDV_CPUS_MAX (1L << 20)

typedef struct coh_rdv_record {
    int size;  /* world size, >= 1 */
    int pid;   /* >= 1 */
    char addr[COH_RDV_ADDR_MAX + 1];
    char id[COH_RDV_ID_MAX + 1];
    char name[COH_RDV_NAME_MAX + 1];
    long cpus; /* 0: unknown (an older record) */
} coh_rdv_record;

/* Writes r as one record into buf; its length, or -1 when a field is
 * empty, holds a space or control byte, or buf is too short. */
int coh_rdv_record_format(char *buf, size_t len, const coh_rdv_record *r);

/* Parses len bytes (no NUL needed). 0 on success; -1 with a reason in err:
 * fewer than five fields, a number that is not plain decimal or out of
 * range, a token longer than its field, a NUL or control byte. */
int coh_rdv_record_parse(const char *s, size_t len, coh_rdv_record *r, char *err, size_t errlen);

#endif

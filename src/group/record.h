/* record.h - a rank's rendezvous record: what it publishes under rank/<r>
 * in the store and every rank reads back (group/init.c). One line of
 * space-separated fields:
 *
 *     <world size> <pid> <data address> <host id> <host name> [<online cpus> [<cpu set> [<settings>]]]
 *
 * The sixth field came in session 11 (records without it read as cpus 0,
 * unknown). The seventh, session 13: the cpus this rank may run on
 * (sched_getaffinity, which a cgroup cpuset, taskset or numactl narrows) as
 * a canonical cpulist, the /proc format: ascending ranges "a" or "a-b"
 * (a < b) joined by commas, none overlapping or touching ("0-3,8,10-11");
 * at most COH_RDV_CPULIST_MAX bytes, cpus below COH_RDV_CPUS_MAX. Records
 * without it read as cpuset "" (unknown: group/init.c falls back to the
 * sixth field); "-" is that too, written when the eighth follows. The
 * eighth, session 38: the settings every rank of a group must share
 * (group/init.c coh_rdv_settings), key=value pairs joined by commas
 * ("transport=auto,contract=on,algo.all_reduce=ring"); keys [a-z0-9_.],
 * 1-32 bytes, each once; values [A-Za-z0-9_.+:-], at most 64 bytes; at
 * most COH_RDV_CFG_PAIRS pairs and COH_RDV_CFG_MAX bytes. Records without
 * it read as cfg "" (an older library: nothing compared). Fields after
 * the eighth, from a newer library, are ignored.
 * The parser bounds every field and refuses what does not fit instead of
 * truncating it (a too-long token must not spill into the next field):
 * tests/fuzz/fuzz_rdv_record.c. */
#ifndef COH_GROUP_RECORD_H
#define COH_GROUP_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define COH_RDV_ADDR_MAX 79 /* a peer's addr in core/group.h */
#define COH_RDV_ID_MAX 255
#define COH_RDV_NAME_MAX 127
#define COH_RDV_CPUS_MAX (1L << 20)
#define COH_RDV_CPULIST_MAX 1023 /* bytes of the cpu set field */
#define COH_RDV_CFG_MAX 1023     /* bytes of the settings field */
#define COH_RDV_CFG_PAIRS 32
#define COH_RDV_CFG_KEY_MAX 32
#define COH_RDV_CFG_VAL_MAX 64
/* The longest record coh_rdv_record_format writes, without its NUL. */
#define COH_RDV_RECORD_MAX (10 + 1 + 10 + 1 + COH_RDV_ADDR_MAX + 1 + COH_RDV_ID_MAX + 1 + \
                            COH_RDV_NAME_MAX + 1 + 7 + 1 + COH_RDV_CPULIST_MAX + 1 +             \
                            COH_RDV_CFG_MAX)

typedef struct coh_rdv_record {
    int size;  /* world size, >= 1 */
    int pid;   /* >= 1 */
    char addr[COH_RDV_ADDR_MAX + 1];
    char id[COH_RDV_ID_MAX + 1];
    char name[COH_RDV_NAME_MAX + 1];
    long cpus; /* 0: unknown (an older record) */
    char cpuset[COH_RDV_CPULIST_MAX + 1]; /* "": unknown (an older record) */
    long cpuset_n;   /* cpus in cpuset (0 when "") */
    long cpuset_top; /* its highest cpu (0 when "") */
    char cfg[COH_RDV_CFG_MAX + 1]; /* "": none (an older record) */
} coh_rdv_record;

/* Writes r as one record into buf; its length, or -1 when a field is
 * empty, holds a space or control byte, cpuset (when not "") is not a
 * canonical cpulist, cfg (when not "") breaks coh_rdv_cfg_check, or buf is
 * too short (COH_RDV_RECORD_MAX + 1 always fits). cpuset_n and cpuset_top
 * are not read. */
int coh_rdv_record_format(char *buf, size_t len, const coh_rdv_record *r);

/* Parses len bytes (no NUL needed). 0 on success; -1 with a reason in err
 * naming the field: fewer than five fields, a number that is not plain
 * decimal or out of range, a token longer than its field, a NUL or control
 * byte, a cpu set that is not a canonical cpulist (malformed, descending,
 * overlapping or touching ranges, a cpu >= COH_RDV_CPUS_MAX), settings
 * that break coh_rdv_cfg_check. */
int coh_rdv_record_parse(const char *s, size_t len, coh_rdv_record *r, char *err, size_t errlen);

/* Checks the n bytes at s as a settings field (the rules above): 0, or -1
 * with a reason in err. */
int coh_rdv_cfg_check(const char *s, size_t n, char *err, size_t errlen);
/* The value of key in a settings field coh_rdv_cfg_check accepted: 1 and
 * the value in out (NUL-terminated), 0 when key is absent. */
int coh_rdv_cfg_get(const char *cfg, const char *key, char *out, size_t outlen);

/* Checks that the n bytes at s are a canonical cpulist (the record's
 * seventh field): 0 with the number of cpus in *count and the highest in
 * *top; -1 with a reason in err. */
int coh_cpulist_check(const char *s, size_t n, long *count, long *top, char *err, size_t errlen);

/* ORs the cpus of a list coh_cpulist_check accepted into bits (room for
 * its top + 1 bits). */
void coh_cpulist_or(const char *s, uint64_t *bits);

/* This thread's cpu set (sched_getaffinity) as a canonical cpulist into
 * buf: its length, or -1 (the mask cannot be read, has a cpu >=
 * COH_RDV_CPUS_MAX, or its list does not fit in len or
 * COH_RDV_CPULIST_MAX bytes). */
int coh_cpulist_self(char *buf, size_t len);

#endif

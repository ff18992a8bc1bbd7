/*
 * hostlist.h - Slurm's compressed host lists ("node[01-03,7],gpu5",
 * "rack[1-2]-n[1-2]"): SLURM_JOB_NODELIST / SLURM_STEP_NODELIST expanded
 * the way `scontrol show hostnames` does, without running it.
 *
 * Grammar: items separated by commas outside brackets; an item is text with
 * any number of bracket groups, expanded left to right (a cartesian
 * product); a group is a comma list of N or LO-HI (decimal, LO <= HI), and a
 * zero-padded LO ("01-10") pads every number to LO's width. Anything else -
 * an unclosed or empty bracket, a reversed or non-numeric range, an empty
 * item, a host name past 255 bytes, more than COH_HOSTLIST_MAX hosts - is an
 * error with a message, never a partial guess.
 */
#ifndef COH_UTIL_HOSTLIST_H
#define COH_UTIL_HOSTLIST_H

#include <stddef.h>

#define COH_HOSTLIST_MAX 1000000

/* Calls fn(host, arg) for every host in order; fn returning non-zero stops
 * the walk early (not an error). Returns the number of hosts visited, or -1
 * with the reason in err. */
long coh_hostlist_expand(const char *expr, int (*fn)(const char *host, void *arg), void *arg,
                         char *err, size_t errlen);

/* The first host of expr into out. 0, or -1 with the reason in err. */
int coh_hostlist_first(const char *expr, char *out, size_t outlen, char *err, size_t errlen);

#endif

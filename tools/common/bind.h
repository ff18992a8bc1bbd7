/*
 * bind.h - where a launcher pins its ranks (cohortrun, cohort-perf --np).
 * COHORT_BIND=none|auto|core, or the tool's option, chooses:
 *   none (the default): the scheduler places the ranks;
 *   auto: Open MPI's default at small scale - one rank per core while the
 *         node's ranks fit on the cores the launcher may use, none when they
 *         outnumber them (pinned ranks sharing a core could not move to
 *         another that frees up);
 *   core: one cpu per rank always, round-robin.
 *
 * Why none is the default (docs/performance.md, "Which mode a 2-rank launch
 * is in"): on a machine shared with other work, a pinned rank that yields
 * or sleeps waits for its own core to come back while another idles
 * (2-rank means of milliseconds, measured twice); unbound, a loaded
 * machine often keeps both ranks on one cpu, where a hand-off is a yield.
 * On an idle machine the two differ little, and the bimodal 2-rank launches
 * come from the host's placement of the VM's cpus, which no binding
 * inside the VM changes.
 */
#ifndef COHORT_CLI_BIND_H
#define COHORT_CLI_BIND_H

#include <sched.h>
#include <stddef.h>

enum {
    CLI_BIND_NONE = 0, /* leave the ranks to the scheduler (default) */
    CLI_BIND_AUTO,     /* core when the ranks fit on the cores, else none */
    CLI_BIND_CORE,     /* always one cpu per rank, round-robin when oversubscribed */
};

/* "none", "auto", "core" -> mode; -1 for anything else. */
int cli_bind_parse(const char *s);
const char *cli_bind_name(int mode);

/* The mode from COHORT_BIND (none when unset or empty); -1 and a message
 * on stderr naming tool when it holds something else. */
int cli_bind_from_env(const char *tool);

/* The cpus a rank may be pinned to, in the order they are handed out: the
 * first allowed hardware thread of every core of `allowed`, then the others
 * (so ranks take distinct cores before SMT siblings). siblings_first(cpu)
 * is the lowest cpu of cpu's core, or the cpu itself when unknown (NULL:
 * every cpu is a core). Returns the count written to order (at most
 * CPU_SETSIZE); *ncores gets the number of distinct cores (the first pass). */
int cli_bind_order(const cpu_set_t *allowed, int (*siblings_first)(int cpu), int *order,
                   int *ncores);

/* The decision: the cpu local rank `local_rank` of `local_size` is pinned to,
 * or -1 for none. ncores: distinct cores in order (the ranks "fit" when
 * local_size <= ncores); order/norder from cli_bind_order. */
int cli_bind_cpu(int mode, int local_rank, int local_size, const int *order, int norder,
                 int ncores);

/* This machine's answer (the calling process's affinity, sysfs topology):
 * the cpu to pin local_rank to, or -1. */
int cli_bind_choose(int mode, int local_rank, int local_size);

/* The calling thread's affinity as a cpu list ("0", "0-3,8"), "?" when
 * unknown; truncated to len. */
void cli_bind_describe(char *buf, size_t len);

#endif

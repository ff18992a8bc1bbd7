/* bind.c - the launchers' rank binding (bind.h). */
#include "bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_bind_parse(const char *s)
{
    if (!s)
        return -1;
    if (!strcmp(s, "auto"))
        return CLI_BIND_AUTO;
    if (!strcmp(s, "core"))
        return CLI_BIND_CORE;
    if (!strcmp(s, "none"))
        return CLI_BIND_NONE;
    return -1;
}

const char *cli_bind_name(int mode)
{
    return mode == CLI_BIND_CORE ? "core" : mode == CLI_BIND_AUTO ? "auto" : "none";
}

int cli_bind_from_env(const char *tool)
{
    const char *v = getenv("COHORT_BIND");
    if (!v || !*v)
        return CLI_BIND_NONE;
    int m = cli_bind_parse(v);
    if (m < 0)
        fprintf(stderr, "%s: COHORT_BIND=%s: expected none, auto or core\n", tool, v);
    return m;
}

int cli_bind_order(const cpu_set_t *allowed, int (*siblings_first)(int cpu), int *order,
                   int *ncores)
{
    /* core[c]: the core (its lowest cpu) of allowed cpu c; used[k]: core k
     * already has a rank's cpu in the first pass */
    int core[CPU_SETSIZE];
    unsigned char used[CPU_SETSIZE], taken[CPU_SETSIZE];
    memset(used, 0, sizeof used);
    memset(taken, 0, sizeof taken);
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, allowed))
            continue;
        int f = siblings_first ? siblings_first(c) : c;
        core[c] = f >= 0 && f < CPU_SETSIZE ? f : c;
        if (!used[core[c]]) {
            used[core[c]] = 1;
            taken[c] = 1;
            order[n++] = c;
        }
    }
    *ncores = n;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, allowed) && !taken[c])
            order[n++] = c;
    return n;
}

int cli_bind_cpu(int mode, int local_rank, int local_size, const int *order, int norder,
                 int ncores)
{
    if (mode == CLI_BIND_NONE || norder <= 0 || local_rank < 0 || local_size <= 0)
        return -1;
    if (mode == CLI_BIND_AUTO && local_size > ncores)
        return -1; /* oversubscribed: Open MPI does not bind either */
    return order[local_rank % norder];
}

/* The lowest cpu of cpu's core from sysfs ("0,64", "0-1"), or cpu. */
static int sysfs_siblings_first(int cpu)
{
    char path[96], buf[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
             cpu);
    FILE *f = fopen(path, "r");
    if (!f)
        return cpu;
    int first = cpu;
    if (fgets(buf, sizeof buf, f))
        first = atoi(buf); /* the list is sorted: its first number is the lowest */
    fclose(f);
    return first >= 0 ? first : cpu;
}

int cli_bind_choose(int mode, int local_rank, int local_size)
{
    if (mode == CLI_BIND_NONE)
        return -1;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return -1;
    int order[CPU_SETSIZE], ncores = 0;
    int n = cli_bind_order(&allowed, sysfs_siblings_first, order, &ncores);
    return cli_bind_cpu(mode, local_rank, local_size, order, n, ncores);
}

void cli_bind_describe(char *buf, size_t len)
{
    if (!len)
        return;
    cpu_set_t set;
    snprintf(buf, len, "?");
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    size_t at = 0;
    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && at < len; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
            e++;
        int k = e > c ? snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", c, e)
                      : snprintf(buf + at, len - at, "%s%d", at ? "," : "", c);
        if (k < 0)
            break;
        at += (size_t)k;
        c = e;
    }
}

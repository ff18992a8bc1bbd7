/* perf_report.c - statistics, memory probes and output (text table, JSON). */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"
#include "util/json.h"

const char *const perf_op_names[OP_COUNT] = {
    "all_reduce", "broadcast",  "reduce",  "all_gather", "gather",
    "scatter",    "reduce_scatter", "all_to_all", "barrier", "sendrecv",
};

/* nccl-tests' bus-bandwidth factors: what each link must carry relative to
 * the algorithm bandwidth for an optimal algorithm, so numbers of different
 * ops and rank counts compare with the hardware's peak. */
double perf_busfactor(enum perf_op op, int n)
{
    switch (op) {
    case OP_ALL_REDUCE:
        return 2.0 * (n - 1) / n;
    case OP_ALL_GATHER:
    case OP_REDUCE_SCATTER:
    case OP_ALL_TO_ALL:
    case OP_GATHER:
    case OP_SCATTER:
        return (double)(n - 1) / n;
    case OP_BROADCAST:
    case OP_REDUCE:
    case OP_SENDRECV:
        return 1.0;
    default:
        return 0.0;
    }
}

int perf_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double perf_pct(const double *sorted, long n, double p)
{
    if (n <= 0)
        return 0;
    /* Nearest rank: the smallest value with at least p of the samples at or
     * below it. */
    long k = (long)(p / 100.0 * (double)n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return sorted[k - 1];
}

/* ---- memory ---- */

static uint64_t kib_field(const char *line, const char *name)
{
    size_t l = strlen(name);
    if (strncmp(line, name, l) != 0)
        return UINT64_MAX;
    return strtoull(line + l, NULL, 10);
}

void perf_mem_status(uint64_t *rss, uint64_t *hwm, uint64_t *shmem)
{
    *rss = *hwm = *shmem = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        uint64_t v;
        if ((v = kib_field(line, "VmRSS:")) != UINT64_MAX)
            *rss = v;
        else if ((v = kib_field(line, "VmHWM:")) != UINT64_MAX)
            *hwm = v;
        else if ((v = kib_field(line, "RssShmem:")) != UINT64_MAX)
            *shmem = v;
    }
    fclose(f);
}

/* Sums Size/Rss/Pss of the writable MAP_SHARED mappings (perms "rw-s"):
 * cohort's memfd segment, Open MPI's /dev/shm segments, any library's
 * shared memory, whatever it is called. */
void perf_mem_segments(uint64_t *size, uint64_t *rss, uint64_t *pss)
{
    *size = *rss = *pss = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return;
    char line[512];
    int in_shared = 0;
    while (fgets(line, sizeof line, f)) {
        if (isxdigit((unsigned char)line[0]) && !isupper((unsigned char)line[0])) {
            /* "start-end perms offset dev inode path" */
            char perms[8] = "";
            if (sscanf(line, "%*s %7s", perms) == 1)
                in_shared = perms[1] == 'w' && perms[3] == 's';
            continue;
        }
        if (!in_shared)
            continue;
        uint64_t v;
        if ((v = kib_field(line, "Size:")) != UINT64_MAX)
            *size += v;
        else if ((v = kib_field(line, "Rss:")) != UINT64_MAX)
            *rss += v;
        else if ((v = kib_field(line, "Pss:")) != UINT64_MAX)
            *pss += v;
    }
    fclose(f);
}

/* ---- sizes ---- */

int perf_parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    v *= mul;
    if (v > (double)((size_t)1 << 40))
        return -1;
    *out = (size_t)v;
    return 0;
}

/* ---- output ---- */

static const char *transport_of(const perf_opts *o)
{
    if (o->transport)
        return o->transport;
    const char *e = getenv("COHORT_TRANSPORT");
    return e ? e : "auto";
}

static int contract_on(const perf_opts *o)
{
    if (o->contract_off)
        return 0;
    const char *e = getenv("COHORT_CONTRACT");
    return !(e && !strcmp(e, "off"));
}

void perf_print_header(FILE *f, const perf_opts *o, int n)
{
    char host[128] = "?";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    fprintf(f, "# cohort-perf %d.%d.%d%s%s\n", COHORT_VERSION_MAJOR, COHORT_VERSION_MINOR,
            COHORT_VERSION_PATCH, o->label ? "  " : "", o->label ? o->label : "");
    fprintf(f, "# host %s  date %s  ranks %d  transport %s  contract %s  algo %s\n", host, date, n,
            transport_of(o), contract_on(o) ? "on" : "off", o->algo ? o->algo : "auto");
    fprintf(f, "# dtype %s  redop %s  root %d  mode %s  check %s  ", cohort_dtype_name(o->dtype),
            cohort_op_name(o->redop), o->root,
            o->osu ? "osu (barrier between iterations)" : "back-to-back", o->check ? "on" : "off");
    if (o->iters)
        fprintf(f, "iters %ld  warmup %ld\n", o->iters, o->warmup);
    else
        fprintf(f, "t %.3g s/size  warmup %ld\n", o->target_s, o->warmup);
    fprintf(f, "# size: nccl-tests convention, the full buffer (all_gather/gather: output, "
               "reduce_scatter/scatter/all_to_all: input); count: elements per call argument\n");
    fprintf(f, "# avg: max over ranks of the per-rank mean; p50/p99/max: over iterations of the "
               "per-iteration max over ranks; sendrecv: one-way (round trip / 2)\n");
    fprintf(f, "# algbw = size / avg, busbw = algbw x nccl-tests factor; GB/s = 1e9 B/s\n");
    fprintf(f, "%-15s %12s %12s %8s %6s %5s %9s %11s %11s %11s %11s %10s %10s %6s\n", "#op", "size",
            "count", "type", "redop", "root", "iters", "avg(us)", "p50(us)", "p99(us)", "max(us)",
            "algbw", "busbw", "check");
    fflush(f);
}

static int op_has_redop(enum perf_op op)
{
    return op == OP_ALL_REDUCE || op == OP_REDUCE || op == OP_REDUCE_SCATTER;
}

static int op_has_root(enum perf_op op)
{
    return op == OP_BROADCAST || op == OP_REDUCE || op == OP_GATHER || op == OP_SCATTER;
}

void perf_print_row(FILE *f, const perf_opts *o, const perf_row *r)
{
    char root[16] = "-";
    if (op_has_root(r->op))
        snprintf(root, sizeof root, "%d", o->root);
    fprintf(f, "%-15s %12zu %12zu %8s %6s %5s %9ld %11.2f %11.2f %11.2f %11.2f %10.3f %10.3f %6s\n",
            perf_op_names[r->op], r->bytes, r->count,
            r->op == OP_BARRIER ? "-" : cohort_dtype_name(o->dtype),
            op_has_redop(r->op) ? cohort_op_name(o->redop) : "-", root, r->iters, r->avg_us,
            r->p50_us, r->p99_us, r->max_us, r->algbw, r->busbw, r->check);
    fflush(f);
}

void perf_print_mem(FILE *f, const perf_mem *m, int n)
{
    fprintf(f, "# memory per rank, KiB: rss_start = before cohort_init; rss_init = after init and "
               "one 8-byte all_reduce; rss_end/hwm = at the end (include the benchmark buffers); "
               "shared = writable MAP_SHARED mappings (the shm segment)\n");
    fprintf(f, "%-6s %10s %10s %10s %10s %10s %12s %12s %12s\n", "#rank", "rss_start", "rss_init",
            "rss_end", "hwm", "RssShmem", "shared_size", "shared_rss", "shared_pss");
    for (int r = 0; r < n; r++)
        fprintf(f, "%-6d %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
                   " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n",
                r, m[r].rss_start, m[r].rss_init, m[r].rss_end, m[r].hwm, m[r].shmem, m[r].seg_size,
                m[r].seg_rss, m[r].seg_pss);
    fflush(f);
}

void perf_write_json(FILE *f, const perf_opts *o, int n, const perf_row *rows, int nrows,
                     const perf_mem *m, int failed)
{
    char host[128] = "?";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    fprintf(f, "{\n  \"tool\": \"cohort-perf\",\n  \"version\": \"%d.%d.%d\",\n",
            COHORT_VERSION_MAJOR, COHORT_VERSION_MINOR, COHORT_VERSION_PATCH);
    fprintf(f, "  \"host\": ");
    coh_json_fputs(f, host);
    fprintf(f, ",\n  \"date\": ");
    coh_json_fputs(f, date);
    fprintf(f, ",\n  \"label\": ");
    coh_json_fputs(f, o->label ? o->label : "");
    fprintf(f, ",\n  \"ranks\": %d,\n  \"transport\": ", n);
    coh_json_fputs(f, transport_of(o));
    fprintf(f, ",\n  \"contract\": \"%s\",\n  \"algo\": ", contract_on(o) ? "on" : "off");
    coh_json_fputs(f, o->algo ? o->algo : "auto");
    fprintf(f,
            ",\n  \"dtype\": \"%s\",\n  \"redop\": \"%s\",\n  \"root\": %d,\n  \"mode\": \"%s\",\n"
            "  \"check\": %s,\n  \"target_s\": %.6g,\n  \"warmup\": %ld,\n  \"fixed_iters\": %ld,\n"
            "  \"failed\": %s,\n",
            cohort_dtype_name(o->dtype), cohort_op_name(o->redop), o->root,
            o->osu ? "osu" : "back-to-back", o->check ? "true" : "false", o->target_s, o->warmup,
            o->iters, failed ? "true" : "false");
    fprintf(f, "  \"results\": [");
    for (int i = 0; i < nrows; i++) {
        const perf_row *r = &rows[i];
        fprintf(f,
                "%s\n    {\"op\": \"%s\", \"size\": %zu, \"count\": %zu, \"dtype\": \"%s\", "
                "\"redop\": \"%s\", \"root\": %d, \"iters\": %ld, \"avg_us\": %.4f, "
                "\"p50_us\": %.4f, \"p99_us\": %.4f, \"max_us\": %.4f, \"min_us\": %.4f, "
                "\"algbw_GBs\": %.6f, \"busbw_GBs\": %.6f, \"check\": \"%s\"}",
                i ? "," : "", perf_op_names[r->op], r->bytes, r->count,
                r->op == OP_BARRIER ? "-" : cohort_dtype_name(o->dtype),
                op_has_redop(r->op) ? cohort_op_name(o->redop) : "-",
                op_has_root(r->op) ? o->root : -1, r->iters, r->avg_us, r->p50_us, r->p99_us,
                r->max_us, r->min_us, r->algbw, r->busbw, r->check);
    }
    fprintf(f, "\n  ],\n  \"memory_kib\": [");
    for (int r = 0; m && r < n; r++)
        fprintf(f,
                "%s\n    {\"rank\": %d, \"rss_start\": %" PRIu64 ", \"rss_init\": %" PRIu64
                ", \"rss_end\": %" PRIu64 ", \"hwm\": %" PRIu64 ", \"rss_shmem\": %" PRIu64
                ", \"shared_size\": %" PRIu64 ", \"shared_rss\": %" PRIu64
                ", \"shared_pss\": %" PRIu64 "}",
                r ? "," : "", r, m[r].rss_start, m[r].rss_init, m[r].rss_end, m[r].hwm, m[r].shmem,
                m[r].seg_size, m[r].seg_rss, m[r].seg_pss);
    fprintf(f, "\n  ]\n}\n");
    fflush(f);
}

/* perf_report.c - statistics, memory probes and output (text table, JSON). */
#include <ctype.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bind.h"
#include "perf.h"
#include "cohort_json.h"

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

void perf_sched_sample(int64_t v[PERF_SCHED_FIELDS])
{
    v[0] = sched_getcpu();
    v[1] = -1;
    FILE *f = fopen("/proc/thread-self/sched", "r");
    if (f) {
        char line[256];
        long long m;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "se.nr_migrations : %lld", &m) == 1) {
                v[1] = m;
                break;
            }
        fclose(f);
    }
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    getrusage(RUSAGE_THREAD, &ru);
    v[2] = ru.ru_nvcsw;
    v[3] = ru.ru_nivcsw;
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

const char *perf_dtype_name(cohort_dtype dt)
{
    switch (dt) {
    case COHORT_FLOAT16:
        return "half";
    case COHORT_FLOAT32:
        return "float";
    case COHORT_FLOAT64:
        return "double";
    default:
        return cohort_dtype_name(dt); /* int8 uint8 int32 uint32 int64 uint64 bfloat16 */
    }
}

int perf_op_has_redop(enum perf_op op)
{
    return op == OP_ALL_REDUCE || op == OP_REDUCE || op == OP_REDUCE_SCATTER;
}

int perf_op_has_root(enum perf_op op)
{
    return op == OP_BROADCAST || op == OP_REDUCE || op == OP_GATHER || op == OP_SCATTER;
}

static void list_of(char *out, size_t len, const int *set, int nset, int is_dtype)
{
    size_t pos = 0;
    out[0] = 0;
    for (int i = 0; i < nset && pos < len; i++)
        if (set[i])
            pos += (size_t)snprintf(out + pos, len - pos, "%s%s", pos ? "," : "",
                                    is_dtype ? perf_dtype_name((cohort_dtype)i)
                                             : cohort_op_name((cohort_op)i));
}

void perf_print_header(FILE *f, const perf_opts *o, int n, const perf_where *w)
{
    char date[64], dts[160], ops[96];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    list_of(dts, sizeof dts, o->dtypes, COHORT_DTYPE_COUNT, 1);
    list_of(ops, sizeof ops, o->redops, COHORT_OP_COUNT, 0);
    fprintf(f, "# cohort-perf %d.%d.%d (nccl-tests output)%s%s\n", COHORT_VERSION_MAJOR,
            COHORT_VERSION_MINOR, COHORT_VERSION_PATCH, o->label ? "  " : "",
            o->label ? o->label : "");
    /* nccl-tests' first line, field for field. */
    fprintf(f, "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: ", o->minbytes, o->maxbytes);
    if (o->stepbytes)
        fprintf(f, "%zu(bytes)", o->stepbytes);
    else
        fprintf(f, "%g(factor)", o->factor);
    fprintf(f, " warmup iters: %ld iters: %ld agg iters: %ld validation: %ld graph: 0\n",
            o->warmup, o->iters, o->agg, o->check);
    fprintf(f, "#\n# Using devices\n");
    for (int r = 0; w && r < n; r++)
        fprintf(f, "#  Rank %2d Group  0 Pid %6d on %10.60s device  0 [cpu] %s\n", r,
                (int)w[r].pid, w[r].host, "cohort");
    fprintf(f, "#\n");
    /* Where the ranks may run: decides whether two of them share a cpu */
    if (o->nranks)
        fprintf(f, "# cohort: binding %s (%s):", cli_bind_name(o->bind),
                o->bind_from ? o->bind_from : "default");
    else /* the ranks came from a launcher: it bound them, or did not */
        fprintf(f, "# cohort: binding by the launcher:");
    for (int r = 0; w && r < n; r++)
        fprintf(f, "%s rank %d cpus %s", r ? ";" : "", r, w[r].cpus);
    fprintf(f, "\n");
    fprintf(f, "# cohort: date %s  ranks %d  transport %s  contract %s  algo %s  mode %s\n", date,
            n, transport_of(o), contract_on(o) ? "on" : "off", o->algo ? o->algo : "auto",
            o->osu ? "osu (barrier between iterations)" : "back-to-back");
    if (o->iters)
        fprintf(f, "# cohort: iters %ld per size and variant", o->iters);
    else
        fprintf(f, "# cohort: iters calibrated to %.3g s per size and variant (-n N fixes them)",
                o->target_s);
    fprintf(f, "  datatypes %s  reduce ops %s  prewarm %.3g s\n", dts, ops, o->prewarm_s);
    static const char *const avg_name[] = {"rank 0's", "the mean over ranks of each rank's",
                                           "the min over ranks of each rank's",
                                           "the max over ranks of each rank's"};
    fprintf(f, "# cohort: time = %s mean per call (-a %d)%s; size: the full buffer "
               "(all_gather/gather output, reduce_scatter/scatter/all_to_all input); "
               "sendrecv: one-way\n",
            avg_name[o->average], o->average,
            o->percentiles ? "; p50/p99/max: the same over each rank's percentiles" : "");
    fflush(f);
}

void perf_print_table_head(FILE *f, const perf_opts *o, enum perf_op op)
{
    /* nccl-tests' header; cohort's p50/p99/max come after all of its columns
     * so that parsers of nccl-tests rows read the same fields. */
    fprintf(f, "#\n# Collective: %s\n", perf_op_names[op]);
    fprintf(f, "#%61s%s", "out-of-place", o->in_place ? "                       in-place" : "");
    if (o->percentiles)
        fprintf(f, "%s  out-of-place percentiles%s", o->in_place ? "" : "",
                o->in_place ? "      in-place percentiles" : "");
    fprintf(f, "\n#       size         count      type   redop    root     time   algbw   busbw "
               "#wrong");
    if (o->in_place)
        fprintf(f, "     time   algbw   busbw #wrong");
    for (int v = 0; o->percentiles && v < 1 + o->in_place; v++)
        fprintf(f, "      p50      p99      max");
    fprintf(f, "\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s) "
               "      ");
    if (o->in_place)
        fprintf(f, "     (us)  (GB/s)  (GB/s)       ");
    for (int v = 0; o->percentiles && v < 1 + o->in_place; v++)
        fprintf(f, "     (us)     (us)     (us)");
    fprintf(f, "\n");
    fflush(f);
}

/* value right-aligned in width characters: 2 decimals while they fit, then
 * 1, then none, then an exponent (nccl-tests' way of keeping columns). */
static void fmt_num(char *out, size_t len, double v, int width)
{
    int digits = 1;
    for (double p = 10; v >= p && digits < 40; p *= 10)
        digits++;
    if (digits + 3 <= width)
        snprintf(out, len, "%*.2f", width, v);
    else if (digits + 2 <= width)
        snprintf(out, len, "%*.1f", width, v);
    else if (digits <= width)
        snprintf(out, len, "%*.0f", width, v);
    else
        snprintf(out, len, "%*.1e", width, v);
}

static void print_res(FILE *f, const perf_opts *o, const perf_res *r)
{
    char t[32], a[32], b[32];
    fmt_num(t, sizeof t, r->avg_us, 7);
    fmt_num(a, sizeof a, r->algbw, 6);
    fmt_num(b, sizeof b, r->busbw, 6);
    if (r->wrong >= 0)
        fprintf(f, "  %7s  %6s  %6s  %6lld", t, a, b, (long long)r->wrong);
    else
        fprintf(f, "  %7s  %6s  %6s    N/A", t, a, b);
    (void)o;
}

static void print_pct(FILE *f, const perf_res *r)
{
    char p50[32], p99[32], mx[32];
    fmt_num(p50, sizeof p50, r->p50_us, 7);
    fmt_num(p99, sizeof p99, r->p99_us, 7);
    fmt_num(mx, sizeof mx, r->max_us, 7);
    fprintf(f, "  %7s  %7s  %7s", p50, p99, mx);
}

void perf_print_row(FILE *f, const perf_opts *o, const perf_row *r)
{
    fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", r->bytes, r->count,
            r->op == OP_BARRIER ? "none" : perf_dtype_name(r->dtype),
            perf_op_has_redop(r->op) ? cohort_op_name(r->redop) : "none", r->root);
    print_res(f, o, &r->r[0]);
    if (o->in_place)
        print_res(f, o, &r->r[1]);
    for (int v = 0; o->percentiles && v < 1 + o->in_place; v++)
        print_pct(f, &r->r[v]);
    fprintf(f, "\n");
    fflush(f);
}

void perf_print_footer(FILE *f, const perf_opts *o, const perf_row *rows, int nrows)
{
    int64_t wrong = 0;
    double bw = 0;
    int nbw = 0;
    for (int i = 0; i < nrows; i++)
        for (int v = 0; v < 2; v++) {
            const perf_res *r = &rows[i].r[v];
            if (!r->ran)
                continue;
            if (r->wrong > 0)
                wrong += r->wrong;
            if (rows[i].op != OP_BARRIER) {
                bw += r->busbw;
                nbw++;
            }
        }
    (void)o;
    fprintf(f, "# Out of bounds values : %lld %s\n", (long long)wrong, wrong ? "FAILED" : "OK");
    fprintf(f, "# Avg bus bandwidth    : %g \n#\n", nbw ? bw / nbw : 0.0);
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
    cohort_json_fputs(f, host);
    fprintf(f, ",\n  \"date\": ");
    cohort_json_fputs(f, date);
    fprintf(f, ",\n  \"label\": ");
    cohort_json_fputs(f, o->label ? o->label : "");
    fprintf(f, ",\n  \"ranks\": %d,\n  \"transport\": ", n);
    cohort_json_fputs(f, transport_of(o));
    fprintf(f, ",\n  \"contract\": \"%s\",\n  \"algo\": ", contract_on(o) ? "on" : "off");
    cohort_json_fputs(f, o->algo ? o->algo : "auto");
    fprintf(f,
            ",\n  \"dtype\": \"%s\",\n  \"redop\": \"%s\",\n  \"root\": %d,\n  \"mode\": \"%s\",\n"
            "  \"check\": %s,\n  \"check_calls\": %ld,\n  \"average\": %d,\n  \"agg_iters\": %ld,\n"
            "  \"target_s\": %.6g,\n  \"warmup\": %ld,\n  \"fixed_iters\": %ld,\n"
            "  \"failed\": %s,\n",
            perf_dtype_name(o->dtype), cohort_op_name(o->redop), o->root,
            o->osu ? "osu" : "back-to-back", o->check ? "true" : "false", o->check, o->average,
            o->agg, o->target_s, o->warmup,
            o->iters, failed ? "true" : "false");
    fprintf(f, "  \"results\": [");
    int first = 1;
    for (int i = 0; i < nrows; i++) {
        const perf_row *row = &rows[i];
        for (int v = 0; v < 2; v++) {
            const perf_res *r = &row->r[v];
            if (!r->ran)
                continue;
            /* bandwidths as %g: with %.6f a slow small row (8 B in 30 ms
             * on a loaded machine: 2.7e-7 GB/s) read as 0 */
            fprintf(f,
                    "%s\n    {\"op\": \"%s\", \"in_place\": %s, \"size\": %zu, \"count\": %zu, "
                    "\"dtype\": \"%s\", \"redop\": \"%s\", \"root\": %d, \"iters\": %ld, "
                    "\"avg_us\": %.4f, \"p50_us\": %.4f, \"p99_us\": %.4f, \"max_us\": %.4f, "
                    "\"min_us\": %.4f, \"step_p50_us\": %.4f, \"step_p99_us\": %.4f, "
                    "\"step_max_us\": %.4f, \"algbw_GBs\": %.6g, \"busbw_GBs\": %.6g, "
                    "\"wrong\": %lld, \"check\": \"%s\"}",
                    first ? "" : ",", perf_op_names[row->op], v ? "true" : "false", row->bytes,
                    row->count, row->op == OP_BARRIER ? "none" : perf_dtype_name(row->dtype),
                    perf_op_has_redop(row->op) ? cohort_op_name(row->redop) : "none", row->root,
                    r->iters, r->avg_us, r->p50_us, r->p99_us, r->max_us, r->min_us,
                    r->step_p50_us, r->step_p99_us, r->step_max_us, r->algbw, r->busbw,
                    (long long)r->wrong, r->wrong < 0 ? "-" : r->wrong ? "FAIL" : "ok");
            first = 0;
        }
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

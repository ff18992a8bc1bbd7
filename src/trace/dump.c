/*
 * dump.c - writes a group's flight recorder as JSON Lines (docs/trace.md).
 *
 * Runs on error paths (coh_group_fail), from the monitor thread (SIGUSR1)
 * and on request, possibly in several threads at once: every dump writes its
 * own temporary file and renames it over the final name, so a reader sees
 * one whole dump or the previous one, never a mix. No locks are taken and
 * nothing is allocated (OOM is a common reason to be here).
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "trace/jsonl.h"
#include "trace/trace.h"

#define DUMP_BUF (32 * 1024)
#define DUMP_LINE_MAX 8192 /* a header with a 1 KiB reason, fully escaped, fits */

/* Job ids come from the environment: keep them from naming other paths. */
static void safe_name(char *out, size_t cap, const char *in)
{
    size_t o = 0;
    for (const char *p = in; p && *p && o + 1 < cap; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.';
        out[o++] = ok ? c : '_';
    }
    out[o] = 0;
    if (!o)
        snprintf(out, cap, "%s", "cohort");
    else if (out[0] == '.')
        out[0] = '_'; /* hidden names are temporaries */
}

typedef struct wbuf {
    int fd;
    size_t pos;
    int err; /* errno of the first failed write */
    char b[DUMP_BUF];
} wbuf;

static void wflush(wbuf *w)
{
    size_t off = 0;
    while (off < w->pos && !w->err) {
        ssize_t r = write(w->fd, w->b + off, w->pos - off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            w->err = errno;
            break;
        }
        off += (size_t)r;
    }
    w->pos = 0;
}

/* Reserves room for one line; returns where to format it. */
static char *wline(wbuf *w)
{
    if (DUMP_BUF - w->pos < DUMP_LINE_MAX)
        wflush(w);
    return w->b + w->pos;
}

static void wcommit(wbuf *w, size_t n)
{
    /* Formatters are given DUMP_LINE_MAX; a longer line was cut mid-way and
     * would not parse, so drop it rather than write broken JSON. */
    if (n < DUMP_LINE_MAX)
        w->pos += n;
}

static void hook_after(void *g, const char *reason) { coh_trace_dump(g, NULL, reason); }
static const coh_hook_ops trace_hook = {.name = "trace", .order = COH_HOOK_TRACE,
                                        .after = hook_after};

void coh_trace_attach(cohort_group *g) { coh_group_add_hook(g, &trace_hook, g); }

cohort_status coh_trace_dump(cohort_group *g, const char *dir, const char *reason)
{
    if (!g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "trace dump: group is NULL");
    if (!dir)
        dir = coh_env_str("COHORT_TRACE_DIR");
    if (!dir)
        return COHORT_OK;

    static atomic_uint dump_counter;
    char job[96], path[4096], tmp[4096 + 64];
    safe_name(job, sizeof job, g->job_id);
    int n;
    if (g->id == 0)
        n = snprintf(path, sizeof path, "%s/%s-rank%d.jsonl", dir, job, g->rank);
    else
        n = snprintf(path, sizeof path, "%s/%s-g%u-rank%d.jsonl", dir, job, g->id, g->rank);
    if (n < 0 || (size_t)n >= sizeof path)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "trace dump: directory name too long: %s",
                           dir);
    /* Hidden and unique per process and dump: concurrent dumps never share
     * a temporary file, and cohort-trace never reads one (not *.jsonl). */
    snprintf(tmp, sizeof tmp, "%s/.%s-rank%d.%d.%u.tmp", dir, job, g->rank, (int)getpid(),
             atomic_fetch_add(&dump_counter, 1));

    static _Thread_local wbuf w; /* 32 KiB: too big for a worker's stack */
    w.pos = 0;
    w.err = 0;
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w.fd < 0)
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "open", errno, "trace dump to %s", tmp);

    static _Thread_local coh_tl_header h;
    memset(&h, 0, sizeof h);
    h.version = COH_TL_VERSION;
    snprintf(h.job, sizeof h.job, "%s", g->job_id);
    h.rank = g->rank;
    h.size = g->size;
    h.generation = g->generation;
    h.group = g->id;
    if (g->hosts && g->my_host >= 0 && g->my_host < g->n_hosts)
        snprintf(h.host, sizeof h.host, "%s", g->hosts[g->my_host]);
    else if (gethostname(h.host, sizeof h.host - 1) != 0)
        snprintf(h.host, sizeof h.host, "?");
    h.pid = (long)getpid();
    snprintf(h.reason, sizeof h.reason, "%s", reason ? reason : "");
    h.time_us = coh_wall_us();
    h.capacity = coh_trace_capacity(g->trace);
    h.recorded = coh_trace_recorded(g->trace);
    wcommit(&w, coh_tl_fmt_header(wline(&w), DUMP_LINE_MAX, &h));

    /* Oldest first; entries overwritten meanwhile are skipped. */
    uint64_t end = h.recorded;
    uint64_t begin = end > (uint64_t)h.capacity ? end - (uint64_t)h.capacity : 0;
    coh_trace_entry e;
    /* A dump on error is written while the failing call is still on the
     * stack: in a poisoned group every call in flight fails, so it is
     * recorded as failed with the group's status, not as started/OK. */
    int poisoned = coh_group_poisoned(g);
    for (uint64_t i = begin; i < end; i++)
        if (coh_trace_read(g->trace, i, &e)) {
            if (poisoned && (e.state == COH_ST_ISSUED || e.state == COH_ST_STARTED)) {
                e.state = COH_ST_FAILED;
                e.status = poisoned;
            }
            wcommit(&w, coh_tl_fmt_entry(wline(&w), DUMP_LINE_MAX, &e));
        }
    wflush(&w);

    if (w.err) {
        int err = w.err;
        close(w.fd);
        unlink(tmp);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "write", err, "trace dump to %s", tmp);
    }
    if (close(w.fd) != 0) {
        int err = errno;
        unlink(tmp);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "close", err, "trace dump to %s", tmp);
    }
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "rename", err, "trace dump to %s", path);
    }
    coh_info("flight recorder: %" PRIu64 " calls dumped to %s (%s)",
             end - begin, path, reason ? reason : "");
    return COHORT_OK;
}

cohort_status cohort_trace_dump(cohort_group *g, const char *dir)
{
    if (!g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_trace_dump: group is NULL");
    cohort_status st;
    char msg[COH_ERRLEN];
    if (!dir && !coh_env_str("COHORT_TRACE_DIR")) {
        /* An explicit request that writes nothing would look like success. */
        st = COHORT_ERR_INVALID;
        snprintf(msg, sizeof msg,
                 "cohort_trace_dump: no directory: pass one or set COHORT_TRACE_DIR");
    } else {
        st = coh_trace_dump(g, dir, "cohort_trace_dump");
        if (st == COHORT_OK)
            return COHORT_OK;
        snprintf(msg, sizeof msg, "%s", coh_tls_err()->msg);
    }
    pthread_mutex_lock(&g->err_mu);
    g->last.status = st;
    snprintf(g->last.msg, sizeof g->last.msg, "%s", msg);
    pthread_mutex_unlock(&g->err_mu);
    coh_err_set(NULL, st, "%s", msg);
    return st;
}

/* output.c - worker output: complete lines only, each prefixed "[rank] ".
 *
 * The launcher is the only writer of its stdout and stderr while workers run,
 * and it writes whole prefixed lines (a batch of them per write), so lines of
 * different ranks never interleave mid-line whatever the pipe or terminal.
 * A line longer than the stream buffer is cut into buffer-sized lines rather
 * than held back without bound; a last line without a newline gets one at
 * EOF. */
#include "cohortrun.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STREAM_CAP (32 * 1024)
#define PREFIX_MAX 24

int crun_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int crun_stream_init(crun_stream *s, int rank, int out_fd, int keep_tail)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->log_fd = -1;
    s->rank = rank;
    s->out_fd = out_fd;
    s->cap = STREAM_CAP;
    s->buf = malloc(s->cap);
    if (!s->buf)
        return -1;
    if (keep_tail) {
        s->tail_cap = CRUN_TAIL_LINES;
        s->tail = calloc((size_t)s->tail_cap, sizeof *s->tail);
        if (!s->tail) {
            free(s->buf);
            s->buf = NULL;
            return -1;
        }
    }
    return 0;
}

void crun_stream_fini(crun_stream *s)
{
    if (s->fd >= 0)
        close(s->fd);
    if (s->log_fd >= 0)
        close(s->log_fd);
    free(s->buf);
    free(s->tail);
    memset(s, 0, sizeof *s);
    s->fd = s->log_fd = -1;
}

static void tail_push(crun_stream *s, const char *line, size_t len)
{
    if (!s->tail)
        return;
    if (len >= CRUN_TAIL_LINE_MAX)
        len = CRUN_TAIL_LINE_MAX - 1;
    memcpy(s->tail[s->tail_next], line, len);
    s->tail[s->tail_next][len] = 0;
    s->tail_next = (s->tail_next + 1) % s->tail_cap;
    if (s->tail_n < s->tail_cap)
        s->tail_n++;
}

int crun_stream_tail(const crun_stream *s, char (*lines)[CRUN_TAIL_LINE_MAX], int max)
{
    if (!s->tail)
        return 0;
    int n = s->tail_n < max ? s->tail_n : max;
    int start = (s->tail_next - n + s->tail_cap) % s->tail_cap;
    for (int i = 0; i < n; i++)
        memcpy(lines[i], s->tail[(start + i) % s->tail_cap], CRUN_TAIL_LINE_MAX);
    return n;
}

/* Emits lines [data, data+len) (each ending in '\n', the last possibly
 * not: it gets one) with prefixes, in as few writes as fit a local buffer. */
static void emit_lines(crun_stream *s, const char *data, size_t len)
{
    char prefix[PREFIX_MAX];
    int pl = s->bare ? 0 : snprintf(prefix, sizeof prefix, "[%d] ", s->rank);
    char out[STREAM_CAP + 4096];
    size_t ol = 0;
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t ll = nl ? (size_t)(nl - data) : len; /* without the newline */
        size_t need = (size_t)pl + ll + 1;
        if (ol + need > sizeof out) {
            /* Flush whole lines gathered so far; a line never exceeds the
             * stream buffer, so it fits an empty out. */
            (void)crun_write_all(s->out_fd, out, ol);
            ol = 0;
        }
        memcpy(out + ol, prefix, (size_t)pl);
        memcpy(out + ol + (size_t)pl, data, ll);
        out[ol + (size_t)pl + ll] = '\n';
        ol += need;
        if (s->log_fd >= 0 && crun_write_all(s->log_fd, out + ol - ll - 1, ll + 1) < 0) {
            crun_msg("writing the log of rank %d failed: %s; no more log lines for it", s->rank,
                     strerror(errno));
            close(s->log_fd);
            s->log_fd = -1;
        }
        tail_push(s, data, ll);
        size_t step = nl ? ll + 1 : ll;
        data += step;
        len -= step;
    }
    /* A closed stdout (EPIPE: SIGPIPE is ignored) drops output but must not
     * stop supervision. */
    if (ol)
        (void)crun_write_all(s->out_fd, out, ol);
}

int crun_stream_pump(crun_stream *s)
{
    if (s->fd < 0)
        return 0;
    for (;;) {
        ssize_t r = read(s->fd, s->buf + s->len, s->cap - s->len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 1;
            return -1;
        }
        if (r == 0)
            return 0; /* the caller closes (and flushes the partial line) */
        s->len += (size_t)r;
        /* Emit every complete line; keep the partial rest. */
        char *last_nl = NULL;
        for (char *p = s->buf + s->len; p > s->buf; p--)
            if (p[-1] == '\n') {
                last_nl = p - 1;
                break;
            }
        if (last_nl) {
            size_t done = (size_t)(last_nl - s->buf) + 1;
            emit_lines(s, s->buf, done);
            memmove(s->buf, s->buf + done, s->len - done);
            s->len -= done;
        } else if (s->len == s->cap) {
            emit_lines(s, s->buf, s->len); /* an over-long line: cut it here */
            s->len = 0;
        }
        if ((size_t)r < s->cap / 2)
            return 1; /* the pipe is most likely drained; back to epoll */
    }
}

void crun_stream_close(crun_stream *s)
{
    if (s->len) {
        emit_lines(s, s->buf, s->len);
        s->len = 0;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

int crun_log_open(const char *dir, int rank, int is_err)
{
    /* mkdir -p: create each missing component. */
    char path[4096];
    size_t dl = strlen(dir);
    if (dl + 32 >= sizeof path) {
        crun_msg("--log-dir '%s' is too long", dir);
        return -1;
    }
    memcpy(path, dir, dl + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            crun_msg("cannot create log directory '%s': %s", path, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        crun_msg("cannot create log directory '%s': %s", path, strerror(errno));
        return -1;
    }
    snprintf(path + dl, sizeof path - dl, "/rank-%d.%s", rank, is_err ? "err" : "out");
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        crun_msg("cannot open log file '%s': %s", path, strerror(errno));
    return fd;
}

/* harness.h - run cohortrun as a real child process from a test: capture its
 * stdout and stderr apart, wait for text to appear (readiness comes from the
 * launcher's output, never from sleeps), signal it, reap it with a deadline. */
#ifndef CRUN_HARNESS_H
#define CRUN_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct crun_proc {
    pid_t pid;
    int out, err;          /* read ends, -1 at EOF */
    char *obuf, *ebuf;     /* everything read so far, NUL-terminated */
    size_t olen, elen, ocap, ecap;
    int status;            /* exit code, or 128+signal */
    int reaped;
    double t_start, t_end; /* ms, monotonic */
} crun_proc;

/* Starts argv (argv[0] is a path) with extra "K=V" settings (NULL-terminated
 * list, may be NULL) on top of the test's environment; "K=" unsets K. */
void crun_start(crun_proc *p, char *const argv[], const char *const *env);
/* Reads output until `needle` occurs `count` times in stdout (from_err: in
 * stderr) or the deadline passes. Returns 1 if seen, 0 if not. */
int crun_wait_text(crun_proc *p, const char *needle, int count, int from_err, int timeout_ms);
/* Reads everything until both pipes close and the process is reaped. On
 * the deadline: SIGKILL, reap, return -1. Else returns the status. */
int crun_finish(crun_proc *p, int timeout_ms);
void crun_free(crun_proc *p);
/* Occurrences of needle in hay. */
int crun_count(const char *hay, const char *needle);
double crun_now_ms(void);
/* Path of a test helper built next to this test ("crun_probe"). */
const char *crun_helper(const char *name);
/* The paths of crun_probe and of cohortrun, each in its own buffer (so that
 * both can stand in one argv), writable as argv's type wants. */
char *crun_probe_path(void);
char *crun_launcher_path(void);
/* Polls /proc until pid is gone or a zombie; returns 1 if gone within the
 * deadline. */
int crun_pid_gone(pid_t pid, int timeout_ms);
/* A fresh private directory under TMPDIR (or /tmp); removed by crun_rmtree. */
void crun_tmpdir(char *out, size_t len);
void crun_rmtree(const char *dir);

#endif

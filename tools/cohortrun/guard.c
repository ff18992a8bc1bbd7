/* guard.c - the orphan guard.
 *
 * Each worker gets PR_SET_PDEATHSIG(SIGKILL), so `kill -9 cohortrun` kills
 * every worker. That does not reach what a worker started itself (a shell
 * script's children, a data-loader process): those live on in the worker's
 * process group. The guard closes that gap: a small child of the launcher,
 * forked before any thread exists, that only reads a pipe. Every worker
 * registers its process group there before it execs; the launcher forgets a
 * group once it has reaped the worker and killed what was left in it. When
 * the pipe reaches EOF - the launcher exited, however it died - the guard
 * SIGKILLs every group still registered and exits.
 *
 * Messages are 8 bytes (op, pgid): below PIPE_BUF, so writes from the
 * launcher and from its forked children never interleave.
 */
#include "cohortrun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { GUARD_ADD = 1, GUARD_DEL = 2 };

typedef struct guard_msg {
    int32_t op;
    int32_t pgid;
} guard_msg;

static void guard_send(int fd, int op, pid_t pgid)
{
    if (fd < 0)
        return;
    guard_msg m = {op, (int32_t)pgid};
    /* One write below PIPE_BUF is atomic; retry only on EINTR. */
    while (write(fd, &m, sizeof m) < 0 && errno == EINTR)
        ;
}

void crun_guard_add_raw(int guard_fd, pid_t pgid) { guard_send(guard_fd, GUARD_ADD, pgid); }
void crun_guard_del(int guard_fd, pid_t pgid) { guard_send(guard_fd, GUARD_DEL, pgid); }

static void guard_main(int rfd)
{
    /* Survive the terminal's signals aimed at the launcher's group: the
     * launcher forwards those itself; the guard's job starts at EOF. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Hold nothing of the launcher's: a reader waiting for EOF on the
     * launcher's stdout must not wait for the guard. */
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        if (devnull > 2)
            close(devnull);
    }
    (void)setpgid(0, 0);

    size_t n = 0, cap = 64;
    pid_t *groups = malloc(cap * sizeof *groups);
    for (;;) {
        guard_msg m;
        ssize_t r = read(rfd, &m, sizeof m);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof m)
            break; /* EOF (or a broken pipe): the launcher is gone */
        if (m.op == GUARD_ADD && groups) {
            if (n == cap) {
                pid_t *g = realloc(groups, 2 * cap * sizeof *groups);
                if (!g)
                    continue; /* the worker still has PDEATHSIG */
                groups = g;
                cap *= 2;
            }
            groups[n++] = m.pgid;
        } else if (m.op == GUARD_DEL && groups) {
            for (size_t i = 0; i < n; i++)
                if (groups[i] == m.pgid) {
                    groups[i] = groups[--n];
                    break;
                }
        }
    }
    for (size_t i = 0; groups && i < n; i++)
        if (groups[i] > 1)
            kill(-groups[i], SIGKILL);
    _exit(0);
}

int crun_guard_start(pid_t *guard_pid)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        crun_msg("pipe for the orphan guard: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        crun_msg("fork of the orphan guard: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[1]);
        /* Close everything else the launcher had open (none yet but the
         * standard streams, which guard_main replaces). */
        guard_main(p[0]);
    }
    close(p[0]);
    *guard_pid = pid;
    return p[1];
}

/*
 * interrupt.c - Ctrl-C during a blocked call.
 *
 * A thread blocked in the library (GIL released) cannot run Python's
 * SIGINT handler: without help the job would hang until COHORT_TIMEOUT.
 * So while any call is blocked we chain a C handler in front of Python's:
 * it writes one byte to a pipe (async-signal-safe) and calls Python's
 * handler, which records the signal as usual. A helper thread reads the
 * pipe and calls cohort_abort() on every group with a call in progress;
 * the abort reaches every rank through the store and the data connections,
 * so every rank's call returns (AbortedError) within the abort's
 * propagation time, and the interrupted rank's PyErr_CheckSignals() raises
 * KeyboardInterrupt. Python's own handler is never replaced: ours is only
 * put in front of it, checked (one sigaction call) before each blocked
 * call, so a later signal.signal() by the program is respected and
 * re-wrapped.
 */
#include "cohort_py.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 64

static struct {
    cohort_group *g; /* NULL: free slot */
    int fired;
} slots[SLOTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int active;
static int pipefd[2] = {-1, -1};
static pthread_t helper;
static int helper_started;
static struct sigaction chained; /* Python's handler, called after ours */

static void on_sigint(int sig, siginfo_t *info, void *uc)
{
    int saved = errno;
    if (atomic_load(&active) > 0 && pipefd[1] >= 0) {
        ssize_t w = write(pipefd[1], "i", 1);
        (void)w; /* a full pipe already holds a wake-up */
    }
    if (chained.sa_flags & SA_SIGINFO) {
        if (chained.sa_sigaction)
            chained.sa_sigaction(sig, info, uc);
    } else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN &&
               chained.sa_handler) {
        chained.sa_handler(sig);
    }
    errno = saved;
}

static void *helper_main(void *arg)
{
    (void)arg;
    for (;;) {
        char c[16];
        ssize_t n = read(pipefd[0], c, sizeof c);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        pthread_mutex_lock(&mu);
        for (int i = 0; i < SLOTS; i++) {
            if (!slots[i].g || slots[i].fired)
                continue;
            slots[i].fired = 1;
            char why[128];
            snprintf(why, sizeof why, "KeyboardInterrupt (SIGINT) on rank %d during a blocked call",
                     cohort_rank(slots[i].g));
            /* The slot's owner cannot leave (and free g) while we hold mu. */
            cohort_abort(slots[i].g, why);
        }
        pthread_mutex_unlock(&mu);
    }
}

static pthread_mutex_t inst_mu = PTHREAD_MUTEX_INITIALIZER;

/* Puts on_sigint in front of whatever Python installed, once per change.
 * Under inst_mu: two threads must not both take the other's freshly
 * installed on_sigint for Python's handler (it would chain to itself). */
static void ensure_handler_locked(void)
{
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0)
        return;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigint)
        return;
    /* SIG_DFL kills the process (the launcher tears the job down), SIG_IGN
     * means the program wants no interrupt: leave both alone. */
    if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN))
        return;
    if (pipefd[0] < 0) {
        if (pipe2(pipefd, O_CLOEXEC) != 0)
            return;
        fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
    }
    if (!helper_started) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the helper takes no signals */
        helper_started = pthread_create(&helper, NULL, helper_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!helper_started)
            return;
        pthread_detach(helper);
    }
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_sigint;
    mine.sa_flags = SA_SIGINFO | (cur.sa_flags & SA_ONSTACK);
    mine.sa_mask = cur.sa_mask;
    /* chained is read by the handler: block SIGINT while it changes */
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    pthread_sigmask(SIG_BLOCK, &s, &old);
    chained = cur;
    sigaction(SIGINT, &mine, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void ensure_handler(void)
{
    pthread_mutex_lock(&inst_mu);
    ensure_handler_locked();
    pthread_mutex_unlock(&inst_mu);
}

/* Both run without the GIL (no Python API here): leaving may wait for the
 * helper's cohort_abort of this group, which must not hold up Python. */
int cpy_intr_enter(cohort_group *g)
{
    ensure_handler();
    pthread_mutex_lock(&mu);
    int tok = -1;
    for (int i = 0; i < SLOTS; i++)
        if (!slots[i].g) {
            slots[i].g = g;
            slots[i].fired = 0;
            tok = i;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (tok >= 0)
        atomic_fetch_add(&active, 1);
    return tok;
}

int cpy_intr_leave(int tok)
{
    if (tok < 0)
        return 0;
    atomic_fetch_sub(&active, 1);
    pthread_mutex_lock(&mu);
    int fired = slots[tok].fired;
    slots[tok].g = NULL;
    slots[tok].fired = 0;
    pthread_mutex_unlock(&mu);
    return fired;
}

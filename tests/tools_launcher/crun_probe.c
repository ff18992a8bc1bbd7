/* crun_probe.c - a worker program for the launcher's end-to-end tests.
 *
 *   crun_probe env                 print the launcher-set variables (never the
 *                                  token itself: its length and a hash)
 *   crun_probe exit CODE RANK [N]  RANK writes N stderr lines then exits CODE;
 *                                  the others wait for a signal
 *   crun_probe raise SIG RANK      RANK kills itself with SIG
 *   crun_probe lines N LEN         N stdout and N stderr lines of LEN chars, each
 *                                  written in two halves, no newline at the end
 *   crun_probe pids DIR            start a grandchild, write "<pid> <grandchild>"
 *                                  to DIR/pids-<rank>, print "ready", wait
 *   crun_probe stubborn            ignore SIGTERM, print "ready", wait
 *   crun_probe trap                print "ready", on SIGINT/SIGTERM print which
 *                                  signal arrived and exit 0
 *   crun_probe flaky RANK UNTIL    RANK exits 9 while COHORT_RESTART_COUNT < UNTIL
 *   crun_probe master [FAILRANK]   what torch's rank 0 does with MASTER_PORT:
 *                                  rank 0 binds it on every interface and
 *                                  accepts the others, who connect to
 *                                  MASTER_ADDR:MASTER_PORT; each prints
 *                                  "master ok gen G port P"; in restart 0
 *                                  FAILRANK then exits 9
 *   crun_probe sigs                print "ignored:" and the names of SIGINT,
 *                                  SIGTERM, SIGHUP, SIGQUIT, SIGPIPE this
 *                                  process ignores
 *   crun_probe store               generation 1: rank 0 writes a key into the
 *                                  launcher's store, rank 1 then fails (exit 9);
 *                                  generation 2: rank 0 reads the key back and
 *                                  tries to connect as generation 1
 *
 * "wait" is pause() bounded by alarm(60): a leaked worker still ends. With
 * PROBE_STUBBORN=1 in the environment, waiting ranks ignore SIGTERM.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cohort.h"
#include "store/backend.h"

static int env_int(const char *n)
{
    const char *v = getenv(n);
    return v ? atoi(v) : -1;
}

static const char *env_str(const char *n)
{
    const char *v = getenv(n);
    return v ? v : "(unset)";
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void wait_forever(void)
{
    alarm(60);
    for (;;)
        pause();
}

/* Does any of our own or our parent's command line hold the token? */
static int token_in_cmdline(const char *tok)
{
    const char *files[2] = {"/proc/self/cmdline", NULL};
    char parent[64];
    snprintf(parent, sizeof parent, "/proc/%d/cmdline", (int)getppid());
    files[1] = parent;
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f)
            continue;
        char buf[8192];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t j = 0; j < n; j++)
            if (!buf[j])
                buf[j] = ' ';
        buf[n] = 0;
        if (strstr(buf, tok))
            return 1;
    }
    return 0;
}

static int store_mode(int rank)
{
    unsigned gen = (unsigned)env_int("COHORT_GENERATION");
    const char *url = getenv("COHORT_STORE"), *job = getenv("COHORT_JOB_ID");
    const char *tok = getenv("COHORT_TOKEN");
    cohort_store *s = NULL;
    cohort_status st = coh_store_connect_gen(&s, url, job, tok, gen, 10000);
    if (st != COHORT_OK) {
        fprintf(stderr, "connect: %s: %s\n", cohort_status_name(st), cohort_last_error(NULL));
        return 1;
    }
    char *v = NULL;
    int rc = 0;
    if (gen == 1 && rank == 0) {
        st = cohort_store_sets(s, "probe/k", "written in generation 1");
        rc = st == COHORT_OK ? 0 : 1;
    } else if (gen == 1) {
        st = cohort_store_gets(s, "probe/k", &v, 10000); /* then fail: restart */
        rc = st == COHORT_OK ? 9 : 1;
    } else if (rank == 0) {
        st = cohort_store_gets(s, "probe/k", &v, 1000);
        printf("generation %u read: %s\n", gen, st == COHORT_OK ? v : cohort_status_name(st));
        cohort_store *old = NULL;
        st = coh_store_connect_gen(&old, url, job, tok, 1, 2000);
        printf("generation 1 client %s: %s: %s\n", st == COHORT_OK ? "accepted" : "refused",
               cohort_status_name(st), st == COHORT_OK ? "" : cohort_last_error(NULL));
        if (old)
            cohort_store_close(old);
    }
    free(v);
    cohort_store_close(s);
    return rc;
}

/* Rank 0 hosts a server on MASTER_PORT (all interfaces, as TCPStore binds),
 * the others connect to MASTER_ADDR:MASTER_PORT, retrying for 20 s. */
static int master_mode(int rank, int world, int failrank)
{
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    unsigned gen = (unsigned)env_int("COHORT_GENERATION");
    if (!addr || !port) {
        fprintf(stderr, "MASTER_ADDR/MASTER_PORT unset\n");
        return 1;
    }
    if (rank == 0) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0) {
            fprintf(stderr, "rank 0 cannot bind MASTER_PORT %s: %s\n", port, strerror(errno));
            return 1;
        }
        for (int i = 1; i < world; i++) {
            int c = accept(fd, NULL, NULL);
            if (c < 0 || write(c, "k", 1) != 1) {
                fprintf(stderr, "accept: %s\n", strerror(errno));
                return 1;
            }
            close(c);
        }
        close(fd);
    } else {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (getaddrinfo(addr, port, &hints, &ai) != 0 || !ai) {
            fprintf(stderr, "cannot resolve MASTER_ADDR %s\n", addr);
            return 1;
        }
        int ok = 0;
        for (int tries = 0; tries < 400 && !ok; tries++) {
            int fd = socket(ai->ai_family, SOCK_STREAM, 0);
            char b;
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && read(fd, &b, 1) == 1)
                ok = 1;
            else
                nanosleep(&(struct timespec){0, 50000000}, NULL);
            close(fd);
        }
        freeaddrinfo(ai);
        if (!ok) {
            fprintf(stderr, "rank %d could not reach rank 0 at %s:%s\n", rank, addr, port);
            return 1;
        }
    }
    printf("master ok gen %u port %s\n", gen, port);
    return rank == failrank && env_int("COHORT_RESTART_COUNT") == 0 ? 9 : 0;
}

static volatile sig_atomic_t got_sig;
static void on_sig(int s) { got_sig = s; }

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* PROBE_STUBBORN=1: make the launcher escalate to SIGKILL. Set before
     * anything is printed: "ready" must mean "will ignore SIGTERM". */
    if (getenv("PROBE_STUBBORN"))
        signal(SIGTERM, SIG_IGN);
    int rank = env_int("RANK");
    const char *mode = argc > 1 ? argv[1] : "env";

    if (!strcmp(mode, "sigs")) {
        static const struct { int sig; const char *name; } sg[] = {
            {SIGINT, "INT"}, {SIGTERM, "TERM"}, {SIGHUP, "HUP"}, {SIGQUIT, "QUIT"}, {SIGPIPE, "PIPE"}};
        char buf[128] = "ignored:";
        for (size_t i = 0; i < sizeof sg / sizeof sg[0]; i++) {
            struct sigaction sa;
            if (sigaction(sg[i].sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
                strcat(buf, " ");
                strcat(buf, sg[i].name);
            }
        }
        printf("%s.\n", buf);
        return 0;
    }
    if (!strcmp(mode, "master"))
        return master_mode(rank, env_int("WORLD_SIZE"), argc > 2 ? atoi(argv[2]) : -1);
    if (!strcmp(mode, "env")) {
        const char *tok = getenv("COHORT_TOKEN");
        printf("RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d LOCAL_WORLD_SIZE=%d GROUP_RANK=%d "
               "MASTER_ADDR=%s MASTER_PORT=%s COHORT_STORE=%s COHORT_JOB_ID=%s "
               "COHORT_GENERATION=%s COHORT_RESTART_COUNT=%s token_len=%zu token_hash=%016llx "
               "token_in_cmdline=%d TORCHELASTIC_USE_AGENT_STORE=%s\n",
               rank, env_int("WORLD_SIZE"), env_int("LOCAL_RANK"), env_int("LOCAL_WORLD_SIZE"),
               env_int("GROUP_RANK"), env_str("MASTER_ADDR"), env_str("MASTER_PORT"),
               env_str("COHORT_STORE"), env_str("COHORT_JOB_ID"), env_str("COHORT_GENERATION"),
               env_str("COHORT_RESTART_COUNT"), tok ? strlen(tok) : 0,
               (unsigned long long)(tok ? fnv(tok) : 0), tok ? token_in_cmdline(tok) : 0,
               env_str("TORCHELASTIC_USE_AGENT_STORE"));
        return 0;
    }
    if (!strcmp(mode, "exit") && argc >= 4) {
        if (rank == atoi(argv[3])) {
            int n = argc > 4 ? atoi(argv[4]) : 1;
            for (int i = 1; i <= n; i++)
                fprintf(stderr, "rank %d err line %d\n", rank, i);
            return atoi(argv[2]);
        }
        printf("ready\n");
        wait_forever();
    }
    if (!strcmp(mode, "raise") && argc >= 4) {
        if (rank == atoi(argv[3])) {
            fprintf(stderr, "about to raise %s\n", argv[2]);
            signal(atoi(argv[2]), SIG_DFL);
            raise(atoi(argv[2]));
            return 99;
        }
        printf("ready\n");
        wait_forever();
    }
    if (!strcmp(mode, "lines") && argc >= 4) {
        int n = atoi(argv[2]), len = atoi(argv[3]);
        char *line = malloc((size_t)len + 64);
        if (!line)
            return 1;
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < 2; k++) {
                int fd = k ? 2 : 1;
                int h = snprintf(line, 64, "%s r=%d i=%d ", k ? "err" : "out", rank, i);
                memset(line + h, 'a' + rank % 26, (size_t)len);
                size_t total = (size_t)h + (size_t)len;
                int last = i == n - 1;
                if (!last)
                    line[total++] = '\n';
                /* Two writes per line: the launcher must join the halves. */
                size_t half = total / 2;
                if (write(fd, line, half) < 0 || write(fd, line + half, total - half) < 0)
                    return 1;
            }
        }
        free(line);
        return 0;
    }
    if (!strcmp(mode, "pids") && argc >= 3) {
        pid_t g = fork();
        if (g == 0) {
            /* The grandchild: outlives nothing if the launcher is killed. */
            wait_forever();
        }
        char path[512];
        snprintf(path, sizeof path, "%s/pids-%d.tmp", argv[2], rank);
        FILE *f = fopen(path, "w");
        if (!f)
            return 1;
        fprintf(f, "%d %d\n", (int)getpid(), (int)g);
        fclose(f);
        char fin[512];
        snprintf(fin, sizeof fin, "%s/pids-%d", argv[2], rank);
        rename(path, fin);
        printf("ready\n");
        wait_forever();
    }
    if (!strcmp(mode, "stubborn")) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        printf("ready\n");
        wait_forever();
    }
    if (!strcmp(mode, "trap")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sig;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        printf("ready\n");
        alarm(60);
        while (!got_sig)
            pause();
        printf("got signal %d\n", (int)got_sig);
        return 0;
    }
    if (!strcmp(mode, "flaky") && argc >= 4) {
        printf("generation %s restart %s\n", env_str("COHORT_GENERATION"),
               env_str("COHORT_RESTART_COUNT"));
        if (rank == atoi(argv[2]) && env_int("COHORT_RESTART_COUNT") < atoi(argv[3])) {
            fprintf(stderr, "flaky failure in generation %s\n", env_str("COHORT_GENERATION"));
            return 9;
        }
        return 0;
    }
    if (!strcmp(mode, "store"))
        return store_mode(rank);
    fprintf(stderr, "crun_probe: bad arguments\n");
    return 64;
}

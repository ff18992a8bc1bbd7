/* opts.c - cohortrun's command line. Options stop at the first non-option
 * word (or "--"): everything after it belongs to the program. */
#include "cohortrun.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bind.h"
#include "cli.h"
#include "cohort.h"

static const char usage_text[] =
    "usage: cohortrun [options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts PROGRAM as the workers of one cohort job and supervises them.\n"
    "\n"
    "  -n, --nproc-per-node N   workers on this node (default 1); also -np N,\n"
    "                           --nproc_per_node N|auto|cpu\n"
    "      --nnodes N           nodes in the job; one cohortrun per node (default 1);\n"
    "                           torchrun's MIN:MAX only with MIN == MAX\n"
    "      --node-rank R        this node's index, 0..N-1 (default 0)\n"
    "      --master HOST:PORT   where node 0 hosts the job's store (single node:\n"
    "                           default 127.0.0.1:0, port 0 picks a free port)\n"
    "      --master-addr HOST, --master-port PORT\n"
    "                           the same as torchrun spells it (defaults 127.0.0.1,\n"
    "                           29500); --rdzv-endpoint HOST[:PORT] (default port\n"
    "                           29400), --rdzv-backend c10d|static, --rdzv-id ID\n"
    "      --standalone         a single-node job on a free loopback port (default)\n"
    "      --store URL          use this store (tcp://h:p, etcd://...) instead of\n"
    "                           hosting one; needs --job-id/--token-file or env\n"
    "      --job-id ID          job identity (default: COHORT_JOB_ID, else random)\n"
    "      --token-file FILE    job secret, mode 0600 (default: COHORT_TOKEN from the\n"
    "                           environment; single node: random)\n"
    "      --max-restarts K     restart the whole worker set up to K times (default 0)\n"
    "      --grace-ms MS        SIGTERM -> SIGKILL delay when tearing down (default 3000)\n"
    "      --log-dir DIR        also write DIR/rank-<r>.out and DIR/rank-<r>.err\n"
    "      --bind ADDR          address the hosted store listens on (default\n"
    "                           127.0.0.1 on one node, 0.0.0.0 with several)\n"
    "      --bind-to none|auto|core  pin each worker to a core of its own: none never\n"
    "                           (the default); auto while this node's workers fit on the\n"
    "                           cores cohortrun may use, none when they outnumber them\n"
    "                           (Open MPI's default); core always (round-robin).\n"
    "                           Default: COHORT_BIND, else none\n"
    "      --join-timeout-ms MS how long node agents wait for each other (default 300000)\n"
    "      --heap               preload libcohort-heap.so into the workers (LD_PRELOAD):\n"
    "                           their allocations of COHORT_HEAP_MIN_BYTES (default\n"
    "                           1 MiB) and more come from shared memory, so a broadcast\n"
    "                           from a malloc'ed buffer is copied once by each local\n"
    "                           reader (docs/shm.md \"The shared heap\")\n"
    "  -m, --module             run 'python3 -m PROGRAM' (torchrun -m)\n"
    "      --no-python          run PROGRAM as is, even a .py file (by default a\n"
    "                           PROGRAM ending in .py runs as 'python3 PROGRAM')\n"
    "Underscore spellings (--node_rank, --max_restarts, --log_dir, ...) and\n"
    "--opt=value are accepted everywhere.\n"
    "      --no-prefix          worker lines as written, without \"[rank] \" (as mpirun\n"
    "                           and torchrun print them; lines stay whole)\n"
    "  -q, --quiet              print only worker output and the failure summary\n"
    "  -h, --help               this text\n"
    "  -V, --version            print the version\n"
    "\n"
    "Workers get RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
    "MASTER_ADDR, MASTER_PORT, COHORT_STORE, COHORT_JOB_ID, COHORT_TOKEN,\n"
    "COHORT_GENERATION, COHORT_RESTART_COUNT, COHORT_MAX_RESTARTS, COHORT_NNODES,\n"
    "COHORT_NODE_RANK. Exit status: 0, the first failing worker's code (128+signal\n"
    "if killed), 128+signal if cohortrun was interrupted, 2 usage, 125 launcher\n"
    "failure, 126/127 program not executable/not found. See docs/launcher.md.\n";

/* --heap: libcohort-heap.so beside the libcohort.so this cohortrun runs
 * with (the build tree's top, or the install libdir). */
static char *heap_find(void)
{
    Dl_info di;
    char *path = NULL;
    if (!dladdr((void *)cohort_init, &di) || !di.dli_fname || !strchr(di.dli_fname, '/')) {
        fprintf(stderr, "cohortrun: --heap: cannot tell where libcohort.so is\n");
        return NULL;
    }
    const char *slash = strrchr(di.dli_fname, '/');
    if (asprintf(&path, "%.*s/libcohort-heap.so", (int)(slash - di.dli_fname), di.dli_fname) < 0)
        return NULL;
    char *real = realpath(path, NULL); /* no "bin/../lib" in the workers' LD_PRELOAD */
    if (real) {
        free(path);
        path = real;
    }
    if (access(path, R_OK) != 0 || strpbrk(path, " :")) {
        fprintf(stderr, "cohortrun: --heap: %s %s\n", path,
                strpbrk(path, " :") ? "has a space or ':' (LD_PRELOAD cannot name it)"
                                    : "is not there (a sanitizer build has none)");
        free(path);
        return NULL;
    }
    return path;
}

/* Strict decimal parse into [lo, hi]. */
static int parse_int(const char *opt, const char *s, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !*s || *end || v < lo || v > hi) {
        fprintf(stderr, "cohortrun: %s: '%s' is not an integer in [%ld, %ld]\n", opt, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* "host:port" or "[v6]:port" into host and port (0..65535; the library's
 * grammar, cohort_hostport_split). */
static int parse_hostport(const char *opt, const char *s, char *host, size_t hostlen, int *port)
{
    char ps[8];
    if (cohort_hostport_split(s, host, hostlen, ps, sizeof ps) != COHORT_OK) {
        fprintf(stderr, "cohortrun: %s: '%s' is not HOST:PORT\n", opt, s);
        return -1;
    }
    return parse_int(opt, ps, 0, 65535, port) < 0 ? -1 : 0;
}

/* "4", "auto"/"cpu" (one worker per online CPU, as torchrun does without
 * GPUs); "gpu" is refused: cohort runs on CPUs. */
static int parse_nproc(const char *s, int *out)
{
    if (!strcmp(s, "auto") || !strcmp(s, "cpu")) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        *out = n > 0 ? (int)(n < 4096 ? n : 4096) : 1;
        return 0;
    }
    if (!strcmp(s, "gpu")) {
        fprintf(stderr, "cohortrun: --nproc-per-node gpu: cohort runs its workers on CPUs; give a "
                        "number (or auto/cpu)\n");
        return -1;
    }
    return parse_int("--nproc-per-node", s, 1, 4096, out);
}

/* torchrun's --nnodes is N or MIN:MAX; only a fixed size (MIN == MAX) fits
 * cohortrun, which has no elastic membership (docs/launcher.md). */
static int parse_nnodes(const char *s, int *out)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return parse_int("--nnodes", s, 1, 65536, out);
    char lo[32];
    size_t l = (size_t)(colon - s);
    if (l == 0 || l >= sizeof lo) {
        fprintf(stderr, "cohortrun: --nnodes: '%s' is not N or MIN:MAX\n", s);
        return -1;
    }
    memcpy(lo, s, l);
    lo[l] = 0;
    int a, b;
    if (parse_int("--nnodes", lo, 1, 65536, &a) < 0 || parse_int("--nnodes", colon + 1, 1, 65536, &b) < 0)
        return -1;
    if (a != b) {
        fprintf(stderr, "cohortrun: --nnodes %s: elastic node counts (MIN:MAX) are not supported; "
                        "give a fixed count\n", s);
        return -1;
    }
    *out = a;
    return 0;
}

int crun_parse(crun_cfg *cfg, int argc, char **argv)
{
    enum {
        O_NNODES = 256,
        O_NODE_RANK,
        O_MASTER,
        O_STORE,
        O_JOB_ID,
        O_TOKEN_FILE,
        O_MAX_RESTARTS,
        O_GRACE,
        O_LOG_DIR,
        O_BIND,
        O_JOIN_TIMEOUT,
        O_MASTER_ADDR,
        O_MASTER_PORT,
        O_STANDALONE,
        O_RDZV_ENDPOINT,
        O_RDZV_BACKEND,
        O_NO_PYTHON,
        O_HEAP,
        O_UNSUPPORTED,
        O_NO_PREFIX,
        O_BIND_TO,
    };
    /* cohortrun's own names first, then torchrun's spellings of the same
     * things (both the underscore and the dash forms torchrun accepts). */
    static const struct option longopts[] = {
        {"nproc-per-node", required_argument, NULL, 'n'},
        {"nproc_per_node", required_argument, NULL, 'n'},
        {"nnodes", required_argument, NULL, O_NNODES},
        {"node-rank", required_argument, NULL, O_NODE_RANK},
        {"node_rank", required_argument, NULL, O_NODE_RANK},
        {"master", required_argument, NULL, O_MASTER},
        {"master-addr", required_argument, NULL, O_MASTER_ADDR},
        {"master_addr", required_argument, NULL, O_MASTER_ADDR},
        {"master-port", required_argument, NULL, O_MASTER_PORT},
        {"master_port", required_argument, NULL, O_MASTER_PORT},
        {"standalone", no_argument, NULL, O_STANDALONE},
        {"rdzv-endpoint", required_argument, NULL, O_RDZV_ENDPOINT},
        {"rdzv_endpoint", required_argument, NULL, O_RDZV_ENDPOINT},
        {"rdzv-backend", required_argument, NULL, O_RDZV_BACKEND},
        {"rdzv_backend", required_argument, NULL, O_RDZV_BACKEND},
        {"rdzv-id", required_argument, NULL, O_JOB_ID},
        {"rdzv_id", required_argument, NULL, O_JOB_ID},
        {"store", required_argument, NULL, O_STORE},
        {"job-id", required_argument, NULL, O_JOB_ID},
        {"token-file", required_argument, NULL, O_TOKEN_FILE},
        {"max-restarts", required_argument, NULL, O_MAX_RESTARTS},
        {"max_restarts", required_argument, NULL, O_MAX_RESTARTS},
        {"grace-ms", required_argument, NULL, O_GRACE},
        {"log-dir", required_argument, NULL, O_LOG_DIR},
        {"log_dir", required_argument, NULL, O_LOG_DIR},
        {"bind", required_argument, NULL, O_BIND},
        {"bind-to", required_argument, NULL, O_BIND_TO},
        {"bind_to", required_argument, NULL, O_BIND_TO},
        {"join-timeout-ms", required_argument, NULL, O_JOIN_TIMEOUT},
        {"no-python", no_argument, NULL, O_NO_PYTHON},
        {"heap", no_argument, NULL, O_HEAP},
        {"no_python", no_argument, NULL, O_NO_PYTHON},
        {"module", no_argument, NULL, 'm'},
        {"quiet", no_argument, NULL, 'q'},
        {"no-prefix", no_argument, NULL, O_NO_PREFIX},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        /* torchrun options with no cohortrun meaning: a precise refusal. */
        {"rdzv_conf", required_argument, NULL, O_UNSUPPORTED},
        {"rdzv-conf", required_argument, NULL, O_UNSUPPORTED},
        {"monitor_interval", required_argument, NULL, O_UNSUPPORTED},
        {"monitor-interval", required_argument, NULL, O_UNSUPPORTED},
        {"start_method", required_argument, NULL, O_UNSUPPORTED},
        {"start-method", required_argument, NULL, O_UNSUPPORTED},
        {"role", required_argument, NULL, O_UNSUPPORTED},
        {"redirects", required_argument, NULL, O_UNSUPPORTED},
        {"tee", required_argument, NULL, O_UNSUPPORTED},
        {"local_addr", required_argument, NULL, O_UNSUPPORTED},
        {"local-addr", required_argument, NULL, O_UNSUPPORTED},
        {"run_path", no_argument, NULL, O_UNSUPPORTED},
        {"run-path", no_argument, NULL, O_UNSUPPORTED},
        {NULL, 0, NULL, 0},
    };
        memset(cfg, 0, sizeof *cfg);
    cfg->nproc = 1;
    cfg->nnodes = 1;
    cfg->master_port = -1;
    cfg->grace_ms = 3000;
    cfg->join_timeout_ms = 300000;
    cfg->bind_to = -2; /* not given: COHORT_BIND, below */

    const char *maddr = NULL, *rdzv = NULL, *backend = NULL;
    int mport = -1, standalone = 0, have_master = 0, module = 0;
    int c, bad = 0, idx = -1;
    optind = 1;
    opterr = 0;
    /* '+': stop at the program name so its own options pass through. */
    while ((idx = -1, c = getopt_long(argc, argv, "+:n:mqhV", longopts, &idx)) != -1) {
        switch (c) {
        case 'n':
            /* mpirun's "-np 4" reaches here as -n with the value "p". */
            if (!strcmp(optarg, "p") && argv[optind - 1][0] == '-' && argv[optind - 1][1] == 'n' &&
                argv[optind - 1][2] == 'p') {
                if (optind >= argc) {
                    fprintf(stderr, "cohortrun: option '-np' needs a value\n");
                    bad = 1;
                    break;
                }
                optarg = argv[optind++];
            } else if (optarg[0] == 'p' && argv[optind - 1][0] == '-' &&
                       !strncmp(argv[optind - 1], "-np", 3)) {
                optarg++; /* "-np4" */
            }
            bad |= parse_nproc(optarg, &cfg->nproc);
            break;
        case O_NNODES:
            bad |= parse_nnodes(optarg, &cfg->nnodes);
            break;
        case O_NODE_RANK:
            bad |= parse_int("--node-rank", optarg, 0, 65535, &cfg->node_rank);
            break;
        case O_MASTER:
            have_master = 1;
            bad |= parse_hostport("--master", optarg, cfg->master_host, sizeof cfg->master_host,
                                  &cfg->master_port);
            break;
        case O_MASTER_ADDR:
            maddr = optarg;
            break;
        case O_MASTER_PORT:
            bad |= parse_int("--master-port", optarg, 0, 65535, &mport);
            break;
        case O_STANDALONE:
            standalone = 1;
            break;
        case O_RDZV_ENDPOINT:
            rdzv = optarg;
            break;
        case O_RDZV_BACKEND:
            backend = optarg;
            break;
        case O_HEAP:
            if (!cfg->heap_path && !(cfg->heap_path = heap_find()))
                bad = 1;
            break;
        case O_NO_PYTHON:
            cfg->no_python = 1;
            break;
        case 'm':
            module = 1;
            break;
        case O_UNSUPPORTED:
            fprintf(stderr, "cohortrun: --%s is a torchrun option cohortrun has no equivalent of "
                            "(docs/launcher.md lists the ones it takes)\n",
                    idx >= 0 ? longopts[idx].name : "?");
            bad = 1;
            break;
        case O_STORE:
            cfg->store_url = optarg;
            break;
        case O_JOB_ID:
            cfg->job_id = optarg;
            break;
        case O_TOKEN_FILE:
            cfg->token_file = optarg;
            break;
        case O_MAX_RESTARTS:
            bad |= parse_int("--max-restarts", optarg, 0, 1000000, &cfg->max_restarts);
            break;
        case O_GRACE:
            bad |= parse_int("--grace-ms", optarg, 0, 3600000, &cfg->grace_ms);
            break;
        case O_LOG_DIR:
            cfg->log_dir = optarg;
            break;
        case O_BIND:
            cfg->bind_addr = optarg;
            break;
        case O_BIND_TO:
            if ((cfg->bind_to = cli_bind_parse(optarg)) < 0) {
                fprintf(stderr, "cohortrun: --bind-to '%s': expected none, auto or core\n", optarg);
                bad = 1;
            }
            break;
        case O_JOIN_TIMEOUT:
            bad |= parse_int("--join-timeout-ms", optarg, 1, INT_MAX, &cfg->join_timeout_ms);
            break;
        case 'q':
            cfg->quiet = 1;
            break;
        case O_NO_PREFIX:
            cfg->no_prefix = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return -1;
        case 'V':
            cli_version("cohortrun");
            return -1;
        default: /* '?' or ':' */
            (void)cli_opt_error("cohortrun", c, argv, longopts);
            return CRUN_EXIT_USAGE;
        }
    }
    if (bad)
        goto usage;

    /* torchrun's ways of naming the master, folded into --master. */
    if (backend && strcmp(backend, "c10d") && strcmp(backend, "static")) {
        if (!strcmp(backend, "etcd") || !strcmp(backend, "etcd-v2"))
            fprintf(stderr, "cohortrun: --rdzv-backend %s: give the etcd store as --store "
                            "etcd://HOST:PORT/PREFIX (with --job-id and a token)\n",
                    backend);
        else
            fprintf(stderr, "cohortrun: --rdzv-backend '%s': expected c10d or static (cohortrun "
                            "hosts its own store on node 0 either way)\n",
                    backend);
        goto usage;
    }
    if ((have_master || maddr || mport >= 0) + (rdzv != NULL) + standalone > 1) {
        fprintf(stderr, "cohortrun: give the master once: --master HOST:PORT, --master-addr/"
                        "--master-port, --rdzv-endpoint or --standalone\n");
        goto usage;
    }
    if (standalone) {
        if (cfg->nnodes != 1) {
            fprintf(stderr, "cohortrun: --standalone is a single-node job; it contradicts "
                            "--nnodes %d\n", cfg->nnodes);
            goto usage;
        }
        /* The single-node default already: loopback, a free port. */
    }
    if (maddr || mport >= 0) {
        /* torchrun's defaults: 127.0.0.1 and 29500. */
        const char *h = maddr ? maddr : "127.0.0.1";
        if (strlen(h) >= sizeof cfg->master_host) {
            fprintf(stderr, "cohortrun: --master-addr is too long\n");
            goto usage;
        }
        snprintf(cfg->master_host, sizeof cfg->master_host, "%s", h);
        cfg->master_port = mport >= 0 ? mport : 29500;
    }
    if (rdzv) {
        /* HOST[:PORT]; torchrun's default rendezvous port is 29400. */
        char buf[300];
        const char *colon = strrchr(rdzv, ':');
        int bracket_only = rdzv[0] == '[' && rdzv[strlen(rdzv) - 1] == ']';
        if (!colon || bracket_only || (rdzv[0] != '[' && strchr(rdzv, ':') != colon)) {
            snprintf(buf, sizeof buf, "%s:29400", rdzv);
            rdzv = buf;
        }
        if (parse_hostport("--rdzv-endpoint", rdzv, cfg->master_host, sizeof cfg->master_host,
                           &cfg->master_port) < 0)
            goto usage;
    }
    if (optind >= argc) {
        fprintf(stderr, "cohortrun: no program given\n");
        goto usage;
    }
    cfg->argv = argv + optind;
    cfg->argc = argc - optind;
    /* torchrun runs "python3 SCRIPT.py" and "python3 -m MODULE" unless
     * --no-python; cohortrun does the same for a .py program or -m. */
    size_t pl = strlen(cfg->argv[0]);
    if (!cfg->no_python && (module || (pl > 3 && !strcmp(cfg->argv[0] + pl - 3, ".py")))) {
        cfg->py_argv = calloc((size_t)cfg->argc + 3, sizeof(char *));
        if (!cfg->py_argv) {
            fprintf(stderr, "cohortrun: out of memory\n");
            return CRUN_EXIT_LAUNCHER;
        }
        int k = 0;
        cfg->py_argv[k++] = (char *)"python3";
        if (module)
            cfg->py_argv[k++] = (char *)"-m";
        for (int i = 0; i < cfg->argc; i++)
            cfg->py_argv[k++] = cfg->argv[i];
        cfg->argv = cfg->py_argv;
        cfg->argc = k;
    } else if (module) {
        fprintf(stderr, "cohortrun: -m runs a Python module; it contradicts --no-python\n");
        goto usage;
    }

    if (cfg->node_rank >= cfg->nnodes) {
        fprintf(stderr, "cohortrun: --node-rank %d is not below --nnodes %d\n", cfg->node_rank,
                cfg->nnodes);
        goto usage;
    }
    if ((long)cfg->nnodes * cfg->nproc > INT_MAX / 2) {
        fprintf(stderr, "cohortrun: --nnodes x --nproc-per-node is too large\n");
        goto usage;
    }
    if (cfg->nnodes > 1) {
        if (!cfg->master_host[0] && !cfg->store_url) {
            fprintf(stderr, "cohortrun: --nnodes %d needs --master HOST:PORT (or --store URL) so "
                            "that the nodes find each other\n",
                    cfg->nnodes);
            goto usage;
        }
        /* Other nodes must know the port before node 0 starts: no port 0. */
        if (!cfg->store_url && cfg->master_port == 0) {
            fprintf(stderr, "cohortrun: --master port 0 is only allowed on a single node (the "
                            "other nodes could not know the port)\n");
            goto usage;
        }
    }
    if (cfg->job_id) {
        size_t l = strlen(cfg->job_id);
        int ok = l > 0 && l < 64;
        for (size_t i = 0; ok && i < l; i++) {
            char ch = cfg->job_id[i];
            ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_' || ch == '.';
        }
        if (!ok) {
            fprintf(stderr, "cohortrun: --job-id must be 1-63 characters of [A-Za-z0-9._-]\n");
            goto usage;
        }
    }
    /* the option wins over the environment */
    if (cfg->bind_to == -2 && (cfg->bind_to = cli_bind_from_env("cohortrun")) < 0)
        goto usage;
    return 0;
usage:
    free(cfg->py_argv);
    cfg->py_argv = NULL;
    fprintf(stderr, "Try 'cohortrun --help'.\n");
    return CRUN_EXIT_USAGE;
}

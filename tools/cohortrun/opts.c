/* opts.c - cohortrun's command line. Options stop at the first non-option
 * word (or "--"): everything after it belongs to the program. */
#include "cohortrun.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"

static const char usage_text[] =
    "usage: cohortrun [options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts PROGRAM as the workers of one cohort job and supervises them.\n"
    "\n"
    "  -n, --nproc-per-node N   workers on this node (default 1)\n"
    "      --nnodes N           nodes in the job; one cohortrun per node (default 1)\n"
    "      --node-rank R        this node's index, 0..N-1 (default 0)\n"
    "      --master HOST:PORT   where node 0 hosts the job's store (single node:\n"
    "                           default 127.0.0.1:0, port 0 picks a free port)\n"
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
    "      --join-timeout-ms MS how long node agents wait for each other (default 300000)\n"
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

/* "host:port" or "[v6]:port" into host and port (0..65535). */
static int parse_hostport(const char *opt, const char *s, char *host, size_t hostlen, int *port)
{
    const char *colon;
    const char *h = s;
    size_t hl;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':')
            goto bad;
        h = s + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            goto bad;
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= hostlen)
        goto bad;
    memcpy(host, h, hl);
    host[hl] = 0;
    if (parse_int(opt, colon + 1, 0, 65535, port) < 0)
        return -1;
    return 0;
bad:
    fprintf(stderr, "cohortrun: %s: '%s' is not HOST:PORT\n", opt, s);
    return -1;
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
    };
    static const struct option longopts[] = {
        {"nproc-per-node", required_argument, NULL, 'n'},
        {"nnodes", required_argument, NULL, O_NNODES},
        {"node-rank", required_argument, NULL, O_NODE_RANK},
        {"master", required_argument, NULL, O_MASTER},
        {"store", required_argument, NULL, O_STORE},
        {"job-id", required_argument, NULL, O_JOB_ID},
        {"token-file", required_argument, NULL, O_TOKEN_FILE},
        {"max-restarts", required_argument, NULL, O_MAX_RESTARTS},
        {"grace-ms", required_argument, NULL, O_GRACE},
        {"log-dir", required_argument, NULL, O_LOG_DIR},
        {"bind", required_argument, NULL, O_BIND},
        {"join-timeout-ms", required_argument, NULL, O_JOIN_TIMEOUT},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    memset(cfg, 0, sizeof *cfg);
    cfg->nproc = 1;
    cfg->nnodes = 1;
    cfg->master_port = -1;
    cfg->grace_ms = 3000;
    cfg->join_timeout_ms = 300000;

    int c, bad = 0;
    optind = 1;
    opterr = 0;
    /* '+': stop at the program name so its own options pass through. */
    while ((c = getopt_long(argc, argv, "+:n:qhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            bad |= parse_int("--nproc-per-node", optarg, 1, 4096, &cfg->nproc);
            break;
        case O_NNODES:
            bad |= parse_int("--nnodes", optarg, 1, 65536, &cfg->nnodes);
            break;
        case O_NODE_RANK:
            bad |= parse_int("--node-rank", optarg, 0, 65535, &cfg->node_rank);
            break;
        case O_MASTER:
            bad |= parse_hostport("--master", optarg, cfg->master_host, sizeof cfg->master_host,
                                  &cfg->master_port);
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
        case O_JOIN_TIMEOUT:
            bad |= parse_int("--join-timeout-ms", optarg, 1, INT_MAX, &cfg->join_timeout_ms);
            break;
        case 'q':
            cfg->quiet = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return -1;
        case 'V':
            printf("cohortrun %d.%d.%d\n", COHORT_VERSION_MAJOR, COHORT_VERSION_MINOR,
                   COHORT_VERSION_PATCH);
            return -1;
        case ':':
            fprintf(stderr, "cohortrun: %s needs a value\n", argv[optind - 1]);
            bad = 1;
            break;
        default:
            fprintf(stderr, "cohortrun: unknown option '%s'\n", argv[optind - 1]);
            bad = 1;
            break;
        }
    }
    if (bad)
        goto usage;
    if (optind >= argc) {
        fprintf(stderr, "cohortrun: no program given\n");
        goto usage;
    }
    cfg->argv = argv + optind;
    cfg->argc = argc - optind;

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
    return 0;
usage:
    fprintf(stderr, "Try 'cohortrun --help'.\n");
    return CRUN_EXIT_USAGE;
}

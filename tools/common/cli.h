/*
 * cli.h - what every cohort tool's command line shares (docs/tools.md):
 * getopt_long parsing with --opt=value, --help/--version (exit 0), an
 * unknown option named with the nearest known one ("did you mean"), and one
 * set of exit codes.
 */
#ifndef COHORT_CLI_H
#define COHORT_CLI_H

#include <getopt.h>
#include <stddef.h>

/* Exit codes every tool uses the same way. Tools add codes of their own
 * above CLI_EXIT_USAGE (cohort-kv: 3 timeout, 4 auth, ...; cohortrun passes
 * its workers' codes through). */
enum {
    CLI_EXIT_OK = 0,    /* done; also --help and --version */
    CLI_EXIT_FAIL = 1,  /* ran, and the answer is "no": a check failed, a key is absent */
    CLI_EXIT_USAGE = 2, /* bad option, bad value, missing argument: nothing was done */
};

/* getenv(name), but NULL when unset or empty (the library reads its own
 * variables the same way). */
const char *cli_env(const char *name);

/* "TOOL X.Y.Z" on stdout. */
void cli_version(const char *tool);

/* The nearest long option to `arg` ("--nproc_per_nod", "--master-adr=x";
 * leading dashes, "=value", '_' vs '-' ignored), or NULL if none is close. */
const char *cli_suggest(const char *arg, const struct option *lo);

/* Reports a getopt_long error (c is '?' or ':', from an optstring starting
 * with ':' or "+:") and returns CLI_EXIT_USAGE:
 *   TOOL: unknown option '--nproc_per_nod' (did you mean '--nproc_per_node'?)
 *   TOOL: option '--root' needs a value
 *   Try 'TOOL --help'. */
int cli_opt_error(const char *tool, int c, char **argv, const struct option *lo);

/* Edit distance (insert, delete, substitute, swap of neighbours); exposed
 * for tests. */
size_t cli_distance(const char *a, size_t al, const char *b, size_t bl);

#endif

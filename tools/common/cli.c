/* cli.c - shared command-line helpers of the tools (see cli.h). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"

const char *cli_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void cli_version(const char *tool)
{
    printf("%s %d.%d.%d\n", tool, COHORT_VERSION_MAJOR, COHORT_VERSION_MINOR,
           COHORT_VERSION_PATCH);
}

size_t cli_distance(const char *a, size_t al, const char *b, size_t bl)
{
    /* Three rows of the Damerau-Levenshtein table (optimal string alignment). */
    enum { MAXL = 64 };
    if (al > MAXL || bl > MAXL)
        return (size_t)-1;
    size_t r0[MAXL + 1], r1[MAXL + 1], r2[MAXL + 1];
    size_t *pp = r0, *p = r1, *c = r2;
    for (size_t j = 0; j <= bl; j++)
        p[j] = j;
    for (size_t i = 1; i <= al; i++) {
        c[0] = i;
        for (size_t j = 1; j <= bl; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = p[j] + 1;
            if (c[j - 1] + 1 < v)
                v = c[j - 1] + 1;
            if (p[j - 1] + cost < v)
                v = p[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            c[j] = v;
        }
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    return p[bl];
}

/* Lower case, '_' as '-', no leading dashes, no "=value". */
static size_t norm(const char *s, char *out, size_t cap)
{
    while (*s == '-')
        s++;
    size_t n = 0;
    for (; *s && *s != '=' && n + 1 < cap; s++)
        out[n++] = *s == '_' ? '-' : (*s >= 'A' && *s <= 'Z') ? (char)(*s - 'A' + 'a') : *s;
    out[n] = 0;
    return n;
}

const char *cli_suggest(const char *arg, const struct option *lo)
{
    char a[65], b[65];
    size_t al = norm(arg, a, sizeof a);
    if (!al)
        return NULL;
    const char *best = NULL;
    size_t bestd = (size_t)-1;
    /* Of equally close names, the one spelled in the user's style
     * (--max_restarts for --max_restrats, --max-restarts for --max-restrats). */
    int underscore = strchr(arg, '_') != NULL;
    for (; lo && lo->name; lo++) {
        size_t bl = norm(lo->name, b, sizeof b);
        size_t d = cli_distance(a, al, b, bl);
        if (d < bestd || (d == bestd && best && (strchr(lo->name, '_') != NULL) == underscore &&
                          (strchr(best, '_') != NULL) != underscore)) {
            bestd = d;
            best = lo->name;
        }
    }
    /* Close enough to be a typo: 2 edits, or a third of the word. */
    size_t limit = al / 3 > 2 ? al / 3 : 2;
    return bestd <= limit ? best : NULL;
}

int cli_opt_error(const char *tool, int c, char **argv, const struct option *lo)
{
    const char *arg = argv[optind - 1];
    if (c == ':') {
        if (arg[0] == '-' && arg[1] == '-')
            fprintf(stderr, "%s: option '%s' needs a value\n", tool, arg);
        else
            fprintf(stderr, "%s: option '-%c' needs a value\n", tool, optopt);
    } else if (optopt) {
        fprintf(stderr, "%s: unknown option '-%c'\n", tool, optopt);
    } else {
        /* A long option getopt_long did not know (or an ambiguous prefix). */
        size_t l = strcspn(arg, "=");
        const char *s = cli_suggest(arg, lo);
        if (s)
            fprintf(stderr, "%s: unknown option '%.*s' (did you mean '--%s'?)\n", tool, (int)l,
                    arg, s);
        else
            fprintf(stderr, "%s: unknown option '%.*s'\n", tool, (int)l, arg);
    }
    fprintf(stderr, "Try '%s --help'.\n", tool);
    return CLI_EXIT_USAGE;
}

/* Consumer program of tests/packaging: all_reduce over the group it is started
 * in; "etcd ADDR" instead tries an etcd:// store and reports whether the
 * plugin was found (and whether libcurl got mapped only then). */
#include <cohort.h>
#include <cohort_store.h>
#include <stdio.h>
#include <string.h>

static int curl_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "libcurl"))
            found = 1;
    if (f)
        fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "etcd")) {
        printf("curl before: %s\n", curl_mapped() ? "mapped" : "not mapped");
        cohort_store *s = NULL;
        cohort_status st = cohort_store_connect(&s, argv[2], "job", "token", 300);
        printf("connect: %s: %s\n", cohort_status_name(st), cohort_last_error(NULL));
        printf("curl after: %s\n", curl_mapped() ? "mapped" : "not mapped");
        cohort_store_close(s);
        return 0;
    }
    int sign_compare_is_fine_here = -1;
    unsigned one = 1;
    if (sign_compare_is_fine_here < one) /* -Wextra would reject this; -Wall does not */
        sign_compare_is_fine_here = 0;
    cohort_group *g;
    if (cohort_init(&g) != COHORT_OK) {
        fprintf(stderr, "init: %s\n", cohort_last_error(NULL));
        return 1;
    }
    int v = cohort_rank(g) + 1;
    cohort_status st = cohort_all_reduce(g, &v, &v, 1, COHORT_INT32, COHORT_SUM);
    if (st != COHORT_OK) {
        fprintf(stderr, "all_reduce: %s\n", cohort_last_error(g));
        cohort_finalize(g);
        return 1;
    }
    if (cohort_rank(g) == 0)
        printf("sum=%d curl=%s\n", v, curl_mapped() ? "mapped" : "not mapped");
    return cohort_finalize(g) != COHORT_OK;
}

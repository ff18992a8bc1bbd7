/*
 * bench_store_etcd.c - set/get/add latency through the etcd backend next to
 * the cohort tcp store, one client, sequential ops (docs/etcd.md).
 *
 *   bench_store_etcd [ops=2000] [disk]
 *
 * etcd runs as one member on loopback with its data on tmpfs (as in the
 * tests), or on disk with "disk" (every write fsync'd, like production).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort_store.h"
#include "etcd_harness.h"
#include "support/support.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *store, const char *op, double *lat, int n)
{
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    printf("| %-13s | %-4s | %8.0f | %8.0f | %8.0f |\n", store, op, lat[n / 2],
           lat[(int)(n * 0.99)], lat[n - 1]);
}

static int run(const char *name, cohort_store *s, int n)
{
    double *lat = malloc(sizeof *lat * (size_t)n);
    char k[32];
    for (int op = 0; op < 3; op++) {
        for (int i = 0; i < n; i++) {
            snprintf(k, sizeof k, "bench/%d", i % 64);
            double t0 = now_us();
            cohort_status st;
            if (op == 0) {
                st = cohort_store_set(s, k, strlen(k), "0123456789abcdef", 16);
            } else if (op == 1) {
                void *v = NULL;
                size_t vl;
                st = cohort_store_get(s, k, strlen(k), &v, &vl, 5000);
                free(v);
            } else {
                int64_t r;
                st = cohort_store_add(s, "bench/ctr", 9, 1, &r);
            }
            lat[i] = now_us() - t0;
            if (st != COHORT_OK) {
                fprintf(stderr, "%s op %d: %s: %s\n", name, op, cohort_status_name(st),
                        cohort_store_last_error(s));
                free(lat);
                return -1;
            }
        }
        report(name, op == 0 ? "set" : op == 1 ? "get" : "add", lat, n);
    }
    free(lat);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    int disk = argc > 2 && !strcmp(argv[2], "disk");
    if (n < 100)
        n = 100;
    if (disk)
        setenv("TMPDIR", "/var/tmp", 1);
    printf("%d sequential ops per row, one client, 16-byte values, latency in us\n\n", n);
    printf("| store         | op   |      p50 |      p99 |      max |\n");
    printf("|---------------|------|---------:|---------:|---------:|\n");

    char addr[128];
    cohort_store_server *srv = cht_store_start("bench", "bench-token", addr, sizeof addr);
    if (srv) {
        cohort_store *s = NULL;
        if (cohort_store_connect(&s, addr, "bench", "bench-token", 5000) == COHORT_OK) {
            run("cohort tcp", s, n);
            cohort_store_close(s);
        }
        cohort_store_server_stop(srv);
    } else {
        fprintf(stderr, "tcp store did not start\n");
    }

    eh_cluster c;
    if (eh_start_opts(&c, 1, 20000, disk) != 0)
        return 1;
    char eaddr[700];
    eh_addr(&c, "cohort", eaddr, sizeof eaddr);
    cohort_store *s = NULL;
    int rc = 1;
    if (cohort_store_connect(&s, eaddr, "bench", "bench-token", 5000) == COHORT_OK) {
        rc = run(disk ? "etcd (disk)" : "etcd (tmpfs)", s, n) ? 1 : 0;
        cohort_store_close(s);
    }
    eh_stop(&c);
    return rc;
}

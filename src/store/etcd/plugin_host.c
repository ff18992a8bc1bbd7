/*
 * plugin_host.c - built into libcohort-etcd.so only: the libcohort internals
 * the etcd client calls (util.h, backend.h), forwarded to the table of the
 * libcohort that loaded the plugin (plugin.h), and the plugin's entry point.
 *
 * The plugin is compiled with -fvisibility=hidden, so these definitions bind
 * inside the plugin and never interpose on (or get interposed by) the
 * host's own coh_* symbols; only the entry point is exported.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cohort_config.h"
#include "store/etcd/plugin.h"

static const coh_etcd_host *H;

__attribute__((visibility("default"))) const coh_etcd_plugin *
cohort_etcd_plugin_v1(const coh_etcd_host *host, char *why, size_t whylen)
{
    if (!host || host->abi != COH_ETCD_PLUGIN_ABI || host->size != sizeof(coh_etcd_host) ||
        !host->version || strcmp(host->version, COHORT_VERSION_STRING)) {
        snprintf(why, whylen,
                 "the plugin is cohort %s (plugin ABI %d), the library is cohort %s (plugin ABI "
                 "%u): install the plugin built with this libcohort",
                 COHORT_VERSION_STRING, COH_ETCD_PLUGIN_ABI,
                 host && host->version ? host->version : "?", host ? host->abi : 0u);
        return NULL;
    }
    H = host;
    return coh_etcd_plugin_table();
}

void *coh_malloc(size_t n) { return H->malloc_(n); }
void *coh_calloc(size_t n, size_t sz) { return H->calloc_(n, sz); }
void *coh_realloc(void *p, size_t n) { return H->realloc_(p, n); }
char *coh_strdup(const char *s) { return H->strdup_(s); }
void coh_free(void *p) { H->free_(p); }

/* Variadic calls are formatted here and passed on as one "%s". */
cohort_status coh_err_set(coh_err *e, cohort_status st, const char *fmt, ...)
{
    char buf[COH_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return H->err_set(e, st, "%s", buf);
}

cohort_status coh_err_sys(coh_err *e, cohort_status st, const char *syscall, int err,
                          const char *fmt, ...)
{
    char buf[COH_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return H->err_sys(e, st, syscall, err, "%s", buf);
}

int coh_log_level(void) { return H->log_level(); }

void coh_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    H->log_write(level, file, line, "%s", buf);
}

uint64_t coh_now_ns(void) { return H->now_ns(); }
uint64_t coh_deadline_ns(int timeout_ms) { return H->deadline_ns(timeout_ms); }
int coh_ms_left(uint64_t deadline_ns) { return H->ms_left(deadline_ns); }
int coh_env_int(const char *name, long *out) { return H->env_int(name, out); }
const char *coh_env_str(const char *name) { return H->env_str(name); }
cohort_status coh_random(void *buf, size_t n) { return H->random(buf, n); }
coh_err *coh_store_err(cohort_store *s) { return H->store_err(s); }
void *coh_store_priv(cohort_store *s) { return H->store_priv(s); }
void coh_store_set_priv(cohort_store *s, void *priv) { H->store_set_priv(s, priv); }
int coh_store_timeout(cohort_store *s) { return H->store_timeout(s); }
const void *coh_store_prefix(cohort_store *s, size_t *len) { return H->store_prefix(s, len); }
const coh_store_backend *coh_store_backend_of(cohort_store *s) { return H->store_backend_of(s); }

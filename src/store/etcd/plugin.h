/*
 * plugin.h - the interface between libcohort and the etcd backend plugin
 * (libcohort-etcd.so), which libcohort dlopens on the first etcd:// address
 * (src/store/etcd_load.c). Keeping libcurl and jansson in the plugin keeps
 * them (and libcurl's ~30 dependencies) out of every program that never
 * uses etcd.
 *
 * The plugin takes nothing from libcohort by symbol name: libcohort hands it
 * a table of the internal calls it needs (coh_etcd_host), and it answers with
 * its own table (coh_etcd_plugin). So one plugin file serves programs linked
 * against libcohort.so and programs linked against libcohort.a alike (their
 * internal symbols are not exported), and the plugin's calls always reach
 * the copy of libcohort that loaded it (plugin_host.c forwards them).
 *
 * Both sides are built from the same tree: the entry point refuses a host of
 * another ABI or version rather than guess at struct layouts.
 */
#ifndef COH_STORE_ETCD_PLUGIN_H
#define COH_STORE_ETCD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "store/backend.h"
#include "util/util.h"

/* Bump on any change to either struct. */
#define COH_ETCD_PLUGIN_ABI 1
/* The one symbol the plugin exports. */
#define COH_ETCD_PLUGIN_ENTRY "cohort_etcd_plugin_v1"

typedef struct coh_etcd_host {
    uint32_t abi;        /* COH_ETCD_PLUGIN_ABI */
    uint32_t size;       /* sizeof(coh_etcd_host) */
    const char *version; /* COHORT_VERSION_STRING */
    void *(*malloc_)(size_t n);
    void *(*calloc_)(size_t n, size_t sz);
    void *(*realloc_)(void *p, size_t n);
    char *(*strdup_)(const char *s);
    void (*free_)(void *p);
    cohort_status (*err_set)(coh_err *e, cohort_status st, const char *fmt, ...);
    cohort_status (*err_sys)(coh_err *e, cohort_status st, const char *syscall, int err,
                             const char *fmt, ...);
    int (*log_level)(void);
    void (*log_write)(int level, const char *file, int line, const char *fmt, ...);
    uint64_t (*now_ns)(void);
    uint64_t (*deadline_ns)(int timeout_ms);
    int (*ms_left)(uint64_t deadline_ns);
    int (*env_int)(const char *name, long *out);
    const char *(*env_str)(const char *name);
    cohort_status (*random)(void *buf, size_t n);
    coh_err *(*store_err)(cohort_store *s);
    void *(*store_priv)(cohort_store *s);
    void (*store_set_priv)(cohort_store *s, void *priv);
    int (*store_timeout)(cohort_store *s);
    const void *(*store_prefix)(cohort_store *s, size_t *len);
    const coh_store_backend *(*store_backend_of)(cohort_store *s);
} coh_etcd_host;

typedef struct coh_etcd_plugin {
    uint32_t abi;  /* COH_ETCD_PLUGIN_ABI */
    uint32_t size; /* sizeof(coh_etcd_plugin) */
    const char *version;
    const coh_store_backend *backend;
    /* coh_store_etcd_put_lease / coh_store_etcd_lease_state (etcd.h). */
    cohort_status (*put_lease)(cohort_store *s, const void *key, size_t klen, const void *val,
                               size_t vlen);
    int (*lease_state)(cohort_store *s);
} coh_etcd_plugin;

/* The entry point: checks the host (abi, size, version), keeps it for the
 * plugin's life and returns the plugin's table; on a mismatch returns NULL
 * with the reason in why. */
typedef const coh_etcd_plugin *(*coh_etcd_plugin_entry_fn)(const coh_etcd_host *host, char *why,
                                                           size_t whylen);

/* etcd_backend.c: the plugin's table (also linked directly by white-box
 * tests, which have no plugin_host.c). */
const coh_etcd_plugin *coh_etcd_plugin_table(void);

#endif

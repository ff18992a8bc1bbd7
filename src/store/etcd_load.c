/*
 * etcd_load.c - finds and loads the etcd backend plugin (libcohort-etcd.so,
 * plugin.h) the first time an etcd:// address is used, and forwards etcd.h's
 * calls to it. Programs that never use etcd never load it, so libcohort
 * itself needs only libc, pthreads and libsodium.
 *
 * Where it looks, first hit wins:
 *   1. $COHORT_ETCD_PLUGIN (a path; when set, the only place tried);
 *   2. next to the object that holds this code: libcohort.so's directory
 *      (an installed or moved tree), or the program's when linked statically,
 *      and then <that dir>/../<libdir> (a static program in <prefix>/bin);
 *   3. the loader's search path for that object: its RUNPATH (build-tree
 *      binaries point it at the build directory), LD_LIBRARY_PATH, the
 *      system directories (RTLD_DI_SERINFO; see try_search_path), then the
 *      bare name (ld.so.cache);
 *   4. the install libdir configured at build time (COHORT_PLUGIN_DIR).
 * A failure is remembered: later etcd:// connects fail with the same message
 * (each path tried and dlerror's reason) without searching again.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cohort_config.h"
#include "store/backend.h"
#include "store/etcd/etcd.h"
#include "store/etcd/plugin.h"

static const coh_etcd_plugin *plugin;

#if COHORT_ETCD
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[2048];

static const coh_etcd_host host = {
    .abi = COH_ETCD_PLUGIN_ABI,
    .size = sizeof(coh_etcd_host),
    .version = COHORT_VERSION_STRING,
    .malloc_ = coh_malloc,
    .calloc_ = coh_calloc,
    .realloc_ = coh_realloc,
    .strdup_ = coh_strdup,
    .free_ = coh_free,
    .err_set = coh_err_set,
    .err_sys = coh_err_sys,
    .log_level = coh_log_level,
    .log_write = coh_log_write,
    .now_ns = coh_now_ns,
    .deadline_ns = coh_deadline_ns,
    .ms_left = coh_ms_left,
    .env_int = coh_env_int,
    .env_str = coh_env_str,
    .random = coh_random,
    .store_err = coh_store_err,
    .store_priv = coh_store_priv,
    .store_set_priv = coh_store_set_priv,
    .store_timeout = coh_store_timeout,
    .store_prefix = coh_store_prefix,
    .store_backend_of = coh_store_backend_of,
};

/* Appends "; <what>" to load_error (bounded). */
static void note(const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(load_error);
    if (n + 1 < sizeof load_error)
        snprintf(load_error + n, sizeof load_error - n, fmt, a, b);
}

/* 1: loaded and accepted (plugin set); 0: note()d why not. */
static int try_path(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        note("%s%s", load_error[0] ? "; " : "", e ? e : path);
        return 0;
    }
    coh_etcd_plugin_entry_fn entry;
    /* POSIX's blessed way to turn a dlsym result into a function pointer. */
    *(void **)&entry = dlsym(h, COH_ETCD_PLUGIN_ENTRY);
    if (!entry) {
        const char *e = dlerror();
        note("%s%s", load_error[0] ? "; " : "", e ? e : "entry point missing");
        dlclose(h);
        return 0;
    }
    char why[512] = "";
    const coh_etcd_plugin *p = entry(&host, why, sizeof why);
    if (!p || p->abi != COH_ETCD_PLUGIN_ABI || p->size != sizeof(coh_etcd_plugin)) {
        char msg[700];
        snprintf(msg, sizeof msg, "%s: %s", path, why[0] ? why : "plugin ABI mismatch");
        note("%s%s", load_error[0] ? "; " : "", msg);
        dlclose(h);
        return 0;
    }
    /* Never dlclosed: libcurl keeps global state and threads may run in it. */
    plugin = p;
    coh_debug("etcd backend plugin loaded from %s", path);
    return 1;
}

/* The directories the dynamic loader would search for a library needed
 * by the object holding this code (its RUNPATH, LD_LIBRARY_PATH, the
 * system's), asked of the loader (RTLD_DI_SERINFO) rather than left to
 * dlopen: dlopen uses its caller's RUNPATH, and a sanitizer's dlopen
 * interceptor is a different caller. 1: loaded. */
static int try_search_path(void *self)
{
    Dl_serinfo sz;
    if (!self || dlinfo(self, RTLD_DI_SERINFOSIZE, &sz) != 0 || sz.dls_size == 0)
        return 0;
    Dl_serinfo *si = coh_malloc(sz.dls_size);
    if (!si)
        return 0;
    int done = 0;
    if (dlinfo(self, RTLD_DI_SERINFOSIZE, si) == 0 && dlinfo(self, RTLD_DI_SERINFO, si) == 0) {
        char path[4096];
        for (unsigned i = 0; i < si->dls_cnt && !done; i++) {
            int n = snprintf(path, sizeof path, "%s/%s", si->dls_serpath[i].dls_name,
                             COHORT_ETCD_PLUGIN_NAME);
            /* Only files that exist: the directories without one are
             * summarised once below, not one error each. */
            if (n > 0 && (size_t)n < sizeof path && access(path, F_OK) == 0)
                done = try_path(path);
        }
        if (!done)
            note("%snot in the library search path (RUNPATH, LD_LIBRARY_PATH, system)%s",
                 load_error[0] ? "; " : "", "");
    }
    coh_free(si);
    return done;
}

static void load(void)
{
    char path[4096];
    /* An object, not the literal: "" in some builds, and clang warns on a
     * constant operand of && (-Wconstant-logical-operand). */
    static const char rel_libdir[] = COHORT_REL_LIBDIR;
    const char *env = coh_env_str("COHORT_ETCD_PLUGIN");
    if (env) {
        (void)try_path(env);
    } else {
        Dl_info di;
        int found = 0;
        void *self = NULL;
        if (dladdr((void *)&host, &di) && di.dli_fname && strchr(di.dli_fname, '/')) {
            const char *slash = strrchr(di.dli_fname, '/');
            int n = snprintf(path, sizeof path, "%.*s/%s", (int)(slash - di.dli_fname),
                             di.dli_fname, COHORT_ETCD_PLUGIN_NAME);
            found = n > 0 && (size_t)n < sizeof path && try_path(path);
            /* A program in <prefix>/bin: <prefix>/<libdir>. */
            if (!found && rel_libdir[0] != '\0') {
                n = snprintf(path, sizeof path, "%.*s/../%s/%s", (int)(slash - di.dli_fname),
                             di.dli_fname, rel_libdir, COHORT_ETCD_PLUGIN_NAME);
                found = n > 0 && (size_t)n < sizeof path && access(path, F_OK) == 0 &&
                        try_path(path);
            }
            /* The handle of libcohort.so, or NULL when this code is in the
             * program itself (static link). */
            self = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        }
        if (!self)
            self = dlopen(NULL, RTLD_LAZY);
        if (!found)
            found = try_search_path(self);
        if (!found) /* ld.so.cache */
            found = try_path(COHORT_ETCD_PLUGIN_NAME);
        if (self)
            dlclose(self);
        if (!found) {
            snprintf(path, sizeof path, "%s/%s", COHORT_PLUGIN_DIR, COHORT_ETCD_PLUGIN_NAME);
            (void)try_path(path);
        }
    }
    if (!plugin) {
        char tries[sizeof load_error];
        memcpy(tries, load_error, sizeof tries);
        snprintf(load_error, sizeof load_error,
                 "etcd:// needs the etcd backend plugin %s, which could not be loaded (%s%s): %s",
                 COHORT_ETCD_PLUGIN_NAME, env ? "COHORT_ETCD_PLUGIN=" : "install it beside libcohort or set COHORT_ETCD_PLUGIN",
                 env ? env : "", tries);
    }
}
#endif /* COHORT_ETCD */

const coh_store_backend *coh_store_etcd_backend(void)
{
#if COHORT_ETCD
    pthread_once(&load_once, load);
    return plugin ? plugin->backend : NULL;
#else
    return NULL;
#endif
}

const char *coh_store_etcd_unavailable(void)
{
#if COHORT_ETCD
    if (!coh_store_etcd_backend())
        return load_error;
    return "";
#else
    return "this cohort was built without etcd (configure with -DCOHORT_ETCD=ON)";
#endif
}

/* A handle is an etcd one iff its backend is the loaded plugin's. */
static int is_etcd(cohort_store *s)
{
    return s && plugin && coh_store_backend_of(s) == plugin->backend;
}

cohort_status coh_store_etcd_put_lease(cohort_store *s, const void *key, size_t klen,
                                       const void *val, size_t vlen)
{
    if (!is_etcd(s))
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED,
                           "coh_store_etcd_put_lease: not an etcd:// store handle");
    return plugin->put_lease(s, key, klen, val, vlen);
}

int coh_store_etcd_lease_state(cohort_store *s)
{
    if (!is_etcd(s))
        return -1;
    return plugin->lease_state(s);
}

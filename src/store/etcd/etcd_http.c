/*
 * etcd_http.c - talking to etcd's v3 JSON gateway: address parsing, one
 * HTTP connection per coh_etcd_conn (libcurl easy handle, kept alive),
 * unary calls with endpoint failover, transient-error retry and
 * re-authentication, and watch streams.
 *
 * Failure classes of one attempt and what the caller loop does with them:
 *   transport (refused, reset, timed out)   -> next endpoint, backoff per round
 *   transient cluster error (no leader,
 *     leader changed, timed out, busy)      -> next endpoint after a short pause
 *   invalid auth token                      -> authenticate again, same endpoint
 *   anything else                           -> final status for the caller
 * A request may thus be sent twice; callers whose txns are not idempotent
 * guard them with an op marker (etcd_kv.c).
 */
#include "store/etcd/etcd_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_once_t etcd_once = PTHREAD_ONCE_INIT;
static int etcd_once_ok;

/* curl_global_init is not safe to race with other curl users; do it once. */
static void etcd_global_init(void)
{
    etcd_once_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK && sodium_init() >= 0;
}

/* ---- JSON helpers ---- */

json_t *etcd_b64_2(const void *a, size_t an, const void *b, size_t bn)
{
    size_t n = an + bn;
    size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    unsigned char *raw = coh_malloc(n ? n : 1);
    char *out = coh_malloc(cap);
    json_t *j = NULL;
    if (raw && out) {
        if (an)
            memcpy(raw, a, an);
        if (bn)
            memcpy(raw + an, b, bn);
        sodium_bin2base64(out, cap, raw, n, sodium_base64_VARIANT_ORIGINAL);
        j = json_string(out);
    }
    coh_free(raw);
    coh_free(out);
    return j;
}

json_t *etcd_b64(const void *p, size_t n) { return etcd_b64_2(p, n, NULL, 0); }

int etcd_unb64(json_t *obj, const char *field, unsigned char **out, size_t *outlen)
{
    json_t *f = obj ? json_object_get(obj, field) : NULL;
    const char *s = json_is_string(f) ? json_string_value(f) : "";
    size_t sl = strlen(s);
    size_t cap = sl / 4 * 3 + 3;
    unsigned char *b = coh_malloc(cap + 1);
    if (!b)
        return -2;
    size_t bl = 0;
    if (sl && sodium_base642bin(b, cap, s, sl, NULL, &bl, NULL, sodium_base64_VARIANT_ORIGINAL)) {
        coh_free(b);
        return -1;
    }
    b[bl] = 0;
    *out = b;
    *outlen = bl;
    return 0;
}

int64_t etcd_int(json_t *obj, const char *field)
{
    json_t *f = obj ? json_object_get(obj, field) : NULL;
    if (json_is_integer(f))
        return (int64_t)json_integer_value(f);
    if (json_is_string(f))
        return strtoll(json_string_value(f), NULL, 10);
    return 0;
}

json_t *etcd_prefix_end(const void *p, size_t n)
{
    /* Increment the last byte that is not 0xff and drop what follows; an
     * all-0xff prefix has no end, and "\0" means "to the end of the keys". */
    unsigned char *e = coh_malloc(n ? n : 1);
    if (!e)
        return NULL;
    memcpy(e, p, n);
    size_t m = n;
    while (m > 0 && e[m - 1] == 0xff)
        m--;
    json_t *j;
    if (m == 0) {
        j = etcd_b64("\0", 1);
    } else {
        e[m - 1]++;
        j = etcd_b64(e, m);
    }
    coh_free(e);
    return j;
}

/* ---- address and configuration ---- */

/* Safe on a partly filled cfg (every failure path of cfg_parse ends here).
 * The password is wiped before it is freed. */
static void cfg_fini(coh_etcd_cfg *cfg)
{
    for (int i = 0; i < cfg->n_ep; i++)
        coh_free(cfg->urls[i]);
    coh_free(cfg->urls);
    coh_free(cfg->ep_list);
    coh_free(cfg->job);
    if (cfg->password) {
        sodium_memzero(cfg->password, strlen(cfg->password));
        coh_free(cfg->password);
    }
    coh_free(cfg->cacert);
    coh_free(cfg->cert);
    coh_free(cfg->key);
    coh_free(cfg->root);
    coh_free(cfg->kroot);
    coh_free(cfg->mroot);
    memset(cfg, 0, sizeof *cfg);
}

/* Hosts become part of an URL: only name and address characters, so an
 * address can never smuggle a path, query or credentials into it. */
static int host_char_ok(char ch)
{
    return isalnum((unsigned char)ch) || ch == '.' || ch == '-' || ch == '_' || ch == ':';
}

/* Loopback members: the only ones plain HTTP is quiet about. */
static int host_is_loopback(const char *h)
{
    return !strcmp(h, "localhost") || !strncmp(h, "127.", 4) || !strcmp(h, "::1");
}

/* One "host:port", "[v6]:port" or "host" (port 2379) into an URL. */
static cohort_status parse_endpoint(const char *s, size_t n, int tls, char **url, int *loopback,
                                    coh_err *err)
{
    char host[256];
    long port = 2379;
    const char *hs = s, *he;
    const char *rest;
    if (n == 0)
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd address: empty endpoint");
    if (s[0] == '[') {
        he = memchr(s, ']', n);
        if (!he)
            return coh_err_set(err, COHORT_ERR_INVALID, "etcd address: missing ']' in '%.*s'",
                               (int)n, s);
        hs = s + 1;
        rest = he + 1;
    } else {
        he = memchr(s, ':', n);
        if (!he)
            he = s + n;
        rest = he;
    }
    size_t hl = (size_t)(he - hs);
    if (hl == 0 || hl >= sizeof host)
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd address: bad host in '%.*s'", (int)n, s);
    for (size_t i = 0; i < hl; i++)
        if (!host_char_ok(hs[i]))
            return coh_err_set(err, COHORT_ERR_INVALID,
                               "etcd address: bad character in host '%.*s'", (int)n, s);
    memcpy(host, hs, hl);
    host[hl] = 0;
    if (rest < s + n) {
        if (*rest != ':' || rest + 1 == s + n)
            return coh_err_set(err, COHORT_ERR_INVALID, "etcd address: bad port in '%.*s'",
                               (int)n, s);
        port = 0;
        for (const char *p = rest + 1; p < s + n; p++) {
            if (!isdigit((unsigned char)*p) || port > 65535)
                return coh_err_set(err, COHORT_ERR_INVALID, "etcd address: bad port in '%.*s'",
                                   (int)n, s);
            port = port * 10 + (*p - '0');
        }
        if (port < 1 || port > 65535)
            return coh_err_set(err, COHORT_ERR_INVALID, "etcd address: port out of range in '%.*s'",
                               (int)n, s);
    } else if (s[0] != '[' && memchr(hs, ':', hl)) {
        return coh_err_set(err, COHORT_ERR_INVALID,
                           "etcd address: IPv6 hosts need brackets: '[%s]:port'", host);
    }
    size_t ul = hl + 32;
    *url = coh_malloc(ul);
    if (!*url)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    const char *scheme = tls ? "https" : "http";
    if (s[0] == '[')
        snprintf(*url, ul, "%s://[%s]:%ld", scheme, host, port);
    else
        snprintf(*url, ul, "%s://%s:%ld", scheme, host, port);
    *loopback = host_is_loopback(host);
    return COHORT_OK;
}

/* An integer setting from the environment: def when unset, INVALID naming
 * the variable when malformed or out of [lo, hi]. */
static cohort_status env_int_range(const char *name, long def, long lo, long hi, long *out,
                                   coh_err *err)
{
    long v = def;
    int r = coh_env_int(name, &v);
    if (r < 0 || (r > 0 && (v < lo || v > hi)))
        return coh_err_set(err, COHORT_ERR_INVALID, "%s=%s: expected an integer in [%ld, %ld]",
                           name, coh_env_str(name) ? coh_env_str(name) : "", lo, hi);
    *out = v;
    return COHORT_OK;
}

/* COHORT_ETCD_CACERT / CERT / KEY: files curl reads for etcds://. Refused
 * with etcd:// (plain HTTP), where they would protect nothing while the
 * user believes they do; unreadable files are named now, not as a TLS
 * failure later. */
static cohort_status tls_parse(coh_etcd_cfg *cfg, const char *addr, coh_err *err)
{
    static const char *const names[] = {"COHORT_ETCD_CACERT", "COHORT_ETCD_CERT",
                                        "COHORT_ETCD_KEY"};
    char **dst[] = {&cfg->cacert, &cfg->cert, &cfg->key};
    for (int i = 0; i < 3; i++) {
        const char *v = coh_env_str(names[i]);
        if (!v)
            continue;
        if (!cfg->tls)
            return coh_err_set(err, COHORT_ERR_INVALID,
                               "%s is set but '%s' is plain HTTP: use etcds:// for TLS", names[i],
                               addr);
        if (access(v, R_OK) != 0)
            return coh_err_sys(err, COHORT_ERR_INVALID, "access", errno, "%s=%s: cannot read it",
                               names[i], v);
        if (!(*dst[i] = coh_strdup(v)))
            return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    }
    if (cfg->key && !cfg->cert)
        return coh_err_set(err, COHORT_ERR_INVALID,
                           "COHORT_ETCD_KEY is set without COHORT_ETCD_CERT (the client certificate)");
    return COHORT_OK;
}

static cohort_status cfg_parse(coh_etcd_cfg *cfg, const char *addr, const char *job,
                               const char *token, coh_err *err)
{
    cohort_status st;
    memset(cfg, 0, sizeof *cfg);
    size_t skip;
    if (addr && !strncmp(addr, "etcd://", 7)) {
        skip = 7;
    } else if (addr && !strncmp(addr, "etcds://", 8)) {
        skip = 8;
        cfg->tls = 1;
    } else {
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd address '%s': expected etcd://host:port[,host:port...]/prefix (or etcds:// for TLS)",
                           addr ? addr : "(null)");
    }
    /* The job id becomes a key path segment and the auth user name: a '/'
     * would let one job's namespace overlap another's. */
    if (!job || !*job || strlen(job) > 255)
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd store: job id must be 1-255 characters");
    for (const char *p = job; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x21 || *p == 0x7f)
            return coh_err_set(err, COHORT_ERR_INVALID,
                               "etcd store: job id '%s' may not contain '/', spaces or control characters",
                               job);
    const char *hosts = addr + skip;
    const char *slash = strchr(hosts, '/');
    const char *hend = slash ? slash : hosts + strlen(hosts);
    if (hend == hosts)
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd address '%s': no endpoint", addr);

    int n = 1;
    for (const char *p = hosts; p < hend; p++)
        n += *p == ',';
    cfg->urls = coh_calloc((size_t)n, sizeof *cfg->urls);
    cfg->ep_list = coh_malloc((size_t)(hend - hosts) + 1);
    if (!cfg->urls || !cfg->ep_list)
        goto nomem;
    memcpy(cfg->ep_list, hosts, (size_t)(hend - hosts));
    cfg->ep_list[hend - hosts] = 0;
    for (const char *p = hosts; p <= hend;) {
        const char *c = memchr(p, ',', (size_t)(hend - p));
        if (!c)
            c = hend;
        int lo = 0;
        st = parse_endpoint(p, (size_t)(c - p), cfg->tls, &cfg->urls[cfg->n_ep], &lo, err);
        if (st != COHORT_OK)
            goto fail;
        cfg->remote_plain |= !cfg->tls && !lo;
        cfg->n_ep++;
        p = c + 1;
    }

    /* prefix: the path without leading/trailing slashes; "cohort" if none. */
    const char *ps = slash ? slash : hend;
    while (*ps == '/')
        ps++;
    size_t pl = strlen(ps);
    while (pl > 0 && ps[pl - 1] == '/')
        pl--;
    for (size_t i = 0; i < pl; i++)
        if ((unsigned char)ps[i] < 0x21 || ps[i] == 0x7f || (ps[i] == '/' && ps[i + 1] == '/')) {
            st = coh_err_set(err, COHORT_ERR_INVALID, "etcd address '%s': bad prefix", addr);
            goto fail;
        }
    if (pl == 0) {
        ps = "cohort";
        pl = 6;
    }
    size_t jl = strlen(job);
    cfg->root_len = 1 + pl + 1 + jl + 1;
    cfg->root = coh_malloc(cfg->root_len + 1);
    cfg->job = coh_strdup(job);
    cfg->password = coh_strdup(token ? token : "");
    if (!cfg->root || !cfg->job || !cfg->password)
        goto nomem;
    snprintf(cfg->root, cfg->root_len + 1, "/%.*s/%s/", (int)pl, ps, job);
    cfg->kroot_len = cfg->mroot_len = cfg->root_len + 2;
    cfg->kroot = coh_malloc(cfg->kroot_len + 1);
    cfg->mroot = coh_malloc(cfg->mroot_len + 1);
    if (!cfg->kroot || !cfg->mroot)
        goto nomem;
    snprintf(cfg->kroot, cfg->kroot_len + 1, "%sk/", cfg->root);
    snprintf(cfg->mroot, cfg->mroot_len + 1, "%sm/", cfg->root);

    long v = 0;
    if ((st = env_int_range("COHORT_ETCD_LEASE_TTL", 5, 1, 3600, &v, err)) != COHORT_OK)
        goto fail;
    cfg->lease_ttl_s = (int)v;
    if ((st = env_int_range("COHORT_ETCD_REQUEST_TIMEOUT", 5000, 50, 600000, &v, err)) !=
        COHORT_OK)
        goto fail;
    cfg->req_timeout_ms = (int)v;
    const char *am = coh_env_str("COHORT_ETCD_AUTH");
    if (!am || !strcmp(am, "auto")) {
        cfg->auth_mode = ETCD_AUTH_AUTO;
    } else if (!strcmp(am, "on")) {
        cfg->auth_mode = ETCD_AUTH_ON;
    } else if (!strcmp(am, "off")) {
        cfg->auth_mode = ETCD_AUTH_OFF;
    } else {
        st = coh_err_set(err, COHORT_ERR_INVALID, "COHORT_ETCD_AUTH=%s: expected auto, on or off",
                         am);
        goto fail;
    }
    if ((st = tls_parse(cfg, addr, err)) != COHORT_OK)
        goto fail;
    if (cfg->auth_mode == ETCD_AUTH_ON && !*cfg->password) {
        st = coh_err_set(err, COHORT_ERR_INVALID,
                         "COHORT_ETCD_AUTH=on needs the job token (COHORT_TOKEN) as the etcd password");
        goto fail;
    }
    return COHORT_OK;
nomem:
    st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory parsing the address");
fail:
    cfg_fini(cfg);
    return st;
}

/* ---- one connection ---- */

/* curl write callback for unary replies: grows c->body (NUL-terminated for
 * jansson). Returning short makes curl fail with CURLE_WRITE_ERROR, which
 * classify() turns into NOMEM or TOO_LARGE. */
static size_t body_write(char *p, size_t sz, size_t nm, void *arg)
{
    coh_etcd_conn *c = arg;
    size_t n = sz * nm;
    if (c->len + n + 1 > c->cap) {
        if (c->len + n + 1 > ETCD_MAX_RESPONSE)
            return 0;
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n + 1)
            cap *= 2;
        char *b = coh_realloc(c->body, cap);
        if (!b)
            return 0;
        c->body = b;
        c->cap = cap;
    }
    memcpy(c->body + c->len, p, n);
    c->len += n;
    c->body[c->len] = 0;
    return n;
}

static CURL *conn_new_curl(const coh_etcd_cfg *cfg)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    /* Worker threads: no SIGALRM from the resolver. No proxy: etcd members
     * are addressed directly. Keepalive probes notice dead hosts on long
     * watch streams. */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 10L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 5L);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, cfg->tls ? "https" : "http");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(cfg->tls ? CURLPROTO_HTTPS : CURLPROTO_HTTP));
#endif
    if (cfg->tls) {
        /* Always verified: a member that cannot prove its name would get
         * the job token. No switch turns this off. */
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
        curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
        if (cfg->cacert)
            curl_easy_setopt(h, CURLOPT_CAINFO, cfg->cacert);
        if (cfg->cert)
            curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->cert);
        if (cfg->key)
            curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->key);
    }
    return h;
}

/* auth_on starts "unknown" (-1) when there is a token to try: the first
 * call authenticates and learns whether the cluster enforces auth. */
cohort_status coh_etcd_conn_init(coh_etcd_conn *c, const coh_etcd_cfg *cfg, coh_err *err)
{
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->auth_ep = -1;
    c->auth_on = (cfg->auth_mode != ETCD_AUTH_OFF && cfg->password[0]) ? -1 : 0;
    c->curl = conn_new_curl(cfg);
    if (!c->curl)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: curl_easy_init failed");
    return COHORT_OK;
}

void coh_etcd_conn_fini(coh_etcd_conn *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    if (c->wcurl)
        curl_easy_cleanup(c->wcurl);
    if (c->auth) {
        sodium_memzero(c->auth, strlen(c->auth));
        coh_free(c->auth);
    }
    coh_free(c->body);
    memset(c, 0, sizeof *c);
}

/* "host:port" of an endpoint (its URL without the scheme). */
static const char *ep_host(const char *url) { return strstr(url, "://") + 3; }
static const char *ep_name(const coh_etcd_conn *c) { return ep_host(c->cfg->urls[c->ep]); }

void coh_etcd_next_endpoint(coh_etcd_conn *c, const char *why)
{
    if (c->cfg->n_ep < 2)
        return;
    int from = c->ep;
    c->ep = (c->ep + 1) % c->cfg->n_ep;
    c->failovers++;
    coh_info("etcd: endpoint %s failed (%s); trying %s", ep_host(c->cfg->urls[from]), why,
             ep_name(c));
}

/* Builds the header list: JSON, no "Expect: 100-continue" round trip, and
 * the member's auth token (a header, never the URL). */
static struct curl_slist *conn_headers(coh_etcd_conn *c, int with_auth, int watch)
{
    struct curl_slist *h = NULL, *t;
    h = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h || !(t = curl_slist_append(h, "Expect:")))
        goto fail;
    h = t;
    if (watch) {
        /* grpc metadata "hasleader": a member that loses its leader cancels
         * the stream instead of leaving the watch silently stale. */
        if (!(t = curl_slist_append(h, "Grpc-Metadata-hasleader: true")))
            goto fail;
        h = t;
    }
    if (with_auth && c->auth) {
        size_t n = strlen(c->auth) + 32;
        char *line = coh_malloc(n);
        if (!line)
            goto fail;
        snprintf(line, n, "Authorization: %s", c->auth);
        t = curl_slist_append(h, line);
        sodium_memzero(line, n);
        coh_free(line);
        if (!t)
            goto fail;
        h = t;
    }
    return h;
fail:
    curl_slist_free_all(h);
    return NULL;
}

/* One POST to the current endpoint. Returns the curl code; *http the status. */
static CURLcode conn_post(coh_etcd_conn *c, const char *path, const char *body, size_t blen,
                          int tmo_ms, int with_auth, long *http)
{
    char url[320];
    snprintf(url, sizeof url, "%s%s", c->cfg->urls[c->ep], path);
    struct curl_slist *hdr = conn_headers(c, with_auth, 0);
    if (!hdr)
        return CURLE_OUT_OF_MEMORY;
    c->len = 0;
    if (c->body)
        c->body[0] = 0;
    CURL *h = c->curl;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    c->ebuf[0] = 0;
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->ebuf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)tmo_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)COH_MIN(tmo_ms, 2000));
    *http = 0;
    /* Blocks for at most tmo_ms; the handle keeps the connection alive for
     * the next call to the same member. */
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, http);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdr);
    return cc;
}

/* ---- unary calls ---- */

enum { A_OK, A_TRANSPORT, A_RETRY, A_REAUTH, A_NEEDAUTH, A_FATAL };

void coh_etcd_pause(int ms, uint64_t deadline)
{
    int left = coh_ms_left(deadline);
    if (ms > left)
        ms = left;
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

int coh_etcd_backoff_ms(int round)
{
    int b = 10 << (round < 6 ? round : 6);
    if (b > 500)
        b = 500;
    uint32_t r = 0;
    (void)coh_random(&r, sizeof r);
    return b / 2 + (int)(r % (uint32_t)(b / 2 + 1));
}

/* Classifies a completed HTTP exchange; on A_OK *out holds the reply. On
 * A_FATAL the status and message are in err. */
static int classify(coh_etcd_conn *c, coh_err *err, const char *path, CURLcode cc, long http,
                    json_t **out, cohort_status *st, char *why, size_t whylen)
{
    if (cc != CURLE_OK) {
        if (cc == CURLE_OUT_OF_MEMORY || (cc == CURLE_WRITE_ERROR && c->len + 1 >= c->cap &&
                                          c->cap >= ETCD_MAX_RESPONSE / 2)) {
            *st = coh_err_set(err, cc == CURLE_OUT_OF_MEMORY ? COHORT_ERR_NOMEM : COHORT_ERR_TOO_LARGE,
                              "etcd %s at %s: %s", path, ep_name(c), curl_easy_strerror(cc));
            return A_FATAL;
        }
        if (cc == CURLE_WRITE_ERROR) {
            *st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd %s at %s: out of memory reading the reply",
                              path, ep_name(c));
            return A_FATAL;
        }
        /* The member's certificate (or ours) is refused: not a transient
         * fault, and another member would only be asked the same. */
        if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE ||
            cc == CURLE_SSL_CERTPROBLEM || cc == CURLE_SSL_ISSUER_ERROR ||
            cc == CURLE_SSL_CRL_BADFILE) {
            *st = coh_err_set(err, COHORT_ERR_AUTH, "etcd %s at %s: TLS: %s (CA file: %s)", path,
                              ep_name(c), c->ebuf[0] ? c->ebuf : curl_easy_strerror(cc),
                              c->cfg->cacert ? c->cfg->cacert
                                             : "the system's; set COHORT_ETCD_CACERT");
            return A_FATAL;
        }
        snprintf(why, whylen, "%s", c->ebuf[0] ? c->ebuf : curl_easy_strerror(cc));
        return A_TRANSPORT;
    }
    /* Every gateway answer is a JSON object: the reply on 200, a gRPC
     * status otherwise. Anything else is not an etcd gateway, or a proxy's
     * error page (5xx: worth another member). */
    json_error_t je;
    json_t *j = c->len ? json_loadb(c->body, c->len, 0, &je) : NULL;
    /* Streaming endpoints (lease keepalive) answer 200 and report a failure
     * in-band: {"error":{"grpc_code":N,"message":..}}. */
    json_t *inband = http == 200 ? json_object_get(j, "error") : NULL;
    if (http == 200 && json_is_object(j) && !inband) {
        *out = j;
        return A_OK;
    }
    if (json_is_object(inband)) {
        json_t *flat = json_pack("{s:O?, s:O?}", "message", json_object_get(inband, "message"),
                                 "code", json_object_get(inband, "grpc_code"));
        json_decref(j);
        j = flat;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        if (http >= 500 && http != 501) {
            snprintf(why, whylen, "HTTP %ld", http);
            return A_RETRY;
        }
        /* The start of a text body says why (a proxy's page, or etcd's
         * gateway refusing a client certificate that has a CommonName). */
        char txt[161] = "";
        size_t tl = 0;
        for (size_t i = 0; i < c->len && tl + 1 < sizeof txt; i++)
            txt[tl++] = isprint((unsigned char)c->body[i]) ? c->body[i] : ' ';
        txt[tl] = 0;
        *st = coh_err_set(err, COHORT_ERR_PROTOCOL,
                          "%s at %s answered HTTP %ld without a JSON body%s%s%s: not an etcd v3 gateway (etcd >= 3.4)?",
                          path, ep_name(c), http, tl ? " (\"" : "", txt, tl ? "\")" : "");
        return A_FATAL;
    }
    /* gRPC status mapped by the gateway: {"error":..,"message":..,"code":N}. */
    long code = (long)etcd_int(j, "code");
    json_t *m = json_object_get(j, "message");
    if (!json_is_string(m))
        m = json_object_get(j, "error");
    char msg[256];
    snprintf(msg, sizeof msg, "%s", json_is_string(m) ? json_string_value(m) : "(no message)");
    json_decref(j);
    snprintf(why, whylen, "%s", msg);
    if (strstr(msg, "invalid auth token") || strstr(msg, "auth: revision in header is old"))
        return A_REAUTH;
    if (strstr(msg, "user name is empty") && c->cfg->password[0] &&
        c->cfg->auth_mode != ETCD_AUTH_OFF)
        return A_NEEDAUTH;
    if (strstr(msg, "user name is empty")) {
        *st = coh_err_set(err, COHORT_ERR_AUTH,
                          "etcd %s at %s: the cluster requires authentication: connect with the job token as the password of etcd user '%s' (COHORT_ETCD_AUTH is %s)",
                          path, ep_name(c), c->cfg->job,
                          c->cfg->auth_mode == ETCD_AUTH_OFF ? "off" : "auto, but no token");
        return A_FATAL;
    }
    /* Over etcd's --max-request-bytes, or over gRPC's message limit (which
     * comes back as ResourceExhausted, like "too many requests"). */
    if (strstr(msg, "request is too large") || strstr(msg, "too many operations in txn") ||
        strstr(msg, "larger than max")) {
        *st = coh_err_set(err, COHORT_ERR_TOO_LARGE,
                          "etcd %s at %s: %s (raise etcd's --max-request-bytes / --max-txn-ops)",
                          path, ep_name(c), msg);
        return A_FATAL;
    }
    switch (code) {
    case 1:  /* Canceled */
    case 4:  /* DeadlineExceeded: request timed out in raft */
    case 8:  /* ResourceExhausted: too many requests */
    case 10: /* Aborted */
    case 13: /* Internal: e.g. the gateway lost its grpc connection */
    case 14: /* Unavailable: no leader, leader changed, stopped */
        return A_RETRY;
    case 7:
        *st = coh_err_set(err, COHORT_ERR_AUTH,
                          "etcd %s at %s: %s (user '%s' needs readwrite on the key prefix %s)", path,
                          ep_name(c), msg, c->cfg->job, c->cfg->root);
        return A_FATAL;
    case 16:
        *st = coh_err_set(err, COHORT_ERR_AUTH, "etcd %s at %s: %s", path, ep_name(c), msg);
        return A_FATAL;
    case 5:
        *st = coh_err_set(err, COHORT_ERR_NOT_FOUND, "etcd %s at %s: %s", path, ep_name(c), msg);
        return A_FATAL;
    case 3:
    case 9:
    case 11:
        *st = coh_err_set(err, COHORT_ERR_INVALID, "etcd %s at %s: %s", path, ep_name(c), msg);
        return A_FATAL;
    default:
        if (!strstr(msg, "etcdserver:") && http >= 500) /* gateway trouble */
            return A_RETRY;
        *st = coh_err_set(err, COHORT_ERR_STORE, "etcd %s at %s: %s (code %ld, HTTP %ld)", path,
                          ep_name(c), msg, code, http);
        return A_FATAL;
    }
}

/* Authenticates at the current endpoint. Returns an A_* class; A_OK sets
 * c->auth / auth_on. The password travels in the POST body only. */
static int conn_auth(coh_etcd_conn *c, coh_err *err, int tmo_ms, cohort_status *st, char *why,
                     size_t whylen)
{
    json_t *b = json_pack("{s:s, s:s}", "name", c->cfg->job, "password", c->cfg->password);
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!body) {
        *st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
        return A_FATAL;
    }
    size_t blen = strlen(body);
    long http;
    CURLcode cc = conn_post(c, "/v3/auth/authenticate", body, blen, tmo_ms, 0, &http);
    sodium_memzero(body, blen);
    free(body);
    json_t *j = NULL;
    int a = classify(c, err, "/v3/auth/authenticate", cc, http, &j, st, why, whylen);
    if (a == A_OK) {
        json_t *t = json_object_get(j, "token");
        if (!json_is_string(t) || !*json_string_value(t)) {
            json_decref(j);
            *st = coh_err_set(err, COHORT_ERR_PROTOCOL, "etcd authenticate at %s: no token in the reply",
                              ep_name(c));
            return A_FATAL;
        }
        char *tok = coh_strdup(json_string_value(t));
        json_decref(j);
        if (!tok) {
            *st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
            return A_FATAL;
        }
        if (c->auth) {
            sodium_memzero(c->auth, strlen(c->auth));
            coh_free(c->auth);
        }
        c->auth = tok;
        c->auth_ep = c->ep;
        c->auth_on = 1;
        return A_OK;
    }
    if (a == A_FATAL && *st == COHORT_ERR_INVALID) {
        if (strstr(why, "authentication is not enabled")) {
            if (c->cfg->auth_mode == ETCD_AUTH_ON) {
                *st = coh_err_set(err, COHORT_ERR_AUTH,
                                  "etcd at %s: authentication is not enabled on the cluster, but COHORT_ETCD_AUTH=on",
                                  ep_name(c));
                return A_FATAL;
            }
            coh_debug("etcd: auth not enabled at %s; job isolation is by key prefix only",
                      ep_name(c));
            c->auth_on = 0;
            return A_OK;
        }
        *st = coh_err_set(err, COHORT_ERR_AUTH,
                          "etcd at %s refused user '%s': %s (wrong token, or no such etcd user)",
                          ep_name(c), c->cfg->job, why);
        return A_FATAL;
    }
    if (a == A_REAUTH || a == A_NEEDAUTH)
        a = A_RETRY;
    return a;
}

cohort_status coh_etcd_call(coh_etcd_conn *c, coh_err *err, const char *path, json_t *body,
                            uint64_t deadline, json_t **out)
{
    char *b = json_dumps(body, JSON_COMPACT);
    if (!b)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd %s: out of memory encoding the request",
                           path);
    size_t blen = strlen(b);
    cohort_status st = COHORT_OK;
    char why[256] = "", first[256] = "";
    int fails = 0, rounds = 0, reauths = 0;
    uint64_t t0 = coh_now_ns();
    /* One attempt per turn: authenticate first when this member has not
     * issued us a token yet, then the request itself. */
    for (;;) {
        int left = coh_ms_left(deadline);
        if (left <= 0)
            break;
        int tmo = COH_MIN(left, c->cfg->req_timeout_ms);
        int a;
        if (c->auth_on < 0 || (c->auth_on > 0 && c->auth_ep != c->ep))
            a = conn_auth(c, err, tmo, &st, why, sizeof why);
        else
            a = A_OK;
        if (a == A_OK) {
            long http;
            CURLcode cc = conn_post(c, path, b, blen, tmo, c->auth_on > 0, &http);
            a = classify(c, err, path, cc, http, out, &st, why, sizeof why);
        }
        if (a == A_OK) {
            free(b);
            return COHORT_OK;
        }
        if (a == A_FATAL) {
            free(b);
            return st;
        }
        if (a == A_REAUTH || a == A_NEEDAUTH) {
            /* The member forgot our token (restart, TTL) or auth was enabled
             * under us: authenticate again; a loop here means refusal. */
            if (++reauths > 3) {
                free(b);
                return coh_err_set(err, COHORT_ERR_AUTH, "etcd %s at %s: %s (after re-authenticating)",
                                   path, ep_name(c), why);
            }
            c->auth_on = -1;
            continue;
        }
        /* Transport or transient: next member; pause after a full round.
         * The first failure is kept: on a loaded machine the last attempt
         * may only run out of time and hide the cause (a refused TLS
         * handshake, a reset) that every earlier attempt met. */
        if (!first[0] && why[0])
            snprintf(first, sizeof first, "%s", why);
        coh_etcd_next_endpoint(c, why);
        if (++fails % c->cfg->n_ep == 0 || a == A_RETRY)
            coh_etcd_pause(coh_etcd_backoff_ms(rounds++), deadline);
    }
    free(b);
    int ms = (int)((coh_now_ns() - t0) / 1000000ull);
    if (fails == 0 && !why[0])
        snprintf(why, sizeof why, "no time left");
    int other = first[0] && strcmp(first, why) != 0;
    return coh_err_set(err, COHORT_ERR_STORE,
                       "etcd cluster unreachable (endpoints %s) for %s after %d ms: last error at %s: %s%s%s%s",
                       c->cfg->ep_list, path, ms, ep_name(c), why,
                       other ? " (first error: " : "", other ? first : "", other ? ")" : "");
}

/* ---- watch ---- */

typedef struct watch_ctx {
    coh_etcd_conn *c;
    coh_err *err;
    etcd_event_fn ev;
    etcd_batch_fn batch;
    void *arg;
    char *line;
    size_t len, cap;
    int done;          /* condition met */
    int restart;       /* stream cancelled / broken by the server */
    int failed;        /* hard error, status in st */
    cohort_status st;
    char why[256];
} watch_ctx;

/* Handles one streamed message. Returns 0 to go on, 1 to stop. */
static int watch_msg(watch_ctx *w, const char *s, size_t n)
{
    json_error_t je;
    json_t *j = json_loadb(s, n, 0, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        w->failed = 1;
        w->st = coh_err_set(w->err, COHORT_ERR_PROTOCOL, "etcd watch at %s: malformed message: %s",
                            ep_name(w->c), je.text);
        return 1;
    }
    json_t *e = json_object_get(j, "error");
    if (e) {
        json_t *m = json_is_object(e) ? json_object_get(e, "message") : e;
        snprintf(w->why, sizeof w->why, "%s", json_is_string(m) ? json_string_value(m) : "stream error");
        json_decref(j);
        w->restart = 1;
        return 1;
    }
    json_t *r = json_object_get(j, "result");
    if (json_is_true(json_object_get(r, "canceled"))) {
        json_t *why = json_object_get(r, "cancel_reason");
        const char *reason = json_is_string(why) ? json_string_value(why) : "";
        if (strstr(reason, "permission denied")) {
            w->failed = 1;
            w->st = coh_err_set(w->err, COHORT_ERR_AUTH,
                                "etcd watch at %s: %s (user '%s' needs read on %s)", ep_name(w->c),
                                reason, w->c->cfg->job, w->c->cfg->root);
        } else {
            /* Compacted start revision, lost leader, ...: re-read and re-watch. */
            snprintf(w->why, sizeof w->why, "watch cancelled: %s (compact revision %lld)",
                     reason, (long long)etcd_int(r, "compact_revision"));
            w->restart = 1;
        }
        json_decref(j);
        return 1;
    }
    json_t *evs = json_object_get(r, "events");
    size_t i;
    json_t *ev;
    int any = 0;
    json_array_foreach(evs, i, ev) {
        json_t *kv = json_object_get(ev, "kv");
        json_t *t = json_object_get(ev, "type");
        etcd_event x = {0};
        x.is_delete = json_is_string(t) && !strcmp(json_string_value(t), "DELETE");
        x.mod_rev = etcd_int(kv, "mod_revision");
        unsigned char *k = NULL, *v = NULL;
        size_t kl = 0, vl = 0;
        int rk = etcd_unb64(kv, "key", &k, &kl);
        int rv = rk == 0 ? etcd_unb64(kv, "value", &v, &vl) : 0;
        if (rk || rv) {
            coh_free(k);
            coh_free(v);
            json_decref(j);
            w->failed = 1;
            w->st = rk == -2 || rv == -2
                        ? coh_err_set(w->err, COHORT_ERR_NOMEM, "etcd watch: out of memory")
                        : coh_err_set(w->err, COHORT_ERR_PROTOCOL, "etcd watch at %s: bad base64",
                                      ep_name(w->c));
            return 1;
        }
        x.key = k;
        x.klen = kl;
        x.val = v;
        x.vlen = vl;
        int rc = w->ev(w->arg, &x);
        coh_free(k);
        coh_free(v);
        if (rc < 0) {
            json_decref(j);
            w->failed = 1;
            w->st = w->err->status;
            return 1;
        }
        any = 1;
    }
    json_decref(j);
    /* Decide only after a whole response: one revision's events (a txn)
     * arrive together, so the state is never judged half-applied. */
    if (any && w->batch(w->arg)) {
        w->done = 1;
        return 1;
    }
    return 0;
}

/* curl write callback of a watch stream: splits the bytes into messages
 * and hands each to watch_msg; returning 0 ends the transfer (condition
 * met, server cancel, or failure; watch_ctx says which). */
static size_t watch_write(char *p, size_t sz, size_t nm, void *arg)
{
    watch_ctx *w = arg;
    size_t n = sz * nm;
    if (w->len + n + 1 > w->cap) {
        if (w->len + n + 1 > ETCD_MAX_RESPONSE)
            return 0;
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *b = coh_realloc(w->line, cap);
        if (!b) {
            w->failed = 1;
            w->st = coh_err_set(w->err, COHORT_ERR_NOMEM, "etcd watch: out of memory");
            return 0;
        }
        w->line = b;
        w->cap = cap;
    }
    memcpy(w->line + w->len, p, n);
    w->len += n;
    /* The gateway ends every streamed message with '\n'. */
    size_t start = 0;
    for (size_t i = 0; i < w->len; i++) {
        if (w->line[i] != '\n')
            continue;
        if (i > start && watch_msg(w, w->line + start, i - start))
            return 0; /* stop the transfer: done, restart or failure */
        start = i + 1;
    }
    memmove(w->line, w->line + start, w->len - start);
    w->len -= start;
    return n;
}

int coh_etcd_watch(coh_etcd_conn *c, coh_err *err, const void *const *keys, const size_t *klens,
                   const void *const *ends, const size_t *elens, int n, int64_t start_rev, uint64_t deadline, etcd_event_fn ev,
                   etcd_batch_fn batch, void *arg, cohort_status *st)
{
    /* Body: one create_request per key; the gateway feeds each JSON value
     * of a streaming request body to the watch stream. */
    size_t cap = 256, len = 0;
    char *body = coh_malloc(cap);
    int ret = ETCD_WATCH_ERROR;
    watch_ctx w = {.c = c, .err = err, .ev = ev, .batch = batch, .arg = arg};
    struct curl_slist *hdr = NULL;
    if (!body)
        goto nomem;
    for (int i = 0; i < n; i++) {
        char rev[32];
        snprintf(rev, sizeof rev, "%lld", (long long)start_rev);
        /* "o" steals the key string; a NULL (OOM) makes json_pack fail. */
        json_t *o = json_pack("{s:{s:o, s:s}}", "create_request", "key",
                              etcd_b64(keys[i], klens[i]), "start_revision", rev);
        if (o && ends &&
            json_object_set_new(json_object_get(o, "create_request"), "range_end",
                                etcd_b64(ends[i], elens[i])) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (!o)
            goto nomem;
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!s)
            goto nomem;
        size_t sl = strlen(s);
        if (len + sl + 2 > cap) {
            while (len + sl + 2 > cap)
                cap *= 2;
            char *nb = coh_realloc(body, cap);
            if (!nb) {
                free(s);
                goto nomem;
            }
            body = nb;
        }
        memcpy(body + len, s, sl);
        len += sl;
        body[len++] = '\n';
        free(s);
    }
    if (!c->wcurl && !(c->wcurl = conn_new_curl(c->cfg)))
        goto nomem;
    if (!(hdr = conn_headers(c, c->auth_on > 0, 1)))
        goto nomem;

    int left = coh_ms_left(deadline);
    if (left <= 0) {
        ret = ETCD_WATCH_TIMEOUT;
        goto out;
    }
    char url[320];
    snprintf(url, sizeof url, "%s/v3/watch", c->cfg->urls[c->ep]);
    CURL *h = c->wcurl;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
    c->ebuf[0] = 0;
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->ebuf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left == INT_MAX ? 0L : (long)left);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)COH_MIN(left, 2000));
    /* Runs until watch_write stops it, the stream ends, or the deadline. An
     * aborted transfer closes this connection: the server drops the watch. */
    CURLcode cc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    long http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    if (w.done) {
        ret = ETCD_WATCH_DONE;
    } else if (w.failed) {
        *st = w.st;
        ret = ETCD_WATCH_ERROR;
    } else if (cc == CURLE_OPERATION_TIMEDOUT && coh_ms_left(deadline) <= 10) {
        /* curl's clock may fire a hair before ours. */
        ret = ETCD_WATCH_TIMEOUT;
    } else if (http == 404) {
        *st = coh_err_set(err, COHORT_ERR_PROTOCOL, "%s/v3/watch: HTTP 404: not an etcd v3 gateway?",
                          ep_name(c));
        ret = ETCD_WATCH_ERROR;
    } else {
        /* Broken or ended stream: the member died or shut down. */
        if (!w.restart) {
            snprintf(w.why, sizeof w.why, "watch stream ended: %s",
                     cc == CURLE_OK ? "closed by the server"
                                    : c->ebuf[0] ? c->ebuf : curl_easy_strerror(cc));
            if (cc != CURLE_OK)
                coh_etcd_next_endpoint(c, w.why);
        }
        coh_debug("etcd: watch at %s: %s", ep_name(c), w.why);
        ret = ETCD_WATCH_RESTART;
    }
    goto out;
nomem:
    *st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd watch: out of memory");
    ret = ETCD_WATCH_ERROR;
out:
    curl_slist_free_all(hdr);
    coh_free(body);
    coh_free(w.line);
    return ret;
}

/* ---- open / close ---- */

cohort_status coh_etcd_open(coh_etcd **out, const char *addr, const char *job, const char *token,
                            uint32_t generation, int timeout_ms, coh_err *err)
{
    *out = NULL;
    pthread_once(&etcd_once, etcd_global_init);
    if (!etcd_once_ok)
        return coh_err_set(err, COHORT_ERR_SYSTEM, "etcd: curl_global_init or sodium_init failed");
    coh_etcd *e = coh_calloc(1, sizeof *e);
    if (!e)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    cohort_status st = cfg_parse(&e->cfg, addr, job, token, err);
    if (st != COHORT_OK) {
        coh_free(e);
        return st;
    }
    /* The token is the etcd password: over plain HTTP anyone on the path
     * reads it (and every key). Said once per process, at the first such
     * connect; loopback members are not on a network. */
    static atomic_int warned_plain;
    if (e->cfg.remote_plain && e->cfg.auth_mode != ETCD_AUTH_OFF && e->cfg.password[0] &&
        !atomic_exchange(&warned_plain, 1))
        coh_warn("etcd://%s: plain HTTP to a member that is not loopback: the job token (the etcd "
                 "password) and every key cross the network unprotected; use etcds:// (TLS, "
                 "docs/etcd.md)",
                 e->cfg.ep_list);
    if ((st = coh_etcd_conn_init(&e->conn, &e->cfg, err)) != COHORT_OK) {
        cfg_fini(&e->cfg);
        coh_free(e);
        return st;
    }
    /* The lease waits on a monotonic clock: wall-clock jumps must not
     * stretch or shrink the keep-alive period. */
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->lease.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->lease.cv, &ca);
    pthread_condattr_destroy(&ca);
    e->timeout_ms = timeout_ms >= 0 ? timeout_ms : 300000;
    if ((st = coh_random(&e->client_id, sizeof e->client_id)) != COHORT_OK) {
        coh_err_set(err, st, "etcd: no random bytes for the client id");
        coh_etcd_close(e);
        return st;
    }
    /* Starting members: the first calls fail over and back off until the
     * connect timeout, so a cluster that comes up later is still found. */
    st = coh_etcd_check_generation(e, err, generation, coh_deadline_ns(timeout_ms));
    if (st != COHORT_OK) {
        coh_etcd_close(e);
        return st;
    }
    coh_debug("etcd: connected to %s (job root %s, auth %s)", e->cfg.ep_list, e->cfg.root,
              e->conn.auth_on > 0 ? "on" : "off");
    *out = e;
    return COHORT_OK;
}

void coh_etcd_close(coh_etcd *e)
{
    if (!e)
        return;
    coh_etcd_lease_stop(e);
    /* Best effort: drop this handle's op marker (bounded, short). */
    if (e->op_seq) {
        char mk[64];
        int ml = snprintf(mk, sizeof mk, "m/op/%016llx", (unsigned long long)e->client_id);
        json_t *k = etcd_b64_2(e->cfg.root, e->cfg.root_len, mk, (size_t)ml);
        json_t *b = k ? json_pack("{s:o}", "key", k) : NULL;
        json_t *r = NULL;
        coh_err tmp;
        if (b && coh_etcd_call(&e->conn, &tmp, "/v3/kv/deleterange", b, coh_deadline_ns(500),
                               &r) == COHORT_OK)
            json_decref(r);
        json_decref(b);
    }
    coh_etcd_conn_fini(&e->conn);
    coh_free(e->ac_key);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->lease.mu);
    pthread_cond_destroy(&e->lease.cv);
    cfg_fini(&e->cfg);
    coh_free(e);
}

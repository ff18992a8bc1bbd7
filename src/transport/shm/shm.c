/*
 * shm.c - the host segment's life: creation by the lowest local rank,
 * authenticated hand-over of the memfd to the other local ranks, attach
 * barrier, liveness handles, abort, wake.
 *
 * Rendezvous (docs/shm.md has the message layouts):
 *   lead (local index 0): memfd_create + ftruncate + seals + mmap, listens
 *     on an abstract AF_UNIX SOCK_SEQPACKET socket with a random name, and
 *     publishes the name under "shm/<lead group rank>/addr" in g->store
 *     (already prefixed by generation and group).
 *   member: reads the name, connects; both sides prove knowledge of the
 *     job token with HMAC-SHA256 over fresh nonces from both sides plus job
 *     id, generation, group id and the member's identity; the lead then
 *     sends the memfd with SCM_RIGHTS. The member checks the lead's MAC
 *     before it trusts the descriptor, and the seals before it maps it.
 * Any local process can connect to the abstract name: the lead refuses
 * other uids at accept, gives a same-uid stranger 500 ms for its whole
 * handshake and serves all pending handshakes together (see "the
 * rendezvous socket under attack" below).
 * Nothing is left in the file system: the memfd disappears with the last
 * mapping, the abstract name with the listening socket (closed as soon as
 * every member attached), and the store key is deleted by the lead.
 */
#include <errno.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <fcntl.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm/shm_cma.h"
#include "transport/shm/shm_geo.h"
#include "transport/shm/shm_mem.h"
#include "transport/shm/shm_seg.h"
#include "util/auth.h"

#define HS_MAGIC 0x4b485343u /* "CSHK" */
#define HS_TIMEOUT_MS 2000   /* a member's wait for the lead's answers, per attempt */

/* lead -> member on accept */
typedef struct hs_m1 {
    uint32_t magic, version;
    uint8_t snonce[32];
} hs_m1;

/* member -> lead */
typedef struct hs_m2 {
    uint32_t magic, version;
    int32_t local_index, group_rank, pid;
    uint32_t check_contract;
    uint8_t cnonce[32];
    uint8_t mac[32];
} hs_m2;

/* lead -> member, with the memfd attached when status == OK */
typedef struct hs_m3 {
    uint32_t magic, status;
    uint64_t size;
    uint8_t mac[32];
    char text[256];
} hs_m3;

static const coh_call attach_call = {
    .seq = 0, .coll = COH_COLL_INTERNAL, .redop = -1, .root = -1, .file = "shm attach"};

static uint64_t job_hash(const cohort_group *g)
{
    return coh_hash64(g->job_id, strnlen(g->job_id, sizeof g->job_id), 0x73686dull);
}

/* Who the segment belongs to, as this rank sees it (s->size: the mapping) */
static shm_hdr_want hdr_want(const coh_shm *s)
{
    const cohort_group *g = s->g;
    return (shm_hdr_want){s->n, g->id, g->generation, job_hash(g), (uint32_t)s->check,
                          (uint64_t)s->size};
}

/* MAC over a label, two nonces, the group identity and extra bytes
 * (util/auth.h). Job and generation travel only inside the MAC here: a
 * member of another job or generation fails it like a wrong token. */
static void hs_mac(uint8_t out[32], const cohort_group *g, const char *label, const uint8_t a[32],
                   const uint8_t b[32], const void *extra, size_t extra_len)
{
    coh_auth_mac m;
    coh_auth_begin(&m, g->token, strlen(g->token), label);
    coh_auth_add(&m, a, COH_AUTH_NONCE);
    coh_auth_add(&m, b, COH_AUTH_NONCE);
    coh_auth_add(&m, g->job_id, strnlen(g->job_id, sizeof g->job_id) + 1);
    uint32_t ids[2] = {g->generation, g->id};
    coh_auth_add(&m, ids, sizeof ids);
    coh_auth_add(&m, extra, extra_len);
    coh_auth_end(&m, out);
}

static void m2_mac(uint8_t out[32], const cohort_group *g, const hs_m2 *m, const uint8_t sn[32])
{
    int32_t extra[4] = {m->local_index, m->group_rank, m->pid, (int32_t)m->check_contract};
    hs_mac(out, g, "cohort-shm-member", sn, m->cnonce, extra, sizeof extra);
}

static void m3_mac(uint8_t out[32], const cohort_group *g, const hs_m3 *m, const uint8_t cn[32],
                   const uint8_t sn[32], int32_t member)
{
    uint64_t extra[3] = {m->status, m->size, (uint64_t)(uint32_t)member};
    hs_mac(out, g, "cohort-shm-lead", cn, sn, extra, sizeof extra);
}

/* Does this cpu take a line for writing on a hint (PREFETCHW: cpuid
 * 0x80000001 ecx bit 8, on Intel since Broadwell and on every AMD64)?
 * shm_seg.h "Taking the next lines early"; elsewhere the hint is PRFM or
 * the compiler's write prefetch. */
static int cpu_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8));
#else
    return 1;
#endif
}

static int cpu_intel(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_is("intel");
#else
    return 0;
#endif
}

size_t coh_shm_segment_bytes(int local_size, size_t slot_bytes)
{
    shm_geo o;
    shm_ringcfg r = {SHM_DEFAULT_RING_SLOTS, SHM_DEFAULT_RING_BYTES, SHM_DEFAULT_TINY_SLOTS,
                     SHM_DEFAULT_TINY_BYTES, 0, SHM_LINE};
    shm_geometry(local_size, slot_bytes, &r, SHM_DEFAULT_P2P_BYTES, &o);
    return o.total;
}

/* A power of two <= v (>= 2), or 0. */
static size_t pow2_floor(long v)
{
    size_t kk = 0;
    while (v >= 2 && (kk ? kk * 2 : 2) <= (size_t)v)
        kk = kk ? kk * 2 : 2;
    return kk;
}

/* An integer in [lo, hi] from the environment; unset or empty keeps *v
 * (the default). Anything else fails naming the variable, so a typo is
 * reported on every rank that has it. */
static cohort_status env_range(cohort_group *g, const char *name, long *v, long lo, long hi)
{
    int r = coh_env_int(name, v);
    if (r >= 0 && *v >= lo && *v <= hi)
        return COHORT_OK;
    return coh_tp_fail_set(g, COHORT_ERR_INVALID, "%s=%s: want an integer in [%ld, %ld]", name,
                           coh_env_str(name), lo, hi);
}

/* An auto|on|off variable: *v keeps its automatic value unless on or off
 * is set; anything else fails the group. */
static cohort_status env_auto_on_off(cohort_group *g, const char *name, int *v)
{
    const char *e = coh_env_str(name);
    if (!e || !*e || !strcmp(e, "auto"))
        return COHORT_OK;
    if (strcmp(e, "on") && strcmp(e, "off"))
        return coh_tp_fail_set(g, COHORT_ERR_INVALID, "%s=%s: want auto, on or off", name, e);
    *v = !strcmp(e, "on");
    return COHORT_OK;
}

/* The small-broadcast ring: COHORT_SHM_RING_SLOTS (K, rounded down to a
 * power of two, 0 = off, the tiny ring included) and COHORT_SHM_RING_BYTES
 * (the largest broadcast it takes); the tiny ring for the smallest
 * broadcasts: COHORT_SHM_TINY_SLOTS (rounded down to a power of two, 0 =
 * none) and COHORT_SHM_TINY_BYTES (at most the ring's bytes). The lead's
 * values win, like the slot size. */
static cohort_status read_ring_env(cohort_group *g, shm_ringcfg *out)
{
    long v = SHM_DEFAULT_RING_SLOTS, b = SHM_DEFAULT_RING_BYTES;
    long tv = SHM_DEFAULT_TINY_SLOTS, tb = SHM_DEFAULT_TINY_BYTES;
    cohort_status st = env_range(g, "COHORT_SHM_RING_BYTES", &b, 0, SHM_MAX_RING_BYTES);
    /* Ranks outnumbering cpus run in turns, and every turn of a reader ends
     * waiting for its root's next turn: with K slots a turn holds at most K
     * calls, so at K = 8 one call in 8 waits a scheduler round (p99 = that
     * round). The deepest rings there (docs/performance.md, "Ranks
     * outnumbering cores"); the memory is the lead's segment only, and
     * pages nobody broadcasts from are never touched. */
    if (shm_oversubscribed(g, g->local_size)) {
        v = SHM_MAX_RING_SLOTS;
        tv = SHM_MAX_TINY_SLOTS;
    } else if (g->local_size == 2) {
        /* 2 ranks, a cpu each: the deep ring where its slots fit the
         * footprint budget and half this core's L2 (sysconf: 0 when
         * unknown). More ranks keep 8: with roots in turn their slots add
         * up (n x 1 MiB), and no host here had the cores to measure it. */
        size_t deep = (size_t)SHM_DEEP_RING_SLOTS * (size_t)(b > 0 ? b : 0);
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        if (deep && deep <= SHM_RING_LEAD_BYTES && l2 > 0 && 2 * deep <= (size_t)l2)
            v = SHM_DEEP_RING_SLOTS;
    }
    if (st == COHORT_OK)
        st = env_range(g, "COHORT_SHM_RING_SLOTS", &v, 0, SHM_MAX_RING_SLOTS);
    if (st == COHORT_OK)
        st = env_range(g, "COHORT_SHM_TINY_SLOTS", &tv, 0, SHM_MAX_TINY_SLOTS);
    if (st == COHORT_OK)
        st = env_range(g, "COHORT_SHM_TINY_BYTES", &tb, 0, SHM_MAX_TINY_BYTES);
    if (st != COHORT_OK)
        return st;
    /* The footprint split (shm_seg.h): it ends a slow mode of 16 ranks on
     * 2 cpus (8 of 19 launches 10-420 us a 16 KiB broadcast, the others
     * 4-5 us) but makes more calls wait a scheduler round - 8 ranks on 2
     * cpus, which never showed the slow mode, p99 1 KiB 0.6 -> 55 us and
     * 16 KiB 1.4 -> 150 us - so by default only from 8 ranks a cpu
     * (docs/shm.md "The ring's footprint"). */
    long cpus = coh_group_cpus(g);
    int split = cpus > 0 && g->local_size >= 8 * cpus;
    if ((st = env_auto_on_off(g, "COHORT_SHM_RING_SPLIT", &split)) != COHORT_OK)
        return st;
    /* Compact records two to a line (the layout measured on AMD, session
     * 26: x0.70 in its slow state) or one (Intel with PREFETCHW, session
     * 36: the writer takes a record's line early, and a line shared by
     * two records is the reader's again by the second's write - 2 ranks
     * gather 8-32 B x0.63-0.65, broadcast 8-16 B x0.82; docs/shm.md) */
    int pack = !(cpu_prefetchw() && cpu_intel());
    if ((st = env_auto_on_off(g, "COHORT_SHM_COMPACT_PACK", &pack)) != COHORT_OK)
        return st;
    memset(out, 0, sizeof *out);
    out->split = split;
    out->crec = pack ? sizeof(shm_ring_crec) : SHM_LINE;
    out->k = b > 0 ? pow2_floor(v) : 0;
    out->bytes = out->k ? (size_t)b : 0;
    tb = COH_MIN(tb, (long)out->bytes);
    out->tiny_k = out->k && tb > 0 ? pow2_floor(tv) : 0;
    out->tiny_bytes = out->tiny_k ? (size_t)tb : 0;
    return COHORT_OK;
}

/* The send/recv channels: COHORT_SHM_P2P_BYTES, bytes per channel slot
 * (0: send/recv between local ranks stay on tcp). The lead's value wins. */
static cohort_status read_p2p_env(cohort_group *g, size_t *bytes)
{
    long b = SHM_DEFAULT_P2P_BYTES;
    int r = coh_env_int("COHORT_SHM_P2P_BYTES", &b);
    if (r < 0 || b < 0 || b > (long)SHM_MAX_P2P_BYTES || (b > 0 && b < (long)SHM_LINE))
        return coh_tp_fail_set(g, COHORT_ERR_INVALID,
                               "COHORT_SHM_P2P_BYTES=%s: want 0 (send/recv over tcp) or an integer "
                               "in [%u, %u]",
                               coh_env_str("COHORT_SHM_P2P_BYTES"), SHM_LINE, SHM_MAX_P2P_BYTES);
    *bytes = shm_round_up((size_t)b, SHM_LINE);
    return COHORT_OK;
}

/* COHORT_SHM_P2P_STASH_BYTES: what a rank holds of messages no recv asked
 * for yet before it leaves a peer's in the channel (shm_p2p.c "the
 * stash"); per rank, not agreed. The default is tcp's bound on its stash
 * (COHORT_MAX_UNEXPECTED). */
static cohort_status read_stash_env(cohort_group *g, size_t *cap)
{
    long v = SHM_DEFAULT_P2P_STASH_BYTES;
    cohort_status st = env_range(g, "COHORT_SHM_P2P_STASH_BYTES", &v, 0, SHM_MAX_P2P_STASH_BYTES);
    *cap = (size_t)v;
    return st;
}

/* Slot size: COHORT_SHM_SLOT_BYTES (the lead's value wins; every rank
 * validates its own so a typo is reported wherever it is). */
static cohort_status read_env(cohort_group *g, size_t *slot, size_t *small)
{
    long v = SHM_DEFAULT_SLOT_BYTES, sm = SHM_DEFAULT_SMALL_BYTES;
    cohort_status st =
        env_range(g, "COHORT_SHM_SLOT_BYTES", &v, SHM_MIN_SLOT_BYTES, SHM_MAX_SLOT_BYTES);
    if (st == COHORT_OK)
        st = env_range(g, "COHORT_SHM_SMALL_BYTES", &sm, 0, SHM_MAX_SLOT_BYTES);
    if (st != COHORT_OK)
        return st;
    /* Blocked algorithms put n-1 blocks of at least one 8-byte element in a
     * buffer; keep buffers a whole number of cache lines. */
    size_t S = shm_round_up((size_t)v, SHM_LINE);
    size_t min_blocks = (size_t)(g->local_size > 1 ? g->local_size - 1 : 1) * 8;
    if (S < min_blocks)
        S = shm_round_up(min_blocks, SHM_LINE);
    *slot = S;
    *small = COH_MIN((size_t)sm, S);
    return COHORT_OK;
}

/* This rank's view of the segment, from a header it wrote or checked (a
 * member passes its private copy: shm_geo.h) */
static void set_geometry(coh_shm *s, const shm_seg_hdr *h)
{
    s->S = (size_t)h->slot_bytes;
    s->small_bytes = (size_t)h->small_bytes;
    s->check = (int)h->check_contract;
    s->rank_stride = (size_t)h->rank_stride;
    s->buf_stride = (size_t)h->buf_stride;
    s->ctl_base = s->base + h->ctl_off;
    s->slots = s->base + h->slot_off;
    s->aux = s->slots + (size_t)s->n * s->rank_stride;
    shm_ringcfg rc = shm_hdr_ringcfg(h);
    s->ring_k = rc.k;
    s->ring_nrec = shm_ring_nrec(&rc);
    s->ring_bytes = rc.bytes;
    s->ring_slot_stride = shm_ring_slot_stride(s->ring_bytes);
    /* the footprint split (shm_seg.h): each class's slots within
     * SHM_RING_LEAD_BYTES, the big calls' at least 2 */
    s->ring_big_k = s->ring_big_from = 0;
    if (rc.split && rc.k >= 4 && rc.k * rc.bytes > SHM_RING_LEAD_BYTES) {
        size_t kb = 2;
        while (kb * 2 <= rc.k / 2 && kb * 2 * rc.bytes <= SHM_RING_LEAD_BYTES)
            kb *= 2;
        s->ring_big_k = kb;
        s->ring_big_from = SHM_RING_LEAD_BYTES / (rc.k / 2);
    }
    s->tiny_k = rc.tiny_k;
    s->tiny_bytes = rc.tiny_bytes;
    s->tiny_slot_stride = shm_ring_slot_stride(rc.tiny_bytes);
    s->tiny_off = shm_ring_tiny_off(&rc);
    s->ring_done_off = shm_ring_done_off(&rc);
    s->ring_crec_off = shm_ring_crec_off(&rc);
    s->crec_stride = rc.crec;
    s->ring_stride = (size_t)h->ring_stride;
    s->ring = s->base + h->ring_off;
    s->p2p_bytes = (size_t)h->p2p_bytes;
    s->p2p_slot_stride = shm_p2p_slot_stride(s->p2p_bytes);
    s->p2p_stride = (size_t)h->p2p_stride;
    s->p2p = s->base + h->p2p_off;
    s->ring_pf = cpu_prefetchw();
}

void *coh_shm_aux(coh_shm *s, int li)
{
    if (!s || li < 0 || li >= s->n)
        return NULL;
    return s->aux + (size_t)li * COH_SHM_AUX_BYTES;
}

static void cleanup(coh_shm *s)
{
    coh_mem_unmap_all(s);
    if (s->base && s->base != MAP_FAILED)
        munmap(s->base, s->size);
    if (s->pidfd) {
        for (int q = 0; q < s->n; q++)
            if (s->pidfd[q] >= 0)
                close(s->pidfd[q]);
        coh_free(s->pidfd);
    }
    coh_free(s->peer_pid);
    shm_cma_release(s);
    coh_free(s->srcs);
    coh_free(s->red_scratch);
    coh_free(s->ring_pend);
    coh_free(s->ring_calls);
    coh_free(s->ring_lead);
    coh_free(s->ring_spread);
    coh_free(s->p2p_out);
    coh_free(s->p2p_in);
    coh_free(s->p2p_acked);
    if (s->p2p_stash) {
        for (int q = 0; q < s->n; q++)
            while (s->p2p_stash[q]) {
                shm_p2p_msg *m = s->p2p_stash[q];
                s->p2p_stash[q] = m->next;
                coh_free(m);
            }
        coh_free(s->p2p_stash);
    }
    coh_free(s->p2p_last);
    coh_free(s);
}

/* ---- socket helpers: one message per call, every wait bounded ---- */

/* Waits for ev on fd until the deadline, in slices so EINTR and clock
 * jumps cannot stretch it. Returns 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short ev, uint64_t deadline_ns)
{
    for (;;) {
        int ms = coh_ms_left(deadline_ns);
        if (ms == 0)
            return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = ev};
        int r = poll(&pf, 1, COH_MIN(ms, COH_WAIT_SLICE_MS));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

/* Sends one whole message (SEQPACKET keeps boundaries), optionally with
 * one descriptor attached. Non-blocking socket + poll: bounded. */
static int send_msg(int fd, const void *buf, size_t len, int pass_fd, uint64_t deadline_ns)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.b;
        mh.msg_controllen = sizeof ctl.b;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    for (;;) {
        ssize_t r = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r == (ssize_t)len)
            return 0;
        if (r >= 0)
            return -EMSGSIZE;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int w = wait_fd(fd, POLLOUT, deadline_ns);
        if (w < 0)
            return w;
    }
}

/* Receives exactly one message of `len` bytes; *got_fd (if given) receives
 * a passed descriptor or -1. Extra descriptors are closed. */
int coh_shm_hs_recv(int fd, void *buf, size_t len, int *got_fd, uint64_t deadline_ns)
{
    if (got_fd)
        *got_fd = -1;
    int reset_seen = 0;
    for (;;) {
        union {
            char b[CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
        ssize_t r = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0 && errno == EINTR)
            continue;
        /* A peer that closes with unread data in its own queue leaves a
         * reset that the next recvmsg reports before the messages it had
         * sent (the kernel checks the socket error first, then clears it):
         * the lead's M3, queued whole, would be lost and the member would
         * retry a rendezvous that already counted it (a CI run: ASan,
         * test_shm_fault no_leaks). Read once more: a queued message comes
         * now, else EOF. */
        if (r < 0 && errno == ECONNRESET && !reset_seen) {
            reset_seen = 1;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = wait_fd(fd, POLLIN, deadline_ns);
            if (w < 0)
                return w;
            continue;
        }
        if (r < 0)
            return -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < nfd; i++) {
                int f;
                memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
                if (got_fd && *got_fd < 0)
                    *got_fd = f;
                else
                    close(f);
            }
        }
        if (r == 0)
            return -ECONNRESET;
        /* A message of another size is not ours: never act on a prefix. */
        if ((size_t)r != len || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            if (got_fd && *got_fd >= 0) {
                close(*got_fd);
                *got_fd = -1;
            }
            return -EPROTO;
        }
        return 0;
    }
}

static socklen_t abstract_addr(struct sockaddr_un *a, const char *name)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t l = strnlen(name, sizeof a->sun_path - 2);
    memcpy(a->sun_path + 1, name, l); /* sun_path[0] = 0: abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + l);
}

/* One key per host and group: the lead's group rank names the host. */
static void store_key(const cohort_group *g, char *key, size_t n)
{
    snprintf(key, n, "shm/%d/addr", g->local_ranks[0]);
}

/* ---- lead ---- */

/* Answers one member's M2 (already received on c, greeted with snonce).
 * Returns 1 if it attached (its local index in *li), 0 if it was refused
 * (reason in why). */
static int serve_member(coh_shm *s, int c, int memfd, const int *have, const uint8_t snonce[32],
                        const hs_m2 *m2p, int *li, char *why, size_t whylen, uint64_t dl)
{
    cohort_group *g = s->g;
    hs_m2 m2 = *m2p;
    hs_m3 m3;
    memset(&m3, 0, sizeof m3);
    m3.magic = HS_MAGIC;
    int e;
    /* Verify before trusting any field: the MAC covers them all. */
    uint8_t mac[32];
    m2_mac(mac, g, &m2, snonce);
    struct ucred cred;
    socklen_t cl = sizeof cred;
    int have_cred = getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0;
    cohort_status st = COHORT_OK;
    if (m2.magic != HS_MAGIC || m2.version != SHM_VERSION) {
        st = COHORT_ERR_PROTOCOL;
        snprintf(m3.text, sizeof m3.text, "bad handshake magic/version (%#x/%u, want %#x/%u)",
                 m2.magic, m2.version, HS_MAGIC, SHM_VERSION);
    } else if (!coh_auth_equal(mac, m2.mac)) {
        st = COHORT_ERR_AUTH;
        snprintf(m3.text, sizeof m3.text,
                 "authentication failed (different job, token, generation or group)");
    } else if (m2.local_index <= 0 || m2.local_index >= s->n ||
               m2.group_rank != g->local_ranks[m2.local_index]) {
        st = COHORT_ERR_PROTOCOL;
        snprintf(m3.text, sizeof m3.text,
                 "member claims local index %d / rank %d, which is not a local rank of group %u",
                 m2.local_index, m2.group_rank, g->id);
    } else if (have[m2.local_index]) {
        st = COHORT_ERR_PROTOCOL;
        snprintf(m3.text, sizeof m3.text, "local index %d (rank %d) attached twice",
                 m2.local_index, m2.group_rank);
    } else if ((int)m2.check_contract != s->check) {
        st = COHORT_ERR_INVALID;
        snprintf(m3.text, sizeof m3.text,
                 "COHORT_CONTRACT differs between local ranks (rank %d: %s, rank %d: %s)",
                 g->rank, s->check ? "on" : "off", m2.group_rank,
                 m2.check_contract ? "on" : "off");
    }
    /* The answer is authenticated too (over the member's nonce), so a
     * member never maps a descriptor from a process without the token. */
    m3.status = (uint32_t)st;
    m3.size = s->size;
    m3_mac(m3.mac, g, &m3, m2.cnonce, snonce, m2.local_index);
    e = send_msg(c, &m3, sizeof m3, st == COHORT_OK ? memfd : -1, dl);
    if (st != COHORT_OK) {
        snprintf(why, whylen, "%s", m3.text);
        return 0;
    }
    if (e < 0) {
        snprintf(why, whylen, "sending the segment: %s", strerror(-e));
        return 0;
    }
    /* The caller closes c only once the member closed its end (lead_create,
     * "served"). */
    /* pids are only comparable if the member lives in our pid namespace. */
    if (!have_cred || cred.pid != m2.pid)
        atomic_fetch_or(&s->hdr->flags, SHM_F_NO_PIDFD);
    *li = m2.local_index;
    return 1;
}

/* ---- lead: the rendezvous socket under attack ----
 * Any local process can connect to the abstract name (it is listed in
 * /proc/net/unix). So: a peer of another uid is closed at accept
 * (SO_PEERCRED); a same-uid peer gets HS_AUTH_MS for its whole handshake,
 * which bytes cannot extend; all pending handshakes are served together
 * from one poll, so a silent peer delays nobody; at most HS_PENDING_MAX
 * are pending and a new connection evicts the oldest (a real member
 * answers within microseconds, so it is never the oldest for long). Every
 * such connection is tallied by process and named in the log and in the
 * lead's timeout error. */
#define HS_AUTH_MS 500
#define HS_STR_(x) #x
#define HS_STR(x) HS_STR_(x)
#define HS_PENDING_MAX 64

/* A connection to the rendezvous socket: pending until it authenticated
 * (or failed), then `served` - counted, M3 sent - until the member closed
 * its end, which it does right after reading M3. A close of ours first
 * reached a member as a reset without M3 (twice in CI runs on 2 cpus,
 * 2026-12-05), and its retry was refused - "attached twice", or the
 * rendezvous over - while the others waited at the attach barrier until
 * the timeout. Waiting for it in the loop rather than in place, a member
 * that keeps its end open (stopped or descheduled right after M3) delays
 * nobody else's handshake; its deadline (HS_AUTH_MS) bounds the wait. */
typedef struct hs_pending {
    int fd;
    int served;
    pid_t pid;
    uid_t uid;
    uint64_t dl;
    uint8_t snonce[32];
} hs_pending;

/* Connections of one cause, with the first process seen and whether others were. */
typedef struct hs_tally {
    int n;
    pid_t pid;
    uid_t uid;
    int others;
} hs_tally;

enum { T_STRANGER, T_SILENT, T_REFUSED, T_NCAUSE };

static void tally_add(hs_tally *t, pid_t pid, uid_t uid)
{
    if (t->n == 0) {
        t->pid = pid;
        t->uid = uid;
    } else if (t->pid != pid) {
        t->others = 1;
    }
    t->n++;
}

/* "N connection(s) from pid X uid Y (and other processes) <what>; ..." */
static void tally_fmt(const hs_tally *t, char *out, size_t len)
{
    static const char *what[T_NCAUSE] = {
        "were refused: another user's process (SO_PEERCRED)",
        "did not authenticate within " HS_STR(HS_AUTH_MS) " ms (silent, closed or evicted)",
        "failed the handshake (see the log)"};
    size_t pos = 0;
    out[0] = 0;
    for (int k = 0; k < T_NCAUSE; k++) {
        if (!t[k].n || pos >= len)
            continue;
        int w = snprintf(out + pos, len - pos, "%s%d connection%s from pid %d uid %u%s %s",
                         pos ? "; " : "", t[k].n, t[k].n > 1 ? "s" : "", (int)t[k].pid,
                         (unsigned)t[k].uid, t[k].others ? " and other processes" : "", what[k]);
        if (w < 0)
            break;
        pos += (size_t)w;
    }
}

/* A served member's end: closed (EOF), reset, or - a protocol breach -
 * sending more; 0 while it is only open. */
static int served_closed(int fd)
{
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
    return r >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK);
}

static void pending_drop(hs_pending *p, int *np, int i)
{
    close(p[i].fd);
    memmove(&p[i], &p[i + 1], (size_t)(*np - i - 1) * sizeof *p);
    (*np)--;
}

static cohort_status lead_publish_error(coh_shm *s, cohort_status st)
{
    cohort_group *g = s->g;
    if (s->n > 1 && g->store) {
        char key[64], val[COH_ERRLEN + 16];
        store_key(g, key, sizeof key);
        snprintf(val, sizeof val, "!%d:%s", (int)st, coh_tp_fail_reason(g));
        cohort_store_set(g->store, key, strlen(key), val, strlen(val));
    }
    return st;
}

static cohort_status lead_create(coh_shm *s, size_t S, size_t small, const shm_ringcfg *rc,
                                 size_t p2p_bytes)
{
    cohort_group *g = s->g;
    int n = s->n;
    shm_geo geo;
    shm_geometry(n, S, rc, p2p_bytes, &geo);
    size_t total = geo.total;
    int fd = memfd_create("cohort-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return lead_publish_error(
            s, coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "shm: memfd_create: %s (errno %d)",
                               strerror(errno), errno));
    if (ftruncate(fd, (off_t)total) < 0) {
        int e = errno;
        close(fd);
        return lead_publish_error(
            s, coh_tp_fail_set(g, COHORT_ERR_SYSTEM,
                               "shm: ftruncate of the %zu-byte segment: %s (errno %d)", total,
                               strerror(e), e));
    }
    /* Sealed size: no member can shrink the segment under the others
     * (which would turn their next access into SIGBUS). */
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    s->base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s->base == MAP_FAILED) {
        int e = errno;
        s->base = NULL;
        close(fd);
        return lead_publish_error(
            s, coh_tp_fail_set(g, COHORT_ERR_SYSTEM,
                               "shm: mmap of the %zu-byte segment: %s (errno %d)", total,
                               strerror(e), e));
    }
    s->size = total;
    shm_seg_hdr *h = s->hdr = (shm_seg_hdr *)s->base;
    shm_hdr_want w = hdr_want(s);
    shm_hdr_fill(h, &w, S, small, rc, p2p_bytes, &geo);
    set_geometry(s, h);
    if (n == 1) {
        close(fd);
        return COHORT_OK;
    }

    /* Abstract name: nothing in the file system to clean up, gone with the
     * socket; 128 random bits so it cannot be guessed (it is visible in
     * /proc/net/unix, which is why the handshake authenticates). */
    int ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ls < 0) {
        int e = errno;
        close(fd);
        return lead_publish_error(s, coh_tp_fail_set(g, COHORT_ERR_SYSTEM,
                                                     "shm: socket(AF_UNIX): %s (errno %d)",
                                                     strerror(e), e));
    }
    uint8_t rnd[16];
    char name[64];
    struct sockaddr_un addr;
    socklen_t alen = 0;
    int bound = 0;
    for (int attempt = 0; attempt < 4 && !bound; attempt++) {
        if (coh_random(rnd, sizeof rnd) != COHORT_OK)
            break;
        int p = snprintf(name, sizeof name, "cohort-shm-");
        for (size_t i = 0; i < sizeof rnd; i++)
            p += snprintf(name + p, sizeof name - (size_t)p, "%02x", rnd[i]);
        alen = abstract_addr(&addr, name);
        bound = bind(ls, (struct sockaddr *)&addr, alen) == 0;
    }
    /* A full backlog makes members' connects fail: room for floods. */
    if (!bound || listen(ls, SOMAXCONN) < 0) {
        int e = errno;
        close(ls);
        close(fd);
        return lead_publish_error(s, coh_tp_fail_set(g, COHORT_ERR_SYSTEM,
                                                     "shm: bind/listen on an abstract unix "
                                                     "socket: %s (errno %d)",
                                                     strerror(e), e));
    }
    char key[64];
    store_key(g, key, sizeof key);
    cohort_status st = cohort_store_set(g->store, key, strlen(key), name, strlen(name));
    if (st != COHORT_OK) {
        close(ls);
        close(fd);
        return coh_tp_fail_set(g, st, "shm: publishing the segment address in the store: %s",
                               cohort_store_last_error(g->store));
    }

    /* Accept until every member attached; strangers, silent and refused
     * connections do not count (see "the rendezvous socket under attack"). */
    uint64_t deadline = coh_deadline_ns(g->timeout_ms);
    int *have = coh_calloc((size_t)n, sizeof(int));
    hs_pending *pend = coh_calloc(HS_PENDING_MAX, sizeof *pend);
    struct pollfd *pfd = coh_calloc(HS_PENDING_MAX + 1, sizeof *pfd);
    if (!have || !pend || !pfd) {
        coh_free(have);
        coh_free(pend);
        coh_free(pfd);
        close(ls);
        close(fd);
        return lead_publish_error(s, coh_tp_fail_set(g, COHORT_ERR_NOMEM, "shm: out of memory"));
    }
    hs_tally tally[T_NCAUSE];
    memset(tally, 0, sizeof tally);
    int logged[T_NCAUSE] = {0};
    int got = 0, np = 0, hs_lingered = 0;
    char why[300] = "";
    uid_t my_uid = geteuid();
    while (got < n - 1) {
        if ((st = shm_check_abort(s)) != COHORT_OK) {
            /* poisoned from elsewhere (another thread, the monitor) */
            break;
        }
        uint64_t now = coh_now_ns();
        if (now >= deadline) {
            char missing[256], seen[512];
            int miss[64], nm = 0;
            for (int q = 1; q < n && nm < 64; q++)
                if (!have[q])
                    miss[nm++] = g->local_ranks[q];
            coh_fmt_ranks(missing, sizeof missing, miss, nm);
            tally_fmt(tally, seen, sizeof seen);
            st = coh_tp_fail_set(
                g, COHORT_ERR_TIMEOUT,
                "shm: rank(s) %s of this host never attached to the shared segment within %d "
                "ms%s%s%s%s",
                missing, g->timeout_ms, seen[0] ? "; meanwhile " : "", seen,
                tally[T_REFUSED].n ? "; last refusal: " : "", tally[T_REFUSED].n ? why : "");
            break;
        }
        /* Wake for the listener, every pending handshake, the earliest
         * handshake deadline, or a slice (abort checks). */
        uint64_t wake = COH_MIN(deadline, now + 50000000ull);
        pfd[0] = (struct pollfd){.fd = ls, .events = POLLIN};
        for (int i = 0; i < np; i++) {
            pfd[i + 1] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
            wake = COH_MIN(wake, pend[i].dl);
        }
        int ms = wake > now ? (int)((wake - now + 999999) / 1000000) : 0;
        int r = poll(pfd, (nfds_t)np + 1, ms);
        if (r < 0 && errno != EINTR) {
            int e = errno;
            st = coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "shm: poll: %s (errno %d)", strerror(e), e);
            break;
        }
        now = coh_now_ns();
        /* Pending handshakes first (pfd[i + 1] belongs to pend[i] until
         * something is dropped: walk backwards so drops keep the mapping). */
        for (int i = np - 1; i >= 0 && r > 0; i--) {
            if (!pfd[i + 1].revents)
                continue;
            if (pend[i].served) {
                if (served_closed(pend[i].fd))
                    pending_drop(pend, &np, i);
                continue;
            }
            hs_m2 m2;
            int e = coh_shm_hs_recv(pend[i].fd, &m2, sizeof m2, NULL, 0);
            if (e == -ETIMEDOUT)
                continue; /* woken without a message: its deadline still runs */
            int li = -1;
            if (e == -ECONNRESET) {
                tally_add(&tally[T_SILENT], pend[i].pid, pend[i].uid);
            } else if (e < 0) {
                snprintf(why, sizeof why, "malformed handshake message: %s", strerror(-e));
                tally_add(&tally[T_REFUSED], pend[i].pid, pend[i].uid);
            } else if (serve_member(s, pend[i].fd, fd, have, pend[i].snonce, &m2, &li, why,
                                    sizeof why, COH_MIN(deadline, now + HS_AUTH_MS * 1000000ull))) {
                have[li] = 1;
                got++;
                pend[i].served = 1;
                pend[i].dl = COH_MIN(deadline, now + HS_AUTH_MS * 1000000ull);
                continue;
            } else {
                tally_add(&tally[T_REFUSED], pend[i].pid, pend[i].uid);
                if (!logged[T_REFUSED]++)
                    coh_warn("shm: refused a connection (pid %d uid %u) to the segment of group "
                             "%u: %s",
                             (int)pend[i].pid, (unsigned)pend[i].uid, g->id, why);
            }
            pending_drop(pend, &np, i);
        }
        for (int i = np - 1; i >= 0; i--)
            if (now >= pend[i].dl && pend[i].served) {
                hs_lingered++;
                pending_drop(pend, &np, i);
            } else if (now >= pend[i].dl) {
                tally_add(&tally[T_SILENT], pend[i].pid, pend[i].uid);
                if (!logged[T_SILENT]++)
                    coh_warn("shm: group %u: a connection from pid %d uid %u did not "
                             "authenticate within %d ms; closed",
                             g->id, (int)pend[i].pid, (unsigned)pend[i].uid, HS_AUTH_MS);
                pending_drop(pend, &np, i);
            }
        if (pfd[0].revents & (POLLNVAL | POLLERR)) {
            /* Not a member's doing: the descriptor was closed or broken
             * under us (a stray close elsewhere in the process). Members
             * would be refused; say so instead of waiting out the timeout. */
            st = coh_tp_fail_set(g, COHORT_ERR_SYSTEM,
                                 "shm: the segment socket (fd %d) %s during the rendezvous", ls,
                                 (pfd[0].revents & POLLNVAL) ? "was closed by another part of "
                                                               "this process"
                                                             : "failed");
            if (pfd[0].revents & POLLNVAL)
                ls = -1; /* not ours any more: never close a number reused since */
            break;
        }
        if (!(pfd[0].revents & POLLIN))
            continue;
        /* Accept what is queued, a bounded batch per turn. */
        for (int k = 0; k < 16; k++) {
            int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (c < 0) {
                if (errno == EINTR || errno == ECONNABORTED)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                if ((errno == EMFILE || errno == ENFILE) && np > 0) {
                    /* out of descriptors: the oldest pending one goes first */
                    if (!pend[0].served)
                        tally_add(&tally[T_SILENT], pend[0].pid, pend[0].uid);
                    pending_drop(pend, &np, 0);
                    continue;
                }
                int e = errno;
                st = coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "shm: accept: %s (errno %d)",
                                     strerror(e), e);
                break;
            }
            struct ucred cred = {.pid = 0, .uid = (uid_t)-1};
            socklen_t cl = sizeof cred;
            if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != my_uid) {
                tally_add(&tally[T_STRANGER], cred.pid, cred.uid);
                if (!logged[T_STRANGER]++)
                    coh_warn("shm: group %u: refused a connection to the segment socket from "
                             "pid %d uid %u (ranks run as uid %u)",
                             g->id, (int)cred.pid, (unsigned)cred.uid, (unsigned)my_uid);
                close(c);
                continue;
            }
            if (np == HS_PENDING_MAX) {
                if (!pend[0].served)
                    tally_add(&tally[T_SILENT], pend[0].pid, pend[0].uid);
                pending_drop(pend, &np, 0);
            }
            hs_pending *p = &pend[np];
            p->served = 0;
            hs_m1 m1 = {.magic = HS_MAGIC, .version = SHM_VERSION};
            if (coh_auth_nonce(m1.snonce) != COHORT_OK ||
                send_msg(c, &m1, sizeof m1, -1, 0) < 0) {
                /* a fresh socket always has room for 40 bytes */
                close(c);
                continue;
            }
            p->fd = c;
            p->pid = cred.pid;
            p->uid = cred.uid;
            p->dl = COH_MIN(deadline, coh_now_ns() + HS_AUTH_MS * 1000000ull);
            memcpy(p->snonce, m1.snonce, sizeof p->snonce);
            np++;
        }
        if (st != COHORT_OK)
            break;
    }
    /* The last members served: their closes, each within its deadline (a
     * failed rendezvous closes at once - its members fail anyway). */
    uint64_t linger0 = coh_now_ns();
    while (st == COHORT_OK) {
        int nfd = 0, left = 0;
        uint64_t now = coh_now_ns(), wake = UINT64_MAX;
        for (int i = np - 1; i >= 0; i--) {
            if (!pend[i].served)
                continue;
            if (now >= pend[i].dl) {
                hs_lingered++;
                pending_drop(pend, &np, i);
                continue;
            }
            left++;
        }
        if (!left)
            break;
        for (int i = 0; i < np; i++)
            if (pend[i].served) {
                pfd[nfd++] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
                wake = COH_MIN(wake, pend[i].dl);
            }
        int ms = (int)((wake - now + 999999) / 1000000);
        if (poll(pfd, (nfds_t)nfd, ms) < 0 && errno != EINTR)
            break;
        for (int i = np - 1, j = nfd - 1; i >= 0; i--) {
            if (!pend[i].served)
                continue;
            if (pfd[j--].revents && served_closed(pend[i].fd))
                pending_drop(pend, &np, i);
        }
    }
    s->hs_linger_ns = coh_now_ns() - linger0;
    s->hs_lingered = hs_lingered;
    if (hs_lingered)
        coh_warn("shm: group %u segment rendezvous: %d member(s) kept the handshake open past "
                 "%d ms after attaching; closed",
                 g->id, hs_lingered, HS_AUTH_MS);
    for (int i = np - 1; i >= 0; i--)
        pending_drop(pend, &np, i);
    if (tally[T_STRANGER].n + tally[T_SILENT].n + tally[T_REFUSED].n) {
        char seen[512];
        tally_fmt(tally, seen, sizeof seen);
        coh_warn("shm: group %u segment rendezvous: %s", g->id, seen);
    }
    coh_free(pend);
    coh_free(pfd);
    coh_free(have);
    if (ls >= 0)
        close(ls);
    close(fd);
    if (st != COHORT_OK)
        return lead_publish_error(s, st); /* members fail at once, with the reason */
    int deleted;
    cohort_store_delete(g->store, key, strlen(key), &deleted);
    return COHORT_OK;
}

/* A refused connect: the lead listens before it publishes its address, so
 * a refusal means the name is not (or no longer) the lead's. Asks the store
 * again: a new address is tried at once, the same one again for a short
 * while (REFUSED_MS); a key that is gone or names a failure ends it, with
 * what the store said in *why. Returns 1 to connect again. */
#define REFUSED_MS 2000
static int refused_again(cohort_group *g, const char *key, char *name, size_t nlen,
                         uint64_t *since, char *why, size_t wlen)
{
    uint64_t now = coh_now_ns();
    if (!*since)
        *since = now;
    const void *k1[1] = {key};
    size_t kl = strlen(key);
    int ex = 0;
    if (cohort_store_check(g->store, k1, &kl, 1, &ex) != COHORT_OK) {
        snprintf(why, wlen, "; the store could not be asked again");
        return 0;
    }
    if (!ex) {
        snprintf(why, wlen, "; the store no longer holds its address: the rendezvous ended");
        return 0;
    }
    void *val = NULL;
    size_t vlen = 0;
    if (cohort_store_get(g->store, key, kl, &val, &vlen, 1000) != COHORT_OK) {
        snprintf(why, wlen, "; the store could not be asked again");
        return 0;
    }
    int same = vlen == strlen(name) && memcmp(val, name, vlen) == 0;
    if (!same && vlen > 0 && vlen < nlen && ((const char *)val)[0] != '!') {
        coh_warn("shm: rank %d's segment socket @%s refused; the store now names @%.*s",
                 g->local_ranks[0], name, (int)vlen, (const char *)val);
        memcpy(name, val, vlen);
        name[vlen] = 0;
        free(val);
        return 1;
    }
    if (!same) {
        const char *v = val, *colon = memchr(v, ':', vlen);
        int off = colon ? (int)(colon + 1 - v) : 0;
        snprintf(why, wlen, "; the lead failed: %.*s", (int)vlen - off, v + off);
        free(val);
        return 0;
    }
    free(val);
    if (now - *since >= REFUSED_MS * 1000000ull) {
        snprintf(why, wlen, "; refused for " HS_STR(REFUSED_MS) " ms while the store still names it");
        return 0;
    }
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
    return 1;
}

/* ---- member ---- */

static cohort_status member_attach(coh_shm *s)
{
    cohort_group *g = s->g;
    char key[64];
    store_key(g, key, sizeof key);
    void *val = NULL;
    size_t vlen = 0;
    cohort_status st = cohort_store_get(g->store, key, strlen(key), &val, &vlen,
                                        g->timeout_ms < 0 ? -1 : g->timeout_ms);
    if (st != COHORT_OK)
        return coh_tp_fail_set(g, st,
                               "shm: waiting for rank %d to publish the segment address: %s",
                               g->local_ranks[0], cohort_store_last_error(g->store));
    /* "!<status>:<text>" is the lead's failure, published so that members
     * fail at once with its reason instead of timing out. */
    char name[128];
    size_t l = COH_MIN(vlen, sizeof name - 1);
    memcpy(name, val, l);
    name[l] = 0;
    free(val); /* the store allocates with malloc */
    if (name[0] == '!') {
        int code = COHORT_ERR_SYSTEM;
        char *colon = strchr(name, ':');
        sscanf(name + 1, "%d", &code);
        return coh_tp_fail_set(g, code > 0 ? (cohort_status)code : COHORT_ERR_SYSTEM,
                               "shm: rank %d could not create the segment: %s", g->local_ranks[0],
                               colon ? colon + 1 : name + 1);
    }

    /* Connect and run M1..M3; a connection the lead closed before M3 (it
     * evicts the oldest pending one under a flood) is retried until dl. */
    uint64_t deadline = coh_deadline_ns(g->timeout_ms);
    uint64_t t0 = coh_now_ns();
    uint64_t dl = COH_MIN(deadline, t0 + 4ull * HS_TIMEOUT_MS * 1000000ull);
    struct sockaddr_un addr;
    socklen_t alen = abstract_addr(&addr, name);
    uint64_t refused = 0;
    char why[COH_ERRLEN / 2] = "";
    hs_m1 m1;
    hs_m2 m2 = {.magic = HS_MAGIC,
                .version = SHM_VERSION,
                .local_index = s->me,
                .group_rank = g->rank,
                .pid = (int32_t)getpid(),
                .check_contract = (uint32_t)s->check};
    hs_m3 m3;
    int fd = -1, c = -1, e = 0, closed = 0;
    const char *stage = "";
    for (;;) {
        if (c >= 0)
            close(c);
        alen = abstract_addr(&addr, name);
        c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c < 0)
            return coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "shm: socket(AF_UNIX): %s (errno %d)",
                                   strerror(errno), errno);
        /* A unix connect completes or fails at once; EAGAIN means the
         * backlog is full: retry every millisecond until dl. */
        while ((e = connect(c, (struct sockaddr *)&addr, alen) == 0 ? 0 : errno) != 0) {
            if ((e == EAGAIN || e == EINTR) && coh_ms_left(dl) > 0) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
                continue;
            }
            break;
        }
        if (e == EAGAIN) {
            close(c);
            return coh_tp_fail_set(g, COHORT_ERR_TIMEOUT,
                                   "shm: rank %d's segment socket @%s had a full backlog for %d ms "
                                   "(another local process is flooding it with connections?)",
                                   g->local_ranks[0], name, (int)((coh_now_ns() - t0) / 1000000));
        }
        if (e == ECONNREFUSED && refused_again(g, key, name, sizeof name, &refused, why, sizeof why))
            continue;
        if (e) {
            close(c);
            return coh_tp_fail_set(g, COHORT_ERR_SYSTEM,
                                   "shm: connecting to rank %d's segment socket @%s: %s "
                                   "(errno %d)%s%s",
                                   g->local_ranks[0], name, strerror(e), e,
                                   e == ECONNREFUSED
                                       ? " (no such socket in this network namespace: ranks of "
                                         "one host must share one; or the lead's rendezvous "
                                         "already ended)"
                                       : "",
                                   e == ECONNREFUSED ? why : "");
        }
        stage = "waiting for its greeting (M1)";
        if ((e = coh_shm_hs_recv(c, &m1, sizeof m1, NULL, dl)) < 0)
            goto retry;
        if (m1.magic != HS_MAGIC || m1.version != SHM_VERSION) {
            close(c);
            return coh_tp_fail_set(g, COHORT_ERR_PROTOCOL,
                                   "shm: rank %d's segment socket speaks magic/version "
                                   "%#x/%u, want %#x/%u",
                                   g->local_ranks[0], m1.magic, m1.version, HS_MAGIC, SHM_VERSION);
        }
        if (coh_auth_nonce(m2.cnonce) != COHORT_OK) {
            close(c);
            return coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "shm: getrandom failed");
        }
        m2_mac(m2.mac, g, &m2, m1.snonce);
        stage = "sending this rank's proof (M2)";
        if ((e = send_msg(c, &m2, sizeof m2, -1, dl)) < 0)
            goto retry;
        stage = "waiting for the segment (M3)";
        if ((e = coh_shm_hs_recv(c, &m3, sizeof m3, &fd, dl)) < 0)
            goto retry;
        break;
    retry:
        if ((e != -ECONNRESET && e != -EPIPE) || coh_ms_left(dl) == 0)
            goto io_err;
        /* Once per attach: a lead under a flood evicts handshakes, but a
         * member retried after the lead had counted it would fail later
         * with "connection refused" - this line tells the two apart. */
        if (!closed++)
            coh_warn("shm: rank %d closed this rank's handshake (%s, %s); connecting again",
                     g->local_ranks[0], stage, strerror(-e));
    }
    s->hs_m3_ns = coh_now_ns();
    /* tests: a member stopped or descheduled between M3 and its close */
    long linger;
    if (coh_env_int("COHORT_SHM_HS_LINGER_MS", &linger) == 1 && linger > 0 && linger <= 60000) {
        struct timespec ts = {linger / 1000, (linger % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    close(c);
    uint8_t mac[32];
    m3_mac(mac, g, &m3, m2.cnonce, m1.snonce, s->me);
    if (m3.magic != HS_MAGIC || !coh_auth_equal(mac, m3.mac)) {
        if (fd >= 0)
            close(fd);
        return coh_tp_fail_set(g, COHORT_ERR_AUTH,
                               "shm: authentication with rank %d (the segment owner) failed: "
                               "job id, token, generation or group differ",
                               g->local_ranks[0]);
    }
    m3.text[sizeof m3.text - 1] = 0;
    if (m3.status != COHORT_OK) {
        if (fd >= 0)
            close(fd);
        return coh_tp_fail_set(g, (cohort_status)m3.status,
                               "shm: rank %d refused this rank's attach: %s", g->local_ranks[0],
                               m3.text);
    }
    if (fd < 0)
        return coh_tp_fail_set(g, COHORT_ERR_PROTOCOL,
                               "shm: rank %d accepted but passed no segment descriptor",
                               g->local_ranks[0]);
    /* Only a sealed memfd of the announced size: a shrinkable file could
     * turn later accesses into SIGBUS. */
    struct stat sb;
    int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != m3.size || seals < 0 ||
        (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
        close(fd);
        return coh_tp_fail_set(g, COHORT_ERR_PROTOCOL,
                               "shm: the segment from rank %d is not a sealed %llu-byte memfd",
                               g->local_ranks[0], (unsigned long long)m3.size);
    }
    s->base = mmap(NULL, (size_t)m3.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    e = errno;
    close(fd);
    if (s->base == MAP_FAILED) {
        s->base = NULL;
        return coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "shm: mmap of the segment: %s (errno %d)",
                               strerror(e), e);
    }
    s->size = (size_t)m3.size;
    s->hdr = (shm_seg_hdr *)s->base;
    /* A private copy of the header's plain fields, checked and then used
     * alone: the segment stays writable by every local process of the job,
     * and a value changed between the check and its use must not count
     * (shm_geo.h). */
    shm_seg_hdr h;
    memset(&h, 0, sizeof h);
    if (s->size >= SHM_HDR_PLAIN_BYTES)
        memcpy(&h, s->base, SHM_HDR_PLAIN_BYTES);
    shm_hdr_want w = hdr_want(s);
    const char *bad = shm_hdr_check(&h, &w);
    if (bad) {
        /* The lead learns why at once (coh_shm_create's failure path
         * aborts the segment): the abort words sit in the header's first
         * page and the control blocks at a fixed offset, neither taken
         * from the fields refused. */
        if (s->size >= SHM_SEG_HDR_BYTES + (size_t)s->n * SHM_CTL_BYTES)
            s->ctl_base = s->base + SHM_SEG_HDR_BYTES;
        else
            s->hdr = NULL;
        return coh_tp_fail_set(g, COHORT_ERR_PROTOCOL,
                               "shm: the segment from rank %d has an unexpected header: %s "
                               "(group %u gen %u local size %u, layout version %u; this rank: "
                               "group %u gen %u local size %d, layout version %u)",
                               g->local_ranks[0], bad, h.group, h.gen, h.local_size, h.version,
                               w.group, w.gen, w.n, SHM_VERSION);
    }
    set_geometry(s, &h);
    return COHORT_OK;

io_err:
    close(c);
    if (fd >= 0)
        close(fd);
    return coh_tp_fail_set(g, e == -ETIMEDOUT ? COHORT_ERR_TIMEOUT : COHORT_ERR_SYSTEM,
                           "shm: handshake with rank %d's segment socket: %s after %d ms%s",
                           g->local_ranks[0], e == -ETIMEDOUT ? "no answer" : strerror(-e),
                           (int)((coh_now_ns() - t0) / 1000000),
                           closed ? " (the lead closed earlier attempts: is another local process "
                                    "flooding its segment socket?)"
                                  : "");
}

/* ---- the publish mode (shm_seg.h shm_pub_store, docs/shm.md "Publishing") ---- */

enum { PUB_AUTO, PUB_FENCE, PUB_MEMBARRIER };

/* Why auto keeps the fence when ranks outnumber cpus (publish_decide). There
 * sleeps are frequent (a reader's turn often ends in one) and each
 * sleeper's membarrier interrupts the cpus where the ranks run - the one it
 * waits for among them. Measured LOADED (2 cores, 4 ranks, same binary,
 * paired A/B of the two modes; docs/shm.md "Publishing"): no cell's p50
 * difference outside its per-pair spread, back to back or OSU style; in
 * the OSU runs the p99 of all_reduce and scatter worse in 5 of 6 cells
 * (broadcast's flipped between two runs); with every wait asleep (the wake
 * stress) 10 % slower. No gain shown and a tail that may lose: fence.
 * COHORT_SHM_PUBLISH=membarrier takes the light publish there. */

/* COHORT_SHM_PUBLISH=auto|fence|membarrier; anything else fails the
 * attach naming the variable (cohort_init's table rejects it first). */
static cohort_status publish_env(cohort_group *g, int *mode)
{
    const char *v = coh_env_str("COHORT_SHM_PUBLISH");
    *mode = PUB_AUTO;
    if (!v || !strcmp(v, "auto"))
        return COHORT_OK;
    if (!strcmp(v, "fence")) {
        *mode = PUB_FENCE;
        return COHORT_OK;
    }
    if (!strcmp(v, "membarrier")) {
        *mode = PUB_MEMBARRIER;
        return COHORT_OK;
    }
    return coh_tp_fail_set(g, COHORT_ERR_INVALID,
                           "COHORT_SHM_PUBLISH='%s': expected auto, fence or membarrier", v);
}

/* Before the attach barrier: register for the sleepers' membarrier (unless
 * told not to) and record what this rank can do, for every rank to read. */
static void publish_offer(coh_shm *s, int mode)
{
    uint32_t cap = SHM_PUB_CAP_FENCE;
    s->publish_info[0] = 0;
    if (mode != PUB_FENCE && s->n > 1)
        cap = shm_membar_register(s->publish_info, sizeof s->publish_info)
                  ? (mode == PUB_MEMBARRIER ? SHM_PUB_CAP_FORCE : SHM_PUB_CAP_AUTO)
                  : SHM_PUB_CAP_NOMEMBAR;
    if (cap == SHM_PUB_CAP_NOMEMBAR)
        coh_info("shm: %s; publishing with seq_cst fences", s->publish_info);
    atomic_store_explicit(&shm_ctl_of(s, s->me)->publish_cap, cap, memory_order_relaxed);
}

/* After the attach barrier (every rank's publish_cap is visible: it was
 * stored before the rank published phase 1): the group's mode, the same on
 * every local rank because it is a function of the segment alone - a rank
 * that sleeps without the membarrier while a peer publishes without the
 * fence could miss a wake-up. Light only if every rank registered and
 * none forced the fence; and when ranks outnumber cpus only if one asked
 * for it (COHORT_SHM_PUBLISH=membarrier): see above. */
static void publish_decide(coh_shm *s)
{
    int fence_q = -1, force = 0;
    uint32_t why = 0;
    for (int q = 0; q < s->n; q++) {
        uint32_t c = atomic_load_explicit(&shm_ctl_of(s, q)->publish_cap, memory_order_relaxed);
        if (c == SHM_PUB_CAP_FORCE)
            force = 1;
        if (c < SHM_PUB_CAP_AUTO && fence_q < 0) {
            fence_q = q;
            why = c;
        }
    }
    s->light = 0;
    if (s->n == 1) {
        snprintf(s->publish_info, sizeof s->publish_info, "fence (one local rank: no sleepers)");
        return;
    }
    if (fence_q >= 0) {
        snprintf(s->publish_info, sizeof s->publish_info,
                 "fence (seq_cst store and load at every publish: local rank %d (rank %d) %s)",
                 fence_q, s->g->local_ranks[fence_q],
                 why == SHM_PUB_CAP_FENCE    ? "has COHORT_SHM_PUBLISH=fence"
                 : why == SHM_PUB_CAP_NOMEMBAR ? "cannot use membarrier (GLOBAL_EXPEDITED)"
                                               : "did not say");
        return;
    }
    if (s->oversub && !force) {
        snprintf(s->publish_info, sizeof s->publish_info,
                 "fence (seq_cst store and load at every publish: ranks outnumber cpus, where "
                 "sleeps are frequent; COHORT_SHM_PUBLISH=membarrier takes the light publish)");
        return;
    }
    s->light = 1;
    snprintf(s->publish_info, sizeof s->publish_info,
             "membarrier (plain store and load at a ring call's and a channel's publish; a sleeper runs "
             "membarrier(GLOBAL_EXPEDITED) before it sleeps; %s)",
             force ? "COHORT_SHM_PUBLISH=membarrier" : "auto: every local rank registered");
}

const char *coh_shm_publish_info(const coh_shm *s)
{
    return s ? s->publish_info : "no segment";
}

/* ---- attach: identity, first touch, barrier, liveness handles ---- */

static cohort_status attach(coh_shm *s, int pub_mode)
{
    cohort_group *g = s->g;
    shm_ctl *me = shm_ctl_of(s, s->me);
    publish_offer(s, pub_mode);
    atomic_store(&me->pid, (int32_t)getpid());
    atomic_store(&me->running, 1);
    atomic_store(&me->group_rank, g->rank);
    atomic_store(&me->attached, 1);
    /* First touch of my own buffers from this process (page placement,
     * and no page faults inside the first collective). */
    unsigned char *mine = s->slots + (size_t)s->me * s->rank_stride;
#ifdef MADV_POPULATE_WRITE
    if (madvise(mine, s->rank_stride, MADV_POPULATE_WRITE) != 0)
#endif
        for (size_t i = 0; i < s->rank_stride; i += 4096)
            ((volatile unsigned char *)mine)[i] = 0;
    shm_cma_publish(s);
    /* Barrier: phase 1 published by everyone. */
    shm_op o = {.s = s, .g = g, .c = &attach_call};
    shm_publish(s);
    cohort_status st = shm_wait_all(&o, s->phase);
    if (st != COHORT_OK)
        return st;
    /* Every wait for phase >= 2 and every publish of it come after this,
     * on every rank: phase 1 paired in fence mode, the rest in the mode
     * decided here. */
    publish_decide(s);
    s->pidfd = coh_malloc((size_t)s->n * sizeof(int));
    s->peer_pid = coh_calloc((size_t)s->n, sizeof *s->peer_pid);
    if (!s->pidfd || !s->peer_pid) { /* cleanup must not close what pidfd[] holds now */
        coh_free(s->pidfd);
        s->pidfd = NULL;
        return coh_tp_fail_set(g, COHORT_ERR_NOMEM, "shm: out of memory");
    }
    /* pidfds are opened after the barrier: every peer is alive and has
     * published its pid, so a recycled pid cannot be mistaken for it. */
    int nopid = (atomic_load(&s->hdr->flags) & SHM_F_NO_PIDFD) != 0;
    for (int q = 0; q < s->n; q++) {
        s->pidfd[q] = -1;
        pid_t pid = q == s->me ? getpid() : atomic_load(&shm_ctl_of(s, q)->pid);
        s->peer_pid[q] = pid; /* the one read: the single copy uses it (shm_seg.h) */
        if (q == s->me || nopid)
            continue;
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
            coh_info("shm: pidfd_open(%d) for rank %d: %s; its death will show as a timeout",
                     (int)pid, g->local_ranks[q], strerror(errno));
        else
            fcntl(fd, F_SETFD, FD_CLOEXEC);
        s->pidfd[q] = fd;
    }
    if (nopid)
        coh_info("shm: local ranks live in different pid namespaces; peer deaths will show as "
                 "timeouts");
    /* Single copy: probe every peer, agree (phase 2). */
    return shm_cma_agree(&o);
}

cohort_status coh_shm_create(cohort_group *g, coh_shm **out)
{
    if (!out)
        return COHORT_ERR_INVALID;
    *out = NULL;
    if (!g || g->local_size < 1 || g->local_rank < 0 || g->local_rank >= g->local_size ||
        !g->local_ranks)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "shm: group without a local topology");
    if (g->local_size > 1 && (!g->store || !g->token))
        return coh_tp_fail_set(g, COHORT_ERR_INVALID, "shm: group without a store or job token");
    if (sodium_init() < 0)
        return coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "shm: libsodium initialisation failed");
    size_t S = 0, small = 0, p2p_bytes = 0, stash_cap = 0;
    shm_ringcfg rc = {0, 0, 0, 0, 0, SHM_LINE};
    cohort_status st = read_env(g, &S, &small);
    if (st == COHORT_OK)
        st = read_ring_env(g, &rc);
    if (st == COHORT_OK)
        st = read_p2p_env(g, &p2p_bytes);
    if (st == COHORT_OK)
        st = read_stash_env(g, &stash_cap);
    int pub_mode = PUB_AUTO;
    if (st == COHORT_OK)
        st = publish_env(g, &pub_mode);
    if (st != COHORT_OK)
        return st;
    coh_shm *s = coh_calloc(1, sizeof *s);
    if (!s)
        return coh_tp_fail_set(g, COHORT_ERR_NOMEM, "shm: out of memory");
    s->g = g;
    s->n = g->local_size;
    s->p2p_stash_cap = stash_cap;
    s->p2p_held = -1;
    s->me = g->local_rank;
    s->check = g->check_contract ? 1 : 0;
    s->srcs = coh_calloc((size_t)s->n, sizeof *s->srcs);
    if (!s->srcs) {
        cleanup(s);
        return coh_tp_fail_set(g, COHORT_ERR_NOMEM, "shm: out of memory");
    }
    shm_wait_defaults(s);
    /* Streaming stores pay off once the job's buffers (send + recv on every
     * local rank) no longer fit in the last-level cache. VMs often report
     * the whole host's L3 (256 MiB here) while one core complex shares
     * 32 MiB: cap the estimate there. */
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 <= 0 || l3 > (32l << 20))
        l3 = 32l << 20;
    s->nt_bytes = COH_MAX((size_t)l3 / (2 * (size_t)s->n), (size_t)1 << 20);
    long ntv;
    if (coh_env_int("COHORT_SHM_NT_BYTES", &ntv) == 1 && ntv >= 0)
        s->nt_bytes = (size_t)ntv;
    st = s->me == 0 ? lead_create(s, S, small, &rc, p2p_bytes) : member_attach(s);
    if (st == COHORT_OK)
        st = attach(s, pub_mode);
    if (st != COHORT_OK) {
        /* Ranks that already attached learn it from the segment at once
         * instead of waiting out the attach barrier. */
        if (s->hdr && s->ctl_base) {
            const char *why = coh_tp_fail_reason(g);
            coh_shm_abort(s, st, why[0] ? why : "shm: attach failed");
        }
        cleanup(s);
        return st;
    }
    if (s->p2p_bytes) {
        s->p2p_out = coh_calloc((size_t)s->n, sizeof *s->p2p_out);
        s->p2p_in = coh_calloc((size_t)s->n, sizeof *s->p2p_in);
        s->p2p_acked = coh_calloc((size_t)s->n, sizeof *s->p2p_acked);
        s->p2p_stash = coh_calloc((size_t)s->n, sizeof *s->p2p_stash);
        s->p2p_last = coh_calloc((size_t)s->n, sizeof *s->p2p_last);
        if (!s->p2p_out || !s->p2p_in || !s->p2p_acked || !s->p2p_stash || !s->p2p_last) {
            coh_shm_abort(s, COHORT_ERR_NOMEM, "shm: out of memory");
            cleanup(s);
            return coh_tp_fail_set(g, COHORT_ERR_NOMEM, "shm: out of memory");
        }
    }
    if (s->ring_k) {
        s->ring_pend = coh_calloc(s->ring_nrec, sizeof *s->ring_pend);
        s->ring_calls = coh_calloc(s->ring_nrec, sizeof *s->ring_calls);
        s->ring_lead = coh_calloc(s->ring_nrec, sizeof *s->ring_lead);
        s->ring_spread = coh_calloc(s->ring_nrec, sizeof *s->ring_spread);
        if (!s->ring_pend || !s->ring_calls || !s->ring_lead || !s->ring_spread) {
            coh_shm_abort(s, COHORT_ERR_NOMEM, "shm: out of memory");
            cleanup(s);
            return coh_tp_fail_set(g, COHORT_ERR_NOMEM, "shm: out of memory");
        }
        /* My done words start at a value no phase of their index has (word
         * i holds phases = i mod nrec): a zeroed word would pass the root's
         * check of phase 0 after the counter wraps. Before I publish any
         * phase, so before any root reads them. */
        for (size_t i = 0; i < s->ring_nrec; i++)
            for (int spread = 0; spread < 2; spread++)
                atomic_store_explicit(shm_ring_done(s, s->me, (uint32_t)i, spread),
                                      (uint32_t)i + 1, memory_order_relaxed);
        /* my compact records alike: a zeroed tag would read as phase 0 */
        for (size_t i = 0; i < s->ring_nrec; i++)
            atomic_store_explicit(&shm_ring_crec_of(s, s->me, (uint32_t)i)->phase,
                                  (uint32_t)i + 1, memory_order_relaxed);
    }
    coh_debug("shm: group %u local %d/%d attached, segment %zu bytes, slot %zu, small %zu, %s; "
              "%s; publish: %s",
              g->id, s->me, s->n, s->size, s->S, s->small_bytes,
              s->oversub ? "oversubscribed (yield early)" : "spin then yield", s->copy_info,
              s->publish_info);
    *out = s;
    coh_transport_attach(g, &coh_shm_transport, s);
    return COHORT_OK;
}

void coh_shm_destroy(coh_shm *s)
{
    if (!s)
        return;
    coh_transport_detach(s->g, s);
    cleanup(s);
}

/* ---- the ops table (transport.h) ---- */

static void tp_abort(void *t, cohort_status st, const char *reason, int from_peer)
{
    /* The abort word is local to the host: set it for a peer's abort too,
     * so every local rank stops at once. */
    (void)from_peer;
    coh_shm_abort(t, st, reason);
}
static void tp_wake(void *t) { coh_shm_wake(t); }
static void tp_destroy(void *t) { coh_shm_destroy(t); }
/* cohort_finalize: the ring's closing check (src/coll/shm sets ring_close
 * once this rank rooted a ring call; the transport does not know the
 * contract rules). */
/* cohort_finalize: the send/recv channels' closing check (tcp's BYE on the
 * segment). A message that no recv took by the end is a broken contract:
 * a send nobody received. Every rank first marks itself closed (the flag
 * in each of its outgoing channels: it receives nothing more), then
 *  - a message still unconsumed in a channel to this rank: its verdict is
 *    the contract's (contract/unconsumed.c), as for tcp's unclaimed ones;
 *  - a message this rank sent that is not consumed yet: it waits until the
 *    receiver takes it, or marks itself closed (then it never will: this
 *    rank reports it - the receiver may too, whoever is first), or exits,
 *    or wait_ms passed (a late rank: logged by finalize, not failed).
 * A rank that sent nothing unconsumed waits for nobody. */
static cohort_status p2p_close(coh_shm *s, int wait_ms)
{
    if (!s->p2p_stride || !s->p2p_in || s->n < 2)
        return COHORT_OK;
    for (int q = 0; q < s->n; q++)
        if (q != s->me)
            atomic_store_explicit(&shm_chan_of(s, s->me, q)->closed, 1u, memory_order_seq_cst);
    for (int q = 0; q < s->n; q++) {
        if (q == s->me)
            continue;
        shm_chan *ch = shm_chan_of(s, q, s->me);
        uint32_t t = s->p2p_in[q];
        coh_hdr h, exp;
        if (s->p2p_stash[q])
            h = s->p2p_stash[q]->h; /* taken from the channel, never received */
        else if (shm_chan_ready(shm_chan_slot(s, ch, t), t))
            memcpy(&h, shm_chan_slot(s, ch, t) + SHM_LINE, sizeof h); /* its full header */
        else
            continue;
        coh_call call;
        char msg[COH_ERRLEN];
        if (coh_contract_unconsumed(s->g, &h, &call, &exp, msg, sizeof msg))
            return coh_tp_mismatch(s->g, &call, h.src, &exp, &h);
        return coh_tp_fail_set(s->g, COHORT_ERR_CONTRACT, "%s", msg);
    }
    uint64_t dl = coh_deadline_ns(wait_ms);
    cohort_status late = COHORT_OK;
    for (int q = 0; q < s->n; q++) {
        if (q == s->me || !s->p2p_out[q])
            continue;
        shm_chan *out = shm_chan_of(s, s->me, q), *back = shm_chan_of(s, q, s->me);
        uint32_t t = s->p2p_out[q];
        cohort_status st = shm_wait_flag(s, q, &back->closed, &out->ack, t, dl);
        if (st == COHORT_ERR_PEER_LOST)
            continue; /* a dead peer is somebody else's report */
        if (st == COHORT_ERR_TIMEOUT) {
            late = st;
            continue;
        }
        if (st != COHORT_OK)
            return st;
        uint32_t a = atomic_load_explicit(&out->ack, memory_order_acquire);
        if (shm_reached(a, t))
            continue;
        coh_hdr h;
        memcpy(&h, shm_chan_slot(s, out, a) + SHM_LINE, sizeof h); /* its full header */
        return coh_tp_fail_set(s->g, COHORT_ERR_CONTRACT,
                               "send #%llu from rank %d to rank %d (tag %d, %llu bytes, line %u) "
                               "was never received: rank %d finalized without the matching "
                               "cohort_recv",
                               (unsigned long long)h.seq, s->g->rank, s->g->local_ranks[q], h.tag,
                               (unsigned long long)h.len, h.line, s->g->local_ranks[q]);
    }
    return late;
}

static cohort_status tp_close_check(void *t, int wait_ms)
{
    coh_shm *s = t;
    if (!s)
        return COHORT_OK;
    int p = coh_group_poisoned(s->g);
    if (p)
        return (cohort_status)p;
    cohort_status st = p2p_close(s, wait_ms);
    if (st != COHORT_OK && st != COHORT_ERR_TIMEOUT)
        return st;
    cohort_status rs = s->ring_close ? s->ring_close(s, wait_ms) : COHORT_OK;
    return rs != COHORT_OK ? rs : st;
}

const coh_transport_ops coh_shm_transport = {
    .hook = {.name = "shm", .order = COH_HOOK_SHM, .abort = tp_abort, .wake = tp_wake},
    .close_check = tp_close_check,
    .destroy = tp_destroy,
};

/* Wakes every sleeper of the segment: we do not know which word a local
 * waiter sleeps on, and waking other processes' sleepers costs them one
 * spurious check. Rare (aborts). */
void coh_shm_wake(coh_shm *s)
{
    if (!s || !s->ctl_base)
        return;
    for (int q = 0; q < s->n; q++) {
        shm_futex_wake(&shm_ctl_of(s, q)->arrive);
        if (s->p2p_stride) /* the rank's bell (send/recv waits) */
            shm_futex_wake(&shm_chan_of(s, q, q)->pub);
    }
    /* channel words with sleepers (the waiters words say which) */
    if (s->p2p_stride)
        for (int a = 0; a < s->n; a++)
            for (int b = 0; b < s->n; b++) {
                if (a == b)
                    continue;
                shm_chan *ch = shm_chan_of(s, a, b);
                if (atomic_load_explicit(&ch->pub_waiters, memory_order_relaxed))
                    shm_futex_wake(&ch->pub);
                if (atomic_load_explicit(&ch->ack_waiters, memory_order_relaxed))
                    shm_futex_wake(&ch->ack);
            }
}

void coh_shm_abort(coh_shm *s, cohort_status st, const char *reason)
{
    if (!s || !s->hdr)
        return;
    shm_seg_hdr *h = s->hdr;
    uint32_t zero = 0;
    if (st != COHORT_OK &&
        atomic_compare_exchange_strong(&h->abort_claim, &zero, 1u)) {
        snprintf(h->abort_reason, sizeof h->abort_reason, "%s", reason ? reason : "");
        h->abort_rank = s->g->rank;
        h->abort_seq = coh_group_failed_seq(s->g);
        atomic_store_explicit(&h->abort_status, (uint32_t)st, memory_order_release);
    }
    coh_shm_wake(s);
}

const char *coh_shm_copy_info(const coh_shm *s) { return s ? s->copy_info : "no segment"; }

int coh_shm_ring_prefetch(const coh_shm *s, size_t bytes)
{
    if (!s || !s->ring_pf)
        return 0;
    shm_ring_cls rc = shm_ring_class(s, bytes);
    return shm_ring_pf_slot(&rc, bytes) ? 2 : 1;
}

int coh_shm_ring_takes(const coh_shm *s, size_t bytes, size_t *slots, size_t *max,
                       size_t *pieces)
{
    size_t np = shm_ring_pieces(s, bytes);
    /* slots: those the call's class cycles through (shm_ring_class) */
    if (np) {
        *slots = shm_ring_class(s, s->ring_bytes).cyc;
        *max = s->ring_bytes;
        *pieces = np;
        return 1;
    }
    if (!s || !s->ring_k || s->n < 2 || bytes > s->ring_bytes ||
        shm_cma_use(s, COH_COLL_BROADCAST, bytes))
        return 0;
    shm_ring_cls rc = shm_ring_class(s, bytes);
    *slots = rc.cyc;
    *max = rc.tiny ? s->tiny_bytes : s->ring_bytes;
    *pieces = 1;
    return 1;
}

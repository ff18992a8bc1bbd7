/*
 * gen_tcp_wire.c - writes the seed corpus of fuzz_tcp_wire (valid and
 * broken handshake frames, data header streams) into a directory, and with
 * --hex prints them as the hex dumps used in docs/wire-protocol.md. Seeds
 * use fixed nonces so the output is reproducible:
 *   gen_tcp_wire tests/fuzz/corpus/tcp_wire
 *   gen_tcp_wire --hex
 */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "transport/tcp/wire.h"

#define FZ_TOKEN "fuzz-token"
#define FZ_JOB "fuzz-job"

static const char *dir;
static int hex;

static void emit(const char *name, const uint8_t *b, size_t n)
{
    if (hex) {
        printf("## %s (%zu bytes)\n", name, n);
        for (size_t i = 0; i < n; i += 16) {
            printf("%04zx:", i);
            for (size_t j = i; j < i + 16 && j < n; j++)
                printf(" %02x", b[j]);
            printf("\n");
        }
        printf("\n");
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n) {
        perror(path);
        return;
    }
    fclose(f);
}

static void hello_of(coh_hs_hello *h, const char *job, uint32_t gen, int rank)
{
    memset(h, 0, sizeof *h);
    snprintf(h->id.job, sizeof h->id.job, "%s", job);
    h->id.gen = gen;
    h->id.group = 7;
    h->id.rank = rank;
    h->id.size = 4;
    h->dst = 2;
    for (int i = 0; i < COH_HS_NONCE; i++)
        h->nonce[i] = (uint8_t)(0xc0 + i);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gen_tcp_wire DIR | --hex\n");
        return 2;
    }
    if (!strcmp(argv[1], "--hex"))
        hex = 1;
    else
        dir = argv[1];
    if (sodium_init() < 0)
        return 1;
    uint8_t key[COH_HS_KEY], bad[COH_HS_KEY], na[COH_HS_NONCE];
    coh_hs_key(key, FZ_TOKEN);
    coh_hs_key(bad, "wrong-token");
    for (int i = 0; i < COH_HS_NONCE; i++)
        na[i] = (uint8_t)(0xa0 + i);
    uint8_t f[4096];
    size_t l;

    l = coh_hs_challenge_put(f, na, 2);
    emit("challenge", f, l);

    coh_hs_hello h;
    hello_of(&h, FZ_JOB, 3, 1);
    coh_hs_hello_mac(h.mac, key, na, &h);
    l = coh_hs_hello_put(f, &h);
    emit("hello_valid", f, l);

    /* Handshake then the data stream: a valid hello followed by headers. */
    size_t hl = l;
    coh_hdr d;
    memset(&d, 0, sizeof d);
    d.magic = COH_HDR_MAGIC;
    d.kind = COH_MSG_COLL;
    d.coll = 1; /* all_reduce */
    d.dtype = COHORT_FLOAT32;
    d.redop = COHORT_SUM;
    d.group = 7;
    d.gen = 3;
    d.seq = 5;
    d.count = 256;
    d.root = -1;
    d.tag = 0;
    d.step = 0;
    d.site = 0x1234abcd;
    d.len = 1024;
    d.src = 1;
    d.line = 88;
    memcpy(f + hl, &d, sizeof d);
    memset(f + hl + sizeof d, 0x3f, 1024);
    emit("hello_then_coll", f, hl + sizeof d + 1024);

    hello_of(&h, FZ_JOB, 3, 1);
    coh_hs_hello_mac(h.mac, bad, na, &h);
    emit("hello_wrong_token", f, coh_hs_hello_put(f, &h));
    hello_of(&h, "other-job", 3, 1);
    coh_hs_hello_mac(h.mac, key, na, &h);
    emit("hello_wrong_job", f, coh_hs_hello_put(f, &h));
    hello_of(&h, FZ_JOB, 2, 1);
    coh_hs_hello_mac(h.mac, key, na, &h);
    emit("hello_old_generation", f, coh_hs_hello_put(f, &h));
    hello_of(&h, FZ_JOB, 3, 3);
    coh_hs_hello_mac(h.mac, key, na, &h);
    emit("hello_wrong_direction", f, coh_hs_hello_put(f, &h));

    uint8_t mac[COH_HS_MAC];
    coh_hs_ident acc = {.gen = 3, .group = 7, .rank = 2, .size = 4};
    memcpy(acc.job, FZ_JOB, sizeof FZ_JOB);
    coh_hs_welcome_mac(mac, key, h.nonce, na, &acc, 1);
    emit("welcome", f, coh_hs_welcome_put(f, mac));
    emit("refuse_generation", f,
         coh_hs_refuse_put(f, COH_HS_OLD_GEN, "stale generation (older than ours): gen 2, ours 3"));

    const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    emit("garbage_http", (const uint8_t *)http, sizeof http - 1);
    coh_hs_prefix_put(f, COH_HS_HELLO, 0x7fffffffu);
    emit("oversized_length", f, COH_HS_PREFIX);
    coh_hs_prefix_put(f, COH_HS_HELLO, COH_HS_HELLO_LEN);
    memset(f + COH_HS_PREFIX, 0, 10);
    emit("truncated_hello", f, COH_HS_PREFIX + 10);
    coh_hs_prefix_put(f, COH_HS_CHALLENGE, COH_HS_CHALLENGE_LEN);
    uint32_t e = __builtin_bswap32(COH_HS_ENDIAN);
    memcpy(f + 8, &e, 4);
    emit("other_endianness", f, COH_HS_PREFIX);

    /* Data stream only: COLL, P2P, ABORT with a reason, BYE; then a bad kind. */
    size_t o = 0;
    memcpy(f + o, &d, sizeof d);
    o += sizeof d;
    memset(f + o, 0x11, 1024);
    o += 1024;
    coh_hdr p = d;
    p.kind = COH_MSG_P2P;
    p.coll = 10; /* send */
    p.seq = 1;
    p.root = 2;
    p.tag = 42;
    p.count = 4;
    p.dtype = COHORT_INT32;
    p.redop = -1;
    p.len = 16;
    memcpy(f + o, &p, sizeof p);
    o += sizeof p;
    memset(f + o, 0x22, 16);
    o += 16;
    const char why[] = "all_reduce #5: count differs";
    coh_hdr a;
    memset(&a, 0, sizeof a);
    a.magic = COH_HDR_MAGIC;
    a.kind = COH_MSG_ABORT;
    a.group = 7;
    a.gen = 3;
    a.root = -1;
    a.tag = 2; /* COHORT_ERR_CONTRACT */
    a.src = 1;
    a.len = sizeof why - 1;
    memcpy(f + o, &a, sizeof a);
    o += sizeof a;
    memcpy(f + o, why, sizeof why - 1);
    o += sizeof why - 1;
    coh_hdr b = a;
    b.kind = COH_MSG_BYE;
    b.tag = 0;
    b.len = 0;
    memcpy(f + o, &b, sizeof b);
    o += sizeof b;
    emit("data_stream", f, o);
    if (hex) {
        emit("data_coll_header", (const uint8_t *)&d, sizeof d);
        emit("data_abort_frame", f + sizeof d + 1024 + sizeof p + 16, sizeof a + sizeof why - 1);
    }
    coh_hdr k = d;
    k.kind = 9;
    memcpy(f, &k, sizeof k);
    emit("data_bad_kind", f, sizeof k);
    k = d;
    k.len = 0xffffffffffffull;
    memcpy(f, &k, sizeof k);
    emit("data_huge_len", f, sizeof k);
    return 0;
}

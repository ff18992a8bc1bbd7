/*
 * fuzz_tcp_wire.c - libFuzzer target for the tcp transport's decoders
 * (src/transport/tcp/wire.c): what an unauthenticated client can send to a
 * rank's listening port (handshake frames), and the data headers a peer
 * sends after it (checked before any payload is placed).
 *
 * Input: handshake frames back to back; from the first bytes that do not
 * parse as a frame prefix, data headers each followed by its payload.
 * Properties beyond "no crash / out-of-bounds access" (ASan, UBSan):
 *  - a prefix that parses announces exactly its type's body length, and
 *    the body then decodes;
 *  - decode(encode(decode(x))) == decode(x) for every frame type;
 *  - a hello is accepted only if its MAC really is the key's MAC over it;
 *  - refusal texts come out printable and NUL-terminated;
 *  - a sane ABORT header never announces more than COH_ABORT_MAX_LEN.
 * The same function replays the checked-in corpus in a normal ctest run.
 */
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "transport/tcp/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The identity the fuzzed "acceptor" has (gen_tcp_wire.c builds its seeds
 * against the same values). */
#define FZ_TOKEN "fuzz-token"
#define FZ_JOB "fuzz-job"

static uint8_t key[COH_HS_KEY];
static coh_hs_ident me;
static uint8_t nonce_a[COH_HS_NONCE];

static void must(int cond)
{
    if (!cond)
        abort();
}

static void init(void)
{
    static int done;
    if (done)
        return;
    must(sodium_init() >= 0);
    coh_hs_key(key, FZ_TOKEN);
    memset(&me, 0, sizeof me);
    memcpy(me.job, FZ_JOB, sizeof FZ_JOB);
    me.gen = 3;
    me.group = 7;
    me.rank = 2;
    me.size = 4;
    for (int i = 0; i < COH_HS_NONCE; i++)
        nonce_a[i] = (uint8_t)(0xa0 + i);
    done = 1;
}

static void frame(int type, const uint8_t *b, uint32_t bl)
{
    uint8_t out[COH_HS_MAX_FRAME];
    switch (type) {
    case COH_HS_CHALLENGE: {
        uint8_t nonce[COH_HS_NONCE], n2[COH_HS_NONCE];
        int32_t rank, r2;
        must(coh_hs_challenge_get(b, bl, nonce, &rank) == COH_HS_OK);
        size_t l = coh_hs_challenge_put(out, nonce, rank);
        must(l == COH_HS_PREFIX + bl);
        must(coh_hs_challenge_get(out + COH_HS_PREFIX, bl, n2, &r2) == COH_HS_OK);
        must(!memcmp(nonce, n2, sizeof n2) && rank == r2);
        break;
    }
    case COH_HS_HELLO: {
        coh_hs_hello h, h2;
        must(coh_hs_hello_get(b, bl, &h) == COH_HS_OK);
        int v = coh_hs_hello_check(&h, &me, key, nonce_a);
        must(coh_hs_refuse_text(v) != NULL);
        if (v == COH_HS_OK) {
            uint8_t mac[COH_HS_MAC];
            coh_hs_hello_mac(mac, key, nonce_a, &h);
            must(!memcmp(mac, h.mac, sizeof mac));
            must(h.id.rank >= 0 && h.id.rank < me.rank && h.dst == me.rank);
        }
        size_t l = coh_hs_hello_put(out, &h);
        must(l == COH_HS_PREFIX + bl);
        must(coh_hs_hello_get(out + COH_HS_PREFIX, bl, &h2) == COH_HS_OK);
        must(!memcmp(&h, &h2, sizeof h));
        break;
    }
    case COH_HS_WELCOME: {
        uint8_t mac[COH_HS_MAC], want[COH_HS_MAC];
        must(coh_hs_welcome_get(b, bl, mac) == COH_HS_OK);
        coh_hs_ident acc = me;
        acc.rank = 3;
        coh_hs_welcome_mac(want, key, nonce_a, nonce_a, &acc, me.rank);
        /* The connector's comparison (constant time) must not crash. */
        volatile int same = sodium_memcmp(mac, want, sizeof mac) == 0;
        (void)same;
        break;
    }
    case COH_HS_REFUSE: {
        int code;
        char text[64];
        must(coh_hs_refuse_get(b, bl, &code, text, sizeof text) == COH_HS_OK);
        size_t l = strlen(text);
        must(l < sizeof text);
        for (size_t i = 0; i < l; i++)
            must(text[i] >= 0x20 && text[i] < 0x7f);
        must(coh_hs_refuse_text(code) != NULL);
        break;
    }
    default:
        abort(); /* prefix_parse accepted an unknown type */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init();
    size_t off = 0;
    while (size - off >= COH_HS_PREFIX) {
        int type = 0;
        uint32_t bl = 0;
        int code = coh_hs_prefix_parse(data + off, size - off, &type, &bl);
        must(coh_hs_refuse_text(code) != NULL);
        if (code != COH_HS_OK)
            break;
        must(bl <= COH_HS_MAX_FRAME - COH_HS_PREFIX);
        if (bl > size - off - COH_HS_PREFIX)
            return 0; /* truncated frame: the acceptor waits, then times out */
        frame(type, data + off + COH_HS_PREFIX, bl);
        off += COH_HS_PREFIX + bl;
    }
    /* Data headers, as a connected peer's stream. */
    coh_hdr exp;
    memset(&exp, 0, sizeof exp);
    exp.magic = COH_HDR_MAGIC;
    exp.kind = COH_MSG_COLL;
    exp.coll = COH_COLL_ALL_REDUCE;
    exp.dtype = COHORT_FLOAT32;
    exp.redop = COHORT_SUM;
    exp.group = me.group;
    exp.gen = me.gen;
    exp.seq = 5;
    exp.count = 256;
    exp.root = -1;
    exp.len = 1024;
    while (size - off >= sizeof(coh_hdr)) {
        coh_hdr h;
        memcpy(&h, data + off, sizeof h);
        off += sizeof h;
        const char *why = coh_hdr_sanity(&h, 1, me.size);
        if (why)
            break; /* the receiver fails the connection on the first bad header */
        if (h.kind == COH_MSG_ABORT)
            must(h.len <= COH_ABORT_MAX_LEN);
        if (h.kind == COH_MSG_BYE)
            must(h.len == 0);
        if (h.kind == COH_MSG_COLL || h.kind == COH_MSG_P2P) {
            int f = coh_hdr_match(&exp, &h);
            must(f >= COH_FIELD_NONE && f <= COH_FIELD_STEP);
            /* Agreement means every compared field is equal, so a payload
             * of exactly the posted size is what gets read. */
            if (f == COH_FIELD_NONE)
                must(h.group == exp.group && h.gen == exp.gen && h.seq == exp.seq &&
                     h.coll == exp.coll && h.dtype == exp.dtype && h.count == exp.count &&
                     h.redop == exp.redop && h.root == exp.root && h.tag == exp.tag &&
                     h.step == exp.step && h.len == exp.len);
        }
        if (h.len > size - off)
            break;
        off += (size_t)h.len;
    }
    return 0;
}

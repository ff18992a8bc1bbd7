/* wire.c - handshake frames, MACs and header sanity (pure, fuzzed). */
#include "transport/tcp/wire.h"
#include "util/auth.h"
#include "util/bytes.h"

#include <string.h>

_Static_assert(COH_HS_NONCE == COH_AUTH_NONCE && COH_HS_MAC == COH_AUTH_MAC &&
                   COH_HS_KEY == COH_AUTH_KEY,
               "the tcp handshake uses util/auth.h's sizes");

static const char *const refuse_text[COH_HS_REFUSE_COUNT] = {
    [COH_HS_OK] = "ok",
    [COH_HS_BAD_MAGIC] = "not a cohort handshake (bad magic)",
    [COH_HS_BAD_VERSION] = "unsupported handshake version",
    [COH_HS_BAD_ENDIAN] = "peer has a different byte order",
    [COH_HS_BAD_FRAME] = "malformed handshake frame (type or length)",
    [COH_HS_WRONG_JOB] = "wrong job id",
    [COH_HS_BAD_MAC] = "wrong token (MAC mismatch)",
    [COH_HS_OLD_GEN] = "stale generation (older than ours)",
    [COH_HS_NEW_GEN] = "newer generation than ours",
    [COH_HS_WRONG_GROUP] = "wrong group id",
    [COH_HS_BAD_RANK] = "rank out of range or wrong connection direction",
    [COH_HS_WRONG_SIZE] = "group size differs",
    [COH_HS_WRONG_TARGET] = "hello addressed to another rank",
    [COH_HS_DUPLICATE] = "rank already connected (duplicate)",
    [COH_HS_TIMEOUT] = "handshake timed out",
    [COH_HS_BUSY] = "too many handshakes in progress",
};

const char *coh_hs_refuse_text(int code)
{
    if (code >= 0 && code < COH_HS_REFUSE_COUNT && refuse_text[code])
        return refuse_text[code];
    return "unknown refusal code";
}

/* Little-endian throughout (util/bytes.h): the handshake is byte-order
 * independent so a peer with the other byte order can be told so instead of
 * misparsed. */

void coh_hs_key(uint8_t key[COH_HS_KEY], const char *token)
{
    coh_auth_derive(key, token ? token : "", "cohort tcp handshake key v1");
}

void coh_hs_prefix_put(uint8_t *out, int type, uint32_t body_len)
{
    coh_put_u32(out, COH_HS_MAGIC);
    coh_put_u16(out + 4, COH_HS_VERSION);
    coh_put_u16(out + 6, (uint16_t)type);
    /* Host order on purpose: the only field that reveals the sender's byte order. */
    uint32_t e = COH_HS_ENDIAN;
    memcpy(out + 8, &e, 4);
    coh_put_u32(out + 12, body_len);
}

/* Fixed body sizes per type: a length field can never make the acceptor
 * allocate or wait for more than COH_HS_MAX_FRAME bytes. */
static uint32_t body_len_of(int type)
{
    switch (type) {
    case COH_HS_CHALLENGE:
        return COH_HS_CHALLENGE_LEN;
    case COH_HS_HELLO:
        return COH_HS_HELLO_LEN;
    case COH_HS_WELCOME:
        return COH_HS_WELCOME_LEN;
    case COH_HS_REFUSE:
        return COH_HS_REFUSE_LEN;
    default:
        return 0;
    }
}

/* Checks in the order a confused peer is best told about: not cohort at
 * all, another protocol version, another byte order, a malformed frame. */
int coh_hs_prefix_parse(const uint8_t *b, size_t n, int *type, uint32_t *body_len)
{
    if (n < COH_HS_PREFIX)
        return COH_HS_BAD_FRAME;
    if (coh_get_u32(b) != COH_HS_MAGIC)
        return COH_HS_BAD_MAGIC;
    if (coh_get_u16(b + 4) != COH_HS_VERSION)
        return COH_HS_BAD_VERSION;
    uint32_t e;
    memcpy(&e, b + 8, 4);
    if (e != COH_HS_ENDIAN)
        return COH_HS_BAD_ENDIAN;
    int t = coh_get_u16(b + 6);
    uint32_t len = coh_get_u32(b + 12);
    if (body_len_of(t) == 0 || len != body_len_of(t))
        return COH_HS_BAD_FRAME;
    *type = t;
    *body_len = len;
    return COH_HS_OK;
}

size_t coh_hs_challenge_put(uint8_t *out, const uint8_t nonce[COH_HS_NONCE], int32_t rank)
{
    coh_hs_prefix_put(out, COH_HS_CHALLENGE, COH_HS_CHALLENGE_LEN);
    uint8_t *b = out + COH_HS_PREFIX;
    memcpy(b, nonce, COH_HS_NONCE);
    coh_put_u32(b + 32, (uint32_t)rank);
    coh_put_u32(b + 36, 0);
    return COH_HS_PREFIX + COH_HS_CHALLENGE_LEN;
}

int coh_hs_challenge_get(const uint8_t *body, size_t n, uint8_t nonce[COH_HS_NONCE],
                         int32_t *rank)
{
    if (n != COH_HS_CHALLENGE_LEN)
        return COH_HS_BAD_FRAME;
    memcpy(nonce, body, COH_HS_NONCE);
    *rank = (int32_t)coh_get_u32(body + 32);
    return COH_HS_OK;
}

/* The hello body without its MAC: also the MAC's input after the nonce. */
#define HELLO_SIGNED (COH_HS_HELLO_LEN - COH_HS_MAC)

/* The signed part of a hello is its canonical encoding (reserved field
 * zeroed), so a MAC never depends on bytes the decoder ignores. */
static void hello_fields(uint8_t *b, const coh_hs_hello *h)
{
    memcpy(b, h->id.job, COH_HS_JOB);
    coh_put_u32(b + 64, h->id.gen);
    coh_put_u32(b + 68, h->id.group);
    coh_put_u32(b + 72, (uint32_t)h->id.rank);
    coh_put_u32(b + 76, (uint32_t)h->id.size);
    coh_put_u32(b + 80, (uint32_t)h->dst);
    coh_put_u32(b + 84, 0);
    memcpy(b + 88, h->nonce, COH_HS_NONCE);
}

size_t coh_hs_hello_put(uint8_t *out, const coh_hs_hello *h)
{
    coh_hs_prefix_put(out, COH_HS_HELLO, COH_HS_HELLO_LEN);
    uint8_t *b = out + COH_HS_PREFIX;
    hello_fields(b, h);
    memcpy(b + HELLO_SIGNED, h->mac, COH_HS_MAC);
    return COH_HS_PREFIX + COH_HS_HELLO_LEN;
}

int coh_hs_hello_get(const uint8_t *body, size_t n, coh_hs_hello *h)
{
    if (n != COH_HS_HELLO_LEN)
        return COH_HS_BAD_FRAME;
    memcpy(h->id.job, body, COH_HS_JOB);
    h->id.gen = coh_get_u32(body + 64);
    h->id.group = coh_get_u32(body + 68);
    h->id.rank = (int32_t)coh_get_u32(body + 72);
    h->id.size = (int32_t)coh_get_u32(body + 76);
    h->dst = (int32_t)coh_get_u32(body + 80);
    memcpy(h->nonce, body + 88, COH_HS_NONCE);
    memcpy(h->mac, body + HELLO_SIGNED, COH_HS_MAC);
    return COH_HS_OK;
}

size_t coh_hs_welcome_put(uint8_t *out, const uint8_t mac[COH_HS_MAC])
{
    coh_hs_prefix_put(out, COH_HS_WELCOME, COH_HS_WELCOME_LEN);
    memcpy(out + COH_HS_PREFIX, mac, COH_HS_MAC);
    return COH_HS_PREFIX + COH_HS_WELCOME_LEN;
}

int coh_hs_welcome_get(const uint8_t *body, size_t n, uint8_t mac[COH_HS_MAC])
{
    if (n != COH_HS_WELCOME_LEN)
        return COH_HS_BAD_FRAME;
    memcpy(mac, body, COH_HS_MAC);
    return COH_HS_OK;
}

size_t coh_hs_refuse_put(uint8_t *out, int code, const char *text)
{
    coh_hs_prefix_put(out, COH_HS_REFUSE, COH_HS_REFUSE_LEN);
    uint8_t *b = out + COH_HS_PREFIX;
    memset(b, 0, COH_HS_REFUSE_LEN);
    coh_put_u32(b, (uint32_t)code);
    if (text) {
        size_t l = strlen(text);
        memcpy(b + 8, text, l < 55 ? l : 55);
    }
    return COH_HS_PREFIX + COH_HS_REFUSE_LEN;
}

int coh_hs_refuse_get(const uint8_t *body, size_t n, int *code, char *text, size_t textlen)
{
    if (n != COH_HS_REFUSE_LEN)
        return COH_HS_BAD_FRAME;
    uint32_t c = coh_get_u32(body);
    *code = c > 0x7fffffffu ? -1 : (int)c;
    if (textlen) {
        size_t i = 0;
        /* The text comes from an unauthenticated peer: printable ASCII only. */
        for (; i + 1 < textlen && i < 55 && body[8 + i]; i++) {
            uint8_t ch = body[8 + i];
            text[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
        }
        text[i] = 0;
    }
    return COH_HS_OK;
}

/* Distinct labels (with their NUL) for hello and welcome: a MAC computed
 * for one message can never be replayed as the other. */
void coh_hs_hello_mac(uint8_t mac[COH_HS_MAC], const uint8_t key[COH_HS_KEY],
                      const uint8_t nonce_a[COH_HS_NONCE], const coh_hs_hello *h)
{
    uint8_t f[HELLO_SIGNED];
    hello_fields(f, h);
    coh_auth_mac m;
    coh_auth_begin(&m, key, COH_HS_KEY, "cohort tcp hello v1");
    coh_auth_add(&m, nonce_a, COH_HS_NONCE);
    coh_auth_add(&m, f, sizeof f);
    coh_auth_end(&m, mac);
}

/* Covers both nonces: the acceptor proves the token for this very
 * connection, and the ranks on both ends so a relay to another rank fails. */
void coh_hs_welcome_mac(uint8_t mac[COH_HS_MAC], const uint8_t key[COH_HS_KEY],
                        const uint8_t nonce_c[COH_HS_NONCE], const uint8_t nonce_a[COH_HS_NONCE],
                        const coh_hs_ident *acc, int32_t connector_rank)
{
    coh_auth_mac m;
    coh_auth_begin(&m, key, COH_HS_KEY, "cohort tcp welcome v1");
    coh_auth_add(&m, nonce_c, COH_HS_NONCE);
    coh_auth_add(&m, nonce_a, COH_HS_NONCE);
    coh_auth_add(&m, acc->job, COH_HS_JOB);
    coh_auth_add_u32(&m, acc->gen);
    coh_auth_add_u32(&m, acc->group);
    coh_auth_add_u32(&m, (uint32_t)acc->rank);
    coh_auth_add_u32(&m, (uint32_t)connector_rank);
    coh_auth_end(&m, mac);
}

int coh_hs_hello_check(const coh_hs_hello *h, const coh_hs_ident *me,
                       const uint8_t key[COH_HS_KEY], const uint8_t nonce_a[COH_HS_NONCE])
{
    /* Job, MAC, generation: the decision every handshake makes
     * (util/auth.h); peers of one group share exactly one generation. */
    uint8_t mac[COH_HS_MAC];
    coh_hs_hello_mac(mac, key, nonce_a, h);
    switch (coh_auth_judge(memcmp(h->id.job, me->job, COH_HS_JOB) == 0, mac, h->mac,
                           COH_AUTH_GEN_EXACT, h->id.gen, me->gen)) {
    case COH_AUTH_OK:
        break;
    case COH_AUTH_WRONG_JOB:
        return COH_HS_WRONG_JOB;
    case COH_AUTH_BAD_MAC:
        return COH_HS_BAD_MAC;
    case COH_AUTH_STALE_GEN:
        return COH_HS_OLD_GEN;
    default: /* COH_AUTH_NEWER_GEN (EXACT has no window) */
        return COH_HS_NEW_GEN;
    }
    /* From here the peer provably holds the token: the fields are its own. */
    if (h->id.group != me->group)
        return COH_HS_WRONG_GROUP;
    if (h->id.size != me->size)
        return COH_HS_WRONG_SIZE;
    if (h->id.rank < 0 || h->id.rank >= me->rank)
        return COH_HS_BAD_RANK;
    if (h->dst != me->rank)
        return COH_HS_WRONG_TARGET;
    return COH_HS_OK;
}

/* Only what holds for every message whatever was posted: COLL/P2P sizes are
 * judged against the matched receive or the unexpected-message budget. */
const char *coh_hdr_sanity(const coh_hdr *h, int src, int size)
{
    if (h->magic != COH_HDR_MAGIC)
        return h->magic == __builtin_bswap32(COH_HDR_MAGIC) ? "byte-swapped header magic"
                                                             : "bad header magic";
    if (h->src != src || src < 0 || src >= size)
        return "header names another sender";
    switch (h->kind) {
    case COH_MSG_COLL:
    case COH_MSG_P2P:
        return NULL; /* len is checked against the posted receive or the stash limit */
    case COH_MSG_ABORT:
        return h->len > COH_ABORT_MAX_LEN ? "abort frame too long" : NULL;
    case COH_MSG_BYE:
        return h->len != 0 ? "bye frame with a payload" : NULL;
    default:
        return "unknown message kind";
    }
}

/*
 * wire.h - the tcp transport's wire formats as pure functions (no I/O, no
 * state): handshake frames, their MACs, and the data-header sanity check.
 * The socket code (hs.c, xfer.c) and the fuzz target (tests/fuzz) both go
 * through these, so what is fuzzed is what runs. See docs/wire-protocol.md.
 *
 * Handshake (one per connection, the side with the lower rank connects):
 *   acceptor  -> connector  CHALLENGE  nonce_a, acceptor rank
 *   connector -> acceptor   HELLO      job, generation, group, rank, size,
 *                                      target rank, nonce_c,
 *                                      MAC(key, "hello" || nonce_a || fields)
 *   acceptor  -> connector  WELCOME    MAC(key, "welcome" || nonce_c || nonce_a || ids)
 *                        or REFUSE     code + short text, then close
 * key = HMAC-SHA256(token, "cohort tcp handshake key v1"). Every frame is a
 * 16-byte prefix (magic, version, type, endian mark, body length) and a
 * fixed-size body; handshake integers are little-endian whatever the host.
 */
#ifndef COH_TCP_WIRE_H
#define COH_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define COH_HS_MAGIC 0x53484843u  /* "CHHS" little-endian */
#define COH_HS_VERSION 1
#define COH_HS_ENDIAN 0x01020304u /* written in host order: tells the peer our byte order */
#define COH_HS_PREFIX 16
#define COH_HS_NONCE 32
#define COH_HS_MAC 32
#define COH_HS_KEY 32
#define COH_HS_JOB 64

enum coh_hs_type {
    COH_HS_CHALLENGE = 1,
    COH_HS_HELLO = 2,
    COH_HS_WELCOME = 3,
    COH_HS_REFUSE = 4,
};

/* Body sizes (fixed per type; a frame with another length is refused). */
#define COH_HS_CHALLENGE_LEN 40 /* nonce[32] rank:i32 reserved:u32 */
#define COH_HS_HELLO_LEN 152    /* job[64] gen group rank size dst rsvd nonce[32] mac[32] */
#define COH_HS_WELCOME_LEN 32   /* mac[32] */
#define COH_HS_REFUSE_LEN 64    /* code:u32 reserved:u32 text[56] */
#define COH_HS_MAX_FRAME (COH_HS_PREFIX + COH_HS_HELLO_LEN)

/* Why a handshake was refused: sent in REFUSE frames and logged. Append-only. */
enum coh_hs_refuse {
    COH_HS_OK = 0,
    COH_HS_BAD_MAGIC = 1,     /* not a cohort handshake */
    COH_HS_BAD_VERSION = 2,
    COH_HS_BAD_ENDIAN = 3,    /* peer has the other byte order */
    COH_HS_BAD_FRAME = 4,     /* unexpected type or body length */
    COH_HS_WRONG_JOB = 5,
    COH_HS_BAD_MAC = 6,       /* wrong token */
    COH_HS_OLD_GEN = 7,       /* peer's generation is older than ours */
    COH_HS_NEW_GEN = 8,       /* peer's generation is newer than ours */
    COH_HS_WRONG_GROUP = 9,
    COH_HS_BAD_RANK = 10,     /* out of range, or must be the other side's job to connect */
    COH_HS_WRONG_SIZE = 11,
    COH_HS_WRONG_TARGET = 12, /* the hello was meant for another rank */
    COH_HS_DUPLICATE = 13,    /* that rank is already connected */
    COH_HS_TIMEOUT = 14,      /* handshake not finished in time */
    COH_HS_BUSY = 15,         /* too many handshakes in progress */
    COH_HS_REFUSE_COUNT
};
const char *coh_hs_refuse_text(int code); /* never NULL */

/* Who we are (or claim to be) in a handshake. */
typedef struct coh_hs_ident {
    char job[COH_HS_JOB]; /* NUL-padded */
    uint32_t gen, group;
    int32_t rank, size;
} coh_hs_ident;

typedef struct coh_hs_hello {
    coh_hs_ident id;
    int32_t dst; /* the rank the connector meant to reach */
    uint8_t nonce[COH_HS_NONCE];
    uint8_t mac[COH_HS_MAC];
} coh_hs_hello;

/* Derives the handshake key from the job token (HMAC-SHA256 with the token
 * as key over a fixed label: the token itself never goes on the wire). */
void coh_hs_key(uint8_t key[COH_HS_KEY], const char *token);

/* Frame prefix. coh_hs_prefix_parse returns COH_HS_OK and the type and body
 * length, or a refuse code (bad magic / version / endianness / unknown type /
 * body length that does not match the type). n must be >= COH_HS_PREFIX. */
void coh_hs_prefix_put(uint8_t *out, int type, uint32_t body_len);
int coh_hs_prefix_parse(const uint8_t *b, size_t n, int *type, uint32_t *body_len);

/* Whole frames: each writes COH_HS_PREFIX + body bytes and returns that size. */
size_t coh_hs_challenge_put(uint8_t *out, const uint8_t nonce[COH_HS_NONCE], int32_t rank);
size_t coh_hs_hello_put(uint8_t *out, const coh_hs_hello *h);
size_t coh_hs_welcome_put(uint8_t *out, const uint8_t mac[COH_HS_MAC]);
size_t coh_hs_refuse_put(uint8_t *out, int code, const char *text);

/* Bodies (after a prefix that parsed OK with the matching type). Return
 * COH_HS_OK or COH_HS_BAD_FRAME when n is wrong. */
int coh_hs_challenge_get(const uint8_t *body, size_t n, uint8_t nonce[COH_HS_NONCE],
                         int32_t *rank);
int coh_hs_hello_get(const uint8_t *body, size_t n, coh_hs_hello *h);
int coh_hs_welcome_get(const uint8_t *body, size_t n, uint8_t mac[COH_HS_MAC]);
/* text gets at most 55 printable characters (others replaced by '?'). */
int coh_hs_refuse_get(const uint8_t *body, size_t n, int *code, char *text, size_t textlen);

/* MACs. */
void coh_hs_hello_mac(uint8_t mac[COH_HS_MAC], const uint8_t key[COH_HS_KEY],
                      const uint8_t nonce_a[COH_HS_NONCE], const coh_hs_hello *h);
void coh_hs_welcome_mac(uint8_t mac[COH_HS_MAC], const uint8_t key[COH_HS_KEY],
                        const uint8_t nonce_c[COH_HS_NONCE], const uint8_t nonce_a[COH_HS_NONCE],
                        const coh_hs_ident *acceptor, int32_t connector_rank);

/* The acceptor's verdict on a hello: job, MAC (constant time), generation,
 * group, size, rank range and direction (only lower ranks connect to me),
 * target. Duplicates are the caller's business. Returns a refuse code. */
int coh_hs_hello_check(const coh_hs_hello *h, const coh_hs_ident *me,
                       const uint8_t key[COH_HS_KEY], const uint8_t nonce_a[COH_HS_NONCE]);

/* Data headers: sanity of a header received from `src` (magic, kind, src,
 * payload length limits). Returns NULL if sane, else why not. It does not
 * compare the contract (coh_hdr_match does, once matched). */
#define COH_ABORT_MAX_LEN 1024 /* an ABORT frame's reason text */
const char *coh_hdr_sanity(const coh_hdr *h, int src, int size);

#endif

/*
 * auth.h - the one authentication every cohort handshake runs: the store's
 * (src/store: HELLO nonce -> AUTH), the tcp transport's (src/transport/tcp:
 * CHALLENGE -> HELLO -> WELCOME) and the shm segment hand-over
 * (src/transport/shm: M1 -> M2 -> M3 over a unix socket).
 *
 * Each is a challenge-response over fresh nonces: the side that accepts
 * sends a nonce; the side that connects answers with its identity (job,
 * generation, ...) and HMAC-SHA256 keyed by the job token (or a key derived
 * from it) over a label, the nonce and that identity; the acceptor
 * recomputes the MAC and decides, in
 * one order for all three:
 *   1. job      - the job id is not secret: "wrong job" is the useful line;
 *   2. MAC      - constant-time; after it the claimed fields are the peer's;
 *   3. generation - by the caller's policy (exact, or the store's window).
 * What stays per protocol is the framing (the store's versioned frames, the
 * tcp prefix with its byte-order mark, the shm structs with the descriptor
 * attached) and the fields after the generation (group, rank, size, ...).
 *
 * The token never goes on the wire; nonces are fresh per connection, so a
 * recorded answer does not verify on another connection (no replay), and
 * distinct labels keep a MAC of one message from verifying as another.
 */
#ifndef COH_UTIL_AUTH_H
#define COH_UTIL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#include "cohort_status.h"

#define COH_AUTH_NONCE 32 /* bytes of a challenge nonce */
#define COH_AUTH_MAC 32   /* HMAC-SHA256 */
#define COH_AUTH_KEY 32   /* a derived key (coh_auth_derive) */

/* Fresh random bytes for a challenge or an answer (getrandom). COHORT_OK,
 * or COHORT_ERR_SYSTEM with the error detail set. */
cohort_status coh_auth_nonce(uint8_t nonce[COH_AUTH_NONCE]);

/* A MAC being built: HMAC-SHA256 keyed by the token (any length) or a key
 * derived from it, over a label and then fields in a fixed order. */
typedef struct coh_auth_mac {
    crypto_auth_hmacsha256_state st;
} coh_auth_mac;

/* label: NULL for none, else hashed with its terminating NUL (so no label
 * is a prefix of another). A NULL key is the empty key. */
void coh_auth_begin(coh_auth_mac *m, const void *key, size_t keylen, const char *label);
void coh_auth_add(coh_auth_mac *m, const void *p, size_t n);
void coh_auth_add_u32(coh_auth_mac *m, uint32_t v); /* little-endian */
/* Writes the MAC and wipes the state (it held the key). */
void coh_auth_end(coh_auth_mac *m, uint8_t mac[COH_AUTH_MAC]);

/* key = HMAC(token, label): a uniform key that does not reveal the token. */
void coh_auth_derive(uint8_t key[COH_AUTH_KEY], const char *token, const char *label);

/* Constant-time comparison of two MACs: 1 equal, 0 not. */
int coh_auth_equal(const uint8_t a[COH_AUTH_MAC], const uint8_t b[COH_AUTH_MAC]);

/* How the claimed generation is judged against ours. */
typedef enum coh_auth_gen_policy {
    /* Peers of one group: the generation must be ours (tcp, shm). */
    COH_AUTH_GEN_EXACT = 0,
    /* The store: 0 (tools) is always accepted; a job without a generation
     * yet (ours == 0) takes any; older is stale; newer moves the job, at
     * most COH_AUTH_GEN_MAX_STEP ahead (one careless or hostile token holder
     * must not make every later restart stale). */
    COH_AUTH_GEN_STORE = 1,
} coh_auth_gen_policy;

#define COH_AUTH_GEN_MAX_STEP 64

/* Why a handshake was refused. */
typedef enum coh_auth_verdict {
    COH_AUTH_OK = 0,
    COH_AUTH_WRONG_JOB,   /* another (or unknown) job */
    COH_AUTH_BAD_MAC,     /* the peer does not hold the token (or a field differs) */
    COH_AUTH_STALE_GEN,   /* older than ours */
    COH_AUTH_NEWER_GEN,   /* newer than ours (EXACT only) */
    COH_AUTH_GEN_SKIP,    /* more than COH_AUTH_GEN_MAX_STEP ahead (STORE only) */
    COH_AUTH_VERDICTS
} coh_auth_verdict;

/* The generation rule alone (for a peer whose MAC already verified). */
coh_auth_verdict coh_auth_judge_gen(coh_auth_gen_policy pol, uint32_t claimed, uint32_t ours);

/* The whole decision, in the order above: job_ok is the caller's job
 * comparison (a lookup, or equal ids); want is the MAC the caller computed
 * over what the peer claims, got the one it sent. */
coh_auth_verdict coh_auth_judge(int job_ok, const uint8_t want[COH_AUTH_MAC],
                                const uint8_t got[COH_AUTH_MAC], coh_auth_gen_policy pol,
                                uint32_t claimed_gen, uint32_t our_gen);

/* Every refusal is COHORT_ERR_AUTH to the peer that was refused. */
cohort_status coh_auth_status(coh_auth_verdict v);
const char *coh_auth_verdict_name(coh_auth_verdict v); /* "stale generation", never NULL */

#endif

/* auth.c - the handshakes' shared MACs and decisions (see auth.h). Pure
 * apart from coh_auth_nonce: no I/O, no state. */
#include "util/auth.h"

#include <string.h>

#include "util/bytes.h"
#include "util/util.h"

cohort_status coh_auth_nonce(uint8_t nonce[COH_AUTH_NONCE])
{
    return coh_random(nonce, COH_AUTH_NONCE);
}

void coh_auth_begin(coh_auth_mac *m, const void *key, size_t keylen, const char *label)
{
    /* The init form takes a key of any length: tokens are arbitrary strings. */
    crypto_auth_hmacsha256_init(&m->st, key ? key : (const void *)"", key ? keylen : 0);
    if (label)
        crypto_auth_hmacsha256_update(&m->st, (const unsigned char *)label, strlen(label) + 1);
}

void coh_auth_add(coh_auth_mac *m, const void *p, size_t n)
{
    crypto_auth_hmacsha256_update(&m->st, p, n);
}

void coh_auth_add_u32(coh_auth_mac *m, uint32_t v)
{
    uint8_t b[4];
    coh_put_u32(b, v);
    crypto_auth_hmacsha256_update(&m->st, b, sizeof b);
}

void coh_auth_end(coh_auth_mac *m, uint8_t mac[COH_AUTH_MAC])
{
    crypto_auth_hmacsha256_final(&m->st, mac);
    sodium_memzero(m, sizeof *m);
}

/* HMAC with the token as key is a standard extract step: the token may be
 * any length or alphabet, the result is a uniform key, and a leaked key
 * does not reveal the token (which other handshakes also accept). The
 * label is the whole message here, so it goes without its NUL. */
void coh_auth_derive(uint8_t key[COH_AUTH_KEY], const char *token, const char *label)
{
    coh_auth_mac m;
    coh_auth_begin(&m, token, token ? strlen(token) : 0, NULL);
    coh_auth_add(&m, label, strlen(label));
    coh_auth_end(&m, key);
}

int coh_auth_equal(const uint8_t a[COH_AUTH_MAC], const uint8_t b[COH_AUTH_MAC])
{
    return sodium_memcmp(a, b, COH_AUTH_MAC) == 0;
}

coh_auth_verdict coh_auth_judge_gen(coh_auth_gen_policy pol, uint32_t claimed, uint32_t ours)
{
    if (pol == COH_AUTH_GEN_EXACT) {
        if (claimed < ours)
            return COH_AUTH_STALE_GEN;
        return claimed > ours ? COH_AUTH_NEWER_GEN : COH_AUTH_OK;
    }
    /* COH_AUTH_GEN_STORE: 0 is a tool's connection, outside generations. */
    if (claimed == 0)
        return COH_AUTH_OK;
    if (claimed < ours)
        return COH_AUTH_STALE_GEN;
    if (ours && (uint64_t)claimed > (uint64_t)ours + COH_AUTH_GEN_MAX_STEP)
        return COH_AUTH_GEN_SKIP;
    return COH_AUTH_OK;
}

/* Job first (not secret, the clearer message), then the MAC: only after it
 * verified are the claimed fields, the generation among them, the peer's. */
coh_auth_verdict coh_auth_judge(int job_ok, const uint8_t want[COH_AUTH_MAC],
                                const uint8_t got[COH_AUTH_MAC], coh_auth_gen_policy pol,
                                uint32_t claimed_gen, uint32_t our_gen)
{
    if (!job_ok)
        return COH_AUTH_WRONG_JOB;
    if (!coh_auth_equal(want, got))
        return COH_AUTH_BAD_MAC;
    return coh_auth_judge_gen(pol, claimed_gen, our_gen);
}

cohort_status coh_auth_status(coh_auth_verdict v)
{
    return v == COH_AUTH_OK ? COHORT_OK : COHORT_ERR_AUTH;
}

const char *coh_auth_verdict_name(coh_auth_verdict v)
{
    static const char *const names[COH_AUTH_VERDICTS] = {
        [COH_AUTH_OK] = "ok",
        [COH_AUTH_WRONG_JOB] = "wrong job",
        [COH_AUTH_BAD_MAC] = "wrong token (MAC mismatch)",
        [COH_AUTH_STALE_GEN] = "stale generation",
        [COH_AUTH_NEWER_GEN] = "newer generation",
        [COH_AUTH_GEN_SKIP] = "generation skips ahead",
    };
    if ((unsigned)v < COH_AUTH_VERDICTS && names[v])
        return names[v];
    return "unknown verdict";
}

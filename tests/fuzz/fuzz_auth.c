/*
 * fuzz_auth.c - libFuzzer target for the handshakes' shared decision
 * (src/util/auth.c): every handshake feeds it what a peer sent (a claimed
 * generation, a MAC) next to what it computed itself.
 *
 * Input: [policy][job_ok][claimed gen u32][our gen u32][mac 32][token...].
 * Properties: OK only if the job matched, the sent MAC equals the one the
 * honest side computes over the claimed generation and the generation rule
 * holds; a flipped MAC byte is BAD_MAC unless the job was wrong first; the
 * exact policy accepts one generation only; the store's window is ours ..
 * ours + 64 (0 always, anything when ours is 0); nothing crashes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/auth.h"
#include "util/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 + 8 + 32 || size > 4096)
        return 0;
    coh_auth_gen_policy pol = (data[0] & 1) ? COH_AUTH_GEN_STORE : COH_AUTH_GEN_EXACT;
    int job_ok = data[1] & 1;
    uint32_t claimed = coh_get_u32(data + 2), ours = coh_get_u32(data + 6);
    const uint8_t *sent = data + 10;
    const uint8_t *token = data + 42;
    size_t tl = size - 42;
    /* The honest side's MAC over what the peer claims. */
    uint8_t want[COH_AUTH_MAC];
    coh_auth_mac m;
    coh_auth_begin(&m, token, tl, "fuzz");
    coh_auth_add_u32(&m, claimed);
    coh_auth_end(&m, want);

    coh_auth_verdict g = coh_auth_judge_gen(pol, claimed, ours);
    if (pol == COH_AUTH_GEN_EXACT)
        must((g == COH_AUTH_OK) == (claimed == ours));
    else
        must((g == COH_AUTH_OK) ==
             (claimed == 0 || (claimed >= ours && (ours == 0 || (uint64_t)claimed <=
                                                                     (uint64_t)ours +
                                                                         COH_AUTH_GEN_MAX_STEP))));
    must(g != COH_AUTH_WRONG_JOB && g != COH_AUTH_BAD_MAC);

    /* What the peer sent. */
    coh_auth_verdict v = coh_auth_judge(job_ok, want, sent, pol, claimed, ours);
    int same = memcmp(want, sent, COH_AUTH_MAC) == 0;
    must((v == COH_AUTH_OK) == (job_ok && same && g == COH_AUTH_OK));
    if (!job_ok)
        must(v == COH_AUTH_WRONG_JOB);
    else if (!same)
        must(v == COH_AUTH_BAD_MAC);
    else
        must(v == g);
    must(coh_auth_status(v) == (v == COH_AUTH_OK ? COHORT_OK : COHORT_ERR_AUTH));
    must(coh_auth_verdict_name(v) != NULL);

    /* The honest answer verifies; one flipped bit of it never does. */
    must(coh_auth_judge(1, want, want, pol, claimed, ours) == g);
    uint8_t bad[COH_AUTH_MAC];
    memcpy(bad, want, sizeof bad);
    bad[data[1] % COH_AUTH_MAC] ^= (uint8_t)(1u << (data[0] >> 5));
    must(coh_auth_judge(1, want, bad, pol, claimed, ours) == COH_AUTH_BAD_MAC);
    return 0;
}

/*
 * fuzz_rdv_record.c - libFuzzer target for the rendezvous record parser
 * (src/group/record.c): what every rank reads back from the store under
 * rank/<r>, written by any process that holds the job's token.
 *
 * Properties beyond "no crash, no out-of-bounds access": on success the
 * numbers are in range, the three text fields are non-empty, within their
 * bounds and free of spaces and control bytes, the cpu set is empty or a
 * canonical list whose count and highest cpu are the bits it sets, the
 * settings are empty or key=value pairs the field's checker accepts, and
 * formatting the record
 * and parsing it again gives the same record. On failure a reason is given.
 * The checked-in corpus replays in every normal ctest run (replay_main.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "group/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

static void text_ok(const char *f, size_t max)
{
    size_t n = strlen(f);
    must(n >= 1 && n <= max);
    for (size_t i = 0; i < n; i++)
        must((unsigned char)f[i] > ' ' && (unsigned char)f[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    coh_rdv_record r, b;
    char why[128] = "";
    /* the settings' checker alone on the raw bytes (the parser hands it a
     * token without separators; here it sees anything) */
    if (size <= COH_RDV_CFG_MAX && coh_rdv_cfg_check((const char *)data, size, why,
                                                     sizeof why) != 0)
        must(why[0] != 0);
    why[0] = 0;
    if (coh_rdv_record_parse((const char *)data, size, &r, why, sizeof why) != 0) {
        must(why[0] != 0);
        return 0;
    }
    must(r.size >= 1 && r.pid >= 1 && r.cpus >= 0 && r.cpus <= COH_RDV_CPUS_MAX);
    text_ok(r.addr, COH_RDV_ADDR_MAX);
    text_ok(r.id, COH_RDV_ID_MAX);
    text_ok(r.name, COH_RDV_NAME_MAX);
    /* the cpu set: "" or a canonical list within bounds, whose count and
     * top the parser gave */
    size_t cl = strnlen(r.cpuset, sizeof r.cpuset);
    must(cl < sizeof r.cpuset);
    if (cl) {
        long cnt = -1, top = -1;
        char w[64];
        must(coh_cpulist_check(r.cpuset, cl, &cnt, &top, w, sizeof w) == 0);
        must(cnt == r.cpuset_n && top == r.cpuset_top);
        must(cnt >= 1 && cnt <= top + 1 && top < COH_RDV_CPUS_MAX);
        /* the bits it sets are cnt of them, the highest top */
        uint64_t *bits = calloc((size_t)top / 64 + 1, sizeof *bits);
        must(bits != NULL);
        coh_cpulist_or(r.cpuset, bits);
        long pc = 0;
        for (size_t w2 = 0; w2 <= (size_t)top / 64; w2++)
            pc += __builtin_popcountll(bits[w2]);
        must(pc == cnt && (bits[top / 64] >> (top % 64)) == 1);
        free(bits);
    } else {
        must(r.cpuset_n == 0 && r.cpuset_top == 0);
    }
    /* the settings: "" or a field coh_rdv_cfg_check accepts, whose keys
     * read back with values within their bound */
    size_t fl = strnlen(r.cfg, sizeof r.cfg);
    must(fl < sizeof r.cfg);
    if (fl) {
        char w[128], v[COH_RDV_CFG_VAL_MAX + 8];
        must(coh_rdv_cfg_check(r.cfg, fl, w, sizeof w) == 0);
        static const char *const probe[] = {"transport", "contract", "debug", "chunk", "oversub",
                                            "bar_scatter", "algo.all_reduce", "k"};
        for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++)
            if (coh_rdv_cfg_get(r.cfg, probe[i], v, sizeof v))
                must(strlen(v) <= COH_RDV_CFG_VAL_MAX);
    }
    char buf[COH_RDV_RECORD_MAX + 1];
    int n = coh_rdv_record_format(buf, sizeof buf, &r);
    must(n > 0);
    must(coh_rdv_record_parse(buf, (size_t)n, &b, why, sizeof why) == 0);
    must(!memcmp(&r, &b, sizeof r));
    return 0;
}

/*
 * fuzz_rdv_record.c - libFuzzer target for the rendezvous record parser
 * (src/group/record.c): what every rank reads back from the store under
 * rank/<r>, written by any process that holds the job's token.
 *
 * Properties beyond "no crash, no out-of-bounds access": on success the
 * numbers are in range, the three text fields are non-empty, within their
 * bounds and free of spaces and control bytes, and formatting the record
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
    if (coh_rdv_record_parse((const char *)data, size, &r, why, sizeof why) != 0) {
        must(why[0] != 0);
        return 0;
    }
    must(r.size >= 1 && r.pid >= 1 && r.cpus >= 0 && r.cpus <= COH_RDV_CPUS_MAX);
    text_ok(r.addr, COH_RDV_ADDR_MAX);
    text_ok(r.id, COH_RDV_ID_MAX);
    text_ok(r.name, COH_RDV_NAME_MAX);
    char buf[1024];
    int n = coh_rdv_record_format(buf, sizeof buf, &r);
    must(n > 0);
    must(coh_rdv_record_parse(buf, (size_t)n, &b, why, sizeof why) == 0);
    must(!memcmp(&r, &b, sizeof r));
    return 0;
}

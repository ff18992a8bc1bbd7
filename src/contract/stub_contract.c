/* stub_contract.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "contract/contract.h"
#include <stddef.h>

const char * coh_field_name(int f)
{
    (void)f;
    return NULL;
}

cohort_status coh_contract_mismatch(cohort_group *g, const coh_call *call, int peer, const coh_hdr *exp, const coh_hdr *got)
{
    (void)g;
    (void)call;
    (void)peer;
    (void)exp;
    (void)got;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_contract_report(cohort_group *g)
{
    (void)g;
}

void coh_contract_analyze(const coh_hist *hist, int nranks, char *out, size_t outlen)
{
    (void)hist;
    (void)nranks;
    (void)out;
    (void)outlen;
}

const char *coh_coll_name(int coll)
{
    (void)coll;
    return "call";
}

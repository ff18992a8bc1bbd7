/* status.c - the status string tables (append-only, like the enum). */
#include "cohort.h"

static const struct {
    const char *name;
    const char *text;
} status_table[] = {
    [COHORT_OK] = {"COHORT_OK", "success"},
    [COHORT_ERR_INVALID] = {"COHORT_ERR_INVALID", "invalid argument or configuration"},
    [COHORT_ERR_CONTRACT] = {"COHORT_ERR_CONTRACT", "ranks disagree on a collective call"},
    [COHORT_ERR_PEER_LOST] = {"COHORT_ERR_PEER_LOST", "a peer rank died or its connection closed"},
    [COHORT_ERR_TIMEOUT] = {"COHORT_ERR_TIMEOUT", "timed out"},
    [COHORT_ERR_ABORTED] = {"COHORT_ERR_ABORTED", "group aborted by an earlier error"},
    [COHORT_ERR_AUTH] = {"COHORT_ERR_AUTH", "authentication refused (job, token or generation)"},
    [COHORT_ERR_STORE] = {"COHORT_ERR_STORE", "store unreachable or failed"},
    [COHORT_ERR_SYSTEM] = {"COHORT_ERR_SYSTEM", "operating system call failed"},
    [COHORT_ERR_NOMEM] = {"COHORT_ERR_NOMEM", "out of memory"},
    [COHORT_ERR_PROTOCOL] = {"COHORT_ERR_PROTOCOL", "protocol error (bad frame, magic or version)"},
    [COHORT_ERR_NOT_FOUND] = {"COHORT_ERR_NOT_FOUND", "not found"},
    [COHORT_ERR_TOO_LARGE] = {"COHORT_ERR_TOO_LARGE", "over a configured limit"},
    [COHORT_ERR_UNSUPPORTED] = {"COHORT_ERR_UNSUPPORTED", "not supported by this build or setup"},
};

const char *cohort_strerror(cohort_status s)
{
    if ((unsigned)s < sizeof status_table / sizeof status_table[0] && status_table[s].text)
        return status_table[s].text;
    return "unknown status";
}

const char *cohort_status_name(cohort_status s)
{
    if ((unsigned)s < sizeof status_table / sizeof status_table[0] && status_table[s].name)
        return status_table[s].name;
    return "COHORT_ERR_UNKNOWN";
}

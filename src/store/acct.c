/*
 * acct.c - see acct.h.
 */
#include "store/acct.h"

#include <stdio.h>

static int has_room(const coh_budget *b, size_t n)
{
    return n <= b->limit && b->used <= b->limit - n;
}

coh_budget *coh_acct_charge(const coh_acct *a, size_t n)
{
    for (int i = 0; i < COH_ACCT_LEVELS; i++)
        if (a->b[i] && !has_room(a->b[i], n))
            return a->b[i];
    coh_acct_force(a, n);
    return NULL;
}

void coh_acct_force(const coh_acct *a, size_t n)
{
    for (int i = 0; i < COH_ACCT_LEVELS; i++)
        if (a->b[i])
            a->b[i]->used += n;
}

void coh_acct_release(const coh_acct *a, size_t n)
{
    for (int i = 0; i < COH_ACCT_LEVELS; i++)
        if (a->b[i])
            a->b[i]->used -= n;
}

size_t coh_acct_room(const coh_acct *a)
{
    size_t room = (size_t)-1;
    for (int i = 0; i < COH_ACCT_LEVELS; i++)
        if (a->b[i]) {
            size_t r = a->b[i]->used < a->b[i]->limit ? a->b[i]->limit - a->b[i]->used : 0;
            if (r < room)
                room = r;
        }
    return room;
}

void coh_budget_describe(const coh_budget *b, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s memory limit reached (%zu of %s %zu bytes in use)", b->what,
             b->used, b->option, b->limit);
}

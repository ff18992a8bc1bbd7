/*
 * agree.h - the settings every rank of a group must share, compared at
 * the rendezvous (agree.c says which and why).
 */
#ifndef COH_GROUP_AGREE_H
#define COH_GROUP_AGREE_H

#include <stddef.h>

#include "core/group.h"
#include "group/record.h"

/* g's settings as the rendezvous record's eighth field (record.h): its
 * length, or -1 when they do not fit len. */
int coh_agree_format(const cohort_group *g, char *buf, size_t len);

/* Every rank's field (cfg[r]; "" or NULL: a record without one) against
 * rank 0's, or against first_of_host[r]'s (the lowest rank on r's host)
 * for the host keys, in rank order: 0, or -1 with the first difference in
 * msg (the same on every rank). Needs g->size and g->oversub. */
int coh_agree_check(const cohort_group *g, const char *const *cfg, const int *first_of_host,
                    char *msg, size_t len);

#endif

/* errinfo.c - the structured form of a group's first failure
 * (cohort_error_info_get): filled where the message is made (contract
 * mismatch and report, peer loss), copied out in one allocation. */
#include <stdlib.h>
#include <string.h>

#include "core/group.h"

coh_err_detail *coh_err_detail_new(int n)
{
    coh_err_detail *d = coh_calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (n > 0) {
        d->values = coh_calloc((size_t)n, sizeof *d->values);
        d->files = coh_calloc((size_t)n, sizeof *d->files);
        d->lines = coh_calloc((size_t)n, sizeof *d->lines);
        d->culprit = coh_calloc((size_t)n, 1);
        if (!d->values || !d->files || !d->lines || !d->culprit) {
            coh_err_detail_free(d);
            return NULL;
        }
        d->n = n;
    }
    return d;
}

void coh_err_detail_free(coh_err_detail *d)
{
    if (!d)
        return;
    coh_free(d->values);
    coh_free(d->files);
    coh_free(d->lines);
    coh_free(d->culprit);
    coh_free(d);
}

void coh_err_detail_attach(cohort_group *g, coh_err_detail *d, int replace)
{
    if (!g || !d)
        return;
    pthread_mutex_lock(&g->err_mu);
    if (g->err.status == d->status && (replace || !g->detail)) {
        coh_err_detail *old = g->detail;
        g->detail = d;
        d = old;
    }
    pthread_mutex_unlock(&g->err_mu);
    coh_err_detail_free(d);
}

cohort_error_info *cohort_error_info_get(const cohort_group *cg)
{
    cohort_group *g = (cohort_group *)cg; /* the mutex; nothing else changes */
    if (!g)
        return NULL;
    cohort_error_info *info = NULL;
    pthread_mutex_lock(&g->err_mu);
    const coh_err_detail *d = g->detail;
    if (d) {
        /* one block: the struct, the pointer and int arrays, then strings */
        size_t n = (size_t)d->n, strings = 0;
        for (size_t r = 0; r < n; r++)
            strings += strlen(d->values[r]) + 1 + strlen(d->files[r]) + 1;
        strings += strlen(d->kind) + strlen(d->call) + strlen(d->field) + 3;
        size_t size = sizeof *info + 2 * n * sizeof(char *) + 2 * n * sizeof(int) + strings;
        char *block = malloc(size);
        if (block) {
            info = (cohort_error_info *)block;
            const char **values = (const char **)(block + sizeof *info);
            const char **files = values + n;
            int *lines = (int *)(files + n);
            int *culprits = lines + n;
            char *str = (char *)(culprits + n);
#define PUT(dst, src)                                                                              \
    do {                                                                                           \
        size_t l_ = strlen(src) + 1;                                                               \
        memcpy(str, (src), l_);                                                                    \
        (dst) = str;                                                                               \
        str += l_;                                                                                 \
    } while (0)
            info->status = d->status;
            PUT(info->kind, d->kind);
            PUT(info->call, d->call);
            PUT(info->field, d->field);
            info->seq = d->seq;
            info->nranks = d->n;
            info->nculprits = 0;
            for (size_t r = 0; r < n; r++) {
                values[r] = files[r] = NULL;
                if (d->values[r][0])
                    PUT(values[r], d->values[r]);
                if (d->files[r][0])
                    PUT(files[r], d->files[r]);
                lines[r] = d->lines[r];
                if (d->culprit[r])
                    culprits[info->nculprits++] = (int)r;
            }
#undef PUT
            info->values = n ? values : NULL;
            info->files = n ? files : NULL;
            info->lines = n ? lines : NULL;
            info->culprits = info->nculprits ? culprits : NULL;
        }
    }
    pthread_mutex_unlock(&g->err_mu);
    return info;
}

void cohort_error_info_free(cohort_error_info *info)
{
    free(info);
}

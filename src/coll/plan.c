/* plan.c - partition and schedule arithmetic shared by the algorithms.
 * Pure functions: no I/O, no state (tests/coll/test_plan.c covers them). */
#include "coll/coll_int.h"

size_t coh_blk_off(size_t count, int n, int b)
{
    size_t q = count / (size_t)n, rem = count % (size_t)n, ub = (size_t)b;
    return ub * q + (ub < rem ? ub : rem);
}

size_t coh_blk_len(size_t count, int n, int b)
{
    size_t q = count / (size_t)n, rem = count % (size_t)n;
    return q + ((size_t)b < rem ? 1 : 0);
}

/* Pieces are whole elements (a reduction never splits one) and never more
 * than fit the step-number space: a huge message on a tiny chunk setting
 * gets larger pieces rather than wrapping step numbers. */
size_t coh_chunk_elems(size_t chunk_bytes, size_t es, size_t max_len, int rounds)
{
    size_t ce = es ? chunk_bytes / es : 1;
    if (ce == 0)
        ce = 1;
    if (rounds < 1)
        rounds = 1;
    /* Keep rounds * pieces < 2^32 so step numbers never wrap. */
    size_t max_pieces = (size_t)(UINT32_MAX / (uint32_t)rounds);
    if (max_pieces == 0)
        max_pieces = 1;
    if (coh_npieces(max_len, ce) > max_pieces)
        ce = (max_len + max_pieces - 1) / max_pieces;
    return ce;
}

coh_bc_plan coh_tree_bcast_plan(size_t chunk_bytes, int chunk_set, int n, int rdv_forced,
                                size_t bytes)
{
    coh_bc_plan p = {0, 0, rdv_forced};
    if (n == 2 && !rdv_forced && !chunk_set && bytes >= 1 && bytes <= COH_BC_ONE_PIECE_MAX) {
        p.first = p.piece = bytes;
        return p;
    }
    if (n == 2 && !rdv_forced && !chunk_set && bytes > COH_BC_GATE_MIN &&
        bytes <= COH_BC_GATE_MAX) {
        p.first = COH_BC_EAGER_BYTES;
        p.piece = bytes - COH_BC_EAGER_BYTES;
        p.rdv = 1;
        return p;
    }
    p.first = p.piece = coh_chunk_elems(chunk_bytes, 1, bytes, 32);
    return p;
}

size_t coh_bc_plan_pieces(const coh_bc_plan *p, size_t bytes)
{
    if (bytes == 0)
        return 0;
    return bytes <= p->first ? 1 : 1 + coh_npieces(bytes - p->first, p->piece);
}

/* Recursive doubling and halving pair ranks by XOR, which needs a power of
 * two; the fold (below) reduces any n to one. */
int coh_pof2(int n)
{
    int p = 1;
    while (p <= n / 2)
        p <<= 1;
    return p;
}

int coh_fold_vrank(int r, int n)
{
    int extra = n - coh_pof2(n);
    if (r < 2 * extra)
        return (r & 1) ? r / 2 : -1;
    return r - extra;
}

int coh_fold_real(int v, int n)
{
    int extra = n - coh_pof2(n);
    return v < extra ? 2 * v + 1 : v + extra;
}

void coh_rh_window(int v, int p, int round, int *lo, int *hi)
{
    int a = 0, b = p;
    for (int k = 0; k < round; k++) {
        int mid = a + (b - a) / 2;
        /* the half holding block v is kept; the other half goes to the
         * partner v ^ (p >> (k+1)), which holds the mirror position */
        if (v < mid)
            b = mid;
        else
            a = mid;
    }
    *lo = a;
    *hi = b;
}

int coh_ilog2(unsigned v)
{
    int l = 0;
    while (v >>= 1)
        l++;
    return l;
}

int coh_clog2(int n)
{
    int l = 0;
    while ((1 << l) < n)
        l++;
    return l;
}

static int lowbit(int v) { return v & -v; }

int coh_tree_parent(int vr, int n)
{
    (void)n;
    return vr == 0 ? -1 : vr - lowbit(vr);
}

int coh_tree_children(int vr, int n, int *out)
{
    /* children of vr: vr + 2^k for 2^k below vr's lowest set bit (any k
     * for the root) while inside the tree */
    int lim = vr == 0 ? n : lowbit(vr), k = 0;
    for (int m = 1; m < lim && vr + m < n; m <<= 1)
        out[k++] = vr + m;
    return k;
}

int coh_tree_subtree(int vr, int n)
{
    if (vr == 0)
        return n;
    int s = lowbit(vr);
    return vr + s <= n ? s : n - vr;
}

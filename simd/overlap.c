/* The scalar twins of the wide kernels, the single-pair predicates they share, and the run-time
 * dispatch: one kernel table (avx2, baseline or scalar) chosen once per process from the CPU and
 * the BROADPHASE_SIMD environment variable. */
#include "overlap.h"

#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "overlap_wide.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* ---- predicates ------------------------------------------------------------------------------ */

/* Distance from c to [mn, mx] on one axis. The wide kernels select the same three values with
 * the same priority (below min first), so sentinel boxes (min > max) give the same result. */
static inline double simd_axis_gap(double c, double mn, double mx) {
    if (c < mn) return mn - c;
    if (c > mx) return c - mx;
    return 0.0;
}

int simd_pair_box_box(const float amin[3], const float amax[3], const float bmin[3],
                      const float bmax[3], int dims) {
    assert(dims == 2 || dims == 3);
    int ok = 1;
    for (int k = 0; k < dims; k++) ok &= (amin[k] <= bmax[k]) & (bmin[k] <= amax[k]);
    return ok;
}

/* The double sums run in axis order with no contraction; the wide kernels repeat them op for op
 * so that both round identically. */
int simd_pair_sphere_sphere(const float ac[3], float ar, const float bc[3], float br, int dims) {
    assert(dims == 2 || dims == 3);
    double dx = (double)ac[0] - (double)bc[0];
    double d2 = dx * dx;
    for (int k = 1; k < dims; k++) {
        double d = (double)ac[k] - (double)bc[k];
        d2 = d2 + d * d;
    }
    double s = (double)ar + (double)br;
    return d2 <= s * s;
}

int simd_pair_box_sphere(const float bmin[3], const float bmax[3], const float c[3], float r,
                         int dims) {
    assert(dims == 2 || dims == 3);
    double g = simd_axis_gap(c[0], bmin[0], bmax[0]);
    double d2 = g * g;
    for (int k = 1; k < dims; k++) {
        double d = simd_axis_gap(c[k], bmin[k], bmax[k]);
        d2 = d2 + d * d;
    }
    return d2 <= (double)r * (double)r;
}

/* ---- scalar twins ---------------------------------------------------------------------------- */

/* dims is a literal at both call sites (as in the wide kernel), so the axis loop unrolls. */
static inline size_t simd_box_scan(const float qmin[3], const float qmax[3],
                                   const simd_boxes *boxes, size_t begin, size_t end, int dims,
                                   uint32_t *hits) {
    const float *mn[3] = {boxes->min[0], boxes->min[1], dims == 3 ? boxes->min[2] : NULL};
    const float *mx[3] = {boxes->max[0], boxes->max[1], dims == 3 ? boxes->max[2] : NULL};
    size_t n = 0;
    /* Branchless: hits has room past the last hit, so store every position and keep the hits. */
    for (size_t i = begin; i < end; i++) {
        int ok = 1;
        for (int k = 0; k < dims; k++) ok &= (qmin[k] <= mx[k][i]) & (mn[k][i] <= qmax[k]);
        hits[n] = (uint32_t)i;
        n += (size_t)ok;
    }
    return n;
}

size_t simd_box_vs_boxes_scalar(const float qmin[3], const float qmax[3], const simd_boxes *boxes,
                                size_t begin, size_t end, int dims, uint32_t *hits) {
    assert(dims == 2 || dims == 3);
    if (dims == 3) return simd_box_scan(qmin, qmax, boxes, begin, end, 3, hits);
    return simd_box_scan(qmin, qmax, boxes, begin, end, 2, hits);
}

/* Many against many, with the wide kernel's row rule: a row starts only with its width +
 * SIMD_PAD free (the scalar loop needs no padding, but both must stop at the same row). */
static inline size_t simd_pairs_scan(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const simd_boxes *b, size_t b_begin, size_t b_end, int within,
                                     int dims, uint32_t *rows, uint32_t *cols, size_t capacity,
                                     size_t *a_next) {
    size_t n = 0, r = a_begin;
    for (; r < a_end; r++) {
        size_t lo = within ? r + 1 : b_begin;
        if (lo >= b_end) continue;
        if (capacity - n < b_end - lo + SIMD_PAD) break;
        float qmin[3] = {a->min[0][r], a->min[1][r], dims == 3 ? a->min[2][r] : 0.0f};
        float qmax[3] = {a->max[0][r], a->max[1][r], dims == 3 ? a->max[2][r] : 0.0f};
        size_t h = simd_box_scan(qmin, qmax, b, lo, b_end, dims, cols + n);
        for (size_t j = 0; j < h; j++) rows[n + j] = (uint32_t)r;
        n += h;
    }
    *a_next = r;
    return n;
}

size_t simd_boxes_vs_boxes_pairs_scalar(const simd_boxes *a, size_t a_begin, size_t a_end,
                                        const simd_boxes *b, size_t b_begin, size_t b_end, int dims,
                                        uint32_t *rows, uint32_t *cols, size_t capacity,
                                        size_t *a_next) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        return simd_pairs_scan(a, a_begin, a_end, b, b_begin, b_end, 0, 3, rows, cols, capacity,
                               a_next);
    return simd_pairs_scan(a, a_begin, a_end, b, b_begin, b_end, 0, 2, rows, cols, capacity,
                           a_next);
}

size_t simd_boxes_pairs_within_scalar(const simd_boxes *boxes, size_t begin, size_t end, int dims,
                                      uint32_t *rows, uint32_t *cols, size_t capacity,
                                      size_t *next) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        return simd_pairs_scan(boxes, begin, end, boxes, begin, end, 1, 3, rows, cols, capacity,
                               next);
    return simd_pairs_scan(boxes, begin, end, boxes, begin, end, 1, 2, rows, cols, capacity, next);
}

/* The sweep, one col at a time: the same rows, floors and stops as the wide kernel, so the same
 * pairs in the same order. */
static inline size_t simd_sweep_scan(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const simd_boxes *b, size_t b_begin, size_t b_end, float reach,
                                     int within, int dims, uint32_t *rows, uint32_t *cols,
                                     size_t capacity, size_t *a_next) {
    const float *bx = b->min[0];
    size_t n = 0, r = a_begin, lo = b_begin;
    for (; r < a_end; r++) {
        size_t from = r + 1;
        if (!within)
            from = lo = simd_sweep_advance(bx, lo, b_end, simd_sweep_floor(a->min[0][r], reach));
        if (from >= b_end) continue;
        if (capacity - n < b_end - from + SIMD_PAD) break;
        float top = a->max[0][r];
        for (size_t j = from; j < b_end && bx[j] <= top; j++) {
            int ok = 1;
            for (int k = 0; k < dims; k++)
                ok &= (a->min[k][r] <= b->max[k][j]) & (b->min[k][j] <= a->max[k][r]);
            rows[n] = (uint32_t)r;
            cols[n] = (uint32_t)j;
            n += (size_t)ok;
        }
    }
    *a_next = r;
    return n;
}

size_t simd_boxes_sweep_pairs_scalar(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const simd_boxes *b, size_t b_begin, size_t b_end, float reach,
                                     int within, int dims, uint32_t *rows, uint32_t *cols,
                                     size_t capacity, size_t *a_next) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        return simd_sweep_scan(a, a_begin, a_end, b, b_begin, b_end, reach, within, 3, rows, cols,
                               capacity, a_next);
    return simd_sweep_scan(a, a_begin, a_end, b, b_begin, b_end, reach, within, 2, rows, cols,
                           capacity, a_next);
}

/* The wide kernel's definition, one entry at a time. */
static inline size_t simd_cross_scan(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const float a_lo[3], const float a_hi[3], const simd_boxes *b,
                                     size_t b_begin, size_t b_end, const float b_lo[3],
                                     const float b_hi[3], int dims, uint32_t *rows,
                                     uint32_t *cols) {
    uint32_t near_b[SIMD_CROSS_MAX + SIMD_PAD];
    size_t nb = simd_box_scan(a_lo, a_hi, b, b_begin, b_end, dims, near_b), n = 0;
    if (nb == 0) return 0;
    for (size_t r = a_begin; r < a_end; r++) {
        float qmin[3] = {a->min[0][r], a->min[1][r], dims == 3 ? a->min[2][r] : 0.0f};
        float qmax[3] = {a->max[0][r], a->max[1][r], dims == 3 ? a->max[2][r] : 0.0f};
        int reach = 1;
        for (int k = 0; k < dims; k++) reach &= (b_lo[k] <= qmax[k]) & (qmin[k] <= b_hi[k]);
        if (!reach) continue;
        for (size_t j = 0; j < nb; j++) {
            size_t i = near_b[j];
            int ok = 1;
            for (int k = 0; k < dims; k++)
                ok &= (qmin[k] <= b->max[k][i]) & (b->min[k][i] <= qmax[k]);
            rows[n] = (uint32_t)r;
            cols[n] = (uint32_t)i;
            n += (size_t)ok;
        }
    }
    return n;
}

size_t simd_boxes_cross_pairs_scalar(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const float a_lo[3], const float a_hi[3], const simd_boxes *b,
                                     size_t b_begin, size_t b_end, const float b_lo[3],
                                     const float b_hi[3], int dims, uint32_t *rows,
                                     uint32_t *cols) {
    assert(dims == 2 || dims == 3);
    assert(a_end - a_begin <= SIMD_CROSS_MAX && b_end - b_begin <= SIMD_CROSS_MAX);
    if (a_end <= a_begin || b_end <= b_begin) return 0;
    if (dims == 3)
        return simd_cross_scan(a, a_begin, a_end, a_lo, a_hi, b, b_begin, b_end, b_lo, b_hi, 3,
                               rows, cols);
    return simd_cross_scan(a, a_begin, a_end, a_lo, a_hi, b, b_begin, b_end, b_lo, b_hi, 2, rows,
                           cols);
}

static inline void simd_blocks_scan(const float *blocks, const uint32_t *pairs, size_t count,
                                    const float (*qmin)[3], const float (*qmax)[3], int dims,
                                    uint8_t *masks) {
    for (size_t e = 0; e < count; e++) {
        const float *b = blocks + (size_t)pairs[2 * e] * 48;
        const float *lo = qmin[pairs[2 * e + 1]], *hi = qmax[pairs[2 * e + 1]];
        unsigned m = 0;
        for (unsigned l = 0; l < 8; l++) {
            int ok = 1;
            for (int k = 0; k < dims; k++)
                ok &= (lo[k] <= b[24 + 8 * k + l]) & (b[8 * k + l] <= hi[k]);
            m |= (unsigned)ok << l;
        }
        masks[e] = (uint8_t)m;
    }
}

void simd_blocks_vs_boxes_scalar(const float *blocks, const uint32_t *pairs, size_t count,
                                 const float (*qmin)[3], const float (*qmax)[3], int dims,
                                 uint8_t *masks) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        simd_blocks_scan(blocks, pairs, count, qmin, qmax, 3, masks);
    else
        simd_blocks_scan(blocks, pairs, count, qmin, qmax, 2, masks);
}

size_t simd_boxes_first_invalid_scalar(const float *const lo[3], const float *const hi[3],
                                       size_t begin, size_t end, int dims) {
    for (size_t i = begin; i < end; i++) {
        int ok = 1;
        for (int k = 0; k < dims; k++)
            ok &= isfinite(lo[k][i]) & isfinite(hi[k][i]) & (lo[k][i] <= hi[k][i]);
        if (!ok) return i;
    }
    return end;
}

void simd_stream_floats_scalar(float *dst, const float *src, size_t count) {
    if (count > 0) memcpy(dst, src, count * sizeof *dst);
}

void simd_stream_fence_scalar(void) {}

size_t simd_spheres_first_invalid_scalar(const float *const c[3], const float *r, size_t begin,
                                         size_t end, int dims) {
    for (size_t i = begin; i < end; i++) {
        int ok = isfinite(r[i]) & (r[i] >= 0.0f);
        for (int k = 0; k < dims; k++) ok &= isfinite(c[k][i]);
        if (!ok) return i;
    }
    return end;
}

/* Lane by lane as the wide kernels keep their accumulators, then reduced in their order. */
void simd_boxes_bounds_scalar(const simd_boxes *boxes, size_t begin, size_t end, float lo[3],
                              float hi[3]) {
    for (int k = 0; k < 3; k++) {
        float l[8], h[8];
        for (int j = 0; j < 8; j++) {
            l[j] = INFINITY;
            h[j] = -INFINITY;
        }
        const float *mn = boxes->min[k], *mx = boxes->max[k];
        size_t i = begin;
        for (; end - i >= 8; i += 8) {
            for (int j = 0; j < 8; j++) {
                l[j] = mn[i + j] < l[j] ? mn[i + j] : l[j];
                h[j] = mx[i + j] > h[j] ? mx[i + j] : h[j];
            }
        }
        for (int w = 4; w >= 1; w /= 2) {
            for (int j = 0; j < w; j++) {
                l[j] = l[j + w] < l[j] ? l[j + w] : l[j];
                h[j] = h[j + w] > h[j] ? h[j + w] : h[j];
            }
        }
        for (; i < end; i++) {
            l[0] = mn[i] < l[0] ? mn[i] : l[0];
            h[0] = mx[i] > h[0] ? mx[i] : h[0];
        }
        lo[k] = l[0];
        hi[k] = h[0];
    }
}

/* Branch-free: every entry is copied to the next free position and kept when it qualifies. */
size_t simd_boxes_select_scalar(const simd_boxes *src, const uint32_t *src_ids, size_t begin,
                                size_t end, int dims, int axis, float plane, int side,
                                float *const dst_min[3], float *const dst_max[3], uint32_t *dst_ids,
                                size_t at) {
    assert(dims == 2 || dims == 3);
    assert(axis >= 0 && axis < dims);
    const float *key = side == 0 ? src->min[axis] : src->max[axis];
    size_t n = 0;
    for (size_t i = begin; i < end; i++) {
        for (int k = 0; k < dims; k++) {
            dst_min[k][at + n] = src->min[k][i];
            dst_max[k][at + n] = src->max[k][i];
        }
        dst_ids[at + n] = src_ids[i];
        n += side == 0 ? key[i] < plane : key[i] > plane;
    }
    return n;
}

/* The filters below write out[n] only when the id passes: out may alias ids and has no spare
 * room past count. */
size_t simd_sphere_vs_spheres_scalar(const float qc[3], float qr, const simd_spheres *spheres,
                                     const uint32_t *ids, size_t count, int dims, uint32_t *out) {
    size_t n = 0;
    for (size_t j = 0; j < count; j++) {
        uint32_t id = ids[j];
        float c[3] = {spheres->c[0][id], spheres->c[1][id], dims == 3 ? spheres->c[2][id] : 0.0f};
        if (simd_pair_sphere_sphere(qc, qr, c, spheres->r[id], dims)) out[n++] = id;
    }
    return n;
}

size_t simd_sphere_vs_boxes_scalar(const float qc[3], float qr, const simd_boxes *boxes,
                                   const uint32_t *ids, size_t count, int dims, uint32_t *out) {
    size_t n = 0;
    for (size_t j = 0; j < count; j++) {
        uint32_t id = ids[j];
        float mn[3] = {boxes->min[0][id], boxes->min[1][id], dims == 3 ? boxes->min[2][id] : 0.0f};
        float mx[3] = {boxes->max[0][id], boxes->max[1][id], dims == 3 ? boxes->max[2][id] : 0.0f};
        if (simd_pair_box_sphere(mn, mx, qc, qr, dims)) out[n++] = id;
    }
    return n;
}

size_t simd_box_vs_spheres_scalar(const float qmin[3], const float qmax[3],
                                  const simd_spheres *spheres, const uint32_t *ids, size_t count,
                                  int dims, uint32_t *out) {
    size_t n = 0;
    for (size_t j = 0; j < count; j++) {
        uint32_t id = ids[j];
        float c[3] = {spheres->c[0][id], spheres->c[1][id], dims == 3 ? spheres->c[2][id] : 0.0f};
        if (simd_pair_box_sphere(qmin, qmax, c, spheres->r[id], dims)) out[n++] = id;
    }
    return n;
}

/* ---- ray-box filter ---------------------------------------------------------------------- */

static int simd_ray_box_keep(const simd_ray *r, const float mn[3], const float mx[3], int dims) {
    float t0 = 0.0f, t1 = r->max_t;
    int ok = 1, force = 0;
    for (int k = 0; k < dims; k++) {
        ok &= mn[k] <= mx[k];
        if (r->flat[k]) {
            ok &= (r->o[k] >= mn[k]) & (r->o[k] <= mx[k]);
            continue;
        }
        float a = (mn[k] - r->o[k]) * r->inv[k], b = (mx[k] - r->o[k]) * r->inv[k];
        float near = a < b ? a : b, far = a < b ? b : a;
        t0 = near > t0 ? near : t0;
        t1 = far < t1 ? far : t1;
        force |= !(fabsf(a) < 1e30f) | !(fabsf(b) < 1e30f);
    }
    float margin = 1e-6f * (fabsf(t0) + fabsf(t1)) + 1e-30f;
    return ok & (force | (t0 <= t1 + margin));
}

size_t simd_ray_vs_boxes_scalar(const simd_ray *ray, const simd_boxes *boxes, size_t begin,
                                size_t end, int dims, uint32_t *hits) {
    size_t n = 0;
    for (size_t i = begin; i < end; i++) {
        float mn[3], mx[3];
        for (int k = 0; k < dims; k++) {
            mn[k] = boxes->min[k][i];
            mx[k] = boxes->max[k][i];
        }
        if (simd_ray_box_keep(ray, mn, mx, dims)) hits[n++] = (uint32_t)i;
    }
    return n;
}

/* ---- point-box distance filter ------------------------------------------------------------ */

size_t simd_point_vs_boxes_scalar(const float p[3], float limit, const simd_boxes *boxes,
                                  size_t begin, size_t end, int dims, uint32_t *hits) {
    size_t n = 0;
    for (size_t i = begin; i < end; i++) {
        float d2 = 0.0f;
        int ok = 1;
        for (int k = 0; k < dims; k++) {
            float mn = boxes->min[k][i], mx = boxes->max[k][i];
            ok &= mn <= mx;
            float a = mn - p[k], b = p[k] - mx;
            float g = a > b ? a : b;
            g = g > 0.0f ? g : 0.0f;
            d2 = d2 + g * g;
        }
        if (ok & ((d2 <= limit) | (d2 == INFINITY))) hits[n++] = (uint32_t)i;
    }
    return n;
}

/* ---- a nearest search's exact ranking ---------------------------------------------------------
 */

/* The first min(kept, k) of h keyed hits by rank (no two share one: the ids differ). */
static size_t rank_scalar(const int32_t *dk, const int32_t *ik, size_t h, size_t kept, size_t k,
                          float *out_d2, uint32_t *out_id) {
    size_t pos[SIMD_RANK_MAX + 1];
    /* Each one's rank, counted against all the others. */
    for (size_t j = 0; j < h; j++) {
        size_t r = 0;
        for (size_t i = 0; i < h; i++) r += (dk[i] < dk[j]) | ((dk[i] == dk[j]) & (ik[i] < ik[j]));
        pos[r < k ? r : k] = j;
    }
    return simd_rank_write(dk, ik, pos, kept, k, out_d2, out_id);
}

size_t simd_point_nearest_rank_scalar(const float p[3], double max_d2, const simd_boxes *boxes,
                                      const uint32_t *at, size_t h, const uint32_t *ids, int dims,
                                      size_t k, float *out_d2, uint32_t *out_id) {
    int32_t dk[SIMD_RANK_MAX], ik[SIMD_RANK_MAX]; /* simd_rank_keys */
    size_t kept = 0;
    if (h > SIMD_RANK_MAX) h = SIMD_RANK_MAX; /* (the contract; keeps the arrays in bounds) */
    for (size_t j = 0; j < h; j++)
        kept += simd_rank_keys(p, max_d2, boxes, at[j], ids[at[j]], dims, &dk[j], &ik[j]);
    return rank_scalar(dk, ik, h, kept, k, out_d2, out_id);
}

size_t simd_point_nearest_runs_scalar(const float p[3], double max_d2, const simd_boxes *boxes,
                                      const uint32_t (*runs)[2], size_t run_count,
                                      const uint32_t *ids, int dims, size_t k, float *out_d2,
                                      uint32_t *out_id) {
    int32_t dk[SIMD_RANK_MAX], ik[SIMD_RANK_MAX];
    size_t kept = 0;
    for (size_t r = 0; r < run_count; r++)
        for (uint32_t j = runs[r][0]; j < runs[r][1]; j++) {
            int32_t d, i;
            if (!simd_rank_keys(p, max_d2, boxes, j, ids[j], dims, &d, &i)) continue;
            if (kept == SIMD_RANK_MAX) return SIZE_MAX;
            dk[kept] = d;
            ik[kept] = i;
            kept++;
        }
    return rank_scalar(dk, ik, kept, kept, k, out_d2, out_id);
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static const simd_kernels simd_scalar_kernels = {"scalar",
                                                 simd_box_vs_boxes_scalar,
                                                 simd_sphere_vs_spheres_scalar,
                                                 simd_sphere_vs_boxes_scalar,
                                                 simd_box_vs_spheres_scalar,
                                                 simd_boxes_vs_boxes_pairs_scalar,
                                                 simd_boxes_pairs_within_scalar,
                                                 simd_boxes_sweep_pairs_scalar,
                                                 simd_ray_vs_boxes_scalar,
                                                 simd_point_vs_boxes_scalar,
                                                 simd_point_nearest_rank_scalar,
                                                 simd_boxes_select_scalar,
                                                 simd_boxes_cross_pairs_scalar,
                                                 simd_blocks_vs_boxes_scalar,
                                                 simd_boxes_bounds_scalar,
                                                 simd_boxes_first_invalid_scalar,
                                                 simd_spheres_first_invalid_scalar,
                                                 simd_stream_floats_scalar,
                                                 simd_stream_fence_scalar,
                                                 simd_cell_keys_scalar,
                                                 simd_point_nearest_runs_scalar};

#if SIMD_HAVE_AVX2
static const simd_kernels simd_avx2_kernels = {"avx2",
                                               simd_box_vs_boxes_avx2,
                                               simd_sphere_vs_spheres_avx2,
                                               simd_sphere_vs_boxes_avx2,
                                               simd_box_vs_spheres_avx2,
                                               simd_boxes_vs_boxes_pairs_avx2,
                                               simd_boxes_pairs_within_avx2,
                                               simd_boxes_sweep_pairs_avx2,
                                               simd_ray_vs_boxes_avx2,
                                               simd_point_vs_boxes_avx2,
                                               simd_point_nearest_rank_avx2,
                                               simd_boxes_select_avx2,
                                               simd_boxes_cross_pairs_avx2,
                                               simd_blocks_vs_boxes_avx2,
                                               simd_boxes_bounds_avx2,
                                               simd_boxes_first_invalid_avx2,
                                               simd_spheres_first_invalid_avx2,
                                               simd_stream_floats_avx2,
                                               simd_stream_fence_avx2,
                                               simd_cell_keys_avx2,
                                               simd_point_nearest_runs_avx2};

static int simd_cpu_runs_avx2(void) {
#if SIMD_FORCE_AVX2
    return 1; /* the user built for AVX2 only and takes responsibility for the CPU */
#elif defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init(); /* harmless if done; needed if we run before the libgcc constructor */
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
#else
    return 0;
#endif
}
#endif

#if SIMD_HAVE_BASELINE
static const simd_kernels simd_baseline_kernels = {
    "baseline", simd_box_vs_boxes_baseline, simd_sphere_vs_spheres_baseline,
    simd_sphere_vs_boxes_baseline, simd_box_vs_spheres_baseline, simd_boxes_vs_boxes_pairs_baseline,
    simd_boxes_pairs_within_baseline, simd_boxes_sweep_pairs_baseline, simd_ray_vs_boxes_baseline,
    simd_point_vs_boxes_baseline, simd_point_nearest_rank_baseline, simd_boxes_select_baseline,
    simd_boxes_cross_pairs_baseline, simd_blocks_vs_boxes_baseline, simd_boxes_bounds_baseline,
    simd_boxes_first_invalid_baseline, simd_spheres_first_invalid_baseline,
    simd_stream_floats_baseline, simd_stream_fence_baseline,
    /* no wide variant: SIMDe's 64-bit lanes
       on SSE2 are emulated */
    simd_cell_keys_scalar, simd_point_nearest_runs_baseline};
#endif

const simd_kernels *simd_kernels_for(const char *level) {
    if (level == NULL) return NULL;
#if SIMD_HAVE_AVX2
    if (strcasecmp(level, "avx2") == 0) return simd_cpu_runs_avx2() ? &simd_avx2_kernels : NULL;
#endif
#if SIMD_HAVE_BASELINE
    if (strcasecmp(level, "baseline") == 0) return &simd_baseline_kernels;
#endif
    if (strcasecmp(level, "scalar") == 0) return &simd_scalar_kernels;
    return NULL;
}

const simd_kernels *simd_kernels_choose(const char *request) {
    const simd_kernels *k = simd_kernels_for(request);
    if (k == NULL) k = simd_kernels_for("avx2");
    if (k == NULL) k = simd_kernels_for("baseline");
    if (k == NULL) k = &simd_scalar_kernels;
    return k;
}

/* Kernels run on many OpenMP threads at once. Racing first callers all compute the same table
 * and publish it with release; later callers pay one acquire load (a plain load on x86). */
static _Atomic(const simd_kernels *) simd_active_kernels;

static __attribute__((noinline)) const simd_kernels *simd_resolve(void) {
    const simd_kernels *k = simd_kernels_choose(getenv("BROADPHASE_SIMD"));
    atomic_store_explicit(&simd_active_kernels, k, memory_order_release);
    return k;
}

static inline const simd_kernels *simd_active(void) {
    const simd_kernels *k = atomic_load_explicit(&simd_active_kernels, memory_order_acquire);
    if (__builtin_expect(k == NULL, 0)) k = simd_resolve();
    return k;
}

const char *simd_level(void) {
    return simd_active()->level;
}

size_t simd_box_vs_boxes(const float qmin[3], const float qmax[3], const simd_boxes *boxes,
                         size_t begin, size_t end, int dims, uint32_t *hits) {
    return simd_active()->box_vs_boxes(qmin, qmax, boxes, begin, end, dims, hits);
}

size_t simd_sphere_vs_spheres(const float qc[3], float qr, const simd_spheres *spheres,
                              const uint32_t *ids, size_t count, int dims, uint32_t *out) {
    return simd_active()->sphere_vs_spheres(qc, qr, spheres, ids, count, dims, out);
}

size_t simd_sphere_vs_boxes(const float qc[3], float qr, const simd_boxes *boxes,
                            const uint32_t *ids, size_t count, int dims, uint32_t *out) {
    return simd_active()->sphere_vs_boxes(qc, qr, boxes, ids, count, dims, out);
}

size_t simd_box_vs_spheres(const float qmin[3], const float qmax[3], const simd_spheres *spheres,
                           const uint32_t *ids, size_t count, int dims, uint32_t *out) {
    return simd_active()->box_vs_spheres(qmin, qmax, spheres, ids, count, dims, out);
}

size_t simd_boxes_vs_boxes_pairs(const simd_boxes *a, size_t a_begin, size_t a_end,
                                 const simd_boxes *b, size_t b_begin, size_t b_end, int dims,
                                 uint32_t *rows, uint32_t *cols, size_t capacity, size_t *a_next) {
    return simd_active()->boxes_vs_boxes_pairs(a, a_begin, a_end, b, b_begin, b_end, dims, rows,
                                               cols, capacity, a_next);
}

size_t simd_boxes_sweep_pairs(const simd_boxes *a, size_t a_begin, size_t a_end,
                              const simd_boxes *b, size_t b_begin, size_t b_end, float reach,
                              int within, int dims, uint32_t *rows, uint32_t *cols, size_t capacity,
                              size_t *a_next) {
    return simd_active()->boxes_sweep_pairs(a, a_begin, a_end, b, b_begin, b_end, reach, within,
                                            dims, rows, cols, capacity, a_next);
}

size_t simd_boxes_pairs_within(const simd_boxes *boxes, size_t begin, size_t end, int dims,
                               uint32_t *rows, uint32_t *cols, size_t capacity, size_t *next) {
    return simd_active()->boxes_pairs_within(boxes, begin, end, dims, rows, cols, capacity, next);
}

size_t simd_ray_vs_boxes(const simd_ray *ray, const simd_boxes *boxes, size_t begin, size_t end,
                         int dims, uint32_t *hits) {
    return simd_active()->ray_vs_boxes(ray, boxes, begin, end, dims, hits);
}

size_t simd_point_vs_boxes(const float p[3], float limit, const simd_boxes *boxes, size_t begin,
                           size_t end, int dims, uint32_t *hits) {
    return simd_active()->point_vs_boxes(p, limit, boxes, begin, end, dims, hits);
}

size_t simd_point_nearest_rank(const float p[3], double max_d2, const simd_boxes *boxes,
                               const uint32_t *at, size_t h, const uint32_t *ids, int dims,
                               size_t k, float *out_d2, uint32_t *out_id) {
    return simd_active()->point_nearest_rank(p, max_d2, boxes, at, h, ids, dims, k, out_d2, out_id);
}

size_t simd_point_nearest_runs(const float p[3], double max_d2, const simd_boxes *boxes,
                               const uint32_t (*runs)[2], size_t run_count, const uint32_t *ids,
                               int dims, size_t k, float *out_d2, uint32_t *out_id) {
    return simd_active()->point_nearest_runs(p, max_d2, boxes, runs, run_count, ids, dims, k,
                                             out_d2, out_id);
}

size_t simd_boxes_select(const simd_boxes *src, const uint32_t *src_ids, size_t begin, size_t end,
                         int dims, int axis, float plane, int side, float *const dst_min[3],
                         float *const dst_max[3], uint32_t *dst_ids, size_t at) {
    return simd_active()->boxes_select(src, src_ids, begin, end, dims, axis, plane, side, dst_min,
                                       dst_max, dst_ids, at);
}

size_t simd_boxes_cross_pairs(const simd_boxes *a, size_t a_begin, size_t a_end,
                              const float a_lo[3], const float a_hi[3], const simd_boxes *b,
                              size_t b_begin, size_t b_end, const float b_lo[3],
                              const float b_hi[3], int dims, uint32_t *rows, uint32_t *cols) {
    return simd_active()->boxes_cross_pairs(a, a_begin, a_end, a_lo, a_hi, b, b_begin, b_end, b_lo,
                                            b_hi, dims, rows, cols);
}

void simd_blocks_vs_boxes(const float *blocks, const uint32_t *pairs, size_t count,
                          const float (*qmin)[3], const float (*qmax)[3], int dims,
                          uint8_t *masks) {
    simd_active()->blocks_vs_boxes(blocks, pairs, count, qmin, qmax, dims, masks);
}

void simd_boxes_bounds(const simd_boxes *boxes, size_t begin, size_t end, float lo[3],
                       float hi[3]) {
    simd_active()->boxes_bounds(boxes, begin, end, lo, hi);
}

size_t simd_boxes_first_invalid(const float *const lo[3], const float *const hi[3], size_t begin,
                                size_t end, int dims) {
    return simd_active()->boxes_first_invalid(lo, hi, begin, end, dims);
}

size_t simd_spheres_first_invalid(const float *const c[3], const float *r, size_t begin, size_t end,
                                  int dims) {
    return simd_active()->spheres_first_invalid(c, r, begin, end, dims);
}

void simd_stream_floats(float *dst, const float *src, size_t count) {
    simd_active()->stream_floats(dst, src, count);
}

void simd_stream_fence(void) {
    simd_active()->stream_fence();
}

void simd_cell_keys(const simd_cell_grid *g, const float *boxes, const uint32_t *ids, size_t n,
                    uint64_t *keys) {
    simd_active()->cell_keys(g, boxes, ids, n, keys);
}

/* Read once; racing first callers compute the same answer (0 unknown, 1 no, 2 yes). CPUID
 * traps to the hypervisor on a VM (microseconds), so it is never asked twice. */
static _Atomic int simd_prefetch_write_state;

bool simd_prefetch_write_ok(void) {
    int state = atomic_load_explicit(&simd_prefetch_write_state, memory_order_relaxed);
    if (__builtin_expect(state != 0, 1)) return state == 2;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    bool ok = __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c >> 8 & 1u);
#else
    bool ok = true;
#endif
    atomic_store_explicit(&simd_prefetch_write_state, ok ? 2 : 1, memory_order_relaxed);
    return ok;
}

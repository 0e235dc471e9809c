/* Internal to simd/ and its tests: the wide kernels that overlap_wide.c defines once per compiled
 * variant (avx2, baseline), and the kernel tables that the dispatcher in overlap.c picks from.
 * No SIMD type appears here. */
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cell_keys.h"
#include "overlap.h"

/* Declared for every variant so that both overlap.c and overlap_wide.c see one prototype; only
 * the compiled variants are defined (SIMD_HAVE_AVX2 / SIMD_HAVE_BASELINE tell overlap.c which). */
#define SIMD_WIDE_DECLARE(variant)                                                                 \
    size_t simd_box_vs_boxes_##variant(const float qmin[3], const float qmax[3],                   \
                                       const simd_boxes *boxes, size_t begin, size_t end,          \
                                       int dims, uint32_t *hits);                                  \
    size_t simd_sphere_vs_spheres_##variant(const float qc[3], float qr,                           \
                                            const simd_spheres *spheres, const uint32_t *ids,      \
                                            size_t count, int dims, uint32_t *out);                \
    size_t simd_sphere_vs_boxes_##variant(const float qc[3], float qr, const simd_boxes *boxes,    \
                                          const uint32_t *ids, size_t count, int dims,             \
                                          uint32_t *out);                                          \
    size_t simd_box_vs_spheres_##variant(const float qmin[3], const float qmax[3],                 \
                                         const simd_spheres *spheres, const uint32_t *ids,         \
                                         size_t count, int dims, uint32_t *out);                   \
    size_t simd_boxes_vs_boxes_pairs_##variant(                                                    \
        const simd_boxes *a, size_t a_begin, size_t a_end, const simd_boxes *b, size_t b_begin,    \
        size_t b_end, int dims, uint32_t *rows, uint32_t *cols, size_t capacity, size_t *a_next);  \
    size_t simd_boxes_sweep_pairs_##variant(const simd_boxes *a, size_t a_begin, size_t a_end,     \
                                            const simd_boxes *b, size_t b_begin, size_t b_end,     \
                                            float reach, int within, int dims, uint32_t *rows,     \
                                            uint32_t *cols, size_t capacity, size_t *a_next);      \
    size_t simd_boxes_pairs_within_##variant(const simd_boxes *boxes, size_t begin, size_t end,    \
                                             int dims, uint32_t *rows, uint32_t *cols,             \
                                             size_t capacity, size_t *next);                       \
    size_t simd_ray_vs_boxes_##variant(const simd_ray *ray, const simd_boxes *boxes, size_t begin, \
                                       size_t end, int dims, uint32_t *hits);                      \
    size_t simd_point_vs_boxes_##variant(const float p[3], float limit, const simd_boxes *boxes,   \
                                         size_t begin, size_t end, int dims, uint32_t *hits);      \
    size_t simd_point_nearest_rank_##variant(                                                      \
        const float p[3], double max_d2, const simd_boxes *boxes, const uint32_t *at, size_t h,    \
        const uint32_t *ids, int dims, size_t k, float *out_d2, uint32_t *out_id);                 \
    size_t simd_point_nearest_runs_##variant(const float p[3], double max_d2,                      \
                                             const simd_boxes *boxes, const uint32_t(*runs)[2],    \
                                             size_t run_count, const uint32_t *ids, int dims,      \
                                             size_t k, float *out_d2, uint32_t *out_id);           \
    size_t simd_boxes_cross_pairs_##variant(                                                       \
        const simd_boxes *a, size_t a_begin, size_t a_end, const float a_lo[3],                    \
        const float a_hi[3], const simd_boxes *b, size_t b_begin, size_t b_end,                    \
        const float b_lo[3], const float b_hi[3], int dims, uint32_t *rows, uint32_t *cols);       \
    void simd_blocks_vs_boxes_##variant(const float *blocks, const uint32_t *pairs, size_t count,  \
                                        const float(*qmin)[3], const float(*qmax)[3], int dims,    \
                                        uint8_t *masks);                                           \
    void simd_boxes_bounds_##variant(const simd_boxes *boxes, size_t begin, size_t end,            \
                                     float lo[3], float hi[3]);                                    \
    size_t simd_boxes_first_invalid_##variant(const float *const lo[3], const float *const hi[3],  \
                                              size_t begin, size_t end, int dims);                 \
    size_t simd_spheres_first_invalid_##variant(const float *const c[3], const float *r,           \
                                                size_t begin, size_t end, int dims);               \
    void simd_stream_floats_##variant(float *dst, const float *src, size_t count);                 \
    void simd_stream_fence_##variant(void);                                                        \
    size_t simd_boxes_select_##variant(const simd_boxes *src, const uint32_t *src_ids,             \
                                       size_t begin, size_t end, int dims, int axis, float plane,  \
                                       int side, float *const dst_min[3], float *const dst_max[3], \
                                       uint32_t *dst_ids, size_t at);

SIMD_WIDE_DECLARE(avx2)
SIMD_WIDE_DECLARE(baseline)

/* ---- simd_point_nearest_rank's scalar parts, shared by the twin and the variants ---- */

/* Hit j's keys for the ranking: the float of its exact squared distance from p (per axis
 * max(min - p, p - max) clamped at 0 as (g + |g|) / 2, exact for finite floats; squares summed
 * in axis order) as bits, which signed comparisons order, or INT32_MAX beyond max_d2, after
 * every kept hit; and its id with the top bit flipped, so that signed comparisons order ids as
 * unsigned. Returns 1 when it is kept. */
static inline size_t simd_rank_keys(const float p[3], double max_d2, const simd_boxes *boxes,
                                    uint32_t at, uint32_t id, int dims, int32_t *dk, int32_t *ik) {
    double s = 0.0;
    for (int a = 0; a < dims; a++) {
        double lo = (double)boxes->min[a][at], hi = (double)boxes->max[a][at];
        double x = lo - (double)p[a], y = (double)p[a] - hi;
        double g = x > y ? x : y;
        g = (g + fabs(g)) * 0.5;
        s = s + g * g;
    }
    float d = (float)s;
    memcpy(dk, &d, sizeof d);
    if (!(s <= max_d2)) *dk = INT32_MAX;
    *ik = (int32_t)(id ^ UINT32_C(0x80000000));
    return s <= max_d2;
}

/* The first min(kept, k) hits by rank (pos[r]: the hit of rank r), their keys back to floats and
 * ids; returns how many. */
static inline size_t simd_rank_write(const int32_t *dk, const int32_t *ik, const size_t *pos,
                                     size_t kept, size_t k, float *out_d2, uint32_t *out_id) {
    size_t m = kept < k ? kept : k;
    for (size_t i = 0; i < m; i++) {
        memcpy(&out_d2[i], &dk[pos[i]], sizeof(float));
        out_id[i] = (uint32_t)ik[pos[i]] ^ UINT32_C(0x80000000);
    }
    return m;
}

/* One row per level: the one-vs-many and many-vs-many kernels, same signatures as in overlap.h. */
typedef struct simd_kernels {
    const char *level;
    size_t (*box_vs_boxes)(const float qmin[3], const float qmax[3], const simd_boxes *boxes,
                           size_t begin, size_t end, int dims, uint32_t *hits);
    size_t (*sphere_vs_spheres)(const float qc[3], float qr, const simd_spheres *spheres,
                                const uint32_t *ids, size_t count, int dims, uint32_t *out);
    size_t (*sphere_vs_boxes)(const float qc[3], float qr, const simd_boxes *boxes,
                              const uint32_t *ids, size_t count, int dims, uint32_t *out);
    size_t (*box_vs_spheres)(const float qmin[3], const float qmax[3], const simd_spheres *spheres,
                             const uint32_t *ids, size_t count, int dims, uint32_t *out);
    size_t (*boxes_vs_boxes_pairs)(const simd_boxes *a, size_t a_begin, size_t a_end,
                                   const simd_boxes *b, size_t b_begin, size_t b_end, int dims,
                                   uint32_t *rows, uint32_t *cols, size_t capacity, size_t *a_next);
    size_t (*boxes_pairs_within)(const simd_boxes *boxes, size_t begin, size_t end, int dims,
                                 uint32_t *rows, uint32_t *cols, size_t capacity, size_t *next);
    size_t (*boxes_sweep_pairs)(const simd_boxes *a, size_t a_begin, size_t a_end,
                                const simd_boxes *b, size_t b_begin, size_t b_end, float reach,
                                int within, int dims, uint32_t *rows, uint32_t *cols,
                                size_t capacity, size_t *a_next);
    size_t (*ray_vs_boxes)(const simd_ray *ray, const simd_boxes *boxes, size_t begin, size_t end,
                           int dims, uint32_t *hits);
    size_t (*point_vs_boxes)(const float p[3], float limit, const simd_boxes *boxes, size_t begin,
                             size_t end, int dims, uint32_t *hits);
    size_t (*point_nearest_rank)(const float p[3], double max_d2, const simd_boxes *boxes,
                                 const uint32_t *at, size_t h, const uint32_t *ids, int dims,
                                 size_t k, float *out_d2, uint32_t *out_id);
    size_t (*boxes_select)(const simd_boxes *src, const uint32_t *src_ids, size_t begin, size_t end,
                           int dims, int axis, float plane, int side, float *const dst_min[3],
                           float *const dst_max[3], uint32_t *dst_ids, size_t at);
    size_t (*boxes_cross_pairs)(const simd_boxes *a, size_t a_begin, size_t a_end,
                                const float a_lo[3], const float a_hi[3], const simd_boxes *b,
                                size_t b_begin, size_t b_end, const float b_lo[3],
                                const float b_hi[3], int dims, uint32_t *rows, uint32_t *cols);
    void (*blocks_vs_boxes)(const float *blocks, const uint32_t *pairs, size_t count,
                            const float (*qmin)[3], const float (*qmax)[3], int dims,
                            uint8_t *masks);
    void (*boxes_bounds)(const simd_boxes *boxes, size_t begin, size_t end, float lo[3],
                         float hi[3]);
    size_t (*boxes_first_invalid)(const float *const lo[3], const float *const hi[3], size_t begin,
                                  size_t end, int dims);
    size_t (*spheres_first_invalid)(const float *const c[3], const float *r, size_t begin,
                                    size_t end, int dims);
    void (*stream_floats)(float *dst, const float *src, size_t count);
    void (*stream_fence)(void);
    void (*cell_keys)(const simd_cell_grid *g, const float *boxes, const uint32_t *ids, size_t n,
                      uint64_t *keys);
    size_t (*point_nearest_runs)(const float p[3], double max_d2, const simd_boxes *boxes,
                                 const uint32_t (*runs)[2], size_t run_count, const uint32_t *ids,
                                 int dims, size_t k, float *out_d2, uint32_t *out_id);
} simd_kernels;

/* The table for "avx2", "baseline" or "scalar"; NULL when that variant is not compiled in or
 * this CPU cannot run it. Lets tests run every variant in one process, whatever was dispatched. */
const simd_kernels *simd_kernels_for(const char *level);

/* The table the dispatcher picks for an override request (the BROADPHASE_SIMD environment
 * variable, or NULL): the requested level when available, else the best available one. Pure, so
 * tests can check the override without depending on the once-per-process choice. */
const simd_kernels *simd_kernels_choose(const char *request);

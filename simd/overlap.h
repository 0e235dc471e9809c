/* One-vs-many (and many-vs-many box) overlap kernels over structure-of-arrays columns, with a
 * scalar twin of each. The only folder that includes SIMDe; nothing here exposes a SIMD type. The
 * wide kernels are compiled for AVX2 and for the portable baseline and picked once at run time. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Box columns: min[k][i], max[k][i] for axis k. Readers may touch up to SIMD_PAD elements past
 * `end`, so every column must be readable there (the world and the trees pad with sentinels:
 * min = +inf, max = -inf, which overlap no query box with a finite bound; one from -inf to
 * +inf on every axis would take them for boxes, so the engine keeps every query box it derives
 * within [-FLT_MAX, FLT_MAX]). */
#define SIMD_PAD 8

typedef struct simd_boxes {
    const float *min[3];
    const float *max[3];
} simd_boxes;

/* Sphere columns indexed by object id: centre c[k][id], radius r[id]. */
typedef struct simd_spheres {
    const float *c[3];
    const float *r;
} simd_spheres;

/* Box-box: positions i in [begin, end) whose box overlaps the query box (closed test:
 * qmin[k] <= max[k][i] && min[k][i] <= qmax[k] on every one of `dims` axes). Writes the hit
 * positions, ascending, to hits (capacity end - begin + SIMD_PAD) and returns how many. */
size_t simd_box_vs_boxes(const float qmin[3], const float qmax[3], const simd_boxes *boxes,
                         size_t begin, size_t end, int dims, uint32_t *hits);
size_t simd_box_vs_boxes_scalar(const float qmin[3], const float qmax[3], const simd_boxes *boxes,
                                size_t begin, size_t end, int dims, uint32_t *hits);

/* Box-box, many against many: every overlapping (row, col) with row in [a_begin, a_end) of `a`
 * and col in [b_begin, b_end) of `b` (closed test as above). Pairs are written in order, rows
 * ascending and cols ascending within a row, as rows[h], cols[h]. Whole rows only: a row starts
 * only while at least its width + SIMD_PAD of the `capacity` entries of rows and cols are free,
 * so capacity >= (b_end - b_begin) + SIMD_PAD guarantees progress. *a_next gets the first row
 * not done (a_end when all were); returns how many pairs were written. */
size_t simd_boxes_vs_boxes_pairs(const simd_boxes *a, size_t a_begin, size_t a_end,
                                 const simd_boxes *b, size_t b_begin, size_t b_end, int dims,
                                 uint32_t *rows, uint32_t *cols, size_t capacity, size_t *a_next);
size_t simd_boxes_vs_boxes_pairs_scalar(const simd_boxes *a, size_t a_begin, size_t a_end,
                                        const simd_boxes *b, size_t b_begin, size_t b_end, int dims,
                                        uint32_t *rows, uint32_t *cols, size_t capacity,
                                        size_t *a_next);

/* Sort and sweep, many against many: a's rows [a_begin, a_end) and b's cols [b_begin, b_end),
 * both sorted by min on x (axis 0). Every overlapping (row, col) (closed test as above), with
 * col > row when `within` (a and b the same range); for each row only the cols from the first
 * whose min x reaches the row's min x less `reach` (the longest extent on x of any col; row + 1
 * when within) to the last whose min x is not above the row's max x are tested, 8 at a time.
 * Pairs in order (rows ascending, cols ascending within a row), with the row rule of
 * simd_boxes_vs_boxes_pairs: a row starts only while (b_end - its first col) + SIMD_PAD entries
 * of rows and cols are free. *a_next gets the first row not done; returns the pairs written. */
size_t simd_boxes_sweep_pairs(const simd_boxes *a, size_t a_begin, size_t a_end,
                              const simd_boxes *b, size_t b_begin, size_t b_end, float reach,
                              int within, int dims, uint32_t *rows, uint32_t *cols, size_t capacity,
                              size_t *a_next);
size_t simd_boxes_sweep_pairs_scalar(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const simd_boxes *b, size_t b_begin, size_t b_end, float reach,
                                     int within, int dims, uint32_t *rows, uint32_t *cols,
                                     size_t capacity, size_t *a_next);
/* The least min x that a box of extent at most `reach` on x, overlapping one whose min x is x,
 * can have, or a little less: x - reach computed in double, widened for the rounding of the
 * extents (a millionth of reach) and for the float it is rounded to (2^-22 of itself, and a
 * little more near zero), so that the float is below the true bound. Branch-free: both kernels
 * start each row here. */
static inline float simd_sweep_floor(float x, float reach) {
    double v = (double)x - (double)reach * (1.0 + 1e-6);
    v -= __builtin_fabs(v) * 0x1p-22 + 1e-37;
    return (float)v;
}

/* The first of the sorted min x bx[lo .. end) at or past floor_x, from lo on (a row's window
 * start, which only moves forward): mostly a step or two a row, so two branch-free steps, then
 * the rare rest. Shared by the sweep kernel's variants. */
static inline size_t simd_sweep_advance(const float *bx, size_t lo, size_t end, float floor_x) {
    lo += lo < end && bx[lo] < floor_x;
    lo += lo < end && bx[lo] < floor_x;
    while (lo < end && bx[lo] < floor_x) lo++;
    return lo;
}

/* Two small sets, as where two leaves of a tree meet: the entries of a in [a_begin, a_end) that
 * overlap b's bounds [b_lo, b_hi], against the entries of b in [b_begin, b_end) that overlap a's
 * bounds [a_lo, a_hi]; every overlapping (row in a, col in b) of those, rows ascending and cols
 * ascending within a row. Each range holds at most SIMD_CROSS_MAX entries; rows and cols need
 * room for (a_end - a_begin) * (b_end - b_begin) + SIMD_PAD entries. One call replaces two
 * selections, their copies and a pair kernel. Returns how many pairs were written. */
#define SIMD_CROSS_MAX 64
size_t simd_boxes_cross_pairs(const simd_boxes *a, size_t a_begin, size_t a_end,
                              const float a_lo[3], const float a_hi[3], const simd_boxes *b,
                              size_t b_begin, size_t b_end, const float b_lo[3],
                              const float b_hi[3], int dims, uint32_t *rows, uint32_t *cols);
size_t simd_boxes_cross_pairs_scalar(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const float a_lo[3], const float a_hi[3], const simd_boxes *b,
                                     size_t b_begin, size_t b_end, const float b_lo[3],
                                     const float b_hi[3], int dims, uint32_t *rows, uint32_t *cols);

/* The bounds of boxes [begin, end) on all three axes: lo[k] the least min[k][i], hi[k] the
 * greatest max[k][i] (+inf and -inf when the range is empty). Reads nothing past end. Lanes of
 * 8 are reduced in a fixed order (lane j with j + 4, then j + 2, then j + 1; the tail last), so
 * that the scalar twin gives the same bits, signed zeros included. */
void simd_boxes_bounds(const simd_boxes *boxes, size_t begin, size_t end, float lo[3], float hi[3]);
void simd_boxes_bounds_scalar(const simd_boxes *boxes, size_t begin, size_t end, float lo[3],
                              float hi[3]);

/* Validation of a caller's batch, its columns read only within [begin, end): the first position
 * whose box has a bound that is not finite, or min > max, on one of `dims` axes; end when every
 * box is valid. */
size_t simd_boxes_first_invalid(const float *const lo[3], const float *const hi[3], size_t begin,
                                size_t end, int dims);
size_t simd_boxes_first_invalid_scalar(const float *const lo[3], const float *const hi[3],
                                       size_t begin, size_t end, int dims);
/* The same for spheres: a centre coordinate (on `dims` axes) or a radius that is not finite, or
 * a radius below zero (-0 is not). */
size_t simd_spheres_first_invalid(const float *const c[3], const float *r, size_t begin, size_t end,
                                  int dims);
size_t simd_spheres_first_invalid_scalar(const float *const c[3], const float *r, size_t begin,
                                         size_t end, int dims);

/* Copies src[0, count) to dst with stores that bypass the caches (non-temporal) where the
 * variant has them: for columns that another core reads next, so that the writer does not first
 * fetch each line from that core's cache. The scalar twin is memcpy. Stores may stay buffered
 * until simd_stream_fence(); call it before other threads read dst. */
void simd_stream_floats(float *dst, const float *src, size_t count);
void simd_stream_floats_scalar(float *dst, const float *src, size_t count);
/* Orders the streamed stores before every later store (a no-op where nothing streams). */
void simd_stream_fence(void);
void simd_stream_fence_scalar(void);

/* Prefetching for a write: a line that another core read since this one last wrote it is shared
 * there, and a plain store must wait for that copy to be invalidated (a cross-core round trip,
 * 100-700 ns on a VM) before it can retire; the store buffer then fills and the writer stalls.
 * simd_prefetch_write(p) asks for the line holding p in an exclusive state ahead of the store
 * (x86 PREFETCHW), so the round trips overlap. Call it only where simd_prefetch_write_ok(),
 * decided once per process from the CPU (CPUID 80000001h:ECX.PRFCHW on x86; other targets use
 * the compiler's write prefetch and always may). A hint: it changes no memory. */
bool simd_prefetch_write_ok(void);
static inline void simd_prefetch_write(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

/* Many blocks, each against its own query box, in one call: blocks of 8 boxes stored as 48
 * floats (min x, y, z then max x, y, z, 8 lanes each), as a pyramid of bounds keeps them. For
 * each entry e of `pairs` (block index pairs[2e], query index pairs[2e + 1]), masks[e] gets bit
 * l set when lane l of that block overlaps query box (qmin, qmax)[query]. One call per level of
 * a walk instead of one per block. */
void simd_blocks_vs_boxes(const float *blocks, const uint32_t *pairs, size_t count,
                          const float (*qmin)[3], const float (*qmax)[3], int dims, uint8_t *masks);
void simd_blocks_vs_boxes_scalar(const float *blocks, const uint32_t *pairs, size_t count,
                                 const float (*qmin)[3], const float (*qmax)[3], int dims,
                                 uint8_t *masks);

/* The same within one range: every overlapping (row, col) with begin <= row < col < end; row
 * r's width is end - r - 1. */
size_t simd_boxes_pairs_within(const simd_boxes *boxes, size_t begin, size_t end, int dims,
                               uint32_t *rows, uint32_t *cols, size_t capacity, size_t *next);
size_t simd_boxes_pairs_within_scalar(const simd_boxes *boxes, size_t begin, size_t end, int dims,
                                      uint32_t *rows, uint32_t *cols, size_t capacity,
                                      size_t *next);

/* Selection by one side of a plane: copies, in order, the entries i in [begin, end) of src (the
 * bounds on `dims` axes and src_ids[i]) with src->min[axis][i] < plane (side 0) or
 * src->max[axis][i] > plane (side 1) to positions at, at + 1, ... of dst_min, dst_max and
 * dst_ids; returns how many. Whole chunks of 8 are stored, so dst needs room for SIMD_PAD
 * entries past the last one kept, and src (bounds and ids) is read up to SIMD_PAD past end. */
size_t simd_boxes_select(const simd_boxes *src, const uint32_t *src_ids, size_t begin, size_t end,
                         int dims, int axis, float plane, int side, float *const dst_min[3],
                         float *const dst_max[3], uint32_t *dst_ids, size_t at);
size_t simd_boxes_select_scalar(const simd_boxes *src, const uint32_t *src_ids, size_t begin,
                                size_t end, int dims, int axis, float plane, int side,
                                float *const dst_min[3], float *const dst_max[3], uint32_t *dst_ids,
                                size_t at);

/* A segment o + t * d, 0 <= t <= max_t, for the ray kernel: inv[k] = 1 / d[k] rounded to float,
 * and flat[k] = 1 where d[k] is 0 (that axis then tests the origin against the box). */
typedef struct simd_ray {
    float o[3], inv[3], max_t;
    int flat[3];
} simd_ray;

/* Ray-box, a float filter in front of an exact test: positions i in [begin, end) of nonempty
 * boxes (min <= max on every axis) whose slab interval [t0, t1], computed in float, passes
 * t0 <= t1 + 1e-6 (|t0| + |t1|) + 1e-30, or whose slab values are not finite below 1e30. The
 * float values are within a few ulps of the exact ones, so every box an exact double-precision
 * slab test accepts is kept (given inv within a few ulps of 1 / d and above 1e-30 in
 * magnitude). Output as simd_box_vs_boxes. */
size_t simd_ray_vs_boxes(const simd_ray *ray, const simd_boxes *boxes, size_t begin, size_t end,
                         int dims, uint32_t *hits);
size_t simd_ray_vs_boxes_scalar(const simd_ray *ray, const simd_boxes *boxes, size_t begin,
                                size_t end, int dims, uint32_t *hits);

/* Point-box distance, a float filter in front of an exact test: positions i in [begin, end) of
 * nonempty boxes whose squared distance from p, computed in float (gap g_k = max(min - p,
 * p - max, 0) per axis, summed in axis order), is at most `limit`, or overflowed to infinity.
 * The float figure is within a few ulps of the exact one, so a limit above the exact bound by a
 * relative 1e-5 keeps every box within it. Output as simd_box_vs_boxes. */
size_t simd_point_vs_boxes(const float p[3], float limit, const simd_boxes *boxes, size_t begin,
                           size_t end, int dims, uint32_t *hits);
size_t simd_point_vs_boxes_scalar(const float p[3], float limit, const simd_boxes *boxes,
                                  size_t begin, size_t end, int dims, uint32_t *hits);

/* A nearest search's exact step over its filter's hits, for h <= SIMD_RANK_MAX of them
 * (positions at[0, h) of the columns, ids[at[j]] their ids): each one's squared distance from p
 * in double (per axis the gap max(min - p, p - max) clamped at 0 as (g + |g|) / 2, exact for
 * finite floats; squares summed in axis order, no FMA), those at most max_d2 kept and ranked by
 * (the float of that distance, id); the first min(k, kept) written in rank order to out_d2 (the
 * floats) and out_id. Returns how many were written. The hits' ids must be distinct (each rank is
 * then one hit's), and the result is the same whatever the hits' order. */
enum { SIMD_RANK_MAX = 64 };
size_t simd_point_nearest_rank(const float p[3], double max_d2, const simd_boxes *boxes,
                               const uint32_t *at, size_t h, const uint32_t *ids, int dims,
                               size_t k, float *out_d2, uint32_t *out_id);
size_t simd_point_nearest_rank_scalar(const float p[3], double max_d2, const simd_boxes *boxes,
                                      const uint32_t *at, size_t h, const uint32_t *ids, int dims,
                                      size_t k, float *out_d2, uint32_t *out_id);

/* The same exact step over every position of a few runs of the columns (positions
 * [runs[r][0], runs[r][1]) for r < run_count; no filter before it, and contiguous loads where the
 * other gathers): the first min(k, kept) of those within max_d2, ranked and written as
 * simd_point_nearest_rank writes them. The positions' ids must be distinct and the boxes
 * nonempty. Returns SIZE_MAX, with nothing written, when more than SIMD_RANK_MAX are within
 * max_d2. Reads up to SIMD_PAD positions past each run's end, in the columns and in ids. */
size_t simd_point_nearest_runs(const float p[3], double max_d2, const simd_boxes *boxes,
                               const uint32_t (*runs)[2], size_t run_count, const uint32_t *ids,
                               int dims, size_t k, float *out_d2, uint32_t *out_id);
size_t simd_point_nearest_runs_scalar(const float p[3], double max_d2, const simd_boxes *boxes,
                                      const uint32_t (*runs)[2], size_t run_count,
                                      const uint32_t *ids, int dims, size_t k, float *out_d2,
                                      uint32_t *out_id);

/* The exact tests below run in double precision with no FMA, so they neither overflow nor
 * underflow for any finite float input, and the wide and scalar forms agree bit for bit.
 * Each filters a list of candidate ids and writes, in input order, those that pass (out may
 * alias ids); returns how many passed. */

/* Sphere-sphere: |c_q - c_i|^2 <= (r_q + r_i)^2. */
size_t simd_sphere_vs_spheres(const float qc[3], float qr, const simd_spheres *spheres,
                              const uint32_t *ids, size_t count, int dims, uint32_t *out);
size_t simd_sphere_vs_spheres_scalar(const float qc[3], float qr, const simd_spheres *spheres,
                                     const uint32_t *ids, size_t count, int dims, uint32_t *out);

/* Sphere-box: squared distance from the query centre to box i <= r_q^2 (boxes indexed by id). */
size_t simd_sphere_vs_boxes(const float qc[3], float qr, const simd_boxes *boxes,
                            const uint32_t *ids, size_t count, int dims, uint32_t *out);
size_t simd_sphere_vs_boxes_scalar(const float qc[3], float qr, const simd_boxes *boxes,
                                   const uint32_t *ids, size_t count, int dims, uint32_t *out);

/* Box-sphere: squared distance from sphere i's centre to the query box <= r_i^2. */
size_t simd_box_vs_spheres(const float qmin[3], const float qmax[3], const simd_spheres *spheres,
                           const uint32_t *ids, size_t count, int dims, uint32_t *out);
size_t simd_box_vs_spheres_scalar(const float qmin[3], const float qmax[3],
                                  const simd_spheres *spheres, const uint32_t *ids, size_t count,
                                  int dims, uint32_t *out);

/* Single-pair predicates shared by the scalar twins and by tests. */
int simd_pair_box_box(const float amin[3], const float amax[3], const float bmin[3],
                      const float bmax[3], int dims);
int simd_pair_sphere_sphere(const float ac[3], float ar, const float bc[3], float br, int dims);
int simd_pair_box_sphere(const float bmin[3], const float bmax[3], const float c[3], float r,
                         int dims);

/* "avx2", "baseline" or "scalar": the path the dispatching kernels above take. */
const char *simd_level(void);

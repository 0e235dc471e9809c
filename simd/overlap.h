/* One-vs-many overlap kernels over structure-of-arrays columns, with a scalar twin of each.
 * The only folder that includes SIMDe; nothing here exposes a SIMD type. The wide kernels are
 * compiled for AVX2 and for the portable baseline and picked once at run time. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Box columns: min[k][i], max[k][i] for axis k. Readers may touch up to SIMD_PAD elements past
 * `end`, so every column must be readable there (the world and the trees pad with sentinels:
 * min = +inf, max = -inf, which overlap nothing). */
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

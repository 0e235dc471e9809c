/* The scalar twins of the wide kernels, the single-pair predicates they share, and the run-time
 * dispatch: one kernel table (avx2, baseline or scalar) chosen once per process from the CPU and
 * the BROADPHASE_SIMD environment variable. */
#include "overlap.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>

#include "overlap_wide.h"

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

/* ---- dispatch -------------------------------------------------------------------------------- */

static const simd_kernels simd_scalar_kernels = {
    "scalar", simd_box_vs_boxes_scalar, simd_sphere_vs_spheres_scalar, simd_sphere_vs_boxes_scalar,
    simd_box_vs_spheres_scalar};

#if SIMD_HAVE_AVX2
static const simd_kernels simd_avx2_kernels = {"avx2", simd_box_vs_boxes_avx2,
                                               simd_sphere_vs_spheres_avx2,
                                               simd_sphere_vs_boxes_avx2, simd_box_vs_spheres_avx2};

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
    simd_sphere_vs_boxes_baseline, simd_box_vs_spheres_baseline};
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

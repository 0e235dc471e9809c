/* The sweep kernel's wide variant (simd_boxes_sweep_pairs in overlap.h), compiled once per
 * variant beside overlap_wide.c; it agrees bit for bit with its scalar twin in overlap.c. */
#include "overlap_wide_lanes.h"

#include <assert.h>

/* The sweep: each row's cols from its floor (a pointer that only moves forward, the rows being
 * sorted by min x) 8 at a time, until a chunk whose last col starts past the row's max x (the
 * cols being sorted, every later one does too; the lanes past it fail the x test). */
SIMD_INLINE size_t simd_sweep_kernel(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const simd_boxes *b, size_t b_begin, size_t b_end, float reach,
                                     int within, int dims, uint32_t *restrict rows,
                                     uint32_t *restrict cols, size_t capacity, size_t *a_next) {
    simd_box_columns col_ = {{b->min[0], b->min[1], dims == 3 ? b->min[2] : NULL},
                             {b->max[0], b->max[1], dims == 3 ? b->max[2] : NULL}};
    const simd_box_columns *col = &col_;
    const float *restrict amin[3] = {a->min[0], a->min[1], dims == 3 ? a->min[2] : NULL};
    const float *restrict amax[3] = {a->max[0], a->max[1], dims == 3 ? a->max[2] : NULL};
    const float *restrict bx = b->min[0];
    size_t n = 0, r = a_begin, lo = b_begin;
    for (; r < a_end; r++) {
        size_t from = r + 1;
        if (!within)
            from = lo = simd_sweep_advance(bx, lo, b_end, simd_sweep_floor(amin[0][r], reach));
        if (from >= b_end) continue;
        if (capacity - n < b_end - from + SIMD_PAD) break;
        float top = amax[0][r];
        simde__m256 qlo[3], qhi[3];
        for (int k = 0; k < dims; k++) {
            qlo[k] = simde_mm256_set1_ps(amin[k][r]);
            qhi[k] = simde_mm256_set1_ps(amax[k][r]);
        }
        simde__m256i row = simde_mm256_set1_epi32((int)(uint32_t)r);
        for (size_t i = from;; i += 8) {
            unsigned m = simd_box_mask8(qlo, qhi, col, i, dims);
            if (b_end - i < 8) m &= (1u << (b_end - i)) - 1u;
            simd_store_positions(cols + n, m, (uint32_t)i);
            simde_mm256_storeu_si256((simde__m256i *)(void *)(rows + n), row);
            n += simd_popcount8(m);
            if (b_end - i <= 8 || bx[i + 7] > top) break;
        }
    }
    *a_next = r;
    return n;
}

size_t SIMD_WIDE(simd_boxes_sweep_pairs)(const simd_boxes *a, size_t a_begin, size_t a_end,
                                         const simd_boxes *b, size_t b_begin, size_t b_end,
                                         float reach, int within, int dims, uint32_t *rows,
                                         uint32_t *cols, size_t capacity, size_t *a_next) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        return simd_sweep_kernel(a, a_begin, a_end, b, b_begin, b_end, reach, within, 3, rows, cols,
                                 capacity, a_next);
    return simd_sweep_kernel(a, a_begin, a_end, b, b_begin, b_end, reach, within, 2, rows, cols,
                             capacity, a_next);
}

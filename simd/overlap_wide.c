/* The wide one-vs-many kernels on SIMDe, compiled once per variant: -DSIMD_WIDE_VARIANT=avx2 (with
 * -mavx2) and/or =baseline (plain SSE2); token pasting names each function after its variant.
 * Every kernel agrees bit for bit with its scalar twin in overlap.c. */
#include "overlap_wide.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "overlap_wide_lanes.h"

/* dims is a literal at both call sites, so each gets its own loop with no per-chunk test. All 8
 * slots are stored per chunk whatever the mask: hits has SIMD_PAD spare room. Positions are
 * uint32_t by contract, so they wrap like the scalar twin's cast. */
SIMD_INLINE size_t simd_box_kernel(const float qmin[3], const float qmax[3],
                                   const simd_boxes *boxes, size_t begin, size_t end, int dims,
                                   uint32_t *hits) {
    simd_box_columns col_ = {{boxes->min[0], boxes->min[1], dims == 3 ? boxes->min[2] : NULL},
                             {boxes->max[0], boxes->max[1], dims == 3 ? boxes->max[2] : NULL}};
    const simd_box_columns *col = &col_;
    simde__m256 qlo[3], qhi[3];
    for (int k = 0; k < 3; k++) {
        qlo[k] = simde_mm256_set1_ps(k < dims ? qmin[k] : 0.0f);
        qhi[k] = simde_mm256_set1_ps(k < dims ? qmax[k] : 0.0f);
    }
    uint32_t *out = hits;
    size_t i = begin;
    for (; i + 16 <= end; i += 16) {
        unsigned m0 = simd_box_mask8(qlo, qhi, col, i, dims);
        unsigned m1 = simd_box_mask8(qlo, qhi, col, i + 8, dims);
        simd_store_positions(out, m0, (uint32_t)i);
        out += simd_popcount8(m0);
        simd_store_positions(out, m1, (uint32_t)i + 8u);
        out += simd_popcount8(m1);
    }
    /* The rest, 8 at a time; columns are readable up to SIMD_PAD past end, so the last chunk
     * loads whole vectors and drops the lanes at or past end. */
    for (; i < end; i += 8) {
        unsigned m = simd_box_mask8(qlo, qhi, col, i, dims);
        if (end - i < 8) m &= (1u << (end - i)) - 1u;
        simd_store_positions(out, m, (uint32_t)i);
        out += simd_popcount8(m);
    }
    return (size_t)(out - hits);
}

size_t SIMD_WIDE(simd_box_vs_boxes)(const float qmin[3], const float qmax[3],
                                    const simd_boxes *boxes, size_t begin, size_t end, int dims,
                                    uint32_t *hits) {
    assert(dims == 2 || dims == 3);
    if (dims == 3) return simd_box_kernel(qmin, qmax, boxes, begin, end, 3, hits);
    return simd_box_kernel(qmin, qmax, boxes, begin, end, 2, hits);
}

/* ---- ray-box filter ---------------------------------------------------------------------- */

/* The scalar twin's float steps lane by lane: min_ps and max_ps return their second operand
 * unless the first compares less (greater), exactly the twin's conditional expressions. */
SIMD_INLINE unsigned simd_ray_mask8(const simd_ray *r, const simde__m256 o[3],
                                    const simde__m256 inv[3], const simd_box_columns *col, size_t i,
                                    int dims) {
    const simde__m256 big = simde_mm256_set1_ps(1e30f);
    const simde__m256 abs_mask = simde_mm256_castsi256_ps(simde_mm256_set1_epi32(0x7fffffff));
    simde__m256 t0 = simde_mm256_setzero_ps(), t1 = simde_mm256_set1_ps(r->max_t);
    simde__m256 ok = simde_mm256_castsi256_ps(simde_mm256_set1_epi32(-1));
    simde__m256 finite = ok;
    for (int k = 0; k < dims; k++) {
        simde__m256 mn = simde_mm256_loadu_ps(col->min[k] + i);
        simde__m256 mx = simde_mm256_loadu_ps(col->max[k] + i);
        ok = simde_mm256_and_ps(ok, simde_mm256_cmp_ps(mn, mx, SIMDE_CMP_LE_OQ));
        if (r->flat[k]) {
            ok = simde_mm256_and_ps(ok, simde_mm256_cmp_ps(o[k], mn, SIMDE_CMP_GE_OQ));
            ok = simde_mm256_and_ps(ok, simde_mm256_cmp_ps(o[k], mx, SIMDE_CMP_LE_OQ));
            continue;
        }
        simde__m256 a = simde_mm256_mul_ps(simde_mm256_sub_ps(mn, o[k]), inv[k]);
        simde__m256 b = simde_mm256_mul_ps(simde_mm256_sub_ps(mx, o[k]), inv[k]);
        simde__m256 near = simde_mm256_min_ps(a, b);
        simde__m256 far = simde_mm256_blendv_ps(a, b, simde_mm256_cmp_ps(a, b, SIMDE_CMP_LT_OQ));
        t0 = simde_mm256_max_ps(near, t0);
        t1 = simde_mm256_min_ps(far, t1);
        finite = simde_mm256_and_ps(
            finite, simde_mm256_cmp_ps(simde_mm256_and_ps(a, abs_mask), big, SIMDE_CMP_LT_OQ));
        finite = simde_mm256_and_ps(
            finite, simde_mm256_cmp_ps(simde_mm256_and_ps(b, abs_mask), big, SIMDE_CMP_LT_OQ));
    }
    simde__m256 margin =
        simde_mm256_add_ps(simde_mm256_mul_ps(simde_mm256_set1_ps(1e-6f),
                                              simde_mm256_add_ps(simde_mm256_and_ps(t0, abs_mask),
                                                                 simde_mm256_and_ps(t1, abs_mask))),
                           simde_mm256_set1_ps(1e-30f));
    simde__m256 pass = simde_mm256_cmp_ps(t0, simde_mm256_add_ps(t1, margin), SIMDE_CMP_LE_OQ);
    /* kept: ok & (pass | !finite) */
    pass = simde_mm256_or_ps(pass, simde_mm256_andnot_ps(finite, ok));
    return simd_movemask_ps(simde_mm256_and_ps(ok, pass));
}

size_t SIMD_WIDE(simd_ray_vs_boxes)(const simd_ray *ray, const simd_boxes *boxes, size_t begin,
                                    size_t end, int dims, uint32_t *hits) {
    assert(dims == 2 || dims == 3);
    simd_box_columns col_ = {{boxes->min[0], boxes->min[1], dims == 3 ? boxes->min[2] : NULL},
                             {boxes->max[0], boxes->max[1], dims == 3 ? boxes->max[2] : NULL}};
    simde__m256 o[3], inv[3];
    for (int k = 0; k < 3; k++) {
        o[k] = simde_mm256_set1_ps(ray->o[k]);
        inv[k] = simde_mm256_set1_ps(ray->inv[k]);
    }
    uint32_t *out = hits;
    for (size_t i = begin; i < end; i += 8) {
        unsigned m = simd_ray_mask8(ray, o, inv, &col_, i, dims);
        if (end - i < 8) m &= (1u << (end - i)) - 1u;
        simd_store_positions(out, m, (uint32_t)i);
        out += simd_popcount8(m);
    }
    return (size_t)(out - hits);
}

/* ---- point-box distance filter ------------------------------------------------------------ */

size_t SIMD_WIDE(simd_point_vs_boxes)(const float p[3], float limit, const simd_boxes *boxes,
                                      size_t begin, size_t end, int dims, uint32_t *hits) {
    assert(dims == 2 || dims == 3);
    simd_box_columns col = {{boxes->min[0], boxes->min[1], dims == 3 ? boxes->min[2] : NULL},
                            {boxes->max[0], boxes->max[1], dims == 3 ? boxes->max[2] : NULL}};
    simde__m256 q[3];
    for (int k = 0; k < 3; k++) q[k] = simde_mm256_set1_ps(k < dims ? p[k] : 0.0f);
    const simde__m256 lim = simde_mm256_set1_ps(limit), inf = simde_mm256_set1_ps(INFINITY);
    const simde__m256 zero = simde_mm256_setzero_ps();
    uint32_t *out = hits;
    for (size_t i = begin; i < end; i += 8) {
        simde__m256 d2 = zero, ok = simde_mm256_cmp_ps(zero, zero, SIMDE_CMP_EQ_OQ);
        for (int k = 0; k < dims; k++) {
            simde__m256 mn = simde_mm256_loadu_ps(col.min[k] + i);
            simde__m256 mx = simde_mm256_loadu_ps(col.max[k] + i);
            ok = simde_mm256_and_ps(ok, simde_mm256_cmp_ps(mn, mx, SIMDE_CMP_LE_OQ));
            /* max_ps(a, b) is a > b ? a : b, the twin's expressions */
            simde__m256 g =
                simde_mm256_max_ps(simde_mm256_sub_ps(mn, q[k]), simde_mm256_sub_ps(q[k], mx));
            g = simde_mm256_max_ps(g, zero);
            d2 = simde_mm256_add_ps(d2, simde_mm256_mul_ps(g, g));
        }
        simde__m256 keep = simde_mm256_or_ps(simde_mm256_cmp_ps(d2, lim, SIMDE_CMP_LE_OQ),
                                             simde_mm256_cmp_ps(d2, inf, SIMDE_CMP_EQ_OQ));
        unsigned m = simd_movemask_ps(simde_mm256_and_ps(ok, keep));
        if (end - i < 8) m &= (1u << (end - i)) - 1u;
        simd_store_positions(out, m, (uint32_t)i);
        out += simd_popcount8(m);
    }
    return (size_t)(out - hits);
}

/* ---- a nearest search's exact ranking ------------------------------------------------------ */

static size_t rank_wide(int32_t *dk, int32_t *ik, size_t h, size_t kept, size_t k, float *out_d2,
                        uint32_t *out_id);

/* The twin's numbers: with AVX2, four hits at a time (their bounds gathered, widened to double);
 * without, one at a time as the twin. Then the ranking (rank_wide). */
size_t SIMD_WIDE(simd_point_nearest_rank)(const float p[3], double max_d2, const simd_boxes *boxes,
                                          const uint32_t *at, size_t h, const uint32_t *ids,
                                          int dims, size_t k, float *out_d2, uint32_t *out_id) {
    assert(dims == 2 || dims == 3);
    /* keys as simd_rank_keys makes them */
    _Alignas(32) int32_t dk[SIMD_RANK_MAX + 8], ik[SIMD_RANK_MAX + 8];
    size_t kept = 0;
    if (h > SIMD_RANK_MAX) h = SIMD_RANK_MAX;
    if (h == 0) return 0;
#if defined(SIMDE_X86_AVX2_NATIVE)
    _Alignas(16) int32_t idx[SIMD_RANK_MAX + 4];
    for (size_t j = 0; j < h; j++) idx[j] = (int32_t)at[j];
    for (size_t j = h; j < h + 4; j++) idx[j] = (int32_t)at[0]; /* a valid position */
    const simde__m256d half = simde_mm256_set1_pd(0.5), bound = simde_mm256_set1_pd(max_d2);
    const simde__m256d sign = simde_mm256_set1_pd(-0.0);
    simde__m256d q[3];
    for (int a = 0; a < 3; a++) q[a] = simde_mm256_set1_pd(a < dims ? (double)p[a] : 0.0);
    for (size_t j = 0; j < h; j += 4) {
        simde__m128i x = simde_mm_load_si128((const simde__m128i *)(const void *)(idx + j));
        simde__m256d sum = simde_mm256_setzero_pd();
        for (int a = 0; a < dims; a++) {
            simde__m256d lo = simde_mm256_cvtps_pd(simde_mm_i32gather_ps(boxes->min[a], x, 4));
            simde__m256d hi = simde_mm256_cvtps_pd(simde_mm_i32gather_ps(boxes->max[a], x, 4));
            simde__m256d u = simde_mm256_sub_pd(lo, q[a]), v = simde_mm256_sub_pd(q[a], hi);
            /* max_pd(u, v) is u > v ? u : v, the twin's expression */
            simde__m256d g = simde_mm256_max_pd(u, v);
            g = simde_mm256_mul_pd(simde_mm256_add_pd(g, simde_mm256_andnot_pd(sign, g)), half);
            sum = simde_mm256_add_pd(sum, simde_mm256_mul_pd(g, g));
        }
        simde_mm_storeu_ps((float *)(void *)(dk + j), simde_mm256_cvtpd_ps(sum));
        unsigned in =
            (unsigned)simde_mm256_movemask_pd(simde_mm256_cmp_pd(sum, bound, SIMDE_CMP_LE_OQ));
        if (h - j < 4) in &= (1u << (h - j)) - 1u;
        for (size_t l = 0; l < 4; l++) /* beyond the bound: INT32_MAX (the distances are >= 0) */
            dk[j + l] |= (int32_t)((((in >> l) & 1u) - 1u) & (uint32_t)INT32_MAX);
        kept += (size_t)__builtin_popcount(in);
        simde__m128i id = simde_mm_i32gather_epi32((const int *)(const void *)ids, x, 4);
        simde_mm_storeu_si128((simde__m128i *)(void *)(ik + j),
                              simde_mm_xor_si128(id, simde_mm_set1_epi32(INT32_MIN)));
    }
#else
    for (size_t j = 0; j < h; j++)
        kept += simd_rank_keys(p, max_d2, boxes, at[j], ids[at[j]], dims, &dk[j], &ik[j]);
#endif
    return rank_wide(dk, ik, h, kept, k, out_d2, out_id);
}

/* Hit i's keys before lane j's: d_i < d_j, or d_i == d_j and id_i < id_j (all ones when so). */
SIMD_INLINE simde__m256i rank_before(simde__m256i xd, simde__m256i xi, simde__m256i d,
                                     simde__m256i e) {
    return simde_mm256_or_si256(
        simde_mm256_cmpgt_epi32(xd, d),
        simde_mm256_and_si256(simde_mm256_cmpeq_epi32(xd, d), simde_mm256_cmpgt_epi32(xi, e)));
}

/* The first min(kept, k) of h keyed hits by rank (dk, ik: SIMD_RANK_MAX + 8 entries, 32-byte
 * aligned; the lanes past h are set here to INT32_MAX in both, after every hit). Each hit's rank
 * is counted against all of them eight lanes at a time: two blocks of eight hits held in
 * registers while every hit's keys are broadcast against them, so that no lane sum is needed and
 * nothing but the broadcasts touches memory. (32-bit lanes: a 64-bit key a hit, four lanes,
 * was no faster with AVX2 and SIMDe emulates 64-bit compares without it: NOTES row 230.) */
static size_t rank_wide(int32_t *dk, int32_t *ik, size_t h, size_t kept, size_t k, float *out_d2,
                        uint32_t *out_id) {
    _Alignas(32) int32_t rank[SIMD_RANK_MAX + 8];
    size_t pos[SIMD_RANK_MAX + 1];
    size_t blocks = (h + 7) / 8;
    for (size_t j = h; j < blocks * 8; j++) dk[j] = ik[j] = INT32_MAX;
    size_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
        const simde__m256i *pd = (const simde__m256i *)(const void *)(dk + 8 * b);
        const simde__m256i *pi = (const simde__m256i *)(const void *)(ik + 8 * b);
        simde__m256i xd0 = simde_mm256_load_si256(pd), xd1 = simde_mm256_load_si256(pd + 1);
        simde__m256i xi0 = simde_mm256_load_si256(pi), xi1 = simde_mm256_load_si256(pi + 1);
        simde__m256i r0 = simde_mm256_setzero_si256(), r1 = simde_mm256_setzero_si256();
        for (size_t i = 0; i < h; i++) {
            simde__m256i d = simde_mm256_set1_epi32(dk[i]), e = simde_mm256_set1_epi32(ik[i]);
            r0 = simde_mm256_sub_epi32(r0, rank_before(xd0, xi0, d, e));
            r1 = simde_mm256_sub_epi32(r1, rank_before(xd1, xi1, d, e));
        }
        simde_mm256_store_si256((simde__m256i *)(void *)(rank + 8 * b), r0);
        simde_mm256_store_si256((simde__m256i *)(void *)(rank + 8 * b + 8), r1);
    }
    if (b < blocks) {
        simde__m256i xd = simde_mm256_load_si256((const simde__m256i *)(const void *)(dk + 8 * b));
        simde__m256i xi = simde_mm256_load_si256((const simde__m256i *)(const void *)(ik + 8 * b));
        simde__m256i r = simde_mm256_setzero_si256();
        for (size_t i = 0; i < h; i++)
            r = simde_mm256_sub_epi32(r, rank_before(xd, xi, simde_mm256_set1_epi32(dk[i]),
                                                     simde_mm256_set1_epi32(ik[i])));
        simde_mm256_store_si256((simde__m256i *)(void *)(rank + 8 * b), r);
    }
    for (size_t j = 0; j < h; j++) {
        size_t x = (size_t)rank[j];
        pos[x < k ? x : k] = j;
    }
    return simd_rank_write(dk, ik, pos, kept, k, out_d2, out_id);
}

size_t SIMD_WIDE(simd_point_nearest_runs)(const float p[3], double max_d2, const simd_boxes *boxes,
                                          const uint32_t (*runs)[2], size_t run_count,
                                          const uint32_t *ids, int dims, size_t k, float *out_d2,
                                          uint32_t *out_id) {
    assert(dims == 2 || dims == 3);
    /* the kept ones' keys, as simd_rank_keys makes them; four lanes are written at a time, and
     * the kept ones move up */
    _Alignas(32) int32_t dk[SIMD_RANK_MAX + 8], ik[SIMD_RANK_MAX + 8];
    size_t kept = 0;
#if defined(SIMDE_X86_AVX2_NATIVE)
    const simde__m256d half = simde_mm256_set1_pd(0.5), bound = simde_mm256_set1_pd(max_d2);
    const simde__m256d sign = simde_mm256_set1_pd(-0.0);
    simde__m256d q[3];
    const float *mn[3], *mx[3]; /* (in registers: the stores below may alias *boxes) */
    for (int a = 0; a < 3; a++) {
        q[a] = simde_mm256_set1_pd(a < dims ? (double)p[a] : 0.0);
        mn[a] = boxes->min[a];
        mx[a] = boxes->max[a];
    }
    for (size_t r = 0; r < run_count; r++) {
        for (size_t j = runs[r][0]; j < runs[r][1]; j += 4) {
            simde__m256d sum = simde_mm256_setzero_pd();
            for (int a = 0; a < dims; a++) {
                simde__m256d lo = simde_mm256_cvtps_pd(simde_mm_loadu_ps(mn[a] + j));
                simde__m256d hi = simde_mm256_cvtps_pd(simde_mm_loadu_ps(mx[a] + j));
                simde__m256d u = simde_mm256_sub_pd(lo, q[a]), v = simde_mm256_sub_pd(q[a], hi);
                simde__m256d g = simde_mm256_max_pd(u, v); /* as in simd_point_nearest_rank */
                g = simde_mm256_mul_pd(simde_mm256_add_pd(g, simde_mm256_andnot_pd(sign, g)), half);
                sum = simde_mm256_add_pd(sum, simde_mm256_mul_pd(g, g));
            }
            unsigned in =
                (unsigned)simde_mm256_movemask_pd(simde_mm256_cmp_pd(sum, bound, SIMDE_CMP_LE_OQ));
            if (runs[r][1] - j < 4) in &= (1u << (runs[r][1] - j)) - 1u;
            /* the kept lanes packed to the front (the pack table's first four lanes), all four
             * stored, the kept ones counted (no branch: half the groups keep none) */
            simde__m128i sel = simde_mm_cvtepu8_epi32(
                simde_mm_loadl_epi64((const simde__m128i *)(const void *)&simd_pack_table[in]));
            simde__m128i id = simde_mm_xor_si128(simde_mm_loadu_si128((const void *)(ids + j)),
                                                 simde_mm_set1_epi32(INT32_MIN));
            simde_mm_storeu_ps((float *)(void *)(dk + kept),
                               simde_mm_permutevar_ps(simde_mm256_cvtpd_ps(sum), sel));
            simde_mm_storeu_ps((float *)(void *)(ik + kept),
                               simde_mm_permutevar_ps(simde_mm_castsi128_ps(id), sel));
            kept += (size_t)__builtin_popcount(in);
            if (kept > SIMD_RANK_MAX) return SIZE_MAX;
        }
    }
#else
    for (size_t r = 0; r < run_count; r++)
        for (uint32_t j = runs[r][0]; j < runs[r][1]; j++) {
            if (!simd_rank_keys(p, max_d2, boxes, j, ids[j], dims, &dk[kept], &ik[kept])) continue;
            if (++kept > SIMD_RANK_MAX) return SIZE_MAX;
        }
#endif
    return rank_wide(dk, ik, kept, kept, k, out_d2, out_id);
}

/* ---- box-box, many against many ------------------------------------------------------------- */

/* Rows [a_begin, a_end) of `a` against [b_begin, b_end) of `b`, or, when `within`, each row i
 * against positions (i, b_end) of the same columns. A whole row's 8-slot stores must fit in
 * what is left of the capacity, so a row starts only with its width + SIMD_PAD free. The row
 * is broadcast once and the columns of b stream past it, so short rows cost a few vector
 * operations rather than a call each. */
SIMD_INLINE size_t simd_pairs_kernel(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const simd_boxes *b, size_t b_begin, size_t b_end, int within,
                                     int dims, uint32_t *restrict rows, uint32_t *restrict cols,
                                     size_t capacity, size_t *a_next) {
    simd_box_columns col_ = {{b->min[0], b->min[1], dims == 3 ? b->min[2] : NULL},
                             {b->max[0], b->max[1], dims == 3 ? b->max[2] : NULL}};
    const simd_box_columns *col = &col_;
    const float *restrict amin[3] = {a->min[0], a->min[1], dims == 3 ? a->min[2] : NULL};
    const float *restrict amax[3] = {a->max[0], a->max[1], dims == 3 ? a->max[2] : NULL};
    size_t n = 0, r = a_begin;
    for (; r < a_end; r++) {
        size_t lo = within ? r + 1 : b_begin;
        if (lo >= b_end) continue;
        if (capacity - n < b_end - lo + SIMD_PAD) break;
        simde__m256 qlo[3], qhi[3];
        for (int k = 0; k < dims; k++) {
            qlo[k] = simde_mm256_set1_ps(amin[k][r]);
            qhi[k] = simde_mm256_set1_ps(amax[k][r]);
        }
        simde__m256i row = simde_mm256_set1_epi32((int)(uint32_t)r);
        size_t i = lo;
        for (; i + 8 <= b_end; i += 8) {
            unsigned m = simd_box_mask8(qlo, qhi, col, i, dims);
            simd_store_positions(cols + n, m, (uint32_t)i);
            simde_mm256_storeu_si256((simde__m256i *)(void *)(rows + n), row);
            n += simd_popcount8(m);
        }
        if (i < b_end) {
            unsigned m = simd_box_mask8(qlo, qhi, col, i, dims) & ((1u << (b_end - i)) - 1u);
            simd_store_positions(cols + n, m, (uint32_t)i);
            simde_mm256_storeu_si256((simde__m256i *)(void *)(rows + n), row);
            n += simd_popcount8(m);
        }
    }
    *a_next = r;
    return n;
}

size_t SIMD_WIDE(simd_boxes_vs_boxes_pairs)(const simd_boxes *a, size_t a_begin, size_t a_end,
                                            const simd_boxes *b, size_t b_begin, size_t b_end,
                                            int dims, uint32_t *rows, uint32_t *cols,
                                            size_t capacity, size_t *a_next) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        return simd_pairs_kernel(a, a_begin, a_end, b, b_begin, b_end, 0, 3, rows, cols, capacity,
                                 a_next);
    return simd_pairs_kernel(a, a_begin, a_end, b, b_begin, b_end, 0, 2, rows, cols, capacity,
                             a_next);
}

size_t SIMD_WIDE(simd_boxes_pairs_within)(const simd_boxes *boxes, size_t begin, size_t end,
                                          int dims, uint32_t *rows, uint32_t *cols, size_t capacity,
                                          size_t *next) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        return simd_pairs_kernel(boxes, begin, end, boxes, begin, end, 1, 3, rows, cols, capacity,
                                 next);
    return simd_pairs_kernel(boxes, begin, end, boxes, begin, end, 1, 2, rows, cols, capacity,
                             next);
}

/* ---- exact tests: shared id-list filter ------------------------------------------------------ */

/* Column values at four ids, widened to double. Plain loads rather than vgatherqps: about 2.5x
 * faster on the AMD EPYC (Zen) we measured, and SIMDe emulates gathers this way below AVX2. */
SIMD_INLINE simde__m256d simd_load4(const float *col, const uint32_t id[4]) {
    return simde_mm256_cvtps_pd(simde_mm_set_ps(col[id[3]], col[id[2]], col[id[1]], col[id[0]]));
}

/* Gap on one axis from c to [mn, mx], selected with the scalar twin's priority: below min wins
 * over above max, which matters only for sentinel boxes (min > max). The masks are whole lanes,
 * so and/andnot select like blendv (which SSE2 lacks). */
SIMD_INLINE simde__m256d simd_gap4(simde__m256d c, simde__m256d mn, simde__m256d mx) {
    simde__m256d below = simd_lt_pd(c, mn);
    simde__m256d d = simde_mm256_and_pd(simd_gt_pd(c, mx), simde_mm256_sub_pd(c, mx));
    return simde_mm256_or_pd(simde_mm256_and_pd(below, simde_mm256_sub_pd(mn, c)),
                             simde_mm256_andnot_pd(below, d));
}

/* Query constants shared by the three exact tests, widened to double once per call. */
typedef struct simd_query {
    simde__m256d c[3];  /* sphere centre, or box min for box-sphere */
    simde__m256d mx[3]; /* box max for box-sphere */
    simde__m256d r;     /* radius (sphere-sphere) */
    simde__m256d rr;    /* squared radius (sphere-box) */
} simd_query;

/* The candidate columns: centres or box mins (a), box maxes (b), radii (r). */
typedef struct simd_exact_columns {
    const float *restrict a[3];
    const float *restrict b[3];
    const float *restrict r;
} simd_exact_columns;

enum { SIMD_SPHERE_SPHERE, SIMD_SPHERE_BOX, SIMD_BOX_SPHERE };

/* Pass bits for four ids, with the scalar twin's operations in its order. `test` and dims are
 * literals after inlining. */
SIMD_INLINE unsigned simd_exact4(const simd_query *q, const simd_exact_columns *col,
                                 const uint32_t id[4], int test, int dims) {
    simde__m256d d2 = simde_mm256_setzero_pd(), bound;
    for (int k = 0; k < dims; k++) {
        simde__m256d d;
        if (test == SIMD_SPHERE_SPHERE) {
            d = simde_mm256_sub_pd(q->c[k], simd_load4(col->a[k], id));
        } else if (test == SIMD_SPHERE_BOX) {
            d = simd_gap4(q->c[k], simd_load4(col->a[k], id), simd_load4(col->b[k], id));
        } else {
            d = simd_gap4(simd_load4(col->a[k], id), q->c[k], q->mx[k]);
        }
        d = simde_mm256_mul_pd(d, d);
        d2 = k == 0 ? d : simde_mm256_add_pd(d2, d);
    }
    if (test == SIMD_SPHERE_SPHERE) {
        simde__m256d s = simde_mm256_add_pd(q->r, simd_load4(col->r, id));
        bound = simde_mm256_mul_pd(s, s);
    } else if (test == SIMD_SPHERE_BOX) {
        bound = q->rr;
    } else {
        simde__m256d ri = simd_load4(col->r, id);
        bound = simde_mm256_mul_pd(ri, ri);
    }
    return simd_le_mask_pd(d2, bound);
}

/* Stores the ids of the set lanes of mask, lowest first, into out[0..7]. */
SIMD_INLINE void simd_store_ids(uint32_t *out, unsigned mask, const uint32_t lane[8]) {
#if defined(SIMDE_X86_AVX2_NATIVE)
    simde__m256i v = simde_mm256_loadu_si256((const simde__m256i *)(const void *)lane);
    simde__m256i pos = simde_mm256_cvtepu8_epi32(
        simde_mm_loadl_epi64((const simde__m128i *)(const void *)&simd_pack_table[mask]));
    simde_mm256_storeu_si256((simde__m256i *)(void *)out, simde_mm256_permutevar8x32_epi32(v, pos));
#else
    /* No lane permute below AVX2 (SIMDe would go through memory): a branchless scalar pack. */
    size_t n = 0;
    for (int l = 0; l < 8; l++) {
        out[n] = lane[l];
        n += (mask >> l) & 1u;
    }
#endif
}

/* Filters ids 8 at a time: test, then left-pack the passing ids. A full chunk's ids are copied
 * out first and its 8 slots land at out + n <= ids + i: inside out, and over ids already read
 * when out aliases ids. The tail goes through a local buffer so that nothing past count is read
 * or written. */
SIMD_INLINE size_t simd_exact_filter(const simd_query *q, const simd_exact_columns *col,
                                     const uint32_t *ids, size_t count, int test, int dims,
                                     uint32_t *out) {
    size_t n = 0, i = 0;
    uint32_t lane[8];
    for (; i + 8 <= count; i += 8) {
        memcpy(lane, ids + i, sizeof lane);
        unsigned m =
            simd_exact4(q, col, lane, test, dims) | simd_exact4(q, col, lane + 4, test, dims) << 4;
        simd_store_ids(out + n, m, lane);
        n += simd_popcount8(m);
    }
    if (i < count) {
        size_t rest = count - i;
        uint32_t packed[8];
        /* Repeat a real id in the unused lanes so that their loads stay in bounds. */
        for (size_t l = 0; l < 8; l++) lane[l] = ids[i + (l < rest ? l : 0)];
        unsigned m =
            simd_exact4(q, col, lane, test, dims) | simd_exact4(q, col, lane + 4, test, dims) << 4;
        m &= (1u << rest) - 1u;
        simd_store_ids(packed, m, lane);
        size_t passed = simd_popcount8(m);
        memcpy(out + n, packed, passed * sizeof packed[0]);
        n += passed;
    }
    return n;
}

/* ---- exact tests ----------------------------------------------------------------------------- */

size_t SIMD_WIDE(simd_sphere_vs_spheres)(const float qc[3], float qr, const simd_spheres *spheres,
                                         const uint32_t *ids, size_t count, int dims,
                                         uint32_t *out) {
    assert(dims == 2 || dims == 3);
    simd_exact_columns col = {{spheres->c[0], spheres->c[1], dims == 3 ? spheres->c[2] : NULL},
                              {NULL, NULL, NULL},
                              spheres->r};
    simd_query q;
    for (int k = 0; k < dims; k++) q.c[k] = simde_mm256_set1_pd((double)qc[k]);
    q.r = simde_mm256_set1_pd((double)qr);
    if (dims == 3) return simd_exact_filter(&q, &col, ids, count, SIMD_SPHERE_SPHERE, 3, out);
    return simd_exact_filter(&q, &col, ids, count, SIMD_SPHERE_SPHERE, 2, out);
}

size_t SIMD_WIDE(simd_sphere_vs_boxes)(const float qc[3], float qr, const simd_boxes *boxes,
                                       const uint32_t *ids, size_t count, int dims, uint32_t *out) {
    assert(dims == 2 || dims == 3);
    simd_exact_columns col = {{boxes->min[0], boxes->min[1], dims == 3 ? boxes->min[2] : NULL},
                              {boxes->max[0], boxes->max[1], dims == 3 ? boxes->max[2] : NULL},
                              NULL};
    simd_query q;
    for (int k = 0; k < dims; k++) q.c[k] = simde_mm256_set1_pd((double)qc[k]);
    q.rr = simde_mm256_set1_pd((double)qr * (double)qr);
    if (dims == 3) return simd_exact_filter(&q, &col, ids, count, SIMD_SPHERE_BOX, 3, out);
    return simd_exact_filter(&q, &col, ids, count, SIMD_SPHERE_BOX, 2, out);
}

size_t SIMD_WIDE(simd_box_vs_spheres)(const float qmin[3], const float qmax[3],
                                      const simd_spheres *spheres, const uint32_t *ids,
                                      size_t count, int dims, uint32_t *out) {
    assert(dims == 2 || dims == 3);
    simd_exact_columns col = {{spheres->c[0], spheres->c[1], dims == 3 ? spheres->c[2] : NULL},
                              {NULL, NULL, NULL},
                              spheres->r};
    simd_query q;
    for (int k = 0; k < dims; k++) {
        q.c[k] = simde_mm256_set1_pd((double)qmin[k]);
        q.mx[k] = simde_mm256_set1_pd((double)qmax[k]);
    }
    if (dims == 3) return simd_exact_filter(&q, &col, ids, count, SIMD_BOX_SPHERE, 3, out);
    return simd_exact_filter(&q, &col, ids, count, SIMD_BOX_SPHERE, 2, out);
}

/* ---- selection by a plane -------------------------------------------------------------------- */

/* Left-packs the 8 lanes of v selected by mask (as lane indices in perm) to out[0..7]. */
SIMD_INLINE void simd_pack8(float *out, const float *in, simde__m256i perm, unsigned mask) {
#if defined(SIMDE_X86_AVX2_NATIVE)
    (void)mask;
    simde_mm256_storeu_ps(out, simde_mm256_permutevar8x32_ps(simde_mm256_loadu_ps(in), perm));
#else
    (void)perm;
    size_t n = 0;
    for (int l = 0; l < 8; l++) {
        out[n] = in[l];
        n += (mask >> l) & 1u;
    }
#endif
}

SIMD_INLINE simde__m256i simd_pack_perm(unsigned mask) {
    return simde_mm256_cvtepu8_epi32(
        simde_mm_loadl_epi64((const simde__m128i *)(const void *)&simd_pack_table[mask]));
}

SIMD_INLINE size_t simd_select_kernel(const simd_boxes *src, const uint32_t *src_ids, size_t begin,
                                      size_t end, int dims, int axis, float plane, int side,
                                      float *const dst_min[3], float *const dst_max[3],
                                      uint32_t *dst_ids, size_t at) {
    /* No restrict: src and dst may be two ranges of one list, and the last chunk reads past end
     * into what was just written (lanes it drops). */
    const float *mn[3] = {src->min[0], src->min[1], dims == 3 ? src->min[2] : NULL};
    const float *mx[3] = {src->max[0], src->max[1], dims == 3 ? src->max[2] : NULL};
    float *omn[3] = {dst_min[0], dst_min[1], dims == 3 ? dst_min[2] : NULL};
    float *omx[3] = {dst_max[0], dst_max[1], dims == 3 ? dst_max[2] : NULL};
    const float *key = side == 0 ? mn[axis] : mx[axis];
    simde__m256 p = simde_mm256_set1_ps(plane);
    size_t out = at;
    for (size_t i = begin; i < end; i += 8) {
        simde__m256 v = simde_mm256_loadu_ps(key + i);
        unsigned m = simd_movemask_ps(side == 0 ? simde_mm256_cmp_ps(v, p, SIMDE_CMP_LT_OQ)
                                                : simde_mm256_cmp_ps(v, p, SIMDE_CMP_GT_OQ));
        if (end - i < 8) m &= (1u << (end - i)) - 1u;
        simde__m256i perm = simd_pack_perm(m);
        for (int k = 0; k < dims; k++) {
            simd_pack8(omn[k] + out, mn[k] + i, perm, m);
            simd_pack8(omx[k] + out, mx[k] + i, perm, m);
        }
        simd_store_ids(dst_ids + out, m, src_ids + i);
        out += simd_popcount8(m);
    }
    return out - at;
}

size_t SIMD_WIDE(simd_boxes_select)(const simd_boxes *src, const uint32_t *src_ids, size_t begin,
                                    size_t end, int dims, int axis, float plane, int side,
                                    float *const dst_min[3], float *const dst_max[3],
                                    uint32_t *dst_ids, size_t at) {
    assert(dims == 2 || dims == 3);
    assert(axis >= 0 && axis < dims);
    if (dims == 3)
        return simd_select_kernel(src, src_ids, begin, end, 3, axis, plane, side, dst_min, dst_max,
                                  dst_ids, at);
    return simd_select_kernel(src, src_ids, begin, end, 2, axis, plane, side, dst_min, dst_max,
                              dst_ids, at);
}

/* ---- two small sets, each narrowed to the other's bounds ---------------------------------- */

/* Bit i - begin set when entry i overlaps the box; at most 64 entries. */
SIMD_INLINE uint64_t simd_reach_mask(const float lo[3], const float hi[3],
                                     const simd_box_columns *col, size_t begin, size_t end,
                                     int dims) {
    simde__m256 qlo[3], qhi[3];
    for (int k = 0; k < 3; k++) {
        qlo[k] = simde_mm256_set1_ps(k < dims ? lo[k] : 0.0f);
        qhi[k] = simde_mm256_set1_ps(k < dims ? hi[k] : 0.0f);
    }
    uint64_t m = 0;
    for (size_t i = begin; i < end; i += 8) {
        unsigned c = simd_box_mask8(qlo, qhi, col, i, dims);
        if (end - i < 8) c &= (1u << (end - i)) - 1u;
        m |= (uint64_t)c << (i - begin);
    }
    return m;
}

/* The lanes of v whose bit is set in mask, moved to the front (the rest junk). */
SIMD_INLINE simde__m256i simd_pack_index(unsigned mask) {
    return simde_mm256_cvtepu8_epi32(
        simde_mm_loadl_epi64((const simde__m128i *)(const void *)&simd_pack_table[mask]));
}

/* b's reaching entries are packed into a local block first (its columns and their positions),
 * so that each reaching row of a reads ceil(reaching / 8) chunks instead of every chunk of b.
 * Rows, chunks and lanes keep ascending order, as the scalar twin visits them. */
SIMD_INLINE size_t simd_cross_kernel(const simd_boxes *a, size_t a_begin, size_t a_end,
                                     const float a_lo[3], const float a_hi[3], const simd_boxes *b,
                                     size_t b_begin, size_t b_end, const float b_lo[3],
                                     const float b_hi[3], int dims, uint32_t *restrict rows,
                                     uint32_t *restrict cols) {
    simd_box_columns cb = {{b->min[0], b->min[1], dims == 3 ? b->min[2] : NULL},
                           {b->max[0], b->max[1], dims == 3 ? b->max[2] : NULL}};
    uint64_t mb = simd_reach_mask(a_lo, a_hi, &cb, b_begin, b_end, dims);
    if (mb == 0) return 0;
    simd_box_columns ca = {{a->min[0], a->min[1], dims == 3 ? a->min[2] : NULL},
                           {a->max[0], a->max[1], dims == 3 ? a->max[2] : NULL}};
    uint64_t ma = simd_reach_mask(b_lo, b_hi, &ca, a_begin, a_end, dims);
    if (ma == 0) return 0;
    enum { ROOM = SIMD_CROSS_MAX + 8 };
    SIMDE_ALIGN_TO_32 float pmin[3][ROOM], pmax[3][ROOM];
    SIMDE_ALIGN_TO_32 uint32_t ppos[ROOM];
    size_t kb = 0;
    const simde__m256i lanes = simde_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (uint64_t left = mb; left;) {
        unsigned at = (unsigned)__builtin_ctzll(left) & ~7u;
        unsigned want = (unsigned)(mb >> at) & 0xffu;
        left &= ~((uint64_t)0xff << at);
        simde__m256i idx = simd_pack_index(want);
        size_t i = b_begin + at;
        for (int k = 0; k < dims; k++) {
            simde_mm256_storeu_ps(pmin[k] + kb, simde_mm256_permutevar8x32_ps(
                                                    simde_mm256_loadu_ps(cb.min[k] + i), idx));
            simde_mm256_storeu_ps(pmax[k] + kb, simde_mm256_permutevar8x32_ps(
                                                    simde_mm256_loadu_ps(cb.max[k] + i), idx));
        }
        simde__m256i pos = simde_mm256_add_epi32(lanes, simde_mm256_set1_epi32((int)(uint32_t)i));
        simde_mm256_storeu_si256((simde__m256i *)(void *)(ppos + kb),
                                 simde_mm256_permutevar8x32_epi32(pos, idx));
        kb += simd_popcount8(want);
    }
    simd_box_columns cp = {{pmin[0], pmin[1], pmin[2]}, {pmax[0], pmax[1], pmax[2]}};
    size_t n = 0;
    while (ma) {
        size_t r = a_begin + (size_t)__builtin_ctzll(ma);
        ma &= ma - 1;
        simde__m256 qlo[3], qhi[3];
        for (int k = 0; k < dims; k++) {
            qlo[k] = simde_mm256_set1_ps(ca.min[k][r]);
            qhi[k] = simde_mm256_set1_ps(ca.max[k][r]);
        }
        simde__m256i row = simde_mm256_set1_epi32((int)(uint32_t)r);
        for (size_t j = 0; j < kb; j += 8) {
            unsigned m = simd_box_mask8(qlo, qhi, &cp, j, dims);
            if (kb - j < 8) m &= (1u << (kb - j)) - 1u;
            simde__m256i pos =
                simde_mm256_load_si256((const simde__m256i *)(const void *)(ppos + j));
            simde_mm256_storeu_si256((simde__m256i *)(void *)(cols + n),
                                     simde_mm256_permutevar8x32_epi32(pos, simd_pack_index(m)));
            simde_mm256_storeu_si256((simde__m256i *)(void *)(rows + n), row);
            n += simd_popcount8(m);
        }
    }
    return n;
}

size_t SIMD_WIDE(simd_boxes_cross_pairs)(const simd_boxes *a, size_t a_begin, size_t a_end,
                                         const float a_lo[3], const float a_hi[3],
                                         const simd_boxes *b, size_t b_begin, size_t b_end,
                                         const float b_lo[3], const float b_hi[3], int dims,
                                         uint32_t *rows, uint32_t *cols) {
    assert(dims == 2 || dims == 3);
    assert(a_end - a_begin <= SIMD_CROSS_MAX && b_end - b_begin <= SIMD_CROSS_MAX);
    if (a_end <= a_begin || b_end <= b_begin) return 0;
    if (dims == 3)
        return simd_cross_kernel(a, a_begin, a_end, a_lo, a_hi, b, b_begin, b_end, b_lo, b_hi, 3,
                                 rows, cols);
    return simd_cross_kernel(a, a_begin, a_end, a_lo, a_hi, b, b_begin, b_end, b_lo, b_hi, 2, rows,
                             cols);
}

/* ---- many blocks, each against its own box ------------------------------------------------ */

SIMD_INLINE void simd_blocks_kernel(const float *blocks, const uint32_t *pairs, size_t count,
                                    const float (*qmin)[3], const float (*qmax)[3], int dims,
                                    uint8_t *masks) {
    for (size_t e = 0; e < count; e++) {
        const float *b = blocks + (size_t)pairs[2 * e] * 48;
        const float *lo = qmin[pairs[2 * e + 1]], *hi = qmax[pairs[2 * e + 1]];
        simde__m256 ok =
            simde_mm256_and_ps(simde_mm256_cmp_ps(simde_mm256_set1_ps(lo[0]),
                                                  simde_mm256_loadu_ps(b + 24), SIMDE_CMP_LE_OQ),
                               simde_mm256_cmp_ps(simde_mm256_loadu_ps(b),
                                                  simde_mm256_set1_ps(hi[0]), SIMDE_CMP_LE_OQ));
        for (int k = 1; k < dims; k++) {
            ok = simde_mm256_and_ps(ok, simde_mm256_cmp_ps(simde_mm256_set1_ps(lo[k]),
                                                           simde_mm256_loadu_ps(b + 24 + 8 * k),
                                                           SIMDE_CMP_LE_OQ));
            ok = simde_mm256_and_ps(ok, simde_mm256_cmp_ps(simde_mm256_loadu_ps(b + 8 * k),
                                                           simde_mm256_set1_ps(hi[k]),
                                                           SIMDE_CMP_LE_OQ));
        }
        masks[e] = (uint8_t)simd_movemask_ps(ok);
    }
}

void SIMD_WIDE(simd_blocks_vs_boxes)(const float *blocks, const uint32_t *pairs, size_t count,
                                     const float (*qmin)[3], const float (*qmax)[3], int dims,
                                     uint8_t *masks) {
    assert(dims == 2 || dims == 3);
    if (dims == 3)
        simd_blocks_kernel(blocks, pairs, count, qmin, qmax, 3, masks);
    else
        simd_blocks_kernel(blocks, pairs, count, qmin, qmax, 2, masks);
}

/* ---- bounds of a range --------------------------------------------------------------------- */

/* min_ps(a, b) is a < b ? a : b and max_ps(a, b) is a > b ? a : b, lane by lane: the twin's
 * expressions, in the twin's order. */
/* ---- validation of a caller's batch --------------------------------------------------------- */

/* All ones in the lanes holding a finite value: x - x is 0 exactly then, NaN for infinities and
 * NaNs. */
SIMD_INLINE simde__m256 simd_finite8(simde__m256 x) {
    return simde_mm256_cmp_ps(simde_mm256_sub_ps(x, x), simde_mm256_setzero_ps(), SIMDE_CMP_EQ_OQ);
}

SIMD_INLINE size_t simd_first_invalid_box_kernel(const float *const lo[3], const float *const hi[3],
                                                 size_t begin, size_t end, int dims) {
    size_t i = begin;
    for (; end - i >= 8; i += 8) {
        simde__m256 ok = simde_mm256_castsi256_ps(simde_mm256_set1_epi32(-1));
        for (int k = 0; k < dims; k++) {
            simde__m256 l = simde_mm256_loadu_ps(lo[k] + i), h = simde_mm256_loadu_ps(hi[k] + i);
            ok = simde_mm256_and_ps(ok, simde_mm256_and_ps(simd_finite8(l), simd_finite8(h)));
            ok = simde_mm256_and_ps(ok, simde_mm256_cmp_ps(l, h, SIMDE_CMP_LE_OQ));
        }
        unsigned m = simd_movemask_ps(ok);
        if (m != 0xffu) return i + (size_t)__builtin_ctz(~m);
    }
    return simd_boxes_first_invalid_scalar(lo, hi, i, end, dims);
}

size_t SIMD_WIDE(simd_boxes_first_invalid)(const float *const lo[3], const float *const hi[3],
                                           size_t begin, size_t end, int dims) {
    assert(dims == 2 || dims == 3);
    if (dims == 3) return simd_first_invalid_box_kernel(lo, hi, begin, end, 3);
    return simd_first_invalid_box_kernel(lo, hi, begin, end, 2);
}

SIMD_INLINE size_t simd_first_invalid_sphere_kernel(const float *const c[3], const float *r,
                                                    size_t begin, size_t end, int dims) {
    size_t i = begin;
    for (; end - i >= 8; i += 8) {
        simde__m256 v = simde_mm256_loadu_ps(r + i);
        simde__m256 ok = simde_mm256_and_ps(
            simd_finite8(v), simde_mm256_cmp_ps(v, simde_mm256_setzero_ps(), SIMDE_CMP_GE_OQ));
        for (int k = 0; k < dims; k++)
            ok = simde_mm256_and_ps(ok, simd_finite8(simde_mm256_loadu_ps(c[k] + i)));
        unsigned m = simd_movemask_ps(ok);
        if (m != 0xffu) return i + (size_t)__builtin_ctz(~m);
    }
    return simd_spheres_first_invalid_scalar(c, r, i, end, dims);
}

size_t SIMD_WIDE(simd_spheres_first_invalid)(const float *const c[3], const float *r, size_t begin,
                                             size_t end, int dims) {
    assert(dims == 2 || dims == 3);
    if (dims == 3) return simd_first_invalid_sphere_kernel(c, r, begin, end, 3);
    return simd_first_invalid_sphere_kernel(c, r, begin, end, 2);
}

void SIMD_WIDE(simd_boxes_bounds)(const simd_boxes *boxes, size_t begin, size_t end, float lo[3],
                                  float hi[3]) {
    for (int k = 0; k < 3; k++) {
        const float *mn = boxes->min[k], *mx = boxes->max[k];
        simde__m256 l = simde_mm256_set1_ps(INFINITY), h = simde_mm256_set1_ps(-INFINITY);
        size_t i = begin;
        for (; end - i >= 8; i += 8) {
            l = simde_mm256_min_ps(simde_mm256_loadu_ps(mn + i), l);
            h = simde_mm256_max_ps(simde_mm256_loadu_ps(mx + i), h);
        }
        simde__m128 l4 =
            simde_mm_min_ps(simde_mm256_extractf128_ps(l, 1), simde_mm256_castps256_ps128(l));
        simde__m128 h4 =
            simde_mm_max_ps(simde_mm256_extractf128_ps(h, 1), simde_mm256_castps256_ps128(h));
        simde__m128 l2 = simde_mm_min_ps(simde_mm_movehl_ps(l4, l4), l4);
        simde__m128 h2 = simde_mm_max_ps(simde_mm_movehl_ps(h4, h4), h4);
        simde__m128 l1 = simde_mm_min_ss(simde_mm_shuffle_ps(l2, l2, 1), l2);
        simde__m128 h1 = simde_mm_max_ss(simde_mm_shuffle_ps(h2, h2, 1), h2);
        float a = simde_mm_cvtss_f32(l1), z = simde_mm_cvtss_f32(h1);
        for (; i < end; i++) {
            a = mn[i] < a ? mn[i] : a;
            z = mx[i] > z ? mx[i] : z;
        }
        lo[k] = a;
        hi[k] = z;
    }
}

/* ---- streaming stores ----------------------------------------------------------------------- */

/* Plain stores up to a 32-byte boundary of dst, then whole vectors streamed (8 floats with AVX,
 * 4 without), then plain stores for the rest. */
void SIMD_WIDE(simd_stream_floats)(float *dst, const float *src, size_t count) {
    size_t i = 0;
    while (i < count && ((uintptr_t)(dst + i) & 31u) != 0) {
        dst[i] = src[i];
        i++;
    }
#if defined(SIMDE_X86_AVX_NATIVE)
    for (; i + 8 <= count; i += 8) simde_mm256_stream_ps(dst + i, simde_mm256_loadu_ps(src + i));
#else
    for (; i + 4 <= count; i += 4) simde_mm_stream_ps(dst + i, simde_mm_loadu_ps(src + i));
#endif
    for (; i < count; i++) dst[i] = src[i];
}

void SIMD_WIDE(simd_stream_fence)(void) {
    simde_mm_sfence();
}

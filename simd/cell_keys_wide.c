/* The octree keys' AVX2 variant (see cell_keys.h), four boxes at a time in double, on SIMDe;
 * compiled with -mavx2 only. It agrees bit for bit with the scalar twin in cell_keys.c: the same
 * double operations in the same order, no FMA. Four boxes that need more than the first three
 * levels tried (strict or nearly strict cells) or whose longest side divided by the looseness
 * is subnormal or 0 go through the twin. */
#include <stdbool.h>

#include <simde/x86/avx2.h>

#include "cell_keys_twin.h"

/* Every third bit from the low 21 of each lane, and every second from the low 32. */
static inline simde__m256i spread3(simde__m256i x) {
    x = simde_mm256_and_si256(x, simde_mm256_set1_epi64x(0x1fffff));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 32)),
                              simde_mm256_set1_epi64x(0x1f00000000ffffll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 16)),
                              simde_mm256_set1_epi64x(0x1f0000ff0000ffll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 8)),
                              simde_mm256_set1_epi64x(0x100f00f00f00f00fll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 4)),
                              simde_mm256_set1_epi64x(0x10c30c30c30c30c3ll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 2)),
                              simde_mm256_set1_epi64x(0x1249249249249249ll));
    return x;
}

static inline simde__m256i spread2(simde__m256i x) {
    x = simde_mm256_and_si256(x, simde_mm256_set1_epi64x(0xffffffffll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 16)),
                              simde_mm256_set1_epi64x(0x0000ffff0000ffffll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 8)),
                              simde_mm256_set1_epi64x(0x00ff00ff00ff00ffll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 4)),
                              simde_mm256_set1_epi64x(0x0f0f0f0f0f0f0f0fll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 2)),
                              simde_mm256_set1_epi64x(0x3333333333333333ll));
    x = simde_mm256_and_si256(simde_mm256_or_si256(x, simde_mm256_slli_epi64(x, 1)),
                              simde_mm256_set1_epi64x(0x5555555555555555ll));
    return x;
}

/* The low 32 bits of each 64-bit lane, as four int32. */
static inline simde__m128i low_halves(simde__m256i x) {
    return simde_mm256_castsi256_si128(
        simde_mm256_permutevar8x32_epi32(x, simde_mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}

/* 2^e for each int32 lane e (0 <= e < 1023), as doubles. */
static inline simde__m256d pow2(simde__m128i e) {
    simde__m256i b =
        simde_mm256_add_epi64(simde_mm256_cvtepi32_epi64(e), simde_mm256_set1_epi64x(1023));
    return simde_mm256_castsi256_pd(simde_mm256_slli_epi64(b, 52));
}

/* Keys of four boxes; false (nothing written) when one of them needs the twin. */
static inline bool four_keys(const simd_cell_grid *g, const float *const b[4], const int dims,
                             uint64_t *out) {
    /* Rows lo x y z - hi x y z -; transposed within each half to x, y, z across the boxes. */
    simde__m256 r0 = simde_mm256_load_ps(b[0]), r1 = simde_mm256_load_ps(b[1]);
    simde__m256 r2 = simde_mm256_load_ps(b[2]), r3 = simde_mm256_load_ps(b[3]);
    simde__m256 t0 = simde_mm256_unpacklo_ps(r0, r1), t1 = simde_mm256_unpackhi_ps(r0, r1);
    simde__m256 t2 = simde_mm256_unpacklo_ps(r2, r3), t3 = simde_mm256_unpackhi_ps(r2, r3);
    simde__m256 axis[3] = {simde_mm256_shuffle_ps(t0, t2, 0x44),
                           simde_mm256_shuffle_ps(t0, t2, 0xee),
                           simde_mm256_shuffle_ps(t1, t3, 0x44)};
    const simde__m256d half = simde_mm256_set1_pd(0.5), zero = simde_mm256_setzero_pd();
    simde__m256d umin[3], umax[3], ext = zero;
    simde__m128i ci[3];
    for (int k = 0; k < dims; k++) {
        simde__m256d o = simde_mm256_set1_pd(g->origin[k]), s = simde_mm256_set1_pd(g->scale);
        simde__m256d lo = simde_mm256_cvtps_pd(simde_mm256_castps256_ps128(axis[k]));
        simde__m256d hi = simde_mm256_cvtps_pd(simde_mm256_extractf128_ps(axis[k], 1));
        umin[k] = simde_mm256_mul_pd(simde_mm256_sub_pd(lo, o), s);
        umax[k] = simde_mm256_mul_pd(simde_mm256_sub_pd(hi, o), s);
        ext = simde_mm256_max_pd(simde_mm256_sub_pd(umax[k], umin[k]), ext);
        simde__m256d m = simde_mm256_add_pd(simde_mm256_mul_pd(umin[k], half),
                                            simde_mm256_mul_pd(umax[k], half));
        simde__m256d c =
            simde_mm256_max_pd(simde_mm256_min_pd(m, simde_mm256_set1_pd(g->top)), zero);
        ci[k] = simde_mm256_cvttpd_epi32(c);
    }
    /* The deepest level the longest side allows: depth - ceil(log2(ext / loose)). */
    simde__m256d x = simde_mm256_div_pd(ext, simde_mm256_set1_pd(g->loose));
    simde__m256i pos = simde_mm256_castpd_si256(simde_mm256_cmp_pd(ext, zero, SIMDE_CMP_GT_OQ));
    simde__m256i bits = simde_mm256_castpd_si256(x);
    simde__m256i e = simde_mm256_srli_epi64(bits, 52);
    simde__m256i sub = simde_mm256_and_si256(
        pos, simde_mm256_cmpeq_epi64(e, simde_mm256_setzero_si256())); /* subnormal */
    if (!simde_mm256_testz_si256(sub, sub)) return false;
    simde__m256i whole = simde_mm256_cmpeq_epi64(
        simde_mm256_and_si256(bits, simde_mm256_set1_epi64x(0xfffffffffffffll)),
        simde_mm256_setzero_si256());
    simde__m256i need =
        simde_mm256_add_epi64(simde_mm256_sub_epi64(e, simde_mm256_set1_epi64x(1022)), whole);
    simde__m128i maxl = simde_mm_set1_epi32(g->max_level);
    simde__m128i cand = simde_mm_min_epi32(
        simde_mm_sub_epi32(simde_mm_set1_epi32(g->depth), low_halves(need)), maxl);
    simde__m128i level = simde_mm_blendv_epi8(maxl, cand, low_halves(pos));
    level = simde_mm_max_epi32(level, simde_mm_setzero_si128());
    /* Three levels tested at once. */
    simde__m256i in[3];
    for (int j = 0; j < 3; j++) {
        simde__m128i l = simde_mm_sub_epi32(level, simde_mm_set1_epi32(j));
        simde__m128i shift = simde_mm_sub_epi32(simde_mm_set1_epi32(g->depth), l);
        simde__m256d size = pow2(shift);
        simde__m256d mm = simde_mm256_mul_pd(simde_mm256_set1_pd(g->margin), size);
        simde__m256d ok = simde_mm256_castsi256_pd(simde_mm256_set1_epi64x(-1));
        for (int k = 0; k < dims; k++) {
            simde__m128i cell = simde_mm_sllv_epi32(simde_mm_srlv_epi32(ci[k], shift), shift);
            simde__m256d lo = simde_mm256_cvtepi32_pd(cell);
            simde__m256d a =
                simde_mm256_cmp_pd(umin[k], simde_mm256_sub_pd(lo, mm), SIMDE_CMP_GE_OQ);
            simde__m256d z = simde_mm256_cmp_pd(
                umax[k], simde_mm256_add_pd(simde_mm256_add_pd(lo, size), mm), SIMDE_CMP_LE_OQ);
            ok = simde_mm256_and_pd(ok, simde_mm256_and_pd(a, z));
        }
        simde__m128i root = simde_mm_cmpgt_epi32(simde_mm_set1_epi32(1), l); /* l <= 0 */
        in[j] =
            simde_mm256_or_si256(simde_mm256_castpd_si256(ok), simde_mm256_cvtepi32_epi64(root));
    }
    simde__m256i any = simde_mm256_or_si256(in[0], simde_mm256_or_si256(in[1], in[2]));
    if (simde_mm256_movemask_pd(simde_mm256_castsi256_pd(any)) != 0xf) return false;
    /* The deepest of the three that holds: 0, 1 or 2 levels up. */
    simde__m256i up =
        simde_mm256_andnot_si256(in[0], simde_mm256_blendv_epi8(simde_mm256_set1_epi64x(2),
                                                                simde_mm256_set1_epi64x(1), in[1]));
    simde__m256i lv = simde_mm256_sub_epi64(simde_mm256_cvtepi32_epi64(level), up);
    simde__m256i sh = simde_mm256_sub_epi64(simde_mm256_set1_epi64x(g->depth), lv);
    simde__m256i code = simde_mm256_setzero_si256();
    for (int k = 0; k < dims; k++) {
        simde__m256i cell = simde_mm256_sllv_epi64(
            simde_mm256_srlv_epi64(simde_mm256_cvtepi32_epi64(ci[k]), sh), sh);
        cell = dims == 3 ? spread3(cell) : spread2(cell);
        code = simde_mm256_or_si256(code, simde_mm256_sll_epi64(cell, simde_mm_cvtsi32_si128(k)));
    }
    code = simde_mm256_or_si256(simde_mm256_sll_epi64(code, simde_mm_cvtsi32_si128(g->level_bits)),
                                lv);
    simde_mm256_storeu_si256((simde__m256i *)(void *)out, code);
    return true;
}

static inline void keys_run(const simd_cell_grid *g, const float *boxes, const uint32_t *ids,
                            size_t n, uint64_t *keys, const int dims) {
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *b[4] = {boxes + 8 * (size_t)ids[j], boxes + 8 * (size_t)ids[j + 1],
                             boxes + 8 * (size_t)ids[j + 2], boxes + 8 * (size_t)ids[j + 3]};
        if (!four_keys(g, b, dims, keys + j))
            for (int i = 0; i < 4; i++) keys[j + (size_t)i] = simd_cell_key_one(g, b[i]);
    }
    for (; j < n; j++) keys[j] = simd_cell_key_one(g, boxes + 8 * (size_t)ids[j]);
}

void simd_cell_keys_avx2(const simd_cell_grid *g, const float *boxes, const uint32_t *ids, size_t n,
                         uint64_t *keys) {
    if (g->dims == 3)
        keys_run(g, boxes, ids, n, keys, 3);
    else
        keys_run(g, boxes, ids, n, keys, 2);
}

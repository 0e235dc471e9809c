/* What the wide kernels share, included by each file compiled once per variant (overlap_wide.c,
 * sweep_wide.c): SIMDe, the variant's name pasting, the left-pack tables, popcounts, lane masks
 * and the box-box lane test. Only static inline functions and tables: nothing here crosses a
 * file's boundary. */
#pragma once

#include "overlap_wide.h"

#include <stddef.h>
#include <stdint.h>

/* Without -mavx (the baseline variant) compilers warn that 32-byte vectors are passed
 * differently; no SIMD type crosses this file's boundary, so the ABI change cannot matter. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#include <simde/x86/avx2.h>

#ifndef SIMD_WIDE_VARIANT
#error "the wide kernels are compiled with -DSIMD_WIDE_VARIANT=avx2 or -DSIMD_WIDE_VARIANT=baseline"
#endif

#define SIMD_PASTE_(name, variant) name##_##variant
#define SIMD_PASTE(name, variant) SIMD_PASTE_(name, variant)
#define SIMD_WIDE(name) SIMD_PASTE(name, SIMD_WIDE_VARIANT)

#if defined(__GNUC__)
#define SIMD_INLINE static inline __attribute__((always_inline))
#else
#define SIMD_INLINE static inline
#endif

/* ---- left-pack tables ------------------------------------------------------------------------ */

/* simd_pack_table[m] holds, byte by byte, the lanes whose bit is set in m, lowest first (unused
 * bytes are 0). Built by the preprocessor so that it is constant data, with no first-use race. */
#define SIMD_BIT(m, l) (((m) >> (l)) & 1u)
#define SIMD_POP8(m)                                                                               \
    (SIMD_BIT(m, 0) + SIMD_BIT(m, 1) + SIMD_BIT(m, 2) + SIMD_BIT(m, 3) + SIMD_BIT(m, 4) +          \
     SIMD_BIT(m, 5) + SIMD_BIT(m, 6) + SIMD_BIT(m, 7))
#define SIMD_LANE(m, l)                                                                            \
    ((uint64_t)(SIMD_BIT(m, l) * (l)) << (8u * SIMD_POP8((m) & ((1u << (l)) - 1u))))
#define SIMD_PACK(m)                                                                               \
    (SIMD_LANE(m, 1) | SIMD_LANE(m, 2) | SIMD_LANE(m, 3) | SIMD_LANE(m, 4) | SIMD_LANE(m, 5) |     \
     SIMD_LANE(m, 6) | SIMD_LANE(m, 7))
#define SIMD_PACK4(m) SIMD_PACK(m), SIMD_PACK(m + 1u), SIMD_PACK(m + 2u), SIMD_PACK(m + 3u)
#define SIMD_PACK16(m) SIMD_PACK4(m), SIMD_PACK4(m + 4u), SIMD_PACK4(m + 8u), SIMD_PACK4(m + 12u)
#define SIMD_PACK64(m)                                                                             \
    SIMD_PACK16(m), SIMD_PACK16(m + 16u), SIMD_PACK16(m + 32u), SIMD_PACK16(m + 48u)
#define SIMD_POP4(m) SIMD_POP8(m), SIMD_POP8(m + 1u), SIMD_POP8(m + 2u), SIMD_POP8(m + 3u)
#define SIMD_POP16(m) SIMD_POP4(m), SIMD_POP4(m + 4u), SIMD_POP4(m + 8u), SIMD_POP4(m + 12u)
#define SIMD_POP64(m) SIMD_POP16(m), SIMD_POP16(m + 16u), SIMD_POP16(m + 32u), SIMD_POP16(m + 48u)

static const uint64_t simd_pack_table[256] = {SIMD_PACK64(0u), SIMD_PACK64(64u), SIMD_PACK64(128u),
                                              SIMD_PACK64(192u)};
#if defined(__POPCNT__)
SIMD_INLINE size_t simd_popcount8(unsigned mask) {
    return (size_t)__builtin_popcount(mask);
}
#else
/* Without popcnt, __builtin_popcount becomes a call into libgcc. */
static const uint8_t simd_pop_table[256] = {SIMD_POP64(0u), SIMD_POP64(64u), SIMD_POP64(128u),
                                            SIMD_POP64(192u)};
SIMD_INLINE size_t simd_popcount8(unsigned mask) {
    return simd_pop_table[mask];
}
#endif

/* Stores base + lane for the set lanes of mask, lowest first, into out[0..7] (slots past the
 * popcount get junk: callers leave room for it). */
SIMD_INLINE void simd_store_positions(uint32_t *out, unsigned mask, uint32_t base) {
    simde__m128i bytes =
        simde_mm_loadl_epi64((const simde__m128i *)(const void *)&simd_pack_table[mask]);
#if defined(SIMDE_X86_AVX2_NATIVE)
    simde__m256i lanes = simde_mm256_cvtepu8_epi32(bytes);
    simde_mm256_storeu_si256((simde__m256i *)(void *)out,
                             simde_mm256_add_epi32(lanes, simde_mm256_set1_epi32((int)base)));
#else
    /* SIMDe widens bytes through memory without SSE4.1; the SSE2 unpacks stay in registers. */
    simde__m128i zero = simde_mm_setzero_si128(), b = simde_mm_set1_epi32((int)base);
    simde__m128i words = simde_mm_unpacklo_epi8(bytes, zero);
    simde_mm_storeu_si128((simde__m128i *)(void *)out,
                          simde_mm_add_epi32(simde_mm_unpacklo_epi16(words, zero), b));
    simde_mm_storeu_si128((simde__m128i *)(void *)(out + 4),
                          simde_mm_add_epi32(simde_mm_unpackhi_epi16(words, zero), b));
#endif
}

/* ---- lane masks ------------------------------------------------------------------------------ */

/* Without AVX, SIMDe 0.7.4 lowers the 256-bit movemasks and double compares to scalar code; the
 * native SSE2 forms on the two halves give the same bits. */
SIMD_INLINE unsigned simd_movemask_ps(simde__m256 v) {
#if defined(SIMDE_X86_AVX_NATIVE)
    return (unsigned)simde_mm256_movemask_ps(v);
#else
    return (unsigned)simde_mm_movemask_ps(simde_mm256_castps256_ps128(v)) |
           (unsigned)simde_mm_movemask_ps(simde_mm256_extractf128_ps(v, 1)) << 4;
#endif
}

#if defined(SIMDE_X86_AVX_NATIVE)
#define SIMD_CMP_PD(name, pred, sse)                                                               \
    SIMD_INLINE simde__m256d name(simde__m256d a, simde__m256d b) {                                \
        return simde_mm256_cmp_pd(a, b, pred);                                                     \
    }
#else
#define SIMD_CMP_PD(name, pred, sse)                                                               \
    SIMD_INLINE simde__m256d name(simde__m256d a, simde__m256d b) {                                \
        return simde_mm256_set_m128d(                                                              \
            sse(simde_mm256_extractf128_pd(a, 1), simde_mm256_extractf128_pd(b, 1)),               \
            sse(simde_mm256_castpd256_pd128(a), simde_mm256_castpd256_pd128(b)));                  \
    }
#endif
SIMD_CMP_PD(simd_lt_pd, SIMDE_CMP_LT_OQ, simde_mm_cmplt_pd)
SIMD_CMP_PD(simd_gt_pd, SIMDE_CMP_GT_OQ, simde_mm_cmpgt_pd)

/* Bit l set when a[l] <= b[l]. */
SIMD_INLINE unsigned simd_le_mask_pd(simde__m256d a, simde__m256d b) {
#if defined(SIMDE_X86_AVX_NATIVE)
    return (unsigned)simde_mm256_movemask_pd(simde_mm256_cmp_pd(a, b, SIMDE_CMP_LE_OQ));
#else
    simde__m128d lo =
        simde_mm_cmple_pd(simde_mm256_castpd256_pd128(a), simde_mm256_castpd256_pd128(b));
    simde__m128d hi =
        simde_mm_cmple_pd(simde_mm256_extractf128_pd(a, 1), simde_mm256_extractf128_pd(b, 1));
    return (unsigned)simde_mm_movemask_pd(lo) | (unsigned)simde_mm_movemask_pd(hi) << 2;
#endif
}

/* ---- box-box --------------------------------------------------------------------------------- */

/* Box columns as local restrict pointers: read through `boxes`, every store to hits would force
 * the compiler to reload them. */
typedef struct simd_box_columns {
    const float *restrict min[3];
    const float *restrict max[3];
} simd_box_columns;

/* Bit l set when box i + l overlaps the query on all `dims` axes. */
#define SIMD_BOX_AXIS(k)                                                                           \
    simde_mm256_and_ps(                                                                            \
        simde_mm256_cmp_ps(qlo[k], simde_mm256_loadu_ps(col->max[k] + i), SIMDE_CMP_LE_OQ),        \
        simde_mm256_cmp_ps(simde_mm256_loadu_ps(col->min[k] + i), qhi[k], SIMDE_CMP_LE_OQ))

SIMD_INLINE unsigned simd_box_mask8(const simde__m256 qlo[3], const simde__m256 qhi[3],
                                    const simd_box_columns *col, size_t i, int dims) {
    simde__m256 ok = simde_mm256_and_ps(SIMD_BOX_AXIS(0), SIMD_BOX_AXIS(1));
    if (dims == 3) ok = simde_mm256_and_ps(ok, SIMD_BOX_AXIS(2));
    return simd_movemask_ps(ok);
}

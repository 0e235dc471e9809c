/* Small bit and float helpers with no state: a popcount, the next float up and down, bounds
 * rounded outward and clamped to the float range, and the Morton spreads. The ground layer:
 * includes nothing of the engine. */
#pragma once

#include <float.h>
#include <stdint.h>
#include <string.h>

#include "morton.h"

/* Set bits of x. The engine is built for any x86-64 (only simd/ is built per CPU level), where
 * __builtin_popcountll is a call into libgcc; this is a dozen instructions inline. */
static inline unsigned bits_popcount64(uint64_t x) {
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
    return (unsigned)((x * UINT64_C(0x0101010101010101)) >> 56);
}

/* nextafterf(x, -INFINITY) for x not NaN, without the library call. */
static inline float bits_next_down(float x) {
    if (x == -__builtin_inff()) return x;
    if (x == 0.0f) return -0x1p-149f;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = x > 0.0f ? u - 1u : u + 1u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* nextafterf(x, INFINITY) for x not NaN. */
static inline float bits_next_up(float x) {
    return -bits_next_down(-x);
}

/* x rounded down (bits_round_down) or up (bits_round_up) to a float one step further out, and
 * kept within [-FLT_MAX, FLT_MAX]. Every bound the engine derives from the coordinates (a
 * sphere's box, a query ball's box, a ray's or a nearest search's reach, a box grown by a
 * margin) goes through these: an overflow there would give an infinite bound, and a query box
 * reaching -inf and +inf on every axis overlaps the sentinels (min +inf, max -inf) that pad the
 * box columns and the fields' blocks, which then read as objects. Every finite coordinate lies
 * within the clamped range, so the clamp changes no test of a real entry. */
static inline float bits_round_down(double x) {
    float f = bits_next_down((float)x);
    return f < -FLT_MAX ? -FLT_MAX : (f > FLT_MAX ? FLT_MAX : f);
}

static inline float bits_round_up(double x) {
    return -bits_round_down(-x);
}

/* Morton order: a coordinate's bits spread to every third (every second) bit (simd/morton.h,
 * which the octree keys' kernels share). */
static inline uint64_t bits_spread3(uint64_t x) {
    return simd_spread3(x);
}

static inline uint64_t bits_spread2(uint64_t x) {
    return simd_spread2(x);
}

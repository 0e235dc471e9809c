/* Internal to simd/: what the octree keys' scalar twin (cell_keys.c) and wide variant
 * (cell_keys_wide.c) share. */
#pragma once

#include <stdint.h>
#include <string.h>

#include "cell_keys.h"

/* 2^e as a double, for 0 <= e < 1023 (exact). */
static inline double cell_pow2(int e) {
    uint64_t u = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* The low 21 bits of x to every third bit, and the low 32 to every second. */
static inline uint64_t cell_spread3(uint64_t x) {
    x &= 0x1fffff;
    x = (x | x << 32) & 0x1f00000000ffffull;
    x = (x | x << 16) & 0x1f0000ff0000ffull;
    x = (x | x << 8) & 0x100f00f00f00f00full;
    x = (x | x << 4) & 0x10c30c30c30c30c3ull;
    x = (x | x << 2) & 0x1249249249249249ull;
    return x;
}

static inline uint64_t cell_spread2(uint64_t x) {
    x &= 0xffffffffull;
    x = (x | x << 16) & 0x0000ffff0000ffffull;
    x = (x | x << 8) & 0x00ff00ff00ff00ffull;
    x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
    x = (x | x << 2) & 0x3333333333333333ull;
    x = (x | x << 1) & 0x5555555555555555ull;
    return x;
}

/* One box's key (the twin's arithmetic; box points at its 8 floats). */
uint64_t simd_cell_key_one(const simd_cell_grid *g, const float *box);

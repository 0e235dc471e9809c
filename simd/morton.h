/* Morton order: a coordinate's bits spread to every third (every second) bit, for the keys the
 * octree and the batched queries sort by (engine/bits.h) and the octree keys' kernels
 * (cell_keys.c). Plain C, no SIMD. */
#pragma once

#include <stdint.h>

static inline uint64_t simd_spread3(uint64_t x) { /* 21 bits to every third bit */
    x &= 0x1fffff;
    x = (x | x << 32) & 0x1f00000000ffffull;
    x = (x | x << 16) & 0x1f0000ff0000ffull;
    x = (x | x << 8) & 0x100f00f00f00f00full;
    x = (x | x << 4) & 0x10c30c30c30c30c3ull;
    x = (x | x << 2) & 0x1249249249249249ull;
    return x;
}

static inline uint64_t simd_spread2(uint64_t x) { /* 32 bits to every second bit */
    x &= 0xffffffffull;
    x = (x | x << 16) & 0x0000ffff0000ffffull;
    x = (x | x << 8) & 0x00ff00ff00ff00ffull;
    x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
    x = (x | x << 2) & 0x3333333333333333ull;
    x = (x | x << 1) & 0x5555555555555555ull;
    return x;
}

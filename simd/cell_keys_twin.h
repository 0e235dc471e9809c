/* Internal to simd/: what the octree keys' scalar twin (cell_keys.c) and wide variant
 * (cell_keys_wide.c) share. */
#pragma once

#include <stdint.h>
#include <string.h>

#include "cell_keys.h"
#include "morton.h"

/* 2^e as a double, for 0 <= e < 1023 (exact). */
static inline double cell_pow2(int e) {
    uint64_t u = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* One box's key (the twin's arithmetic; box points at its 8 floats). */
uint64_t simd_cell_key_one(const simd_cell_grid *g, const float *box);

/* The octree keys' scalar twin (see cell_keys.h); the wide variant is cell_keys_wide.c. */
#include "cell_keys.h"

#include <math.h>
#include <string.h>

#include "cell_keys_twin.h"

/* ceil(log2(x)) for a finite x > 0, from the bits (frexp for the subnormals). */
static int ceil_log2(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    int e = (int)(u >> 52 & 0x7ff);
    if (e == 0) {
        double f = frexp(x, &e);
        return f == 0.5 ? e - 1 : e;
    }
    return e - 1023 + ((u & UINT64_C(0xfffffffffffff)) != 0);
}

uint64_t simd_cell_key_one(const simd_cell_grid *g, const float *box) {
    const int dims = g->dims, depth = g->depth;
    double umin[3] = {0, 0, 0}, umax[3] = {0, 0, 0}, c[3] = {0, 0, 0}, ext = 0.0;
    for (int k = 0; k < dims; k++) {
        umin[k] = ((double)box[k] - g->origin[k]) * g->scale;
        umax[k] = ((double)box[4 + k] - g->origin[k]) * g->scale;
        ext = umax[k] - umin[k] > ext ? umax[k] - umin[k] : ext;
        double m = umin[k] * 0.5 + umax[k] * 0.5;
        c[k] = m < 0.0 ? 0.0 : m > g->top ? g->top : m;
    }
    int level = g->max_level;
    if (ext > 0.0) {
        int need = ceil_log2(ext / g->loose);
        if (depth - need < level) level = depth - need;
    }
    if (level < 0) level = 0;
    /* Three levels tested at once, without branches: which one holds the box is a coin toss on
     * most scenes. A looseness of 1.5 or more always stops within three; strict cells may go
     * on up to the root. */
    for (;;) {
        unsigned ok = 0;
        for (int j = 0; j < 3; j++) {
            int l = level - j;
            unsigned in = l <= 0;
            if (l > 0) {
                int shift = depth - l;
                double size = cell_pow2(shift), m = g->margin * size;
                in = 1;
                for (int k = 0; k < dims; k++) {
                    double lo = (double)((uint32_t)c[k] >> shift) * size;
                    in &= (unsigned)(umin[k] >= lo - m) & (unsigned)(umax[k] <= lo + size + m);
                }
            }
            ok |= in << j;
        }
        if (ok) {
            level -= __builtin_ctz(ok);
            break;
        }
        level -= 3;
    }
    int shift = depth - level;
    uint64_t cell[3] = {0, 0, 0};
    for (int k = 0; k < dims; k++) cell[k] = (uint64_t)((uint32_t)c[k] >> shift) << shift;
    uint64_t code =
        dims == 3 ? simd_spread3(cell[0]) | simd_spread3(cell[1]) << 1 | simd_spread3(cell[2]) << 2
                  : simd_spread2(cell[0]) | simd_spread2(cell[1]) << 1;
    return code << g->level_bits | (uint64_t)level;
}

void simd_cell_keys_scalar(const simd_cell_grid *g, const float *boxes, const uint32_t *ids,
                           size_t n, uint64_t *keys) {
    for (size_t j = 0; j < n; j++) keys[j] = simd_cell_key_one(g, boxes + 8 * (size_t)ids[j]);
}

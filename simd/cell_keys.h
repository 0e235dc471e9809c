/* A loose octree's (quadtree's) keys: for each box, the deepest cell that holds it, as a sorted
 * key. The octree's build computes one per object (engine/octree_build.c); this is that
 * arithmetic, with a scalar twin and a wide variant that agree bit for bit. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The grid the keys are on. A box's coordinates map to u = (x - origin[k]) * scale, in double;
 * the cells of level l (root 0) are 2^(depth - l) of u wide and hold a box when it lies within
 * the cell grown by margin * that width on each side. */
typedef struct simd_cell_grid {
    double origin[3];
    double scale;
    double top;    /* 2^depth - 1: box centres are clamped to [0, top] */
    double loose;  /* 1 + 2 * margin */
    double margin; /* the looseness's growth on each side, a share of the cell's width */
    int dims;      /* 2 or 3 */
    int depth;     /* levels the keys tell apart: 19 in 3D, 29 in 2D */
    int max_level; /* the deepest level a box may take, at most depth */
    int level_bits;
} simd_cell_grid;

/* The boxes the keys are made of: box id's floats at boxes[8 * id ...], lo x y z, one unused,
 * hi x y z, one unused, 32-byte aligned (the world's store, engine/store.h). */

/* keys[j] for the box ids[j], j < n: the box's centre's cell at the deepest level (at most
 * max_level) whose cell holds the box, its coordinates padded to the depth and interleaved (x
 * lowest), shifted up by level_bits, or'ed with the level. Boxes finite, lo <= hi. Levels are
 * tried from the deepest that the box's longest side allows, three at a time; the root holds
 * every box. */
void simd_cell_keys(const simd_cell_grid *g, const float *boxes, const uint32_t *ids, size_t n,
                    uint64_t *keys);
void simd_cell_keys_scalar(const simd_cell_grid *g, const float *boxes, const uint32_t *ids,
                           size_t n, uint64_t *keys);
#if defined(__x86_64__) || defined(__i386__)
void simd_cell_keys_avx2(const simd_cell_grid *g, const float *boxes, const uint32_t *ids, size_t n,
                         uint64_t *keys);
#endif

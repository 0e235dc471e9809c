/* A Morton pyramid ("field"): a set of objects sorted along a Morton curve (of their box
 * centres, on a grid over the set's extent), and above them a pyramid of bounds: entry i of
 * level l + 1 bounds entries 8i .. 8i + 7 of level l, up to a level of at most 8 entries.
 * Every level is stored in blocks of 8 entries, each block its six columns of 8 floats in 192
 * contiguous bytes (three cache lines; as six separate columns a block would touch six). A
 * query tests the top block with the 8-wide box kernel and descends into the blocks whose
 * bounds it overlaps, fetching them ahead as it finds them, down to the objects; batched
 * queries go level by level, each level's blocks tested in one kernel call
 * (simd_blocks_vs_boxes). Building it is a sort and a pass per level; it needs no pointers, and
 * a query's path is as short as the pyramid is high (7 levels for 1M objects).
 *
 * It serves the static objects, the objects at rest (statics.h, rest.h) and the queries' field
 * of objects changed since the last step (query.h). It sees boxes by id and a heap, not the
 * world. */
#pragma once

#include "heap.h"
#include "overlap.h"
#include "query_view.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { FIELD_LEVELS_MAX = 12 }; /* 8^11 entries are more than 2^32 ids */

enum { FIELD_BLOCK_FLOATS = 48 }; /* min x, y, z then max x, y, z, 8 entries each */

typedef struct field_level {
    float *blocks; /* count entries in blocks of 8, sentinels after the last; one block more */
    size_t count, capacity; /* capacity in blocks */
} field_level;

typedef struct field {
    field_level level[FIELD_LEVELS_MAX];
    int levels;    /* level[0] holds the objects, level[levels - 1] at most 8 entries */
    uint32_t *ids; /* by position in level 0 */
    size_t ids_capacity;
    size_t *chunk_count; /* the build's per-chunk counts */
    float *chunk_bounds;
    size_t chunk_capacity, chunk_bounds_capacity;
    void *sort; /* the build's keys and ids and the radix sort's room */
    size_t sort_bytes;
    uint64_t rebuilds;
} field;

/* What a field is built from: the objects whose flags[id] is set among ids [0, id_end) (free
 * ids, kind OBJECT_FREE, are skipped), `count` of them. */
typedef struct field_source {
    const world_box *box;
    const uint8_t *kind;
    const uint8_t *flags;
    size_t id_end, count;
    int dims, workers;
} field_source;

/* Builds f anew; its memory is kept from build to build. False on out of memory (the field is
 * then empty). */
bool field_build(field *f, heap *h, const field_source *src);
void field_release(field *f, heap *h);

/* The field as the queries walk it (query_view.h); false when it is empty. */
bool field_query_view(const field *f, query_member member, query_view *out);

/* Entry i's min on axis k is at(l, i)[8k], its max at(l, i)[24 + 8k]. */
static inline float *field_entry(const field_level *l, size_t i) {
    return l->blocks + i / 8 * FIELD_BLOCK_FLOATS + i % 8;
}

/* A block of 8 entries as the box kernel sees it. */
static inline simd_boxes field_block_view(const float *block) {
    return (simd_boxes){{block, block + 8, block + 16}, {block + 24, block + 32, block + 40}};
}

static inline void field_fetch_block(const float *block) {
    __builtin_prefetch(block);
    __builtin_prefetch(block + 16);
    __builtin_prefetch(block + 32);
}

/* A depth-first walk of the field for the box (lo, hi): each block of level 0 that it meets is
 * handed to visit with the lanes that overlap (block index, hit lanes, count); the walk stops
 * when visit returns false. Blocks are visited in order, each fetched ahead. */
typedef bool field_visit(void *ctx, size_t block, const uint32_t *hit, size_t n);

static inline void field_walk(const field *f, const float lo[3], const float hi[3], int dims,
                              field_visit *visit, void *ctx) {
    uint32_t stack[8 * FIELD_LEVELS_MAX];
    uint8_t stack_level[8 * FIELD_LEVELS_MAX];
    uint32_t hit[8 + SIMD_PAD];
    size_t top = 0;
    stack[top] = 0;
    stack_level[top++] = (uint8_t)(f->levels - 1);
    while (top > 0) {
        top--;
        int l = stack_level[top];
        size_t b = stack[top];
        simd_boxes view = field_block_view(f->level[l].blocks + b * FIELD_BLOCK_FLOATS);
        size_t n = simd_box_vs_boxes(lo, hi, &view, 0, 8, dims, hit);
        if (l == 0) {
            if (n && !visit(ctx, b, hit, n)) return;
            continue;
        }
        /* Pushed last first, so that blocks are visited in order. */
        const float *below = f->level[l - 1].blocks;
        for (size_t j = n; j > 0; j--) {
            size_t child = 8 * b + hit[j - 1];
            field_fetch_block(below + child * FIELD_BLOCK_FLOATS);
            stack[top] = (uint32_t)child;
            stack_level[top++] = (uint8_t)(l - 1);
        }
    }
}

/* A batch of queries walks the pyramid level by level together: each level's blocks, for all
 * of the batch, are found (and fetched ahead) before any of them is read, so the misses of a
 * level overlap instead of following one another as a depth-first walk's do. */
typedef struct field_frontier {
    uint32_t block;
    uint32_t query; /* index in the batch */
} field_frontier;

enum { FIELD_FRONTIER_MAX = 1024 }; /* blocks of one level a batch may visit */

/* The batch's walk down to the objects, for queries (qmin[q], qmax[q]), q < n: the frontier
 * ends in at[*cur][0, *count) (entries of level 0, in query order) with each one's hits in
 * masks. False when a level's blocks overflow the frontier. */
bool field_walk_batch(const field *f, int dims, const float (*qmin)[3], const float (*qmax)[3],
                      size_t n, field_frontier (*at)[FIELD_FRONTIER_MAX], int *cur_out,
                      size_t *count_out, uint8_t *masks);

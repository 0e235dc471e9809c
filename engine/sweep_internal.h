/* The sweep method's state and what its files share (sweep.c, sweep_build.c, sweep_search.c).
 *
 * Sort and sweep in the columns of a grid: the grid divides the axes other than x (y and z in
 * 3D, y in 2D) into square columns of side `cell`; each object that fits a cell (no extent
 * above `cell` on any axis) lives in the one column that holds its min corner, and the columns'
 * objects are sorted by min x. Two small objects that overlap then lie in the same column or in
 * neighbouring ones, so each column is swept against itself and against the neighbours ahead of
 * it only (3D: (y, z + 1), (y + 1, z - 1), (y + 1, z), (y + 1, z + 1); 2D: y + 1), and every
 * pair is met exactly once. The few objects larger than a cell are kept apart, after the
 * columns, and each walks a hierarchy of bounds over all the slots (which the queries walk too).
 *
 * Each update keeps the last update's order: the members in it are binned again in that order
 * and sorted by column with a stable radix sort, so that within a column they arrive nearly
 * sorted by x and the insertion sort that follows moves few of them. */
#pragma once

#include "method.h"
#include "tree.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    SWEEP_FANOUT = 8,      /* children of a node of the hierarchy */
    SWEEP_MAX_LEVELS = 32, /* levels of the hierarchy: leaves of one slot and 2^32 slots fit */
    SWEEP_NEIGHBOURS = 4,  /* the columns ahead of a column (3D; one in 2D) */
    SWEEP_LARGE_PER_JOB = 8,
};

/* The columns: cell side, the first cell on each grid axis, and the columns per axis. Cell
 * indices are floor(coordinate / cell) - base, clamped to the grid: a monotone map, so that an
 * object's column and the columns of the objects overlapping it stay neighbours. */
#define SWEEP_NOT_MEMBER UINT32_MAX

typedef struct sweep_grid {
    double cell, inverse; /* inverse: 1 / cell */
    double base[2];
    uint32_t size[2]; /* size[1] is 1 in 2D */
    int axes;         /* 2 in 3D (y, z), 1 in 2D (y) */
} sweep_grid;

typedef struct sweep sweep;

/* What the update's passes and the search's jobs read. */
typedef struct sweep_ctx {
    const method_world *w;
    sweep *s;
    int dims;
    size_t chunks; /* the update's passes: how many chunks */
} sweep_ctx;

struct sweep {
    /* The members in order: [0, small) by column, then by min x within a column; [small,
     * count) the large ones. The current buffer is the order; the other takes the next one. */
    tree_slots slots;
    uint32_t small, count;
    sweep_grid grid;
    float reach;         /* the longest extent on x of a small object */
    uint32_t max_column; /* the most objects in one column */
    uint32_t *col_start; /* column c holds slots [col_start[c], col_start[c + 1]) */
    size_t col_capacity; /* entries of col_start */
    uint32_t *key_of;    /* by id: its key this update, SWEEP_NOT_MEMBER for no member */
    size_t key_of_capacity;
    uint8_t *in_slots; /* by id: in the order */
    size_t in_slots_capacity;
    /* The update's working columns: the ids in their coming order and their column keys, with
     * the radix sort's buffers and histograms; per-chunk counts of the passes. */
    uint64_t *keys, *tmp_keys;
    uint32_t *ids, *tmp_ids;
    size_t sort_capacity;
    void *radix;
    size_t radix_bytes;
    size_t *chunk_count, *chunk_fresh;
    float *chunk_reach;
    double *chunk_lo, *chunk_hi; /* per chunk: least and greatest min on the grid axes */
    size_t chunk_capacity;
    /* The hierarchy of bounds over the slots: level 0 the leaves (leaf slots each), each level
     * above has a node per SWEEP_FANOUT nodes below; bounds[6 * (level_offset[l] + i)] holds
     * node i of level l as min x, y, z, max x, y, z. */
    float *bounds;
    size_t bounds_capacity; /* floats */
    uint32_t level_offset[SWEEP_MAX_LEVELS + 1], level_nodes[SWEEP_MAX_LEVELS];
    int levels;
    uint32_t leaf;
    /* The search: the first column of each column job (then the column count), and the large
     * objects' jobs after them. */
    uint32_t *job_col;
    size_t column_jobs, job_capacity;
    tree_workers workers;
    sweep_ctx ctx;
    bool built;
};

/* Brings the order, the columns and the hierarchy up to date with the members (sweep_build.c).
 * False on out of memory (the state is then empty and rebuilt at the next update). */
bool sweep_rebuild(const method_world *w, sweep *s);
/* The next update starts from no order (the ids in order), as after a failure. */
void sweep_forget_order(sweep *s);
/* Frees what the state holds (not the state). */
void sweep_release(const method_world *w, sweep *s);
/* The search's job (sweep_search.c): column jobs first, then the large objects' jobs. */
void sweep_job(size_t job, int worker, void *ctx);
/* The hits a worker may need at once: room for it before the search. */
size_t sweep_hit_need(const sweep *s);

/* The bounds of node i of level l. */
static inline const float *sweep_node(const sweep *s, int level, size_t i) {
    return s->bounds + 6 * ((size_t)s->level_offset[level] + i);
}

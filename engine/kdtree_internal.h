/* The kd-tree's private header: the tree's state (grouped by the phase that owns it), its nodes
 * and the other types and constants its files share, small helpers inlined by several phases, and
 * the calls from one phase's file into another's. kdtree.c holds the method (update, plan_search,
 * stats, validation), kdtree_build.c the rebuild and measure, kdtree_refit.c the refit,
 * kdtree_search.c the pair search's jobs. */
#pragma once

#include "parallel.h"
#include "tree.h"
#include "method.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NONE WORLD_NONE
#define DEAD TREE_DEAD

enum {
    TASK_CUTOFF = 8192,     /* build subtrees larger than this as separate tasks */
    JOB_OBJECTS = 4096,     /* subtrees up to this many objects are one search job */
    OWN_PIECE = 512,        /* a large node's own objects are searched in pieces this big */
    SLOT_CHUNK = 16384,     /* objects per chunk in the passes over ids and slots, at most */
    SMALL_CHUNK = 4096,     /* ... and at least, from SMALL_FROM slots (kd_slot_chunk_size) */
    SMALL_FROM = 65536,     /* objects from which chunks go below the largest size */
    NODE_CHUNK = 4096,      /* nodes per chunk in the parallel passes over nodes, at most */
    NODE_SMALL_CHUNK = 512, /* ... and at least */
    MIN_NODE_CAPACITY = 64, /* nodes reserved at least */
    LIST_NARROW_MIN = 32,   /* lists longer than this are narrowed to an internal node's slab */
    ARRIVAL_ROOM = 1024,    /* per-worker room for one node's arrivals in a refit, at least */
    MOVE_CHUNK = 4096,      /* moves per chunk in the parallel passes over them */
    TOP_CHUNK = 16384,      /* records per chunk in a partition on all the workers */
    TOP_MIN = 1 << 16,      /* ... which nodes of this many records or more get */
    TOP_TASKS = 64,         /* the most nodes the build's top levels hand on as tasks */
};

typedef struct kd_node {
    float cell_lo[3], cell_hi[3]; /* strict: an object in the node has min > lo, max < hi */
    float plane;
    uint32_t begin, end, sub_end; /* own objects [begin, end), subtree [begin, sub_end) */
    uint32_t child[2];            /* NONE when absent; both NONE for a leaf */
    uint32_t parent;
    uint8_t axis, depth;
    /* Nodes holding more than SWEEP_MIN objects keep them sorted by min on the `sweep` axis, so
     * that a query needs only the run of them whose min lies in [qmin - reach, qmax], where
     * reach is the largest extent among them on that axis; NO_SWEEP otherwise. */
    uint8_t sweep;
    float reach;
    /* Sweep nodes only: the span of their objects along the split axis, so that a descendant's
     * cell beyond it skips them (see ancestors_list). */
    float slab_lo, slab_hi;
} kd_node;

enum { NO_SWEEP = 3, SWEEP_MIN = 32 };

_Static_assert(sizeof(size_t) >= 8, "the refit packs two 32-bit counts in one size_t");

/* 32 bytes: whole records move faster in a build's partitions than 28-byte ones (74 against 56
 * ms at 1e6 objects, NOTES row 239). */
typedef struct kd_record {
    float min[3], max[3];
    uint32_t id, pad;
} kd_record;

/* Per chunk of a partition on all the workers (kdtree_build.c): its records by side (0 the
 * straddlers, 1 left, 2 right), where it writes each side, and the sides' centres' bounds (the
 * root's first, in [0]). */
typedef struct kd_top_part {
    uint32_t n[3], at[3];
    float lo[2][3], hi[2][3];
} kd_top_part;

typedef enum kd_job_kind { JOB_SUBTREE, JOB_OWN } kd_job_kind;

typedef struct kd_job {
    uint32_t node, kind, lo, hi; /* JOB_OWN: own objects [lo, hi) of node */
} kd_job;

/* Per node chunk: measure's partial figures. */
typedef struct kd_measure {
    uint64_t cost;
    uint32_t depth, leaves, internal;
} kd_measure;

typedef struct kdtree kdtree;

/* What the search's jobs read (kept in the tree, for the frame's retries). */
typedef struct kd_search_ctx {
    const method_world *w;
    kdtree *t;
    simd_boxes slots;
    int dims;
} kd_search_ctx;

struct kdtree {
    /* The tree, which every phase reads: the nodes, the objects in tree order and where each
     * object is held. */
    kd_node *nodes;
    size_t node_capacity;
    uint32_t node_count; /* accessed with atomics during the build */
    tree_slots slots;    /* objects in tree order */
    uint32_t *node_of;   /* by id: the node holding it, NONE when not in the tree */
    size_t node_of_capacity;
    uint32_t *slot_node; /* by slot: the node holding it (node_of in tree order, read in order) */
    size_t slot_node_capacity;

    /* Nodes in preorder, fixed between rebuilds (a refit keeps the planes): order[i] is the node
     * at position i and skip[i] the position just past its subtree. Since subtrees are laid out
     * own | left | right, node begins rise with the position, and every pass that lays nodes out
     * is a prefix sum over positions instead of a walk down the tree. */
    uint32_t *order, *skip;
    size_t order_capacity, skip_capacity;
    size_t *scan; /* by position, and one past: see pack_counts */
    size_t scan_capacity;

    /* The parallel passes of the build and the refit: their chunks and per-chunk counts. */
    size_t *chunk_count;
    size_t chunk_capacity;
    size_t slot_chunk; /* ids or slots per chunk in this build's or refit's passes */
    size_t node_chunk; /* nodes per chunk in the passes over nodes (kd_node_chunks) */

    /* Build (kdtree_build.c): the live objects as records, partitioned in place. */
    kd_record *records;
    size_t record_capacity;
    kd_top_part *top_parts;
    size_t top_part_capacity;
    bool overflow;

    /* Refit scratch (kdtree_refit.c), by slot, by node and by mover. */
    uint32_t *dest; /* by slot: the node it moves to during a refit, or DEAD */
    size_t dest_capacity;
    size_t touched_capacity; /* dest_capacity when the build last touched the refit's arrays */
    uint32_t *own_count, *new_begin, *arrive_first, *arrive_end;
    size_t own_count_capacity, new_begin_capacity, arrive_first_capacity, arrive_end_capacity;
    uint64_t *moves, *moves_tmp;
    size_t move_capacity, moves_tmp_capacity;

    /* Measure (kdtree_build.c): the cost figure and the statistics, after every update. */
    kd_measure *parts; /* by node chunk: measure's partial figures */
    size_t part_capacity;
    uint64_t base_cost, cost; /* sum over nodes of own^2, after the last rebuild and now */
    uint32_t depth, leaves, internal_objects;

    /* The update's policy (kdtree.c). */
    bool built;
    bool built_empty; /* the last update was a build of no objects (see tree_idle) */

    /* Pair search (kdtree_search.c): its jobs, the per-worker memory and what the jobs read. */
    kd_job *jobs;
    size_t job_count, job_capacity;
    tree_workers workers;
    kd_search_ctx search;
};

/* What the parallel passes over ids, slots and nodes work on (build and refit). */
typedef struct kd_pass_ctx {
    const method_world *w;
    kdtree *t;
    size_t chunks;   /* passes cut by slots (slot_chunk_positions): how many chunks */
    bool new_ranges; /* kd_set_ranges: also set begin and end from the prefix sums */
    size_t moves;    /* passes over the moves: how many */
    uint32_t most;   /* count_moves: the most arrivals into one node */
} kd_pass_ctx;

/* ---- small helpers, for several phases ------------------------------------------------------ */

static inline bool is_leaf(const kd_node *n) {
    return n->child[0] == NONE && n->child[1] == NONE;
}

static inline bool in_cell(const kd_node *n, const float mn[3], const float mx[3], int dims) {
    for (int k = 0; k < dims; k++)
        if (!(mn[k] > n->cell_lo[k] && mx[k] < n->cell_hi[k])) return false;
    return true;
}

/* node_of covers every id handed out so far; ids new to it read as absent from the tree. */
static inline bool id_tables_reserve(const method_world *w, kdtree *t) {
    return tree_node_of_reserve(w, &t->node_of, &t->node_of_capacity);
}

static inline void position_range(const kdtree *t, size_t chunk, uint32_t *first, uint32_t *last) {
    *first = (uint32_t)(chunk * t->node_chunk);
    *last =
        *first + t->node_chunk < t->node_count ? *first + (uint32_t)t->node_chunk : t->node_count;
}

/* ---- across files --------------------------------------------------------------------------- */

/* kdtree_build.c: the rebuild, the measure, and what the refit shares of their passes. */
size_t kd_slot_chunk_size(size_t slots, int workers);
size_t kd_node_chunks(const method_world *w, kdtree *t, size_t objects);
void kd_set_ranges(size_t chunk, int worker, void *p);
bool kd_measure_tree(const method_world *w, kdtree *t);
broadphase_status kd_rebuild(const method_world *w, kdtree *t);

/* kdtree_refit.c */
broadphase_status kd_refit(const method_world *w, kdtree *t);
/* After a build, what the first refit would make (its arrays, the other slot buffer touched),
 * so that the step after a build does not stand out; best effort (a refit that finds it
 * missing makes it), nothing for a world that only rebuilds. */
void kd_refit_prepare(const method_world *w, kdtree *t);

/* kdtree_search.c: the jobs of the pair search, collected from node n down. */
void kd_collect_jobs(kdtree *t, uint32_t n);
void kd_search_job(size_t job, int worker, void *p);

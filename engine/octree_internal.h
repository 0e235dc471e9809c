/* The octree's private header, shared by its files: the tree's state (struct octree, its fields
 * grouped by phase) and its node, the constants and small geometry helpers (static inline) that
 * several phases use, and the functions one phase calls in another (oc_*). The method itself is
 * described at the top of octree.c. */
#pragma once

#include "overlap.h"
#include "parallel.h"
#include "tree.h"
#include "method.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NONE WORLD_NONE
#define DEAD TREE_DEAD

/* The constants more than one phase reads; each file holds its own. */
enum {
    OWN_PIECE = 512,        /* a large node's own objects are searched in pieces this big */
    SLOT_CHUNK = 16384,     /* objects per chunk in the passes over ids and slots, at most */
    SMALL_CHUNK = 4096,     /* ... and at least (threads_chunk_size cuts between the two) */
    NODE_CHUNK = 2048,      /* nodes per chunk in the parallel passes over nodes, at most */
    NODE_SMALL_CHUNK = 256, /* ... and at least */
    LIFESPAN_FIRST = 4,     /* steps an emptied branch is kept the first time */
    LIFESPAN_CAP = 64,      /* the most steps it is kept, after repeated reuse */
};

/* A reach region is the cell enlarged by the looseness and this fraction of its side on each
 * side: below 1/4, so that with the default looseness the regions of two same-level cells meet
 * only when the cells touch. The slack lets movers that wait in their node (DEFER_SHARE) drift a
 * little before the flat search must step aside. */
#define FLAT_SLACK 0.125

/* Why the flat search cannot run this step (bits of octree.flat_state, set by oc_measure). */
enum {
    FLAT_NEVER = 1,  /* some object sits above a leaf, or a leaf is too crowded to be one job */
    FLAT_ESCAPE = 2, /* some leaf's bounds left its reach region */
    FLAT_STALE = 4,  /* some node holding objects is not in the list: make it again */
};

/* The search reads the first cache line of every node it visits (bounds, ranges, which
 * children are live) and the second for the children's indices; the rest is the refit's. */
typedef struct oc_node {
    float lo[3], hi[3];           /* bounds of the subtree's objects (+inf / -inf if empty) */
    uint32_t begin, end, sub_end; /* own objects [begin, end), subtree [begin, sub_end) */
    uint8_t live;                 /* bit j: child j is live and holds objects (last step) */
    bool leaf;                    /* no live children, as of the last step */
    uint8_t level;
    bool spare; /* kept for reuse, holds nothing, skipped by the search */
    uint32_t parent;
    uint32_t child[8];          /* NONE when absent; spare children stay linked */
    float own_lo[3], own_hi[3]; /* bounds of the node's own objects */
    uint32_t cell[3];           /* cell coordinates at this level */
    /* The region, in world coordinates, of boxes the cell holds, rounded inward to floats: a
     * box inside it is held (the exact test in grid units would agree), so the refit keeps
     * such a box in a leaf without converting it to grid units. */
    float hold_lo[3], hold_hi[3];
    bool split_failed; /* over leaf_size, yet nothing could sink: retried when objects arrive */
    uint16_t life;     /* steps left, counted on a spare branch's top node */
    uint16_t lifespan; /* doubles each time the branch is reused */
    uint32_t list_gen; /* a leaf of the flat search's list when octree.fl_gen (0: never) */
    float reach_lo[3], reach_hi[3]; /* the hold region and FLAT_SLACK of a side more */
} oc_node;

typedef enum oc_job_kind { JOB_SUBTREE, JOB_OWN, JOB_CROSS } oc_job_kind;

typedef struct oc_job {
    uint32_t node, kind, lo, hi; /* JOB_OWN: own objects [lo, hi) of node; JOB_CROSS: nodes */
} oc_job;

typedef struct octree octree;

/* What the search's jobs read (kept in the tree, for the frame's retries). */
typedef struct oc_search_ctx {
    const method_world *w;
    octree *t;
    simd_boxes slots;
    int dims;
} oc_search_ctx;

/* The tree, its fields in groups by phase (kept in the order they have always had). */
struct octree {
    /* Nodes: the pool (live, spare and free ones) and the free list. */
    oc_node *nodes;
    size_t node_capacity;
    uint32_t node_count; /* nodes handed out (live, spare or free); atomics during the build */
    bool overflow;
    uint32_t *free_nodes;
    size_t free_count, free_capacity;

    tree_slots slots; /* the objects in tree order (tree.h) */

    /* Root geometry: u = (x - origin) * scale in grid units; the root spans [0, 2^depth). */
    double origin[3], side, scale;
    int dims, nchild, depth, max_level;
    double margin; /* (looseness - 1) / 2: a cell's enlargement on each side, in cell sides */
    double cell_size[32], cell_margin[32], top; /* per level, in grid units; top = 2^depth - 1 */

    /* Build (octree_build.c): keys and ids, sorted together. */
    uint64_t *keys, *keys_tmp;
    uint32_t *vals, *vals_tmp;
    size_t key_capacity;
    /* The parallel passes of the build and the refit: the radix sorts' scratch, counts and
     * bounds per chunk, and the chunks' sizes. */
    void *hist;
    size_t hist_bytes;
    size_t *chunk_count;
    size_t refit_chunk;  /* slots per chunk in this refit's passes (refit_chunk_size) */
    size_t id_chunk;     /* ids per chunk in the build's passes over ids */
    size_t node_chunk;   /* nodes per chunk in the passes over nodes (node_chunks) */
    float *chunk_bounds; /* 6 per chunk */
    size_t chunk_capacity, chunk_bounds_capacity;

    /* Where the objects are: by id, by slot, and where the refit sends them. */
    uint32_t *node_of; /* by id: the node holding it, NONE when not in the tree */
    size_t node_of_capacity;
    uint32_t *dest; /* by slot: the node it belongs in now, or DEAD */
    size_t dest_capacity;
    size_t touched_capacity; /* dest_capacity when the build last touched the refit's arrays */
    uint32_t *slot_node;     /* by slot: the node holding it */
    size_t slot_node_capacity;
    uint32_t *add_dest; /* by entry of w->added: the node it goes to, or NONE */
    size_t add_dest_capacity;

    /* Refit scratch (octree_refit.c), by node, then the moves and the splits' objects. */
    uint32_t *own_count, *new_begin, *arrive_first, *arrivals, *redirect;
    size_t by_node_capacity;
    uint32_t *redirected; /* nodes whose redirect is set, to reset */
    size_t redirected_count;
    uint32_t *splits; /* nodes to split this step; the window's nodes while one is laid out */
    size_t split_count;
    uint64_t *moves, *moves_tmp; /* source (slot, or entry of added | TREE_ADDED) << 32 | node;
                                    in a pair of windows' layout, moves holds the entry of
                                    moves_tmp in place of the source */
    size_t move_capacity, move_count, move_chunk; /* move_chunk: moves per chunk of a pass */
    uint32_t *refs, *refs_tmp; /* objects being sunk by a split: slot, or slot_count + entry */
    size_t ref_capacity;

    /* The search (octree_search.c): the tree search's jobs and the workers' memory. */
    oc_job *jobs;
    size_t job_count, job_capacity;
    tree_workers workers;

    /* State between steps, and what oc_measure finds for the statistics and the next steps. */
    bool built, escaped, urgent;  /* urgent: some object must change node this step */
    bool beyond;                  /* a mover that would wait is outside its node's reach region */
    uint32_t tighten_turn;        /* relayouts for additions or removals: the part they tighten */
    uint32_t window_clock;        /* steps since a window was laid out (octree_refit.c) */
    uint32_t window_next;         /* the pair of windows that comes next */
    uint32_t window_steps;        /* steps that could lay windows out */
    uint32_t window_pairs;        /* pairs of windows found by the last turn */
    uint32_t window_tightened[8]; /* by window (cell index): window_steps when last tightened */
    uint64_t window_layouts;      /* pairs of windows laid out, light and full relayouts */
    uint64_t light_layouts, full_layouts;
    /* A window tightened a step ahead of its turn (octree_windows.c): its slots [ahead_begin,
     * ahead_end) hold marks (dest) that the next refit keeps while their leaves hold the boxes;
     * none when the range is empty. ahead_kept: the marks that refit kept. */
    uint32_t ahead_top, ahead_other, ahead_begin, ahead_end; /* (ahead_other: its pair's) */
    size_t ahead_kept;
    bool built_empty;         /* the last update was a build of no objects (see tree_idle) */
    uint64_t base_cost, cost; /* sum over nodes of own^2, after the last rebuild and now */
    uint32_t live_nodes, leaves, max_depth_seen, internal_objects;
    uint64_t growths;
    int task_levels;     /* measure: nodes above this level finish their children as tasks */
    bool prefetch_write; /* measure: node lines taken for writing ahead (prefetch_node_write) */

    /* The flat search (octree_flat.c makes the list): leaves fl_leaf[0, fl_leaves) in slot order;
     * leaf i may meet the later leaves fl_cand[fl_first[i], fl_first[i + 1]) (indices into
     * fl_leaf); job j covers leaves [fl_job[j], fl_job[j + 1]). */
    unsigned flat_state; /* FLAT_* bits from the last measure */
    uint32_t fl_gen;     /* nodes whose list_gen equals this are in the list */
    uint32_t *fl_leaf, *fl_first, *fl_cand, *fl_job;
    size_t fl_leaves, fl_jobs;
    size_t fl_leaf_capacity, fl_first_capacity, fl_cand_capacity, fl_job_capacity;
    uint32_t *fl_index; /* scratch, by node: its leaf index, or NONE */
    float *fl_region;   /* scratch, by node: 6 floats, the union of its leaves' reach regions */
    size_t fl_index_capacity, fl_region_capacity;
    bool fl_failed; /* out of memory while making the list */
    uint64_t flat_searches, flat_builds;
    oc_search_ctx search; /* what the jobs read, for the frame's retries */
};

/* What the parallel passes of the build and the refit read. */
typedef struct oc_ctx {
    const method_world *w;
    octree *t;
} oc_ctx;

/* ---- geometry and nodes, for every phase -------------------------------------------------- */

static inline void to_grid(const octree *t, const float mn[3], const float mx[3], double umin[3],
                           double umax[3]) {
    for (int k = 0; k < t->dims; k++) {
        umin[k] = ((double)mn[k] - t->origin[k]) * t->scale;
        umax[k] = ((double)mx[k] - t->origin[k]) * t->scale;
    }
}

/* Whether the box's centre lies outside node n's cell, found in floats as n's region less the
 * margin `inset` (the level's cell_margin in world units); step: -1, 0 or 1 along each axis,
 * towards the cell that holds it (oc_tighten_range). */
static inline bool oc_centre_steps(const octree *t, const oc_node *n, float inset,
                                   const float mn[3], const float mx[3], int step[3]) {
    bool out = false;
    for (int k = 0; k < 3; k++) {
        step[k] = 0;
        if (k >= t->dims) continue;
        float centre = 0.5f * mn[k] + 0.5f * mx[k];
        step[k] = centre < n->hold_lo[k] + inset ? -1 : centre > n->hold_hi[k] - inset ? 1 : 0;
        out |= step[k] != 0;
    }
    return out;
}

/* Is live node d in the subtree of live node top? Its cell lies inside top's: a live node's
 * cell is its parent's halved (the tree's invariant), so this is the walk up its parents
 * without their loads. */
static inline bool oc_in_subtree(const octree *t, uint32_t d, uint32_t top) {
    const oc_node *a = &t->nodes[d], *b = &t->nodes[top];
    if (a->level < b->level) return false;
    int up = a->level - b->level;
    bool in = true;
    for (int k = 0; k < t->dims; k++) in &= a->cell[k] >> up == b->cell[k];
    return in;
}

/* Node n's cell enlarged by the looseness and `extra` of its side (octree_build.c). */
void oc_cell_region(const octree *t, const oc_node *n, double extra, float lo[3], float hi[3]);

static inline void hold_region(const octree *t, oc_node *n) {
    oc_cell_region(t, n, 0.0, n->hold_lo, n->hold_hi);
    oc_cell_region(t, n, FLAT_SLACK, n->reach_lo, n->reach_hi);
}

/* Does the cell at `level` hold the box (inside it once enlarged by the looseness)? */
static inline bool holds(const octree *t, int level, const uint32_t cell[3], const double umin[3],
                         const double umax[3]) {
    double size = t->cell_size[level], m = t->cell_margin[level];
    for (int k = 0; k < t->dims; k++) {
        double lo = (double)cell[k] * size;
        if (!(umin[k] >= lo - m && umax[k] <= lo + size + m)) return false;
    }
    return true;
}

/* The cell at `level` containing the box's centre (clamped into the root). */
static inline void centre_cell(const octree *t, int level, const double umin[3],
                               const double umax[3], uint32_t cell[3]) {
    double top = t->top;
    for (int k = 0; k < 3; k++) {
        double c = k < t->dims ? umin[k] * 0.5 + umax[k] * 0.5 : 0.0;
        c = c < 0.0 ? 0.0 : c > top ? top : c;
        cell[k] = (uint32_t)((uint32_t)c >> (t->depth - level));
    }
}

/* The child slot of the level + 1 cell `sub` within its parent. */
static inline int child_slot(const octree *t, const uint32_t sub[3]) {
    int j = 0;
    for (int k = 0; k < t->dims; k++) j |= (int)(sub[k] & 1u) << k;
    return j;
}

static inline void node_init(oc_node *n, uint32_t parent, int level, const uint32_t cell[3]) {
    memset(n, 0, sizeof *n);
    for (int k = 0; k < 3; k++) {
        n->lo[k] = n->own_lo[k] = n->hold_lo[k] = INFINITY; /* no region until set */
        n->hi[k] = n->own_hi[k] = n->hold_hi[k] = -INFINITY;
        n->cell[k] = cell[k];
    }
    n->parent = parent;
    n->level = (uint8_t)level;
    for (int j = 0; j < 8; j++) n->child[j] = NONE;
    n->lifespan = LIFESPAN_FIRST;
}

/* Sets the chunks of this pass over the nodes (each node's work is its own objects, about a
 * leaf's worth) and returns their count. */
static inline size_t node_chunks(const method_world *w, octree *t) {
    t->node_chunk = threads_chunk_size(t->node_count, w->workers, NODE_SMALL_CHUNK, NODE_CHUNK);
    return threads_chunk_count(t->node_count, t->node_chunk);
}

static inline bool id_tables_reserve(const method_world *w, octree *t) {
    return tree_node_of_reserve(w, &t->node_of, &t->node_of_capacity);
}

/* ---- across the phases ---------------------------------------------------------------------- */

/* octree_build.c: builds the tree from scratch with a root of at least min_side. */
broadphase_status oc_rebuild(const method_world *w, octree *t, double min_side);
/* octree_build.c: subtree ends and bounds for the whole tree (own bounds first when `own`), the
 * statistics and the flat search's state. */
void oc_measure(octree *t, int workers, bool own);

/* octree_refit.c: REFIT; *escaped (and nothing changed) when an object left the root. */
broadphase_status oc_refit(const method_world *w, octree *t, bool *escaped);
/* After a build, what the first refit would make (its arrays, and the first slice of the other
 * slot buffer touched), so that the step after a build does not stand out; best effort (a
 * refit that finds it missing makes it), nothing for a world that only rebuilds. */
void oc_refit_prepare(const method_world *w, octree *t);
/* octree_refit.c: arrays indexed by node, for node_capacity nodes. */
bool oc_by_node_reserve(const method_world *w, octree *t);
/* octree_refit.c: tightens slots [begin, end) (see tighten there); with windows (not NONE),
 * only into leaves of their subtrees. Returns the movers it made. */
size_t oc_tighten_range(octree *t, size_t begin, size_t end, uint32_t window, uint32_t window2);
/* octree_in_place.c: lays the subtrees under tops[0, top_count) (in slot order) out anew in the
 * current slot buffer, each keeping its total, for the moves moves_tmp[0, moved) (slot order;
 * source << 32 | a live leaf in the same subtree). With may_refuse, returns false without
 * changing the tree when one part would hold most of the slots (the caller copies instead). */
bool oc_lay_out_in_place(const method_world *w, octree *t, const uint32_t *tops, size_t top_count,
                         size_t moved, bool may_refuse);
/* octree_windows.c: a refit step whose movers may wait: every few steps lays the next pair of
 * windows out anew in place, and the step before, tightens the window that turn will. `ahead`:
 * the window whose marks this step's refit kept (tightened at the step before), or NONE. False
 * when a light relayout is due instead (oc_refit runs it). */
bool oc_window_turn(const method_world *w, octree *t, uint32_t ahead);

/* octree_search.c: the search's jobs (threads_job callbacks over an oc_search_ctx). */
void oc_search_job(size_t job, int worker, void *p);
void oc_flat_job(size_t job, int worker, void *p);
/* octree_search.c: counts the tree search's jobs below node n, and writes them when `write`. */
void oc_collect_jobs(octree *t, uint32_t n, bool write);

/* octree_flat.c: makes the flat search's list for the tree as measured. False on out of memory. */
bool oc_flat_build(const method_world *w, octree *t);

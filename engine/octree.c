/* The octree method, a quadtree in 2D: the same code with 2^dims children per node.
 *
 * Geometry. The root is a cube (a square) whose side is a power of two, covering every object;
 * positions are measured in grid units, u = (x - origin) * scale, so that the root spans
 * [0, 2^KEY_DEPTH) and a cell at level l spans 2^(KEY_DEPTH - l) units. A cell holds an object
 * when the object's box lies inside the cell enlarged by `looseness` about its centre (1: the
 * strict octree, where an object on a cell border stays in the parent). Each object belongs to
 * the deepest cell, among those containing its centre, that holds it.
 *
 * Build. Every object's key is its cell's coordinates interleaved (Morton order, padded to the
 * deepest level) followed by its level; keys are computed in parallel and radix-sorted, after
 * which every node's objects, and every subtree's, are one contiguous run: the nodes are found
 * top-down by binary searches on the sorted keys, in parallel tasks. A node splits only while
 * it holds more than leaf_size objects; empty children are not made.
 *
 * Pairs. Each node's objects against each other and against the ancestors' objects that reach
 * the node's subtree (the parent-to-child list, filtered by the subtree's bounds, which are
 * measured every step, so pruning never depends on cell arithmetic). When every object sits in
 * a leaf, as in most scenes, the search walks a flat list instead: the leaves in slot order,
 * each with the later leaves it may meet (those whose reach regions, the cells enlarged by the
 * looseness and a slack, meet its own). The list is made when the set of leaves changes, which
 * is rare, and used while every leaf's measured bounds stay inside its reach region; otherwise
 * the step searches the tree as above.
 *
 * Refit. An object still held by its cell stays; one that left climbs to the first ancestor
 * that holds it, then sinks as deep as it fits. Nodes holding more than leaf_size objects split
 * (reviving kept children first); subtrees holding no more than leaf_size merge into their
 * root. Emptied branches are kept as spares for a lifespan of steps, which doubles each time a
 * branch is reused (up to LIFESPAN_CAP), so that traffic through a region does not churn nodes.
 * An object leaving the root makes the root grow (a rebuild with a root at least twice as
 * large). */
#include "clock.h"
#include "bits.h"
#include "octree.h"

#include "overlap.h"
#include "parallel.h"
#include "query.h"
#include "tree.h"
#include "world.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE WORLD_NONE
#define DEAD TREE_DEAD

enum {
    LEVEL_BITS = 5,         /* a key's low bits: the level */
    TASK_CUTOFF = 8192,     /* build subtrees larger than this as separate tasks */
    JOB_OBJECTS = 4096,     /* subtrees up to this many objects are one search job */
    OWN_PIECE = 512,        /* a large node's own objects are searched in pieces this big */
    SLOT_CHUNK = 16384,     /* objects per chunk in the passes over ids and slots, at most */
    SMALL_CHUNK = 4096,     /* ... and at least (threads_chunk_size cuts between the two) */
    SMALL_BELOW = 65536,    /* the refit's chunks stay SMALL_CHUNK below this (NOTES, 89-90) */
    NODE_CHUNK = 2048,      /* nodes per chunk in the parallel passes over nodes, at most */
    NODE_SMALL_CHUNK = 256, /* ... and at least */
    MIN_NODE_CAPACITY = 64, /* nodes reserved at least */
    LIST_NARROW_MIN = 32,   /* lists longer than this are narrowed to a node's own objects */
    LIFESPAN_FIRST = 4,     /* steps an emptied branch is kept the first time */
    LIFESPAN_CAP = 64,      /* the most steps it is kept, after repeated reuse */
    DEFER_SHARE = 64,       /* movers wait while they are at most 1/64 of the objects */
    TIGHTEN_EVERY = 8,      /* relayouts for added objects alone that tighten: 1 in this many */
    FLAT_JOBS_LEAST = 64,   /* the flat search's jobs: runs of leaves holding 1/64 of the */
    FLAT_JOB_MIN = 256,     /* objects, but at least this many */
    FLAT_JOB_MAX = 2048,    /* and at most this many */
    FLAT_AHEAD = 2,         /* the flat search fetches the nodes of the leaf this far ahead */
};

/* A reach region is the cell enlarged by the looseness and this fraction of its side on each
 * side: below 1/4, so that with the default looseness the regions of two same-level cells meet
 * only when the cells touch. The slack lets movers that wait in their node (DEFER_SHARE) drift a
 * little before the flat search must step aside. */
#define FLAT_SLACK 0.125

/* Why the flat search cannot run this step (bits of octree.flat_state, set by measure). */
enum {
    FLAT_NEVER = 1,  /* some object sits above a leaf, or a leaf is too crowded to be one job */
    FLAT_ESCAPE = 2, /* some leaf's bounds left its reach region */
    FLAT_STALE = 4,  /* some node holding objects is not in the list: make it again */
};

/* Levels the keys can tell apart: 3 * 19 + 5 and 2 * 29 + 5 bits fit in 64. */
static int key_depth(int dims) {
    return dims == 3 ? 19 : 29;
}

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
typedef struct search_ctx {
    broadphase_world *w;
    octree *t;
    simd_boxes slots;
    int dims;
} search_ctx;

struct octree {
    oc_node *nodes;
    size_t node_capacity;
    uint32_t node_count; /* nodes handed out (live, spare or free); atomics during the build */
    bool overflow;
    uint32_t *free_nodes;
    size_t free_count, free_capacity;

    tree_slots slots;

    /* Root geometry: u = (x - origin) * scale in grid units; the root spans [0, 2^depth). */
    double origin[3], side, scale;
    int dims, nchild, depth, max_level;
    double margin; /* (looseness - 1) / 2: a cell's enlargement on each side, in cell sides */
    double cell_size[32], cell_margin[32], top; /* per level, in grid units; top = 2^depth - 1 */

    /* Build: keys and ids, sorted together. */
    uint64_t *keys, *keys_tmp;
    uint32_t *vals, *vals_tmp;
    size_t key_capacity;
    void *hist;
    size_t hist_bytes;
    size_t *chunk_count;
    size_t refit_chunk;  /* slots per chunk in this refit's passes (refit_chunk_size) */
    size_t id_chunk;     /* ids per chunk in the build's passes over ids */
    size_t node_chunk;   /* nodes per chunk in the passes over nodes (node_chunks) */
    float *chunk_bounds; /* 6 per chunk */
    size_t chunk_capacity, chunk_bounds_capacity;

    uint32_t *node_of; /* by id: the node holding it, NONE when not in the tree */
    size_t node_of_capacity;
    uint32_t *dest; /* by slot: the node it belongs in now, or DEAD */
    size_t dest_capacity;
    uint32_t *slot_node; /* by slot: the node holding it */
    size_t slot_node_capacity;
    uint32_t *add_dest; /* by entry of w->added: the node it goes to, or NONE */
    size_t add_dest_capacity;

    /* Refit scratch, by node. */
    uint32_t *own_count, *new_begin, *arrive_first, *arrivals, *redirect;
    size_t by_node_capacity;
    uint32_t *redirected; /* nodes whose redirect is set, to reset */
    size_t redirected_count;
    uint32_t *splits; /* nodes to split this step */
    size_t split_count;
    uint64_t *moves, *moves_tmp; /* source (slot, or entry of added | TREE_ADDED) << 32 | node */
    size_t move_capacity, move_count, move_chunk; /* move_chunk: moves per chunk of a pass */
    uint32_t *refs, *refs_tmp; /* objects being sunk by a split: slot, or slot_count + entry */
    size_t ref_capacity;

    oc_job *jobs;
    size_t job_count, job_capacity;
    tree_workers workers;

    bool built, escaped, urgent; /* urgent: some object must change node this step */
    uint32_t untightened;        /* relayouts since the last that tightened the leaves */
    bool built_empty;            /* the last update was a build of no objects (see tree_idle) */
    uint64_t base_cost, cost;    /* sum over nodes of own^2, after the last rebuild and now */
    uint32_t live_nodes, leaves, max_depth_seen, internal_objects;
    uint64_t growths;
    int task_levels;     /* measure: nodes above this level finish their children as tasks */
    bool prefetch_write; /* measure: node lines taken for writing ahead (prefetch_node_write) */

    /* The flat search: leaves fl_leaf[0, fl_leaves) in slot order; leaf i may meet the later
     * leaves fl_cand[fl_first[i], fl_first[i + 1]) (indices into fl_leaf); job j covers leaves
     * [fl_job[j], fl_job[j + 1]). */
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
    search_ctx search;
};

/* ---- geometry ---------------------------------------------------------------------------- */

/* The key of a cell: its coordinates padded to the deepest level, interleaved (x lowest), then
 * the level. Sorting by key lists a node's own objects, then each child's subtree in order. */
static uint64_t cell_key(const octree *t, int level, const uint32_t cell[3]) {
    int shift = t->depth - level;
    uint64_t m;
    if (t->dims == 3)
        m = bits_spread3((uint64_t)cell[0] << shift) |
            bits_spread3((uint64_t)cell[1] << shift) << 1 |
            bits_spread3((uint64_t)cell[2] << shift) << 2;
    else
        m = bits_spread2((uint64_t)cell[0] << shift) | bits_spread2((uint64_t)cell[1] << shift)
                                                           << 1;
    return m << LEVEL_BITS | (uint64_t)level;
}

static void to_grid(const octree *t, const float mn[3], const float mx[3], double umin[3],
                    double umax[3]) {
    for (int k = 0; k < t->dims; k++) {
        umin[k] = ((double)mn[k] - t->origin[k]) * t->scale;
        umax[k] = ((double)mx[k] - t->origin[k]) * t->scale;
    }
}

/* The least float x with (x - origin) * scale >= u on axis k (rounded up from the inverse
 * map, then stepped up while the forward map, which is monotone, still falls short). */
static float grid_floor_to_float(const octree *t, int k, double u) {
    float x = (float)(u / t->scale + t->origin[k]);
    while (((double)x - t->origin[k]) * t->scale < u) x = nextafterf(x, INFINITY);
    return x;
}

/* The greatest float x with (x - origin) * scale <= u. */
static float grid_ceil_to_float(const octree *t, int k, double u) {
    float x = (float)(u / t->scale + t->origin[k]);
    while (((double)x - t->origin[k]) * t->scale > u) x = nextafterf(x, -INFINITY);
    return x;
}

/* Node n's cell enlarged by the looseness and `extra` of its side on each side, in world
 * coordinates rounded inward to floats; unbounded on the axes the world lacks. */
static void cell_region(const octree *t, const oc_node *n, double extra, float lo[3], float hi[3]) {
    double size = t->cell_size[n->level], m = t->cell_margin[n->level] + size * extra;
    for (int k = 0; k < 3; k++) {
        if (k >= t->dims) {
            lo[k] = -INFINITY;
            hi[k] = INFINITY;
            continue;
        }
        double at = (double)n->cell[k] * size;
        lo[k] = grid_floor_to_float(t, k, at - m);
        hi[k] = grid_ceil_to_float(t, k, at + size + m);
    }
}

static void hold_region(const octree *t, oc_node *n) {
    cell_region(t, n, 0.0, n->hold_lo, n->hold_hi);
    cell_region(t, n, FLAT_SLACK, n->reach_lo, n->reach_hi);
}

/* Does the cell at `level` hold the box (inside it once enlarged by the looseness)? */
static bool holds(const octree *t, int level, const uint32_t cell[3], const double umin[3],
                  const double umax[3]) {
    double size = t->cell_size[level], m = t->cell_margin[level];
    for (int k = 0; k < t->dims; k++) {
        double lo = (double)cell[k] * size;
        if (!(umin[k] >= lo - m && umax[k] <= lo + size + m)) return false;
    }
    return true;
}

/* The cell at `level` containing the box's centre (clamped into the root). */
static void centre_cell(const octree *t, int level, const double umin[3], const double umax[3],
                        uint32_t cell[3]) {
    double top = t->top;
    for (int k = 0; k < 3; k++) {
        double c = k < t->dims ? umin[k] * 0.5 + umax[k] * 0.5 : 0.0;
        c = c < 0.0 ? 0.0 : c > top ? top : c;
        cell[k] = (uint32_t)((uint32_t)c >> (t->depth - level));
    }
}

/* Does node n's cell contain the box's centre? */
static bool centre_in(const octree *t, const oc_node *n, const double umin[3],
                      const double umax[3]) {
    uint32_t cell[3];
    centre_cell(t, n->level, umin, umax, cell);
    for (int k = 0; k < t->dims; k++)
        if (cell[k] != n->cell[k]) return false;
    return true;
}

/* Is the level + 1 cell `sub` a child of cell `parent`? In a loose octree a cell holds objects
 * whose centre lies outside it, and those cannot sink into any of its children. */
static bool is_child_cell(const octree *t, const uint32_t parent[3], const uint32_t sub[3]) {
    for (int k = 0; k < t->dims; k++)
        if (sub[k] >> 1 != parent[k]) return false;
    return true;
}

/* The child slot of the level + 1 cell `sub` within its parent. */
static int child_slot(const octree *t, const uint32_t sub[3]) {
    int j = 0;
    for (int k = 0; k < t->dims; k++) j |= (int)(sub[k] & 1u) << k;
    return j;
}

/* The deepest level (up to max_level) whose centre cell holds the box; the box is in the root. */
static int object_level(const octree *t, const double umin[3], const double umax[3]) {
    double ext = 0.0;
    for (int k = 0; k < t->dims; k++) ext = umax[k] - umin[k] > ext ? umax[k] - umin[k] : ext;
    /* A cell enlarged to looseness * size cannot hold a box longer than that. */
    int level = t->max_level;
    if (ext > 0.0) {
        int e;
        double f = frexp(ext / (1.0 + 2.0 * t->margin), &e);
        int need = f == 0.5 ? e - 1 : e; /* ceil(log2) */
        if (t->depth - need < level) level = t->depth - need;
    }
    if (level < 0) level = 0;
    for (; level > 0; level--) {
        uint32_t cell[3];
        centre_cell(t, level, umin, umax, cell);
        if (holds(t, level, cell, umin, umax)) return level;
    }
    return 0;
}

/* The root for bounds [lo, hi]: centred on them, side the least power of two covering them and
 * at least min_side. */
static void choose_root(octree *t, const float lo[3], const float hi[3], double min_side) {
    double ext = 0.0, centre[3] = {0.0, 0.0, 0.0};
    for (int k = 0; k < t->dims; k++) {
        if (!(lo[k] <= hi[k])) continue; /* no objects */
        double e = (double)hi[k] - (double)lo[k];
        ext = e > ext ? e : ext;
        centre[k] = (double)lo[k] * 0.5 + (double)hi[k] * 0.5;
    }
    double side = ldexp(1.0, -120);
    while (side < ext || side < min_side) side *= 2.0;
    for (int k = 0; k < 3; k++) t->origin[k] = centre[k] - side * 0.5;
    t->side = side;
    t->scale = ldexp(1.0, t->depth) / side;
}

/* ---- nodes --------------------------------------------------------------------------------- */

static void node_init(oc_node *n, uint32_t parent, int level, const uint32_t cell[3]) {
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

static octree *tree_of(broadphase_world *w, void **state) {
    if (!*state) {
        octree *t = heap_alloc(&w->heap, sizeof(octree));
        if (t) {
            memset(t, 0, sizeof(octree));
            t->fl_gen = 1; /* new nodes (list_gen 0) are in no list */
        }
        *state = t;
    }
    return *state;
}

/* Arrays indexed by node, for node_capacity nodes. */
static bool by_node_reserve(broadphase_world *w, octree *t) {
    size_t need = t->node_capacity + 1;
    if (need <= t->by_node_capacity) return true;
    size_t cap = t->by_node_capacity;
    /* Contents kept: a split may grow the nodes in the middle of a refit. */
    uint32_t **arrays[] = {&t->own_count, &t->new_begin,  &t->arrive_first, &t->arrivals,
                           &t->redirect,  &t->redirected, &t->splits,       &t->free_nodes};
    size_t got = 0;
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        size_t c = cap;
        if (!heap_grow(&w->heap, (void **)arrays[i], &c, need, sizeof(uint32_t), cap)) return false;
        got = c;
    }
    for (size_t n = cap; n < got; n++) t->redirect[n] = NONE;
    t->by_node_capacity = got;
    t->free_capacity = got;
    return true;
}

/* A node from the free list or past the last one; NONE on out of memory. Outside the build. */
static uint32_t node_new(broadphase_world *w, octree *t) {
    if (t->free_count) return t->free_nodes[--t->free_count];
    if (t->node_count >= t->node_capacity) {
        if (!heap_grow(&w->heap, (void **)&t->nodes, &t->node_capacity, (size_t)t->node_count + 1,
                       sizeof(oc_node), t->node_count) ||
            !by_node_reserve(w, t))
            return NONE;
    }
    return t->node_count++;
}

/* Frees node n and its (spare) subtree. */
static void node_free_subtree(octree *t, uint32_t n) {
    oc_node *node = &t->nodes[n];
    for (int j = 0; j < t->nchild; j++)
        if (node->child[j] != NONE) node_free_subtree(t, node->child[j]);
    node->spare = true;
    node->begin = node->end = node->sub_end = 0;
    t->free_nodes[t->free_count++] = n;
}

/* Node n becomes the top of a spare branch: everything below it is spare already or becomes so
 * (their own objects leave: the caller redirects them). */
static void make_spare(octree *t, uint32_t n) {
    oc_node *node = &t->nodes[n];
    node->spare = true;
    node->life = node->lifespan;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c != NONE && !t->nodes[c].spare) make_spare(t, c);
    }
}

/* ---- build --------------------------------------------------------------------------------- */

typedef struct tree_ctx {
    broadphase_world *w;
    octree *t;
} tree_ctx;

/* Live objects and their bounds, per chunk of ids. */
static void count_live(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    const broadphase_world *w = c->w;
    size_t begin = chunk * c->t->id_chunk, end = begin + c->t->id_chunk;
    if (end > w->id_end) end = w->id_end;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t live = 0;
    for (size_t i = begin; i < end; i++) {
        if (!world_tree_member(w, i)) continue;
        live++;
        for (int k = 0; k < 3; k++) {
            lo[k] = w->box[i].lo[k] < lo[k] ? w->box[i].lo[k] : lo[k];
            hi[k] = w->box[i].hi[k] > hi[k] ? w->box[i].hi[k] : hi[k];
        }
    }
    c->t->chunk_count[chunk] = live;
    for (int k = 0; k < 3; k++) {
        c->t->chunk_bounds[chunk * 6 + (size_t)k] = lo[k];
        c->t->chunk_bounds[chunk * 6 + 3 + (size_t)k] = hi[k];
    }
}

static void write_keys(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    const broadphase_world *w = c->w;
    const octree *t = c->t;
    size_t begin = chunk * t->id_chunk, end = begin + t->id_chunk;
    if (end > w->id_end) end = w->id_end;
    size_t at = t->chunk_count[chunk];
    for (size_t i = begin; i < end; i++) {
        if (!world_tree_member(w, i)) continue;
        double umin[3], umax[3];
        to_grid(t, w->box[i].lo, w->box[i].hi, umin, umax);
        int level = object_level(t, umin, umax);
        uint32_t cell[3];
        centre_cell(t, level, umin, umax, cell);
        t->keys[at] = cell_key(t, level, cell);
        t->vals[at] = (uint32_t)i;
        at++;
    }
}

typedef struct build_task {
    broadphase_world *w;
    octree *t;
    uint32_t node, begin, end;
} build_task;

/* The first position in [lo, hi) whose key is at least x. */
static uint32_t key_bound(const uint64_t *keys, uint32_t lo, uint32_t hi, uint64_t x) {
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void build_node(void *p, int worker) {
    build_task *task = p;
    broadphase_world *w = task->w;
    octree *t = task->t;
    oc_node *n = &t->nodes[task->node];
    uint32_t begin = task->begin, end = task->end;
    n->begin = begin;
    n->end = end;
    n->sub_end = end;
    if (end - begin <= (uint32_t)w->config.leaf_size || n->level >= t->max_level) return;
    uint64_t key = cell_key(t, n->level, n->cell);
    uint32_t own_end = key_bound(t->keys, begin, end, key + 1);
    if (own_end == end) return; /* everything is too large to go deeper */
    /* Child j's keys start at the node's padded code plus j steps of a child's key span. */
    int level = n->level + 1;
    uint64_t span = (uint64_t)1 << (t->dims * (t->depth - level) + LEVEL_BITS);
    uint64_t base = key - (uint64_t)n->level;
    uint32_t bounds[9];
    bounds[0] = own_end;
    for (int j = 1; j < t->nchild; j++)
        bounds[j] = key_bound(t->keys, bounds[j - 1], end, base + span * (uint64_t)j);
    bounds[t->nchild] = end;
    int want = 0;
    for (int j = 0; j < t->nchild; j++) want += bounds[j + 1] > bounds[j];
    uint32_t first = __atomic_fetch_add(&t->node_count, (uint32_t)want, __ATOMIC_RELAXED);
    if (first + (uint32_t)want > t->node_capacity) {
        __atomic_store_n(&t->overflow, true, __ATOMIC_RELAXED);
        return;
    }
    n->end = own_end;
    build_task sub[8];
    int subs = 0;
    uint32_t next = first;
    for (int j = 0; j < t->nchild; j++) {
        if (bounds[j + 1] == bounds[j]) continue;
        uint32_t cell[3] = {n->cell[0] * 2 + (uint32_t)(j & 1),
                            n->cell[1] * 2 + (uint32_t)(j >> 1 & 1),
                            n->cell[2] * 2 + (uint32_t)(j >> 2 & 1)};
        if (t->dims == 2) cell[2] = 0;
        uint32_t ci = next++;
        node_init(&t->nodes[ci], task->node, level, cell);
        n->child[j] = ci;
        sub[subs++] = (build_task){w, t, ci, bounds[j], bounds[j + 1]};
    }
    if (end - begin > TASK_CUTOFF) {
        for (int s = 1; s < subs; s++) threads_spawn(build_node, &sub[s]);
        build_node(&sub[0], worker);
        threads_wait_children();
    } else {
        for (int s = 0; s < subs; s++) build_node(&sub[s], worker);
    }
}

static void scatter_slots(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    const broadphase_world *w = c->w;
    octree *t = c->t;
    int b = t->slots.cur;
    for (size_t i = begin; i < end; i++) {
        uint32_t id = t->vals[i];
        if (i + TREE_REFIT_AHEAD < end) {
            __builtin_prefetch(&w->box[t->vals[i + TREE_REFIT_AHEAD]]);
        }
        for (int k = 0; k < 3; k++) {
            t->slots.smin[b][k][i] = w->box[id].lo[k];
            t->slots.smax[b][k][i] = w->box[id].hi[k];
        }
        t->slots.sid[b][i] = id;
    }
}

/* Sets the chunks of this pass over the nodes (each node's work is its own objects, about a
 * leaf's worth) and returns their count. */
static size_t node_chunks(const broadphase_world *w, octree *t) {
    t->node_chunk = threads_chunk_size(t->node_count, w->workers, NODE_SMALL_CHUNK, NODE_CHUNK);
    return threads_chunk_count(t->node_count, t->node_chunk);
}

/* node_of and slot_node of every node's own objects, and the bounds of its own objects. */
static void mark_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    octree *t = ((tree_ctx *)p)->t;
    size_t end = (chunk + 1) * t->node_chunk;
    if (end > t->node_count) end = t->node_count;
    int b = t->slots.cur;
    const uint32_t *sid = t->slots.sid[b];
    for (size_t n = chunk * t->node_chunk; n < end; n++) {
        oc_node *node = &t->nodes[n];
        float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (uint32_t s = node->begin; s < node->end; s++) {
            t->node_of[sid[s]] = (uint32_t)n;
            t->slot_node[s] = (uint32_t)n;
            for (int k = 0; k < 3; k++) {
                lo[k] = t->slots.smin[b][k][s] < lo[k] ? t->slots.smin[b][k][s] : lo[k];
                hi[k] = t->slots.smax[b][k][s] > hi[k] ? t->slots.smax[b][k][s] : hi[k];
            }
        }
        memcpy(node->own_lo, lo, sizeof lo);
        memcpy(node->own_hi, hi, sizeof hi);
        hold_region(t, node);
    }
}

/* A node's own bounds from its objects in the slots. */
static void node_own_bounds(const octree *t, oc_node *node) {
    simd_boxes view = tree_slots_boxes(&t->slots);
    simd_boxes_bounds(&view, node->begin, node->end, node->own_lo, node->own_hi);
}

/* What finish sums over a subtree for the statistics (sums and maxima: the same whatever the
 * order the subtrees finish in). */
typedef struct oc_figures {
    uint64_t cost;
    uint32_t live_nodes, leaves, max_depth, internal;
    unsigned flat; /* FLAT_* bits */
} oc_figures;

typedef struct finish_task {
    octree *t;
    uint32_t n;
    bool own; /* measure the node's own bounds from the slots first (a refit's objects moved) */
    oc_figures fig;
} finish_task;

static void finish(octree *t, uint32_t n, bool own, oc_figures *fig);

/* The lines of the fields finish() writes, taken for writing: the last search read every node
 * on both workers, so on two threads a plain store waited for the other core to give up its
 * copy. */
static void prefetch_node_write(const oc_node *node) {
    simd_prefetch_write(node->lo);
    simd_prefetch_write(&node->leaf);
    simd_prefetch_write(node->own_lo);
    simd_prefetch_write(&node->own_hi[2]);
}

static void finish_run(void *p, int worker) {
    (void)worker;
    finish_task *task = p;
    task->fig = (oc_figures){0, 0, 0, 0, 0, 0};
    finish(task->t, task->n, task->own, &task->fig);
}

/* Post-order over the live tree: subtree ends and bounds, and the figures for the statistics.
 * The children of nodes above t->task_levels run as tasks. */
static void finish(octree *t, uint32_t n, bool own, oc_figures *fig) {
    oc_node *node = &t->nodes[n];
    if (t->prefetch_write)
        for (int j = 0; j < t->nchild; j++)
            if (node->child[j] != NONE) prefetch_node_write(&t->nodes[node->child[j]]);
    if (own) node_own_bounds(t, node);
    uint64_t count = node->end - node->begin;
    fig->live_nodes++;
    fig->cost += count * count;
    if (node->level > fig->max_depth) fig->max_depth = node->level;
    finish_task sub[8];
    int subs = 0;
    bool spawn = node->level < t->task_levels;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE || t->nodes[c].spare) continue;
        if (spawn) {
            sub[subs] = (finish_task){t, c, own, {0, 0, 0, 0, 0, 0}};
            threads_spawn(finish_run, &sub[subs]);
            subs++;
        } else {
            finish(t, c, own, fig);
        }
    }
    if (subs > 0) {
        threads_wait_children();
        for (int i = 0; i < subs; i++) {
            fig->cost += sub[i].fig.cost;
            fig->live_nodes += sub[i].fig.live_nodes;
            fig->leaves += sub[i].fig.leaves;
            fig->internal += sub[i].fig.internal;
            fig->flat |= sub[i].fig.flat;
            if (sub[i].fig.max_depth > fig->max_depth) fig->max_depth = sub[i].fig.max_depth;
        }
    }
    uint32_t sub_end = node->end;
    float lo[3], hi[3];
    memcpy(lo, node->own_lo, sizeof lo);
    memcpy(hi, node->own_hi, sizeof hi);
    bool leaf = true;
    uint8_t live = 0;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE || t->nodes[c].spare) continue;
        leaf = false;
        const oc_node *cn = &t->nodes[c];
        if (cn->sub_end > cn->begin) live |= (uint8_t)(1u << j);
        if (cn->sub_end > sub_end) sub_end = cn->sub_end;
        for (int k = 0; k < 3; k++) {
            lo[k] = cn->lo[k] < lo[k] ? cn->lo[k] : lo[k];
            hi[k] = cn->hi[k] > hi[k] ? cn->hi[k] : hi[k];
        }
    }
    node->sub_end = sub_end;
    node->leaf = leaf;
    node->live = live;
    memcpy(node->lo, lo, sizeof lo);
    memcpy(node->hi, hi, sizeof hi);
    if (leaf)
        fig->leaves++;
    else
        fig->internal += (uint32_t)count;
    if (count > 0) {
        unsigned out = 0;
        for (int k = 0; k < t->dims; k++)
            out |= (unsigned)(lo[k] < node->reach_lo[k]) | (unsigned)(hi[k] > node->reach_hi[k]);
        fig->flat |= (node->list_gen != t->fl_gen ? FLAT_STALE
                      : out                       ? FLAT_ESCAPE
                                                  : 0u) |
                     (!leaf || count > OWN_PIECE ? FLAT_NEVER : 0u);
    }
}

/* Subtree ends and bounds for the whole tree, with own bounds first when `own`, and the
 * statistics. The top levels' subtrees (64 in 3D and 2D) run in parallel on large trees. */
static void measure(octree *t, int workers, bool own) {
    finish_task root = {t, 0, own, {0, 0, 0, 0, 0, 0}};
    t->prefetch_write = workers > 1 && simd_prefetch_write_ok();
    if (t->prefetch_write) prefetch_node_write(&t->nodes[0]);
    t->task_levels = workers > 1 && t->node_count > NODE_CHUNK ? (t->dims == 3 ? 2 : 3) : 0;
    if (t->task_levels > 0)
        threads_run_tasks(workers, finish_run, &root);
    else
        finish_run(&root, 0);
    t->cost = root.fig.cost;
    t->live_nodes = root.fig.live_nodes;
    t->leaves = root.fig.leaves;
    t->max_depth_seen = root.fig.max_depth;
    t->internal_objects = root.fig.internal;
    t->flat_state = root.fig.flat;
}

static bool id_tables_reserve(broadphase_world *w, octree *t) {
    return tree_node_of_reserve(w, &t->node_of, &t->node_of_capacity);
}

static void geometry_init(broadphase_world *w, octree *t) {
    t->dims = w->config.dimensions;
    t->nchild = 1 << t->dims;
    t->depth = key_depth(t->dims);
    t->max_level = w->config.max_depth < t->depth ? w->config.max_depth : t->depth;
    t->margin = ((double)w->config.looseness - 1.0) * 0.5;
    for (int l = 0; l <= t->depth; l++) {
        t->cell_size[l] = ldexp(1.0, t->depth - l);
        t->cell_margin[l] = t->margin * t->cell_size[l];
    }
    t->top = ldexp(1.0, t->depth) - 1.0;
}

/* Builds the tree from scratch with a root of at least min_side. */
static broadphase_status rebuild(broadphase_world *w, octree *t, double min_side) {
    geometry_init(w, t);
    t->id_chunk = threads_chunk_size(w->id_end, w->workers, SMALL_CHUNK, SLOT_CHUNK);
    size_t chunks = threads_chunk_count(w->id_end, t->id_chunk);
    size_t count = world_tree_count(w);
    size_t hist = threads_radix_scratch_size(w->workers);
    if (!heap_grow(&w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                   sizeof(size_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->chunk_bounds, &t->chunk_bounds_capacity, 6 * (chunks + 1),
                   sizeof(float), 0) ||
        !tree_slots_reserve(w, &t->slots, count) || !id_tables_reserve(w, t) ||
        !heap_grow(&w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (count + 1 > t->key_capacity) {
        size_t cap = t->key_capacity;
        size_t c2 = cap, c3 = cap, c4 = cap;
        if (!heap_grow(&w->heap, (void **)&t->keys, &cap, count + 1, sizeof(uint64_t), 0) ||
            !heap_grow(&w->heap, (void **)&t->keys_tmp, &c2, cap, sizeof(uint64_t), 0) ||
            !heap_grow(&w->heap, (void **)&t->vals, &c3, cap, sizeof(uint32_t), 0) ||
            !heap_grow(&w->heap, (void **)&t->vals_tmp, &c4, cap, sizeof(uint32_t), 0))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
        t->key_capacity = cap;
    }
    if (hist > t->hist_bytes) {
        void *h = heap_alloc(&w->heap, hist);
        if (!h) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        heap_free(&w->heap, t->hist, t->hist_bytes);
        t->hist = h;
        t->hist_bytes = hist;
    }
    tree_ctx g = {w, t};
    threads_for_chunks(w->workers, chunks, count_live, &g);
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t c = 0; c < chunks; c++) {
        for (int k = 0; k < 3; k++) {
            float a = t->chunk_bounds[c * 6 + (size_t)k],
                  z = t->chunk_bounds[c * 6 + 3 + (size_t)k];
            lo[k] = a < lo[k] ? a : lo[k];
            hi[k] = z > hi[k] ? z : hi[k];
        }
    }
    threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    choose_root(t, lo, hi, min_side);
    threads_for_chunks(w->workers, chunks, write_keys, &g);
    int key_bits = t->dims * t->depth + LEVEL_BITS;
    threads_radix_sort_pairs(w->workers, t->keys, t->vals, t->keys_tmp, t->vals_tmp, count,
                             key_bits, t->hist);

    /* Nodes: never more than count / 2 here, and in practice near count / leaf_size (uniform
     * cells of 37 objects: 31,351 nodes for 1e6), more where crowded cells split into children
     * holding few. Room for ten times count / leaf_size, no more than count / 2: reserving
     * count / 2 held 86 MB of nodes for the 5 MB that moving 1e6 uses. A build that needs more
     * is retried with more room (below); a refit grows the pool as it splits. */
    size_t leaf = (size_t)(w->config.leaf_size > 0 ? w->config.leaf_size : 1);
    size_t want = count / 2 + MIN_NODE_CAPACITY;
    if (10 * (count / leaf) + MIN_NODE_CAPACITY < want)
        want = 10 * (count / leaf) + MIN_NODE_CAPACITY;
    if (want > t->node_capacity &&
        !heap_grow(&w->heap, (void **)&t->nodes, &t->node_capacity, want, sizeof(oc_node), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    for (;;) {
        t->overflow = false;
        t->node_count = 1;
        const uint32_t zero[3] = {0, 0, 0};
        node_init(&t->nodes[0], NONE, 0, zero);
        build_task root = {w, t, 0, 0, (uint32_t)count};
        threads_run_tasks(w->workers, build_node, &root);
        if (!t->overflow) break;
        if (!heap_grow(&w->heap, (void **)&t->nodes, &t->node_capacity, t->node_capacity * 2,
                       sizeof(oc_node), 0))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    if (!by_node_reserve(w, t)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->free_count = 0;
    t->slots.cur = 0;
    t->slots.count = (uint32_t)count;
    threads_for_ranges(w->workers, count,
                       threads_chunk_size(count, w->workers, SMALL_CHUNK, SLOT_CHUNK),
                       scatter_slots, &g);
    tree_forget_free_ids(w, t->node_of);
    threads_for_chunks(w->workers, node_chunks(w, t), mark_nodes, &g);
    measure(t, w->workers, false);
    t->base_cost = t->cost;
    t->built = true;
    t->built_empty = count == 0;
    w->stats.rebuilds++;
    return BROADPHASE_OK;
}

/* ---- refit --------------------------------------------------------------------------------- */

/* From node n, the node that should hold the box: up to the first ancestor that holds it, then
 * down through live children as deep as it fits. NONE when even the root does not hold it. */
static uint32_t rehome(const octree *t, uint32_t n, const double umin[3], const double umax[3]) {
    const oc_node *nodes = t->nodes;
    while (!holds(t, nodes[n].level, nodes[n].cell, umin, umax)) {
        if (n == 0) return NONE;
        n = nodes[n].parent;
    }
    /* Up on to the first ancestor whose cell also contains the centre: a loose ancestor holds
     * objects whose centre has moved into a neighbouring cell, and they could never sink from
     * there, so that moving objects would drift up the tree, step after step, into nodes that
     * every descendant tests against. (Until it leaves the region or the slots are next laid
     * out, an object stays in its leaf even when its centre has crossed into a neighbour: see
     * tighten.) */
    while (n != 0 && !centre_in(t, &nodes[n], umin, umax)) n = nodes[n].parent;
    for (;;) {
        const oc_node *node = &nodes[n];
        if (node->level >= t->max_level) return n;
        uint32_t cell[3];
        centre_cell(t, node->level + 1, umin, umax, cell);
        if (!is_child_cell(t, node->cell, cell)) return n;
        uint32_t c = node->child[child_slot(t, cell)];
        if (c == NONE || nodes[c].spare || !holds(t, node->level + 1, cell, umin, umax)) return n;
        n = c;
    }
}

/* Reads every object's new bounds into its slot and decides the node it belongs in now. */
static void refit_slots(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    const broadphase_world *w = c->w;
    octree *t = c->t;
    int b = t->slots.cur;
    size_t begin = chunk * t->refit_chunk, end = begin + t->refit_chunk;
    if (end > t->slots.count) end = t->slots.count;
    size_t movers = 0;
    bool escaped = false, urgent = false;
    /* When streaming (see tree_slots_stream), the new values are gathered a block at a time
     * and streamed column by column. */
    bool stream = tree_slots_stream(w, &t->slots);
    tree_slot_block blk;
    for (size_t s0 = begin; s0 < end; s0 += TREE_SLOT_BLOCK) {
        size_t s1 = end - s0 < TREE_SLOT_BLOCK ? end : s0 + TREE_SLOT_BLOCK;
        for (size_t s = s0; s < s1; s++) {
            float mn[3], mx[3];
            tree_refit_read(w, &t->slots, b, &blk, s0, s, end, stream, mn, mx);
            if (mn[0] == INFINITY) { /* removed (see tree_refit_read) */
                t->dest[s] = DEAD;
                movers++;
                urgent = true;
                continue;
            }
            uint32_t n = t->slot_node[s];
            const oc_node *node = &t->nodes[n];
            /* The common case: still inside its leaf's region, it stays. */
            if (node->leaf && mn[0] >= node->hold_lo[0] && mn[1] >= node->hold_lo[1] &&
                mn[2] >= node->hold_lo[2] && mx[0] <= node->hold_hi[0] &&
                mx[1] <= node->hold_hi[1] && mx[2] <= node->hold_hi[2]) {
                t->dest[s] = n;
                continue;
            }
            double umin[3], umax[3];
            to_grid(t, mn, mx, umin, umax);
            uint32_t d = rehome(t, n, umin, umax);
            if (d == NONE) {
                escaped = true;
                d = n;
            }
            t->dest[s] = d;
            movers += d != n;
            /* A mover still inside its node's parent's region can wait (see DEFER_SHARE). */
            if (d != n) {
                uint32_t up = node->parent;
                urgent |=
                    up == NONE || !holds(t, t->nodes[up].level, t->nodes[up].cell, umin, umax);
            }
        }
        if (stream) tree_slots_stream_block(&t->slots, b, s0, s1 - s0, &blk);
    }
    if (stream) simd_stream_fence();
    t->chunk_count[chunk] = movers;
    if (escaped) __atomic_store_n(&t->escaped, true, __ATOMIC_RELAXED);
    if (urgent) __atomic_store_n(&t->urgent, true, __ATOMIC_RELAXED);
}

/* The leaf at node n's level whose cell is n's stepped by step[k] (-1, 0 or 1) along each axis,
 * when it exists and its region (rounded inward, see hold_region) holds [mn, mx]; else NONE.
 * Integer cells and float bounds only: the common move of tighten() without rehome()'s grid
 * arithmetic. */
static uint32_t neighbour_leaf(const octree *t, uint32_t n, const int step[3], const float mn[3],
                               const float mx[3]) {
    const oc_node *nodes = t->nodes;
    int level = nodes[n].level;
    uint64_t side = (uint64_t)1 << level;
    uint32_t cell[3] = {0, 0, 0};
    for (int k = 0; k < t->dims; k++) {
        int64_t at = (int64_t)nodes[n].cell[k] + step[k];
        if (at < 0 || (uint64_t)at >= side) return NONE;
        cell[k] = (uint32_t)at;
    }
    uint32_t a = n;
    for (;;) {
        int up = level - nodes[a].level;
        bool in = true;
        for (int k = 0; k < t->dims; k++) in &= cell[k] >> up == nodes[a].cell[k];
        if (in) break;
        if (a == 0) return NONE;
        a = nodes[a].parent;
    }
    while (nodes[a].level < level) {
        int down = level - nodes[a].level - 1, j = 0;
        for (int k = 0; k < t->dims; k++) j |= (int)(cell[k] >> down & 1u) << k;
        uint32_t c = nodes[a].child[j];
        if (c == NONE || nodes[c].spare) return NONE;
        a = c;
    }
    if (!nodes[a].leaf) return NONE;
    for (int k = 0; k < t->dims; k++)
        if (!(mn[k] >= nodes[a].hold_lo[k] && mx[k] <= nodes[a].hold_hi[k])) return NONE;
    return a;
}

/* When the slots are laid out anew anyway: a leaf's object whose centre has left the leaf's cell
 * (the refit keeps it while it stays inside the region) moves too, into the leaf its centre is
 * in, as a build would place it, when that is a leaf. Left alone, such objects drift to the edge
 * of the region and the leaves' bounds with them: at moving 1e5 the leaves reached 1.2 past
 * their cells after 40 frames against 0.44 built, and the search took 10-12% longer. The cell
 * edge is found in floats (the region less the margin): only the choice of movers depends on
 * it, and a mover goes only where it is held. */
static void tighten(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    octree *t = c->t;
    int b = t->slots.cur;
    size_t begin = chunk * t->refit_chunk, end = begin + t->refit_chunk;
    if (end > t->slots.count) end = t->slots.count;
    float inset[64];
    for (int l = 0; l <= t->max_level && l < 64; l++)
        inset[l] = (float)(t->cell_margin[l] / t->scale);
    size_t movers = 0;
    for (size_t s = begin; s < end; s++) {
        uint32_t n = t->slot_node[s];
        if (t->dest[s] != n) continue;
        const oc_node *node = &t->nodes[n];
        if (!node->leaf) continue;
        float in = inset[node->level];
        bool out = false;
        int step[3] = {0, 0, 0};
        float mn[3], mx[3];
        for (int k = 0; k < 3; k++) {
            mn[k] = t->slots.smin[b][k][s];
            mx[k] = t->slots.smax[b][k][s];
            if (k >= t->dims) continue;
            float centre = 0.5f * mn[k] + 0.5f * mx[k];
            step[k] = centre < node->hold_lo[k] + in ? -1 : centre > node->hold_hi[k] - in ? 1 : 0;
            out |= step[k] != 0;
        }
        if (!out) continue;
        uint32_t d = neighbour_leaf(t, n, step, mn, mx);
        if (d == NONE) {
            double umin[3], umax[3];
            to_grid(t, mn, mx, umin, umax);
            d = rehome(t, n, umin, umax);
            if (d == NONE || !t->nodes[d].leaf) continue;
        }
        if (d == n) continue;
        t->dest[s] = d;
        movers++;
    }
    t->chunk_count[chunk] += movers;
}

/* The chunk's movers, as moves with their halves swapped (source << 32 | destination, DEAD as
 * node_count so that removed objects sort last), for gather_moves' sort; and each node's
 * departures, taken off its own count by the chunk holding its first slot, which follows the
 * node past its own end (a node's slots are consecutive), so that no two chunks write one node. */
static void collect_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    octree *t = c->t;
    size_t begin = chunk * t->refit_chunk, end = begin + t->refit_chunk;
    if (end > t->slots.count) end = t->slots.count;
    if (begin >= end) return;
    uint32_t nodes = (uint32_t)t->node_count;
    uint64_t *out = t->moves_tmp + t->chunk_count[chunk];
    /* The node this chunk begins inside of, when it began in an earlier chunk: not ours. */
    uint32_t before =
        begin > 0 && t->slot_node[begin - 1] == t->slot_node[begin] ? t->slot_node[begin] : NONE;
    for (size_t s = begin; s < end; s++) {
        uint32_t d = t->dest[s], n = t->slot_node[s];
        if (d == n) continue;
        *out++ = (uint64_t)s << 32 | (d == DEAD ? nodes : d);
        if (n != before) t->own_count[n]--;
    }
    uint32_t last = t->slot_node[end - 1];
    if (last == before) return;
    for (size_t s = end; s < t->slots.count && t->slot_node[s] == last; s++)
        if (t->dest[s] != last) t->own_count[last]--;
}

static void count_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    octree *t = c->t;
    size_t begin = chunk * t->refit_chunk, end = begin + t->refit_chunk;
    if (end > t->slots.count) end = t->slots.count;
    size_t movers = 0;
    for (size_t s = begin; s < end; s++) {
        uint32_t d = t->dest[s];
        if (d != DEAD && t->redirect[d] != NONE) {
            /* A merged node may itself have merged into an ancestor: follow the chain. */
            while (t->redirect[d] != NONE) d = t->redirect[d];
            t->dest[s] = d;
        }
        movers += d != t->slot_node[s];
    }
    t->chunk_count[chunk] = movers;
}

/* Every node's own count as laid out, no arrivals yet. */
static void reset_counts(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    octree *t = c->t;
    size_t end = (chunk + 1) * t->node_chunk;
    if (end > t->node_count) end = t->node_count;
    for (size_t n = chunk * t->node_chunk; n < end; n++) {
        t->own_count[n] = t->nodes[n].end - t->nodes[n].begin;
        t->arrivals[n] = 0;
        t->arrive_first[n] = 0;
    }
    if (end == t->node_count) t->arrive_first[end] = 0;
}

/* Each node's arrivals, from the moves sorted by destination: its run of them gives their count
 * and where they begin, which is also where every node since the previous run begins (those
 * with none). The chunk holding a run's first move takes the whole run. */
static void count_arrivals(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    octree *t = c->t;
    size_t count = t->move_count, begin = chunk * t->move_chunk, end = begin + t->move_chunk;
    if (end > count) end = count;
    uint32_t nodes = (uint32_t)t->node_count;
    const uint64_t *moves = t->moves;
    for (size_t m = begin; m < end;) {
        uint32_t d = (uint32_t)moves[m];
        uint32_t prev = m > 0 ? (uint32_t)moves[m - 1] : UINT32_MAX;
        if (prev == d) {
            m++; /* the run began in an earlier chunk */
            continue;
        }
        size_t e = m + 1;
        while (e < count && (uint32_t)moves[e] == d) e++;
        for (uint32_t n = prev + 1; n <= d; n++) t->arrive_first[n] = (uint32_t)m;
        if (d < nodes) {
            t->arrivals[d] = (uint32_t)(e - m);
            t->own_count[d] += (uint32_t)(e - m);
            if (e == count)
                for (uint32_t n = d + 1; n <= nodes; n++) t->arrive_first[n] = (uint32_t)e;
        }
        m = e;
    }
}

/* The moves (slots whose node changes, in slot order, then objects new to the tree), sorted by
 * destination, stably, as source << 32 | destination (removed objects last); every node's own
 * count and arrivals; and arrive_first, where each node's arrivals begin (arrive_first[nodes]:
 * the moves that stay in the tree). Every pass is parallel and the sort is the radix sort on the
 * destination's bits, so no serial pass over the moves grows with the objects, and the result is
 * the same for every worker count. */
static size_t gather_moves(broadphase_world *w, octree *t, size_t chunks) {
    size_t movers = threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    tree_ctx c = {w, t};
    threads_for_chunks(w->workers, node_chunks(w, t), reset_counts, &c);
    threads_for_chunks(w->workers, chunks, collect_movers, &c);
    size_t count = movers;
    uint32_t nodes = (uint32_t)t->node_count;
    for (size_t i = 0; i < w->added_count; i++) {
        uint32_t d = t->add_dest[i];
        if (d != NONE)
            t->moves_tmp[count++] =
                (uint64_t)(TREE_ADDED | (uint32_t)i) << 32 | (d == DEAD ? nodes : d);
    }
    t->move_count = count;
    if (count == 0) return 0;
    int bits = 1;
    while (bits < 32 && (nodes >> bits) != 0) bits++;
    threads_radix_sort_u64(w->workers, t->moves_tmp, t->moves, count, bits, t->hist);
    uint64_t *sorted = t->moves_tmp;
    t->moves_tmp = t->moves;
    t->moves = sorted;
    t->move_chunk = threads_chunk_size(count, w->workers, SMALL_CHUNK, SLOT_CHUNK);
    threads_for_chunks(w->workers, threads_chunk_count(count, t->move_chunk), count_arrivals, &c);
    return count;
}

/* Every live node below n (n excluded) redirects its objects to `to` and becomes spare. */
static void redirect_below(octree *t, uint32_t n, uint32_t to) {
    oc_node *node = &t->nodes[n];
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE || t->nodes[c].spare) continue;
        if (t->redirect[c] == NONE) t->redirected[t->redirected_count++] = c;
        t->redirect[c] = to;
        redirect_below(t, c, to);
    }
}

/* Post-order over the live tree: spare branches age (and are freed when their time is up),
 * emptied nodes become spare, subtrees holding no more than leaf_size objects merge into their
 * top node, and nodes holding too many objects are listed for splitting. Returns the subtree's
 * object count. */
static uint32_t restructure(broadphase_world *w, octree *t, uint32_t n) {
    uint32_t total = t->own_count[n];
    bool live_children = false;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = t->nodes[n].child[j];
        if (c == NONE) continue;
        if (t->nodes[c].spare) {
            if (t->nodes[c].life == 0 || --t->nodes[c].life == 0) {
                node_free_subtree(t, c);
                t->nodes[n].child[j] = NONE;
            }
            continue;
        }
        uint32_t sub = restructure(w, t, c);
        if (sub == 0) {
            make_spare(t, c);
            redirect_below(t, c, n); /* nothing lives there; keeps the bookkeeping uniform */
            continue;
        }
        live_children = true;
        total += sub;
    }
    oc_node *node = &t->nodes[n];
    uint32_t leaf_size = (uint32_t)w->config.leaf_size;
    if (live_children && total <= leaf_size) {
        redirect_below(t, n, n);
        for (int j = 0; j < t->nchild; j++)
            if (node->child[j] != NONE && !t->nodes[node->child[j]].spare)
                make_spare(t, node->child[j]);
        live_children = false;
    }
    /* A crowded node splits; so does an internal node that objects arrived in, so that those
     * whose child cell is absent or spare sink into it instead of staying up here. */
    if ((t->own_count[n] > leaf_size || live_children) && node->level < t->max_level &&
        (t->arrivals[n] > 0 || (!live_children && !node->split_failed)))
        t->splits[t->split_count++] = n;
    return total;
}

/* Bounds in grid units of an object referred to by a split: a slot, or an entry of w->added. */
static void ref_grid(const broadphase_world *w, const octree *t, uint32_t ref, double umin[3],
                     double umax[3]) {
    float mn[3], mx[3];
    if (ref < t->slots.count) {
        int b = t->slots.cur;
        for (int k = 0; k < 3; k++) {
            mn[k] = t->slots.smin[b][k][ref];
            mx[k] = t->slots.smax[b][k][ref];
        }
    } else {
        uint32_t id = w->added[ref - t->slots.count];
        for (int k = 0; k < 3; k++) {
            mn[k] = w->box[id].lo[k];
            mx[k] = w->box[id].hi[k];
        }
    }
    to_grid(t, mn, mx, umin, umax);
}

static uint32_t *ref_dest(octree *t, uint32_t ref) {
    return ref < t->slots.count ? &t->dest[ref] : &t->add_dest[ref - t->slots.count];
}

/* Node n holds refs[0, count) (more than leaf_size): each that fits the child cell of its centre
 * goes there, the child revived or made as needed; children left with too many split in turn.
 * scratch has room for count refs. False on out of memory. */
static bool split(broadphase_world *w, octree *t, uint32_t n, uint32_t *refs, uint32_t *scratch,
                  uint32_t count) {
    uint32_t per[8] = {0};
    int level = t->nodes[n].level + 1;
    uint32_t moved = 0;
    for (uint32_t i = 0; i < count; i++) {
        double umin[3], umax[3];
        ref_grid(w, t, refs[i], umin, umax);
        uint32_t cell[3];
        centre_cell(t, level, umin, umax, cell);
        if (!is_child_cell(t, t->nodes[n].cell, cell) || !holds(t, level, cell, umin, umax))
            continue;
        int j = child_slot(t, cell);
        uint32_t c = t->nodes[n].child[j];
        if (c == NONE) {
            c = node_new(w, t);
            if (c == NONE) return false;
            node_init(&t->nodes[c], n, level, cell);
            hold_region(t, &t->nodes[c]);
            t->nodes[n].child[j] = c;
        } else if (t->nodes[c].spare) {
            oc_node *cn = &t->nodes[c];
            cn->spare = false;
            cn->split_failed = false;
            cn->lifespan =
                (uint16_t)(cn->lifespan * 2 > LIFESPAN_CAP ? LIFESPAN_CAP : cn->lifespan * 2);
            /* Its children were spare already; now they are the tops of spare branches. */
            for (int q = 0; q < t->nchild; q++)
                if (cn->child[q] != NONE)
                    t->nodes[cn->child[q]].life = t->nodes[cn->child[q]].lifespan;
        }
        *ref_dest(t, refs[i]) = c;
        per[j]++;
        moved++;
    }
    t->nodes[n].split_failed = moved == 0;
    if (level >= t->max_level) return true;
    /* The movers grouped by child (a counting sort through scratch), then crowded children
     * split in turn, each within its own part of refs and scratch. */
    uint32_t start[9], at[8];
    start[0] = 0;
    for (int j = 0; j < 8; j++) start[j + 1] = start[j] + per[j];
    memcpy(at, start, sizeof at);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t d = *ref_dest(t, refs[i]);
        if (d == n) continue;
        scratch[at[child_slot(t, t->nodes[d].cell)]++] = refs[i];
    }
    memcpy(refs, scratch, moved * sizeof(uint32_t));
    for (int j = 0; j < t->nchild; j++) {
        if (per[j] <= (uint32_t)w->config.leaf_size) continue;
        uint32_t c = t->nodes[n].child[j];
        if (!split(w, t, c, refs + start[j], scratch + start[j], per[j])) return false;
    }
    return true;
}

/* Lays live nodes out anew in preorder from their own counts; spare ones get empty ranges. */
static uint32_t relayout(octree *t, uint32_t n, uint32_t at) {
    oc_node *node = &t->nodes[n];
    t->new_begin[n] = at;
    at += t->own_count[n];
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE) continue;
        if (t->nodes[c].spare) {
            t->own_count[c] = 0;
            t->new_begin[c] = at;
            continue;
        }
        at = relayout(t, c, at);
    }
    return at;
}

static void copy_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    octree *t = c->t;
    size_t end_node = (chunk + 1) * t->node_chunk;
    if (end_node > t->node_count) end_node = t->node_count;
    for (size_t n = chunk * t->node_chunk; n < end_node; n++)
        tree_copy_node(c->w, &t->slots, t->dest, t->slot_node, t->node_of, t->moves, 32,
                       (uint32_t)n, t->nodes[n].begin, t->nodes[n].end, t->new_begin[n],
                       t->arrive_first[n], t->arrive_first[n + 1]);
}

/* Slots per chunk of the refit's passes: SMALL_CHUNK below SMALL_BELOW slots, else up to
 * SLOT_CHUNK, cut so that every worker has chunks to balance: 16 workers would otherwise find
 * 1e5 slots in 7 chunks of 16,384 (perf/NOTES.md, row 111). Whole cache lines of every column,
 * as the streamed writes want. The chunks only divide the work: the passes give the same result
 * for any chunking, so the thread count changes nothing but the time. */
static size_t refit_chunk_size(size_t slots, int workers) {
    return threads_chunk_size(slots, workers, SMALL_CHUNK,
                              slots < SMALL_BELOW ? SMALL_CHUNK : SLOT_CHUNK);
}

/* REFIT; *escaped (and nothing changed) when an object left the root. */
static broadphase_status refit(broadphase_world *w, octree *t, bool *escaped) {
    t->refit_chunk = refit_chunk_size(t->slots.count, w->workers);
    size_t chunks = threads_chunk_count(t->slots.count, t->refit_chunk);
    size_t need = t->slots.count + w->added_count + 1;
    if (!heap_grow(&w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                   sizeof(size_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->dest, &t->dest_capacity, t->slots.count + 1,
                   sizeof(uint32_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), t->slots.count) ||
        !heap_grow(&w->heap, (void **)&t->add_dest, &t->add_dest_capacity, w->added_count + 1,
                   sizeof(uint32_t), 0) ||
        !id_tables_reserve(w, t) || !by_node_reserve(w, t))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    /* Sized for every object moving at once (twice over for the splits' grouping), so that the
     * number of movers, which changes every step, never makes a step allocate. */
    if (need > t->move_capacity) {
        size_t c1 = t->move_capacity, c2 = c1, c3 = t->ref_capacity, c4 = c3;
        if (!heap_grow(&w->heap, (void **)&t->moves, &c1, need, sizeof(uint64_t), 0) ||
            !heap_grow(&w->heap, (void **)&t->moves_tmp, &c2, c1, sizeof(uint64_t), 0) ||
            !heap_grow(&w->heap, (void **)&t->refs, &c3, 2 * c1, sizeof(uint32_t), 0) ||
            !heap_grow(&w->heap, (void **)&t->refs_tmp, &c4, c3, sizeof(uint32_t), 0))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
        t->move_capacity = c1;
        t->ref_capacity = c3;
    }
    tree_ctx c = {w, t};
    t->escaped = t->urgent = false;
    threads_for_chunks(w->workers, chunks, refit_slots, &c);
    for (size_t i = 0; i < w->added_count; i++) {
        uint32_t id = w->added[i];
        t->add_dest[i] = NONE;
        if (!world_tree_member(w, id) || t->node_of[id] != NONE) continue;
        float mn[3], mx[3];
        for (int k = 0; k < 3; k++) {
            mn[k] = w->box[id].lo[k];
            mx[k] = w->box[id].hi[k];
        }
        double umin[3], umax[3];
        to_grid(t, mn, mx, umin, umax);
        uint32_t d = rehome(t, 0, umin, umax);
        if (d == NONE) {
            t->escaped = true;
            break;
        }
        t->add_dest[i] = d;
        t->node_of[id] = d; /* taken, in case the id was added twice since the last step */
    }
    if (t->escaped) {
        for (size_t i = 0; i < w->added_count; i++)
            if (t->add_dest[i] != NONE) t->node_of[w->added[i]] = NONE;
        *escaped = true;
        return BROADPHASE_OK;
    }

    /* Moving objects between nodes means laying every slot out anew, however few move. Those
     * that only drifted into a neighbour's region of the same parent wait in their node (its
     * measured bounds keep the search exact; they only widen a little) until they are more
     * than 1/DEFER_SHARE of the objects, or until anything else needs a new layout. */
    size_t pending = 0;
    for (size_t i = 0; i < chunks; i++) pending += t->chunk_count[i];
    /* Movers that waited carried a leaf past its reach region at the last step, and the search
     * left the flat list: lay them out now rather than let the tree search go on. */
    if (t->flat_state & FLAT_ESCAPE) t->urgent = true;
    if (!t->urgent && w->added_count == 0 && pending <= t->slots.count / DEFER_SHARE) {
        measure(t, w->workers, true);
        w->stats.refits++;
        return BROADPHASE_OK;
    }
    /* A relayout for added objects alone (the movers still few enough to wait) tightens only
     * every TIGHTEN_EVERY-th time: run at every step that adds, tightening moved objects between
     * leaves at each and the flat list was made again at most of them (NOTES, row 133); never
     * run, leaves would loosen to their regions. */
    if (t->urgent || pending > t->slots.count / DEFER_SHARE || ++t->untightened >= TIGHTEN_EVERY) {
        threads_for_chunks(w->workers, chunks, tighten, &c);
        t->untightened = 0;
    }
    size_t count = gather_moves(w, t, chunks);
    t->split_count = 0;
    t->redirected_count = 0;
    restructure(w, t, 0);
    bool changed = t->redirected_count > 0;
    if (t->split_count > 0) {
        /* Each crowded node's objects: those staying, then its arrivals (one run of the moves,
         * which gather_moves sorted by destination). */
        for (size_t i = 0; i < t->split_count; i++) {
            uint32_t n = t->splits[i];
            uint32_t k = 0;
            for (uint32_t s = t->nodes[n].begin; s < t->nodes[n].end; s++)
                if (t->dest[s] == n) t->refs[k++] = s;
            for (uint32_t a = t->arrive_first[n]; a < t->arrive_first[n] + t->arrivals[n]; a++) {
                uint32_t src = (uint32_t)(t->moves[a] >> 32);
                t->refs[k++] = src & TREE_ADDED ? t->slots.count + (src & ~TREE_ADDED) : src;
            }
            if (!split(w, t, n, t->refs, t->refs_tmp, k)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        }
        changed = true;
    }
    if (changed) {
        /* Merged nodes hand their objects up; split ones have changed dest in place. */
        for (size_t i = 0; i < w->added_count; i++) {
            uint32_t d = t->add_dest[i];
            while (d != NONE && t->redirect[d] != NONE) d = t->redirect[d];
            t->add_dest[i] = d;
            if (t->add_dest[i] != NONE) t->node_of[w->added[i]] = t->add_dest[i];
        }
        if (!by_node_reserve(w, t)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        threads_for_chunks(w->workers, chunks, count_movers, &c);
        count = gather_moves(w, t, chunks);
        for (size_t i = 0; i < t->redirected_count; i++) t->redirect[t->redirected[i]] = NONE;
        t->redirected_count = 0;
    }

    size_t nodes = t->node_count;
    if (count > 0) {
        uint32_t total = relayout(t, 0, 0);
        threads_for_chunks(w->workers, node_chunks(w, t), copy_nodes, &c);
        /* Spare and free nodes hold nothing: empty ranges (relayout does not reach inside
         * spare branches). */
        for (size_t n = 0; n < nodes; n++) {
            oc_node *node = &t->nodes[n];
            node->begin = node->spare ? 0 : t->new_begin[n];
            node->end = node->spare ? 0 : t->new_begin[n] + t->own_count[n];
            if (node->spare) node->sub_end = 0;
        }
        t->slots.cur = 1 - t->slots.cur;
        t->slots.count = total;
    }
    measure(t, w->workers, true);
    w->stats.refits++;
    return BROADPHASE_OK;
}

/* ---- pair search ---------------------------------------------------------------------------- */

/* Copies the entries of `src` [lb, le) (ids src_ids) that overlap the box [lo, hi] to the list
 * from `at`; returns how many. The list must have room for le - lb + SIMD_PAD entries there. */
static size_t select_box(const search_ctx *c, tree_worker *k, const simd_boxes *src,
                         const uint32_t *src_ids, size_t lb, size_t le, const float lo[3],
                         const float hi[3], size_t at) {
    if (le <= lb) return 0;
    size_t h = simd_box_vs_boxes(lo, hi, src, lb, le, c->dims, k->hits);
    for (size_t j = 0; j < h; j++) {
        uint32_t i = k->hits[j];
        for (int a = 0; a < 3; a++) {
            k->lmin[a][at + j] = src->min[a][i];
            k->lmax[a][at + j] = src->max[a][i];
        }
        k->lid[at + j] = src_ids[i];
    }
    return h;
}

static void fail(tree_worker *k) {
    k->failed = true;
}

/* Objects [lo, hi) of the node's own against each other and against [hi, rest_end); then own
 * objects [olo, ohi) against the list [lb, le), narrowed first to the entries that reach the
 * node's own objects when it is long. */
static void test_own(const search_ctx *c, tree_worker *k, pairs_writer *wr, const oc_node *node,
                     uint32_t lo, uint32_t hi, uint32_t rest_end, uint32_t olo, uint32_t ohi,
                     size_t lb, size_t le) {
    const uint32_t *sid = c->t->slots.sid[c->t->slots.cur];
    tree_test_within(c->w, k, wr, &c->slots, sid, lo, hi, c->dims);
    tree_test_cross(c->w, k, wr, &c->slots, sid, lo, hi, &c->slots, sid, hi, rest_end, c->dims);
    if (le <= lb || ohi <= olo) return;
    if (le - lb > LIST_NARROW_MIN && node->sub_end > node->end) {
        if (!tree_worker_reserve(k, le + (le - lb) + SIMD_PAD, 0, false)) {
            fail(k);
            return;
        }
        simd_boxes list = tree_worker_list(k);
        size_t kept = select_box(c, k, &list, k->lid, lb, le, node->own_lo, node->own_hi, le);
        lb = le;
        le = lb + kept;
    }
    simd_boxes list = tree_worker_list(k);
    tree_test_cross(c->w, k, wr, &c->slots, sid, olo, ohi, &list, k->lid, lb, le, c->dims);
}

/* Without a branch per comparison: the child loop of cross() makes a mask of these. */
static bool boxes_meet(const oc_node *a, const oc_node *b, int dims) {
    unsigned m = 1;
    for (int k = 0; k < dims; k++)
        m &= (unsigned)(a->lo[k] <= b->hi[k]) & (unsigned)(b->lo[k] <= a->hi[k]);
    return m;
}

/* The list [lb, le) against every object of n's subtree (not the subtree's own pairs). */
static void list_vs_subtree(const search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t n,
                            size_t lb, size_t le) {
    if (le <= lb) return;
    const octree *t = c->t;
    const oc_node *node = &t->nodes[n];
    size_t len = le - lb, own = node->end - node->begin;
    if (!tree_worker_reserve(k, le + 2 * len + 2 * SIMD_PAD, (own > len ? own : len) + SIMD_PAD + 1,
                             false)) {
        fail(k);
        return;
    }
    if (own)
        test_own(c, k, wr, node, node->begin, node->begin, node->begin, node->begin, node->end, lb,
                 le);
    for (int j = 0; j < t->nchild; j++) {
        uint32_t ci = node->child[j];
        if (!(node->live >> j & 1)) continue;
        const oc_node *child = &t->nodes[ci];
        simd_boxes list = tree_worker_list(k);
        size_t kept = select_box(c, k, &list, k->lid, lb, le, child->lo, child->hi, le);
        list_vs_subtree(c, k, wr, ci, le, le + kept);
    }
}

/* Two leaves whose bounds meet: the objects of each that reach the other's bounds, into the
 * list from `top`, then those against each other. The common case of cross() below. */
static void cross_leaves(const search_ctx *c, tree_worker *k, pairs_writer *wr, const oc_node *na,
                         const oc_node *nb, size_t top) {
    size_t own_a = na->end - na->begin, own_b = nb->end - nb->begin;
    const uint32_t *sid = c->t->slots.sid[c->t->slots.cur];
    if (own_a <= SIMD_CROSS_MAX && own_b <= SIMD_CROSS_MAX) {
        size_t room = own_a * own_b + SIMD_PAD + 1;
        if (room > k->hit_capacity && !tree_worker_reserve(k, 0, room, false)) {
            fail(k);
            return;
        }
        /* The ids are read only when pairs come out; fetch them while the kernel runs. */
        __builtin_prefetch(sid + na->begin);
        __builtin_prefetch(sid + na->end - 1);
        __builtin_prefetch(sid + nb->begin);
        __builtin_prefetch(sid + nb->end - 1);
        size_t h =
            simd_boxes_cross_pairs(&c->slots, na->begin, na->end, na->lo, na->hi, &c->slots,
                                   nb->begin, nb->end, nb->lo, nb->hi, c->dims, k->rows, k->hits);
        if (h > 0) tree_emit_pairs(c->w, k, wr, sid, sid, h);
        return;
    }
    size_t most = own_a > own_b ? own_a : own_b;
    if (!tree_worker_reserve(k, top + own_a + own_b + 2 * SIMD_PAD, most + SIMD_PAD + 1, false)) {
        fail(k);
        return;
    }
    size_t ka = select_box(c, k, &c->slots, sid, na->begin, na->end, nb->lo, nb->hi, top);
    if (ka == 0) return;
    size_t kb = select_box(c, k, &c->slots, sid, nb->begin, nb->end, na->lo, na->hi, top + ka);
    if (kb == 0) return;
    simd_boxes list = tree_worker_list(k);
    tree_test_cross(c->w, k, wr, &list, k->lid, top, top + ka, &list, k->lid, top + ka,
                    top + ka + kb, c->dims);
}

/* Every pair between the disjoint subtrees a and b, using the list from `top`. In a strict
 * octree siblings' objects meet only on a shared face; in a loose one their enlarged cells
 * overlap, so neighbouring subtrees meet often. */
static void cross(const search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t a, uint32_t b,
                  size_t top) {
    const octree *t = c->t;
    const oc_node *na = &t->nodes[a], *nb = &t->nodes[b];
    if (!boxes_meet(na, nb, c->dims)) return;
    /* Split the side with children (the larger when both have them); the other is the target. */
    bool a_split = na->sub_end > na->end, b_split = nb->sub_end > nb->end;
    if (!a_split && !b_split) {
        cross_leaves(c, k, wr, na, nb, top);
        return;
    }
    if (b_split && (!a_split || nb->sub_end - nb->begin > na->sub_end - na->begin)) {
        uint32_t x = a;
        a = b;
        b = x;
        na = &t->nodes[a];
        nb = &t->nodes[b];
    }
    size_t own = na->end - na->begin;
    if (own) {
        if (!tree_worker_reserve(k, top + own + SIMD_PAD, own + SIMD_PAD + 1, false)) {
            fail(k);
            return;
        }
        const uint32_t *sid = t->slots.sid[t->slots.cur];
        size_t kept = select_box(c, k, &c->slots, sid, na->begin, na->end, nb->lo, nb->hi, top);
        list_vs_subtree(c, k, wr, b, top, top + kept);
    }
    /* Two leaves go straight to the kernel: no call, no second bounds test. */
    bool b_leaf = nb->sub_end == nb->end;
    /* Which children meet b, as a mask computed without a branch per child; then only those
     * (a branch per child on its test mispredicts about half the time). */
    unsigned meet = 0;
    for (int j = 0; j < t->nchild; j++) {
        if (!(na->live >> j & 1)) continue;
        meet |= (unsigned)boxes_meet(&t->nodes[na->child[j]], nb, c->dims) << j;
    }
    while (meet) {
        int j = __builtin_ctz(meet);
        meet &= meet - 1;
        uint32_t cj = na->child[j];
        const oc_node *nc = &t->nodes[cj];
        if (b_leaf && nc->sub_end == nc->end)
            cross_leaves(c, k, wr, nc, nb, top);
        else
            cross(c, k, wr, cj, b, top);
    }
}

static void search_node(const search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t n,
                        size_t lb, size_t le) {
    const octree *t = c->t;
    const oc_node *node = &t->nodes[n];
    size_t own = node->end - node->begin;
    size_t need = own > le - lb ? own : le - lb;
    if (!tree_worker_reserve(k, le + SIMD_PAD, need + SIMD_PAD + 1, false)) {
        fail(k);
        return;
    }
    test_own(c, k, wr, node, node->begin, node->end, node->end, node->begin, node->end, lb, le);
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    for (int i = 0; i < t->nchild; i++) {
        if (!(node->live >> i & 1)) continue;
        for (int j = i + 1; j < t->nchild; j++)
            if (node->live >> j & 1) cross(c, k, wr, node->child[i], node->child[j], le);
    }
    for (int j = 0; j < t->nchild; j++) {
        uint32_t ci = node->child[j];
        if (!(node->live >> j & 1)) continue;
        const oc_node *child = &t->nodes[ci];
        if (!tree_worker_reserve(k, le + (le - lb) + own + 2 * SIMD_PAD, need + SIMD_PAD + 1,
                                 false)) {
            fail(k);
            return;
        }
        simd_boxes list = tree_worker_list(k);
        size_t at = le;
        at += select_box(c, k, &list, k->lid, lb, le, child->lo, child->hi, at);
        at += select_box(c, k, &c->slots, sid, node->begin, node->end, child->lo, child->hi, at);
        search_node(c, k, wr, ci, le, at);
    }
}

/* The ancestors' objects that reach node r's subtree, into the list from 0; returns its length. */
static size_t ancestors_list(const search_ctx *c, tree_worker *k, uint32_t r, bool *ok) {
    const octree *t = c->t;
    const oc_node *target = &t->nodes[r];
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    size_t at = 0;
    for (uint32_t a = target->parent; a != NONE; a = t->nodes[a].parent) {
        const oc_node *anc = &t->nodes[a];
        size_t own = anc->end - anc->begin;
        if (!tree_worker_reserve(k, at + own + SIMD_PAD, own + SIMD_PAD + 1, false)) {
            *ok = false;
            return 0;
        }
        at += select_box(c, k, &c->slots, sid, anc->begin, anc->end, target->lo, target->hi, at);
    }
    return at;
}

static void search_job(size_t job, int worker, void *p) {
    const search_ctx *c = p;
    octree *t = c->t;
    tree_worker *k = &t->workers.at[worker];
    const oc_job *j = &t->jobs[job];
    pairs_writer wr = pairs_writer_begin(&c->w->pairs, worker);
    if (j->kind == JOB_CROSS) {
        cross(c, k, &wr, j->lo, j->hi, 0);
        return;
    }
    bool ok = true;
    size_t n0 = ancestors_list(c, k, j->node, &ok);
    if (!ok) {
        fail(k);
    } else if (j->kind == JOB_SUBTREE) {
        search_node(c, k, &wr, j->node, 0, n0);
    } else {
        const oc_node *node = &t->nodes[j->node];
        size_t own = node->end - node->begin;
        if (!tree_worker_reserve(k, 2 * n0 + SIMD_PAD, (own > n0 ? own : n0) + SIMD_PAD + 1, false))
            fail(k);
        else
            test_own(c, k, &wr, node, j->lo, j->hi, node->end, j->lo, j->hi, 0, n0);
    }
}

/* ---- the flat search -------------------------------------------------------------------- */

/* The leaves of n's subtree into the list, in slot order; each node's region becomes the union
 * of its leaves' reach regions. */
static void flat_leaves(octree *t, uint32_t n) {
    oc_node *node = &t->nodes[n];
    float *r = t->fl_region + 6 * (size_t)n;
    if (node->end > node->begin) { /* a leaf: FLAT_NEVER is clear */
        node->list_gen = t->fl_gen;
        t->fl_index[n] = (uint32_t)t->fl_leaves;
        t->fl_leaf[t->fl_leaves++] = n;
        memcpy(r, node->reach_lo, 3 * sizeof(float));
        memcpy(r + 3, node->reach_hi, 3 * sizeof(float));
        return;
    }
    for (int k = 0; k < 3; k++) {
        r[k] = INFINITY;
        r[3 + k] = -INFINITY;
    }
    for (int j = 0; j < t->nchild; j++) {
        if (!(node->live >> j & 1)) continue;
        uint32_t c = node->child[j];
        flat_leaves(t, c);
        const float *cr = t->fl_region + 6 * (size_t)c;
        for (int k = 0; k < 3; k++) {
            r[k] = cr[k] < r[k] ? cr[k] : r[k];
            r[3 + k] = cr[3 + k] > r[3 + k] ? cr[3 + k] : r[3 + k];
        }
    }
}

static bool regions_meet(const octree *t, uint32_t a, uint32_t b) {
    const float *ra = t->fl_region + 6 * (size_t)a, *rb = t->fl_region + 6 * (size_t)b;
    unsigned m = 1;
    for (int k = 0; k < t->dims; k++)
        m &= (unsigned)(ra[k] <= rb[3 + k]) & (unsigned)(rb[k] <= ra[3 + k]);
    return m;
}

/* A worker's edges while the list is made: its slot of the world's per-worker scratch, a count
 * then the edges. */
typedef struct flat_edges {
    uint64_t count, edge[];
} flat_edges;

/* Every pair of leaves, one in each of the disjoint subtrees a and b, whose regions meet, as an
 * edge (lower leaf index << 32 | higher) in the worker's scratch. The same descent as cross(),
 * on regions. */
static void flat_meet(broadphase_world *w, octree *t, int worker, uint32_t a, uint32_t b) {
    if (!regions_meet(t, a, b) || __atomic_load_n(&t->fl_failed, __ATOMIC_RELAXED)) return;
    const oc_node *na = &t->nodes[a], *nb = &t->nodes[b];
    bool a_leaf = t->fl_index[a] != NONE, b_leaf = t->fl_index[b] != NONE;
    if (a_leaf && b_leaf) {
        uint64_t ia = t->fl_index[a], ib = t->fl_index[b];
        flat_edges *e = threads_scratch_get(&w->scratch, worker, sizeof(flat_edges));
        if (e)
            e = threads_scratch_get(&w->scratch, worker,
                                    sizeof(flat_edges) + (e->count + 1) * sizeof(uint64_t));
        if (!e) {
            __atomic_store_n(&t->fl_failed, true, __ATOMIC_RELAXED);
            return;
        }
        e->edge[e->count++] = ia < ib ? ia << 32 | ib : ib << 32 | ia;
        return;
    }
    if (a_leaf || (!b_leaf && nb->sub_end - nb->begin > na->sub_end - na->begin)) {
        uint32_t x = a;
        a = b;
        b = x;
        na = nb;
    }
    for (int j = 0; j < t->nchild; j++)
        if (na->live >> j & 1) flat_meet(w, t, worker, na->child[j], b);
}

/* One piece of the list's making: the pairs between subtrees a and b (b != NONE), or every pair
 * within subtree a. Nodes above octree.task_levels hand their pieces to other workers. */
typedef struct flat_task {
    broadphase_world *w;
    octree *t;
    uint32_t a, b;
} flat_task;

static void flat_task_run(void *p, int worker) {
    const flat_task *task = p;
    broadphase_world *w = task->w;
    octree *t = task->t;
    if (task->b != NONE) {
        flat_meet(w, t, worker, task->a, task->b);
        return;
    }
    const oc_node *node = &t->nodes[task->a];
    if (t->fl_index[task->a] != NONE) return;
    bool spawn = node->level < t->task_levels;
    flat_task sub[8 * 9 / 2 + 8];
    int subs = 0;
    for (int i = 0; i < t->nchild; i++) {
        if (!(node->live >> i & 1)) continue;
        for (int j = i + 1; j <= t->nchild; j++) {
            if (j < t->nchild && !(node->live >> j & 1)) continue;
            /* j == nchild: the child's own subtree */
            flat_task piece = {w, t, node->child[i], j < t->nchild ? node->child[j] : NONE};
            if (spawn) {
                sub[subs] = piece;
                threads_spawn(flat_task_run, &sub[subs]);
                subs++;
            } else {
                flat_task_run(&piece, worker);
            }
        }
    }
    if (subs > 0) threads_wait_children();
}

static int by_u32(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The list's arrays, grown with an eighth to spare: the next list has about as many leaves and
 * pairs, often a few more, and growing again means new pages to fault in, which took the second
 * making at 1e6 from 7.5 ms to 15-18 (perf/NOTES.md, row 107). Contents are not kept. */
static bool flat_grow(broadphase_world *w, void **p, size_t *capacity, size_t need, size_t size) {
    return need <= *capacity || heap_grow(&w->heap, p, capacity, need + need / 8, size, 0);
}

/* Makes the flat search's list for the tree as measured (no FLAT_NEVER). False on out of
 * memory. */
static bool flat_build(broadphase_world *w, octree *t) {
    size_t nodes = t->node_count, leaves = t->leaves;
    if (!flat_grow(w, (void **)&t->fl_leaf, &t->fl_leaf_capacity, leaves + 1, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_first, &t->fl_first_capacity, leaves + 2, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_job, &t->fl_job_capacity, leaves + 2, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_index, &t->fl_index_capacity, nodes + 1, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_region, &t->fl_region_capacity, 6 * nodes + 6, sizeof(float)))
        return false;
    for (size_t n = 0; n < nodes; n++) t->fl_index[n] = NONE;
    t->fl_gen = t->fl_gen == UINT32_MAX ? 1 : t->fl_gen + 1; /* all leave the old list */
    t->fl_leaves = 0;
    t->fl_failed = false;
    flat_leaves(t, 0);
    if (!threads_scratch_reserve(&w->scratch, w->workers)) return false;
    for (int i = 0; i < w->workers; i++) {
        flat_edges *e = threads_scratch_get(&w->scratch, i, sizeof(flat_edges) + 64);
        if (!e) return false;
        e->count = 0;
    }
    flat_task root = {w, t, 0, NONE};
    t->task_levels = w->workers > 1 && t->node_count > NODE_CHUNK ? (t->dims == 3 ? 2 : 3) : 0;
    if (t->task_levels > 0)
        threads_run_tasks(w->workers, flat_task_run, &root);
    else
        flat_task_run(&root, 0);
    if (t->fl_failed) {
        t->fl_gen = t->fl_gen == UINT32_MAX ? 1 : t->fl_gen + 1;
        return false;
    }
    /* Each leaf's later neighbours, grouped by a counting pass over the workers' edges, then put
     * in order (the workers found them in an order that depends on the thread count). */
    size_t count = 0;
    memset(t->fl_first, 0, (t->fl_leaves + 2) * sizeof(uint32_t));
    for (int i = 0; i < w->workers; i++) {
        const flat_edges *e = threads_scratch_get(&w->scratch, i, sizeof(flat_edges));
        for (uint64_t k = 0; k < e->count; k++) t->fl_first[(e->edge[k] >> 32) + 2]++;
        count += e->count;
    }
    if (!flat_grow(w, (void **)&t->fl_cand, &t->fl_cand_capacity, count + 1, sizeof(uint32_t)))
        return false;
    for (size_t i = 2; i < t->fl_leaves + 2; i++) t->fl_first[i] += t->fl_first[i - 1];
    for (int i = 0; i < w->workers; i++) {
        const flat_edges *e = threads_scratch_get(&w->scratch, i, sizeof(flat_edges));
        for (uint64_t k = 0; k < e->count; k++)
            t->fl_cand[t->fl_first[(e->edge[k] >> 32) + 1]++] = (uint32_t)e->edge[k];
    }
    for (size_t i = 0; i < t->fl_leaves; i++) {
        uint32_t *c = t->fl_cand + t->fl_first[i];
        size_t n = t->fl_first[i + 1] - t->fl_first[i];
        if (n > 32) {
            qsort(c, n, sizeof *c, by_u32);
            continue;
        }
        for (size_t k = 1; k < n; k++) {
            uint32_t v = c[k];
            size_t j = k;
            for (; j > 0 && c[j - 1] > v; j--) c[j] = c[j - 1];
            c[j] = v;
        }
    }
    /* Jobs: runs of leaves holding about per_job objects as the list is made; they depend on
     * the tree only, never on the thread count. */
    size_t per_job = t->slots.count / FLAT_JOBS_LEAST;
    per_job = per_job < FLAT_JOB_MIN   ? FLAT_JOB_MIN
              : per_job > FLAT_JOB_MAX ? FLAT_JOB_MAX
                                       : per_job;
    t->fl_jobs = 0;
    size_t held = 0;
    for (size_t i = 0; i < t->fl_leaves; i++) {
        if (held == 0) t->fl_job[t->fl_jobs++] = (uint32_t)i;
        const oc_node *node = &t->nodes[t->fl_leaf[i]];
        held += node->end - node->begin;
        if (held >= per_job) held = 0;
    }
    t->fl_job[t->fl_jobs] = (uint32_t)t->fl_leaves;
    t->flat_builds++;
    return true;
}

static void flat_job(size_t job, int worker, void *p) {
    const search_ctx *c = p;
    const octree *t = c->t;
    tree_worker *k = &t->workers.at[worker];
    pairs_writer wr = pairs_writer_begin(&c->w->pairs, worker);
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    uint32_t end = t->fl_job[job + 1];
    for (uint32_t i = t->fl_job[job]; i < end; i++) {
        /* The nodes of the leaf FLAT_AHEAD on and of its candidates: scattered in memory, and
         * the first thing read (perf/NOTES.md, row 100). */
        if (i + FLAT_AHEAD < t->fl_leaves) {
            uint32_t f = i + FLAT_AHEAD;
            __builtin_prefetch(&t->nodes[t->fl_leaf[f]]);
            for (uint32_t e = t->fl_first[f]; e < t->fl_first[f + 1]; e++)
                __builtin_prefetch(&t->nodes[t->fl_leaf[t->fl_cand[e]]]);
        }
        /* A leaf that emptied, or whose node now serves another cell, holds nothing here. */
        const oc_node *na = &t->nodes[t->fl_leaf[i]];
        size_t own = na->end - na->begin;
        if (!tree_worker_reserve(k, SIMD_PAD, own + SIMD_PAD + 1, false)) {
            fail(k);
            return;
        }
        tree_test_within(c->w, k, &wr, &c->slots, sid, na->begin, na->end, c->dims);
        for (uint32_t e = t->fl_first[i]; e < t->fl_first[i + 1]; e++) {
            const oc_node *nb = &t->nodes[t->fl_leaf[t->fl_cand[e]]];
            if (boxes_meet(na, nb, c->dims)) cross_leaves(c, k, &wr, na, nb, 0);
        }
    }
}

/* Subtrees small enough become one job; above them, each node's own objects are cut into
 * pieces. The cut depends on the tree only, never on the thread count. */
static void add_job(octree *t, oc_job job, bool write) {
    if (write) t->jobs[t->job_count] = job;
    t->job_count++;
}

static void collect_jobs(octree *t, uint32_t n, bool write) {
    const oc_node *node = &t->nodes[n];
    /* A node owning many objects (most objects overlap most others, as in a dense scene) is cut
     * into pieces even in a small subtree: its own tests are quadratic. */
    if (node->sub_end - node->begin <= JOB_OBJECTS && node->end - node->begin <= OWN_PIECE) {
        add_job(t, (oc_job){n, JOB_SUBTREE, 0, 0}, write);
        return;
    }
    for (uint32_t lo = node->begin; lo < node->end; lo += OWN_PIECE) {
        uint32_t hi = node->end - lo > OWN_PIECE ? lo + OWN_PIECE : node->end;
        add_job(t, (oc_job){n, JOB_OWN, lo, hi}, write);
    }
    for (int i = 0; i < t->nchild; i++) {
        if (!(node->live >> i & 1)) continue;
        for (int j = i + 1; j < t->nchild; j++)
            if ((node->live >> j & 1) &&
                boxes_meet(&t->nodes[node->child[i]], &t->nodes[node->child[j]], t->dims))
                add_job(t, (oc_job){n, JOB_CROSS, node->child[i], node->child[j]}, write);
    }
    for (int j = 0; j < t->nchild; j++)
        if (node->live >> j & 1) collect_jobs(t, node->child[j], write);
}

static broadphase_status plan_search(broadphase_world *w, void *state, method_search *out) {
    octree *t = state;
    if (!tree_workers_ready(w, &t->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->search = (search_ctx){w, t, tree_slots_boxes(&t->slots), w->config.dimensions};
    *out = (method_search){0,           search_job, &t->search,
                           &t->workers, &t->slots,  tree_quality(t->cost, t->slots.count)};
    if (t->slots.count > 0 && !(t->flat_state & (FLAT_NEVER | FLAT_ESCAPE))) {
        if (t->flat_state & FLAT_STALE) {
            if (!flat_build(w, t)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
            t->flat_state &= ~(unsigned)FLAT_STALE;
        }
        t->flat_searches++;
        out->job_count = t->fl_jobs;
        out->job = flat_job;
        return BROADPHASE_OK;
    }
    /* Counted first, then written. */
    t->job_count = 0;
    if (t->slots.count > 0) collect_jobs(t, 0, false);
    if (!heap_grow(&w->heap, (void **)&t->jobs, &t->job_capacity, t->job_count + 1, sizeof(oc_job),
                   0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->job_count = 0;
    if (t->slots.count > 0) collect_jobs(t, 0, true);
    out->job_count = t->job_count;
    return BROADPHASE_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

#ifdef BROADPHASE_DEEP_VALIDATE
static size_t validate_node(const broadphase_world *w, const octree *t, uint32_t n) {
    const oc_node *node = &t->nodes[n];
    int b = t->slots.cur, dims = t->dims;
    TREE_CHECK(!node->spare);
    TREE_CHECK(node->begin <= node->end && node->end <= node->sub_end);
    TREE_CHECK(node->sub_end <= t->slots.count);
    size_t seen = node->end - node->begin;
    for (uint32_t s = node->begin; s < node->end; s++) {
        uint32_t id = t->slots.sid[b][s];
        float mn[3] = {t->slots.smin[b][0][s], t->slots.smin[b][1][s], t->slots.smin[b][2][s]};
        float mx[3] = {t->slots.smax[b][0][s], t->slots.smax[b][1][s], t->slots.smax[b][2][s]};
        double umin[3] = {0, 0, 0}, umax[3] = {0, 0, 0};
        to_grid(t, mn, mx, umin, umax);
        /* Held by its node, or (a mover waiting, see refit) by the node's parent. */
        TREE_CHECK(holds(t, node->level, node->cell, umin, umax) ||
                   (node->parent != NONE && holds(t, t->nodes[node->parent].level,
                                                  t->nodes[node->parent].cell, umin, umax)));
        TREE_CHECK(t->node_of[id] == n && t->slot_node[s] == n);
        TREE_CHECK(world_tree_member(w, id));
        for (int k = 0; k < dims; k++) {
            TREE_CHECK(mn[k] == w->box[id].lo[k] && mx[k] == w->box[id].hi[k]);
            TREE_CHECK(mn[k] >= node->lo[k] && mx[k] <= node->hi[k]);
            TREE_CHECK(mn[k] >= node->own_lo[k] && mx[k] <= node->own_hi[k]);
        }
    }
    uint32_t at = node->end;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE) continue;
        const oc_node *cn = &t->nodes[c];
        TREE_CHECK(cn->parent == n && cn->level == node->level + 1);
        for (int k = 0; k < dims; k++) TREE_CHECK(cn->cell[k] >> 1 == node->cell[k]);
        TREE_CHECK(child_slot(t, cn->cell) == j);
        if (cn->spare) continue;
        TREE_CHECK(cn->begin == at);
        at = cn->sub_end;
        seen += validate_node(w, t, c);
        for (int k = 0; k < dims; k++)
            TREE_CHECK(cn->lo[k] >= node->lo[k] && cn->hi[k] <= node->hi[k]);
    }
    TREE_CHECK(at == node->sub_end);
    return seen;
}

static void validate(const broadphase_world *w, const octree *t) {
    TREE_CHECK(validate_node(w, t, 0) == t->slots.count);
    TREE_CHECK(t->slots.count == world_tree_count(w));
}
#endif

/* REFIT or REBUILD as the policy and the tree's state say; an object leaving the root makes
 * the root grow (a rebuild). */
static broadphase_status update_tree(broadphase_world *w, octree *t) {
    bool full =
        tree_should_rebuild(w, t->built, t->slots.count, t->slots.capacity, t->cost, t->base_cost);
    broadphase_status s = BROADPHASE_OK;
    double min_side = 0.0;
    if (!full) {
        bool escaped = false;
        t->built_empty = false;
        s = refit(w, t, &escaped);
        if (s == BROADPHASE_OK && escaped) {
            /* An object left the root: grow it, at least doubling, and build again. */
            full = true;
            min_side = 2.0 * t->side;
            t->growths++;
        }
    }
    if (s == BROADPHASE_OK && full) s = rebuild(w, t, min_side);
    return s;
}

static broadphase_status update(broadphase_world *w, void **state) {
    octree *t = tree_of(w, state);
    if (!t) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    broadphase_status s = BROADPHASE_OK;
    if (tree_idle(w, t->built && t->built_empty))
        w->stats.refits++;
    else
        s = update_tree(w, t);
    if (s != BROADPHASE_OK) {
        t->built = false;
        return s;
    }
#ifdef BROADPHASE_DEEP_VALIDATE
    validate(w, t);
#endif
    return BROADPHASE_OK;
}

static void fill_stats(const void *state, broadphase_stats *s) {
    const octree *t = state;
    if (!t || !t->built) return;
    s->nodes = t->live_nodes;
    s->leaves = t->leaves;
    s->depth = t->max_depth_seen;
    s->objects_in_internal_nodes = t->internal_objects;
    s->spare_nodes = t->node_count - t->free_count - t->live_nodes;
    s->root_growths = t->growths;
    s->flat_searches = t->flat_searches;
    s->flat_builds = t->flat_builds;
    tree_workers_account(&t->workers, &s->bytes_in_use, &s->allocations);
}

static void count_levels(const octree *t, uint32_t n, broadphase_level *levels, size_t capacity) {
    const oc_node *node = &t->nodes[n];
    bool leaf = true;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE || t->nodes[c].spare) continue;
        leaf = false;
        count_levels(t, c, levels, capacity);
    }
    if (node->level >= capacity) return;
    levels[node->level].nodes++;
    levels[node->level].leaves += leaf;
    levels[node->level].objects += node->end - node->begin;
}

static size_t fill_levels(const void *state, broadphase_level *levels, size_t capacity) {
    const octree *t = state;
    if (!t || !t->built) return 0;
    for (size_t l = 0; l < capacity && l <= t->max_depth_seen; l++)
        levels[l] = (broadphase_level){0, 0, 0};
    count_levels(t, 0, levels, capacity);
    return (size_t)t->max_depth_seen + 1;
}

static void destroy(broadphase_world *w, void *state) {
    octree *t = state;
    if (!t) return;
    tree_workers_release(w, &t->workers);
    tree_slots_release(w, &t->slots);
    heap_free(&w->heap, t->nodes, t->node_capacity * sizeof(oc_node));
    heap_free(&w->heap, t->keys, t->key_capacity * sizeof(uint64_t));
    heap_free(&w->heap, t->keys_tmp, t->key_capacity * sizeof(uint64_t));
    heap_free(&w->heap, t->vals, t->key_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->vals_tmp, t->key_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->hist, t->hist_bytes);
    heap_free(&w->heap, t->chunk_count, t->chunk_capacity * sizeof(size_t));
    heap_free(&w->heap, t->chunk_bounds, t->chunk_bounds_capacity * sizeof(float));
    heap_free(&w->heap, t->node_of, t->node_of_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->dest, t->dest_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->slot_node, t->slot_node_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->add_dest, t->add_dest_capacity * sizeof(uint32_t));
    uint32_t **by_node[] = {&t->own_count, &t->new_begin,  &t->arrive_first, &t->arrivals,
                            &t->redirect,  &t->redirected, &t->splits,       &t->free_nodes};
    for (size_t i = 0; i < sizeof by_node / sizeof by_node[0]; i++)
        heap_free(&w->heap, *by_node[i], t->by_node_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->moves, t->move_capacity * sizeof(uint64_t));
    heap_free(&w->heap, t->moves_tmp, t->move_capacity * sizeof(uint64_t));
    heap_free(&w->heap, t->refs, t->ref_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->refs_tmp, t->ref_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->jobs, t->job_capacity * sizeof(oc_job));
    heap_free(&w->heap, t->fl_leaf, t->fl_leaf_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->fl_first, t->fl_first_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->fl_cand, t->fl_cand_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->fl_job, t->fl_job_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->fl_index, t->fl_index_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->fl_region, t->fl_region_capacity * sizeof(float));
    heap_free(&w->heap, t, sizeof *t);
}

/* ---- the queries' view (query.h) ----------------------------------------------------------- */

static void query_node_of(const void *p, uint64_t handle, query_node *out) {
    const octree *t = p;
    const oc_node *n = &t->nodes[handle];
    for (int k = 0; k < 3; k++) { /* the measured bounds of the subtree's objects */
        out->lo[k] = n->lo[k];
        out->hi[k] = n->hi[k];
    }
    out->own = tree_slots_boxes(&t->slots);
    out->own_id = out->sub_id = t->slots.sid[t->slots.cur];
    out->own_begin = out->sub_begin = n->begin;
    out->own_end = n->end;
    out->sub_end = n->sub_end;
    out->sweep = 3;
    memcpy(out->own_lo, n->own_lo, sizeof out->own_lo);
    memcpy(out->own_hi, n->own_hi, sizeof out->own_hi);
    out->children = 0;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = n->child[j];
        if (c != NONE && !t->nodes[c].spare) out->child[out->children++] = c;
    }
}

/* The cell itself, in world coordinates (rounded to nearest), without the looseness. */
static void cell_of(const void *p, uint64_t handle, float lo[3], float hi[3]) {
    const octree *t = p;
    const oc_node *n = &t->nodes[handle];
    double size = t->cell_size[n->level];
    for (int k = 0; k < 3; k++) {
        lo[k] = (float)((double)n->cell[k] * size / t->scale + t->origin[k]);
        hi[k] = (float)(((double)n->cell[k] + 1.0) * size / t->scale + t->origin[k]);
    }
}

static void bounds_of(const void *p, uint64_t handle, float lo[3], float hi[3]) {
    const oc_node *n = &((const octree *)p)->nodes[handle];
    memcpy(lo, n->lo, sizeof n->lo);
    memcpy(hi, n->hi, sizeof n->hi);
}

static void prefetch_of(const void *p, uint64_t handle) {
    const octree *t = p;
    const oc_node *n = &t->nodes[handle];
    for (size_t at = 64; at < sizeof *n; at += 64) __builtin_prefetch((const char *)n + at);
    tree_slots_prefetch(&t->slots, n->begin, n->end, t->dims);
}

static bool query_view_of(const void *state, query_view *out) {
    const octree *t = state;
    if (!t || !t->built || t->slots.count == 0) return false;
    *out = (query_view){t, 0, query_node_of, QUERY_MEMBER_TREE, bounds_of, cell_of, prefetch_of};
    return true;
}

const method octree_method = {
    .id = BROADPHASE_METHOD_OCTREE,
    .name = "octree",
    .leaf_size = 64,
    .uses_fields = true,
    .update = update,
    .plan_search = plan_search,
    .fill_stats = fill_stats,
    .fill_levels = fill_levels,
    .query_view = query_view_of,
    .destroy = destroy,
};

/* The kd-tree method. Each node splits the longest side of its objects' centre bounds at the
 * midpoint; objects that straddle the plane stay in the node. Objects live in tree order as
 * SoA columns, every node's own objects contiguous and every subtree contiguous (own objects,
 * then the left subtree, then the right). Pairs come from each node's own objects against each
 * other and against the ancestors' objects that reach the node (the parent-to-child list,
 * filtered by the side of each plane), all with the SIMD kernels. REBUILD partitions from
 * scratch in parallel tasks; REFIT keeps the planes and re-homes the objects that left their
 * node; AUTO refits until the cost figure degrades past the configured factor. */
#include "clock.h"
#include "bits.h"
#include "kdtree.h"

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
    TASK_CUTOFF = 8192,     /* build subtrees larger than this as separate tasks */
    JOB_OBJECTS = 4096,     /* subtrees up to this many objects are one search job */
    OWN_PIECE = 512,        /* a large node's own objects are searched in pieces this big */
    SLOT_CHUNK = 16384,     /* objects per chunk in the passes over ids and slots, at most */
    SMALL_CHUNK = 4096,     /* ... and at least, from SMALL_FROM slots (slot_chunk_size) */
    SMALL_FROM = 65536,     /* objects from which chunks go below the largest size */
    NODE_CHUNK = 4096,      /* nodes per chunk in the parallel passes over nodes, at most */
    NODE_SMALL_CHUNK = 512, /* ... and at least */
    MIN_NODE_CAPACITY = 64, /* nodes reserved at least */
    LIST_NARROW_MIN = 32,   /* lists longer than this are narrowed to an internal node's slab */
    ARRIVAL_ROOM = 1024,    /* per-worker room for one node's arrivals in a refit, at least */
    MOVE_CHUNK = 4096,      /* moves per chunk in the parallel passes over them */
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

typedef struct kd_record {
    float min[3], max[3];
    uint32_t id, pad;
} kd_record;

typedef enum kd_job_kind { JOB_SUBTREE, JOB_OWN } kd_job_kind;

typedef struct kd_job {
    uint32_t node, kind, lo, hi; /* JOB_OWN: own objects [lo, hi) of node */
} kd_job;

typedef struct kdtree kdtree;

/* What the search's jobs read (kept in the tree, for the frame's retries). */
typedef struct search_ctx {
    broadphase_world *w;
    kdtree *t;
    simd_boxes slots;
    int dims;
} search_ctx;

struct kdtree {
    kd_node *nodes;
    size_t node_capacity;
    uint32_t node_count; /* accessed with atomics during the build */
    bool overflow;

    tree_slots slots; /* objects in tree order */

    kd_record *records;
    size_t record_capacity;
    uint32_t *node_of; /* by id: the node holding it, NONE when not in the tree */
    size_t node_of_capacity;
    uint32_t *dest; /* by slot: the node it moves to during a refit, or DEAD */
    size_t dest_capacity;
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

    /* Refit scratch, by node and by mover. */
    uint32_t *own_count, *new_begin, *arrive_first, *arrive_end;
    size_t own_count_capacity, new_begin_capacity, arrive_first_capacity, arrive_end_capacity;
    uint64_t *moves, *moves_tmp;
    size_t move_capacity, moves_tmp_capacity;
    size_t *chunk_count;
    size_t chunk_capacity;
    size_t slot_chunk;        /* ids or slots per chunk in this build's or refit's passes */
    size_t node_chunk;        /* nodes per chunk in the passes over nodes (node_chunks) */
    struct kd_measure *parts; /* by node chunk: measure's partial figures */
    size_t part_capacity;

    kd_job *jobs;
    size_t job_count, job_capacity;
    tree_workers workers;

    bool built;
    bool built_empty;         /* the last update was a build of no objects (see tree_idle) */
    uint64_t base_cost, cost; /* sum over nodes of own^2, after the last rebuild and now */
    uint32_t depth, leaves, internal_objects;
    search_ctx search;
};

/* ---- small helpers ------------------------------------------------------------------------- */

static bool is_leaf(const kd_node *n) {
    return n->child[0] == NONE && n->child[1] == NONE;
}

static bool in_cell(const kd_node *n, const float mn[3], const float mx[3], int dims) {
    for (int k = 0; k < dims; k++)
        if (!(mn[k] > n->cell_lo[k] && mx[k] < n->cell_hi[k])) return false;
    return true;
}

/* The child an object sinks into from n, or NONE when it stays (straddles, leaf, or the child on
 * its side is absent). */
static uint32_t sink_step(const kd_node *n, const float mn[3], const float mx[3]) {
    if (is_leaf(n)) return NONE;
    if (mx[n->axis] < n->plane) return n->child[0];
    if (mn[n->axis] > n->plane) return n->child[1];
    return NONE;
}

static uint32_t rehome(const kd_node *nodes, uint32_t n, const float mn[3], const float mx[3],
                       int dims) {
    while (n != 0 && !in_cell(&nodes[n], mn, mx, dims)) n = nodes[n].parent;
    for (;;) {
        uint32_t c = sink_step(&nodes[n], mn, mx);
        if (c == NONE) return n;
        n = c;
    }
}

static kdtree *tree_of(broadphase_world *w, void **state) {
    if (!*state) {
        kdtree *t = heap_alloc(&w->heap, sizeof(kdtree));
        if (t) memset(t, 0, sizeof(kdtree));
        *state = t;
    }
    return *state;
}

/* node_of covers every id handed out so far; ids new to it read as absent from the tree. */
static bool id_tables_reserve(broadphase_world *w, kdtree *t) {
    return tree_node_of_reserve(w, &t->node_of, &t->node_of_capacity);
}

/* ---- build --------------------------------------------------------------------------------- */

/* What the parallel passes over ids, slots and nodes work on. */
typedef struct tree_ctx {
    broadphase_world *w;
    kdtree *t;
    size_t chunks;   /* passes cut by slots (slot_chunk_positions): how many chunks */
    bool new_ranges; /* set_ranges: also set begin and end from the prefix sums */
    size_t moves;    /* passes over the moves: how many */
    uint32_t most;   /* count_moves: the most arrivals into one node */
} tree_ctx;

static void count_live(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    size_t begin = chunk * c->t->slot_chunk, end = begin + c->t->slot_chunk;
    if (end > c->w->id_end) end = c->w->id_end;
    size_t live = 0;
    for (size_t i = begin; i < end; i++) live += world_tree_member(c->w, i);
    c->t->chunk_count[chunk] = live;
}

static void write_records(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    const broadphase_world *w = c->w;
    size_t begin = chunk * c->t->slot_chunk, end = begin + c->t->slot_chunk;
    if (end > w->id_end) end = w->id_end;
    kd_record *r = c->t->records + c->t->chunk_count[chunk];
    for (size_t i = begin; i < end; i++) {
        if (!world_tree_member(w, i)) continue;
        for (int k = 0; k < 3; k++) {
            r->min[k] = w->box[i].lo[k];
            r->max[k] = w->box[i].hi[k];
        }
        r->id = (uint32_t)i;
        r->pad = 0;
        r++;
    }
}

typedef struct build_ctx {
    kdtree *t;
    int dims, leaf_size, max_depth;
} build_ctx;

typedef struct build_task {
    const build_ctx *b;
    uint32_t node, begin, end;
} build_task;

static void build_node(void *p, int worker);

static float rec_key(const kd_record *r, int axis) {
    return r->min[axis];
}

/* Quicksort of records by min on one axis (median of three, insertion sort below 16). */
static void sort_records(kd_record *r, uint32_t n, int axis) {
    while (n > 16) {
        float a = rec_key(&r[0], axis), m = rec_key(&r[n / 2], axis), z = rec_key(&r[n - 1], axis);
        float pivot = a < m ? (m < z ? m : (a < z ? z : a)) : (a < z ? a : (m < z ? z : m));
        uint32_t i = 0, j = n - 1;
        for (;;) {
            while (rec_key(&r[i], axis) < pivot) i++;
            while (rec_key(&r[j], axis) > pivot) j--;
            if (i >= j) break;
            kd_record tmp = r[i];
            r[i++] = r[j];
            r[j--] = tmp;
        }
        /* Recurse into the smaller side, loop on the larger: bounded stack depth. */
        uint32_t left = j + 1;
        if (left < n - left) {
            sort_records(r, left, axis);
            r += left;
            n -= left;
        } else {
            sort_records(r + left, n - left, axis);
            n = left;
        }
    }
    for (uint32_t i = 1; i < n; i++) {
        kd_record x = r[i];
        uint32_t j = i;
        while (j > 0 && rec_key(&r[j - 1], axis) > rec_key(&x, axis)) {
            r[j] = r[j - 1];
            j--;
        }
        r[j] = x;
    }
}

/* Chooses the sweep axis of a node with many own objects (the axis, other than its split axis,
 * along which they spread most), sorts them along it and records their reach. */
static void finish_own(kd_node *n, kd_record *rec, uint32_t begin, uint32_t end, int dims,
                       int split_axis) {
    n->sweep = NO_SWEEP;
    n->reach = 0.0f;
    if (end - begin <= SWEEP_MIN) return;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (uint32_t i = begin; i < end; i++) {
        for (int k = 0; k < dims; k++) {
            lo[k] = rec[i].min[k] < lo[k] ? rec[i].min[k] : lo[k];
            hi[k] = rec[i].max[k] > hi[k] ? rec[i].max[k] : hi[k];
        }
    }
    int axis = -1;
    for (int k = 0; k < dims; k++)
        if (k != split_axis && (axis < 0 || hi[k] - lo[k] > hi[axis] - lo[axis])) axis = k;
    if (axis < 0) axis = 0;
    sort_records(rec + begin, end - begin, axis);
    float reach = 0.0f;
    for (uint32_t i = begin; i < end; i++) {
        float e = rec[i].max[axis] - rec[i].min[axis];
        reach = e > reach ? e : reach;
    }
    n->sweep = (uint8_t)axis;
    n->slab_lo = split_axis < 0 ? -INFINITY : lo[split_axis];
    n->slab_hi = split_axis < 0 ? INFINITY : hi[split_axis];
    n->reach = nextafterf(reach, INFINITY); /* never below the exact largest extent */
}

static void build_node(void *p, int worker) {
    (void)worker;
    build_task *task = p;
    const build_ctx *b = task->b;
    kdtree *t = b->t;
    kd_node *n = &t->nodes[task->node];
    kd_record *rec = t->records;
    uint32_t begin = task->begin, end = task->end;
    n->begin = begin;
    n->end = end;
    n->sub_end = end;
    n->child[0] = n->child[1] = NONE;
    n->sweep = NO_SWEEP;
    if (end - begin <= (uint32_t)b->leaf_size || n->depth >= b->max_depth) {
        finish_own(n, rec, begin, end, b->dims, -1);
        return;
    }

    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (uint32_t i = begin; i < end; i++) {
        for (int k = 0; k < b->dims; k++) {
            float c = rec[i].min[k] * 0.5f + rec[i].max[k] * 0.5f;
            lo[k] = c < lo[k] ? c : lo[k];
            hi[k] = c > hi[k] ? c : hi[k];
        }
    }
    int axis = 0;
    float extent = hi[0] - lo[0];
    for (int k = 1; k < b->dims; k++) {
        if (hi[k] - lo[k] > extent) {
            extent = hi[k] - lo[k];
            axis = k;
        }
    }
    if (!(extent > 0.0f)) { /* every centre the same: nothing separates them */
        finish_own(n, rec, begin, end, b->dims, -1);
        return;
    }
    float plane = lo[axis] * 0.5f + hi[axis] * 0.5f;

    /* Three-way partition: straddlers (kept here), then left (max < plane), then right. */
    uint32_t own_end = begin, mid = begin, right = end;
    while (mid < right) {
        kd_record r = rec[mid];
        if (r.max[axis] < plane) {
            mid++;
        } else if (r.min[axis] > plane) {
            right--;
            rec[mid] = rec[right];
            rec[right] = r;
        } else {
            rec[mid] = rec[own_end];
            rec[own_end] = r;
            own_end++;
            mid++;
        }
    }
    if (own_end == end) { /* everything straddles: stays a leaf */
        finish_own(n, rec, begin, end, b->dims, -1);
        return;
    }
    uint32_t ranges[2][2] = {{own_end, right}, {right, end}};
    int want = (right > own_end) + (end > right);
    uint32_t first = __atomic_fetch_add(&t->node_count, (uint32_t)want, __ATOMIC_RELAXED);
    if (first + (uint32_t)want > t->node_capacity) {
        /* Out of nodes: keep this node a leaf and let the caller build again with more room. */
        __atomic_store_n(&t->overflow, true, __ATOMIC_RELAXED);
        return;
    }
    n->axis = (uint8_t)axis;
    n->plane = plane;
    n->end = own_end;
    finish_own(n, rec, begin, own_end, b->dims, axis);
    build_task sub[2];
    int subs = 0;
    uint32_t next = first;
    for (int side = 0; side < 2; side++) {
        if (ranges[side][1] == ranges[side][0]) continue;
        uint32_t ci = next++;
        kd_node *c = &t->nodes[ci];
        memcpy(c->cell_lo, n->cell_lo, sizeof c->cell_lo);
        memcpy(c->cell_hi, n->cell_hi, sizeof c->cell_hi);
        if (side == 0)
            c->cell_hi[axis] = plane;
        else
            c->cell_lo[axis] = plane;
        c->parent = task->node;
        c->depth = (uint8_t)(n->depth + 1);
        c->axis = 0;
        c->plane = 0.0f;
        n->child[side] = ci;
        sub[subs++] = (build_task){b, ci, ranges[side][0], ranges[side][1]};
    }
    if (subs == 2 && end - begin > TASK_CUTOFF) {
        threads_spawn(build_node, &sub[0]);
        build_node(&sub[1], worker);
        threads_wait_children();
    } else {
        for (int s = 0; s < subs; s++) build_node(&sub[s], worker);
    }
}

typedef struct scatter_ctx {
    kdtree *t;
} scatter_ctx;

static void scatter_records(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    kdtree *t = ((scatter_ctx *)p)->t;
    int b = t->slots.cur;
    for (size_t i = begin; i < end; i++) {
        const kd_record *r = &t->records[i];
        for (int k = 0; k < 3; k++) {
            t->slots.smin[b][k][i] = r->min[k];
            t->slots.smax[b][k][i] = r->max[k];
        }
        t->slots.sid[b][i] = r->id;
    }
}

static void mark_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((scatter_ctx *)p)->t;
    size_t end = (chunk + 1) * t->node_chunk;
    if (end > t->node_count) end = t->node_count;
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    for (size_t n = chunk * t->node_chunk; n < end; n++) {
        for (uint32_t s = t->nodes[n].begin; s < t->nodes[n].end; s++) {
            t->node_of[sid[s]] = (uint32_t)n;
            t->slot_node[s] = (uint32_t)n;
        }
    }
}

/* Preorder positions of the subtree of n, from position i; returns the position after it. Depth
 * is bounded by max_depth (<= 64), so recursion is safe. */
static uint32_t number_preorder(kdtree *t, uint32_t n, uint32_t i) {
    t->order[i] = n;
    uint32_t next = i + 1;
    for (int s = 0; s < 2; s++)
        if (t->nodes[n].child[s] != NONE) next = number_preorder(t, t->nodes[n].child[s], next);
    t->skip[i] = next;
    return next;
}

/* The first position whose node begins at `slot` or later (begins rise with the position). */
static uint32_t first_position_at(const kdtree *t, size_t slot) {
    uint32_t lo = 0, hi = t->node_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->nodes[t->order[mid]].begin < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Positions [*first, *last) of the nodes whose own objects begin in chunk `chunk` of slot_chunk
 * slots (the last chunk takes every node after), so that passes over nodes are cut by the work
 * in them, not by node count: the top levels hold many objects in few nodes. */
static void slot_chunk_positions(const kdtree *t, size_t chunk, size_t chunks, uint32_t *first,
                                 uint32_t *last) {
    *first = chunk == 0 ? 0 : first_position_at(t, chunk * t->slot_chunk);
    *last = chunk + 1 >= chunks ? t->node_count : first_position_at(t, (chunk + 1) * t->slot_chunk);
}

/* Ids or slots per chunk: SLOT_CHUNK, and below it, so that every worker has chunks to balance,
 * from SMALL_FROM slots on. Fewer slots stay in chunks of SLOT_CHUNK: a tree of 1e4 cut in three
 * chunks on two workers left half the boxes in the other core's cache, and the next move waited
 * for them (move 0.042 -> 0.082 ms at 1e4 on two threads, perf/NOTES.md row 115a). */
static size_t slot_chunk_size(size_t slots, int workers) {
    return threads_chunk_size(slots, workers, slots < SMALL_FROM ? SLOT_CHUNK : SMALL_CHUNK,
                              SLOT_CHUNK);
}

/* Chunks of slot_chunk slots (at least one, which an empty tree's passes over nodes need). */
static size_t slot_chunks(const kdtree *t, uint32_t slots) {
    return slots == 0 ? 1 : threads_chunk_count(slots, t->slot_chunk);
}

/* Sets the chunks of the passes over the nodes that follow, for a tree of `objects`, and returns
 * their count. Below SMALL_FROM objects they stay NODE_CHUNK, for the reason slot_chunk_size
 * gives. */
static size_t node_chunks(const broadphase_world *w, kdtree *t, size_t objects) {
    t->node_chunk =
        threads_chunk_size(t->node_count, w->workers,
                           objects < SMALL_FROM ? NODE_CHUNK : NODE_SMALL_CHUNK, NODE_CHUNK);
    return threads_chunk_count(t->node_count, t->node_chunk);
}

static void position_range(const kdtree *t, size_t chunk, uint32_t *first, uint32_t *last) {
    *first = (uint32_t)(chunk * t->node_chunk);
    *last =
        *first + t->node_chunk < t->node_count ? *first + (uint32_t)t->node_chunk : t->node_count;
}

/* scan[i] = node begins, shifted as pack_counts' prefix sums leave them. */
static void pack_begins(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((tree_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) t->scan[i] = (size_t)t->nodes[t->order[i]].begin << 32;
}

/* Subtree ends from the begins in scan (scan[node_count] holds the total): a subtree ends where
 * the node after it in preorder begins. With new_ranges, begin and end too. */
static void set_ranges(size_t chunk, int worker, void *p) {
    (void)worker;
    const tree_ctx *c = p;
    kdtree *t = c->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        kd_node *node = &t->nodes[t->order[i]];
        if (c->new_ranges) {
            node->begin = (uint32_t)(t->scan[i] >> 32);
            node->end = node->begin + t->own_count[t->order[i]];
        }
        node->sub_end = (uint32_t)(t->scan[t->skip[i]] >> 32);
    }
}

typedef struct kd_measure {
    uint64_t cost;
    uint32_t depth, leaves, internal;
} kd_measure;

static void measure_chunk(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((tree_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    kd_measure m = {0, 0, 0, 0};
    for (uint32_t i = first; i < last; i++) {
        const kd_node *n = &t->nodes[i];
        uint64_t own = n->end - n->begin;
        m.cost += own * own;
        if (n->depth > m.depth) m.depth = n->depth;
        if (is_leaf(n))
            m.leaves++;
        else
            m.internal += (uint32_t)own;
    }
    t->parts[chunk] = m;
}

/* The cost figure and the statistics, summed over node chunks. False on out of memory. */
static bool measure(broadphase_world *w, kdtree *t) {
    size_t chunks = node_chunks(w, t, t->slots.count);
    if (!heap_grow(&w->heap, (void **)&t->parts, &t->part_capacity, chunks + 1, sizeof(kd_measure),
                   0))
        return false;
    tree_ctx c = {w, t, 0, false, 0, 0};
    threads_for_chunks(w->workers, chunks, measure_chunk, &c);
    kd_measure all = {0, 0, 0, 0};
    for (size_t i = 0; i < chunks; i++) {
        all.cost += t->parts[i].cost;
        all.depth = t->parts[i].depth > all.depth ? t->parts[i].depth : all.depth;
        all.leaves += t->parts[i].leaves;
        all.internal += t->parts[i].internal;
    }
    t->cost = all.cost;
    t->depth = all.depth;
    t->leaves = all.leaves;
    t->internal_objects = all.internal;
    return true;
}

static void root_init(kd_node *root) {
    for (int k = 0; k < 3; k++) {
        root->cell_lo[k] = -INFINITY;
        root->cell_hi[k] = INFINITY;
    }
    root->parent = NONE;
    root->depth = 0;
    root->axis = 0;
    root->plane = 0.0f;
}

static broadphase_status rebuild(broadphase_world *w, kdtree *t) {
    t->slot_chunk = slot_chunk_size(w->id_end, w->workers);
    size_t chunks = threads_chunk_count(w->id_end, t->slot_chunk);
    if (!heap_grow(&w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                   sizeof(size_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->records, &t->record_capacity, world_tree_count(w) + 1,
                   sizeof(kd_record), 0) ||
        !tree_slots_reserve(w, &t->slots, world_tree_count(w)) || !id_tables_reserve(w, t) ||
        !heap_grow(&w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    tree_ctx g = {w, t, 0, false, 0, 0};
    threads_for_chunks(w->workers, chunks, count_live, &g);
    threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    threads_for_chunks(w->workers, chunks, write_records, &g);
    uint32_t count = (uint32_t)world_tree_count(w);

    /* Nodes: usually about count / 3; retried with more room in the rare case of overflow. */
    size_t want = count / 2 + MIN_NODE_CAPACITY;
    if (want > t->node_capacity &&
        !heap_grow(&w->heap, (void **)&t->nodes, &t->node_capacity, want, sizeof(kd_node), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    build_ctx b = {t, w->config.dimensions, w->config.leaf_size, w->config.max_depth};
    for (;;) {
        t->overflow = false;
        t->node_count = 1;
        root_init(&t->nodes[0]);
        build_task root = {&b, 0, 0, count};
        threads_run_tasks(w->workers, build_node, &root);
        if (!t->overflow) break;
        /* A partition is not undone, but rebuilding from the same records is still exact. */
        if (!heap_grow(&w->heap, (void **)&t->nodes, &t->node_capacity, t->node_capacity * 2,
                       sizeof(kd_node), 0))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    size_t nodes = t->node_count, node_chunk_count = node_chunks(w, t, count);
    /* Sized by the node pool, not the node count, so that a tree a few nodes larger than the
     * last does not allocate. */
    size_t room = t->node_capacity + 1;
    if (!heap_grow(&w->heap, (void **)&t->order, &t->order_capacity, room, sizeof(uint32_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->skip, &t->skip_capacity, room, sizeof(uint32_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->scan, &t->scan_capacity, room, sizeof(size_t), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    number_preorder(t, 0, 0);
    tree_ctx r = {w, t, 0, false, 0, 0};
    threads_for_chunks(w->workers, node_chunk_count, pack_begins, &r);
    t->scan[nodes] = (size_t)count << 32;
    threads_for_chunks(w->workers, node_chunk_count, set_ranges, &r);
    t->slots.cur = 0;
    t->slots.count = count;
    scatter_ctx s = {t};
    threads_for_ranges(w->workers, count, t->slot_chunk, scatter_records, &s);
    tree_forget_free_ids(w, t->node_of);
    threads_for_chunks(w->workers, node_chunk_count, mark_nodes, &s);
    if (!measure(w, t)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->base_cost = t->cost;
    t->built = true;
    t->built_empty = count == 0;
    w->stats.rebuilds++;
    return BROADPHASE_OK;
}

/* ---- refit --------------------------------------------------------------------------------- */

/* Reads every object's new bounds into its slot and decides the node it belongs in now. */
static void refit_slots(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    const broadphase_world *w = c->w;
    kdtree *t = c->t;
    int b = t->slots.cur, dims = w->config.dimensions;
    size_t begin = chunk * t->slot_chunk, end = begin + t->slot_chunk;
    if (end > t->slots.count) end = t->slots.count;
    size_t movers = 0;
    /* When streaming (see tree_slots_stream), the new values are gathered a block at a time
     * and streamed column by column. */
    bool stream = tree_slots_stream(w, &t->slots);
    tree_slot_block blk;
    for (size_t s0 = begin; s0 < end; s0 += TREE_SLOT_BLOCK) {
        size_t s1 = end - s0 < TREE_SLOT_BLOCK ? end : s0 + TREE_SLOT_BLOCK;
        for (size_t s = s0; s < s1; s++) {
            float mn[3], mx[3];
            tree_refit_read(w, &t->slots, b, &blk, s0, s, end, stream, mn, mx);
            /* Removed (see tree_refit_read): the kind column need not be read, one cache line
             * fewer per object. */
            if (mn[0] == INFINITY) {
                t->dest[s] = DEAD;
                movers++;
                continue;
            }
            uint32_t n = t->slot_node[s];
            uint32_t d = n;
            if (!in_cell(&t->nodes[n], mn, mx, dims) || sink_step(&t->nodes[n], mn, mx) != NONE)
                d = rehome(t->nodes, n, mn, mx, dims);
            t->dest[s] = d;
            movers += d != n;
        }
        if (stream) tree_slots_stream_block(&t->slots, b, s0, s1 - s0, &blk);
    }
    if (stream) simd_stream_fence();
    t->chunk_count[chunk] = movers;
}

static void collect_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    kdtree *t = c->t;
    size_t begin = chunk * t->slot_chunk, end = begin + t->slot_chunk;
    if (end > t->slots.count) end = t->slots.count;
    tree_collect_moves(t->dest, t->slot_node, begin, end, t->moves + t->chunk_count[chunk]);
}

/* Own counts before the moves: what each node holds; arrivals counted from zero. */
static void start_counts(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((tree_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last); /* here by node index */
    for (uint32_t n = first; n < last; n++) {
        t->own_count[n] = t->nodes[n].end - t->nodes[n].begin;
        t->arrive_first[n] = 0;
    }
}

static void move_range(const tree_ctx *c, size_t chunk, size_t *first, size_t *last) {
    *first = chunk * MOVE_CHUNK;
    *last = *first + MOVE_CHUNK < c->moves ? *first + MOVE_CHUNK : c->moves;
}

/* Own counts after the moves, and arrivals by node (atomic: movers from anywhere meet). */
static void count_moves(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    kdtree *t = c->t;
    size_t first, last;
    move_range(c, chunk, &first, &last);
    uint32_t most = 0;
    for (size_t m = first; m < last; m++) {
        uint32_t d = (uint32_t)(t->moves[m] >> 32), src = (uint32_t)t->moves[m];
        if (!(src & TREE_ADDED))
            __atomic_fetch_sub(&t->own_count[t->slot_node[src]], 1u, __ATOMIC_RELAXED);
        if (d == DEAD) continue;
        __atomic_fetch_add(&t->own_count[d], 1u, __ATOMIC_RELAXED);
        uint32_t a = __atomic_add_fetch(&t->arrive_first[d], 1u, __ATOMIC_RELAXED);
        most = a > most ? a : most;
    }
    uint32_t seen = __atomic_load_n(&c->most, __ATOMIC_RELAXED);
    while (most > seen && !__atomic_compare_exchange_n(&c->most, &seen, most, true,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* Each arrival takes a place in its node's run; the run's order is settled in copy_nodes. */
static void scatter_moves(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    kdtree *t = c->t;
    size_t first, last;
    move_range(c, chunk, &first, &last);
    for (size_t m = first; m < last; m++) {
        uint32_t d = (uint32_t)(t->moves[m] >> 32);
        if (d == DEAD) continue;
        t->moves_tmp[__atomic_fetch_add(&t->arrive_end[d], 1u, __ATOMIC_RELAXED)] = t->moves[m];
    }
}

static int compare_moves(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A node's arrivals in move order (slots ascending, then w->added), whatever order the threads
 * placed them in: the layout does not depend on the thread count. */
static void sort_run(uint64_t *run, size_t k) {
    if (k > 16) {
        qsort(run, k, sizeof *run, compare_moves);
        return;
    }
    for (size_t i = 1; i < k; i++) {
        uint64_t v = run[i];
        size_t j = i;
        for (; j > 0 && run[j - 1] > v; j--) run[j] = run[j - 1];
        run[j] = v;
    }
}

/* One prefix sum lays out both the nodes and the arrivals' runs: each position packs its node's
 * new own count above its arrival count (both below 2^32, so the low half never carries). */
static void pack_counts(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((tree_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        uint32_t n = t->order[i];
        t->scan[i] = (size_t)t->own_count[n] << 32 | t->arrive_first[n];
    }
}

static void unpack_starts(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((tree_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        uint32_t n = t->order[i];
        t->new_begin[n] = (uint32_t)(t->scan[i] >> 32);
        t->arrive_first[n] = t->arrive_end[n] = (uint32_t)t->scan[i];
    }
}

static void copy_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    tree_ctx *c = p;
    kdtree *t = c->t;
    uint32_t first, last;
    slot_chunk_positions(t, chunk, c->chunks, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        uint32_t n = t->order[i];
        sort_run(t->moves + t->arrive_first[n], t->arrive_end[n] - t->arrive_first[n]);
        tree_copy_node(c->w, &t->slots, t->dest, t->slot_node, t->node_of, t->moves, 0, n,
                       t->nodes[n].begin, t->nodes[n].end, t->new_begin[n], t->arrive_first[n],
                       t->arrive_end[n]);
    }
}

/* Insertion sort of slots [begin, end) by min on axis s (the order barely changes from one step
 * to the next, so each object moves a place or two). */
static void insertion_sort_slots(tree_slots *sl, uint32_t begin, uint32_t end, int s) {
    int b = sl->cur;
    float *key = sl->smin[b][s];
    for (uint32_t i = begin + 1; i < end; i++) {
        if (key[i - 1] <= key[i]) continue;
        float mn[3], mx[3];
        for (int a = 0; a < 3; a++) {
            mn[a] = sl->smin[b][a][i];
            mx[a] = sl->smax[b][a][i];
        }
        uint32_t id = sl->sid[b][i], j = i;
        for (; j > begin && key[j - 1] > mn[s]; j--) {
            for (int a = 0; a < 3; a++) {
                sl->smin[b][a][j] = sl->smin[b][a][j - 1];
                sl->smax[b][a][j] = sl->smax[b][a][j - 1];
            }
            sl->sid[b][j] = sl->sid[b][j - 1];
        }
        for (int a = 0; a < 3; a++) {
            sl->smin[b][a][j] = mn[a];
            sl->smax[b][a][j] = mx[a];
        }
        sl->sid[b][j] = id;
    }
}

/* A refit copies a node's arrivals after the objects that stayed, both runs in no particular
 * order of their own: inserting each arrival into the sorted stayers would shift the whole node
 * once per arrival (hundreds of arrivals into thousands of objects at the top of the tree), so
 * the arrivals are sorted on their own in `tmp` (7 columns of `k` entries) and merged in from
 * the back, stayers first among equal keys. */
static void merge_arrivals(tree_slots *sl, uint32_t begin, uint32_t mid, uint32_t end, int s,
                           uint32_t *tmp) {
    int b = sl->cur;
    uint32_t k = end - mid;
    float *tcol[6];
    for (int a = 0; a < 6; a++) tcol[a] = (float *)(tmp + (size_t)a * k);
    uint32_t *tid = tmp + (size_t)6 * k;
    for (int a = 0; a < 3; a++) {
        memcpy(tcol[a], sl->smin[b][a] + mid, k * sizeof(float));
        memcpy(tcol[3 + a], sl->smax[b][a] + mid, k * sizeof(float));
    }
    memcpy(tid, sl->sid[b] + mid, k * sizeof(uint32_t));
    for (uint32_t i = 1; i < k; i++) { /* arrivals are few: insertion sort */
        float v[6];
        for (int a = 0; a < 6; a++) v[a] = tcol[a][i];
        uint32_t id = tid[i], j = i;
        for (; j > 0 && tcol[s][j - 1] > v[s]; j--) {
            for (int a = 0; a < 6; a++) tcol[a][j] = tcol[a][j - 1];
            tid[j] = tid[j - 1];
        }
        for (int a = 0; a < 6; a++) tcol[a][j] = v[a];
        tid[j] = id;
    }
    const float *key = sl->smin[b][s];
    uint32_t i = mid, j = k, out = end;
    while (j > 0) {
        out--;
        if (i > begin && key[i - 1] > tcol[s][j - 1]) {
            i--;
            for (int a = 0; a < 3; a++) {
                sl->smin[b][a][out] = sl->smin[b][a][i];
                sl->smax[b][a][out] = sl->smax[b][a][i];
            }
            sl->sid[b][out] = sl->sid[b][i];
        } else {
            j--;
            for (int a = 0; a < 3; a++) {
                sl->smin[b][a][out] = tcol[a][j];
                sl->smax[b][a][out] = tcol[3 + a][j];
            }
            sl->sid[b][out] = tid[j];
        }
    }
}

/* Objects move between steps: sweep nodes are sorted again and their reach and slab measured
 * again. */
static void resort_sweep_nodes(size_t chunk, int worker, void *p) {
    const tree_ctx *c = p;
    kdtree *t = c->t;
    int b = t->slots.cur;
    uint32_t first, last;
    slot_chunk_positions(t, chunk, c->chunks, &first, &last);
    for (uint32_t pos = first; pos < last; pos++) {
        uint32_t n = t->order[pos];
        kd_node *node = &t->nodes[n];
        if (node->sweep == NO_SWEEP) continue;
        int s = node->sweep;
        float reach = 0.0f;
        for (uint32_t i = node->begin; i < node->end; i++) {
            float e = t->slots.smax[b][s][i] - t->slots.smin[b][s][i];
            reach = e > reach ? e : reach;
        }
        node->reach = nextafterf(reach, INFINITY);
        if (!is_leaf(node)) {
            float lo = INFINITY, hi = -INFINITY;
            const float *mn = t->slots.smin[b][node->axis], *mx = t->slots.smax[b][node->axis];
            for (uint32_t i = node->begin; i < node->end; i++) {
                lo = mn[i] < lo ? mn[i] : lo;
                hi = mx[i] > hi ? mx[i] : hi;
            }
            node->slab_lo = lo;
            node->slab_hi = hi;
        }
        uint32_t arrived = c->new_ranges ? t->arrive_end[n] - t->arrive_first[n] : 0;
        uint32_t *tmp = arrived > 1 ? threads_scratch_get(&c->w->scratch, worker,
                                                          (size_t)7 * arrived * sizeof(uint32_t))
                                    : NULL;
        if (!tmp) { /* no arrivals, or no memory for them: one insertion sort still sorts */
            insertion_sort_slots(&t->slots, node->begin, node->end, s);
            continue;
        }
        insertion_sort_slots(&t->slots, node->begin, node->end - arrived, s);
        merge_arrivals(&t->slots, node->begin, node->end - arrived, node->end, s, tmp);
    }
}

static broadphase_status refit(broadphase_world *w, kdtree *t) {
    int dims = w->config.dimensions;
    t->slot_chunk = slot_chunk_size(t->slots.count, w->workers);
    size_t chunks = threads_chunk_count(t->slots.count, t->slot_chunk);
    size_t nodes = t->node_count;
    size_t pool = t->node_capacity; /* the pool, as in the build: room that seldom grows */
    if (!heap_grow(&w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                   sizeof(size_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->dest, &t->dest_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), t->slots.count) ||
        !heap_grow(&w->heap, (void **)&t->own_count, &t->own_count_capacity, pool + 1,
                   sizeof(uint32_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->new_begin, &t->new_begin_capacity, pool + 1,
                   sizeof(uint32_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->arrive_first, &t->arrive_first_capacity, pool + 1,
                   sizeof(uint32_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->arrive_end, &t->arrive_end_capacity, pool + 1,
                   sizeof(uint32_t), 0) ||
        !id_tables_reserve(w, t) || !threads_scratch_reserve(&w->scratch, w->workers))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    tree_ctx c = {w, t, slot_chunks(t, t->slots.count), false, 0, 0};
    threads_for_chunks(w->workers, chunks, refit_slots, &c);
    size_t movers = threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    /* Sized for every object moving at once, so that the count of movers, which changes every
     * step, never makes a step allocate. */
    size_t need = t->slots.count + w->added_count + 1;
    if (!heap_grow(&w->heap, (void **)&t->moves, &t->move_capacity, need, sizeof(uint64_t), 0) ||
        !heap_grow(&w->heap, (void **)&t->moves_tmp, &t->moves_tmp_capacity, need, sizeof(uint64_t),
                   0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    threads_for_chunks(w->workers, chunks, collect_movers, &c);

    /* Moves (see tree.h) come in a fixed order (slots ascending, then w->added), which the
     * grouping by node below keeps. */
    size_t count = movers;
    for (size_t i = 0; i < w->added_count; i++) {
        uint32_t id = w->added[i];
        if (!world_tree_member(w, id) || t->node_of[id] != NONE) continue;
        float mn[3], mx[3];
        for (int k = 0; k < 3; k++) {
            mn[k] = w->box[id].lo[k];
            mx[k] = w->box[id].hi[k];
        }
        uint32_t d = rehome(t->nodes, 0, mn, mx, dims);
        t->node_of[id] = d; /* taken, in case the id was added twice since the last step */
        t->moves[count++] = (uint64_t)d << 32 | TREE_ADDED | (uint32_t)i;
    }
    size_t node_chunk_count = node_chunks(w, t, t->slots.count);
    if (count == 0) {
        threads_for_chunks(w->workers, c.chunks, resort_sweep_nodes, &c);
        return BROADPHASE_OK;
    }

    /* The nodes are laid out anew in preorder from their new own counts, and the arrivals
     * grouped by node into runs in the same order, all from one prefix sum over positions;
     * every pass is parallel, over nodes or over moves. */
    threads_for_chunks(w->workers, node_chunk_count, start_counts, &c);
    c.moves = count;
    size_t move_chunks = threads_chunk_count(count, MOVE_CHUNK);
    threads_for_chunks(w->workers, move_chunks, count_moves, &c);
    uint32_t most = c.most;
    /* The resort's room for one node's arrivals, in every worker, grown here in powers of two
     * from ARRIVAL_ROOM so that steady steps allocate nothing. */
    size_t room = ARRIVAL_ROOM;
    while (room < most) room *= 2;
    for (int i = 0; i < w->workers; i++)
        if (!threads_scratch_get(&w->scratch, i, 7 * room * sizeof(uint32_t)))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    threads_for_chunks(w->workers, node_chunk_count, pack_counts, &c);
    size_t total = threads_exclusive_scan(w->workers, t->scan, nodes);
    t->scan[nodes] = total;
    threads_for_chunks(w->workers, node_chunk_count, unpack_starts, &c);
    threads_for_chunks(w->workers, move_chunks, scatter_moves, &c);
    uint64_t *sorted = t->moves_tmp;
    size_t sorted_capacity = t->moves_tmp_capacity;
    t->moves_tmp = t->moves;
    t->moves_tmp_capacity = t->move_capacity;
    t->moves = sorted;
    t->move_capacity = sorted_capacity;
    threads_for_chunks(w->workers, c.chunks, copy_nodes, &c); /* cut by the old layout */
    c.new_ranges = true;
    threads_for_chunks(w->workers, node_chunk_count, set_ranges, &c);
    t->slots.cur = 1 - t->slots.cur;
    t->slots.count = (uint32_t)(total >> 32);
    c.chunks = slot_chunks(t, t->slots.count);
    threads_for_chunks(w->workers, c.chunks, resort_sweep_nodes, &c);
    return BROADPHASE_OK;
}

/* ---- pair search ---------------------------------------------------------------------------- */

/* An internal node's objects straddle its plane, so they span a thin slab along its axis, and
 * most of the list [*lb, *le) misses it: two selections keep the entries that reach the slab of
 * own objects [lo, hi) (min <= its top, then max >= its bottom), placed after *le, where the
 * children's lists go later, and the range is narrowed to them. False on out of memory. */
static bool narrow_list(const search_ctx *c, tree_worker *k, const kd_node *node, uint32_t lo,
                        uint32_t hi, size_t *lb, size_t *le) {
    int x = node->axis;
    float slab_lo = INFINITY, slab_hi = -INFINITY;
    for (uint32_t i = lo; i < hi; i++) {
        slab_lo = c->slots.min[x][i] < slab_lo ? c->slots.min[x][i] : slab_lo;
        slab_hi = c->slots.max[x][i] > slab_hi ? c->slots.max[x][i] : slab_hi;
    }
    size_t len = *le - *lb;
    if (!tree_worker_reserve(k, *le + 2 * len + 2 * SIMD_PAD, 0, false)) {
        k->failed = true;
        return false;
    }
    simd_boxes all;
    for (int a = 0; a < 3; a++) {
        all.min[a] = k->lmin[a];
        all.max[a] = k->lmax[a];
    }
    size_t first = *le;
    size_t below = simd_boxes_select(&all, k->lid, *lb, *le, c->dims, x, bits_next_up(slab_hi), 0,
                                     k->lmin, k->lmax, k->lid, first);
    size_t second = first + below + SIMD_PAD;
    size_t kept = simd_boxes_select(&all, k->lid, first, first + below, c->dims, x,
                                    bits_next_down(slab_lo), 1, k->lmin, k->lmax, k->lid, second);
    *lb = second;
    *le = second + kept;
    return true;
}

/* A small node's own objects [lo, hi) against each other (and those up to own_end) and against
 * the list [lb, le), with the pair kernels: a few calls per node instead of two per object. The
 * shorter side becomes the rows, since each row costs its width rounded up to 8. */
static void test_small_own(const search_ctx *c, tree_worker *k, pairs_writer *wr,
                           const kd_node *node, uint32_t lo, uint32_t hi, size_t lb, size_t le) {
    const kdtree *t = c->t;
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    tree_test_within(c->w, k, wr, &c->slots, sid, lo, hi, c->dims);
    tree_test_cross(c->w, k, wr, &c->slots, sid, lo, hi, &c->slots, sid, hi, node->end, c->dims);
    if (le <= lb || hi <= lo) return;
    if (!is_leaf(node) && le - lb > LIST_NARROW_MIN && !narrow_list(c, k, node, lo, hi, &lb, &le))
        return;
    simd_boxes list = tree_worker_list(k);
    tree_test_cross(c->w, k, wr, &c->slots, sid, lo, hi, &list, k->lid, lb, le, c->dims);
}

/* Own objects [lo, hi) of `node` against its own objects after them and against the list
 * [lb, le). An internal node first narrows the list to the entries that reach its objects' slab.
 * A sorted (sweep) node then narrows each query to the run that can reach it; a small one tests
 * its objects against the list with the pair kernels. */
static void test_own(const search_ctx *c, tree_worker *k, pairs_writer *wr, const kd_node *node,
                     uint32_t lo, uint32_t hi, size_t lb, size_t le) {
    const kdtree *t = c->t;
    int b = t->slots.cur;
    uint32_t own_end = node->end;
    int s = node->sweep;
    if (s == NO_SWEEP) {
        test_small_own(c, k, wr, node, lo, hi, lb, le);
        return;
    }
    for (uint32_t i = lo; i < hi; i++) {
        float qmin[3] = {t->slots.smin[b][0][i], t->slots.smin[b][1][i], t->slots.smin[b][2][i]};
        float qmax[3] = {t->slots.smax[b][0][i], t->slots.smax[b][1][i], t->slots.smax[b][2][i]};
        uint32_t qid = t->slots.sid[b][i];
        /* The run is short (objects within one extent along the sweep axis) and it is tested
         * right after, so walking it beats a search. */
        const float *key = t->slots.smin[b][s];
        uint32_t end = i + 1;
        while (end < own_end && key[end] <= qmax[s]) end++;
        size_t h = simd_box_vs_boxes(qmin, qmax, &c->slots, i + 1, end, c->dims, k->hits);
        tree_emit(c->w, k, wr, qid, t->slots.sid[b], h);
    }
    if (le <= lb || hi <= lo) return;
    if (!is_leaf(node) && !narrow_list(c, k, node, lo, hi, &lb, &le)) return;
    for (size_t x = lb; x < le; x++) {
        /* In 2D the list's z columns are not copied. */
        float qmin[3] = {k->lmin[0][x], k->lmin[1][x], c->dims == 3 ? k->lmin[2][x] : 0.0f};
        float qmax[3] = {k->lmax[0][x], k->lmax[1][x], c->dims == 3 ? k->lmax[2][x] : 0.0f};
        /* Rounded down: an object whose min is below this ends before the query begins. */
        float from = bits_next_down(qmin[s] - node->reach);
        uint32_t first = tree_bound(t->slots.smin[b][s], lo, hi, from, false);
        uint32_t last = tree_bound(t->slots.smin[b][s], first, hi, qmax[s], true);
        if (first == last) continue;
        size_t h = simd_box_vs_boxes(qmin, qmax, &c->slots, first, last, c->dims, k->hits);
        tree_emit(c->w, k, wr, k->lid[x], t->slots.sid[b], h);
    }
}

static void list_push(tree_worker *k, size_t at, const float *const mn[3], const float *const mx[3],
                      const uint32_t *ids, size_t i) {
    for (int a = 0; a < 3; a++) {
        k->lmin[a][at] = mn[a][i];
        k->lmax[a][at] = mx[a][i];
    }
    k->lid[at] = ids[i];
}

static void search_node(const search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t n,
                        size_t lb, size_t le) {
    const kdtree *t = c->t;
    const kd_node *node = &t->nodes[n];
    int b = t->slots.cur;
    size_t own = node->end - node->begin;
    if (!tree_worker_reserve(k, le, (own > le - lb ? own : le - lb) + 1, false)) {
        k->failed = true;
        return;
    }
    test_own(c, k, wr, node, node->begin, node->end, lb, le);
    if (is_leaf(node)) return;
    int axis = node->axis;
    float plane = node->plane;
    for (int side = 0; side < 2; side++) {
        if (node->child[side] == NONE) continue;
        if (!tree_worker_reserve(k, le + (le - lb) + own + SIMD_PAD, 0, false)) {
            k->failed = true;
            return;
        }
        /* An object reaches the left child only if its min is below the plane (the child's
         * objects all end before it), the right child only if its max is above. */
        simd_boxes list;
        for (int a = 0; a < 3; a++) {
            list.min[a] = k->lmin[a];
            list.max[a] = k->lmax[a];
        }
        size_t at = le;
        at += simd_boxes_select(&list, k->lid, lb, le, c->dims, axis, plane, side, k->lmin, k->lmax,
                                k->lid, at);
        at += simd_boxes_select(&c->slots, t->slots.sid[b], node->begin, node->end, c->dims, axis,
                                plane, side, k->lmin, k->lmax, k->lid, at);
        search_node(c, k, wr, node->child[side], le, at);
    }
}

/* The ancestors' objects that reach node r's cell, into the list from 0; returns its length. */
static size_t ancestors_list(const search_ctx *c, tree_worker *k, uint32_t r, bool *ok) {
    const kdtree *t = c->t;
    const kd_node *target = &t->nodes[r];
    int b = t->slots.cur;
    const float *const smin[3] = {t->slots.smin[b][0], t->slots.smin[b][1], t->slots.smin[b][2]};
    const float *const smax[3] = {t->slots.smax[b][0], t->slots.smax[b][1], t->slots.smax[b][2]};
    size_t at = 0;
    for (uint32_t a = target->parent; a != NONE; a = t->nodes[a].parent) {
        const kd_node *anc = &t->nodes[a];
        if (!tree_worker_reserve(k, at + (anc->end - anc->begin) + 1, 0, false)) {
            *ok = false;
            return 0;
        }
        /* Objects reach the cell when min < cell_hi and max > cell_lo on every axis. A sorted
         * ancestor's objects that reach it on its sweep axis (max above cell_lo, so min above
         * cell_lo - reach; min below cell_hi) form one run. */
        uint32_t first = anc->begin, last = anc->end;
        int s = anc->sweep;
        if (s != NO_SWEEP) {
            /* None reach when the cell lies beyond the span of the ancestor's objects along its
             * split axis: only the nearest ancestors split on each axis usually remain. */
            int x = anc->axis;
            if (!(anc->slab_lo < target->cell_hi[x] && anc->slab_hi > target->cell_lo[x])) continue;
            first = tree_bound(smin[s], first, last,
                               bits_next_down(target->cell_lo[s] - anc->reach), false);
            last = tree_bound(smin[s], first, last, target->cell_hi[s], false);
        }
        for (uint32_t i = first; i < last; i++) {
            bool reaches = true;
            for (int d = 0; d < c->dims; d++)
                reaches &= (smin[d][i] < target->cell_hi[d]) & (smax[d][i] > target->cell_lo[d]);
            list_push(k, at, smin, smax, t->slots.sid[b], i);
            at += reaches;
        }
    }
    return at;
}

static void search_job(size_t job, int worker, void *p) {
    const search_ctx *c = p;
    kdtree *t = c->t;
    tree_worker *k = &t->workers.at[worker];
    const kd_job *j = &t->jobs[job];
    pairs_writer wr = pairs_writer_begin(&c->w->pairs, worker);
    bool ok = true;
    size_t n0 = ancestors_list(c, k, j->node, &ok);
    if (!ok) {
        k->failed = true;
    } else if (j->kind == JOB_SUBTREE) {
        search_node(c, k, &wr, j->node, 0, n0);
    } else {
        const kd_node *node = &t->nodes[j->node];
        size_t own = node->end - node->begin;
        if (!tree_worker_reserve(k, n0, (own > n0 ? own : n0) + 1, false))
            k->failed = true;
        else
            test_own(c, k, &wr, node, j->lo, j->hi, 0, n0);
    }
}

/* Subtrees small enough become one job; above them, each node's own objects are cut into
 * pieces. The cut depends on the tree only, never on the thread count. */
static void collect_jobs(kdtree *t, uint32_t n) {
    const kd_node *node = &t->nodes[n];
    /* A node owning many objects (most objects overlap most others, as in a dense scene) is cut
     * into pieces even in a small subtree: its own tests are quadratic. */
    if ((node->sub_end - node->begin <= JOB_OBJECTS || is_leaf(node)) &&
        node->end - node->begin <= OWN_PIECE) {
        t->jobs[t->job_count++] = (kd_job){n, JOB_SUBTREE, 0, 0};
        return;
    }
    for (uint32_t lo = node->begin; lo < node->end; lo += OWN_PIECE) {
        uint32_t hi = node->end - lo > OWN_PIECE ? lo + OWN_PIECE : node->end;
        t->jobs[t->job_count++] = (kd_job){n, JOB_OWN, lo, hi};
    }
    for (int s = 0; s < 2; s++)
        if (node->child[s] != NONE) collect_jobs(t, node->child[s]);
}

static broadphase_status plan_search(broadphase_world *w, void *state, method_search *out) {
    kdtree *t = state;
    if (!tree_workers_ready(w, &t->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    /* At most one subtree job per node plus the pieces of own objects. */
    size_t max_jobs = t->node_capacity + t->slots.capacity / OWN_PIECE + 2;
    if (!heap_grow(&w->heap, (void **)&t->jobs, &t->job_capacity, max_jobs, sizeof(kd_job), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->job_count = 0;
    if (t->slots.count > 0) collect_jobs(t, 0);
    t->search = (search_ctx){w, t, tree_slots_boxes(&t->slots), w->config.dimensions};
    *out = (method_search){t->job_count, search_job, &t->search,
                           &t->workers,  &t->slots,  tree_quality(t->cost, t->slots.count)};
    return BROADPHASE_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

#ifdef BROADPHASE_DEEP_VALIDATE
/* Every object inside its node's cell, node ranges nested as laid out, node_of consistent. */
static void validate(const broadphase_world *w, const kdtree *t) {
    int b = t->slots.cur, dims = w->config.dimensions;
    size_t seen = 0;
    for (uint32_t n = 0; n < t->node_count; n++) {
        const kd_node *node = &t->nodes[n];
        TREE_CHECK(node->begin <= node->end && node->end <= node->sub_end);
        TREE_CHECK(node->sub_end <= t->slots.count);
        for (uint32_t s = node->begin; s < node->end; s++) {
            uint32_t id = t->slots.sid[b][s];
            float mn[3] = {t->slots.smin[b][0][s], t->slots.smin[b][1][s], t->slots.smin[b][2][s]};
            float mx[3] = {t->slots.smax[b][0][s], t->slots.smax[b][1][s], t->slots.smax[b][2][s]};
            TREE_CHECK(in_cell(node, mn, mx, dims));
            TREE_CHECK(t->node_of[id] == n);
            TREE_CHECK(t->slot_node[s] == n);
            if (node->sweep != NO_SWEEP && !is_leaf(node))
                TREE_CHECK(mn[node->axis] >= node->slab_lo && mx[node->axis] <= node->slab_hi);
            TREE_CHECK(world_tree_member(w, id));
            for (int k = 0; k < dims; k++)
                TREE_CHECK(mn[k] == w->box[id].lo[k] && mx[k] == w->box[id].hi[k]);
        }
        if (node->sweep != NO_SWEEP)
            for (uint32_t s = node->begin + 1; s < node->end; s++)
                TREE_CHECK(t->slots.smin[b][node->sweep][s - 1] <=
                           t->slots.smin[b][node->sweep][s]);
        seen += node->end - node->begin;
        for (int s = 0; s < 2; s++) {
            if (node->child[s] == NONE) continue;
            const kd_node *c = &t->nodes[node->child[s]];
            TREE_CHECK(c->parent == n && c->begin >= node->end && c->sub_end <= node->sub_end);
        }
    }
    TREE_CHECK(seen == t->slots.count && seen == world_tree_count(w));
}
#endif

static broadphase_status update(broadphase_world *w, void **state) {
    kdtree *t = tree_of(w, state);
    if (!t) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    bool full =
        tree_should_rebuild(w, t->built, t->slots.count, t->slots.capacity, t->cost, t->base_cost);
    broadphase_status s;
    if (tree_idle(w, t->built && t->built_empty)) {
        s = BROADPHASE_OK;
        w->stats.refits++;
    } else if (full) {
        s = rebuild(w, t);
    } else {
        t->built_empty = false;
        s = refit(w, t);
        if (s == BROADPHASE_OK) {
            if (!measure(w, t)) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
            w->stats.refits++;
        }
    }
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
    const kdtree *t = state;
    if (!t || !t->built) return;
    s->nodes = t->node_count;
    s->leaves = t->leaves;
    s->depth = t->depth;
    s->objects_in_internal_nodes = t->internal_objects;
    tree_workers_account(&t->workers, &s->bytes_in_use, &s->allocations);
}

static size_t fill_levels(const void *state, broadphase_level *levels, size_t capacity) {
    const kdtree *t = state;
    if (!t || !t->built) return 0;
    for (size_t l = 0; l < capacity && l <= t->depth; l++) levels[l] = (broadphase_level){0, 0, 0};
    for (uint32_t i = 0; i < t->node_count; i++) {
        const kd_node *n = &t->nodes[i];
        if (n->depth >= capacity) continue;
        levels[n->depth].nodes++;
        levels[n->depth].leaves += is_leaf(n);
        levels[n->depth].objects += n->end - n->begin;
    }
    return (size_t)t->depth + 1;
}

static void destroy(broadphase_world *w, void *state) {
    kdtree *t = state;
    if (!t) return;
    tree_workers_release(w, &t->workers);
    heap_free(&w->heap, t->nodes, t->node_capacity * sizeof(kd_node));
    tree_slots_release(w, &t->slots);
    heap_free(&w->heap, t->records, t->record_capacity * sizeof(kd_record));
    heap_free(&w->heap, t->node_of, t->node_of_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->dest, t->dest_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->slot_node, t->slot_node_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->own_count, t->own_count_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->new_begin, t->new_begin_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->arrive_first, t->arrive_first_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->arrive_end, t->arrive_end_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->order, t->order_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->skip, t->skip_capacity * sizeof(uint32_t));
    heap_free(&w->heap, t->scan, t->scan_capacity * sizeof(size_t));
    heap_free(&w->heap, t->parts, t->part_capacity * sizeof(kd_measure));
    heap_free(&w->heap, t->moves, t->move_capacity * sizeof(uint64_t));
    heap_free(&w->heap, t->moves_tmp, t->moves_tmp_capacity * sizeof(uint64_t));
    heap_free(&w->heap, t->chunk_count, t->chunk_capacity * sizeof(size_t));
    heap_free(&w->heap, t->jobs, t->job_capacity * sizeof(kd_job));
    heap_free(&w->heap, t, sizeof *t);
}

/* ---- the queries' view (query.h) ----------------------------------------------------------- */

static void query_node_of(const void *p, uint64_t handle, query_node *out) {
    const kdtree *t = p;
    const kd_node *n = &t->nodes[handle];
    for (int k = 0; k < 3; k++) { /* the cell: it holds every object of the subtree */
        out->lo[k] = n->cell_lo[k];
        out->hi[k] = n->cell_hi[k];
    }
    out->own = tree_slots_boxes(&t->slots);
    out->own_id = out->sub_id = t->slots.sid[t->slots.cur];
    out->own_begin = out->sub_begin = n->begin;
    out->own_end = n->end;
    out->sub_end = n->sub_end;
    out->sweep = n->sweep;
    out->reach = n->reach;
    memcpy(out->own_lo, out->lo, sizeof out->lo);
    memcpy(out->own_hi, out->hi, sizeof out->hi);
    if (n->sweep < 3) { /* its own objects span the slab along the split axis */
        out->own_lo[n->axis] = n->slab_lo;
        out->own_hi[n->axis] = n->slab_hi;
    }
    out->children = 0;
    for (int j = 0; j < 2; j++)
        if (n->child[j] != NONE) out->child[out->children++] = n->child[j];
}

/* The cell is both the node's bounds and its region. */
static void cell_of(const void *p, uint64_t handle, float lo[3], float hi[3]) {
    const kd_node *n = &((const kdtree *)p)->nodes[handle];
    memcpy(lo, n->cell_lo, sizeof n->cell_lo);
    memcpy(hi, n->cell_hi, sizeof n->cell_hi);
}

static void prefetch_of(const void *p, uint64_t handle) {
    const kdtree *t = p;
    const kd_node *n = &t->nodes[handle];
    __builtin_prefetch((const char *)n + 64);
    tree_slots_prefetch(&t->slots, n->begin, n->end, 3);
}

static bool query_view_of(const void *state, query_view *out) {
    const kdtree *t = state;
    if (!t || !t->built || t->slots.count == 0) return false;
    *out = (query_view){t, 0, query_node_of, QUERY_MEMBER_TREE, cell_of, cell_of, prefetch_of};
    return true;
}

const method kdtree_method = {
    .id = BROADPHASE_METHOD_KDTREE,
    .name = "kdtree",
    .leaf_size = 8,
    .uses_fields = true,
    .update = update,
    .plan_search = plan_search,
    .fill_stats = fill_stats,
    .fill_levels = fill_levels,
    .query_view = query_view_of,
    .destroy = destroy,
};

/* The octree's build (see octree.c): every object's key from its cell, the keys radix-sorted,
 * the nodes found top-down by binary searches in parallel tasks, the slots laid out in key
 * order; and the measure that both the build and the refit end with (subtree ends, bounds and
 * the statistics, in a parallel post-order). */
#include "octree_internal.h"

#include "bits.h"
#include "cell_keys.h"

#include <math.h>
#include <string.h>

enum {
    LEVEL_BITS = 5,         /* a key's low bits: the level */
    TASK_CUTOFF = 8192,     /* build subtrees larger than this as separate tasks */
    MIN_NODE_CAPACITY = 64, /* nodes reserved at least */
};

/* ---- geometry -------------------------------------------------------------------------------- */

/* Levels the keys can tell apart: 3 * 19 + 5 and 2 * 29 + 5 bits fit in 64. */
static int key_depth(int dims) {
    return dims == 3 ? 19 : 29;
}

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
void oc_cell_region(const octree *t, const oc_node *n, double extra, float lo[3], float hi[3]) {
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

/* ---- build ----------------------------------------------------------------------------------- */

/* Live objects and their bounds, per chunk of ids. */
static void count_live(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    const method_world *w = c->w;
    size_t begin = chunk * c->t->id_chunk, end = begin + c->t->id_chunk;
    if (end > w->store->id_end) end = w->store->id_end;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t live = 0;
    for (size_t i = begin; i < end; i++) {
        if (!method_member(w, i)) continue;
        live++;
        for (int k = 0; k < 3; k++) {
            lo[k] = w->store->box[i].lo[k] < lo[k] ? w->store->box[i].lo[k] : lo[k];
            hi[k] = w->store->box[i].hi[k] > hi[k] ? w->store->box[i].hi[k] : hi[k];
        }
    }
    c->t->chunk_count[chunk] = live;
    for (int k = 0; k < 3; k++) {
        c->t->chunk_bounds[chunk * 6 + (size_t)k] = lo[k];
        c->t->chunk_bounds[chunk * 6 + 3 + (size_t)k] = hi[k];
    }
}

/* The keys of the live objects among ids [begin, end), at keys[at...] and their ids at
 * vals[at...] (simd_cell_keys: each object at the deepest level, up to max_level, whose cell
 * holding the box's centre holds the box, keyed as cell_key does). */
_Static_assert(sizeof(world_box) == 8 * sizeof(float), "simd_cell_keys reads 8 floats a box");

static void write_keys(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    const method_world *w = c->w;
    const octree *t = c->t;
    size_t begin = chunk * t->id_chunk, end = begin + t->id_chunk;
    if (end > w->store->id_end) end = w->store->id_end;
    size_t at = t->chunk_count[chunk], n = 0;
    uint32_t *vals = t->vals + at;
    for (size_t i = begin; i < end; i++)
        if (method_member(w, i)) vals[n++] = (uint32_t)i;
    simd_cell_grid g = {{t->origin[0], t->origin[1], t->origin[2]},
                        t->scale,
                        t->top,
                        1.0 + 2.0 * t->margin,
                        t->margin,
                        t->dims,
                        t->depth,
                        t->max_level,
                        LEVEL_BITS};
    simd_cell_keys(&g, (const float *)(const void *)w->store->box, vals, n, t->keys + at);
}

typedef struct build_task {
    const method_world *w;
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
    const method_world *w = task->w;
    octree *t = task->t;
    oc_node *n = &t->nodes[task->node];
    uint32_t begin = task->begin, end = task->end;
    n->begin = begin;
    n->end = end;
    n->sub_end = end;
    if (end - begin <= (uint32_t)w->config->leaf_size || n->level >= t->max_level) return;
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
    oc_ctx *c = p;
    const method_world *w = c->w;
    octree *t = c->t;
    int b = t->slots.cur;
    for (size_t i = begin; i < end; i++) {
        uint32_t id = t->vals[i];
        if (i + TREE_REFIT_AHEAD < end) {
            __builtin_prefetch(&w->store->box[t->vals[i + TREE_REFIT_AHEAD]]);
        }
        for (int k = 0; k < 3; k++) {
            t->slots.smin[b][k][i] = w->store->box[id].lo[k];
            t->slots.smax[b][k][i] = w->store->box[id].hi[k];
        }
        t->slots.sid[b][i] = id;
    }
}

/* node_of and slot_node of every node's own objects, and the bounds of its own objects. */
static void mark_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    octree *t = ((oc_ctx *)p)->t;
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

/* ---- measure --------------------------------------------------------------------------------- */

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
void oc_measure(octree *t, int workers, bool own) {
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

/* ---- rebuild --------------------------------------------------------------------------------- */

static void geometry_init(const method_world *w, octree *t) {
    t->dims = w->config->dimensions;
    t->nchild = 1 << t->dims;
    t->depth = key_depth(t->dims);
    t->max_level = w->config->max_depth < t->depth ? w->config->max_depth : t->depth;
    t->margin = ((double)w->config->looseness - 1.0) * 0.5;
    for (int l = 0; l <= t->depth; l++) {
        t->cell_size[l] = ldexp(1.0, t->depth - l);
        t->cell_margin[l] = t->margin * t->cell_size[l];
    }
    t->top = ldexp(1.0, t->depth) - 1.0;
}

/* Builds the tree from scratch with a root of at least min_side. */
broadphase_status oc_rebuild(const method_world *w, octree *t, double min_side) {
    t->ahead_begin = t->ahead_end = 0; /* the slots are laid out anew: no marks to keep */
    geometry_init(w, t);
    t->id_chunk = threads_chunk_size(w->store->id_end, w->workers, SMALL_CHUNK, SLOT_CHUNK);
    size_t chunks = threads_chunk_count(w->store->id_end, t->id_chunk);
    size_t count = w->member_count;
    size_t hist = threads_radix_scratch_size(w->workers);
    if (!heap_grow(w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                   sizeof(size_t), 0) ||
        !heap_grow(w->heap, (void **)&t->chunk_bounds, &t->chunk_bounds_capacity, 6 * (chunks + 1),
                   sizeof(float), 0) ||
        !tree_slots_reserve(w, &t->slots, count) || !id_tables_reserve(w, t) ||
        !heap_grow(w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    /* The four share key_capacity: grown together or not at all (their frees pass it). */
    void **keys[] = {(void **)&t->keys, (void **)&t->keys_tmp, (void **)&t->vals,
                     (void **)&t->vals_tmp};
    const size_t key_sizes[] = {sizeof(uint64_t), sizeof(uint64_t), sizeof(uint32_t),
                                sizeof(uint32_t)};
    if (!heap_grow_together(w->heap, keys, key_sizes, 4, &t->key_capacity, count + 1, 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (hist > t->hist_bytes) {
        void *h = heap_alloc(w->heap, hist);
        if (!h) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        heap_free(w->heap, t->hist, t->hist_bytes);
        t->hist = h;
        t->hist_bytes = hist;
    }
    oc_ctx g = {w, t};
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
    size_t leaf = (size_t)(w->config->leaf_size > 0 ? w->config->leaf_size : 1);
    size_t want = count / 2 + MIN_NODE_CAPACITY;
    if (10 * (count / leaf) + MIN_NODE_CAPACITY < want)
        want = 10 * (count / leaf) + MIN_NODE_CAPACITY;
    if (want > t->node_capacity &&
        !heap_grow(w->heap, (void **)&t->nodes, &t->node_capacity, want, sizeof(oc_node), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    for (;;) {
        t->overflow = false;
        t->node_count = 1;
        const uint32_t zero[3] = {0, 0, 0};
        node_init(&t->nodes[0], NONE, 0, zero);
        build_task root = {w, t, 0, 0, (uint32_t)count};
        threads_run_tasks(w->workers, build_node, &root);
        if (!t->overflow) break;
        if (!heap_grow(w->heap, (void **)&t->nodes, &t->node_capacity, t->node_capacity * 2,
                       sizeof(oc_node), 0))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    if (!oc_by_node_reserve(w, t)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->free_count = 0;
    t->slots.cur = 0;
    t->slots.count = (uint32_t)count;
    tree_slots_ready(w, &t->slots, 0, count);
    threads_for_ranges(w->workers, count,
                       threads_chunk_size(count, w->workers, SMALL_CHUNK, SLOT_CHUNK),
                       scatter_slots, &g);
    tree_forget_free_ids(w, t->node_of);
    threads_for_chunks(w->workers, node_chunks(w, t), mark_nodes, &g);
    oc_measure(t, w->workers, false);
    t->base_cost = t->cost;
    t->built = true;
    t->built_empty = count == 0;
    w->stats->rebuilds++;
    oc_refit_prepare(w, t);
    return BROADPHASE_OK;
}

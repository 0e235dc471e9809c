/* The octree method, a quadtree in 2D: the same code with 2^dims children per node. This file
 * holds the method's glue (the update and its policy, the search's plan, statistics, levels,
 * validation, the queries' view, the method table); the phases are octree_build.c,
 * octree_refit.c (with octree_windows.c), octree_search.c and octree_flat.c, around
 * octree_internal.h.
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
#include "octree.h"
#include "octree_internal.h"

#include "query.h"

#include <string.h>

static octree *tree_of(const method_world *w, void **state) {
    if (!*state) {
        octree *t = heap_alloc(w->heap, sizeof(octree));
        if (t) {
            memset(t, 0, sizeof(octree));
            t->fl_gen = 1; /* new nodes (list_gen 0) are in no list */
        }
        *state = t;
    }
    return *state;
}

/* ---- the search's plan ------------------------------------------------------------------- */

static broadphase_status plan_search(const method_world *w, void *state, method_search *out) {
    octree *t = state;
    if (!tree_workers_ready(w, &t->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->search = (oc_search_ctx){w, t, tree_slots_boxes(&t->slots), w->config->dimensions};
    *out = (method_search){0,           oc_search_job, &t->search,
                           &t->workers, &t->slots,     tree_quality(t->cost, t->slots.count)};
    if (t->slots.count > 0 && !(t->flat_state & (FLAT_NEVER | FLAT_ESCAPE))) {
        if (t->flat_state & FLAT_STALE) {
            if (!oc_flat_build(w, t)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
            t->flat_state &= ~(unsigned)FLAT_STALE;
        }
        t->flat_searches++;
        out->job_count = t->fl_jobs;
        out->job = oc_flat_job;
        return BROADPHASE_OK;
    }
    /* Counted first, then written. */
    t->job_count = 0;
    if (t->slots.count > 0) oc_collect_jobs(t, 0, false);
    if (!heap_grow(w->heap, (void **)&t->jobs, &t->job_capacity, t->job_count + 1, sizeof(oc_job),
                   0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->job_count = 0;
    if (t->slots.count > 0) oc_collect_jobs(t, 0, true);
    out->job_count = t->job_count;
    return BROADPHASE_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

#ifdef BROADPHASE_DEEP_VALIDATE

static size_t validate_node(const method_world *w, const octree *t, uint32_t n) {
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
        TREE_CHECK(method_member(w, id));
        for (int k = 0; k < dims; k++) {
            TREE_CHECK(mn[k] == w->store->box[id].lo[k] && mx[k] == w->store->box[id].hi[k]);
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

static void validate(const method_world *w, const octree *t) {
    TREE_CHECK(validate_node(w, t, 0) == t->slots.count);
    TREE_CHECK(t->slots.count == w->member_count);
}
#endif

/* REFIT or REBUILD as the policy and the tree's state say; an object leaving the root makes
 * the root grow (a rebuild). */
static broadphase_status update_tree(const method_world *w, octree *t) {
    bool full =
        tree_should_rebuild(w, t->built, t->slots.count, t->slots.capacity, t->cost, t->base_cost);
    broadphase_status s = BROADPHASE_OK;
    double min_side = 0.0;
    if (!full) {
        bool escaped = false;
        t->built_empty = false;
        s = oc_refit(w, t, &escaped);
        if (s == BROADPHASE_OK && escaped) {
            /* An object left the root: grow it, at least doubling, and build again. */
            full = true;
            min_side = 2.0 * t->side;
            t->growths++;
        }
    }
    if (s == BROADPHASE_OK && full) s = oc_rebuild(w, t, min_side);
    return s;
}

static broadphase_status update(const method_world *w, void **state) {
    octree *t = tree_of(w, state);
    if (!t) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    broadphase_status s = BROADPHASE_OK;
    if (tree_idle(w, t->built && t->built_empty))
        w->stats->refits++;
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
    s->relayouts = t->full_layouts + t->light_layouts;
    s->window_relayouts = t->window_layouts;
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

static void destroy(const method_world *w, void *state) {
    octree *t = state;
    if (!t) return;
    tree_workers_release(w, &t->workers);
    tree_slots_release(w, &t->slots);
    heap_free(w->heap, t->nodes, t->node_capacity * sizeof(oc_node));
    heap_free(w->heap, t->keys, t->key_capacity * sizeof(uint64_t));
    heap_free(w->heap, t->keys_tmp, t->key_capacity * sizeof(uint64_t));
    heap_free(w->heap, t->vals, t->key_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->vals_tmp, t->key_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->hist, t->hist_bytes);
    heap_free(w->heap, t->chunk_count, t->chunk_capacity * sizeof(size_t));
    heap_free(w->heap, t->chunk_bounds, t->chunk_bounds_capacity * sizeof(float));
    heap_free(w->heap, t->node_of, t->node_of_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->dest, t->dest_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->slot_node, t->slot_node_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->add_dest, t->add_dest_capacity * sizeof(uint32_t));
    uint32_t **by_node[] = {&t->own_count, &t->new_begin,  &t->arrive_first, &t->arrivals,
                            &t->redirect,  &t->redirected, &t->splits,       &t->free_nodes};
    for (size_t i = 0; i < sizeof by_node / sizeof by_node[0]; i++)
        heap_free(w->heap, *by_node[i], t->by_node_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->moves, t->move_capacity * sizeof(uint64_t));
    heap_free(w->heap, t->moves_tmp, t->move_capacity * sizeof(uint64_t));
    heap_free(w->heap, t->refs, t->ref_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->refs_tmp, t->ref_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->jobs, t->job_capacity * sizeof(oc_job));
    heap_free(w->heap, t->fl_leaf, t->fl_leaf_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->fl_first, t->fl_first_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->fl_cand, t->fl_cand_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->fl_job, t->fl_job_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->fl_index, t->fl_index_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->fl_region, t->fl_region_capacity * sizeof(float));
    heap_free(w->heap, t, sizeof *t);
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

const method_table octree_method = {
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

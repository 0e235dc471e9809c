/* The kd-tree method. Each node splits the longest side of its objects' centre bounds at the
 * midpoint; objects that straddle the plane stay in the node. Objects live in tree order as
 * SoA columns, every node's own objects contiguous and every subtree contiguous (own objects,
 * then the left subtree, then the right). Pairs come from each node's own objects against each
 * other and against the ancestors' objects that reach the node (the parent-to-child list,
 * filtered by the side of each plane), all with the SIMD kernels. REBUILD partitions from
 * scratch in parallel tasks; REFIT keeps the planes and re-homes the objects that left their
 * node; AUTO refits until the cost figure degrades past the configured factor. This file holds
 * the method: the update and its policy, the search's plan, statistics, levels, validation and
 * the queries' view; the phases live in kdtree_build.c, kdtree_refit.c and kdtree_search.c. */
#include "kdtree.h"
#include "kdtree_internal.h"

#include "query.h"
#include "tree.h"
#include "method.h"

#include <string.h>

static kdtree *tree_of(const method_world *w, void **state) {
    if (!*state) {
        kdtree *t = heap_alloc(w->heap, sizeof(kdtree));
        if (t) memset(t, 0, sizeof(kdtree));
        *state = t;
    }
    return *state;
}

/* ---- the pair search's plan ---------------------------------------------------------------- */

static broadphase_status plan_search(const method_world *w, void *state, method_search *out) {
    kdtree *t = state;
    if (!tree_workers_ready(w, &t->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    /* At most one subtree job per node plus the pieces of own objects. */
    size_t max_jobs = t->node_capacity + t->slots.capacity / OWN_PIECE + 2;
    if (!heap_grow(w->heap, (void **)&t->jobs, &t->job_capacity, max_jobs, sizeof(kd_job), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->job_count = 0;
    if (t->slots.count > 0) kd_collect_jobs(t, 0);
    t->search = (kd_search_ctx){w, t, tree_slots_boxes(&t->slots), w->config->dimensions};
    *out = (method_search){t->job_count, kd_search_job, &t->search,
                           &t->workers,  &t->slots,     tree_quality(t->cost, t->slots.count)};
    return BROADPHASE_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

#ifdef BROADPHASE_DEEP_VALIDATE
/* Every object inside its node's cell, node ranges nested as laid out, node_of consistent. */
static void validate(const method_world *w, const kdtree *t) {
    int b = t->slots.cur, dims = w->config->dimensions;
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
            TREE_CHECK(method_member(w, id));
            for (int k = 0; k < dims; k++)
                TREE_CHECK(mn[k] == w->store->box[id].lo[k] && mx[k] == w->store->box[id].hi[k]);
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
    TREE_CHECK(seen == t->slots.count && seen == w->member_count);
}
#endif

static broadphase_status update(const method_world *w, void **state) {
    kdtree *t = tree_of(w, state);
    if (!t) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    bool full =
        tree_should_rebuild(w, t->built, t->slots.count, t->slots.capacity, t->cost, t->base_cost);
    broadphase_status s;
    if (tree_idle(w, t->built && t->built_empty)) {
        s = BROADPHASE_OK;
        w->stats->refits++;
    } else if (full) {
        s = kd_rebuild(w, t);
    } else {
        t->built_empty = false;
        s = kd_refit(w, t);
        if (s == BROADPHASE_OK) {
            if (!kd_measure_tree(w, t)) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
            w->stats->refits++;
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

static void destroy(const method_world *w, void *state) {
    kdtree *t = state;
    if (!t) return;
    tree_workers_release(w, &t->workers);
    heap_free(w->heap, t->nodes, t->node_capacity * sizeof(kd_node));
    tree_slots_release(w, &t->slots);
    heap_free(w->heap, t->records, t->record_capacity * sizeof(kd_record));
    heap_free(w->heap, t->top_parts, t->top_part_capacity * sizeof(kd_top_part));
    heap_free(w->heap, t->node_of, t->node_of_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->dest, t->dest_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->slot_node, t->slot_node_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->own_count, t->own_count_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->new_begin, t->new_begin_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->arrive_first, t->arrive_first_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->arrive_end, t->arrive_end_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->order, t->order_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->skip, t->skip_capacity * sizeof(uint32_t));
    heap_free(w->heap, t->scan, t->scan_capacity * sizeof(size_t));
    heap_free(w->heap, t->parts, t->part_capacity * sizeof(kd_measure));
    heap_free(w->heap, t->moves, t->move_capacity * sizeof(uint64_t));
    heap_free(w->heap, t->moves_tmp, t->moves_tmp_capacity * sizeof(uint64_t));
    heap_free(w->heap, t->chunk_count, t->chunk_capacity * sizeof(size_t));
    heap_free(w->heap, t->jobs, t->job_capacity * sizeof(kd_job));
    heap_free(w->heap, t, sizeof *t);
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

const method_table kdtree_method = {
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

/* The sweep method's table: the update (sweep_build.c), the search's plan (sweep_search.c), its
 * figures and levels, and the queries' view of its hierarchy of bounds. */
#include "sweep.h"

#include "sweep_internal.h"

#include <string.h>

static broadphase_status update(const method_world *w, void **state) {
    if (!*state) {
        sweep *s = heap_alloc(w->heap, sizeof(sweep));
        if (!s) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        memset(s, 0, sizeof *s);
        *state = s;
    }
    sweep *s = *state;
    /* The update policies: REBUILD sorts from nothing every time (the ids in order); REFIT and
     * AUTO keep the last order, which the sort then barely changes. Counted as a rebuild and a
     * refit. */
    bool fresh = !s->built || w->stale || w->config->update == BROADPHASE_UPDATE_REBUILD;
    if (fresh) sweep_forget_order(s);
    if (!sweep_rebuild(w, s)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (fresh)
        w->stats->rebuilds++;
    else
        w->stats->refits++;
    return BROADPHASE_OK;
}

static broadphase_status plan_search(const method_world *w, void *state, method_search *out) {
    sweep *s = state;
    if (!tree_workers_ready(w, &s->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    size_t need = sweep_hit_need(s);
    for (int i = 0; i < w->workers; i++)
        if (!tree_worker_reserve(&s->workers.at[i], 0, need, false))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    s->ctx = (sweep_ctx){w, s, w->config->dimensions, 0};
    size_t large = s->count - s->small;
    size_t jobs = s->column_jobs + (large + SWEEP_LARGE_PER_JOB - 1) / SWEEP_LARGE_PER_JOB;
    float quality = s->count ? (float)s->small / (float)(s->grid.size[0] * s->grid.size[1]) : 0.0f;
    *out = (method_search){jobs, sweep_job, &s->ctx, &s->workers, &s->slots, quality};
    return BROADPHASE_OK;
}

static void fill_stats(const void *state, broadphase_stats *stats) {
    const sweep *s = state;
    if (!s || !s->built || s->levels == 0) return;
    stats->nodes = s->level_offset[s->levels];
    stats->leaves = s->level_nodes[0];
    stats->depth = (size_t)s->levels - 1;
    stats->objects_in_internal_nodes = 0;
}

/* Root first: level d of the stats is level levels - 1 - d of the hierarchy; every object is in
 * a leaf. */
static size_t fill_levels(const void *state, broadphase_level *levels, size_t capacity) {
    const sweep *s = state;
    if (!s || !s->built || s->levels == 0) return 0;
    for (int d = 0; d < s->levels && (size_t)d < capacity; d++) {
        int l = s->levels - 1 - d;
        bool leaves = l == 0;
        levels[d] = (broadphase_level){s->level_nodes[l], leaves ? s->level_nodes[0] : 0,
                                       leaves ? s->count : 0};
    }
    return (size_t)s->levels;
}

static void destroy(const method_world *w, void *state) {
    sweep *s = state;
    if (!s) return;
    sweep_release(w, s);
    heap_free(w->heap, s, sizeof *s);
}

/* ---- the queries' view (query.h): the hierarchy, handle = level << 32 | node --------------- */

static void bounds_of(const void *p, uint64_t handle, float lo[3], float hi[3]) {
    const float *b = sweep_node(p, (int)(handle >> 32), (uint32_t)handle);
    memcpy(lo, b, 3 * sizeof(float));
    memcpy(hi, b + 3, 3 * sizeof(float));
}

static void query_node_of(const void *p, uint64_t handle, query_node *out) {
    const sweep *s = p;
    int level = (int)(handle >> 32);
    size_t i = (uint32_t)handle;
    bounds_of(p, handle, out->lo, out->hi);
    /* The slots under the node: leaves [first, last) of level 0. */
    size_t first = i, last = i + 1;
    for (int l = level; l > 0; l--) {
        first *= SWEEP_FANOUT;
        last *= SWEEP_FANOUT;
    }
    if (last > s->level_nodes[0]) last = s->level_nodes[0];
    size_t sub_begin = first * s->leaf, sub_end = last * s->leaf;
    if (sub_end > s->count) sub_end = s->count;
    out->own = tree_slots_boxes(&s->slots);
    out->own_id = out->sub_id = s->slots.sid[s->slots.cur];
    out->sub_begin = out->own_begin = (uint32_t)sub_begin;
    out->sub_end = (uint32_t)sub_end;
    out->own_end = level == 0 ? (uint32_t)sub_end : (uint32_t)sub_begin;
    memcpy(out->own_lo, out->lo, sizeof out->lo);
    memcpy(out->own_hi, out->hi, sizeof out->hi);
    out->sweep = 3;
    out->reach = 0.0f;
    out->children = 0;
    if (level > 0) {
        size_t c0 = i * SWEEP_FANOUT, c1 = c0 + SWEEP_FANOUT;
        if (c1 > s->level_nodes[level - 1]) c1 = s->level_nodes[level - 1];
        for (size_t c = c0; c < c1; c++)
            out->child[out->children++] = (uint64_t)(level - 1) << 32 | c;
    }
}

static void prefetch_of(const void *p, uint64_t handle) {
    const sweep *s = p;
    if (handle >> 32) return;
    size_t from = (uint32_t)handle * (size_t)s->leaf;
    tree_slots_prefetch(&s->slots, (uint32_t)from, (uint32_t)(from + s->leaf), 3);
}

static bool query_view_of(const void *state, query_view *out) {
    const sweep *s = state;
    if (!s || !s->built || s->count == 0) return false;
    uint64_t root = (uint64_t)(s->levels - 1) << 32;
    *out =
        (query_view){s, root, query_node_of, QUERY_MEMBER_TREE, bounds_of, bounds_of, prefetch_of};
    return true;
}

const method_table sweep_method = {
    .id = BROADPHASE_METHOD_SWEEP,
    .name = "sweep",
    .leaf_size = 32,
    .uses_fields = true,
    .update = update,
    .plan_search = plan_search,
    .fill_stats = fill_stats,
    .fill_levels = fill_levels,
    .query_view = query_view_of,
    .destroy = destroy,
};

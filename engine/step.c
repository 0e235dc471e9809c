/* broadphase_step: brings the chosen method's structure up to date, finds the pairs, publishes
 * them sorted, and records the statistics of the step. */
#include "clock.h"
#include "brute_force.h"
#include "kdtree.h"
#include "octree.h"
#include "world.h"

#include <string.h>

broadphase_status broadphase_step(broadphase_world *w, broadphase_pairs *pairs_out) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE) != 0) return BROADPHASE_ERROR_BUSY;
    w->generation++;
    double start = clock_now_ms();
    bool events = w->config.pair_events;
    bool tree = w->config.method != BROADPHASE_METHOD_BRUTE_FORCE;
    /* Events and the rest's carry-over both need the last step's pairs. */
    if ((events || (tree && w->config.rest_share > 0.0f)) && w->last_step_ok)
        pairs_keep_previous(&w->pairs);
    /* The trees' searches query the statics' and the resting objects' fields, so those are
     * brought up to date first; brute force tests every pair and drops the static-static ones. */
    broadphase_status s;
    if (!tree)
        s = brute_force_step(w);
    else if (!statics_update(w) || !rest_update(w))
        s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    else if (w->config.method == BROADPHASE_METHOD_OCTREE)
        s = octree_step(w);
    else
        s = kdtree_step(w);
    if (s == BROADPHASE_OK && tree) {
        double carry_start = clock_now_ms(); /* the carry-over is part of the output */
        if (!rest_carry_over(w)) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        w->stats.output_ms += clock_now_ms() - carry_start;
    }
    w->last_error_index = SIZE_MAX;
    if (s == BROADPHASE_OK && events && !events_update(w)) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    w->last_step_ok = s == BROADPHASE_OK;
    if (s == BROADPHASE_OK) {
        w->added_count = 0;
        w->trees_stale = false;
        w->epoch++;
        w->moved_count = 0;
        w->stats.steps++;
        w->stats.pairs = w->pairs.count;
        w->stats.step_ms = clock_now_ms() - start;
    } else {
        w->pairs.count = 0;
    }
    if (pairs_out) *pairs_out = broadphase_last_pairs(w);
    __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    return s;
}

broadphase_pairs broadphase_last_pairs(const broadphase_world *w) {
    broadphase_pairs p = {NULL, 0};
    if (w && w->pairs.count) {
        p.data = w->pairs.out;
        p.count = w->pairs.count;
    }
    return p;
}

broadphase_status broadphase_get_stats(const broadphase_world *w, broadphase_stats *stats_out) {
    if (!w || !stats_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    broadphase_stats s = w->stats;
    s.objects = w->live_count;
    s.static_objects = w->static_count;
    s.static_builds = w->statics.rebuilds;
    s.resting_objects = w->rest.count;
    s.rest_builds = w->rest.field.rebuilds;
    s.nodes = s.leaves = s.depth = s.objects_in_internal_nodes = 0;
    s.bytes_in_use = w->heap.bytes + threads_scratch_bytes(&w->scratch);
    s.allocations = w->heap.allocations + threads_scratch_allocations(&w->scratch);
    if (w->config.method == BROADPHASE_METHOD_KDTREE) kdtree_fill_stats(w, &s);
    if (w->config.method == BROADPHASE_METHOD_OCTREE) octree_fill_stats(w, &s);
    *stats_out = s;
    return BROADPHASE_OK;
}

broadphase_status broadphase_get_levels(const broadphase_world *w, broadphase_level *levels,
                                        size_t capacity, size_t *levels_out) {
    if (!w || !levels_out || (!levels && capacity > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    size_t n = 0;
    if (w->config.method == BROADPHASE_METHOD_KDTREE) n = kdtree_fill_levels(w, levels, capacity);
    if (w->config.method == BROADPHASE_METHOD_OCTREE) n = octree_fill_levels(w, levels, capacity);
    *levels_out = n;
    return n > capacity ? BROADPHASE_ERROR_BUFFER_TOO_SMALL : BROADPHASE_OK;
}

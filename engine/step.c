/* broadphase_step, the frame, as a list of phases: the fields, the method's update, the pair
 * search, the rest's carry-over, the events, the publication. Each phase is timed into the
 * statistics. broadphase_update runs the first two alone, for frames that only query. Also the
 * calls that read what a step left: the pairs, the events, the statistics, the levels. */
#include "clock.h"
#include "method.h"
#include "tree.h"
#include "world.h"

#include <math.h>
#include <string.h>

/* The pair protocol, written once for every method: the planned jobs, then the search of the
 * method's objects against the static and resting fields, into the pair pool; sorted and
 * published, or run again with a larger pool while it overflows. *search_end gets the time the
 * last search pass ended. */
static broadphase_status find_pairs(broadphase_world *w, const method_search *plan,
                                    double *search_end) {
    pairs_result r = PAIRS_RETRY;
    for (bool grow = false; r == PAIRS_RETRY; grow = true) {
        if (!pairs_prepare(&w->pairs, &w->heap, w->workers, w->store.id_end, grow))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
        threads_for_chunks(w->workers, plan->job_count, plan->job, plan->ctx);
        if (plan->workers) {
            statics_search(w, plan->workers, plan->slots);
            if (tree_workers_failed(plan->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        }
        *search_end = clock_now_ms();
        r = pairs_finish(&w->pairs, &w->heap);
    }
    return r == PAIRS_DONE ? BROADPHASE_OK : BROADPHASE_ERROR_OUT_OF_MEMORY;
}

/* Phases 1 and 2, which bring the structures up to date (a step's, or broadphase_update's
 * whole work); *update_ms gets the method's part. */
static broadphase_status update_structures(broadphase_world *w, double *update_ms) {
    const method_table *m = w->method;
    /* 1. The fields: the methods that use them search the statics' and the resting objects'
     * fields beside their own structure, so those are brought up to date first. */
    if (m->uses_fields && (!statics_update(w) || !rest_update(w)))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    /* 2. The method's update: rebuild or refit, no pairs. */
    double t0 = clock_now_ms();
    broadphase_status s = m->update(world_method_view(w), &w->method_state);
    *update_ms = clock_now_ms() - t0;
    return s;
}

/* The phases up to the events; the status of the first that fails. `current`: an update left
 * the structures holding every change, and the search runs on them as they stand. */
static broadphase_status run_phases(broadphase_world *w, bool current) {
    const method_table *m = w->method;
    double update_ms = 0.0;
    broadphase_status s = current ? BROADPHASE_OK : update_structures(w, &update_ms);
    if (s != BROADPHASE_OK) return s;
    /* 3. The search: the method's jobs, then the fields, into sorted pairs. */
    double t1 = clock_now_ms(), t2 = t1;
    method_search plan;
    s = m->plan_search(world_method_view(w), w->method_state, &plan);
    if (s == BROADPHASE_OK) s = find_pairs(w, &plan, &t2);
    if (s != BROADPHASE_OK) return s;
    /* 4. The carry-over: pairs of resting objects kept from the last step (rest.h). */
    if (m->uses_fields && !rest_carry_over(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    w->stats.update_ms = update_ms;
    w->stats.search_ms = t2 - t1;
    w->stats.output_ms = clock_now_ms() - t2; /* sorting, publishing and the carry-over */
    w->stats.quality = plan.quality;
    /* 5. The events: begins and ends against the last step's pairs. */
    if (w->config.pair_events && !events_update(&w->events, &w->pairs, &w->heap, w->workers,
                                                w->added, w->added_count, w->fresh_before))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    return BROADPHASE_OK;
}

/* The structures hold every object as it is: they were brought up to date (a step or an update
 * that succeeded), and since then no object was added, removed, given a new shape (a push of the
 * shape it has is no change) or a new filter, and no static flag changed (which makes the trees
 * stale). The fields' own flags are consumed only by the methods that use the fields. */
static bool structures_hold_all(const broadphase_world *w) {
    bool fields = w->method->uses_fields && (w->statics_dirty || w->rest.drop);
    return w->structures_ok && w->moved_count == 0 && w->added_count == 0 && !w->trees_stale &&
           !fields;
}

/* Nothing that decides a pair changed since the last step, which succeeded. */
static bool nothing_changed(const broadphase_world *w) {
    return w->last_step_ok && !w->unstepped && structures_hold_all(w);
}

/* A still world's step: the last step's pairs stand, no pair began or ended. */
static broadphase_status keep_pairs(broadphase_world *w) {
    if (w->config.pair_events) events_none(&w->events);
    w->stats.update_ms = w->stats.search_ms = w->stats.output_ms = 0.0;
    w->stats.step_threads = 1;
    w->stats.unchanged_steps++;
    return BROADPHASE_OK;
}

/* After the structures took in every change (a step or an update): what changed is consumed,
 * and the queries skip nothing in them until the next change. */
static void structures_synced(broadphase_world *w) {
    w->added_count = 0;
    w->trees_stale = false;
    w->structures_ok = true;
    w->epoch++;
    w->moved_count = 0;
}

broadphase_status broadphase_step(broadphase_world *w, broadphase_pairs *pairs_out) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE) != 0) return BROADPHASE_ERROR_BUSY;
    /* An update with no mutation since left the structures as the search needs them. */
    bool current = w->synced_generation == w->generation && structures_hold_all(w);
    w->generation++;
    double start = clock_now_ms();
    broadphase_status s;
    if (nothing_changed(w)) {
        s = keep_pairs(w);
    } else {
        /* Events and the rest's carry-over both need the last step's pairs. */
        bool keep =
            w->config.pair_events || (w->method->uses_fields && w->config.rest_share > 0.0f);
        if (keep && w->last_step_ok) pairs_keep_previous(&w->pairs);
        w->neighbours.valid = false;
        w->stats.step_threads = (size_t)team_begin(&w->team);
        s = run_phases(w, current);
        if (keep && s == BROADPHASE_OK) pairs_reserve_next(&w->pairs, &w->heap, w->workers);
        team_end(&w->team, clock_now_ms() - start);
        w->stats.preempted_steps = w->team.preempted_steps;
    }
    /* 6. Publication: the pairs stand for this step, the changes are consumed. */
    w->last_error_index = SIZE_MAX;
    w->last_step_ok = s == BROADPHASE_OK;
    if (s == BROADPHASE_OK) {
        structures_synced(w);
        w->step_epoch = w->epoch;
        w->unstepped = w->fresh_before = w->rest.dropped = false;
        w->moved_before = 0;
        w->stats.steps++;
        w->stats.pairs = w->pairs.count;
        w->stats.step_ms = clock_now_ms() - start;
    } else {
        /* The update may have taken the added and moved objects into the tree before a later
         * phase failed, while the world still lists them as changed: the next step builds the
         * tree anew from the store rather than take them in twice (found by the fuzzer: a
         * refit after a first step that ran out of memory in its search found no pairs). */
        w->pairs.count = 0;
        w->trees_stale = true;
        w->structures_ok = false;
    }
    if (pairs_out) *pairs_out = broadphase_last_pairs(w);
    __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    return s;
}

broadphase_status broadphase_update(broadphase_world *w) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE) != 0) return BROADPHASE_ERROR_BUSY;
    w->generation++;
    broadphase_status s = BROADPHASE_OK;
    if (!structures_hold_all(w)) {
        double start = clock_now_ms(), update_ms = 0.0;
        team_begin(&w->team);
        s = update_structures(w, &update_ms);
        team_end(&w->team, clock_now_ms() - start);
        if (s == BROADPHASE_OK) {
            /* The next step searches what this took in; it needs to know of the ids added
             * (their events) and of the objects changed since the last step (the rest). */
            w->unstepped = true;
            w->fresh_before |= w->config.pair_events && w->added_count > 0;
            w->moved_before += w->moved_count;
            structures_synced(w);
            w->stats.updates++;
            w->stats.update_ms = update_ms;
        } else {
            /* As after a failed step, the trees are built anew from the store; the last step's
             * pairs still stand. */
            w->trees_stale = true;
            w->structures_ok = false;
        }
    }
    w->synced_generation = s == BROADPHASE_OK ? w->generation : UINT64_MAX;
    w->last_error_index = SIZE_MAX;
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

broadphase_status broadphase_neighbours(broadphase_world *w, broadphase_neighbour_rows *rows_out) {
    if (!w || !rows_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE) != 0) return BROADPHASE_ERROR_BUSY;
    neighbours_state *n = &w->neighbours;
    broadphase_status s = BROADPHASE_OK;
    /* Made once per step's pairs; again when ids were handed out since, for their rows. */
    if (!n->valid || n->rows != w->store.id_end) {
        team_apply(&w->team);
        if (!neighbours_make(n, w->pairs.out, w->pairs.count, w->store.id_end, &w->heap,
                             w->workers))
            s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        team_release();
    }
    if (s == BROADPHASE_OK) {
        rows_out->offsets = n->offsets.data;
        rows_out->ids = n->ids.data;
        rows_out->count = n->rows;
    }
    w->last_error_index = SIZE_MAX; /* a call on the world: no element of it was bad */
    __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    return s;
}

broadphase_status broadphase_neighbourhoods(broadphase_world *w, size_t k, float max_distance,
                                            broadphase_neighbourhood_rows *rows_out) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE) != 0) return BROADPHASE_ERROR_BUSY;
    neighbourhoods_state *n = &w->neighbourhoods;
    broadphase_status s = BROADPHASE_OK;
    size_t rows = w->store.id_end;
    if (!rows_out || (k > 0 && k > SIZE_MAX / 8 / (rows + 1)))
        s = BROADPHASE_ERROR_INVALID_ARGUMENT;
    else if (isnan(max_distance))
        s = BROADPHASE_ERROR_NONFINITE;
    else if (max_distance < 0.0f)
        s = BROADPHASE_ERROR_NEGATIVE_RADIUS;
    if (s != BROADPHASE_OK) {
        w->last_error_index = SIZE_MAX; /* the call's own arguments: no element is named */
        __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
        return s;
    }
    team_apply(&w->team);
    int dims = w->config.dimensions;
    if (!neighbourhoods_make(n, &w->store, dims, k, max_distance, &w->heap, w->workers)) {
        s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        if (n->unfit && neighbourhoods_batch_reserve(n, &w->heap)) {
            /* the grid is no use: the method's structures, from every centre (sorted by cell,
             * so that the batch's groups are near each other) */
            size_t cs = n->live + 1;
            broadphase_points pts = {n->centre.data, n->centre.data + cs,
                                     dims == 3 ? n->centre.data + 2 * cs : NULL};
            s = query_nearest_many_held(w, n->live, &pts, k + 1, max_distance, n->batch_ids.data,
                                        n->batch_d2.data, n->batch_counts.data);
            team_apply(&w->team); /* (the batch let go of the limit as it ended) */
            if (s == BROADPHASE_OK) neighbourhoods_from_batch(n, w->workers);
        }
    }
    team_release();
    if (s == BROADPHASE_OK) {
        rows_out->ids = n->ids.data;
        rows_out->dist2 = n->d2.data;
        rows_out->counts = n->counts.data;
        rows_out->count = n->rows;
        rows_out->k = k;
    }
    w->last_error_index = SIZE_MAX; /* a call on the world: no element of it was bad */
    __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    return s;
}

broadphase_status broadphase_get_stats(const broadphase_world *w, broadphase_stats *stats_out) {
    if (!w || !stats_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    broadphase_stats s = w->stats;
    s.objects = w->store.live_count;
    s.static_objects = w->store.static_count;
    s.static_builds = w->statics.pyramid.rebuilds;
    s.resting_objects = w->rest.count;
    s.rest_builds = w->rest.field.pyramid.rebuilds;
    s.nodes = s.leaves = s.depth = s.objects_in_internal_nodes = 0;
    heap_figures h = heap_read(&w->heap);
    s.bytes_in_use = h.bytes; /* the workers' scratch included */
    s.allocations = h.allocations;
    s.method = w->config.method; /* AUTO's fill_stats names the method it runs */
    if (w->method->fill_stats && w->method_state) w->method->fill_stats(w->method_state, &s);
    *stats_out = s;
    return BROADPHASE_OK;
}

broadphase_status broadphase_get_levels(const broadphase_world *w, broadphase_level *levels,
                                        size_t capacity, size_t *levels_out) {
    if (!w || !levels_out || (!levels && capacity > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    size_t n = 0;
    if (w->method->fill_levels && w->method_state)
        n = w->method->fill_levels(w->method_state, levels, capacity);
    *levels_out = n;
    return n > capacity ? BROADPHASE_ERROR_BUFFER_TOO_SMALL : BROADPHASE_OK;
}

broadphase_status broadphase_pair_events(const broadphase_world *w, broadphase_events *events_out) {
    if (!w || !events_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!w->config.pair_events) return BROADPHASE_ERROR_INVALID_CONFIG;
    const events_state *e = &w->events;
    events_out->begun = (broadphase_pairs){e->begun_count ? e->begun.data : NULL, e->begun_count};
    events_out->ended = (broadphase_pairs){e->ended_count ? e->ended.data : NULL, e->ended_count};
    return BROADPHASE_OK;
}

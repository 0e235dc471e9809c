/* The world: the object store (SoA columns by id, 64-byte aligned, sentinel-padded), id
 * allocation, heap accounting, and the state each method keeps between steps. */
#pragma once

#include "broadphase.h"
#include "events.h"
#include "heap.h"
#include "pairs.h"
#include "parallel.h"
#include "query.h"
#include "rest.h"
#include "statics.h"
#include "store.h"

#include <float.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct broadphase_world {
    broadphase_config config;
    int workers;

    /* Indexed by id, with room for `capacity` ids. box[id] is the object's bounding box: a
     * box's exact bounds, or for a sphere a box widened outward so that it contains the sphere
     * however the exact test rounds. Free ids hold sentinels (lo = +inf, hi = -inf) that
     * overlap nothing. Spheres also keep centre and radius in columns, for the exact test. */
    world_box *box;
    float *center[3], *radius;
    uint8_t *kind;
    uint32_t *stamp;   /* by id: its position in the batch being checked, to find repeated ids */
    uint32_t *changed; /* by id: the epoch in which the object last changed (see epoch) */
    void *column_block;
    size_t capacity;
    uint32_t id_end; /* every id ever handed out is below id_end */
    size_t live_count;
    size_t sphere_count;
    /* Set (with an atomic store, by the writers of a batch) once a sphere's box has stopped at
     * the float range's end while its ball went on; never cleared. Rays and plane queries then
     * read bounds at +-FLT_MAX as unbounded (query.c: unclamp). */
    bool spheres_past_floats;

    /* Free ids; handed out lowest first (sorted descending on demand, popped from the back). */
    uint32_t *free_ids;
    size_t free_count, free_capacity;
    bool free_sorted;

    /* Collision filters by id (broadphase_set_filters); NULL until one is first set, so that a
     * world without filters pays nothing. */
    uint32_t *filter_category, *filter_mask, *filter_group;
    size_t filter_capacity;

    /* Static objects (broadphase_set_static): a flag by id, NULL until one is first set. The
     * trees hold the other live objects; the statics are in the static field, built again at
     * the next step when statics_dirty. A flag that changed makes the trees build anew
     * (trees_stale). */
    uint8_t *is_static;
    size_t static_capacity, static_count;
    bool statics_dirty, trees_stale;
    statics_field statics;

    /* Only-moved updates (config.rest_share; see rest.h). `epoch` counts successful steps from
     * 1: an object changed since the last one when changed[id] == epoch, and moved_count of
     * them did. */
    uint32_t epoch;
    size_t moved_count;
    rest_state rest;
    bool last_step_ok; /* the last step succeeded: pairs.out holds its pairs */

    /* Ids added since the last step (methods that keep structure insert them). */
    uint32_t *added;
    size_t added_count, added_capacity;

    pairs_state pairs;
    events_state events;         /* config.pair_events only */
    threads_scratch scratch;     /* per-worker working memory of the methods */
    const struct method_table *method; /* config.method's table (method.h) */
    void *method_state;

    broadphase_stats stats;
    heap heap; /* every allocation of the world */
    size_t last_error_index;
    int busy; /* accessed with atomics: a mutation while a step runs is refused */

    /* Counts mutating calls and steps, so that the queries know when to catch up (query.h). */
    uint64_t generation;
    query_state query;
};

/* Whether live object i belongs in the trees (it is neither static nor at rest). */
static inline bool world_tree_member(const broadphase_world *w, size_t i) {
    return w->kind[i] != OBJECT_FREE && !(w->is_static && w->is_static[i]) &&
           !(w->rest.at_rest && w->rest.at_rest[i]);
}

/* How many objects the trees hold. */
static inline size_t world_tree_count(const broadphase_world *w) {
    return w->live_count - w->static_count - w->rest.count;
}

/* The world's heap, for the calls that take a const world (the queries): it is the one part of
 * the world they change, and it is safe to share between threads (heap.h). */
static inline heap *world_heap(const broadphase_world *w) {
    return (heap *)&w->heap;
}

/* ---- the object store (store.c) ---- */

/* Makes room for ids below `need`; the new ids hold sentinels. False on out of memory. */
bool store_reserve(broadphase_world *w, size_t need);
/* Id i holds no object: sentinel box (lo +inf, hi -inf), kind OBJECT_FREE. */
void store_set_sentinel(broadphase_world *w, size_t i);
/* Filter columns for ids below `need` (new entries hold the default filter). */
bool store_filter_reserve(broadphase_world *w, size_t need);
/* The static flags for ids below `need` (new entries not static). */
bool store_static_reserve(broadphase_world *w, size_t need);
/* The filter an object has until one is set. */
extern const broadphase_filter store_default_filter;
/* Frees the store's columns. */
void store_release(broadphase_world *w);

/* The sphere columns as the SIMD kernels see them. */
struct simd_spheres;
void store_sphere_columns(const broadphase_world *w, struct simd_spheres *out);

/* The exact test after the box test: of the candidate ids (whose bounding boxes overlap object
 * `id`'s), keeps in `out` (may alias) those that the collision filters let pair with it and
 * whose shapes really overlap it; returns how many. All pass at once when the world holds no
 * spheres and has no filters. `scratch` has room for `count` ids. */
size_t store_exact_filter(const broadphase_world *w, uint32_t id, const uint32_t *candidates,
                          size_t count, uint32_t *out, uint32_t *scratch);

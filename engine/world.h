/* The world: its configuration, the object store (store.h), the heap every allocation goes
 * through, and the state each part keeps between calls: the statics, the rest, the pairs, the
 * events, the queries, the method's own. */
#pragma once

#include "broadphase.h"
#include "events.h"
#include "method.h"
#include "neighbourhoods.h"
#include "neighbours.h"
#include "heap.h"
#include "pairs.h"
#include "parallel.h"
#include "query.h"
#include "rest.h"
#include "statics.h"
#include "store.h"
#include "team.h"

#include <float.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct broadphase_world {
    broadphase_config config;
    int workers;
    team team; /* the threads each step runs on: fewer while other work takes cores (team.h) */

    store store; /* the objects by id (store.h) */

    /* Static objects (store.is_static): the trees hold the other live objects; the statics are
     * in the static field, built again at the next step when statics_dirty. A flag that changed
     * makes the trees build anew (trees_stale). */
    bool statics_dirty, trees_stale;
    statics_field statics;

    /* What changed, and since when. `epoch` counts the times the structures were brought up
     * to date (successful steps and broadphase_update calls), from 1: an object changed since
     * the last of them when changed[id] == epoch, and moved_count of them did. step_epoch is
     * the epoch the last successful step began (1 before any): an object changed since that step
     * when changed[id] >= step_epoch (the rest's test: rest.h). */
    uint32_t epoch, step_epoch;
    size_t moved_count;
    rest_state rest;
    bool last_step_ok;  /* the last step succeeded: pairs.out holds its pairs */
    bool structures_ok; /* the last step or update succeeded: the structures hold every object
                         * as of then (the queries skip only what changed since) */
    /* broadphase_update since the last step: what it took in. `unstepped`: it brought changes
     * into the structures that no step has searched yet; moved_before of the objects had
     * changed (rest_update's share); fresh_before: ids were added (their event marks are
     * cleared whole at the next step). synced_generation: the generation it left, so that a
     * step with no mutation since searches the structures as they stand. */
    bool unstepped, fresh_before;
    size_t moved_before;
    uint64_t synced_generation;

    /* Ids added since the structures last took them in (a step or an update): methods that
     * keep structure insert them, and the events read them. */
    uint32_t *added;
    size_t added_count, added_capacity;

    pairs_state pairs;
    events_state events;                 /* config.pair_events only */
    neighbours_state neighbours;         /* the pairs as rows, made on demand */
    neighbourhoods_state neighbourhoods; /* the nearest within a distance, made on demand */
    threads_scratch scratch;             /* per-worker working memory of the methods */
    const struct method_table *method;   /* config.method's table (method.h) */
    method_world view;                   /* what the method sees: world_method_view */
    void *method_state;

    broadphase_stats stats;
    heap heap; /* every allocation of the world */
    size_t last_error_index;
    int busy;          /* accessed with atomics: a mutation while a step runs is refused */
    double entered_ms; /* when the running mutation began (team_enter) */

    /* Counts mutating calls and steps, so that the queries know when to catch up (query.h). */
    uint64_t generation;
    query_state query;
};

/* Whether live object i belongs in the trees (it is neither static nor at rest). */
static inline bool world_tree_member(const broadphase_world *w, size_t i) {
    return w->store.kind[i] != OBJECT_FREE && !(w->store.is_static && w->store.is_static[i]) &&
           !(w->rest.at_rest && w->rest.at_rest[i]);
}

/* How many objects the trees hold. */
static inline size_t world_tree_count(const broadphase_world *w) {
    return w->store.live_count - w->store.static_count - w->rest.count;
}

/* The world's heap, for the calls that take a const world (the queries): it is the one part of
 * the world they change, and it is safe to share between threads (heap.h). */
static inline heap *world_heap(const broadphase_world *w) {
    return (heap *)&w->heap;
}

/* What a call into the method sees of the world (method.h): w->view, brought up to date. Its
 * address is the world's for the world's life, so that a method's search context may keep it
 * from the update to the search. */
static inline const method_world *world_method_view(broadphase_world *w) {
    w->view = (method_world){
        .config = &w->config,
        .store = &w->store,
        .heap = &w->heap,
        .workers = w->workers,
        .scratch = &w->scratch,
        .pairs = &w->pairs,
        .stats = &w->stats,
        .at_rest = w->rest.at_rest,
        .member_count = world_tree_count(w),
        .added = w->added,
        .added_count = w->added_count,
        .moved_count = w->moved_count,
        .epoch = w->epoch,
        .stale = w->trees_stale,
    };
    return &w->view;
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

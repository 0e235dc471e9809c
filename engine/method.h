/* The method seam: what a broad-phase method gives the frame (step.c), the queries (query.c)
 * and the inspection calls, as one table of functions. The world holds one method and its
 * state; config.method is read in one place, method_for().
 *
 * A new method takes its own files and one line:
 * - engine/`name`.c (and engine/`name`_*.c, `name`.h, `name`_*.h as it needs) defining
 *   `const method_table name_method` below, with .id its enumerator and .name "`name`". The
 *   build (CMakeLists.txt) and the layer check (engine/LAYERS, `<methods>`) find these files
 *   from the list; a file of a method that is not in the list is built by nothing.
 * - the line X(BROADPHASE_METHOD_`NAME`, `name`) in BROADPHASE_METHOD_LIST (broadphase.h).
 * The registry (method.c), broadphase_method_name(), the conformance table
 * (tests/test_methods.c), every test that loops over the methods, the runner (--method `name`)
 * and the benchmarks (step/<scene>/`name`/...) then take it in from the list.
 * What a method must give is the table below; tests/test_methods.c says what it must do.
 * What it may see of the world is method_world below: its files include method.h (and tree.h,
 * for what the trees share), never world.h; the layer check (engine/LAYERS) fails otherwise.
 *
 * A step runs, in order: the fields (statics and rest, for methods that use them), `update`,
 * `plan_search`, the pair protocol over the planned jobs (step.c: run the jobs, search the
 * fields, finish, grow the pair pool and retry), the rest's carry-over, the events. */
#pragma once

#include "broadphase.h"
#include "heap.h"
#include "pairs.h"
#include "parallel.h"
#include "query_view.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tree_workers;
struct tree_slots;

/* What a method sees of the world, and all it sees: the world (world.h) brings this view up to
 * date before each call into a method (world_method_view), so that no method depends on the
 * world's layout, and the world's parts stay the world's. The view is the world's (its address
 * is fixed for the world's life): a method's search context may keep a pointer to it from the
 * update to the search's jobs. */
typedef struct method_world {
    const broadphase_config *config; /* leaf_size is the method's when the caller gave 0 */
    const store *store;              /* the objects by id (store.h); read only */
    heap *heap;                      /* every allocation goes through it */
    int workers;                     /* the threads this call runs on (the team's size) */
    threads_scratch *scratch;        /* per-worker working memory (parallel.h) */
    pairs_state *pairs;              /* the step's pair writers, one per worker (pairs.h) */
    broadphase_stats *stats;         /* the method counts its rebuilds and refits here */
    /* The objects a method that uses the fields holds (method_member): the live ones less the
     * statics and the objects at rest, member_count of them. at_rest is by id, NULL before the
     * rest's first build; nothing rests in a world whose method does not use the fields. */
    const uint8_t *at_rest;
    size_t member_count;
    /* What changed since the structures last took the changes in (a step or an update): ids
     * added, in the order they were added; the objects moved (changed in place or removed:
     * store->changed[id] == epoch, moved_count of them); `stale`: a static flag changed, so a
     * method that keeps structure builds it anew. A removed id holds the store's sentinels. */
    const uint32_t *added;
    size_t added_count, moved_count;
    uint32_t epoch;
    bool stale;
} method_world;

/* Whether id i is a live object that a method using the fields holds (neither static nor at
 * rest). */
static inline bool method_member(const method_world *w, size_t i) {
    return w->store->kind[i] != OBJECT_FREE && !(w->store->is_static && w->store->is_static[i]) &&
           !(w->at_rest && w->at_rest[i]);
}

/* A method's pair search, as the frame runs it: job_count jobs of job(job, worker, ctx) over
 * the workers, each writing its pairs through pairs_writer. A method whose objects are searched
 * against the static and resting fields names its per-worker search memory and its objects in
 * tree order (tree.h); else both are NULL. */
typedef struct method_search {
    size_t job_count;
    void (*job)(size_t job, int worker, void *ctx);
    void *ctx;
    struct tree_workers *workers;
    const struct tree_slots *slots;
    float quality; /* broadphase_stats.quality: the structure's pair-test cost per object */
} method_search;

typedef struct method_table {
    broadphase_method id;
    const char *name;
    uint32_t leaf_size; /* broadphase_config.leaf_size when it is 0 */
    /* Static objects and objects at rest live in their fields, searched beside the method's
     * own (statics.h, rest.h); false: the method holds every live object itself. */
    bool uses_fields;
    /* Brings the structure up to date with the world (rebuild or refit, per config.update),
     * creating the state into *state on the first call. No pairs. */
    broadphase_status (*update)(const method_world *w, void **state);
    /* The search's jobs (after a successful update). */
    broadphase_status (*plan_search)(const method_world *w, void *state, method_search *out);
    /* Optional: the structure's figures (nodes, leaves, depth, ...) and its bytes. */
    void (*fill_stats)(const void *state, broadphase_stats *stats);
    /* Optional: nodes, leaves and objects per level into levels[0 .. capacity); returns the
     * level count (0 without a structure). */
    size_t (*fill_levels)(const void *state, broadphase_level *levels, size_t capacity);
    /* Optional: the structure as the queries walk it; false when there is nothing to walk.
     * Without it, the queries test every object. */
    bool (*query_view)(const void *state, query_view *out);
    /* Frees the state (NULL is fine). */
    void (*destroy)(const method_world *w, void *state);
} method_table;

/* The method with this id; NULL for an id that names none. Every method of the list is
 * method_for(m) for m in 0 .. BROADPHASE_METHOD_COUNT - 1. */
const method_table *method_for(broadphase_method id);

/* Whether the method keeps a tree of its own: one with levels and nodes, a leaf size and update
 * policies that mean something, and the static and resting fields beside it. Brute force keeps
 * none; BROADPHASE_METHOD_AUTO does, as it always runs such a method. The tests, the runner and
 * the benchmarks ask this rather than name the methods. */
static inline bool method_has_tree(broadphase_method id) {
    const method_table *m = method_for(id);
    return m && m->fill_levels != NULL && m->uses_fields;
}

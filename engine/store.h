/* The object store: the objects by id (their boxes, sphere columns, kinds, change epochs, free
 * ids, filters, static flags) and its vocabulary (an object's bounding box record, the kinds an
 * id can hold, the id that names none). A structure that reads the boxes needs this, not the
 * world. Its functions are in store.c (declared in world.h while they take the world). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { OBJECT_BOX = 0, OBJECT_SPHERE = 1, OBJECT_FREE = 2 };

#define WORLD_NONE UINT32_MAX

/* One object's bounding box in one 32-byte record (the fourth lanes are zero), so that a whole
 * box is one cache line: the trees read every box by id, in their own order, every step, and
 * from six separate columns that costs six cache misses per object instead of one (gathering
 * 1M boxes in random order, one thread: 28.7 ms from columns, 9.3 ms from records)
 * (NOTES row 1). */
typedef struct world_box {
    _Alignas(32) float lo[4];
    float hi[4];
} world_box;

/* The objects by id: what every structure reads of them. */
typedef struct store {
    /* Indexed by id, with room for `capacity` ids. box[id] is the object's bounding box: a
     * box's exact bounds, or for a sphere a box widened outward so that it contains the sphere
     * however the exact test rounds. Free ids hold sentinels (lo = +inf, hi = -inf) that
     * overlap nothing. Spheres also keep centre and radius in columns, for the exact test. */
    world_box *box;
    float *center[3], *radius;
    uint8_t *kind;
    uint32_t *stamp;   /* by id: its position in the batch being checked, to find repeated ids */
    uint32_t *changed; /* by id: the epoch in which the object last changed (world.h: epoch) */
    void *column_block;
    size_t capacity;
    uint32_t id_end; /* every id ever handed out is below id_end */
    size_t live_count;
    size_t sphere_count;
    /* Set (with an atomic store, by the writers of a batch) once a sphere's box has stopped at
     * the float range's end while its ball went on; never cleared. Rays and plane queries then
     * read bounds at +-FLT_MAX as unbounded (query_walk.c: unclamp). */
    bool spheres_past_floats;

    /* Free ids; handed out lowest first (sorted descending on demand, popped from the back). */
    uint32_t *free_ids;
    size_t free_count, free_capacity;
    bool free_sorted;

    /* Collision filters by id (broadphase_set_filters); NULL until one is first set, so that a
     * world without filters pays nothing. */
    uint32_t *filter_category, *filter_mask, *filter_group;
    size_t filter_capacity;

    /* Static objects (broadphase_set_static): a flag by id, NULL until one is first set. */
    uint8_t *is_static;
    size_t static_capacity, static_count;
} store;

/* ---- the exact test (store_exact.c) ---- */

/* The sphere columns as the SIMD kernels see them. */
struct simd_spheres;
void store_sphere_columns(const store *s, struct simd_spheres *out);

/* The exact test after the box test: of the candidate ids (whose bounding boxes overlap object
 * `id`'s), keeps in `out` (may alias) those that the collision filters let pair with it and
 * whose shapes really overlap it; returns how many. All pass at once when the world holds no
 * spheres and has no filters. `scratch` has room for `count` ids. */
size_t store_exact_filter(const store *s, int dims, uint32_t id, const uint32_t *candidates,
                          size_t count, uint32_t *out, uint32_t *scratch);

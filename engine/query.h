/* The spatial queries' shared machinery (broadphase_query_*, broadphase_raycast*,
 * broadphase_nearest*): what a query asks, how its results are kept, and the view of a
 * hierarchy through which one walker serves every structure (the kd-tree, the octree, the
 * static and resting fields, and the field of objects changed since the last step).
 *
 * A structure shows itself as nodes, each with bounds that contain every object under it, its
 * own objects as SIMD box columns (a range of positions), its subtree's ids as one contiguous
 * range, and up to 8 children. The walker tests a node's bounds against the query (outside,
 * partial or inside), takes an inside node's whole subtree without testing its objects (box,
 * ball and plane queries), tests the own objects of the others with the kernels and the exact
 * tests, and descends; rays and nearest-neighbour queries visit the nearer child first and skip
 * nodes beyond the best result so far. */
#pragma once

#include "broadphase.h"
#include "query_view.h"
#include "overlap.h"
#include "parallel.h"
#include "field.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broadphase_world broadphase_world;

/* A batch's working memory (query_batch.c: its Morton keys and order, the chunks' notes, the
 * workers' records with their result buffers and shared objects), kept in the world for the next
 * batch, so that a batch a frame allocates nothing once the sizes have settled: a crowd's batch
 * of 1e5 nearest searches, which allocated and freed 2.4 MB a call, met some 560 fresh pages a
 * call, every one zeroed by the kernel. One batch at a time holds it (batch_busy, with atomics);
 * a batch that finds it held, running beside another, makes its own for the call. */
enum { QUERY_BATCH_SLOTS = 12 };
typedef struct query_batch_memory {
    void *at[QUERY_BATCH_SLOTS];
    size_t bytes[QUERY_BATCH_SLOTS];
    int workers;          /* worker records made in their slot, each holding buffers of its own */
    size_t last_bytes[3]; /* the last rows batch's results of each kind (boxes, balls, rays) */
} query_batch_memory;

/* What the queries keep in the world: the objects changed since the last step, found once after
 * each change (under the lock), as a sorted id list and, when there are many, a field; and the
 * batches' working memory. */
typedef struct query_state {
    threads_mutex lock;
    uint64_t synced; /* accessed with atomics: the world generation caught up with, plus 1 */
    uint32_t *pending;
    size_t pending_count, pending_capacity;
    uint8_t *flag; /* by id: pending, during the field's build */
    size_t flag_capacity;
    field field;
    bool use_field;
    bool structures; /* the last step's structures are walked (false: pending holds all) */
    bool current;    /* nothing changed since that step: every entry of the tree and the
                      * static field stands for its object */
    query_batch_memory batch_memory;
    int batch_busy; /* accessed with atomics: a batch holds batch_memory */
} query_state;

void query_state_init(query_state *s);
/* broadphase_nearest_many_within for a call of the world's own that holds the world (so without
 * the check that no step or mutation runs): broadphase_neighbourhoods, where the grid is no use. */
broadphase_status query_nearest_many_held(const broadphase_world *w, size_t count,
                                          const broadphase_points *points, size_t k,
                                          float max_distance, uint32_t *ids_out, float *dist2_out,
                                          size_t *counts_out);
void query_state_release(broadphase_world *w);

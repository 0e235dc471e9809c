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
#include "overlap.h"
#include "parallel.h"
#include "statics.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broadphase_world broadphase_world;

/* Which entries of a structure still stand for their objects (see query.c). */
typedef enum query_member {
    QUERY_MEMBER_TREE,    /* unchanged since the last step */
    QUERY_MEMBER_REST,    /* at rest (and so unchanged) */
    QUERY_MEMBER_CURRENT, /* built for the queries from current shapes: all */
} query_member;

typedef struct query_node {
    float lo[3], hi[3];     /* contain the boxes of every object under the node */
    simd_boxes own;         /* the node's own objects: positions [own_begin, own_end) */
    const uint32_t *own_id; /* ids by position in `own` */
    uint32_t own_begin, own_end;
    float own_lo[3], own_hi[3]; /* contain the own objects' boxes (the node's bounds will do) */
    /* When below 3: the own objects are sorted by min on this axis and none is longer than
     * `reach` on it, so a box query needs only those whose min is in [qmin - reach, qmax]. */
    int sweep;
    float reach;
    const uint32_t *sub_id; /* the subtree's ids: [sub_begin, sub_end) */
    uint32_t sub_begin, sub_end;
    uint64_t child[8];
    int children;
} query_node;

typedef struct query_view {
    const void *structure;
    uint64_t root;
    void (*node)(const void *structure, uint64_t handle, query_node *out);
    query_member member;
    /* A node's bounds alone (query_node.lo, .hi): what the walker reads of a child it may skip. */
    void (*bounds)(const void *structure, uint64_t handle, float lo[3], float hi[3]);
    /* The region a node divides (broadphase_visit_nodes); NULL for the fields, which have none. */
    void (*cell)(const void *structure, uint64_t handle, float lo[3], float hi[3]);
    /* Optional: starts loading what visiting the node will read (its record, its own objects),
     * called for a child the query reaches, some time before the walker pops it. */
    void (*prefetch)(const void *structure, uint64_t handle);
} query_view;

/* The views of the structures; false when there is nothing to walk. */
bool kdtree_query_view(const broadphase_world *w, query_view *out);
bool octree_query_view(const broadphase_world *w, query_view *out);
bool statics_query_view(const statics_field *f, query_member member, query_view *out);

/* What the queries keep in the world: the objects changed since the last step, found once after
 * each change (under the lock), as a sorted id list and, when there are many, a field. */
typedef struct query_state {
    threads_mutex lock;
    uint64_t synced; /* accessed with atomics: the world generation caught up with, plus 1 */
    uint32_t *pending;
    size_t pending_count, pending_capacity;
    uint8_t *flag; /* by id: pending, during the field's build */
    size_t flag_capacity;
    statics_field field;
    bool use_field;
    bool structures; /* the last step's structures are walked (false: pending holds all) */
    bool current;    /* nothing changed since that step: every entry of the tree and the
                      * static field stands for its object */
} query_state;

void query_state_init(query_state *s);
void query_state_release(broadphase_world *w);

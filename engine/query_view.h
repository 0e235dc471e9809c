/* How a structure shows itself to the queries' one walker (query.c): as nodes, each with bounds
 * that contain every object under it, its own objects as SIMD box columns (a range of
 * positions), its subtree's ids as one contiguous range, and up to 8 children. The kd-tree, the
 * octree and the Morton fields each fill a query_view; the walker never sees their types. */
#pragma once

#include "overlap.h"

#include <stdint.h>

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

/* Other libraries' broadphases ("peers") behind one C interface, for the benchmarks and the
 * oracle test: Bullet's btDbvtBroadphase and bt32BitAxisSweep3, CGAL's box_self_intersection_d,
 * FCL's DynamicAABBTreeCollisionManager and Box2D's b2DynamicTree: their pairs, and the spatial
 * queries of those that offer them. Each is compiled in only when CMake finds its library;
 * peer_available says which ones were. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum peer_engine {
    PEER_BULLET_DBVT, /* "bullet-dbvt": btDbvtBroadphase */
    PEER_BULLET_SAP,  /* "bullet-sap": bt32BitAxisSweep3 */
    PEER_CGAL,        /* "cgal": box_self_intersection_d, closed boxes */
    PEER_FCL,         /* "fcl": DynamicAABBTreeCollisionManager (double) */
    PEER_BOX2D,       /* "box2d": b2DynamicTree, 2D only */
    PEER_ENGINE_COUNT
} peer_engine;

/* Boxes as SoA columns, like broadphase_boxes; the z columns are not read in 2D (3D peers get
 * flat boxes at z = 0 there). */
typedef struct peer_boxes {
    const float *min[3];
    const float *max[3];
} peer_boxes;

/* Milliseconds spent in the last frame: pushing positions and updating the structure, finding
 * candidate pairs, and filtering / writing the pairs (0 where the library reports pairs through a
 * callback and the filter runs inside the search). */
typedef struct peer_times {
    double update_ms, search_ms, output_ms;
} peer_times;

typedef struct peer peer;

const char *peer_engine_name(peer_engine engine);
/* Whether the library was found at configure time and its adapter compiled in. */
bool peer_available(peer_engine engine);
/* Whether the engine handles this many dimensions (Box2D is 2D only; the rest do 2D scenes as
 * flat 3D boxes, CGAL in 2D). */
bool peer_supports(peer_engine engine, int dimensions);

/* The bounds a world-bounded peer (the sweep and prune) quantises against: the boxes together
 * with [0, extent] on each used axis (where a scene's objects move), padded by 1 and 1%; z is
 * [-1, 1] in 2D. Boxes that later leave them are clamped, which stays correct (the pairs are
 * filtered exactly) but slows the peer down. */
void peer_world_bounds(const peer_boxes *boxes, size_t count, int dimensions, float extent,
                       float world_min[3], float world_max[3]);

/* Creates the peer's structure with one proxy per box (box i has id i); NULL when the engine is
 * unavailable, does not support the dimensions, or runs out of memory. */
peer *peer_create(peer_engine engine, int dimensions, size_t count, const peer_boxes *boxes,
                  const float world_min[3], const float world_max[3]);

/* One frame: pushes every box's position into the structure, updates it and collects exactly the
 * pairs whose boxes overlap as closed intervals on every axis, in float. Returns the number of
 * pairs, or -1 on failure (out of memory). */
long long peer_frame(peer *p, const peer_boxes *boxes);

peer_times peer_last_times(const peer *p);

/* The last frame's pairs as keys (a << 32 | b) with a < b, sorted ascending; sorted here, outside
 * the timed frame, since the libraries report pairs in no particular order. */
const uint64_t *peer_sorted_pairs(peer *p, size_t *count_out);

void peer_destroy(peer *p); /* NULL is a no-op */

/* ---- spatial queries ---------------------------------------------------------------------
 *
 * The library's own query on the structure as of the last peer_frame, one query at a time on
 * one thread (the libraries' queries are read-only, but nothing here is shared between
 * threads), with the exact test of broadphase.h's contract in the callback, as a user of the
 * library writes it: the structure reports candidates (enlarged or quantised boxes), and the
 * adapter keeps the boxes that overlap the closed query box in float, or computes the segment's
 * entry t into the box by the slab test in double (engine/query_math.h's formula) and keeps
 * 0 <= t <= max_t. Results come in broadphase.h's order (ids ascending; hits by (t, id), t
 * rounded to float), sorted inside the call, so that both sides do the same work and give the
 * same answer. In 2D the z inputs are ignored. max_t must be finite and >= 0, dir not zero. */

typedef enum peer_query {
    PEER_QUERY_BOX,     /* Bullet aabbTest, FCL collide with a box object, Box2D Query */
    PEER_QUERY_RAY,     /* all hits: Bullet rayTest, Box2D RayCast */
    PEER_QUERY_CLOSEST, /* the first hit of the same ray casts */
    PEER_QUERY_KINDS
} peer_query;

/* Same layout as broadphase_ray_hit. */
typedef struct peer_ray_hit {
    uint32_t id;
    float t;
} peer_ray_hit;

/* Whether the library offers this query on its broadphase structure (CGAL has no structure to
 * query; FCL's manager has no ray cast). */
bool peer_has_query(peer_engine engine, peer_query kind);

/* peer_create, with what the library keeps for queries switched on, for peers that queries
 * will be asked of. Only bt32BitAxisSweep3 differs: its ray-cast accelerator (a
 * btDbvtBroadphase kept in step with the sweep, on by default in Bullet) answers its aabbTest
 * and rayTest, which without it loop over every proxy; peer_create leaves it off, since pairs
 * never use it and it doubles the cost of every setAabb. */
peer *peer_create_for_queries(peer_engine engine, int dimensions, size_t count,
                              const peer_boxes *boxes, const float world_min[3],
                              const float world_max[3]);

/* The ids of the boxes overlapping the closed box [min, max], ascending, in *ids_out (owned by
 * the peer, valid until the next call on it). Returns their count, or -1 when the peer has no
 * such query or runs out of memory. */
long long peer_query_box(peer *p, const float min[3], const float max[3], const uint32_t **ids_out);
/* Every box hit by the segment origin + t * dir, 0 <= t <= max_t, sorted by (t, id), in
 * *hits_out (owned by the peer, valid until the next call). Count, or -1 as above. */
long long peer_raycast(peer *p, const float origin[3], const float dir[3], float max_t,
                       const peer_ray_hit **hits_out);
/* The first of those hits (least t, then least id): 1 and *hit_out, 0 when there is none, -1 as
 * above. */
int peer_raycast_closest(peer *p, const float origin[3], const float dir[3], float max_t,
                         peer_ray_hit *hit_out);

#ifdef __cplusplus
}
#endif

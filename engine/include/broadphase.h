/* broadphase: which of N moving boxes and spheres overlap, every frame, on every core.
 * The one public header: lifecycle, objects (SoA in, stable ids out), the step, status codes,
 * statistics. Compiles as C17 and C++17; exposes no SIMD or OpenMP type. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broadphase_version.h" /* BROADPHASE_VERSION_MAJOR, _MINOR, _PATCH, written by CMake */

/* Every public function carries BROADPHASE_API: exported from the shared library, whose other
 * symbols are hidden. On Windows, define BROADPHASE_STATIC when linking the static library (the
 * CMake target broadphase::broadphase_static does); the build defines BROADPHASE_BUILDING. */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(BROADPHASE_STATIC)
#define BROADPHASE_API
#elif defined(BROADPHASE_BUILDING)
#define BROADPHASE_API __declspec(dllexport)
#else
#define BROADPHASE_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define BROADPHASE_API __attribute__((visibility("default")))
#else
#define BROADPHASE_API
#endif

/* The version, as one number for comparisons at compile time: (major << 16) | (minor << 8) |
 * patch. broadphase_version() gives the library's own, to check at run time that a program
 * runs with the library it was built against (the same major version). */
#define BROADPHASE_VERSION                                                                         \
    ((BROADPHASE_VERSION_MAJOR << 16) | (BROADPHASE_VERSION_MINOR << 8) | BROADPHASE_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* BROADPHASE_VERSION of the library this program runs with. */
BROADPHASE_API uint32_t broadphase_version(void);

typedef struct broadphase_world broadphase_world;

/* Status codes, defined once so that the enum and the strings cannot drift. */
#define BROADPHASE_STATUS_LIST(X)                                                                  \
    X(BROADPHASE_OK, "ok")                                                                         \
    X(BROADPHASE_ERROR_INVALID_ARGUMENT,                                                           \
      "invalid argument (NULL array, bad count, id repeated in a batch)")                          \
    X(BROADPHASE_ERROR_INVALID_CONFIG, "invalid configuration")                                    \
    X(BROADPHASE_ERROR_NONFINITE, "NaN or infinity in a coordinate or radius")                     \
    X(BROADPHASE_ERROR_INVERTED_BOX, "inverted box (min > max on some axis)")                      \
    X(BROADPHASE_ERROR_NEGATIVE_RADIUS, "negative radius")                                         \
    X(BROADPHASE_ERROR_UNKNOWN_ID, "unknown id (never issued, or removed)")                        \
    X(BROADPHASE_ERROR_OUT_OF_MEMORY, "out of memory")                                             \
    X(BROADPHASE_ERROR_BUSY, "world is busy (mutation while a step is running)")                   \
    X(BROADPHASE_ERROR_BUFFER_TOO_SMALL, "result buffer too small")                                \
    X(BROADPHASE_ERROR_CAPACITY, "too many objects (config.max_objects, at most 2^32 - 2)")

typedef enum broadphase_status {
#define BROADPHASE_STATUS_ENUM_(name, text) name,
    BROADPHASE_STATUS_LIST(BROADPHASE_STATUS_ENUM_)
#undef BROADPHASE_STATUS_ENUM_
} broadphase_status;

/* A fixed, human-readable sentence for a status; never NULL ("unknown status" if out of range). */
BROADPHASE_API const char *broadphase_status_string(broadphase_status status);

/* The methods, one line each: X(enumerator, name). This is the one list of methods: the enum
 * below, the engine's registry, broadphase_method_name(), the tests, the runner and the
 * benchmarks are all made from it. `name` is the method's name for people and files, and in
 * the engine the name of its table of functions (engine/method.h: `name`_method), defined in
 * the method's own files, engine/`name`.c and engine/`name`_*.c.
 * - kdtree: objects that straddle a split plane stay in its node (the default)
 * - octree: a loose octree, a quadtree when dimensions == 2
 * - brute_force: the oracle: every pair tested, with SIMD, in parallel
 * - sweep: sort and sweep in the columns of a grid on the axes other than x, no tree */
#define BROADPHASE_METHOD_LIST(X)                                                                  \
    X(BROADPHASE_METHOD_KDTREE, kdtree)                                                            \
    X(BROADPHASE_METHOD_OCTREE, octree)                                                            \
    X(BROADPHASE_METHOD_BRUTE_FORCE, brute_force)                                                  \
    X(BROADPHASE_METHOD_SWEEP, sweep)                                                              \
    /* a new method: one line above this one */

typedef enum broadphase_method {
#define BROADPHASE_METHOD_ENUM_(id, name) id,
    BROADPHASE_METHOD_LIST(BROADPHASE_METHOD_ENUM_)
#undef BROADPHASE_METHOD_ENUM_
    /* Not a method of the list but a chooser among them ("auto"): the world starts on the
     * octree, now and then tries the list's other methods that keep a structure (the kd-tree,
     * the sweep) for a few steps, timing each step's update and search, and keeps one that was
     * at least 10% faster than the method it replaces; rounds of trials come back at growing
     * intervals (the first after 64 timed steps: steps that found something changed), and at
     * once when the objects it holds (not statics, not objects at rest) double or halve or the
     * steps grow 2x slower. A trial holds the candidate's structure beside the first (memory)
     * and builds it (allocations, a longer step). The pairs, events and query answers are what
     * any method gives (every method's are exact and sorted); what shows a structure (box
     * candidates, broadphase_visit_nodes, the levels, the stats' node figures) is the running
     * method's. broadphase_stats.method says which method that is. */
    BROADPHASE_METHOD_AUTO = 64
} broadphase_method;

/* How many methods there are: the methods are 0 .. BROADPHASE_METHOD_COUNT - 1, in the list's
 * order. */
#define BROADPHASE_METHOD_ONE_(id, name) +1
enum { BROADPHASE_METHOD_COUNT = 0 BROADPHASE_METHOD_LIST(BROADPHASE_METHOD_ONE_) };
#undef BROADPHASE_METHOD_ONE_

/* A method's name as in the list ("kdtree", "octree", "brute_force", "sweep"), "auto" for
 * BROADPHASE_METHOD_AUTO; NULL for a value that names neither. */
BROADPHASE_API const char *broadphase_method_name(broadphase_method method);

typedef enum broadphase_update_policy {
    BROADPHASE_UPDATE_AUTO,    /* refit while the structure stays good, rebuild when it degrades */
    BROADPHASE_UPDATE_REBUILD, /* rebuild every step */
    BROADPHASE_UPDATE_REFIT,   /* keep the structure; re-home moved objects */
} broadphase_update_policy;

/* Where a world's memory comes from (broadphase_config.allocator). alloc returns `size` bytes
 * aligned to `alignment` (a power of two, at least 64), or NULL when out of memory; free gives
 * back a block that alloc returned, with the size alloc was asked for (ptr is never NULL). Both
 * may be called from several threads at once (a step's workers, queries side by side), and
 * from inside broadphase_destroy. Every allocation a world makes goes through it, the world
 * itself included; what the threading runtime (OpenMP) allocates for itself, its thread pool
 * and stacks, does not. */
typedef struct broadphase_allocator {
    void *(*alloc)(size_t size, size_t alignment, void *user);
    void (*free)(void *ptr, size_t size, void *user);
    void *user;
} broadphase_allocator;

typedef struct broadphase_config {
    int dimensions;                  /* 2 or 3 */
    broadphase_method method;        /* default BROADPHASE_METHOD_KDTREE */
    broadphase_update_policy update; /* default BROADPHASE_UPDATE_AUTO */
    int threads;                     /* worker threads; 0 = all hardware threads; 0..1024 */
    /* kd-tree: leaf capacity; octree: a node splits when its subtree holds more objects than
     * this (and merges back when it holds no more). 0 (the default) picks the method's own
     * measured best: 8 for the kd-tree, 64 for the octree, whose eight-way splits would
     * otherwise leave leaves of one or two objects. 0..4096. */
    int leaf_size;
    /* Depth limit, root = 0. Default 40; 1..64. The octree's keys also cap it at 19 levels
     * in 3D and 29 in 2D (deeper cells would be finer than float coordinates resolve anyway). */
    int max_depth;
    /* AUTO: rebuild when the tree's cost figure (expected box tests per object, computed from
     * node populations) exceeds this factor times its value just after the last rebuild.
     * Default 1.5; range 1.0..1000. */
    float rebuild_threshold;
    size_t initial_capacity; /* objects to reserve at creation; default 0 */
    /* Octree: each cell is enlarged by this factor about its centre for holding objects (a
     * loose octree), so that an object sits at the level its size suits instead of above every
     * cell border it crosses. 1 gives the strict octree. Default 1.5 (NOTES rows 30
     * and 77); range 1..4. */
    float looseness;
    /* Keep the previous step's pairs and report, after each step, the pairs that began and
     * ended (broadphase_pair_events). Costs a second pair buffer and a linear merge per step.
     * Default false. */
    bool pair_events;
    /* Only-moved updates. When at most this share of the non-static objects changed (moved,
     * were added, or had their filter set) since the last step, the objects that did not change
     * leave the tree for a resting structure: the objects still in the tree query it, and the
     * pairs between objects that stayed at rest are carried over from the last step, so a step
     * costs what the changed objects cost plus a pass over the pair list. A resting object that
     * changes goes back into the tree. 0 turns this off. Default 0.125; range 0..1. Brute force
     * ignores it. */
    float rest_share;
    /* The world's allocator; all NULL (the default) means the C library's. alloc and free are
     * set together or not at all (else BROADPHASE_ERROR_INVALID_CONFIG). */
    broadphase_allocator allocator;
    /* The most objects the world may hold at once; an add that would pass it returns
     * BROADPHASE_ERROR_CAPACITY and changes nothing. Ids are uint32_t and handed out lowest-free
     * first, so every id stays below this limit; UINT32_MAX is never an id (BROADPHASE_NO_HIT).
     * 0 (the default) means the whole id space, BROADPHASE_MAX_OBJECTS; more is an invalid
     * config. */
    size_t max_objects;
    /* false (the default): while other work takes cores from the workers (other processes, the
     * host's own threads), steps run on fewer of them, as few as one, and try more again when
     * a core is free; a worker taken off its core in the middle of a step would otherwise hold
     * the whole step up until it runs again. The pairs are the same for any number of threads.
     * true: every step runs on all `threads`. broadphase_stats.step_threads says how many the
     * last step used. */
    bool fixed_threads;
} broadphase_config;

#define BROADPHASE_MAX_OBJECTS ((size_t)UINT32_MAX - 1)

/* Defaults for a 2D or 3D world; dimensions other than 2 or 3 are kept so create() rejects them. */
BROADPHASE_API broadphase_config broadphase_config_default(int dimensions);
BROADPHASE_API broadphase_status broadphase_create(const broadphase_config *config,
                                                   broadphase_world **world_out);
BROADPHASE_API void broadphase_destroy(broadphase_world *world); /* NULL is a no-op */

/* Objects: structure-of-arrays in, stable ids out. Arrays are caller-owned and only read during
 * the call. In 2D the z arrays are ignored and may be NULL. */
typedef struct broadphase_boxes {
    const float *min_x, *min_y, *min_z;
    const float *max_x, *max_y, *max_z;
} broadphase_boxes;

typedef struct broadphase_spheres {
    const float *x, *y, *z, *radius;
} broadphase_spheres;

/* Every call validates the whole batch first; on error nothing changes and
 * broadphase_last_error_index() names the first bad element. A count of 0 does nothing. The
 * arrays are read only after the count is checked against what the world could hold: an add of
 * more objects than config.max_objects leaves room for is BROADPHASE_ERROR_CAPACITY, and a move,
 * remove, set_filters or set_static batch longer than the live objects (its ids must be live and
 * distinct) is BROADPHASE_ERROR_INVALID_ARGUMENT, both naming no element. Ids are handed out
 * lowest-free first, so objects added in one call to an empty world get ids 0..count-1 in order; a
 * removed id may be reused. Moving an object with the other kind's call changes its shape. An
 * object pushed with the shape it has does not count as changed; a move whose first object is
 * unchanged compares chunk by chunk before it checks, and its unchanged chunks are only read. */
BROADPHASE_API broadphase_status broadphase_add_boxes(broadphase_world *w, size_t count,
                                                      const broadphase_boxes *boxes,
                                                      uint32_t *ids_out);
BROADPHASE_API broadphase_status broadphase_add_spheres(broadphase_world *w, size_t count,
                                                        const broadphase_spheres *spheres,
                                                        uint32_t *ids_out);
BROADPHASE_API broadphase_status broadphase_move_boxes(broadphase_world *w, size_t count,
                                                       const uint32_t *ids,
                                                       const broadphase_boxes *boxes);
BROADPHASE_API broadphase_status broadphase_move_spheres(broadphase_world *w, size_t count,
                                                         const uint32_t *ids,
                                                         const broadphase_spheres *spheres);
BROADPHASE_API broadphase_status broadphase_remove(broadphase_world *w, size_t count,
                                                   const uint32_t *ids);
BROADPHASE_API size_t broadphase_object_count(const broadphase_world *w);

/* The index, within the batch of the last failed call on this world, of the first bad element;
 * SIZE_MAX when the last call succeeded or the error does not concern one element. */
BROADPHASE_API size_t broadphase_last_error_index(const broadphase_world *w);

typedef struct broadphase_pair {
    uint32_t a, b; /* a < b */
} broadphase_pair;

typedef struct broadphase_pairs {
    const broadphase_pair *data;
    size_t count;
} broadphase_pairs;

/* Reports every unordered pair of live objects that overlap, once, as (a, b) with a < b, sorted
 * by (a, b): identical for every thread count and every method. Overlap is closed (touching
 * counts). The pair array is owned by the world and valid until the next mutating call or step.
 * pairs_out may be NULL (then the pairs are still available from broadphase_last_pairs). A step
 * that finds nothing changed since the last successful one (no add, remove, new shape, filter or
 * static flag) keeps its pairs, reports no event and costs a check (stats.unchanged_steps). */
BROADPHASE_API broadphase_status broadphase_step(broadphase_world *w, broadphase_pairs *pairs_out);
/* The pairs of the last step: empty before the first step and after a failed one. */
BROADPHASE_API broadphase_pairs broadphase_last_pairs(const broadphase_world *w);

/* The last step's pairs as neighbour lists, in compressed rows: object i's partners are
 * ids[offsets[i] .. offsets[i + 1]), ascending, for every id i below `count` (one past the highest
 * id handed out; removed ids and objects in no pair have empty rows). A pair (a, b) is in both
 * rows: b in a's, a in b's. Made from the pairs at the first call after a step, in parallel and
 * identical for every thread count; later calls return the same rows. The world owns the arrays,
 * valid until the next mutating call or step, like the pairs; they are grown, never shrunk, so a
 * steady frame allocates nothing. Empty rows before the first step and after a failed one. Not
 * to be called while another thread calls into the world (BROADPHASE_ERROR_BUSY when a step or
 * mutation is seen running). */
typedef struct broadphase_neighbour_rows {
    const size_t *offsets; /* count + 1 entries */
    const uint32_t *ids;   /* offsets[count] entries */
    size_t count;          /* rows */
} broadphase_neighbour_rows;
BROADPHASE_API broadphase_status broadphase_neighbours(broadphase_world *w,
                                                       broadphase_neighbour_rows *rows_out);

/* Every object's neighbourhood, as a crowd, a particle system or a flock asks for it: for each
 * live object i, the at most k other objects nearest to its centre whose distance from that
 * centre is at most max_distance, nearest first. The centre is a sphere's centre, or a box's
 * midpoint ((min + max) / 2 computed in double, rounded to float: a point object's own
 * position). Distances, ties and the boundary are broadphase_nearest_within's (the distance from
 * the centre to the other object's shape, 0 inside; squared, in double, reported and ordered
 * rounded to float, ties to the lower id; one exactly max_distance away is taken): object i's
 * row is broadphase_nearest_within from its centre for k + 1 with i's own id dropped and at most
 * k kept. Row i is ids[i * k .. i * k + counts[i]), with the squared distances alongside in
 * dist2, for every id i below `count` (one past the highest id handed out; removed ids have
 * empty rows). Static objects and objects at rest count like any other; collision filters do
 * not apply. The objects as they stand now: no step or update is needed first, and the call
 * changes neither (it moves nothing, and the last step's pairs, events and structures stay).
 * Identical for every thread count. The world owns the arrays (count * k entries each, in
 * bytes_in_use), valid until the next call into the world that mutates it, steps, or asks for
 * neighbourhoods again; they are grown, never shrunk, so a steady frame allocates nothing. Not
 * to be called while another thread calls into the world (BROADPHASE_ERROR_BUSY when a step or
 * mutation is seen running).
 *
 * How: the objects are sorted on a grid of their centres made for the call (cells half of
 * max_distance plus the widest object across, or smaller where the objects are dense next to
 * max_distance), and each centre's nearby cells are read and ranked exactly with SIMD, a search
 * reaching farther only as far as its (k + 1)-th nearest so far may need: time in proportion to
 * the objects and their k nearest, whatever the world's method, not to all that a dense crowd
 * holds within max_distance. Where the grid would still hold more than a few hundred candidates a
 * centre (a few very wide objects), the call asks the method's structures instead, as
 * broadphase_nearest_many_within would from every centre: the same rows.
 *
 * k = 0 gives empty rows. max_distance NaN: BROADPHASE_ERROR_NONFINITE; below 0 (-0 counts as
 * 0): NEGATIVE_RADIUS; INFINITY is allowed (then the k nearest, whatever the distance); k so
 * large that count * k entries do not fit in memory: INVALID_ARGUMENT. On any failure
 * (out of memory included) the arrays are not valid and the world is as it was. */
typedef struct broadphase_neighbourhood_rows {
    const uint32_t *ids;    /* count * k entries */
    const float *dist2;     /* count * k entries */
    const uint32_t *counts; /* count entries */
    size_t count;           /* rows */
    size_t k;               /* slots a row */
} broadphase_neighbourhood_rows;
BROADPHASE_API broadphase_status broadphase_neighbourhoods(broadphase_world *w, size_t k,
                                                           float max_distance,
                                                           broadphase_neighbourhood_rows *rows_out);

/* Brings the structures up to date with every change since the last step or update (the work of
 * a step's update phase: the fields, then the method's rebuild or refit), without searching for
 * pairs: for frames that only query. Queries after it cost what they cost after a step (without
 * it, the first query after a change gathers every changed object into a structure of its own).
 * The last step's pairs, its events and broadphase_last_pairs are unchanged; the next step
 * searches the structures as they stand when nothing changed since (its update_ms is then 0),
 * and its events and objects at rest count every change since the last step, the update's
 * included. Nothing to do when nothing changed; stats.updates counts the calls that had work.
 * On failure (out of memory) the world is as it was: the next step builds the trees anew. */
BROADPHASE_API broadphase_status broadphase_update(broadphase_world *w);

/* Collision filtering. Every object has a category (the bits it belongs to), a mask (the
 * categories it pairs with) and a group: a pair is reported only when each object's category
 * shares a bit with the other's mask, and never when both are in the same non-zero group (the
 * parts of one ragdoll, say). A new object gets category 1, mask 0xFFFFFFFF and group 0, so that
 * everything pairs. The rule is applied inside the pair search, before a pair is output; a world
 * where no filter was ever set pays nothing for it. */
typedef struct broadphase_filter {
    uint32_t category, mask, group;
} broadphase_filter;
/* Sets filters[i] on object ids[i]. Bad input (NULL arrays, an unknown id: UNKNOWN_ID, an id
 * twice in the batch: INVALID_ARGUMENT) changes nothing and names the first bad element. */
BROADPHASE_API broadphase_status broadphase_set_filters(broadphase_world *w, size_t count,
                                                        const uint32_t *ids,
                                                        const broadphase_filter *filters);
/* The filter of a live object (UNKNOWN_ID otherwise). */
BROADPHASE_API broadphase_status broadphase_get_filter(const broadphase_world *w, uint32_t id,
                                                       broadphase_filter *filter_out);

/* Static objects: terrain, buildings, anything that stays put. A static object pairs with the
 * others as usual, but never with another static one (such pairs are neither tested nor
 * reported). The statics live in a structure of their own, built at the first step after they
 * change (one added, moved, removed, or made static or not) and otherwise reused, so a step
 * costs what the other objects and their pairs cost, however many statics there are. New
 * objects are not static; setting the flag right after adding, before the next step, is the
 * same as adding them static. Changing a flag makes the next step also build the tree of the
 * other objects anew. Bad input (NULL ids, an unknown id: UNKNOWN_ID, an id twice in the batch:
 * INVALID_ARGUMENT) changes nothing and names the first bad element. */
BROADPHASE_API broadphase_status broadphase_set_static(broadphase_world *w, size_t count,
                                                       const uint32_t *ids, bool is_static);
/* Whether a live object is static (UNKNOWN_ID otherwise). */
BROADPHASE_API broadphase_status broadphase_get_static(const broadphase_world *w, uint32_t id,
                                                       bool *static_out);

/* Pair events, for worlds created with config.pair_events. `begun`: the pairs of the last
 * successful step that were not pairs of the successful step before it; `ended`: the pairs of
 * that earlier step that are not pairs now, among them every pair of an object removed since.
 * An id removed and handed out again in between counts as a new object: its old pairs end and
 * its new ones begin, even between the same two ids. Both lists are sorted by (a, b); before
 * the first step both are empty, and at the first step every pair has begun. A failed step
 * changes nothing here: the next successful one is compared with the last successful one. The
 * arrays are owned by the world and valid until the next mutating call or step.
 * BROADPHASE_ERROR_INVALID_ARGUMENT for NULL; BROADPHASE_ERROR_INVALID_CONFIG when the world
 * was created without pair_events. */
typedef struct broadphase_events {
    broadphase_pairs begun, ended;
} broadphase_events;
BROADPHASE_API broadphase_status broadphase_pair_events(const broadphase_world *w,
                                                        broadphase_events *events_out);

/* Inspection. Times are of the last step, in milliseconds. */
typedef struct broadphase_stats {
    size_t objects;                   /* live objects */
    size_t nodes;                     /* tree nodes (0 for brute force) */
    size_t leaves;                    /* tree leaves */
    size_t depth;                     /* deepest level (root = 0) */
    size_t objects_in_internal_nodes; /* objects held above the leaves (straddlers) */
    size_t pairs;                     /* pairs reported by the last step */
    size_t bytes_in_use;              /* bytes the world holds from the heap right now */
    uint64_t allocations;             /* heap allocations the world has made since creation */
    uint64_t steps, rebuilds, refits; /* how the structure was brought up to date */
    float quality;                    /* tree cost figure after the last update (see config) */
    double update_ms;                 /* rebuild or refit */
    double search_ms;                 /* pair search */
    double output_ms;                 /* concatenation and sort of the pairs */
    double step_ms;                   /* the whole step */
    size_t spare_nodes;               /* octree: emptied nodes kept for reuse (not in `nodes`) */
    uint64_t root_growths;            /* octree: times the root grew to take in an object */
    size_t static_objects;            /* live static objects (not in the tree) */
    uint64_t static_builds;           /* times the statics' structure was built */
    size_t resting_objects;           /* objects at rest (see config.rest_share; not in the tree) */
    uint64_t rest_builds;             /* times the resting objects' structure was built */
    uint64_t flat_searches;           /* octree: steps whose pair search walked the leaf list */
    uint64_t flat_builds;             /* octree: times that list (leaves and their neighbours,
                                         remade when the set of leaves changes) was made */
    size_t step_threads;              /* threads the last step ran on (config.fixed_threads) */
    uint64_t preempted_steps;         /* steps during which the scheduler took one of their
                                         threads off its core (other work wanted it) */
    uint64_t unchanged_steps;         /* steps that found nothing changed since the last one
                                         (no add, remove, new shape, filter or static flag) and
                                         kept its pairs, at the cost of a check */
    uint64_t updates;                 /* broadphase_update calls that brought the structures up
                                         to date (rebuilds and refits count theirs too) */
    uint64_t relayouts;               /* octree: refits that laid every object out anew */
    uint64_t window_relayouts;        /* octree: refits that laid one of the root's subtrees
                                         out anew, in place (spreading the relayouts) */
    broadphase_method method;         /* the method of the last update: config.method, or the
                                         one BROADPHASE_METHOD_AUTO runs now (AUTO itself
                                         before its first update) */
    uint64_t method_trials;           /* AUTO: updates run on a method on trial */
    uint64_t method_switches;         /* AUTO: times a trial won and its method was kept */
} broadphase_stats;

BROADPHASE_API broadphase_status broadphase_get_stats(const broadphase_world *w,
                                                      broadphase_stats *stats_out);

/* One level of a tree (root = level 0): its nodes, leaves and the objects held there. */
typedef struct broadphase_level {
    size_t nodes, leaves, objects;
} broadphase_level;

/* The tree level by level, as of the last step: fills levels[0 .. min(capacity, n)) and sets
 * *levels_out = n, the number of levels (stats.depth + 1; 0 for brute force or before the first
 * step). The objects over all levels sum to the objects the last step saw. levels may be NULL
 * when capacity is 0 (to ask for n). BROADPHASE_ERROR_BUFFER_TOO_SMALL when capacity < n (the
 * first `capacity` levels are still written). */
BROADPHASE_API broadphase_status broadphase_get_levels(const broadphase_world *w,
                                                       broadphase_level *levels, size_t capacity,
                                                       size_t *levels_out);

/* The structures whose nodes broadphase_visit_nodes shows. */
typedef enum broadphase_structure {
    BROADPHASE_STRUCTURE_TREE,   /* the method's tree: the kd-tree, or the octree / quadtree */
    BROADPHASE_STRUCTURE_STATIC, /* the static objects' field (see broadphase_set_static) */
    BROADPHASE_STRUCTURE_REST    /* the field of objects at rest (see config.rest_share) */
} broadphase_structure;

#define BROADPHASE_NO_NODE UINT32_MAX

/* One node, as broadphase_visit_nodes shows it. In 2D the z coordinates are 0. */
typedef struct broadphase_node {
    broadphase_structure structure;
    uint32_t index;    /* in depth-first order within its structure, the root 0 */
    uint32_t parent;   /* the parent's index; BROADPHASE_NO_NODE for the root */
    uint32_t depth;    /* root = 0 */
    uint32_t children; /* nodes directly below (0 for a leaf) */
    /* The region the node divides: the kd-tree's cell (unbounded on the world's outer sides),
     * the octree's cell without its looseness (its objects may reach out of it by the looseness
     * of config.looseness). The fields have no cells: has_cell is false, and the cell is
     * the bounds. */
    bool has_cell;
    float cell_min[3], cell_max[3];
    /* Contain the boxes of every object under the node; an empty subtree has min = +infinity
     * and max = -infinity. */
    float bounds_min[3], bounds_max[3];
    size_t object_count;  /* objects the node holds itself */
    size_t subtree_count; /* objects the node and its descendants hold */
    const uint32_t *ids;  /* the node's own objects' ids, object_count of them, in the node's
                           * order; valid during the call only */
} broadphase_node;

/* Called once per node; return false to stop the visit. */
typedef bool (*broadphase_node_visitor)(const broadphase_node *node, void *user);

/* The articles' ForEach over nodes (count_nodes and count_elements follow from it): calls
 * `visit` for every node of the tree, then of the static field, then of the rest field, each
 * structure depth first, a node before its children. The structures are shown as the last step
 * left them: objects changed since are where that step saw them, except that an object at rest
 * that changed has left the rest field at once (and joins the tree at the next step); each
 * object is shown once. Brute force has no structure,
 * and nothing is visited before the first step or after a failed one. Do not step or mutate the
 * world from `visit`.
 * BROADPHASE_ERROR_INVALID_ARGUMENT for a NULL world or visitor; BROADPHASE_ERROR_BUSY during a
 * step. */
BROADPHASE_API broadphase_status broadphase_visit_nodes(const broadphase_world *w,
                                                        broadphase_node_visitor visit, void *user);

/* ---- spatial queries ---------------------------------------------------------------------
 *
 * Read-only questions about space, answered from the method's structure (the trees, the static
 * field, the objects at rest; brute force tests every object). Any number of threads may query
 * one world at the same time, and call the other read-only functions (broadphase_get_stats,
 * get_levels, get_filter, get_static, last_pairs, pair_events, object_count, last_error_index,
 * visit_nodes), but never while a step or a mutating call runs on it (that is the caller's
 * error; a query that sees a step running returns BROADPHASE_ERROR_BUSY, but the check
 * cannot catch every overlap). Queries see the objects' current shapes: objects changed since
 * the last step (or every object, before the first step and after a failed one) are gathered,
 * once, by the first query after the change, into a small structure of their own; the cost of
 * that gathering is paid once, under a lock, and the structures of the last step are not
 * touched. Collision filters do not apply to queries; static objects and objects at rest are
 * found like any other.
 *
 * Points, boxes, centres, origins and directions are float[3] (z ignored in 2D). Every input is
 * checked: NULL where an array is needed (INVALID_ARGUMENT), NaN or infinity (NONFINITE),
 * min > max (INVERTED_BOX), a negative radius (NEGATIVE_RADIUS). Results go to caller buffers;
 * *count_out always receives the number of results, and when it exceeds `capacity` the call
 * returns BROADPHASE_ERROR_BUFFER_TOO_SMALL and writes nothing to the buffer (ids_out may be NULL
 * when capacity is 0, to ask for the count). Tests are closed: touching counts.
 *
 * The boundary, exactly (the pairs of a step follow the same rules). Every test is computed in
 * double precision from the float inputs, with no fused multiply-add: a difference of two floats
 * is exact there, each square and each sum (over the axes in order x, y, z) is rounded to
 * nearest, so a squared distance is within a relative 2^-51 of the true one. An object is taken
 * when that figure is at most the square of the radius, of the greatest distance, or of the sum
 * of two spheres' radii (computed in double; a float's square is exact there), so one exactly on
 * the boundary is in; boxes against boxes compare the floats themselves. The same rule holds
 * for every method and thread count, and for the step's pairs, so the routes to a neighbourhood
 * (two balls of radius R/2 meeting, a ball of radius R around a point, the nearest within R of a
 * point) take the same objects. A client that decides membership with its own float arithmetic
 * (dx*dx + dy*dy < r*r in float, whose rounding reaches a relative 2^-22 or so) should ask with the
 * radius grown by a relative 1e-6, rounded up (nextafterf(r * 1.000001f, INFINITY)), then apply
 * its own test to what comes back: the grown set holds every object its test can take. */

/* Objects whose shape overlaps the closed box; ids ascending. */
BROADPHASE_API broadphase_status broadphase_query_box(const broadphase_world *w, const float min[3],
                                                      const float max[3], uint32_t *ids_out,
                                                      size_t capacity, size_t *count_out);
/* The box query's candidates: every object that the structure cannot rule out without testing
 * the object itself, namely the objects held by every node whose bounds (cell or measured
 * bounds) overlap the box, and the changed objects whose bounding boxes do. A superset of
 * broadphase_query_box's result; ids ascending. Brute force has no structure: every object. */
BROADPHASE_API broadphase_status broadphase_query_box_candidates(const broadphase_world *w,
                                                                 const float min[3],
                                                                 const float max[3],
                                                                 uint32_t *ids_out, size_t capacity,
                                                                 size_t *count_out);
/* Objects whose shape overlaps the closed ball; ids ascending. */
BROADPHASE_API broadphase_status broadphase_query_sphere(const broadphase_world *w,
                                                         const float center[3], float radius,
                                                         uint32_t *ids_out, size_t capacity,
                                                         size_t *count_out);
/* Objects whose shape contains the point; ids ascending. */
BROADPHASE_API broadphase_status broadphase_query_point(const broadphase_world *w,
                                                        const float point[3], uint32_t *ids_out,
                                                        size_t capacity, size_t *count_out);

/* Objects hit by the segment origin + t*dir, 0 <= t <= max_t (dir need not be unit length, must
 * not be zero: INVALID_ARGUMENT; max_t >= 0, and may be INFINITY, else INVALID_ARGUMENT); t is
 * where the segment enters the shape (0 when origin is inside); sorted by (t, id).
 * broadphase_raycast_closest returns the first of them, if any. */
typedef struct broadphase_ray_hit {
    uint32_t id;
    float t;
} broadphase_ray_hit;
BROADPHASE_API broadphase_status broadphase_raycast(const broadphase_world *w,
                                                    const float origin[3], const float dir[3],
                                                    float max_t, broadphase_ray_hit *hits_out,
                                                    size_t capacity, size_t *count_out);
BROADPHASE_API broadphase_status broadphase_raycast_closest(const broadphase_world *w,
                                                            const float origin[3],
                                                            const float dir[3], float max_t,
                                                            broadphase_ray_hit *hit_out,
                                                            bool *found_out);

/* Frustum / convex culling: planes (a, b, c, d), inside where a*x + b*y + c*z + d >= 0 (c unused
 * in 2D). An object is reported when, for every plane, some point of its shape is inside that
 * plane (the usual culling test: conservative near the corners). A plane whose normal is zero
 * is degenerate (INVALID_ARGUMENT); no planes at all report every object. ids ascending. */
BROADPHASE_API broadphase_status broadphase_query_planes(const broadphase_world *w,
                                                         const float (*planes)[4],
                                                         size_t plane_count, uint32_t *ids_out,
                                                         size_t capacity, size_t *count_out);

/* The k objects nearest to a point (distance from the point to the shape, 0 inside), sorted by
 * (squared distance, id); fewer when the world holds fewer. ids_out has room for k ids and
 * dist2_out (may be NULL) for k distances; squared distances are computed in double and
 * reported, and ordered, rounded to float. */
BROADPHASE_API broadphase_status broadphase_nearest(const broadphase_world *w, const float point[3],
                                                    size_t k, uint32_t *ids_out, float *dist2_out,
                                                    size_t *count_out);
/* broadphase_nearest among the objects within max_distance of the point: those whose distance
 * (as above, computed in double) is at most max_distance (closed: one exactly that far is taken),
 * so fewer than k, or none, when fewer are that near. max_distance may be INFINITY (then as
 * broadphase_nearest); NaN: BROADPHASE_ERROR_NONFINITE; below 0: NEGATIVE_RADIUS. Ties in
 * distance go to the lower id, as always. For an object's own neighbours (a point object, asked
 * from where it is), ask for k + 1, drop its own id where it comes (at distance 0, after any
 * lower id also at 0) and keep at most k. */
BROADPHASE_API broadphase_status broadphase_nearest_within(const broadphase_world *w,
                                                           const float point[3], size_t k,
                                                           float max_distance, uint32_t *ids_out,
                                                           float *dist2_out, size_t *count_out);

/* ---- batched queries: many queries in one call, spread over the world's worker threads ----
 *
 * Results come in compressed rows: query i's results are entries offsets[i] .. offsets[i + 1] of
 * one array, each row in the order of the single query; identical for every thread count. The
 * whole batch is checked first: on bad input nothing is written and bad_index names the first
 * bad query. offsets (count + 1 entries) is always filled on success and on
 * BUFFER_TOO_SMALL (total > capacity), when the result array is not written, so that the caller
 * can size it and call again. A batch's working memory (its order, its workers' buffers) is
 * kept by the world for the next batch, so that a batch a frame allocates nothing once its sizes
 * have settled; a batch that runs while another runs on the same world allocates its own for
 * the call (bytes_in_use counts what is kept; broadphase_destroy gives it back). A batch
 * holds at most BROADPHASE_MAX_BATCH queries, and a nearest batch's count * k entries must fit
 * in memory (count * k * 4 bytes): past that, BROADPHASE_ERROR_INVALID_ARGUMENT before any
 * input is read. */
#define BROADPHASE_NO_HIT UINT32_MAX
#define BROADPHASE_MAX_BATCH ((size_t)UINT32_MAX)

typedef struct broadphase_id_rows {
    size_t *offsets;  /* count + 1 entries */
    uint32_t *ids;    /* `capacity` entries; may be NULL when capacity is 0 */
    size_t capacity;  /* in */
    size_t total;     /* out: offsets[count] */
    size_t bad_index; /* out: the first bad query, SIZE_MAX when none */
} broadphase_id_rows;

typedef struct broadphase_hit_rows {
    size_t *offsets;
    broadphase_ray_hit *hits;
    size_t capacity, total, bad_index;
} broadphase_hit_rows;

/* Rays as structure-of-arrays columns; max_t[i] as in broadphase_raycast. */
typedef struct broadphase_rays {
    const float *origin_x, *origin_y, *origin_z;
    const float *dir_x, *dir_y, *dir_z;
    const float *max_t;
} broadphase_rays;

typedef struct broadphase_points {
    const float *x, *y, *z;
} broadphase_points;

/* broadphase_query_box for every box; the boxes as for broadphase_add_boxes. */
BROADPHASE_API broadphase_status broadphase_query_boxes(const broadphase_world *w, size_t count,
                                                        const broadphase_boxes *boxes,
                                                        broadphase_id_rows *rows);
/* broadphase_query_sphere for every sphere. */
BROADPHASE_API broadphase_status broadphase_query_spheres(const broadphase_world *w, size_t count,
                                                          const broadphase_spheres *spheres,
                                                          broadphase_id_rows *rows);
/* broadphase_raycast for every ray. */
BROADPHASE_API broadphase_status broadphase_raycasts(const broadphase_world *w, size_t count,
                                                     const broadphase_rays *rays,
                                                     broadphase_hit_rows *rows);
/* broadphase_raycast_closest for every ray: hits_out[i] is ray i's first hit, or
 * {BROADPHASE_NO_HIT, INFINITY}. bad_index_out (may be NULL) as in the rows. */
BROADPHASE_API broadphase_status broadphase_raycasts_closest(const broadphase_world *w,
                                                             size_t count,
                                                             const broadphase_rays *rays,
                                                             broadphase_ray_hit *hits_out,
                                                             size_t *bad_index_out);
/* broadphase_nearest for every point: row i is ids_out[i * k .. i * k + counts_out[i]) (and the
 * same in dist2_out, which may be NULL); counts_out has `count` entries. */
BROADPHASE_API broadphase_status broadphase_nearest_many(const broadphase_world *w, size_t count,
                                                         const broadphase_points *points, size_t k,
                                                         uint32_t *ids_out, float *dist2_out,
                                                         size_t *counts_out, size_t *bad_index_out);
/* broadphase_nearest_within for every point, with one max_distance for all (a bad max_distance is
 * the call's error: bad_index SIZE_MAX). A large batch of either call (256 points or more, and an
 * eighth of the objects' count or more) is searched on a grid of the objects' centres made for
 * the call, as broadphase_neighbourhoods searches: the same rows, in time in proportion to the
 * objects and each point's k nearest, however many a dense crowd holds within the distance;
 * where the grid is no use (a few very wide objects), through the method's structures. */
BROADPHASE_API broadphase_status broadphase_nearest_many_within(
    const broadphase_world *w, size_t count, const broadphase_points *points, size_t k,
    float max_distance, uint32_t *ids_out, float *dist2_out, size_t *counts_out,
    size_t *bad_index_out);

/* The SIMD path the kernels run on this machine: "avx2", "baseline" or "scalar". */
BROADPHASE_API const char *broadphase_simd_level(void);

#ifdef __cplusplus
}
#endif

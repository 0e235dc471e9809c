/* The C side of the benchmark suite: the table of cases (scene x size x engine x update policy x
 * threads) and the calls that set a case up, step one frame, read its counters and tear it
 * down. Engines are ours (every method of the one list, BROADPHASE_METHOD_LIST) and the peer
 * libraries of perf/peers that CMake found. bench_shim.cc registers one Google Benchmark per case
 * and declares these functions. */
#include "bench.h"

#include "broadphase.h"
#include "crowd.h"
#include "method.h"
#include "peers.h"
#include "scenes.h"
#include "series.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Brute force is quadratic: beyond this size one frame takes longer than a benchmark run. */
#define BENCH_BRUTE_FORCE_MAX 20000
#define BENCH_SEED 1

/* What a case runs: one of our methods (its broadphase_method value: the one list of methods,
 * BROADPHASE_METHOD_LIST, gives every method its cases), the chooser among them
 * (BROADPHASE_METHOD_AUTO), a peer library, or a crowd's neighbourhoods by one route
 * (perf/common/crowd.h; `peer` holds the route). */
typedef int bench_engine;
enum { BENCH_AUTO = BROADPHASE_METHOD_COUNT, BENCH_PEER, BENCH_CROWD };

static bool bench_is_ours(bench_engine engine) {
    return engine >= 0 && engine < BENCH_PEER;
}

static broadphase_method bench_method(bench_engine engine) {
    return engine == BENCH_AUTO ? BROADPHASE_METHOD_AUTO : (broadphase_method)engine;
}

/* One of our methods with a structure (update policies and leaves: the kd-tree, the octree, the
 * sweep, and the chooser among them); the others test every pair (brute force), and are
 * quadratic. */
static bool bench_is_tree(bench_engine engine) {
    return bench_is_ours(engine) && method_has_tree(bench_method(engine));
}

/* Crowd cases: 1e4 and 1e5 agents in 2D, neighbour distance 15, k 10, about 20
 * within it, walking 0.5 a frame; a frame moves the crowd and finds every neighbourhood. */
#define CROWD_DISTANCE 15.0f
#define CROWD_K 10
#define CROWD_DENSITY 20.0f
#define CROWD_STEP 0.5f
/* A crowd case walks its crowd through the same frames whatever its speed, as the runner's
 * --crowd does (frames 0-10): a faster route timed over more frames would otherwise meet a
 * denser crowd, nearer its middle. */
#define CROWD_CYCLE 11

/* How a static_world case uses its scene: the static field flagged static (the real case), not
 * flagged and with only-moved updates off (the same world with every object in the tree), or
 * only the movers in the world. NO_REST: the plain case with only-moved updates off
 * (config.rest_share 0), the world as it was before they existed. REST: a scene of the
 * standard set whose objects stand still, run with only-moved updates on (the default), as a
 * user runs it and as the peers that skip unchanged proxies (bullet, box2d) run theirs; its
 * plain case times a full step of every object. */
typedef enum bench_variant {
    VARIANT_PLAIN,
    VARIANT_ALL_IN_TREE,
    VARIANT_MOVERS_ONLY,
    VARIANT_NO_REST,
    VARIANT_REST,
    VARIANT_CHURN
} bench_variant;
static const char *const variant_suffix[] = {"",         "_all_in_tree", "_movers_only",
                                             "_no_rest", "_rest",        "_churn"};
/* Churn cases (moving at 1e5 and 1e6, both trees, update auto): every frame, after the move, one
 * object in CHURN_SHARE is removed and added again (the same box, which gets its id back: the
 * lowest free), as a game despawns and spawns; the frame times the move, the removal, the
 * addition and the step. */
#define CHURN_SHARE 1000

/* Query cases: a frame runs QUERY_BATCH queries of one kind on a world of the uniform
 * scene (or of plane2d, the "2d" cases) that was stepped once, one query at a time (single) or in
 * one batched call; or the same queries on a peer library's structure after one frame, one at a
 * time on one thread (the box, ray and closest-ray queries that it offers, peers.h). */
typedef enum bench_query {
    QUERY_NONE,    /* a step case */
    QUERY_BOX,     /* boxes of side 3.6: about 10 hits each */
    QUERY_SPHERE,  /* balls of radius 2 */
    QUERY_RAY,     /* all hits of segments of length L/10 */
    QUERY_CLOSEST, /* the first hit of the same segments */
    QUERY_NEAREST, /* the 16 nearest objects */
    QUERY_KINDS
} bench_query;
static const char *const query_names[] = {"", "box", "sphere", "ray", "closest", "nearest16"};
#define QUERY_BATCH 10000
#define QUERY_K 16
#define QUERY_HALF 1.8f
#define QUERY_RADIUS 2.0f
/* A peer query case compares the answers to its first QUERY_CHECK queries with the kd-tree's
 * in its set-up. */
#define QUERY_CHECK 200

typedef struct bench_case {
    scene_kind scene;
    bench_engine engine;
    peer_engine peer; /* when engine == BENCH_PEER */
    broadphase_update_policy update;
    size_t count;
    int threads;
    bench_variant variant;
    bench_query query;
    bool batched;
    char name[96];
} bench_case;

typedef struct bench_run {
    const bench_case *c;
    scene s;
    broadphase_world *w; /* our engines */
    peer *p;             /* a peer library */
    uint32_t *ids;
    uint32_t *churn_ids; /* churn cases: the ids the addition hands out */
    size_t churn_at;     /* churn cases: the first object of the next frame's window */
    /* Totals since the last bench_reset_totals, for per-frame averages. */
    size_t frames, last_pairs;
    double update_ms, search_ms, output_ms;
    uint64_t rebuilds_at_reset, rebuilds;
    /* Each frame's time since the last reset (the last BENCH_FRAME_SERIES when there were
     * more), for the median, the 99th percentile and the worst frame. */
    double *frame_ms;
    size_t frame_series;
    /* Query cases: the queries (columns) and room for their results. */
    float
        *qcol[14]; /* centre x y z, ray direction x y z, box min x y z, max x y z, radius, max_t */
    uint32_t *qids;
    float *qd2;
    size_t *qoffsets, *qcounts, qcapacity;
    broadphase_ray_hit *qhits;
    /* Crowd cases */
    crowd crowd;
    crowd start; /* the crowd at frame 0, which it goes back to every CROWD_CYCLE frames */
    size_t crowd_frame;
    crowd_runner route;
    crowd_sets sets;
} bench_run;

static bench_case *bench_cases;
static size_t bench_cases_count, bench_cases_capacity;

int bench_hardware_threads(void) {
    /* The affinity mask, like OpenMP's processor count, so that taskset is respected. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static const char *engine_name(const bench_case *c) {
    if (c->engine == BENCH_CROWD) return crowd_route_name((crowd_route)c->peer);
    return c->engine == BENCH_PEER ? peer_engine_name(c->peer)
                                   : broadphase_method_name(bench_method(c->engine));
}

static void add_variant_case(scene_kind kind, bench_variant variant, bench_engine engine,
                             peer_engine which, broadphase_update_policy update, size_t count,
                             int threads) {
    static const char *const update_names[] = {"auto", "rebuild", "refit"};
    if (bench_cases_count == bench_cases_capacity) {
        size_t capacity = bench_cases_capacity ? 2 * bench_cases_capacity : 1024;
        bench_case *grown = realloc(bench_cases, capacity * sizeof *grown);
        if (!grown) return; /* the table stops growing; the cases so far still run */
        bench_cases = grown;
        bench_cases_capacity = capacity;
    }
    bench_case *c = &bench_cases[bench_cases_count++];
    *c = (bench_case){kind, engine, which, update, count, threads, variant, QUERY_NONE, false, ""};
    if (bench_is_tree(engine)) {
        snprintf(c->name, sizeof c->name, "step/%s%s/%s/%s/n:%zu/threads:%d", scene_name(kind),
                 variant_suffix[variant], engine_name(c), update_names[update], count, threads);
    } else {
        snprintf(c->name, sizeof c->name, "step/%s%s/%s/n:%zu/threads:%d", scene_name(kind),
                 variant_suffix[variant], engine_name(c), count, threads);
    }
}

static void add_case(scene_kind kind, bench_engine engine, peer_engine which,
                     broadphase_update_policy update, size_t count, int threads) {
    add_variant_case(kind, VARIANT_PLAIN, engine, which, update, count, threads);
}

/* Worlds where most objects stay put: static_world (1 000 000 statics and 10 000 movers) with
 * its statics flagged, with every object in the tree, and with the movers alone; sleeping
 * (1 000 000 objects, 1% moving). Both trees, update auto, 1 thread and all of them. */
static void add_still_world_cases(const int *threads, int thread_count) {
    int ends[2] = {threads[0], threads[thread_count - 1]};
    for (int t = 0; t < (ends[0] == ends[1] ? 1 : 2); t++) {
        for (bench_engine m = 0; m < BENCH_PEER; m++) {
            if (!bench_is_tree(m)) continue;
            for (int v = 0; v < 3; v++)
                add_variant_case(SCENE_STATIC_WORLD, (bench_variant)v, m, PEER_ENGINE_COUNT,
                                 BROADPHASE_UPDATE_AUTO, 1010000, ends[t]);
            for (int v = 0; v < 2; v++)
                add_variant_case(SCENE_SLEEPING, v ? VARIANT_NO_REST : VARIANT_PLAIN, m,
                                 PEER_ENGINE_COUNT, BROADPHASE_UPDATE_AUTO, 1000000, ends[t]);
        }
    }
}

/* Query throughput at N = 1e5 and 1e6 on the uniform scene: every query kind, both trees (and
 * brute force at 1e5), one at a time on one thread and batched on 1 thread and all of them. */
static void add_query_cases(size_t count, const int *threads, int thread_count) {
    int ends[2] = {threads[0], threads[thread_count - 1]};
    for (int q = QUERY_BOX; q < QUERY_KINDS; q++) {
        for (bench_engine e = 0; e < BENCH_PEER; e++) {
            if (!bench_is_tree(e) && count > 100000) continue;
            for (int mode = 0; mode < 3; mode++) {
                if (mode == 2 && ends[0] == ends[1]) continue;
                add_variant_case(SCENE_UNIFORM, VARIANT_PLAIN, e, PEER_ENGINE_COUNT,
                                 BROADPHASE_UPDATE_AUTO, count, mode == 2 ? ends[1] : 1);
                bench_case *c = &bench_cases[bench_cases_count - 1];
                c->query = (bench_query)q;
                c->batched = mode > 0;
                snprintf(c->name, sizeof c->name, "query/%s/%s/n:%zu/%s/threads:%d", query_names[q],
                         engine_name(c), count, c->batched ? "batched" : "single", c->threads);
            }
        }
    }
}

/* A crowd's neighbourhoods at 1e4 and 1e5 agents by every route, on 1 thread and all of them
 * (the seed's tree too: its queries spread over the threads as a simulator spreads them). */
static void add_crowd_cases(const int *threads, int thread_count) {
    static const size_t counts[] = {10000, 100000};
    int ends[2] = {threads[0], threads[thread_count - 1]};
    for (size_t n = 0; n < 2; n++)
        for (int route = 0; route < CROWD_ROUTES; route++)
            for (int t = 0; t < (ends[0] == ends[1] ? 1 : 2); t++) {
                add_variant_case(SCENE_PLANE2D, VARIANT_PLAIN, BENCH_CROWD, (peer_engine)route,
                                 BROADPHASE_UPDATE_AUTO, counts[n], ends[t]);
                bench_case *c = &bench_cases[bench_cases_count - 1];
                snprintf(c->name, sizeof c->name, "crowd/%s/n:%zu/threads:%d",
                         crowd_route_name((crowd_route)route), counts[n], ends[t]);
            }
}

static bool scene_is_2d(scene_kind kind) {
    return kind == SCENE_PLANE2D || kind == SCENE_MOVING2D;
}

static void add_single_query_case(scene_kind kind, bench_engine engine, peer_engine which,
                                  size_t count, bench_query q) {
    add_variant_case(kind, VARIANT_PLAIN, engine, which, BROADPHASE_UPDATE_AUTO, count, 1);
    bench_case *c = &bench_cases[bench_cases_count - 1];
    c->query = q;
    snprintf(c->name, sizeof c->name, "query/%s/%s%s/n:%zu/single/threads:1", query_names[q],
             engine_name(c), scene_is_2d(kind) ? "/2d" : "", count);
}

/* The largest N at which a peer's query cases run (their set-up is not timed, but it is paid
 * once for each peer, scene and N: see park_peer). bullet-sap: creating 1e5 proxies takes about
 * two minutes, 1e6 hours (see peer_max_count); the rest build 1e6 in seconds (box2d in about
 * 30 s, its warm-up frame querying every proxy). */
static size_t peer_query_max_count(peer_engine which) {
    return which == PEER_BULLET_SAP ? 100000 : 1000000;
}

/* The peers' queries, single and on one thread, next to ours: on uniform (3D peers) and on
 * plane2d (2D peers; Box2D is 2D only), the latter with our trees' 2D cases for comparison. A
 * peer's kinds come in a row, so that they share one set-up (park_peer). */
static void add_peer_query_cases(size_t count) {
    static const bench_query kinds[] = {QUERY_BOX, QUERY_RAY, QUERY_CLOSEST};
    static const peer_query peer_kinds[] = {PEER_QUERY_BOX, PEER_QUERY_RAY, PEER_QUERY_CLOSEST};
    for (bench_engine m = 0; m < BENCH_PEER; m++) {
        if (!bench_is_tree(m)) continue;
        for (size_t q = 0; q < 3; q++)
            add_single_query_case(SCENE_PLANE2D, m, PEER_ENGINE_COUNT, count, kinds[q]);
    }
    for (int e = 0; e < PEER_ENGINE_COUNT; e++) {
        peer_engine which = (peer_engine)e;
        scene_kind kind = peer_supports(which, 3) ? SCENE_UNIFORM : SCENE_PLANE2D;
        if (!peer_available(which) || count > peer_query_max_count(which)) continue;
        for (size_t q = 0; q < 3; q++) {
            if (peer_has_query(which, peer_kinds[q]))
                add_single_query_case(kind, BENCH_PEER, which, count, kinds[q]);
        }
    }
}

/* 1, 2, 4, ... up to the hardware thread count, then that count itself if it is not a power of
 * two; returns how many. */
static int thread_counts(int out[32]) {
    int hardware = bench_hardware_threads(), n = 0;
    for (int t = 1; t <= hardware && n < 31; t *= 2) out[n++] = t;
    if (out[n - 1] != hardware) out[n++] = hardware;
    return n;
}

/* The largest N at which a peer runs on a scene. Measured on the 2-core development machine (AMD
 * EPYC, KVM), one peer at a time, single frames (ms per frame; the set-up is not timed):
 * - bullet-dbvt: every moving object leaves its enlarged leaf every other frame and is
 *   reinserted, so frames alternate: moving at 1e5 ~500 / 5-60 ms, at 1e6 ~16 s / 0.1-1.5 s;
 *   static scenes keep their pair cache (uniform 1e6: 80-190 ms). mixed at 1e6 has 83.5 million
 *   pairs, all of which its set-up would hash. So 1e5 on moving, moving2d and mixed.
 * - bullet-sap: adding a proxy sorts its edges down from the top of each axis, O(N) per proxy:
 *   set-up takes ~2 minutes at 1e5 and hours at 1e6; frames at 1e5 take 270 ms on moving and
 *   40 ms on moving2d, and next to nothing on static scenes (no edge moves). So 1e5 on the
 *   moving scenes, 1e4 on the static ones (where 1e5 would cost 2 minutes of set-up per case
 *   to time a frame with nothing to do).
 * - cgal: 3D at 1e6 2.7-2.9 s (uniform, clustered, moving), 5-10 s on mixed; 2D at 1e6 0.9-1 s.
 *   So 1e5 in 3D, 1e6 in 2D.
 * - fcl: 1e6 0.4-0.8 s, except mixed (11-17 s). So 1e6, mixed 1e5.
 * - box2d: a frame re-inserts and queries only the proxies that left their enlarged boxes, then
 *   walks the persistent pair set. plane2d (nothing moves): 1e5 3 ms, 1e6 55 ms, but the set-up
 *   (whose warm-up frame queries every proxy) takes ~30 s at 1e6. moving2d comes in waves: the
 *   objects all start together, and the 55% of them that move faster than 1/30 per frame on
 *   an axis leave their enlarged boxes together every 7 frames. 1e5: 5-270 ms, 45-50 ms on
 *   average over many frames (the benchmark's first frames, with the largest wave, read
 *   60-85 ms); 1e6: 0.1-23 s, ~4.7 s on average. So 1e6 on plane2d, 1e5 on moving2d.
 * dense (4000 objects at most, 6.3 million pairs) runs every peer: 40-500 ms.
 * Sphere scenes have no peer: the peers here take boxes only, and the spheres' boxes would
 * report pairs that the sphere test rejects. */
static size_t peer_max_count(peer_engine which, scene_kind kind) {
    bool moving = scene_is_moving(kind);
    switch (which) {
    case PEER_BULLET_DBVT:
        return moving || kind == SCENE_MIXED ? 100000 : 1000000;
    case PEER_BULLET_SAP:
        return moving ? 100000 : 10000;
    case PEER_CGAL:
        return scene_is_2d(kind) ? 1000000 : 100000;
    case PEER_FCL:
        return kind == SCENE_MIXED ? 100000 : 1000000;
    case PEER_BOX2D:
        return moving ? 100000 : 1000000;
    default:
        return 0;
    }
}

static void add_peer_cases(scene_kind kind, size_t count) {
    if (kind == SCENE_SPHERES) return;
    for (int e = 0; e < PEER_ENGINE_COUNT; e++) {
        peer_engine which = (peer_engine)e;
        if (!peer_available(which) || !peer_supports(which, scene_is_2d(kind) ? 2 : 3)) continue;
        if (count > peer_max_count(which, kind)) continue;
        add_case(kind, BENCH_PEER, which, BROADPHASE_UPDATE_AUTO, count, 1);
    }
}

/* Every scene at every size, with every engine: each tree with each update policy at each
 * thread count (so that step/<scene>/kdtree/... and step/<scene>/octree/... compare one to
 * one), brute force up to BENCH_BRUTE_FORCE_MAX, then the peers (single-threaded libraries).
 * A scene whose objects stand still and that peers run also gets step/<scene>_rest/<tree>/auto
 * cases (VARIANT_REST). */
static void add_scene_cases(scene_kind kind, size_t count, const int *threads, int thread_count) {
    static const broadphase_update_policy updates[] = {
        BROADPHASE_UPDATE_REBUILD, BROADPHASE_UPDATE_REFIT, BROADPHASE_UPDATE_AUTO};
    for (bench_engine m = 0; m < BENCH_PEER; m++) {
        if (!bench_is_tree(m)) continue;
        for (size_t u = 0; u < sizeof updates / sizeof updates[0]; u++) {
            for (int t = 0; t < thread_count; t++) {
                add_case(kind, m, PEER_ENGINE_COUNT, updates[u], count, threads[t]);
            }
        }
    }
    for (bench_engine m = 0; m < BENCH_PEER && count <= BENCH_BRUTE_FORCE_MAX; m++) {
        if (bench_is_tree(m)) continue;
        for (int t = 0; t < thread_count; t++)
            add_case(kind, m, PEER_ENGINE_COUNT, BROADPHASE_UPDATE_AUTO, count, threads[t]);
    }
    if (kind == SCENE_MOVING && count >= 100000) {
        for (bench_engine m = 0; m < BENCH_PEER; m++) {
            if (!bench_is_tree(m)) continue;
            for (int t = 0; t < thread_count; t++)
                add_variant_case(kind, VARIANT_CHURN, m, PEER_ENGINE_COUNT, BROADPHASE_UPDATE_AUTO,
                                 count, threads[t]);
        }
    }
    if (!scene_is_moving(kind) && kind != SCENE_SPHERES) {
        for (bench_engine m = 0; m < BENCH_PEER; m++) {
            if (!bench_is_tree(m)) continue;
            for (int t = 0; t < thread_count; t++)
                add_variant_case(kind, VARIANT_REST, m, PEER_ENGINE_COUNT, BROADPHASE_UPDATE_AUTO,
                                 count, threads[t]);
        }
    }
    add_peer_cases(kind, count);
}

/* Sizes go in the outer loop so that a full run does the small cases first. The dense scene
 * packs every object into a cube of side 2 (almost every pair overlaps) and has its own sizes. */
static void build_cases(void) {
    static const scene_kind scenes[] = {SCENE_UNIFORM,  SCENE_CLUSTERED, SCENE_MIXED,
                                        SCENE_MOVING,   SCENE_SPHERES,   SCENE_PLANE2D,
                                        SCENE_MOVING2D, SCENE_DENSE};
    static const size_t counts[] = {1000, 10000, 100000, 1000000};
    static const size_t dense_counts[] = {1000, 2000, 4000};
    int threads[32], thread_count = thread_counts(threads);
    for (size_t n = 0; n < sizeof counts / sizeof counts[0]; n++) {
        for (size_t sc = 0; sc < sizeof scenes / sizeof scenes[0]; sc++) {
            if (scenes[sc] != SCENE_DENSE) {
                add_scene_cases(scenes[sc], counts[n], threads, thread_count);
            } else if (n < sizeof dense_counts / sizeof dense_counts[0]) {
                add_scene_cases(scenes[sc], dense_counts[n], threads, thread_count);
            }
        }
        if (counts[n] == 1000000) add_still_world_cases(threads, thread_count);
        if (counts[n] >= 100000) {
            add_query_cases(counts[n], threads, thread_count);
            add_peer_query_cases(counts[n]);
        }
    }
    add_crowd_cases(threads, thread_count);
}

size_t bench_case_count(void) {
    if (bench_cases_count == 0) build_cases();
    return bench_cases_count;
}

const char *bench_case_name(size_t i) {
    return i < bench_case_count() ? bench_cases[i].name : "";
}

size_t bench_case_objects(size_t i) {
    return i < bench_case_count() ? bench_cases[i].count : 0;
}

size_t bench_case_items(size_t i) {
    if (i >= bench_case_count()) return 0;
    return bench_cases[i].query != QUERY_NONE ? QUERY_BATCH : bench_cases[i].count;
}

int bench_case_threads(size_t i) {
    return i < bench_case_count() ? bench_cases[i].threads : 0;
}

const char *bench_status_string(int status) {
    return broadphase_status_string((broadphase_status)status);
}

static peer_boxes scene_peer_boxes(const scene *s) {
    peer_boxes b = {{s->min[0], s->min[1], s->min[2]}, {s->max[0], s->max[1], s->max[2]}};
    return b;
}

static broadphase_status world_for_scene(const scene *s, bench_variant variant,
                                         broadphase_method method, broadphase_update_policy update,
                                         int threads, uint32_t *ids, broadphase_world **w_out,
                                         const char **stage) {
    broadphase_config cfg = broadphase_config_default(s->dimensions);
    cfg.method = method;
    cfg.update = update;
    cfg.threads = threads;
    cfg.initial_capacity = s->count;
    /* The standard set times a full step of every object, as it did before only-moved updates
     * existed: its static scenes push unchanged positions, which would let every object rest.
     * The worlds that mostly stand still keep the default, except in their comparison cases. */
    bool still = s->kind == SCENE_STATIC_WORLD || s->kind == SCENE_SLEEPING;
    if ((!still && variant != VARIANT_REST) || variant == VARIANT_ALL_IN_TREE ||
        variant == VARIANT_NO_REST)
        cfg.rest_share = 0.0f;
    *stage = "broadphase_create";
    broadphase_status st = broadphase_create(&cfg, w_out);
    if (st == BROADPHASE_OK) {
        *stage = "adding the scene";
        st = (broadphase_status)(variant == VARIANT_MOVERS_ONLY
                                     ? scene_add_movers_to_world(s, *w_out, ids)
                                     : scene_add_to_world(s, *w_out, ids));
    }
    if (st == BROADPHASE_OK && variant == VARIANT_PLAIN && s->static_count > 0) {
        *stage = "flagging the statics";
        st = (broadphase_status)scene_set_statics(s, *w_out, ids);
    }
    return st;
}

/* Our engines: the warm-up step builds the structure and grows every buffer to its working
 * size. */
static bool setup_ours(bench_run *r, char *error, size_t error_size) {
    const char *stage;
    broadphase_status st = world_for_scene(&r->s, r->c->variant, bench_method(r->c->engine),
                                           r->c->update, r->c->threads, r->ids, &r->w, &stage);
    if (st == BROADPHASE_OK) {
        stage = "warm-up step";
        st = broadphase_step(r->w, NULL);
    }
    if (st != BROADPHASE_OK) {
        snprintf(error, error_size, "%s: %s", stage, broadphase_status_string(st));
        return false;
    }
    return true;
}

/* The first difference between the kd-tree's pairs and a peer's, as a message; false when they
 * are the same. */
static bool pairs_differ(const broadphase_pairs *want, const uint64_t *got, size_t got_count,
                         char *error, size_t error_size) {
    size_t i = 0, j = 0;
    while (i < want->count || j < got_count) {
        uint64_t w =
            i < want->count ? (uint64_t)want->data[i].a << 32 | want->data[i].b : UINT64_MAX;
        uint64_t g = j < got_count ? got[j] : UINT64_MAX;
        if (w == g) {
            i++;
            j++;
            continue;
        }
        uint64_t key = w < g ? w : g;
        snprintf(error, error_size,
                 "pairs differ from the kd-tree's: (%u, %u) %s (kd-tree %zu pairs, peer %zu)",
                 (unsigned)(key >> 32), (unsigned)(key & 0xFFFFFFFFu), w < g ? "missing" : "extra",
                 want->count, got_count);
        return true;
    }
    return false;
}

static bool check_peer_queries(bench_run *r, const broadphase_world *w, char *error,
                               size_t error_size);

/* Checked, not assumed: the peer's pairs after its warm-up frame against the kd-tree's (itself
 * checked against the oracle by the tests) on the same boxes; in a query case, also the answers
 * to its first queries. */
static bool check_peer(bench_run *r, char *error, size_t error_size) {
    broadphase_world *w = NULL;
    const char *stage;
    broadphase_pairs want = {0};
    broadphase_status st = world_for_scene(&r->s, VARIANT_PLAIN, BROADPHASE_METHOD_KDTREE,
                                           BROADPHASE_UPDATE_AUTO, 0, r->ids, &w, &stage);
    if (st == BROADPHASE_OK) {
        stage = "kd-tree step for the check";
        st = broadphase_step(w, &want);
    }
    bool ok = st == BROADPHASE_OK;
    if (!ok) {
        snprintf(error, error_size, "%s: %s", stage, broadphase_status_string(st));
    } else {
        size_t got_count = 0;
        const uint64_t *got = peer_sorted_pairs(r->p, &got_count);
        ok = !pairs_differ(&want, got, got_count, error, error_size);
    }
    if (ok && r->c->query != QUERY_NONE) ok = check_peer_queries(r, w, error, error_size);
    broadphase_destroy(w);
    return ok;
}

/* A peer made for query cases outlives its case, so that the next case on the same peer, scene
 * and N (its box, ray and closest-ray cases come in a row) skips the set-up, which is most of
 * a case's time (bullet-sap: two minutes at 1e5). The queries do not change the structure. */
static struct {
    peer *p;
    const bench_case *c;
} parked;

static void park_release(void) {
    peer_destroy(parked.p);
    parked.p = NULL;
}

static void park_peer(bench_run *r) {
    static bool registered;
    if (!registered) registered = atexit(park_release) == 0;
    park_release();
    parked.p = r->p;
    parked.c = r->c;
    r->p = NULL;
}

/* The parked peer when it was made for the same peer, scene and N as case c. */
static peer *unpark_peer(const bench_case *c) {
    peer *p = NULL;
    if (parked.p && parked.c->peer == c->peer && parked.c->scene == c->scene &&
        parked.c->count == c->count) {
        p = parked.p;
        parked.p = NULL;
    }
    park_release();
    return p;
}

static bool setup_peer(bench_run *r, char *error, size_t error_size) {
    peer_boxes boxes = scene_peer_boxes(&r->s);
    bool queries = r->c->query != QUERY_NONE;
    if (queries && (r->p = unpark_peer(r->c))) {
        size_t count = 0;
        peer_sorted_pairs(r->p, &count);
        r->last_pairs = count;
        return true; /* checked by bench_setup, with the case's queries */
    }
    float lo[3], hi[3];
    peer_world_bounds(&boxes, r->s.count, r->s.dimensions, r->s.world_size, lo, hi);
    r->p = queries
               ? peer_create_for_queries(r->c->peer, r->s.dimensions, r->s.count, &boxes, lo, hi)
               : peer_create(r->c->peer, r->s.dimensions, r->s.count, &boxes, lo, hi);
    if (!r->p) {
        snprintf(error, error_size, "%s: could not create (unavailable or out of memory)",
                 peer_engine_name(r->c->peer));
        return false;
    }
    long long count = peer_frame(r->p, &boxes);
    if (count < 0) {
        snprintf(error, error_size, "%s: warm-up frame ran out of memory",
                 peer_engine_name(r->c->peer));
        return false;
    }
    r->last_pairs = (size_t)count;
    return queries || check_peer(r, error, error_size); /* query cases: once the queries exist */
}

/* The queries of a query case, from their own seed: centres uniform in the scene's cube (square
 * in 2D, z 0), ray directions uniform in a cube (square) scaled to length about L/10 (max_t
 * 1). */
static bool setup_queries(bench_run *r) {
    for (int j = 0; j < 14; j++)
        if (!(r->qcol[j] = malloc(QUERY_BATCH * sizeof(float)))) return false;
    uint64_t rng = 99;
    float L = r->s.world_size;
    int dims = r->s.dimensions;
    for (size_t i = 0; i < QUERY_BATCH; i++) {
        float d[3] = {0, 0, 0}, len = 0.0f;
        for (int k = 0; k < 3; k++) {
            r->qcol[k][i] = 0.0f;
            if (k >= dims) continue;
            r->qcol[k][i] = L * scene_uniform(&rng);
            d[k] = 2.0f * scene_uniform(&rng) - 1.0f;
            len += d[k] * d[k];
        }
        len = len > 1e-6f ? sqrtf(len) : 1.0f;
        for (int k = 0; k < 3; k++) {
            r->qcol[3 + k][i] = d[k] / len * (L / 10.0f);
            r->qcol[6 + k][i] = r->qcol[k][i] - QUERY_HALF;
            r->qcol[9 + k][i] = r->qcol[k][i] + QUERY_HALF;
        }
        r->qcol[12][i] = QUERY_RADIUS;
        r->qcol[13][i] = 1.0f;
    }
    r->qcapacity = (size_t)QUERY_BATCH * 64;
    r->qids = malloc(r->qcapacity * sizeof *r->qids);
    r->qd2 = malloc((size_t)QUERY_BATCH * QUERY_K * sizeof *r->qd2);
    r->qhits = malloc(r->qcapacity * sizeof *r->qhits);
    r->qoffsets = malloc((QUERY_BATCH + 1) * sizeof *r->qoffsets);
    r->qcounts = malloc(QUERY_BATCH * sizeof *r->qcounts);
    return r->qids && r->qd2 && r->qhits && r->qoffsets && r->qcounts;
}

/* Query i of the case: centre (origin), ray direction, box. */
static void query_at(const bench_run *r, size_t i, float c[3], float d[3], float lo[3],
                     float hi[3]) {
    for (int k = 0; k < 3; k++) {
        c[k] = r->qcol[k][i];
        d[k] = r->qcol[3 + k][i];
        lo[k] = r->qcol[6 + k][i];
        hi[k] = r->qcol[9 + k][i];
    }
}

/* One frame of a peer's query case: every query once, single; the results found, or -1 when
 * the peer ran out of memory. */
static long long peer_query_frame(bench_run *r) {
    long long results = 0;
    for (size_t i = 0; i < QUERY_BATCH; i++) {
        float c[3], d[3], lo[3], hi[3];
        query_at(r, i, c, d, lo, hi);
        long long n;
        if (r->c->query == QUERY_BOX) {
            const uint32_t *ids;
            n = peer_query_box(r->p, lo, hi, &ids);
        } else if (r->c->query == QUERY_RAY) {
            const peer_ray_hit *hits;
            n = peer_raycast(r->p, c, d, 1.0f, &hits);
        } else {
            peer_ray_hit hit;
            n = peer_raycast_closest(r->p, c, d, 1.0f, &hit);
        }
        if (n < 0) return -1;
        results += n;
    }
    return results;
}

/* The first difference between the kd-tree's answer to query i and the peer's, as a message;
 * false when they are the same: ids, and ray hits' t within 1e-4 of the engine's (the adapters
 * compute it with the engine's formula, so it is the same to the bit in practice), in order. */
static bool peer_query_differs(bench_run *r, const broadphase_world *w, size_t i, char *error,
                               size_t error_size) {
    float c[3], d[3], lo[3], hi[3];
    query_at(r, i, c, d, lo, hi);
    size_t want = 0;
    long long got = -1;
    broadphase_status st = BROADPHASE_OK;
    bool same = true;
    if (r->c->query == QUERY_BOX) {
        const uint32_t *ids = NULL;
        st = broadphase_query_box(w, lo, hi, r->qids, r->qcapacity, &want);
        got = peer_query_box(r->p, lo, hi, &ids);
        for (size_t j = 0; got == (long long)want && j < want; j++)
            same = same && ids[j] == r->qids[j];
    } else if (r->c->query == QUERY_RAY) {
        const peer_ray_hit *hits = NULL;
        st = broadphase_raycast(w, c, d, 1.0f, r->qhits, r->qcapacity, &want);
        got = peer_raycast(r->p, c, d, 1.0f, &hits);
        for (size_t j = 0; got == (long long)want && j < want; j++)
            same =
                same && hits[j].id == r->qhits[j].id && fabsf(hits[j].t - r->qhits[j].t) <= 1e-4f;
    } else {
        peer_ray_hit hit = {0, 0.0f};
        bool found = false;
        st = broadphase_raycast_closest(w, c, d, 1.0f, r->qhits, &found);
        want = found;
        got = peer_raycast_closest(r->p, c, d, 1.0f, &hit);
        same = !found || (hit.id == r->qhits[0].id && fabsf(hit.t - r->qhits[0].t) <= 1e-4f);
    }
    if (st != BROADPHASE_OK) {
        snprintf(error, error_size, "kd-tree %s query %zu for the check: %s",
                 query_names[r->c->query], i, broadphase_status_string(st));
        return true;
    }
    if (got == (long long)want && same) return false;
    snprintf(error, error_size,
             "%s query %zu differs from the kd-tree's: %zu results, the peer's %lld%s",
             query_names[r->c->query], i, want, got,
             got == (long long)want ? " (different ids or t)" : "");
    return true;
}

static bool check_peer_queries(bench_run *r, const broadphase_world *w, char *error,
                               size_t error_size) {
    for (size_t i = 0; i < QUERY_CHECK && i < QUERY_BATCH; i++)
        if (peer_query_differs(r, w, i, error, error_size)) return false;
    return true;
}

/* One frame of a query case: every query once; last_pairs gets the results found. */
static int query_frame(bench_run *r) {
    const float *const *col = (const float *const *)r->qcol;
    size_t results = 0;
    broadphase_status st = BROADPHASE_OK;
    bench_query kind = r->c->query;
    if (r->p) {
        long long found = peer_query_frame(r);
        if (found < 0) return (int)BROADPHASE_ERROR_OUT_OF_MEMORY;
        r->frames++;
        r->last_pairs = (size_t)found;
        return (int)BROADPHASE_OK;
    }
    if (!r->c->batched) {
        for (size_t i = 0; i < QUERY_BATCH && st == BROADPHASE_OK; i++) {
            float c[3] = {col[0][i], col[1][i], col[2][i]};
            float d[3] = {col[3][i], col[4][i], col[5][i]};
            float lo[3] = {col[6][i], col[7][i], col[8][i]};
            float hi[3] = {col[9][i], col[10][i], col[11][i]};
            size_t n = 0;
            bool found = false;
            if (kind == QUERY_BOX)
                st = broadphase_query_box(r->w, lo, hi, r->qids, r->qcapacity, &n);
            else if (kind == QUERY_SPHERE)
                st = broadphase_query_sphere(r->w, c, QUERY_RADIUS, r->qids, r->qcapacity, &n);
            else if (kind == QUERY_RAY)
                st = broadphase_raycast(r->w, c, d, 1.0f, r->qhits, r->qcapacity, &n);
            else if (kind == QUERY_CLOSEST)
                st = broadphase_raycast_closest(r->w, c, d, 1.0f, r->qhits, &found);
            else
                st = broadphase_nearest(r->w, c, QUERY_K, r->qids, r->qd2, &n);
            results += kind == QUERY_CLOSEST ? found : n;
        }
    } else if (kind == QUERY_BOX || kind == QUERY_SPHERE) {
        broadphase_id_rows rows = {r->qoffsets, r->qids, r->qcapacity, 0, 0};
        if (kind == QUERY_BOX) {
            broadphase_boxes b = {col[6], col[7], col[8], col[9], col[10], col[11]};
            st = broadphase_query_boxes(r->w, QUERY_BATCH, &b, &rows);
        } else {
            broadphase_spheres s = {col[0], col[1], col[2], col[12]};
            st = broadphase_query_spheres(r->w, QUERY_BATCH, &s, &rows);
        }
        results = rows.total;
    } else if (kind == QUERY_RAY || kind == QUERY_CLOSEST) {
        broadphase_rays rays = {col[0], col[1], col[2], col[3], col[4], col[5], col[13]};
        if (kind == QUERY_RAY) {
            broadphase_hit_rows rows = {r->qoffsets, r->qhits, r->qcapacity, 0, 0};
            st = broadphase_raycasts(r->w, QUERY_BATCH, &rays, &rows);
            results = rows.total;
        } else {
            st = broadphase_raycasts_closest(r->w, QUERY_BATCH, &rays, r->qhits, NULL);
            for (size_t i = 0; i < QUERY_BATCH; i++) results += r->qhits[i].id != BROADPHASE_NO_HIT;
        }
    } else {
        broadphase_points p = {col[0], col[1], col[2]};
        st = broadphase_nearest_many(r->w, QUERY_BATCH, &p, QUERY_K, r->qids, r->qd2, r->qcounts,
                                     NULL);
        for (size_t i = 0; i < QUERY_BATCH; i++) results += r->qcounts[i];
    }
    if (st != BROADPHASE_OK) return (int)st;
    r->frames++;
    r->last_pairs = results;
    return (int)BROADPHASE_OK;
}

/* Moving scenes run untimed frames first, so that every case is timed in the steady state its
 * structure settles into, whatever its thread count. Our trees defer small moves between
 * cells and lay their slots out again once enough have gathered: from about the 30th frame of
 * `moving` on, every third frame does (at 1e6 on 2 threads the update goes from 6.4 ms a frame
 * to 7.4, 8.0 and 16 ms in turn), and without a warm-up a faster case, which Google Benchmark
 * runs for more frames, was timed further into that than a slower one. The peer libraries run
 * the same frames, or as many as fit in WARMUP_PEER_MS (their cost does not depend on ours'
 * state). */
enum { WARMUP_FRAMES = 40, WARMUP_PEER_MS = 3000, BENCH_FRAME_SERIES = 1 << 16 };

static double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static bool warm_up(bench_run *r) {
    double start = bench_now_ms();
    for (int f = 0; f < WARMUP_FRAMES; f++) {
        if (r->p && bench_now_ms() - start > WARMUP_PEER_MS) break;
        bench_advance(r);
        if (bench_frame(r) != (int)BROADPHASE_OK) return false;
    }
    return true;
}

bench_run *bench_setup(size_t i, char *error, size_t error_size) {
    if (i >= bench_case_count()) {
        snprintf(error, error_size, "no benchmark case %zu", i);
        return NULL;
    }
    bench_run *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    r->c = &bench_cases[i];
    if (error_size > 0) error[0] = '\0';
    if (!(r->frame_ms = malloc(BENCH_FRAME_SERIES * sizeof *r->frame_ms))) {
        snprintf(error, error_size, "out of memory");
        free(r);
        return NULL;
    }
    if (r->c->engine != BENCH_PEER || r->c->query == QUERY_NONE) park_release();
    if (r->c->engine == BENCH_CROWD) {
        const bench_case *c = r->c;
        bool ok = crowd_make(&r->crowd, 2, c->count, CROWD_DISTANCE, CROWD_K, CROWD_DENSITY,
                             CROWD_STEP, BENCH_SEED) &&
                  crowd_make(&r->start, 2, c->count, CROWD_DISTANCE, CROWD_K, CROWD_DENSITY,
                             CROWD_STEP, BENCH_SEED) &&
                  crowd_sets_make(&r->sets, c->count, CROWD_K) &&
                  crowd_runner_make(&r->route, &r->crowd, (crowd_route)c->peer, c->threads) ==
                      (int)BROADPHASE_OK &&
                  crowd_runner_frame(&r->route, &r->crowd, &r->sets) == (int)BROADPHASE_OK;
        if (!ok) {
            snprintf(error, error_size, "crowd set-up failed");
            bench_teardown(r);
            return NULL;
        }
        bench_reset_totals(r);
        return r;
    }
    if (!scene_make(&r->s, r->c->scene, r->c->count, BENCH_SEED) ||
        !(r->ids = malloc((r->c->count ? r->c->count : 1) * sizeof *r->ids)) ||
        !(r->churn_ids = malloc((r->c->count / CHURN_SHARE + 1) * sizeof *r->churn_ids))) {
        snprintf(error, error_size, "out of memory building the scene");
        bench_teardown(r);
        return NULL;
    }
    bool peer_case = r->c->engine == BENCH_PEER;
    bool ok = peer_case ? setup_peer(r, error, error_size) : setup_ours(r, error, error_size);
    if (ok && r->c->query != QUERY_NONE) {
        ok = setup_queries(r) && (!peer_case || check_peer(r, error, error_size));
        if (ok && query_frame(r) != (int)BROADPHASE_OK) ok = false; /* warm-up */
        if (!ok && !error[0]) snprintf(error, error_size, "query set-up failed");
    }
    if (ok && r->c->query == QUERY_NONE && scene_is_moving(r->s.kind) && !warm_up(r)) {
        snprintf(error, error_size, "a warm-up frame failed");
        ok = false;
    }
    if (!ok) {
        bench_teardown(r);
        return NULL;
    }
    bench_reset_totals(r);
    return r;
}

int bench_is_moving(const bench_run *r) {
    if (r->c->engine == BENCH_CROWD) return 1;
    return r->c->query == QUERY_NONE && scene_is_moving(r->s.kind);
}

void bench_advance(bench_run *r) {
    if (r->c->engine == BENCH_CROWD) {
        if (++r->crowd_frame % CROWD_CYCLE == 0) /* back to frame 0 */
            for (int a = 0; a < 3; a++) {
                memcpy(r->crowd.pos[a], r->start.pos[a], r->crowd.count * sizeof(float));
                memcpy(r->crowd.goal[a], r->start.goal[a], r->crowd.count * sizeof(float));
            }
        else
            crowd_advance(&r->crowd);
    } else
        scene_advance(&r->s);
}

/* A peer's frame: pushing every box into its structure, updating it and collecting the exact
 * pairs (peers.h). */
static int peer_bench_frame(bench_run *r) {
    peer_boxes boxes = scene_peer_boxes(&r->s);
    long long count = peer_frame(r->p, &boxes);
    if (count < 0) return (int)BROADPHASE_ERROR_OUT_OF_MEMORY;
    peer_times t = peer_last_times(r->p);
    r->frames++;
    r->last_pairs = (size_t)count;
    r->update_ms += t.update_ms;
    r->search_ms += t.search_ms;
    r->output_ms += t.output_ms;
    return (int)BROADPHASE_OK;
}

/* A churn case's removal and addition: a window of CHURN_SHARE-th of the objects, further on
 * each frame, removed and added again with the boxes they have now. */
static broadphase_status churn(bench_run *r) {
    const scene *s = &r->s;
    size_t k = s->count / CHURN_SHARE;
    if (k == 0) return BROADPHASE_OK;
    size_t at = r->churn_at;
    r->churn_at = at + k + k > s->count ? 0 : at + k;
    broadphase_status st = broadphase_remove(r->w, k, r->ids + at);
    if (st != BROADPHASE_OK) return st;
    broadphase_boxes b = {s->min[0] + at, s->min[1] + at, s->min[2] + at,
                          s->max[0] + at, s->max[1] + at, s->max[2] + at};
    st = broadphase_add_boxes(r->w, k, &b, r->churn_ids);
    /* The lowest free ids are the ones just removed, so each object gets its own back (the
     * scene's ids ascend; another id would leave the scene's moves naming a removed one). */
    for (size_t i = 0; st == BROADPHASE_OK && i < k; i++)
        if (r->churn_ids[i] != r->ids[at + i]) st = BROADPHASE_ERROR_UNKNOWN_ID;
    return st;
}

/* One frame as a user runs it: push every position (unchanged in static scenes, so the update
 * path still runs), remove and add again in churn cases, then step. */
static int frame_body(bench_run *r) {
    if (r->c->engine == BENCH_CROWD) {
        int st = crowd_runner_frame(&r->route, &r->crowd, &r->sets);
        if (st == (int)BROADPHASE_OK) r->frames++;
        return st;
    }
    if (r->c->query != QUERY_NONE) return query_frame(r);
    if (r->p) return peer_bench_frame(r);
    broadphase_status st = (broadphase_status)scene_move_in_world(&r->s, r->w, r->ids);
    if (st == BROADPHASE_OK && r->c->variant == VARIANT_CHURN) st = churn(r);
    broadphase_pairs pairs = {0};
    if (st == BROADPHASE_OK) st = broadphase_step(r->w, &pairs);
    broadphase_stats stats;
    if (st == BROADPHASE_OK) st = broadphase_get_stats(r->w, &stats);
    if (st != BROADPHASE_OK) return (int)st;
    r->frames++;
    r->last_pairs = pairs.count;
    r->update_ms += stats.update_ms;
    r->search_ms += stats.search_ms;
    r->output_ms += stats.output_ms;
    r->rebuilds = stats.rebuilds;
    return (int)BROADPHASE_OK;
}

int bench_frame(bench_run *r) {
    double start = bench_now_ms();
    int status = frame_body(r);
    r->frame_ms[r->frame_series++ % BENCH_FRAME_SERIES] = bench_now_ms() - start;
    return status;
}

void bench_frame_stats(bench_run *r, double *median, double *p99, double *worst) {
    size_t n = r->frame_series < BENCH_FRAME_SERIES ? r->frame_series : BENCH_FRAME_SERIES;
    series f = series_sorted(r->frame_ms, n); /* the order is not needed again */
    *median = f.median;
    *p99 = f.p99;
    *worst = f.worst;
    r->frame_series = 0;
}

void bench_reset_totals(bench_run *r) {
    r->frames = 0;
    r->frame_series = 0;
    r->update_ms = r->search_ms = r->output_ms = 0.0;
    if (r->p || r->c->query != QUERY_NONE)
        return; /* no rebuild counter; last_pairs stays the last frame's */
    broadphase_stats stats = {0};
    r->rebuilds_at_reset = broadphase_get_stats(r->w, &stats) == BROADPHASE_OK ? stats.rebuilds : 0;
    r->rebuilds = r->rebuilds_at_reset;
    r->last_pairs = stats.pairs;
}

static double per_frame(const bench_run *r, double total) {
    return r->frames ? total / (double)r->frames : 0.0;
}

double bench_last_pairs(const bench_run *r) {
    return (double)r->last_pairs;
}

double bench_mean_update_ms(const bench_run *r) {
    return per_frame(r, r->update_ms);
}

double bench_mean_search_ms(const bench_run *r) {
    return per_frame(r, r->search_ms);
}

double bench_mean_output_ms(const bench_run *r) {
    return per_frame(r, r->output_ms);
}

double bench_rebuilds_per_frame(const bench_run *r) {
    return per_frame(r, (double)(r->rebuilds - r->rebuilds_at_reset));
}

void bench_teardown(bench_run *r) {
    if (!r) return;
    if (r->p && r->c->query != QUERY_NONE) park_peer(r);
    broadphase_destroy(r->w);
    peer_destroy(r->p);
    for (int j = 0; j < 14; j++) free(r->qcol[j]);
    free(r->qids);
    free(r->qd2);
    free(r->qhits);
    free(r->qoffsets);
    free(r->qcounts);
    free(r->ids);
    free(r->churn_ids);
    free(r->frame_ms);
    scene_free(&r->s);
    crowd_runner_free(&r->route);
    crowd_sets_free(&r->sets);
    crowd_free(&r->crowd);
    crowd_free(&r->start);
    free(r);
}

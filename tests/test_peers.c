/* The peer adapters of perf/peers against the oracle (brute force): every box scene, 2D and 3D,
 * a few thousand objects, several frames of motion (static scenes are jittered, some objects
 * teleport, some pairs are made to touch exactly), the pair sets compared every frame; and the
 * peers' spatial queries against the engine's (random boxes and rays, boxes and rays that touch
 * objects exactly, rays along the axes, empty results). Built only when CMake found at least
 * one peer library; a test for a peer not built passes, saying so. */
#include "oracle.h"
#include "peers.h"

#include <math.h>

#define PEER_TEST_N 3000
#define PEER_TEST_DENSE_N 2000
#define PEER_TEST_FRAMES 6
#define PEER_TEST_SEED 11

static const scene_kind box_scenes[] = {SCENE_UNIFORM, SCENE_CLUSTERED, SCENE_MIXED, SCENE_MOVING,
                                        SCENE_PLANE2D, SCENE_MOVING2D,  SCENE_DENSE};

static bool scene_is_2d_kind(scene_kind kind) {
    return kind == SCENE_PLANE2D || kind == SCENE_MOVING2D;
}

static peer_boxes scene_boxes(const scene *s) {
    peer_boxes b = {{s->min[0], s->min[1], s->min[2]}, {s->max[0], s->max[1], s->max[2]}};
    return b;
}

static float signed_uniform(uint64_t *rng, float scale) {
    return (2.0f * scene_uniform(rng) - 1.0f) * scale;
}

static void shift_box(scene *s, size_t i, int k, float by) {
    s->min[k][i] += by;
    s->max[k][i] += by;
}

/* Motion beyond what the scene does itself: static scenes drift, every 97th object jumps across
 * the world (and, in moving scenes, back the next frame), and every 50th object is moved to touch
 * its successor exactly (b.min_x = a.max_x, same y and z), which a closed test must report. */
static void disturb(scene *s, uint64_t *rng) {
    int d = s->dimensions;
    for (size_t i = 0; i < s->count; i++) {
        for (int k = 0; k < d; k++) {
            if (!scene_is_moving(s->kind)) shift_box(s, i, k, signed_uniform(rng, 0.05f));
            if (i % 97 == 0) shift_box(s, i, k, signed_uniform(rng, 0.5f * s->world_size));
        }
    }
    for (size_t i = 0; i + 1 < s->count; i += 50) {
        for (int k = 1; k < 3; k++) {
            s->min[k][i + 1] = s->min[k][i];
            s->max[k][i + 1] = s->max[k][i];
        }
        float width = s->max[0][i + 1] - s->min[0][i + 1];
        s->min[0][i + 1] = s->max[0][i];
        s->max[0][i + 1] = s->max[0][i] + width;
    }
}

static broadphase_pair *keys_to_pairs(const uint64_t *keys, size_t count) {
    broadphase_pair *p = malloc((count ? count : 1) * sizeof *p);
    for (size_t i = 0; p && i < count; i++) {
        p[i].a = (uint32_t)(keys[i] >> 32);
        p[i].b = (uint32_t)keys[i];
    }
    return p;
}

/* Steps the oracle world and the peer on the scene's current boxes; true when the pair sets
 * agree (the first difference is printed otherwise). */
static bool frame_agrees(scene *s, broadphase_world *w, const uint32_t *ids, peer *p) {
    if (scene_move_in_world(s, w, ids) != BROADPHASE_OK) return false;
    broadphase_pairs want = step_ok(w);
    peer_boxes boxes = scene_boxes(s);
    long long got_count = peer_frame(p, &boxes);
    if (got_count < 0) return false;
    size_t count = 0;
    const uint64_t *keys = peer_sorted_pairs(p, &count);
    CHECK_EQ_INT(count, got_count);
    broadphase_pair *got = keys_to_pairs(keys, count);
    bool same = got && pairs_equal(want.data, want.count, got, count, "peer vs brute force");
    free(got);
    return same;
}

static void check_peer_on_scene(peer_engine engine, scene_kind kind, size_t n) {
    scene s;
    REQUIRE(scene_make(&s, kind, n, PEER_TEST_SEED));
    uint32_t *ids = malloc(n * sizeof *ids);
    broadphase_world *w =
        make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
    peer_boxes boxes = scene_boxes(&s);
    float lo[3], hi[3];
    peer_world_bounds(&boxes, n, s.dimensions, s.world_size, lo, hi);
    peer *p = peer_create(engine, s.dimensions, n, &boxes, lo, hi);
    uint64_t rng = PEER_TEST_SEED;
    CHECK(ids && w && p && scene_add_to_world(&s, w, ids) == BROADPHASE_OK);
    for (int f = 0; f < PEER_TEST_FRAMES && test_failures == 0; f++) {
        TEST_CONTEXT("peer %s scene %s n %zu seed %d frame %d", peer_engine_name(engine),
                     scene_name(kind), n, PEER_TEST_SEED, f);
        if (f > 0) {
            scene_advance(&s);
            disturb(&s, &rng);
        }
        CHECK(frame_agrees(&s, w, ids, p));
    }
    peer_destroy(p);
    broadphase_destroy(w);
    free(ids);
    scene_free(&s);
}

static void check_peer(peer_engine engine) {
    if (!peer_available(engine)) {
        printf("%s: not built (library not found), nothing to check\n", peer_engine_name(engine));
        return;
    }
    for (size_t k = 0; k < sizeof box_scenes / sizeof box_scenes[0]; k++) {
        scene_kind kind = box_scenes[k];
        if (!peer_supports(engine, scene_is_2d_kind(kind) ? 2 : 3)) {
            continue;
        }
        check_peer_on_scene(engine, kind, kind == SCENE_DENSE ? PEER_TEST_DENSE_N : PEER_TEST_N);
    }
}

TEST(bullet_dbvt) {
    check_peer(PEER_BULLET_DBVT);
}

TEST(bullet_sap) {
    check_peer(PEER_BULLET_SAP);
}

TEST(cgal) {
    check_peer(PEER_CGAL);
}

TEST(fcl) {
    check_peer(PEER_FCL);
}

TEST(box2d) {
    check_peer(PEER_BOX2D);
}

/* World bounds far smaller than the scene: the sweep and prune clamps what lies outside, which
 * must cost speed only, never pairs. */
TEST(bounds_too_small) {
    if (!peer_available(PEER_BULLET_SAP)) return;
    scene s;
    REQUIRE(scene_make(&s, SCENE_MOVING, 2000, PEER_TEST_SEED));
    uint32_t ids[2000];
    broadphase_world *w = make_world(3, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
    peer_boxes boxes = scene_boxes(&s);
    const float lo[3] = {5, 5, 5}, hi[3] = {10, 10, 10};
    peer *p = peer_create(PEER_BULLET_SAP, 3, s.count, &boxes, lo, hi);
    CHECK(w && p && scene_add_to_world(&s, w, ids) == BROADPHASE_OK);
    for (int f = 0; f < 4 && test_failures == 0; f++) {
        TEST_CONTEXT("bullet-sap, bounds [5, 10]^3, scene moving n 2000 frame %d", f);
        scene_advance(&s);
        CHECK(frame_agrees(&s, w, ids, p));
    }
    peer_destroy(p);
    broadphase_destroy(w);
    scene_free(&s);
}

/* No objects, one, and two that touch at a corner. */
TEST(tiny_counts) {
    const float x0[2] = {0, 1}, x1[2] = {1, 2};
    const float lo[3] = {-1, -1, -1}, hi[3] = {3, 3, 3};
    peer_boxes touching = {{x0, x0, x0}, {x1, x1, x1}};
    for (int e = 0; e < PEER_ENGINE_COUNT; e++) {
        for (int dims = 2; dims <= 3; dims++) {
            if (!peer_available((peer_engine)e) || !peer_supports((peer_engine)e, dims)) continue;
            for (size_t n = 0; n <= 2; n++) {
                TEST_CONTEXT("peer %s dims %d n %zu", peer_engine_name((peer_engine)e), dims, n);
                peer *p = peer_create((peer_engine)e, dims, n, &touching, lo, hi);
                REQUIRE(p);
                for (int f = 0; f < 2; f++) CHECK_EQ_INT(peer_frame(p, &touching), n == 2);
                size_t count = 0;
                const uint64_t *keys = peer_sorted_pairs(p, &count);
                if (n == 2) CHECK(count == 1 && keys[0] == 1);
                peer_destroy(p);
            }
        }
    }
}

/* ---- spatial queries ---------------------------------------------------------------------- */

#define QUERY_TEST_N 3000
#define QUERY_TEST_RANDOM 300 /* random boxes and rays per scene and frame */
#define QUERY_TEST_EXACT 100  /* queries touching objects exactly, per kind */

/* Where the engine's answers are compared with a peer's: the scene, and both sides. */
typedef struct query_bench {
    const scene *s;
    broadphase_world *w;
    peer *p;
    peer_engine engine;
    uint32_t *ids;
    broadphase_ray_hit *hits;
    peer_ray_hit *peer_hits;
    size_t capacity;
} query_bench;

static int compare_ray_hit_ids(const void *x, const void *y) {
    const broadphase_ray_hit *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

static int compare_peer_hit_ids(const void *x, const void *y) {
    const peer_ray_hit *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

/* The box query on both sides: the same ids, ascending. */
static void compare_box(query_bench *q, const float lo[3], const float hi[3], const char *what) {
    if (!peer_has_query(q->engine, PEER_QUERY_BOX)) return;
    size_t want = 0;
    CHECK_EQ_INT(broadphase_query_box(q->w, lo, hi, q->ids, q->capacity, &want), BROADPHASE_OK);
    const uint32_t *got = NULL;
    long long got_count = peer_query_box(q->p, lo, hi, &got);
    bool same = got_count == (long long)want;
    for (size_t i = 0; same && i < want; i++) same = got[i] == q->ids[i];
    if (!same) {
        test_failures++;
        fprintf(stderr,
                "%s box [%g %g %g]-[%g %g %g]: engine %zu ids (first %d), peer %lld (first %d) "
                "[%s]\n",
                what, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], want, want ? (int)q->ids[0] : -1,
                got_count, got_count > 0 ? (int)got[0] : -1, test_context);
    }
}

/* The ray on both sides, all hits and the closest: the same ids, each t within 1e-4 * max_t of
 * the engine's (the adapters compute it with the engine's formula, so it is the same to the
 * bit in practice), the peer's hits in (t, id) order. */
static void compare_ray(query_bench *q, const float o[3], const float d[3], float max_t,
                        const char *what) {
    if (!peer_has_query(q->engine, PEER_QUERY_RAY)) return;
    double tolerance = 1e-4 * max_t;
    size_t want = 0;
    CHECK_EQ_INT(broadphase_raycast(q->w, o, d, max_t, q->hits, q->capacity, &want), BROADPHASE_OK);
    const peer_ray_hit *got = NULL;
    long long got_count = peer_raycast(q->p, o, d, max_t, &got);
    bool same = got_count == (long long)want;
    for (long long i = 1; same && i < got_count; i++) {
        same = got[i - 1].t < got[i].t || (got[i - 1].t == got[i].t && got[i - 1].id < got[i].id);
    }
    if (same && want > 0) {
        memcpy(q->peer_hits, got, want * sizeof *got);
        qsort(q->hits, want, sizeof *q->hits, compare_ray_hit_ids);
        qsort(q->peer_hits, want, sizeof *q->peer_hits, compare_peer_hit_ids);
        for (size_t i = 0; same && i < want; i++) {
            same = q->peer_hits[i].id == q->hits[i].id &&
                   fabs((double)q->peer_hits[i].t - (double)q->hits[i].t) <= tolerance;
        }
    }
    broadphase_ray_hit first = {0, 0.0f};
    bool found = false;
    CHECK_EQ_INT(broadphase_raycast_closest(q->w, o, d, max_t, &first, &found), BROADPHASE_OK);
    peer_ray_hit peer_first = {0, 0.0f};
    int peer_found = peer_raycast_closest(q->p, o, d, max_t, &peer_first);
    bool same_first = peer_found == (int)found &&
                      (!found || (peer_first.id == first.id &&
                                  fabs((double)peer_first.t - (double)first.t) <= tolerance));
    if (!same || !same_first) {
        test_failures++;
        fprintf(stderr,
                "%s ray o (%g %g %g) d (%g %g %g) max_t %g: engine %zu hits, closest %d at %g; "
                "peer %lld hits%s, closest %d at %g [%s]\n",
                what, o[0], o[1], o[2], d[0], d[1], d[2], max_t, want, found ? (int)first.id : -1,
                first.t, got_count, same ? " (the same)" : "",
                peer_found > 0 ? (int)peer_first.id : peer_found, peer_first.t, test_context);
    }
}

/* Object j of the scene (a box), as the engine sees it: z is 0 in 2D. */
static void object_box(const scene *s, size_t j, float lo[3], float hi[3]) {
    for (int k = 0; k < 3; k++) {
        lo[k] = k < s->dimensions ? s->min[k][j] : 0.0f;
        hi[k] = k < s->dimensions ? s->max[k][j] : 0.0f;
    }
}

/* Random boxes (points up to large boxes with many results) and rays (random directions and
 * along the axes, short and long); boxes and rays that touch objects exactly (a box whose
 * face is an object's face, a ray that grazes an object's face and ends where it enters the
 * object, a ray of length 0 from inside an object); and queries that find nothing. */
static void compare_queries(query_bench *q, uint64_t *rng) {
    const scene *s = q->s;
    int dims = s->dimensions;
    float L = s->world_size;
    for (int i = 0; i < QUERY_TEST_RANDOM; i++) {
        float lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0}, o[3] = {0, 0, 0}, d[3] = {0, 0, 0};
        float half = i % 10 == 0 ? 0.0f : 10.0f * scene_uniform(rng);
        for (int k = 0; k < dims; k++) {
            float c = L * scene_uniform(rng);
            lo[k] = c - half;
            hi[k] = c + half;
            o[k] = L * scene_uniform(rng);
            d[k] = signed_uniform(rng, 1.0f);
        }
        if (i % 3 == 1) { /* along an axis, either way */
            int axis = i % dims;
            for (int k = 0; k < 3; k++) d[k] = k == axis ? (i % 2 ? 2.0f : -0.5f) : 0.0f;
        }
        if (d[0] == 0.0f && d[1] == 0.0f) d[0] = 1.0f;
        float max_t = (i % 4 == 0 ? 0.5f : 0.1f) * L * scene_uniform(rng);
        compare_box(q, lo, hi, "random");
        compare_ray(q, o, d, max_t, "random");
    }
    for (int i = 0; i < QUERY_TEST_EXACT; i++) {
        size_t j = (size_t)(scene_uniform(rng) * (float)s->count) % s->count;
        float lo[3], hi[3];
        object_box(s, j, lo, hi);
        /* A box resting on the object's +x face, overlapping it on the other axes. */
        float qlo[3] = {hi[0], lo[1], lo[2]}, qhi[3] = {hi[0] + 1.0f, hi[1], hi[2]};
        compare_box(q, qlo, qhi, "touching +x face");
        /* A box touching the object's -y face with its +y face, a point on an edge. */
        float ylo[3] = {lo[0] - 2.0f, lo[1] - 1.5f, lo[2]}, yhi[3] = {lo[0], lo[1], hi[2]};
        compare_box(q, ylo, yhi, "touching -y face");
        compare_box(q, lo, lo, "point at a corner");
        /* Along +x in the plane of the object's +y face, entering it at t = 3 = max_t. */
        float o[3] = {lo[0] - 3.0f, hi[1], 0.5f * (lo[2] + hi[2])}, d[3] = {1, 0, 0};
        compare_ray(q, o, d, 3.0f, "grazing, ending on the face");
        /* Along -y, ending exactly on the object's +y face. */
        float oy[3] = {0.5f * (lo[0] + hi[0]), hi[1] + 2.0f, lo[2]}, dy[3] = {0, -1, 0};
        compare_ray(q, oy, dy, 2.0f, "ending on a face");
        /* From inside the object, length 0. */
        float oc[3] = {0.5f * (lo[0] + hi[0]), 0.5f * (lo[1] + hi[1]), 0.5f * (lo[2] + hi[2])};
        float dc[3] = {signed_uniform(rng, 1.0f), 1.0f, signed_uniform(rng, 1.0f)};
        compare_ray(q, oc, dc, 0.0f, "inside, length 0");
    }
    float far_lo[3] = {-3 * L, -3 * L, -3 * L}, far_hi[3] = {-2 * L, -2 * L, -2 * L};
    compare_box(q, far_lo, far_hi, "far outside");
    float away[3] = {-1, -1, -1};
    compare_ray(q, far_hi, away, L, "pointing away");
}

/* The queries after each of a few frames: on static scenes and, in moving ones, on structures
 * whose leaves have been enlarged and moved. */
static void check_queries_on_scene(peer_engine engine, scene_kind kind) {
    scene s;
    REQUIRE(scene_make(&s, kind, QUERY_TEST_N, PEER_TEST_SEED));
    uint32_t *ids = malloc(QUERY_TEST_N * sizeof *ids);
    broadphase_world *w =
        make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
    peer_boxes boxes = scene_boxes(&s);
    float lo[3], hi[3];
    peer_world_bounds(&boxes, s.count, s.dimensions, s.world_size, lo, hi);
    peer *p = peer_create_for_queries(engine, s.dimensions, s.count, &boxes, lo, hi);
    query_bench q = {&s,
                     w,
                     p,
                     engine,
                     malloc(QUERY_TEST_N * sizeof(uint32_t)),
                     malloc(QUERY_TEST_N * sizeof(broadphase_ray_hit)),
                     malloc(QUERY_TEST_N * sizeof(peer_ray_hit)),
                     QUERY_TEST_N};
    CHECK(ids && w && p && q.ids && q.hits && q.peer_hits);
    CHECK(test_failures > 0 || scene_add_to_world(&s, w, ids) == BROADPHASE_OK);
    for (size_t i = 0; test_failures == 0 && i < s.count; i++) CHECK_EQ_INT(ids[i], i);
    uint64_t rng = PEER_TEST_SEED;
    int frames = scene_is_moving(kind) ? 4 : 1;
    for (int f = 0; f < frames && test_failures == 0; f++) {
        TEST_CONTEXT("peer %s queries, scene %s n %d seed %d frame %d", peer_engine_name(engine),
                     scene_name(kind), QUERY_TEST_N, PEER_TEST_SEED, f);
        for (int k = 0; k < (f > 0 ? 8 : 0); k++) scene_advance(&s);
        CHECK(frame_agrees(&s, w, ids, p));
        compare_queries(&q, &rng);
    }
    free(q.ids);
    free(q.hits);
    free(q.peer_hits);
    peer_destroy(p);
    broadphase_destroy(w);
    free(ids);
    scene_free(&s);
}

static void check_queries(peer_engine engine) {
    static const scene_kind scenes[] = {SCENE_UNIFORM, SCENE_MOVING, SCENE_PLANE2D, SCENE_MOVING2D};
    if (!peer_available(engine)) {
        printf("%s: not built (library not found), nothing to check\n", peer_engine_name(engine));
        return;
    }
    for (size_t k = 0; k < sizeof scenes / sizeof scenes[0]; k++) {
        if (peer_supports(engine, scene_is_2d_kind(scenes[k]) ? 2 : 3))
            check_queries_on_scene(engine, scenes[k]);
    }
}

TEST(queries_bullet_dbvt) {
    check_queries(PEER_BULLET_DBVT);
}

TEST(queries_bullet_sap) {
    check_queries(PEER_BULLET_SAP);
}

TEST(queries_fcl) {
    check_queries(PEER_FCL);
}

TEST(queries_box2d) {
    check_queries(PEER_BOX2D);
}

/* Which peers offer which queries; an empty world answers nothing; a peer without a query
 * says so. */
TEST(queries_offered) {
    CHECK(!peer_has_query(PEER_CGAL, PEER_QUERY_BOX));
    CHECK(!peer_has_query(PEER_FCL, PEER_QUERY_RAY) &&
          !peer_has_query(PEER_FCL, PEER_QUERY_CLOSEST));
    CHECK(!peer_has_query(PEER_ENGINE_COUNT, PEER_QUERY_BOX));
    const float lo[3] = {-1, -1, -1}, hi[3] = {3, 3, 3}, d[3] = {1, 0, 0};
    peer_boxes none = {{lo, lo, lo}, {hi, hi, hi}};
    for (int e = 0; e < PEER_ENGINE_COUNT; e++) {
        for (int dims = 2; dims <= 3; dims++) {
            if (!peer_available((peer_engine)e) || !peer_supports((peer_engine)e, dims)) continue;
            TEST_CONTEXT("peer %s dims %d, empty", peer_engine_name((peer_engine)e), dims);
            peer *p = peer_create_for_queries((peer_engine)e, dims, 0, &none, lo, hi);
            REQUIRE(p);
            CHECK_EQ_INT(peer_frame(p, &none), 0);
            const uint32_t *ids = NULL;
            const peer_ray_hit *hits = NULL;
            peer_ray_hit first;
            bool box = peer_has_query((peer_engine)e, PEER_QUERY_BOX);
            bool ray = peer_has_query((peer_engine)e, PEER_QUERY_RAY);
            CHECK_EQ_INT(peer_query_box(p, lo, hi, &ids), box ? 0 : -1);
            CHECK_EQ_INT(peer_raycast(p, lo, d, 4.0f, &hits), ray ? 0 : -1);
            CHECK_EQ_INT(peer_raycast_closest(p, lo, d, 4.0f, &first), ray ? 0 : -1);
            peer_destroy(p);
        }
    }
}

TEST(names) {
    CHECK(strcmp(peer_engine_name(PEER_BULLET_DBVT), "bullet-dbvt") == 0);
    CHECK(strcmp(peer_engine_name(PEER_BOX2D), "box2d") == 0);
    CHECK(!peer_supports(PEER_BOX2D, 3) && peer_supports(PEER_BOX2D, 2));
    CHECK(peer_supports(PEER_CGAL, 2) && peer_supports(PEER_FCL, 3));
    CHECK(!peer_available(PEER_ENGINE_COUNT));
}

TEST_MAIN()

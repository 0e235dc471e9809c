/* The peer adapters of perf/peers against the oracle (brute force): every box scene, 2D and 3D,
 * a few thousand objects, several frames of motion (static scenes are jittered, some objects
 * teleport, some pairs are made to touch exactly), the pair sets compared every frame. Built
 * only when CMake found at least one peer library; a test for a peer not built passes, saying
 * so. */
#include "oracle.h"
#include "peers.h"

#define PEER_TEST_N 3000
#define PEER_TEST_DENSE_N 2000
#define PEER_TEST_FRAMES 6
#define PEER_TEST_SEED 11

static const scene_kind box_scenes[] = {SCENE_UNIFORM, SCENE_CLUSTERED, SCENE_MIXED, SCENE_MOVING,
                                        SCENE_PLANE2D, SCENE_MOVING2D,  SCENE_DENSE};

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
        if (!peer_supports(engine, kind == SCENE_PLANE2D || kind == SCENE_MOVING2D ? 2 : 3)) {
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

TEST(names) {
    CHECK(strcmp(peer_engine_name(PEER_BULLET_DBVT), "bullet-dbvt") == 0);
    CHECK(strcmp(peer_engine_name(PEER_BOX2D), "box2d") == 0);
    CHECK(!peer_supports(PEER_BOX2D, 3) && peer_supports(PEER_BOX2D, 2));
    CHECK(peer_supports(PEER_CGAL, 2) && peer_supports(PEER_FCL, 3));
    CHECK(!peer_available(PEER_ENGINE_COUNT));
}

TEST_MAIN(TEST_ENTRY(bullet_dbvt), TEST_ENTRY(bullet_sap), TEST_ENTRY(cgal), TEST_ENTRY(fcl),
          TEST_ENTRY(box2d), TEST_ENTRY(bounds_too_small), TEST_ENTRY(tiny_counts),
          TEST_ENTRY(names))

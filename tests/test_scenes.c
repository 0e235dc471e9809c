/* Tests of the scene generators in perf/common/scenes.c: splitmix64 reference values, determinism
 * from the seed, valid and finite objects for every kind and size, the walls of the moving scenes,
 * the large objects of the mixed scene, and adding and moving scenes in a world. */
#include "test.h"

#include "broadphase.h"
#include "scenes.h"

#include <float.h>
#include <math.h>

static const size_t sizes[] = {0, 1, 1000};

static bool column_equal(const void *a, const void *b, size_t bytes) {
    if (!a || !b) return a == b;
    return memcmp(a, b, bytes) == 0;
}

static bool scenes_equal(const scene *a, const scene *b) {
    size_t n = a->count, f = n * sizeof(float);
    bool same = a->kind == b->kind && a->count == b->count && a->dimensions == b->dimensions &&
                a->world_size == b->world_size && column_equal(a->is_sphere, b->is_sphere, n) &&
                column_equal(a->radius, b->radius, f);
    for (int k = 0; k < 3; k++) {
        same = same && column_equal(a->min[k], b->min[k], f) &&
               column_equal(a->max[k], b->max[k], f) &&
               column_equal(a->center[k], b->center[k], f) &&
               column_equal(a->velocity[k], b->velocity[k], f) &&
               column_equal(a->half[k], b->half[k], f);
    }
    return same;
}

TEST(splitmix64_reference) {
    uint64_t state = 0;
    CHECK(scene_splitmix64(&state) == 0xE220A8397B1DCDAFull);
    CHECK(scene_splitmix64(&state) == 0x6E789E6AA1B965F4ull);
    CHECK(scene_splitmix64(&state) == 0x06C45D188009454Full);
}

TEST(uniform_in_unit_interval) {
    uint64_t state = 12345, copy = 12345;
    for (int i = 0; i < 1000000; i++) {
        float u = scene_uniform(&state);
        REQUIRE(u >= 0.0f && u < 1.0f);
        /* The documented construction: the top 24 bits, scaled. */
        REQUIRE(u == (float)(scene_splitmix64(&copy) >> 40) * 0x1p-24f);
    }
}

TEST(names_round_trip) {
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        scene_kind parsed = SCENE_KIND_COUNT;
        TEST_CONTEXT("kind %d", k);
        CHECK(scene_parse(scene_name((scene_kind)k), &parsed));
        CHECK_EQ_INT(parsed, k);
    }
    scene_kind parsed;
    CHECK(!scene_parse("no-such-scene", &parsed));
    CHECK(!scene_parse("", &parsed));
    CHECK(scene_parse("moving2d", &parsed) && parsed == SCENE_MOVING2D);
    CHECK(scene_is_moving(SCENE_MOVING) && scene_is_moving(SCENE_MOVING2D));
    CHECK(!scene_is_moving(SCENE_UNIFORM) && !scene_is_moving(SCENE_SHAPES));
}

TEST(same_seed_same_scene) {
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        scene a, b, c;
        TEST_CONTEXT("scene %s, n 1000, seeds 7 and 8", scene_name((scene_kind)k));
        REQUIRE(scene_make(&a, (scene_kind)k, 1000, 7));
        REQUIRE(scene_make(&b, (scene_kind)k, 1000, 7));
        REQUIRE(scene_make(&c, (scene_kind)k, 1000, 8));
        CHECK(scenes_equal(&a, &b));
        /* Every object of the identical scene is the same unit box, whatever the seed. */
        if (k != SCENE_IDENTICAL) CHECK(!scenes_equal(&a, &c));
        for (int f = 0; f < 10; f++) {
            scene_advance(&a);
            scene_advance(&b);
        }
        CHECK(scenes_equal(&a, &b));
        scene_free(&a);
        scene_free(&b);
        scene_free(&c);
    }
}

TEST(every_object_valid) {
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            scene s;
            size_t n = sizes[z];
            TEST_CONTEXT("scene %s, n %zu, seed 3", scene_name((scene_kind)k), n);
            REQUIRE(scene_make(&s, (scene_kind)k, n, 3));
            CHECK_EQ_INT(s.count, n);
            CHECK_EQ_INT(s.kind, k);
            CHECK(s.dimensions == 2 || s.dimensions == 3);
            CHECK(isfinite(s.world_size) && s.world_size >= 0.0f);
            CHECK((s.velocity[0] != NULL) == scene_is_moving((scene_kind)k));
            int bad = 0;
            for (size_t i = 0; i < n; i++) {
                bad += s.is_sphere[i] > 1;
                for (int d = 0; d < 3; d++) {
                    float lo = s.min[d][i], hi = s.max[d][i], c = s.center[d][i];
                    bad += !isfinite(lo) || !isfinite(hi) || !isfinite(c) || !(lo <= hi);
                    /* 2D scenes keep zero z columns, never garbage. */
                    if (d >= s.dimensions) bad += lo != 0.0f || hi != 0.0f || c != 0.0f;
                }
                if (s.is_sphere[i]) {
                    double r = s.radius[i];
                    bad += !isfinite(r) || !(r >= 0.0);
                    /* The bounding box holds the exact sphere. */
                    for (int d = 0; d < s.dimensions; d++) {
                        double c = s.center[d][i];
                        /* (the edge scenes' spheres may reach past the float range) */
                        bad += ((double)s.min[d][i] > c - r && s.min[d][i] != -FLT_MAX) ||
                               ((double)s.max[d][i] < c + r && s.max[d][i] != FLT_MAX);
                    }
                }
            }
            CHECK_EQ_INT(bad, 0);
            scene_free(&s);
        }
    }
}

TEST(shapes_and_extents) {
    scene s;
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        TEST_CONTEXT("scene %s, n 1000, seed 5", scene_name((scene_kind)k));
        REQUIRE(scene_make(&s, (scene_kind)k, 1000, 5));
        int spheres = 0, bad = 0;
        for (size_t i = 0; i < s.count; i++) spheres += s.is_sphere[i];
        switch ((scene_kind)k) {
        case SCENE_SPHERES:
            CHECK_EQ_INT(spheres, 1000);
            for (size_t i = 0; i < s.count; i++) bad += !(s.radius[i] >= 0.5f && s.radius[i] < 1);
            break;
        case SCENE_SHAPES:
        case SCENE_SHAPES2D:
        case SCENE_FAR:
        case SCENE_EDGE:
        case SCENE_EDGE2D:
            for (size_t i = 0; i < s.count; i++) bad += s.is_sphere[i] != (i & 1);
            break;
        default:
            CHECK_EQ_INT(spheres, 0);
            break;
        }
        bool is2d =
            k == SCENE_PLANE2D || k == SCENE_MOVING2D || k == SCENE_SHAPES2D || k == SCENE_EDGE2D;
        CHECK_EQ_INT(s.dimensions, is2d ? 2 : 3);
        /* Centres of the plain scenes lie in [0, L) on every used axis, half-extents [0.5, 1). */
        bool plain = k != SCENE_CLUSTERED && k != SCENE_HUGE && k != SCENE_TINY &&
                     k != SCENE_IDENTICAL && k != SCENE_MIXED && k != SCENE_FAR &&
                     k != SCENE_EDGE && k != SCENE_EDGE2D;
        int axes = k == SCENE_FLAT ? 2 : s.dimensions;
        for (size_t i = 0; plain && i < s.count; i++) {
            for (int d = 0; d < axes; d++) {
                float c = s.center[d][i];
                bad += !(c >= 0.0f && c < s.world_size);
                if (!s.is_sphere[i]) {
                    float h = (s.max[d][i] - s.min[d][i]) * 0.5f;
                    bad += !(h >= 0.49999f && h <= 1.00001f);
                }
            }
        }
        if (k == SCENE_FLAT) {
            for (size_t i = 0; i < s.count; i++) bad += s.min[2][i] != 0.0f || s.max[2][i] != 0.0f;
        }
        if (k == SCENE_IDENTICAL) {
            for (size_t i = 0; i < s.count; i++) {
                for (int d = 0; d < 3; d++) bad += s.min[d][i] != 0.0f || s.max[d][i] != 1.0f;
            }
        }
        if (k == SCENE_DENSE) CHECK(s.world_size == 2.0f);
        if (k == SCENE_HUGE) {
            float largest = 0.0f;
            for (size_t i = 0; i < s.count; i++) {
                largest = fmaxf(largest, s.max[0][i]);
                bad += !isfinite(s.min[0][i]) || !isfinite(s.max[0][i]);
            }
            CHECK(largest > 1e29f && largest < 1e31f);
        }
        if (k == SCENE_FAR) { /* centres 1e7 + [0, L) on every axis; sizes still about 1 */
            for (size_t i = 0; i < s.count; i++) {
                for (int d = 0; d < 3; d++) {
                    bad += !(s.center[d][i] >= 1e7f && s.center[d][i] <= 1e7f + s.world_size);
                    bad += !(s.max[d][i] - s.min[d][i] <= 4.0f);
                }
            }
        }
        if (k == SCENE_EDGE || k == SCENE_EDGE2D) {
            /* Objects at both ends of the float range, objects longer than FLT_MAX on some
             * axis (boxes and spheres), and spheres of radius FLT_MAX. */
            size_t low = 0, high = 0, long_boxes = 0, long_spheres = 0, radius_max = 0;
            for (size_t i = 0; i < s.count; i++) {
                bool longer = false;
                for (int d = 0; d < s.dimensions; d++) {
                    low += s.min[d][i] < -2.5e38f;
                    high += s.max[d][i] > 2.5e38f;
                    longer |= (double)s.max[d][i] - (double)s.min[d][i] > FLT_MAX;
                }
                long_boxes += longer && !s.is_sphere[i];
                long_spheres += longer && s.is_sphere[i];
                radius_max += s.is_sphere[i] && s.radius[i] == FLT_MAX;
            }
            TEST_CONTEXT("scene %s: %zu low, %zu high, %zu long boxes, %zu long spheres, %zu of "
                         "radius FLT_MAX",
                         scene_name((scene_kind)k), low, high, long_boxes, long_spheres,
                         radius_max);
            CHECK(low > 20 && high > 20 && long_boxes >= 40 && long_spheres >= 40 &&
                  radius_max >= 20);
        }
        if (k == SCENE_TINY) {
            for (size_t i = 0; i < s.count; i++) bad += fabsf(s.max[0][i]) > 1e-27f;
            CHECK(s.max[0][0] != 0.0f);
        }
        CHECK_EQ_INT(bad, 0);
        scene_free(&s);
    }
}

TEST(uniform_densities) {
    scene s;
    REQUIRE(scene_make(&s, SCENE_UNIFORM, 75000, 1));
    CHECK(fabsf(s.world_size - 100.0f) < 1e-3f); /* cbrt(75000 / 0.075) */
    scene_free(&s);
    REQUIRE(scene_make(&s, SCENE_PLANE2D, 120000, 1));
    CHECK(fabsf(s.world_size - 1000.0f) < 1e-2f); /* sqrt(120000 / 0.12) */
    scene_free(&s);
}

TEST(moving_starts_as_static_twin) {
    const scene_kind pairs[2][2] = {{SCENE_MOVING, SCENE_UNIFORM}, {SCENE_MOVING2D, SCENE_PLANE2D}};
    for (int p = 0; p < 2; p++) {
        scene m, u;
        TEST_CONTEXT("scene %s, n 1000, seed 9", scene_name(pairs[p][0]));
        REQUIRE(scene_make(&m, pairs[p][0], 1000, 9));
        REQUIRE(scene_make(&u, pairs[p][1], 1000, 9));
        size_t f = m.count * sizeof(float);
        for (int d = 0; d < 3; d++) {
            CHECK(memcmp(m.min[d], u.min[d], f) == 0 && memcmp(m.max[d], u.max[d], f) == 0);
        }
        scene_free(&m);
        scene_free(&u);
    }
}

TEST(moving_stays_inside) {
    const scene_kind kinds[] = {SCENE_MOVING, SCENE_MOVING2D};
    const size_t counts[] = {1, 2, 1000};
    for (int k = 0; k < 2; k++) {
        for (int z = 0; z < 3; z++) {
            scene s, start;
            TEST_CONTEXT("scene %s, n %zu, seed 11", scene_name(kinds[k]), counts[z]);
            REQUIRE(scene_make(&s, kinds[k], counts[z], 11));
            REQUIRE(scene_make(&start, kinds[k], counts[z], 11));
            int bad = 0;
            for (int frame = 0; frame < 500; frame++) {
                scene_advance(&s);
                for (int d = 0; d < s.dimensions; d++) {
                    for (size_t i = 0; i < s.count; i++) {
                        float c = s.center[d][i], h = s.half[d][i], v = s.velocity[d][i];
                        bad += !(c >= 0.0f && c < s.world_size);
                        bad += s.min[d][i] != c - h || s.max[d][i] != c + h;
                        bad += !(fabsf(v) <= 0.05f) || fabsf(v) != fabsf(start.velocity[d][i]);
                        bad += h != start.half[d][i];
                    }
                }
            }
            CHECK_EQ_INT(bad, 0);
            CHECK_EQ_INT(s.frame, 500);
            /* Something moved. */
            if (s.count) CHECK(s.center[0][0] != start.center[0][0]);
            scene_free(&s);
            scene_free(&start);
        }
    }
}

TEST(static_scenes_do_not_move) {
    scene s, t;
    REQUIRE(scene_make(&s, SCENE_UNIFORM, 100, 2));
    REQUIRE(scene_make(&t, SCENE_UNIFORM, 100, 2));
    scene_advance(&s);
    CHECK(scenes_equal(&s, &t));
    scene_free(&s);
    scene_free(&t);
}

TEST(mixed_large_objects) {
    scene s;
    REQUIRE(scene_make(&s, SCENE_MIXED, 20001, 4));
    int bad = 0, big = 0, huge = 0;
    for (size_t i = 0; i < s.count; i++) {
        float grow = i % 10000 == 0 ? 200.0f : i % 100 == 0 ? 20.0f : 1.0f;
        big += grow == 20.0f;
        huge += grow == 200.0f;
        for (int d = 0; d < 3; d++) {
            float h = (s.max[d][i] - s.min[d][i]) * 0.5f;
            bad += !(h >= 0.5f * grow * 0.9999f && h <= grow * 1.0001f);
        }
    }
    CHECK_EQ_INT(big, 198);
    CHECK_EQ_INT(huge, 3);
    CHECK_EQ_INT(bad, 0);
    scene_free(&s);
}

TEST(world_round_trip) {
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        scene s;
        broadphase_world *w = NULL;
        TEST_CONTEXT("scene %s, n 500, seed 6", scene_name((scene_kind)k));
        REQUIRE(scene_make(&s, (scene_kind)k, 500, 6));
        broadphase_config cfg = broadphase_config_default(s.dimensions);
        cfg.method = BROADPHASE_METHOD_BRUTE_FORCE;
        REQUIRE(broadphase_create(&cfg, &w) == BROADPHASE_OK);
        uint32_t ids[500];
        CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
        CHECK_EQ_INT(broadphase_object_count(w), 500);
        /* Runs of one kind per call: in an empty world object i gets id i. */
        int wrong = 0;
        for (uint32_t i = 0; i < 500; i++) wrong += ids[i] != i;
        CHECK_EQ_INT(wrong, 0);
        for (int f = 0; f < 3; f++) {
            scene_advance(&s);
            CHECK_EQ_INT(scene_move_in_world(&s, w, ids), BROADPHASE_OK);
            CHECK_EQ_INT(broadphase_step(w, NULL), BROADPHASE_OK);
        }
        CHECK_EQ_INT(broadphase_object_count(w), 500);
        broadphase_destroy(w);
        scene_free(&s);
    }
}

/* static_world and sleeping move only their movers (the last n/101, every 100th), and push only
 * them: a world holding the scene sees the others where they were added. */
TEST(still_worlds_move_only_their_movers) {
    static const scene_kind kinds[] = {SCENE_STATIC_WORLD, SCENE_SLEEPING};
    for (size_t ki = 0; ki < 2; ki++) {
        scene s, start;
        size_t n = 5050;
        TEST_CONTEXT("scene %s", scene_name(kinds[ki]));
        REQUIRE(scene_make(&s, kinds[ki], n, 4));
        REQUIRE(scene_make(&start, kinds[ki], n, 4));
        bool sleeping = kinds[ki] == SCENE_SLEEPING;
        CHECK_EQ_INT(s.mover_count, sleeping ? (n + 99) / 100 : n / 101);
        CHECK_EQ_INT(s.static_count, sleeping ? 0 : n - n / 101);
        for (int f = 0; f < 20; f++) scene_advance(&s);
        size_t moved = 0, bad = 0;
        for (size_t i = 0; i < n; i++) {
            bool mover = sleeping ? i % 100 == 0 : i >= n - n / 101;
            bool same = true;
            for (int k = 0; k < 3; k++)
                same &= s.min[k][i] == start.min[k][i] && s.max[k][i] == start.max[k][i];
            moved += !same;
            bad += !mover && !same;
        }
        CHECK_EQ_INT(bad, 0);
        CHECK(moved > s.mover_count * 9 / 10); /* a mover with a tiny velocity may round back */
        scene_free(&s);
        scene_free(&start);
    }
}

TEST_MAIN()

/* The oracle decides: brute force equals a naive pair-by-pair reference, and the kd-tree (every
 * update policy, several leaf sizes and depth limits) equals brute force, on every scene, in 2D
 * and 3D, boxes, spheres and both, at several sizes, for 1, 2, 3 and 8 threads. */
#include "oracle.h"

static const size_t sizes[] = {0, 1, 2, 57, 700, 2500};
static const int thread_counts[] = {1, 2, 3, 8};

static size_t scene_size_cap(scene_kind kind) {
    /* dense makes almost every pair: keep its pair count reasonable under the sanitizers. */
    return kind == SCENE_DENSE ? 700 : SIZE_MAX;
}

static void add_scene(const scene *s, broadphase_world *w, uint32_t *ids) {
    int st = scene_add_to_world(s, w, ids);
    CHECK_EQ_INT(st, BROADPHASE_OK);
}

TEST(brute_force_equals_naive) {
    pair_list want = {0};
    for (int kind = 0; kind < SCENE_KIND_COUNT; kind++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            if (n > scene_size_cap((scene_kind)kind)) continue;
            scene s;
            REQUIRE(scene_make(&s, (scene_kind)kind, n, 1000 + si));
            uint32_t *ids = malloc((n + 1) * sizeof *ids);
            for (int ti = 0; ti < 2; ti++) {
                TEST_CONTEXT("scene %s n %zu threads %d seed %zu", scene_name(s.kind), n,
                             thread_counts[ti], 1000 + si);
                broadphase_world *w = make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE,
                                                 BROADPHASE_UPDATE_AUTO, thread_counts[ti]);
                REQUIRE(w);
                add_scene(&s, w, ids);
                broadphase_pairs got = step_ok(w);
                if (ti == 0) naive_pairs(&s, ids, &want);
                CHECK(pairs_equal(want.data, want.count, got.data, got.count, "brute force"));
                broadphase_destroy(w);
            }
            free(ids);
            scene_free(&s);
        }
    }
    free(want.data);
}

/* The kd-tree with `policy` against brute force over `frames` frames of every scene. */
static void kdtree_against_brute_force(broadphase_update_policy policy, int frames) {
    for (int kind = 0; kind < SCENE_KIND_COUNT; kind++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            if (n > scene_size_cap((scene_kind)kind)) continue;
            scene s;
            REQUIRE(scene_make(&s, (scene_kind)kind, n, 77 + si));
            uint32_t *ids = malloc((n + 1) * sizeof *ids);
            broadphase_world *oracle =
                make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
            broadphase_world *trees[4];
            for (int ti = 0; ti < 4; ti++) {
                trees[ti] =
                    make_world(s.dimensions, BROADPHASE_METHOD_KDTREE, policy, thread_counts[ti]);
                REQUIRE(trees[ti]);
                add_scene(&s, trees[ti], ids);
            }
            REQUIRE(oracle);
            add_scene(&s, oracle, ids);
            for (int f = 0; f < frames; f++) {
                broadphase_pairs want = step_ok(oracle);
                for (int ti = 0; ti < 4; ti++) {
                    TEST_CONTEXT("scene %s n %zu policy %s threads %d frame %d seed %zu",
                                 scene_name(s.kind), n, policy_names[policy], thread_counts[ti], f,
                                 77 + si);
                    broadphase_pairs got = step_ok(trees[ti]);
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, "kd-tree"));
                }
                if (!scene_is_moving(s.kind)) break;
                scene_advance(&s);
                CHECK_EQ_INT(scene_move_in_world(&s, oracle, ids), BROADPHASE_OK);
                for (int ti = 0; ti < 4; ti++)
                    CHECK_EQ_INT(scene_move_in_world(&s, trees[ti], ids), BROADPHASE_OK);
            }
            for (int ti = 0; ti < 4; ti++) broadphase_destroy(trees[ti]);
            broadphase_destroy(oracle);
            free(ids);
            scene_free(&s);
        }
    }
}

TEST(kdtree_rebuild_equals_brute_force) {
    kdtree_against_brute_force(BROADPHASE_UPDATE_REBUILD, 4);
}

TEST(kdtree_refit_equals_brute_force) {
    kdtree_against_brute_force(BROADPHASE_UPDATE_REFIT, 6);
}

TEST(kdtree_auto_equals_brute_force) {
    kdtree_against_brute_force(BROADPHASE_UPDATE_AUTO, 6);
}

/* Extreme tree shapes: one object per leaf, huge leaves, depth limits that stop early. */
TEST(kdtree_tuning_extremes) {
    static const int leaf_sizes[] = {1, 2, 64, 4096};
    static const int depths[] = {1, 3, 64};
    static const scene_kind kinds[] = {SCENE_UNIFORM, SCENE_MIXED, SCENE_SHAPES2D, SCENE_IDENTICAL,
                                       SCENE_CLUSTERED};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        scene s;
        REQUIRE(scene_make(&s, kinds[ki], 1500, 5));
        uint32_t *ids = malloc(s.count * sizeof *ids);
        broadphase_world *oracle =
            make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
        add_scene(&s, oracle, ids);
        broadphase_pairs want = step_ok(oracle);
        for (size_t li = 0; li < 4; li++) {
            for (size_t di = 0; di < 3; di++) {
                TEST_CONTEXT("scene %s leaf %d depth %d", scene_name(s.kind), leaf_sizes[li],
                             depths[di]);
                broadphase_config c = broadphase_config_default(s.dimensions);
                c.leaf_size = leaf_sizes[li];
                c.max_depth = depths[di];
                c.threads = 2;
                broadphase_world *w = NULL;
                REQUIRE(broadphase_create(&c, &w) == BROADPHASE_OK);
                add_scene(&s, w, ids);
                broadphase_pairs got = step_ok(w);
                CHECK(pairs_equal(want.data, want.count, got.data, got.count, "kd-tree"));
                broadphase_destroy(w);
            }
        }
        broadphase_destroy(oracle);
        free(ids);
        scene_free(&s);
    }
}

/* The same pair array, byte for byte, for every thread count and both methods. */
TEST(determinism_across_threads) {
    static const scene_kind kinds[] = {SCENE_MOVING, SCENE_SHAPES, SCENE_MOVING2D, SCENE_MIXED};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        scene s;
        REQUIRE(scene_make(&s, kinds[ki], 4000, 9));
        uint32_t *ids = malloc(s.count * sizeof *ids);
        broadphase_world *w[5];
        for (int i = 0; i < 5; i++) {
            w[i] = make_world(s.dimensions,
                              i == 4 ? BROADPHASE_METHOD_BRUTE_FORCE : BROADPHASE_METHOD_KDTREE,
                              BROADPHASE_UPDATE_AUTO, i == 4 ? 3 : thread_counts[i]);
            REQUIRE(w[i]);
            add_scene(&s, w[i], ids);
        }
        for (int f = 0; f < 5; f++) {
            broadphase_pairs first = step_ok(w[0]);
            for (int i = 1; i < 5; i++) {
                TEST_CONTEXT("scene %s frame %d world %d", scene_name(s.kind), f, i);
                broadphase_pairs p = step_ok(w[i]);
                CHECK_EQ_INT(p.count, first.count);
                CHECK(p.count == first.count &&
                      (p.count == 0 || memcmp(p.data, first.data, p.count * sizeof *p.data) == 0));
            }
            scene_advance(&s);
            for (int i = 0; i < 5; i++) scene_move_in_world(&s, w[i], ids);
        }
        for (int i = 0; i < 5; i++) broadphase_destroy(w[i]);
        free(ids);
        scene_free(&s);
    }
}

TEST_MAIN(TEST_ENTRY(brute_force_equals_naive), TEST_ENTRY(kdtree_rebuild_equals_brute_force),
          TEST_ENTRY(kdtree_refit_equals_brute_force), TEST_ENTRY(kdtree_auto_equals_brute_force),
          TEST_ENTRY(kdtree_tuning_extremes), TEST_ENTRY(determinism_across_threads))

/* The oracle decides: brute force equals a naive pair-by-pair reference, and the kd-tree and the
 * octree (loose and strict; every update policy, several leaf sizes and depth limits) equal brute
 * force, on every scene, in 2D and 3D, boxes, spheres and both, at several sizes, for 1, 2, 3 and
 * 8 threads; the statics' field under objects that overflow it. (Statics, rest and filters on
 * every scene, for every method, are in test_methods.) */
#include "oracle.h"

#include <float.h>

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

/* One tree world of a run: its update policy, looseness (0: the default; the kd-tree ignores
 * it) and thread count. */
typedef struct tree_setting {
    broadphase_update_policy policy;
    float looseness;
    int threads;
} tree_setting;

/* Trees of `method` (one world per setting) against brute force over `frames` frames of every
 * scene; the levels are checked after every step. Scenes are capped at `identical_cap` identical
 * objects (every pair overlaps: their cost is all output). */
static void tree_against_brute_force(broadphase_method method, int frames,
                                     const tree_setting *settings, int count,
                                     size_t identical_cap) {
    const char *name = method_name(method);
    for (int kind = 0; kind < SCENE_KIND_COUNT; kind++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            if (n > scene_size_cap((scene_kind)kind)) continue;
            if (kind == SCENE_IDENTICAL && n > identical_cap) continue;
            scene s;
            REQUIRE(scene_make(&s, (scene_kind)kind, n, 77 + si));
            uint32_t *ids = malloc((n + 1) * sizeof *ids);
            broadphase_world *oracle =
                make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
            broadphase_world *trees[12];
            for (int ti = 0; ti < count; ti++) {
                trees[ti] = make_world_loose(s.dimensions, method, settings[ti].policy,
                                             settings[ti].threads, settings[ti].looseness);
                REQUIRE(trees[ti]);
                add_scene(&s, trees[ti], ids);
            }
            REQUIRE(oracle);
            add_scene(&s, oracle, ids);
            for (int f = 0; f < frames; f++) {
                broadphase_pairs want = step_ok(oracle);
                for (int ti = 0; ti < count; ti++) {
                    TEST_CONTEXT("%s looseness %g scene %s n %zu policy %s threads %d frame %d "
                                 "seed %zu",
                                 name, (double)settings[ti].looseness, scene_name(s.kind), n,
                                 policy_names[settings[ti].policy], settings[ti].threads, f,
                                 77 + si);
                    broadphase_pairs got = step_ok(trees[ti]);
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, name));
                    check_levels(trees[ti], method_branching(method, s.dimensions));
                }
                if (!scene_is_moving(s.kind)) break;
                scene_advance(&s);
                CHECK_EQ_INT(scene_move_in_world(&s, oracle, ids), BROADPHASE_OK);
                for (int ti = 0; ti < count; ti++)
                    CHECK_EQ_INT(scene_move_in_world(&s, trees[ti], ids), BROADPHASE_OK);
            }
            /* The chooser went through trials on the moving scenes (frames enough) and runs a
             * method of the list that keeps a structure. */
            for (int ti = 0; ti < count && method == BROADPHASE_METHOD_AUTO && n >= 700; ti++) {
                broadphase_stats st;
                CHECK_EQ_INT(broadphase_get_stats(trees[ti], &st), BROADPHASE_OK);
                CHECK(method_has_tree(st.method) && st.method != BROADPHASE_METHOD_AUTO);
                if (scene_is_moving(s.kind) && frames >= 100) CHECK(st.method_trials >= 3);
            }
            for (int ti = 0; ti < count; ti++) broadphase_destroy(trees[ti]);
            broadphase_destroy(oracle);
            free(ids);
            scene_free(&s);
        }
    }
}

/* The chooser (BROADPHASE_METHOD_AUTO) through its first round of trials on the moving scenes
 * (after 64 steps): it starts on the octree, tries the kd-tree and the sweep, and keeps one or goes
 * back; every frame's pairs equal brute force whatever it chose, at every policy and several thread
 * counts. */
TEST(auto_equals_brute_force_through_its_trials) {
    static const tree_setting settings[] = {{BROADPHASE_UPDATE_AUTO, 0.0f, 1},
                                            {BROADPHASE_UPDATE_REFIT, 0.0f, 3},
                                            {BROADPHASE_UPDATE_REBUILD, 1.0f, 2}};
    tree_against_brute_force(BROADPHASE_METHOD_AUTO, 100, settings, 3, 700);
}

/* The chooser under churn: besides the moving scene, a batch of boxes (each on one of the scene's
 * objects) is added every third frame and removed on the next, so that the method a trial leaves
 * waiting (for ten frames) and goes back to has missed additions and removals. */
TEST(auto_equals_brute_force_under_churn) {
    static const scene_kind kinds[] = {SCENE_MOVING, SCENE_MOVING2D};
    for (size_t ki = 0; ki < 2; ki++) {
        enum { N = 1500, FRAMES = 120, CHURN = 40 };
        scene s;
        REQUIRE(scene_make(&s, kinds[ki], N, 31 + ki));
        uint32_t ids[N], extra[CHURN];
        broadphase_world *oracle =
            make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
        broadphase_world *w =
            make_world(s.dimensions, BROADPHASE_METHOD_AUTO, BROADPHASE_UPDATE_REFIT, 2);
        REQUIRE(oracle && w);
        add_scene(&s, oracle, ids);
        add_scene(&s, w, ids);
        broadphase_world *both[2] = {oracle, w};
        float col[6][CHURN];
        broadphase_boxes b = {col[0], col[1], col[2], col[3], col[4], col[5]};
        for (int f = 0; f < FRAMES; f++) {
            TEST_CONTEXT("auto under churn, scene %s frame %d", scene_name(s.kind), f);
            broadphase_pairs want = step_ok(oracle);
            broadphase_pairs got = step_ok(w);
            CHECK(pairs_equal(want.data, want.count, got.data, got.count, "auto"));
            scene_advance(&s);
            for (int i = 0; i < CHURN; i++) {
                size_t on = ((size_t)f * 131 + (size_t)i * 37) % N;
                for (int k = 0; k < 3; k++) {
                    col[k][i] = s.dimensions > k ? s.min[k][on] : 0.0f;
                    col[3 + k][i] = s.dimensions > k ? s.max[k][on] : 0.0f;
                }
            }
            for (int wi = 0; wi < 2; wi++) {
                if (f % 3 == 1)
                    CHECK_EQ_INT(broadphase_add_boxes(both[wi], CHURN, &b, extra), BROADPHASE_OK);
                else if (f % 3 == 2)
                    CHECK_EQ_INT(broadphase_remove(both[wi], CHURN, extra), BROADPHASE_OK);
                CHECK_EQ_INT(scene_move_in_world(&s, both[wi], ids), BROADPHASE_OK);
            }
        }
        broadphase_stats st;
        CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
        CHECK(st.method_trials >= 6); /* two trials at least: the kd-tree's and the sweep's */
        broadphase_destroy(w);
        broadphase_destroy(oracle);
        scene_free(&s);
    }
}

static void kdtree_against_brute_force(broadphase_update_policy policy, int frames) {
    tree_setting settings[4];
    for (int i = 0; i < 4; i++) settings[i] = (tree_setting){policy, 0.0f, thread_counts[i]};
    tree_against_brute_force(BROADPHASE_METHOD_KDTREE, frames, settings, 4, SIZE_MAX);
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

/* The loose octree (the default looseness) and the strict one (looseness 1). REFIT, which keeps
 * the most state from step to step, runs with every thread count; REBUILD and AUTO with a few,
 * which together cover every count (determinism_across_threads compares all of them too).
 * Identical objects stop at 700 here: test_octree has 2000 of them. */
TEST(octree_refit_equals_brute_force) {
    static const tree_setting settings[] = {
        {BROADPHASE_UPDATE_REFIT, 0.0f, 1}, {BROADPHASE_UPDATE_REFIT, 0.0f, 2},
        {BROADPHASE_UPDATE_REFIT, 0.0f, 3}, {BROADPHASE_UPDATE_REFIT, 0.0f, 8},
        {BROADPHASE_UPDATE_REFIT, 1.0f, 1}, {BROADPHASE_UPDATE_REFIT, 1.0f, 3}};
    tree_against_brute_force(BROADPHASE_METHOD_OCTREE, 6, settings, 6, 700);
}

TEST(octree_rebuild_and_auto_equal_brute_force) {
    static const tree_setting settings[] = {{BROADPHASE_UPDATE_REBUILD, 0.0f, 3},
                                            {BROADPHASE_UPDATE_REBUILD, 1.0f, 2},
                                            {BROADPHASE_UPDATE_AUTO, 0.0f, 8},
                                            {BROADPHASE_UPDATE_AUTO, 0.0f, 1},
                                            {BROADPHASE_UPDATE_AUTO, 1.0f, 2}};
    tree_against_brute_force(BROADPHASE_METHOD_OCTREE, 6, settings, 5, 700);
}

/* Extreme tree shapes: one object per leaf, leaves that never split, depth limits that stop
 * early; the octree also at the strict, a middle and the loosest looseness, refitting. Each
 * world steps twice (the second step refits the unchanged tree); the depth never passes
 * max_depth, a tree whose objects all fit in one leaf is the root alone, and a crowded octree
 * splits. */
static void tuning_extremes(broadphase_method method, const scene_kind *kinds, size_t kind_count) {
    static const int leaf_sizes[] = {1, 2, 64, 4096};
    static const int depths[] = {1, 3, 64};
    static const float loosenesses[] = {1.0f, 2.0f, 4.0f};
    bool octree = method == BROADPHASE_METHOD_OCTREE;
    const char *name = octree ? "octree" : "kd-tree";
    for (size_t ki = 0; ki < kind_count; ki++) {
        scene s;
        REQUIRE(scene_make(&s, kinds[ki], 1500, 5));
        uint32_t *ids = malloc(s.count * sizeof *ids);
        broadphase_world *oracle =
            make_world(s.dimensions, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
        add_scene(&s, oracle, ids);
        broadphase_pairs want = step_ok(oracle);
        for (size_t li = 0; li < 4; li++) {
            for (size_t di = 0; di < 3; di++) {
                broadphase_config c = broadphase_config_default(s.dimensions);
                c.method = method;
                c.leaf_size = leaf_sizes[li];
                c.max_depth = depths[di];
                c.threads = 2;
                c.rest_share = 0.0f; /* the second step looks at the tree, so nothing rests */
                if (octree) {
                    c.update = BROADPHASE_UPDATE_REFIT;
                    c.looseness = loosenesses[(li + di) % 3];
                }
                TEST_CONTEXT("%s scene %s leaf %d depth %d looseness %g", name, scene_name(s.kind),
                             leaf_sizes[li], depths[di], (double)c.looseness);
                broadphase_world *w = NULL;
                REQUIRE(broadphase_create(&c, &w) == BROADPHASE_OK);
                add_scene(&s, w, ids);
                for (int step = 0; step < 2; step++) {
                    broadphase_pairs got = step_ok(w);
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, name));
                    check_levels(w, method_branching(method, s.dimensions));
                    broadphase_stats st;
                    REQUIRE(broadphase_get_stats(w, &st) == BROADPHASE_OK);
                    CHECK(st.depth <= (size_t)depths[di]);
                    if (s.count <= (size_t)leaf_sizes[li]) CHECK_EQ_INT(st.nodes, 1);
                    /* The octree splits anything crowded; identical boxes keep a kd-tree whole. */
                    if (octree && s.count > (size_t)leaf_sizes[li]) CHECK(st.nodes > 1);
                }
                broadphase_destroy(w);
            }
        }
        broadphase_destroy(oracle);
        free(ids);
        scene_free(&s);
    }
}

TEST(kdtree_tuning_extremes) {
    static const scene_kind kinds[] = {SCENE_UNIFORM, SCENE_MIXED, SCENE_SHAPES2D, SCENE_IDENTICAL,
                                       SCENE_CLUSTERED};
    tuning_extremes(BROADPHASE_METHOD_KDTREE, kinds, sizeof kinds / sizeof kinds[0]);
}

TEST(octree_tuning_extremes) {
    /* Identical objects (a million pairs each time) are left to test_octree. */
    static const scene_kind kinds[] = {SCENE_UNIFORM, SCENE_MIXED, SCENE_SHAPES2D, SCENE_FLAT,
                                       SCENE_CLUSTERED};
    tuning_extremes(BROADPHASE_METHOD_OCTREE, kinds, sizeof kinds / sizeof kinds[0]);
}

/* The same pair array, byte for byte, for every thread count and every method. */
TEST(determinism_across_threads) {
    typedef struct variant {
        broadphase_method method;
        float looseness;
        int threads;
    } variant;
    /* Every method on 1, 2, 3 and 8 threads, and the strict octree on 1 and 8. */
    enum { COUNTS = sizeof thread_counts / sizeof thread_counts[0] };
    variant variants[METHODS * COUNTS + 2];
    for (size_t i = 0; i < METHODS * COUNTS; i++)
        variants[i] = (variant){method_at(i / COUNTS), 0.0f, thread_counts[i % COUNTS]};
    variants[METHODS * COUNTS] = (variant){BROADPHASE_METHOD_OCTREE, 1.0f, 1};
    variants[METHODS * COUNTS + 1] = (variant){BROADPHASE_METHOD_OCTREE, 1.0f, 8};
    enum { VARIANTS = sizeof variants / sizeof variants[0] };
    static const scene_kind kinds[] = {SCENE_MOVING, SCENE_SHAPES, SCENE_MOVING2D, SCENE_MIXED};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        scene s;
        REQUIRE(scene_make(&s, kinds[ki], 4000, 9));
        uint32_t *ids = malloc(s.count * sizeof *ids);
        broadphase_world *w[VARIANTS];
        for (int i = 0; i < VARIANTS; i++) {
            w[i] = make_world_loose(s.dimensions, variants[i].method, BROADPHASE_UPDATE_AUTO,
                                    variants[i].threads, variants[i].looseness);
            REQUIRE(w[i]);
            add_scene(&s, w[i], ids);
        }
        for (int f = 0; f < 5; f++) {
            broadphase_pairs first = step_ok(w[0]);
            for (int i = 1; i < VARIANTS; i++) {
                TEST_CONTEXT("scene %s frame %d world %d (method %s looseness %g threads %d)",
                             scene_name(s.kind), f, i, method_name(variants[i].method),
                             (double)variants[i].looseness, variants[i].threads);
                broadphase_pairs p = step_ok(w[i]);
                CHECK_EQ_INT(p.count, first.count);
                CHECK(p.count == first.count &&
                      (p.count == 0 || memcmp(p.data, first.data, p.count * sizeof *p.data) == 0));
            }
            scene_advance(&s);
            for (int i = 0; i < VARIANTS; i++) scene_move_in_world(&s, w[i], ids);
        }
        for (int i = 0; i < VARIANTS; i++) broadphase_destroy(w[i]);
        free(ids);
        scene_free(&s);
    }
}

/* Movers that cover the whole static field: a batch's level-by-level walk overflows its
 * frontier (the queries then go one at a time, depth first) and a query's hits overflow the hit
 * buffer (emitted in pieces). Small movers ride along. Against pairs counted by hand. */
TEST(statics_under_huge_movers) {
    enum { SIDE = 16, STATICS = SIDE * SIDE * SIDE, MOVERS = 40 };
    float mn[3][STATICS + MOVERS], mx[3][STATICS + MOVERS];
    for (size_t i = 0; i < STATICS; i++) {
        size_t cell[3] = {i % SIDE, i / SIDE % SIDE, i / (SIDE * SIDE)};
        for (int k = 0; k < 3; k++) {
            mn[k][i] = 1.5f * (float)cell[k];
            mx[k][i] = mn[k][i] + 1.0f;
        }
    }
    uint64_t rng = 31;
    for (size_t j = 0; j < MOVERS; j++) {
        size_t i = STATICS + j;
        bool huge = j % 2 == 0;
        for (int k = 0; k < 3; k++) {
            float c = 24.0f * scene_uniform(&rng);
            mn[k][i] = huge ? -1.0f - c : c;
            mx[k][i] = huge ? 30.0f + c : c + 2.0f;
        }
    }
    pair_list want = {0};
    for (size_t i = 0; i < STATICS + MOVERS; i++) {
        for (size_t j = i + 1; j < STATICS + MOVERS; j++) {
            if (j < STATICS) continue; /* static-static */
            float a0[3] = {mn[0][i], mn[1][i], mn[2][i]}, a1[3] = {mx[0][i], mx[1][i], mx[2][i]};
            float b0[3] = {mn[0][j], mn[1][j], mn[2][j]}, b1[3] = {mx[0][j], mx[1][j], mx[2][j]};
            if (simd_pair_box_box(a0, a1, b0, b1, 3))
                pair_list_push(&want, (uint32_t)i, (uint32_t)j);
        }
    }
    CHECK(want.count > (MOVERS / 2) * STATICS);
    broadphase_boxes b = {mn[0], mn[1], mn[2], mx[0], mx[1], mx[2]};
    uint32_t ids[STATICS + MOVERS];
    for (size_t mi = 0; mi < METHODS; mi++) {
        for (int threads = 1; threads <= 3; threads += 2) {
            TEST_CONTEXT("method %s threads %d", method_name(method_at(mi)), threads);
            broadphase_world *w = make_world(3, method_at(mi), BROADPHASE_UPDATE_AUTO, threads);
            REQUIRE(w);
            CHECK_EQ_INT(broadphase_add_boxes(w, STATICS + MOVERS, &b, ids), BROADPHASE_OK);
            CHECK_EQ_INT(broadphase_set_static(w, STATICS, ids, true), BROADPHASE_OK);
            broadphase_pairs got = step_ok(w);
            CHECK(pairs_equal(want.data, want.count, got.data, got.count, "huge movers"));
            broadphase_destroy(w);
        }
    }
    free(want.data);
}

/* A defect found from outside: a field (static, or at rest) of unit boxes,
 * then movers longer than FLT_MAX (a sphere of radius FLT_MAX at the origin, a box
 * [-1.71e38, 1.71e38] on x, a box from -FLT_MAX to FLT_MAX on every axis), stepped. Their
 * boxes grown by the statics cache's margin overflowed to [-inf, +inf], which overlaps the
 * sentinels that pad the field's blocks: the walk then read blocks past the level's end (an
 * out-of-bounds read the AddressSanitizer build reports; elsewhere the pairs came out right).
 * Fields of 1 to 40 objects, 2D and 3D, every method, 1 and 3 threads, against the predicates. */
TEST(fields_under_objects_longer_than_floats) {
    enum { MOVERS = 3, MOST = 40 };
    static const size_t field_sizes[] = {1, 8, 9, 40};
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t fi = 0; fi < sizeof field_sizes / sizeof field_sizes[0]; fi++) {
            size_t n = field_sizes[fi];
            float mn[3][MOST + MOVERS], mx[3][MOST + MOVERS];
            for (size_t i = 0; i < n; i++) {
                for (int k = 0; k < 3; k++) {
                    mn[k][i] = k == 0 ? 3.0f * (float)i : 0.0f;
                    mx[k][i] = mn[k][i] + 1.0f;
                }
            }
            /* the movers: their boxes as the pairs below see them; the sphere's radius */
            const float sphere_c[3] = {0, 0, 0}, sphere_r = FLT_MAX;
            for (int k = 0; k < 3; k++) {
                mn[k][n] = -FLT_MAX; /* the sphere's box, clipped: only for the tests below */
                mx[k][n] = FLT_MAX;
                mn[k][n + 1] = k == 0 ? -1.71e38f : 0.0f;
                mx[k][n + 1] = k == 0 ? 1.71e38f : 1.0f;
                mn[k][n + 2] = -FLT_MAX;
                mx[k][n + 2] = FLT_MAX;
            }
            pair_list want = {0};
            for (size_t j = n; j < n + MOVERS; j++) {
                for (size_t i = 0; i < j; i++) {
                    float a0[3] = {mn[0][i], mn[1][i], mn[2][i]},
                          a1[3] = {mx[0][i], mx[1][i], mx[2][i]};
                    float b0[3] = {mn[0][j], mn[1][j], mn[2][j]},
                          b1[3] = {mx[0][j], mx[1][j], mx[2][j]};
                    int hit = j == n ? simd_pair_box_sphere(a0, a1, sphere_c, sphere_r, dims)
                                     : simd_pair_box_box(a0, a1, b0, b1, dims);
                    if (i == n) hit = simd_pair_box_sphere(b0, b1, sphere_c, sphere_r, dims);
                    if (hit) pair_list_push(&want, (uint32_t)i, (uint32_t)j);
                }
            }
            qsort(want.data, want.count, sizeof *want.data, pair_compare);
            CHECK_EQ_INT(want.count, MOVERS * n + 3); /* everything meets everything */
            for (int rest = 0; rest < 2; rest++) {
                for (size_t mi = 0; mi < METHODS; mi++) {
                    for (int threads = 1; threads <= 3; threads += 2) {
                        TEST_CONTEXT("dims %d field of %zu %s method %s threads %d", dims, n,
                                     rest ? "at rest" : "static", method_name(method_at(mi)),
                                     threads);
                        broadphase_config c =
                            test_config(dims, method_at(mi), BROADPHASE_UPDATE_AUTO, threads, 0.0f);
                        c.rest_share = 1.0f;
                        broadphase_world *w = make_world_from(&c);
                        REQUIRE(w);
                        uint32_t ids[MOST + MOVERS];
                        broadphase_boxes field = {mn[0], mn[1], mn[2], mx[0], mx[1], mx[2]};
                        CHECK_EQ_INT(broadphase_add_boxes(w, n, &field, ids), BROADPHASE_OK);
                        if (rest) {
                            step_ok(w);
                            step_ok(w);
                        } else {
                            CHECK_EQ_INT(broadphase_set_static(w, n, ids, true), BROADPHASE_OK);
                        }
                        broadphase_spheres sp = {&sphere_c[0], &sphere_c[1], &sphere_c[2],
                                                 &sphere_r};
                        CHECK_EQ_INT(broadphase_add_spheres(w, 1, &sp, ids + n), BROADPHASE_OK);
                        broadphase_boxes boxes = {mn[0] + n + 1, mn[1] + n + 1, mn[2] + n + 1,
                                                  mx[0] + n + 1, mx[1] + n + 1, mx[2] + n + 1};
                        CHECK_EQ_INT(broadphase_add_boxes(w, 2, &boxes, ids + n + 1),
                                     BROADPHASE_OK);
                        broadphase_pairs got = step_ok(w);
                        CHECK(pairs_equal(want.data, want.count, got.data, got.count, "edge"));
                        broadphase_stats st;
                        CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
                        /* the field really was there (brute force keeps no rest) */
                        if (rest && method_has_tree(method_at(mi)))
                            CHECK_EQ_INT(st.resting_objects, n);
                        if (!rest) CHECK_EQ_INT(st.static_objects, n);
                        /* a second frame, the movers pushed again as they are: the same pairs */
                        CHECK_EQ_INT(broadphase_move_boxes(w, 2, ids + n + 1, &boxes),
                                     BROADPHASE_OK);
                        got = step_ok(w);
                        CHECK(pairs_equal(want.data, want.count, got.data, got.count, "edge"));
                        broadphase_destroy(w);
                    }
                }
            }
            free(want.data);
        }
    }
}

/* The tree objects' cached neighbourhoods in the static field (statics.h) over many frames:
 * movers that creep (their cache reused), that leave their fat box (filled again), that cross a
 * packed cluster of small statics (too many to cache: the field walked), statics turned movers
 * and back in waves (the field rebuilt; entries made for new objects until the cache starts
 * again), in 2D and 3D, every method at 1 and 3 threads, each step against the naive reference. */
TEST(statics_cache_across_frames) {
    enum { GRID3 = 12, GRID2 = 40, CLUSTER = 64, MOVERS = 300, FRAMES = 60, WORLDS = 2 * METHODS };
    for (int dims = 2; dims <= 3; dims++) {
        size_t grid = dims == 3 ? GRID3 * GRID3 * GRID3 : GRID2 * GRID2;
        size_t statics = grid + CLUSTER, n = statics + MOVERS;
        float *col[6], *vel[3];
        for (int k = 0; k < 6; k++) col[k] = calloc(n, sizeof(float));
        for (int k = 0; k < 3; k++) vel[k] = calloc(n, sizeof(float));
        uint8_t *is_static = calloc(n, 1);
        uint32_t *ids = calloc(n, sizeof(uint32_t)), *pick = calloc(n, sizeof(uint32_t));
        size_t side = dims == 3 ? GRID3 : GRID2;
        float extent = 1.5f * (float)side;
        uint64_t rng = 77 + (uint64_t)dims;
        for (size_t i = 0; i < n; i++) {
            for (int k = 0; k < dims; k++) {
                float lo, size;
                if (i < grid) { /* a grid of unit boxes 1.5 apart */
                    size_t cell = k == 0 ? i % side : k == 1 ? i / side % side : i / (side * side);
                    lo = 1.5f * (float)cell;
                    size = 1.0f;
                } else if (i < statics) { /* a packed cluster of small ones near the middle */
                    lo = extent * 0.5f + scene_uniform(&rng);
                    size = 0.2f;
                } else { /* movers, a few large */
                    lo = extent * scene_uniform(&rng);
                    size = (i % 37 == 0 ? 4.0f : 0.3f) + 1.7f * scene_uniform(&rng);
                    vel[k][i] = 0.4f * (scene_uniform(&rng) - 0.5f);
                }
                col[k][i] = lo;
                col[3 + k][i] = lo + size;
            }
            is_static[i] = i < statics;
        }
        broadphase_world *w[WORLDS];
        for (int v = 0; v < WORLDS; v++) {
            w[v] =
                make_world(dims, method_at((size_t)v / 2), BROADPHASE_UPDATE_AUTO, v % 2 ? 3 : 1);
            REQUIRE(w[v]);
            broadphase_boxes b = {col[0], col[1], col[2], col[3], col[4], col[5]};
            CHECK_EQ_INT(broadphase_add_boxes(w[v], n, &b, ids), BROADPHASE_OK);
            for (size_t i = 0; i < n; i++) pick[i] = (uint32_t)i;
            CHECK_EQ_INT(broadphase_set_static(w[v], statics, ids, true), BROADPHASE_OK);
        }
        pair_list want = {0};
        size_t cached_pairs = 0;
        for (int f = 0; f < FRAMES; f++) {
            /* Frames 20 to 29: a new wave of 200 grid statics becomes movers (standing still),
             * and the wave before goes back to static. */
            if (f >= 20 && f < 31) {
                size_t on = 0, off = 0;
                for (size_t i = 0; i < grid; i++) {
                    bool now = f < 30 && i % 11 == (size_t)(f - 20);
                    bool before = f > 20 && i % 11 == (size_t)(f - 21);
                    if (now) pick[on++] = ids[i];
                    if (before) pick[grid + off++] = ids[i];
                    if (now) is_static[i] = 0;
                    if (before) is_static[i] = 1;
                }
                for (int v = 0; v < WORLDS; v++) {
                    CHECK_EQ_INT(broadphase_set_static(w[v], off, pick + grid, true),
                                 BROADPHASE_OK);
                    CHECK_EQ_INT(broadphase_set_static(w[v], on, pick, false), BROADPHASE_OK);
                }
            }
            for (size_t i = statics; i < n; i++) {
                for (int k = 0; k < dims; k++) {
                    float size = col[3 + k][i] - col[k][i];
                    float lo = col[k][i] + vel[k][i];
                    if (lo < -2.0f || lo > extent + 2.0f) vel[k][i] = -vel[k][i];
                    col[k][i] = lo;
                    col[3 + k][i] = lo + size;
                }
            }
            broadphase_boxes mb = {col[0] + statics, col[1] + statics, col[2] + statics,
                                   col[3] + statics, col[4] + statics, col[5] + statics};
            want.count = 0;
            for (size_t i = 0; i < n; i++) {
                if (is_static[i]) continue;
                float a0[3] = {col[0][i], col[1][i], col[2][i]},
                      a1[3] = {col[3][i], col[4][i], col[5][i]};
                for (size_t j = 0; j < n; j++) {
                    if (j == i || (!is_static[j] && j < i)) continue;
                    float b0[3] = {col[0][j], col[1][j], col[2][j]},
                          b1[3] = {col[3][j], col[4][j], col[5][j]};
                    if (simd_pair_box_box(a0, a1, b0, b1, dims))
                        pair_list_push(&want, ids[i], ids[j]);
                }
            }
            qsort(want.data, want.count, sizeof *want.data, pair_compare);
            for (size_t p = 0; p < want.count; p++)
                cached_pairs += want.data[p].a < statics || want.data[p].b < statics;
            for (int v = 0; v < WORLDS; v++) {
                TEST_CONTEXT("dims %d method %s threads %d frame %d", dims,
                             method_name(method_at((size_t)v / 2)), v % 2 ? 3 : 1, f);
                CHECK_EQ_INT(broadphase_move_boxes(w[v], MOVERS, ids + statics, &mb),
                             BROADPHASE_OK);
                broadphase_pairs got = step_ok(w[v]);
                CHECK(pairs_equal(want.data, want.count, got.data, got.count, "cached field"));
            }
        }
        TEST_CONTEXT("dims %d: %zu pairs with a static over the frames", dims, cached_pairs);
        CHECK(cached_pairs > 2000);
        for (int v = 0; v < WORLDS; v++) broadphase_destroy(w[v]);
        free(want.data);
        for (int k = 0; k < 6; k++) free(col[k]);
        for (int k = 0; k < 3; k++) free(vel[k]);
        free(is_static);
        free(ids);
        free(pick);
    }
}

/* More tree objects than the cache keeps entries for (statics.h): those beyond walk the field as
 * before. Movers on a grid, each overlapping only the static beside it, over steps that move
 * them within reach of it; against the pairs known by construction. */
TEST(statics_cache_beyond_its_room) {
    enum { SIDE = 42, CELLS = SIDE * SIDE * SIDE, N = 2 * CELLS };
    float *col[6];
    for (int k = 0; k < 6; k++) col[k] = malloc(N * sizeof(float));
    uint32_t *ids = malloc(N * sizeof(uint32_t));
    REQUIRE(col[5] && ids);
    for (size_t i = 0; i < N; i++) {
        size_t cell = i % CELLS;
        size_t at[3] = {cell % SIDE, cell / SIDE % SIDE, cell / (SIDE * SIDE)};
        for (int k = 0; k < 3; k++) {
            col[k][i] = 3.0f * (float)at[k] + (i < CELLS ? 0.5f : 0.0f);
            col[3 + k][i] = col[k][i] + 1.0f;
        }
    }
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        for (int threads = 1; threads <= 3; threads += 2) {
            TEST_CONTEXT("method %s threads %d", method_name(method_at(mi)), threads);
            broadphase_world *w = make_world(3, method_at(mi), BROADPHASE_UPDATE_AUTO, threads);
            REQUIRE(w);
            broadphase_boxes b = {col[0], col[1], col[2], col[3], col[4], col[5]};
            CHECK_EQ_INT(broadphase_add_boxes(w, N, &b, ids), BROADPHASE_OK);
            CHECK_EQ_INT(broadphase_set_static(w, CELLS, ids, true), BROADPHASE_OK);
            for (int f = 0; f < 3; f++) {
                float shift[3] = {0.3f * (float)f, -0.2f * (float)f, 0.1f * (float)f};
                for (int k = 0; k < 3; k++) {
                    for (size_t i = CELLS; i < N; i++) {
                        col[k][i] = 3.0f * (float)((i % CELLS) /
                                                   (k == 0   ? 1
                                                    : k == 1 ? SIDE
                                                             : SIDE * SIDE) %
                                                   SIDE) +
                                    shift[k];
                        col[3 + k][i] = col[k][i] + 1.0f;
                    }
                }
                broadphase_boxes mb = {col[0] + CELLS, col[1] + CELLS, col[2] + CELLS,
                                       col[3] + CELLS, col[4] + CELLS, col[5] + CELLS};
                CHECK_EQ_INT(broadphase_move_boxes(w, CELLS, ids + CELLS, &mb), BROADPHASE_OK);
                broadphase_pairs got = step_ok(w);
                bool right = got.count == CELLS;
                for (size_t p = 0; right && p < got.count; p++)
                    right = got.data[p].a == ids[p] && got.data[p].b == ids[CELLS + p];
                CHECK(right);
            }
            broadphase_destroy(w);
        }
    }
    for (int k = 0; k < 6; k++) free(col[k]);
    free(ids);
}

TEST_MAIN()

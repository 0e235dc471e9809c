/* Neighbourhoods: the neighbour rows against the pairs they come from (every method, 2D and 3D,
 * boxes and spheres, 1..4 threads, identical across thread counts, no allocation once grown), the
 * update without pairs against a twin world that only steps (the same pairs and events, frame by
 * frame, with adds, removes, statics and objects at rest between) and against the queries'
 * reference, and the nearest search with a greatest distance by hand (its random cases are in
 * query_oracle.h, run over every method and scene by test_methods and test_query). */
#include "crowd.h"
#include "neighbourhoods.h"
#include "overlap.h"
#include "world.h"
#include "query_oracle.h"

#include <float.h>
#include <math.h>

static uint64_t allocations(const broadphase_world *w) {
    broadphase_stats st;
    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
    return st.allocations;
}

/* A 3D scene made, and added to a new world of method mi (2 threads) and to the mirror; the
 * ids in *ids (the caller frees them, the world, the mirror and the scene). */
static broadphase_world *mirrored(scene *sc, scene_kind kind, size_t n, uint64_t seed, size_t mi,
                                  mirror *m, uint32_t **ids) {
    *ids = malloc(n * sizeof **ids);
    broadphase_world *w = make_world(3, method_at(mi), BROADPHASE_UPDATE_AUTO, 2);
    if (!*ids || !w || !scene_make(sc, kind, n, seed)) {
        fprintf(stderr, "set-up failed [%s]\n", test_context);
        exit(1);
    }
    add_scene_mirrored(sc, w, *ids, m);
    return w;
}

/* Rows equal the pairs for every method, dimension and thread count, and are the same bytes for
 * every thread count; a second call gives the same rows without making them again. */
TEST(neighbour_rows_equal_the_pairs) {
    static const scene_kind kinds[] = {SCENE_SHAPES, SCENE_SHAPES2D, SCENE_CLUSTERED,
                                       SCENE_IDENTICAL};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        scene sc;
        size_t n = kinds[ki] == SCENE_IDENTICAL ? 60 : 3000;
        REQUIRE(scene_make(&sc, kinds[ki], n, 5 + ki));
        uint32_t *ids = malloc(n * sizeof *ids);
        for (size_t mi = 0; mi < METHODS; mi++) {
            size_t *first_offsets = NULL;
            uint32_t *first_ids = NULL;
            size_t first_count = 0;
            for (int threads = 1; threads <= 4; threads++) {
                TEST_CONTEXT("scene %zu method %s threads %d", ki, method_name(method_at(mi)),
                             threads);
                broadphase_world *w =
                    make_world(sc.dimensions, method_at(mi), BROADPHASE_UPDATE_AUTO, threads);
                REQUIRE(w);
                CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
                broadphase_neighbour_rows rows;
                /* before the first step: a row for every id, all empty */
                CHECK_EQ_INT(broadphase_neighbours(w, &rows), BROADPHASE_OK);
                CHECK_EQ_INT(rows.count, n);
                CHECK(rows_equal_pairs(NULL, 0, &rows, n, "before a step"));
                broadphase_pairs p = step_ok(w);
                CHECK_EQ_INT(broadphase_neighbours(w, &rows), BROADPHASE_OK);
                CHECK(rows_equal_pairs(p.data, p.count, &rows, n, "rows"));
                uint64_t before = allocations(w);
                broadphase_neighbour_rows again;
                CHECK_EQ_INT(broadphase_neighbours(w, &again), BROADPHASE_OK);
                CHECK(again.offsets == rows.offsets && again.ids == rows.ids &&
                      again.count == rows.count);
                CHECK_EQ_INT(allocations(w), before);
                if (threads == 1) {
                    first_count = rows.count;
                    first_offsets = malloc((rows.count + 1) * sizeof *first_offsets);
                    first_ids = malloc((rows.offsets[rows.count] + 1) * sizeof *first_ids);
                    memcpy(first_offsets, rows.offsets, (rows.count + 1) * sizeof *first_offsets);
                    memcpy(first_ids, rows.ids, rows.offsets[rows.count] * sizeof *first_ids);
                } else {
                    CHECK_EQ_INT(rows.count, first_count);
                    CHECK(rows.count == first_count &&
                          memcmp(rows.offsets, first_offsets,
                                 (rows.count + 1) * sizeof *first_offsets) == 0 &&
                          memcmp(rows.ids, first_ids,
                                 rows.offsets[rows.count] * sizeof *first_ids) == 0);
                }
                /* Objects added after the step: rows for their ids, empty; the rows still show
                 * the step's pairs. Then a step takes them in. */
                float lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
                broadphase_boxes b = {&lo[0], &lo[1], &lo[2], &hi[0], &hi[1], &hi[2]};
                uint32_t extra[1];
                CHECK_EQ_INT(broadphase_add_boxes(w, 1, &b, extra), BROADPHASE_OK);
                CHECK_EQ_INT(broadphase_neighbours(w, &rows), BROADPHASE_OK);
                CHECK_EQ_INT(rows.count, n + 1);
                CHECK(rows_equal_pairs(p.data, p.count, &rows, n + 1, "rows after an add"));
                p = step_ok(w);
                CHECK_EQ_INT(broadphase_neighbours(w, &rows), BROADPHASE_OK);
                CHECK(rows_equal_pairs(p.data, p.count, &rows, n + 1, "rows after its step"));
                broadphase_destroy(w);
            }
            free(first_offsets);
            free(first_ids);
        }
        free(ids);
        scene_free(&sc);
    }
    CHECK_EQ_INT(broadphase_neighbours(NULL, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
}

/* Stepping a moving world and asking for its rows every frame allocates nothing once the buffers
 * have grown to the largest lists. */
TEST(neighbour_rows_allocate_nothing_in_steady_state) {
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        scene sc;
        REQUIRE(scene_make(&sc, SCENE_MOVING, 4000, 3));
        broadphase_config c = test_config(3, method_at(mi), BROADPHASE_UPDATE_AUTO, 2, 0);
        c.fixed_threads = true;
        broadphase_world *w = make_world_from(&c);
        REQUIRE(w);
        uint32_t *ids = malloc(sc.count * sizeof *ids);
        CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
        uint64_t steady = 0;
        for (int f = 0; f < 60; f++) {
            TEST_CONTEXT("method %s frame %d", method_name(method_at(mi)), f);
            broadphase_pairs p = step_ok(w);
            broadphase_neighbour_rows rows;
            CHECK_EQ_INT(broadphase_neighbours(w, &rows), BROADPHASE_OK);
            if (f % 10 == 0) CHECK(rows_equal_pairs(p.data, p.count, &rows, sc.count, "rows"));
            if (f == 40) steady = allocations(w);
            if (f > 40) CHECK_EQ_INT(allocations(w), steady);
            scene_advance(&sc);
            CHECK_EQ_INT(scene_move_in_world(&sc, w, ids), BROADPHASE_OK);
        }
        broadphase_destroy(w);
        free(ids);
        scene_free(&sc);
    }
}

/* A moving world stepped every frame and asked every kind of batch each frame (Morton-ordered:
 * more than ORDER_MIN queries; boxes, balls, rays, closest rays, nearest, nearest within):
 * once the sizes have settled, the batches allocate nothing; the world keeps their working
 * memory. Nothing, that is, but a worker's result buffer growing when its share of a batch
 * passes what it ever held: the chunks go to whichever worker is free (more to one when the
 * other is held up, as under ctest -j2), so that can come late, but once per worker and kind of
 * rows at most (it grows past the last batch's whole), where the memory made anew each batch
 * would be dozens of allocations a frame. */
TEST(batches_allocate_nothing_in_steady_state) {
    for (size_t mi = 0; mi < METHODS; mi++) {
        scene sc;
        REQUIRE(scene_make(&sc, SCENE_MOVING, 3000, 7));
        broadphase_config c = test_config(3, method_at(mi), BROADPHASE_UPDATE_AUTO, 2, 0);
        c.fixed_threads = true;
        broadphase_world *w = make_world_from(&c);
        REQUIRE(w);
        size_t n = sc.count, k = 4, cap = 64 * n;
        uint32_t *ids = malloc(n * sizeof *ids), *out = malloc(cap * sizeof *out);
        size_t *offsets = malloc((n + 1) * sizeof *offsets), *counts = malloc(n * sizeof *counts);
        float *d2 = malloc(n * k * sizeof *d2), *radius = malloc(n * sizeof *radius);
        float *dir[3], *max_t = malloc(n * sizeof *max_t);
        broadphase_ray_hit *hits = malloc(cap * sizeof *hits),
                           *closest = malloc(n * sizeof *closest);
        for (int a = 0; a < 3; a++) dir[a] = malloc(n * sizeof(float));
        REQUIRE(ids && out && offsets && counts && d2 && radius && max_t && hits && closest);
        for (size_t i = 0; i < n; i++) {
            radius[i] = 0.02f * sc.world_size;
            max_t[i] = 0.1f * sc.world_size;
            for (int a = 0; a < 3; a++) dir[a][i] = a == (int)(i % 3) ? 1.0f : 0.25f;
        }
        CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
        uint64_t steady = 0;
        for (int f = 0; f < 60; f++) {
            TEST_CONTEXT("method %s frame %d", method_name(method_at(mi)), f);
            step_ok(w);
            broadphase_boxes b = {sc.min[0], sc.min[1], sc.min[2], sc.max[0], sc.max[1], sc.max[2]};
            broadphase_spheres balls = {sc.min[0], sc.min[1], sc.min[2], radius};
            broadphase_points pts = {sc.max[0], sc.max[1], sc.max[2]};
            broadphase_rays rays = {sc.min[0], sc.min[1], sc.min[2], dir[0], dir[1], dir[2], max_t};
            broadphase_id_rows rows = {offsets, out, cap, 0, 0};
            CHECK_EQ_INT(broadphase_query_boxes(w, n, &b, &rows), BROADPHASE_OK);
            rows = (broadphase_id_rows){offsets, out, cap, 0, 0};
            CHECK_EQ_INT(broadphase_query_spheres(w, n, &balls, &rows), BROADPHASE_OK);
            CHECK(rows.total >= n / 2); /* (not an empty run) */
            broadphase_hit_rows hr = {offsets, hits, cap, 0, 0};
            CHECK_EQ_INT(broadphase_raycasts(w, n, &rays, &hr), BROADPHASE_OK);
            CHECK_EQ_INT(broadphase_raycasts_closest(w, n, &rays, closest, NULL), BROADPHASE_OK);
            CHECK_EQ_INT(broadphase_nearest_many(w, n, &pts, k, out, d2, counts, NULL),
                         BROADPHASE_OK);
            CHECK_EQ_INT(
                broadphase_nearest_many_within(w, n, &pts, k, radius[0], out, NULL, counts, NULL),
                BROADPHASE_OK);
            if (f == 20) steady = allocations(w);
            scene_advance(&sc);
            CHECK_EQ_INT(scene_move_in_world(&sc, w, ids), BROADPHASE_OK);
        }
        CHECK(allocations(w) - steady <= 2 * 3); /* two workers, boxes, balls and rays */
        broadphase_destroy(w);
        for (int a = 0; a < 3; a++) free(dir[a]);
        free(ids);
        free(out);
        free(offsets);
        free(counts);
        free(d2);
        free(radius);
        free(max_t);
        free(hits);
        free(closest);
        scene_free(&sc);
    }
}

/* Two worlds given the same changes, frame by frame: A only steps; B also brings its structures
 * up to date between (after some of the changes, or all of them) and is queried there. Their
 * pairs and events are the same at every step, and B's queries after each update equal the
 * reference. */
TEST(update_without_pairs_matches_a_world_that_only_steps) {
    scratch qs = {0};
    for (size_t mi = 0; mi < METHODS; mi++) {
        for (int dims = 2; dims <= 3; dims++) {
            for (int rest = 0; rest < 2; rest++) {
                TEST_CONTEXT("method %s dims %d rest %d", method_name(method_at(mi)), dims, rest);
                scene sc;
                REQUIRE(scene_make(&sc, dims == 3 ? SCENE_SHAPES : SCENE_SHAPES2D, 1500, 21));
                broadphase_config c =
                    test_config(dims, method_at(mi), BROADPHASE_UPDATE_AUTO, 2, 0);
                c.pair_events = true;
                c.rest_share = rest ? 0.5f : 0.0f;
                broadphase_world *a = make_world_from(&c), *b = make_world_from(&c);
                REQUIRE(a && b);
                mirror ma = {.dims = dims}, mb = {.dims = dims};
                uint32_t *ids = malloc(sc.count * sizeof *ids);
                add_scene_mirrored(&sc, a, ids, &ma);
                add_scene_mirrored(&sc, b, ids, &mb);
                uint64_t rng = 77;
                broadphase_stats st;
                uint64_t updates = 0;
                size_t most_at_rest = 0;
                for (int f = 0; f < 14 && !test_failures; f++) {
                    TEST_CONTEXT("method %s dims %d rest %d frame %d", method_name(method_at(mi)),
                                 dims, rest, f);
                    uint64_t r0 = rng, r1 = rng;
                    /* the first changes; most objects stay still, so that some come to rest */
                    move_some(a, &ma, 9, (size_t)f % 9, &r0);
                    move_some(b, &mb, 9, (size_t)f % 9, &r1);
                    if (f % 4 == 2) {
                        remove_some(a, &ma, 31, (size_t)f);
                        remove_some(b, &mb, 31, (size_t)f);
                        add_some(a, &ma, 6, &r0);
                        add_some(b, &mb, 6, &r1);
                    }
                    if (f == 5) {
                        uint32_t s[3] = {3, 10, 17};
                        CHECK_EQ_INT(broadphase_set_static(a, 3, s, true), BROADPHASE_OK);
                        CHECK_EQ_INT(broadphase_set_static(b, 3, s, true), BROADPHASE_OK);
                    }
                    if (f % 3 != 0) { /* B: up to date, queried, and updated again: nothing */
                        CHECK_EQ_INT(broadphase_update(b), BROADPHASE_OK);
                        CHECK_EQ_INT(broadphase_get_stats(b, &st), BROADPHASE_OK);
                        CHECK_EQ_INT(st.updates, ++updates);
                        check_queries(b, &mb, 6, 100 + (uint64_t)f, &qs);
                        CHECK_EQ_INT(broadphase_update(b), BROADPHASE_OK);
                        CHECK_EQ_INT(broadphase_get_stats(b, &st), BROADPHASE_OK);
                        CHECK_EQ_INT(st.updates, updates);
                    }
                    if (f % 3 == 2) { /* more changes after the update, some to the same objects */
                        move_some(a, &ma, 13, 1, &r0);
                        move_some(b, &mb, 13, 1, &r1);
                        add_some(a, &ma, 2, &r0);
                        add_some(b, &mb, 2, &r1);
                        check_queries(b, &mb, 4, 200 + (uint64_t)f, &qs);
                    }
                    rng = r0;
                    broadphase_pairs pa = step_ok(a), pb = step_ok(b);
                    CHECK(pairs_equal(pa.data, pa.count, pb.data, pb.count, "pairs"));
                    CHECK(same_events(a, b));
                    broadphase_stats sa;
                    CHECK_EQ_INT(broadphase_get_stats(a, &sa), BROADPHASE_OK);
                    CHECK_EQ_INT(broadphase_get_stats(b, &st), BROADPHASE_OK);
                    CHECK_EQ_INT(st.resting_objects, sa.resting_objects);
                    if (st.resting_objects > most_at_rest) most_at_rest = st.resting_objects;
                    /* a step right after an update searches what it left: no update of its own */
                    if (f % 3 == 1) CHECK(st.update_ms == 0.0);
                }
                if (rest && method_has_tree(method_at(mi)))
                    CHECK(most_at_rest > 0); /* the rest took part */
                broadphase_destroy(a);
                broadphase_destroy(b);
                mirror_free(&ma);
                mirror_free(&mb);
                free(ids);
                scene_free(&sc);
            }
        }
    }
    scratch_free(&qs);
    CHECK_EQ_INT(broadphase_update(NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
}

/* An update before any step: the queries see every object from the structures, and the first
 * step's pairs are right. */
TEST(update_before_the_first_step) {
    scratch qs = {0};
    for (size_t mi = 0; mi < METHODS; mi++) {
        TEST_CONTEXT("method %s", method_name(method_at(mi)));
        scene sc;
        mirror m = {.dims = 3};
        uint32_t *ids;
        broadphase_world *w = mirrored(&sc, SCENE_SHAPES, 1200, 4, mi, &m, &ids);
        CHECK_EQ_INT(broadphase_update(w), BROADPHASE_OK);
        CHECK(broadphase_last_pairs(w).count == 0);
        check_queries(w, &m, 8, 5, &qs);
        pair_list want = {0};
        naive_pairs(&sc, ids, &want);
        broadphase_pairs p = step_ok(w);
        CHECK(pairs_equal(want.data, want.count, p.data, p.count, "first step after an update"));
        free(want.data);
        broadphase_destroy(w);
        mirror_free(&m);
        free(ids);
        scene_free(&sc);
    }
    scratch_free(&qs);
}

/* After an update the queries find every object in the structures: the first query gathers
 * nothing (and so allocates nothing), where without the update it gathers the changed objects
 * into a field of their own. */
TEST(queries_after_an_update_gather_nothing) {
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        TEST_CONTEXT("method %s", method_name(method_at(mi)));
        scene sc;
        mirror m = {.dims = 3};
        uint32_t *ids;
        broadphase_world *w = mirrored(&sc, SCENE_UNIFORM, 3000, 8, mi, &m, &ids);
        step_ok(w);
        uint64_t rng = 5;
        float lo[3] = {1, 1, 1}, hi[3] = {3, 3, 3};
        uint32_t out[256];
        size_t n = 0;
        /* without an update: the first query gathers the 1,500 changed objects */
        move_some(w, &m, 2, 0, &rng);
        uint64_t before = allocations(w);
        CHECK_EQ_INT(broadphase_query_box(w, lo, hi, out, 256, &n), BROADPHASE_OK);
        CHECK(allocations(w) > before);
        /* with one: nothing to gather */
        move_some(w, &m, 2, 1, &rng);
        CHECK_EQ_INT(broadphase_update(w), BROADPHASE_OK);
        before = allocations(w);
        CHECK_EQ_INT(broadphase_query_box(w, lo, hi, out, 256, &n), BROADPHASE_OK);
        CHECK_EQ_INT(allocations(w), before);
        scratch qs = {0};
        check_queries(w, &m, 6, 9, &qs);
        scratch_free(&qs);
        broadphase_destroy(w);
        mirror_free(&m);
        free(ids);
        scene_free(&sc);
    }
}

/* The greatest distance by hand: closed, 0 takes only what holds the point, a bad one is refused
 * (the batch names no query), INFINITY is the plain search. */
TEST(nearest_within_by_hand) {
    for (size_t mi = 0; mi < METHODS; mi++) {
        TEST_CONTEXT("method %s", method_name(method_at(mi)));
        broadphase_world *w = make_world(2, method_at(mi), BROADPHASE_UPDATE_AUTO, 2);
        REQUIRE(w);
        /* unit boxes whose near faces are 0, 1, 2, 3 and 4 from the origin along x */
        float lx[5] = {-0.5f, 1, 2, 3, 4}, ly[5] = {-0.5f, 0, 0, 0, 0};
        float hx[5] = {0.5f, 2, 3, 4, 5}, hy[5] = {0.5f, 1, 1, 1, 1};
        broadphase_boxes b = {lx, ly, NULL, hx, hy, NULL};
        uint32_t ids[5];
        CHECK_EQ_INT(broadphase_add_boxes(w, 5, &b, ids), BROADPHASE_OK);
        if (mi % 2) step_ok(w); /* from the structures, or from the changed objects */
        float at[3] = {0, 0, 0};
        uint32_t got[8];
        float d2[8];
        size_t n = 99;
        CHECK_EQ_INT(broadphase_nearest_within(w, at, 8, 2.0f, got, d2, &n), BROADPHASE_OK);
        CHECK_EQ_INT(n, 3); /* 0, 1 and exactly 2 */
        CHECK(n == 3 && got[0] == 0 && got[1] == 1 && got[2] == 2 && d2[2] == 4.0f);
        CHECK_EQ_INT(broadphase_nearest_within(w, at, 2, 2.0f, got, d2, &n), BROADPHASE_OK);
        CHECK_EQ_INT(n, 2);
        CHECK_EQ_INT(broadphase_nearest_within(w, at, 8, nextafterf(2.0f, 0.0f), got, d2, &n),
                     BROADPHASE_OK);
        CHECK_EQ_INT(n, 2);
        CHECK_EQ_INT(broadphase_nearest_within(w, at, 8, 0.0f, got, d2, &n), BROADPHASE_OK);
        CHECK(n == 1 && got[0] == 0);
        CHECK_EQ_INT(broadphase_nearest_within(w, at, 8, INFINITY, got, d2, &n), BROADPHASE_OK);
        CHECK_EQ_INT(n, 5);
        CHECK_EQ_INT(broadphase_nearest_within(w, at, 8, -1.0f, got, d2, &n),
                     BROADPHASE_ERROR_NEGATIVE_RADIUS);
        CHECK_EQ_INT(broadphase_nearest_within(w, at, 8, NAN, got, d2, &n),
                     BROADPHASE_ERROR_NONFINITE);
        /* the batch: one greatest distance for every point */
        float px[2] = {0, 6}, py[2] = {0, 0.5f};
        broadphase_points pts = {px, py, NULL};
        uint32_t many[2 * 8];
        float many_d2[2 * 8];
        size_t counts[2], bad = 0;
        CHECK_EQ_INT(
            broadphase_nearest_many_within(w, 2, &pts, 8, 1.0f, many, many_d2, counts, &bad),
            BROADPHASE_OK);
        CHECK(counts[0] == 2 && counts[1] == 1 && many[8] == 4 && bad == SIZE_MAX);
        CHECK_EQ_INT(
            broadphase_nearest_many_within(w, 2, &pts, 8, -0.5f, many, many_d2, counts, &bad),
            BROADPHASE_ERROR_NEGATIVE_RADIUS);
        CHECK_EQ_INT(bad, SIZE_MAX);
        CHECK_EQ_INT(
            broadphase_nearest_many_within(w, 2, &pts, 8, NAN, many, many_d2, counts, &bad),
            BROADPHASE_ERROR_NONFINITE);
        broadphase_destroy(w);
    }
}

/* Batched nearest-within searches of the points against single ones, k = 7: the rows that
 * differ, or whose (distance, id) order is broken. */
static size_t nearest_batch_differences(broadphase_world *w, size_t n, const broadphase_points *pts,
                                        float within) {
    enum { K = 7 };
    uint32_t *got = malloc(n * K * sizeof *got), one[K];
    float *d2 = malloc(n * K * sizeof *d2), one_d2[K];
    size_t *counts = malloc(n * sizeof *counts), bad = 0, m = 0, wrong = 0;
    if (!got || !d2 || !counts) exit(1);
    CHECK_EQ_INT(broadphase_nearest_many_within(w, n, pts, K, within, got, d2, counts, &bad),
                 BROADPHASE_OK);
    for (size_t i = 0; i < n; i++) {
        float at[3] = {pts->x[i], pts->y[i], pts->z ? pts->z[i] : 0.0f};
        CHECK_EQ_INT(broadphase_nearest_within(w, at, K, within, one, one_d2, &m), BROADPHASE_OK);
        wrong += m != counts[i];
        for (size_t j = 0; j < m && j < counts[i]; j++) {
            wrong += one[j] != got[i * K + j] || one_d2[j] != d2[i * K + j];
            if (j > 0)
                wrong += d2[i * K + j - 1] > d2[i * K + j] || (d2[i * K + j - 1] == d2[i * K + j] &&
                                                               got[i * K + j - 1] > got[i * K + j]);
        }
    }
    free(got);
    free(d2);
    free(counts);
    return wrong;
}

/* Ties: points on a lattice (each twice, once as a point and once as a box that holds it,
 * flat on x; so that many distances tie, some at 0) and a batch of
 * searches at the lattice points and between them, on the grid of centres and (with the world
 * padded far off) in groups (query_group.c ranks a group's distances its own way): every
 * search's k nearest within the distance equal a single search's, in ascending (distance, id)
 * order; and balls of radius 1 there, whose lattice neighbours lie on the boundary, find what
 * single balls find. */
TEST(batched_nearest_within_ties_equal_single_searches) {
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t mi = 0; mi < METHODS; mi++) {
            TEST_CONTEXT("dims %d method %s", dims, method_name(method_at(mi)));
            broadphase_world *w = make_world(dims, method_at(mi), BROADPHASE_UPDATE_AUTO, 2);
            REQUIRE(w);
            int side = dims == 2 ? 24 : 8;
            size_t cells = (size_t)side * (size_t)side * (dims == 3 ? (size_t)side : 1);
            size_t n = 2 * cells;
            float *c[6];
            for (int j = 0; j < 6; j++) c[j] = calloc(n, sizeof(float));
            REQUIRE(c[0] && c[1] && c[2] && c[3] && c[4] && c[5]);
            for (size_t i = 0; i < n; i++) {
                size_t cell = i % cells;
                c[0][i] = (float)(cell % (size_t)side);
                c[1][i] = (float)(cell / (size_t)side % (size_t)side);
                c[2][i] = dims == 3 ? (float)(cell / (size_t)side / (size_t)side) : 0.0f;
                /* the queries: lattice points, then points half a step off on x */
                c[3][i] = c[0][i] + (i < cells ? 0.0f : 0.5f);
                c[4][i] = c[1][i];
                c[5][i] = c[2][i];
            }
            /* the second copy of each point a box reaching 0.25 either way off the x axis: a
             * search there is inside it on those axes and at a whole distance on x */
            float *blo[3], *bhi[3];
            for (int k = 0; k < 3; k++) {
                blo[k] = malloc(n * sizeof(float));
                bhi[k] = malloc(n * sizeof(float));
                REQUIRE(blo[k] && bhi[k]);
                for (size_t i = 0; i < n; i++) {
                    float e = i >= cells && k > 0 && k < dims ? 0.25f : 0.0f;
                    blo[k][i] = c[k][i] - e;
                    bhi[k][i] = c[k][i] + e;
                }
            }
            broadphase_boxes b = {blo[0], blo[1], blo[2], bhi[0], bhi[1], bhi[2]};
            uint32_t *ids = malloc(n * sizeof *ids);
            REQUIRE(ids);
            CHECK_EQ_INT(broadphase_add_boxes(w, n, &b, ids), BROADPHASE_OK);
            step_ok(w);
            broadphase_points pts = {c[3], c[4], c[5]};
            /* and with a greatest distance that keeps more than the group's ranking takes at
             * once (64): the bands pick the few that can be among the k first */
            float far = dims == 2 ? 4.5f : 2.5f;
            size_t ns = 0;
            uint32_t many[512];
            float mid[3] = {(float)(side / 2), (float)(side / 2),
                            dims == 3 ? (float)(side / 2) : 0};
            CHECK_EQ_INT(broadphase_query_sphere(w, mid, far, many, 512, &ns), BROADPHASE_OK);
            CHECK(ns > 64);
            /* this batch is as large as the world: on the grid of centres (query_batch.c) */
            CHECK_EQ_INT(nearest_batch_differences(w, n, &pts, 1.5f), 0);
            CHECK_EQ_INT(nearest_batch_differences(w, n, &pts, far), 0);
            /* and through the structures' groups: the world more than 8 times the batch (the
             * grid's share), the others far off on z (in 2D too), nearer none of the searches */
            {
                size_t pad = 8 * n + 1;
                float *q[6];
                for (int j = 0; j < 6; j++) q[j] = malloc(pad * sizeof(float));
                REQUIRE(q[0] && q[1] && q[2] && q[3] && q[4] && q[5]);
                for (size_t i = 0; i < pad; i++) {
                    q[0][i] = q[3][i] = 1e6f + (float)(i % 1000);
                    q[1][i] = q[4][i] = 1e6f + (float)(i / 1000);
                    q[2][i] = q[5][i] = dims == 3 ? 1e6f : 0.0f;
                }
                broadphase_boxes padding = {q[0], q[1], q[2], q[3], q[4], q[5]};
                uint32_t *pad_ids = malloc(pad * sizeof *pad_ids);
                REQUIRE(pad_ids);
                CHECK_EQ_INT(broadphase_add_boxes(w, pad, &padding, pad_ids), BROADPHASE_OK);
                step_ok(w);
                CHECK_EQ_INT(nearest_batch_differences(w, n, &pts, 1.5f), 0);
                CHECK_EQ_INT(nearest_batch_differences(w, n, &pts, far), 0);
                CHECK_EQ_INT(broadphase_remove(w, pad, pad_ids), BROADPHASE_OK);
                step_ok(w);
                free(pad_ids);
                for (int j = 0; j < 6; j++) free(q[j]);
            }
            /* balls of radius 1 at the same points: the lattice neighbours lie on the boundary,
             * which the closed test takes */
            float *radius = malloc(n * sizeof *radius);
            size_t *off = malloc((n + 1) * sizeof *off), boundary = 0;
            REQUIRE(radius && off);
            for (size_t i = 0; i < n; i++) radius[i] = 1.0f;
            broadphase_spheres balls = {c[3], c[4], c[5], radius};
            broadphase_id_rows rows = {off, NULL, 0, 0, 0};
            broadphase_query_spheres(w, n, &balls, &rows);
            rows.ids = malloc((rows.total + 1) * sizeof(uint32_t));
            rows.capacity = rows.total;
            REQUIRE(rows.ids);
            CHECK_EQ_INT(broadphase_query_spheres(w, n, &balls, &rows), BROADPHASE_OK);
            size_t differ = 0;
            for (size_t i = 0; i < n; i++) {
                float at[3] = {c[3][i], c[4][i], c[5][i]};
                uint32_t one_ids[64];
                CHECK_EQ_INT(broadphase_query_sphere(w, at, 1.0f, one_ids, 64, &ns), BROADPHASE_OK);
                differ += ns != off[i + 1] - off[i];
                for (size_t j = 0; j < ns && j < off[i + 1] - off[i]; j++)
                    differ += one_ids[j] != rows.ids[off[i] + j];
                boundary += ns > 2; /* more than the point itself, twice */
            }
            CHECK_EQ_INT(differ, 0);
            CHECK(boundary > 0);
            free(rows.ids);
            free(off);
            free(radius);
            for (int j = 0; j < 6; j++) free(c[j]);
            for (int k = 0; k < 3; k++) {
                free(blo[k]);
                free(bhi[k]);
            }
            free(ids);
            broadphase_destroy(w);
        }
    }
}

/* A crowd's neighbourhoods, every route against the brute-force reference: 2D and 3D, sparse to
 * dense, 1 and 3 threads, over a few frames of walking. */
TEST(crowd_routes_equal_brute_force) {
    static const float densities[] = {2.0f, 20.0f, 80.0f};
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t di = 0; di < 3; di++) {
            crowd c;
            REQUIRE(crowd_make(&c, dims, 1500, 15.0f, 10, densities[di], 2.0f, 40 + di));
            crowd_sets want, got;
            REQUIRE(crowd_sets_make(&want, c.count, c.k) && crowd_sets_make(&got, c.count, c.k));
            for (int threads = 1; threads <= 3; threads += 2) {
                crowd_runner r[CROWD_ROUTES];
                for (int route = 0; route < CROWD_ROUTES; route++)
                    CHECK_EQ_INT(crowd_runner_make(&r[route], &c, (crowd_route)route, threads),
                                 BROADPHASE_OK);
                for (int f = 0; f < 3; f++) {
                    crowd_brute(&c, &want, 1);
                    for (int route = 0; route < CROWD_ROUTES; route++) {
                        TEST_CONTEXT("dims %d density %zu threads %d frame %d route %s", dims, di,
                                     threads, f, crowd_route_name((crowd_route)route));
                        CHECK_EQ_INT(crowd_runner_frame(&r[route], &c, &got), BROADPHASE_OK);
                        size_t bad = crowd_sets_differ(&want, &got);
                        CHECK_EQ_INT(bad, SIZE_MAX);
                    }
                    crowd_advance(&c);
                }
                for (int route = 0; route < CROWD_ROUTES; route++) crowd_runner_free(&r[route]);
            }
            crowd_sets_free(&want);
            crowd_sets_free(&got);
            crowd_free(&c);
        }
    }
}

/* A crowd simulator's size: 100,000 agents, k = 10, neighbour distance 15, in 2D at three densities
 * (2, 20 and 80 agents within the distance of one) and in 3D: every route gives the same
 * neighbourhoods for every agent, and those of one agent in 50 equal the brute-force reference. */
TEST(crowd_routes_agree_at_1e5_agents) {
    static const struct {
        int dims;
        float density;
    } cases[] = {{2, 20.0f}, {2, 2.0f}, {2, 80.0f}, {3, 20.0f}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        crowd c;
        REQUIRE(crowd_make(&c, cases[ci].dims, 100000, 15.0f, 10, cases[ci].density, 0.5f, 3 + ci));
        crowd_sets want, got, first;
        REQUIRE(crowd_sets_make(&want, c.count, c.k) && crowd_sets_make(&got, c.count, c.k) &&
                crowd_sets_make(&first, c.count, c.k));
        crowd_brute(&c, &want, 50);
        for (int route = 0; route < CROWD_ROUTES; route++) {
            TEST_CONTEXT("dims %d density %g route %s", cases[ci].dims, (double)cases[ci].density,
                         crowd_route_name((crowd_route)route));
            crowd_runner r;
            CHECK_EQ_INT(crowd_runner_make(&r, &c, (crowd_route)route, 2), BROADPHASE_OK);
            CHECK_EQ_INT(crowd_runner_frame(&r, &c, route == 0 ? &first : &got), BROADPHASE_OK);
            crowd_runner_free(&r);
            if (route > 0) CHECK_EQ_INT(crowd_sets_differ(&first, &got), SIZE_MAX);
        }
        TEST_CONTEXT("dims %d density %g against brute force", cases[ci].dims,
                     (double)cases[ci].density);
        size_t checked = 0, full = 0;
        for (size_t i = 0; i < c.count; i += 50, checked++) {
            CHECK_EQ_INT(first.count[i], want.count[i]);
            full += want.count[i] == c.k;
            for (size_t j = 0; j < want.count[i] && j < first.count[i]; j++)
                CHECK(first.ids[i * c.k + j] == want.ids[i * c.k + j]);
        }
        CHECK_EQ_INT(checked, 2000);
        /* the densities reach both sides of k: the sparse crowd leaves most rows short, the
         * dense ones fill most of them */
        if (cases[ci].density < 5.0f)
            CHECK(full < checked / 2);
        else
            CHECK(full > checked / 2);
        crowd_sets_free(&want);
        crowd_sets_free(&got);
        crowd_sets_free(&first);
        crowd_free(&c);
    }
}

/* ---- every object's neighbourhood (broadphase_neighbourhoods) ---- */

/* Row `id` of the call against broadphase_nearest_within from the object's centre for k + 1,
 * its own id dropped, at most k kept. */
static bool hood_row_ok(broadphase_world *w, const mirror *m, uint32_t id,
                        const broadphase_neighbourhood_rows *rows, size_t k, float distance) {
    if (!m->alive[id]) return rows->counts[id] == 0;
    float c[3] = {0, 0, 0};
    for (int a = 0; a < m->dims; a++)
        c[a] = m->sphere[id] ? m->c[id][a]
                             : (float)(((double)m->lo[id][a] + (double)m->hi[id][a]) * 0.5);
    uint32_t ids[80];
    float d2[80];
    size_t got = 0;
    if (broadphase_nearest_within(w, c, k + 1, distance, ids, d2, &got) != BROADPHASE_OK)
        return false;
    size_t n = 0;
    for (size_t t = 0; t < got && n < k; t++) {
        if (ids[t] == id) continue;
        if (rows->ids[id * k + n] != ids[t] ||
            memcmp(&rows->dist2[id * k + n], &d2[t], sizeof(float)) != 0)
            return false;
        n++;
    }
    return rows->counts[id] == n;
}

/* Every row equals the single nearest search from its centre, on scenes of every kind (boxes,
 * spheres, both, clustered, identical, flat, huge and tiny coordinates, a few very large objects),
 * 2D and 3D, with removed ids, for distances from 0 to infinity (the grid, and the method's
 * structures where the grid is no use) and k from 1 past the ranking's 64; the same bytes for
 * 1 to 4 threads and every method. */
TEST(neighbourhoods_equal_nearest_searches_from_each_centre) {
    static const scene_kind kinds[] = {SCENE_SHAPES,    SCENE_SHAPES2D, SCENE_CLUSTERED,
                                       SCENE_IDENTICAL, SCENE_FLAT,     SCENE_HUGE,
                                       SCENE_TINY,      SCENE_MIXED,    SCENE_PLANE2D};
    static const float distances[] = {0.0f, 3.0f, 12.0f, INFINITY};
    static const size_t ks[] = {1, 10, 70};
    size_t n = 700;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        scene sc;
        REQUIRE(scene_make(&sc, kinds[ki], n, 11 + ki));
        uint32_t *ids = malloc(n * sizeof *ids);
        uint32_t *first_ids = malloc(n * 70 * sizeof *first_ids);
        float *first_d2 = malloc(n * 70 * sizeof *first_d2);
        uint32_t *first_counts = malloc(n * sizeof *first_counts);
        REQUIRE(ids && first_ids && first_d2 && first_counts);
        for (size_t di = 0; di < sizeof distances / sizeof distances[0]; di++) {
            for (size_t kk = 0; kk < sizeof ks / sizeof ks[0]; kk++) {
                size_t k = ks[kk];
                float distance = distances[di];
                /* Every method of the list, twice: 1 and 4 threads, or 2 and 3 every other. */
                for (int run = 0; run < 2 * METHODS; run++) {
                    size_t mi = (size_t)run / 2;
                    broadphase_method method = method_at(mi);
                    int threads = mi % 2 == 0 ? (run % 2 ? 4 : 1) : (run % 2 ? 3 : 2);
                    TEST_CONTEXT("scene %zu distance %g k %zu method %s threads %d", ki,
                                 (double)distance, k, method_name(method), threads);
                    mirror m = {.dims = sc.dimensions};
                    broadphase_world *w =
                        make_world(sc.dimensions, method, BROADPHASE_UPDATE_AUTO, threads);
                    REQUIRE(w);
                    add_scene_mirrored(&sc, w, ids, &m);
                    if (run % 2 == 1) step_ok(w);            /* after a step, and before any */
                    for (uint32_t id = 3; id < n; id += 7) { /* removed ids: empty rows */
                        CHECK_EQ_INT(broadphase_remove(w, 1, &id), BROADPHASE_OK);
                        m.alive[id] = 0;
                    }
                    broadphase_neighbourhood_rows rows;
                    CHECK_EQ_INT(broadphase_neighbourhoods(w, k, distance, &rows), BROADPHASE_OK);
                    CHECK_EQ_INT(rows.count, n);
                    CHECK_EQ_INT(rows.k, k);
                    size_t bad = SIZE_MAX;
                    for (uint32_t id = 0; id < n && bad == SIZE_MAX; id++)
                        if (!hood_row_ok(w, &m, id, &rows, k, distance)) bad = id;
                    CHECK_EQ_INT(bad, SIZE_MAX);
                    if (run == 0) {
                        memcpy(first_counts, rows.counts, n * sizeof *first_counts);
                        for (size_t i = 0; i < n; i++) {
                            memcpy(first_ids + i * k, rows.ids + i * k,
                                   rows.counts[i] * sizeof *first_ids);
                            memcpy(first_d2 + i * k, rows.dist2 + i * k,
                                   rows.counts[i] * sizeof *first_d2);
                        }
                    } else {
                        bool same =
                            memcmp(first_counts, rows.counts, n * sizeof *first_counts) == 0;
                        for (size_t i = 0; i < n && same; i++)
                            same = memcmp(first_ids + i * k, rows.ids + i * k,
                                          rows.counts[i] * sizeof *first_ids) == 0 &&
                                   memcmp(first_d2 + i * k, rows.dist2 + i * k,
                                          rows.counts[i] * sizeof *first_d2) == 0;
                        CHECK(same);
                    }
                    broadphase_destroy(w);
                    mirror_free(&m);
                }
            }
        }
        free(ids);
        free(first_ids);
        free(first_d2);
        free(first_counts);
        scene_free(&sc);
    }
}

/* Point boxes (lo = hi) at the given places, added to w and to the mirror in order. */
static void add_points(broadphase_world *w, mirror *m, size_t n, const float (*at)[2]) {
    for (size_t i = 0; i < n; i++) {
        float x[1] = {at[i][0]}, y[1] = {at[i][1]};
        broadphase_boxes b = {x, y, NULL, x, y, NULL};
        uint32_t id;
        CHECK_EQ_INT(broadphase_add_boxes(w, 1, &b, &id), BROADPHASE_OK);
        float p[3] = {at[i][0], at[i][1], 0.0f};
        mirror_set(m, id, false, p, p, p, 0.0f);
    }
}

/* A point (x, y) with x^2 + y^2 (in double, as the search measures a point box from the origin)
 * in (lo, hi], or false. */
static bool point_at_dist2(double lo, double hi, float out[2]) {
    for (int i = 1; i < 4000; i++) {
        float y = 0.05f + 0.0001f * (float)i;
        float x = (float)sqrt(0.5 * (lo + hi) - (double)y * y);
        for (int step = -4; step <= 4; step++) {
            float t = x;
            for (int s = 0; s < (step < 0 ? -step : step); s++)
                t = nextafterf(t, step < 0 ? 0.0f : INFINITY);
            double d2 = (double)t * t + (double)y * y;
            if (d2 > lo && d2 <= hi) {
                out[0] = t;
                out[1] = y;
                return true;
            }
        }
    }
    return false;
}

/* Every row against the single search, for k and the distance, on 1 and 2 threads. */
static void check_hood_rows(const float (*at)[2], size_t n, size_t k, float distance) {
    for (int threads = 1; threads <= 2; threads++) {
        TEST_CONTEXT("%zu points, k %zu, distance %g, threads %d", n, k, (double)distance, threads);
        broadphase_world *w =
            make_world(2, BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_AUTO, threads);
        REQUIRE(w);
        mirror m = {.dims = 2};
        add_points(w, &m, n, at);
        broadphase_neighbourhood_rows rows;
        CHECK_EQ_INT(broadphase_neighbourhoods(w, k, distance, &rows), BROADPHASE_OK);
        size_t bad = SIZE_MAX;
        for (uint32_t id = 0; id < n && bad == SIZE_MAX; id++)
            if (!hood_row_ok(w, &m, id, &rows, k, distance)) bad = id;
        CHECK_EQ_INT(bad, SIZE_MAX);
        broadphase_destroy(w);
        mirror_free(&m);
    }
}

/* Two of the grid search's rare paths, each on a scene made to reach it (checked once by
 * breaking the path: the test fails):
 * - a dense search's bound found by halving, where the k + 1-th within the bound b has a float
 *   distance whose next float passes b: the search must look again as far as that next float,
 *   where an object with the same float distance and a lower id ranks before it. The point at
 *   the origin has k + 1 = 4 within b (itself, two near points and P1 at d2 <= b), and P2, with
 *   a lower id, at d2 just past b with the same float; 70 more within the distance send its
 *   search to the halving (more than the ranking's 64), and 1,000 points far off keep the cells
 *   large, so that it meets them all at once. b is the halving's first bound: the distance
 *   squared times 2 (k + 1) / (SIMD_RANK_MAX + 1) (block_best).
 * - a search that reaches farther than any centre's first cells (the most candidates the
 *   buffers were sized for) and meets more than the hits buffer's 4,096 within its bound: a
 *   point alone in the middle of four groups of 1,200 (each centre's first cells hold a few
 *   hundred), the distance infinite (no halving), so that its search meets all four at once. */
TEST(neighbourhoods_rare_search_paths) {
    uint64_t rng = 77;
    {
        float distance = 5.5f;
        size_t k = 3;
        double b =
            (double)distance * (double)distance * (2.0 * (double)(k + 1) / (SIMD_RANK_MAX + 1));
        float f = (float)b; /* the float both P1 and P2 round to */
        double half = 0.5 * ((double)nextafterf(f, INFINITY) - (double)f);
        size_t n = 0;
        float(*at)[2] = malloc(1100 * sizeof *at);
        REQUIRE(at);
        at[n][0] = 0.0f, at[n++][1] = 0.0f;
        at[n][0] = 0.5f, at[n++][1] = 0.0f;
        at[n][0] = 0.0f, at[n++][1] = 0.7f;
        REQUIRE(point_at_dist2(b, (double)f + 0.9 * half, at[n++]));         /* P2 */
        REQUIRE(point_at_dist2((double)f - 0.9 * half, b - 1e-12, at[n++])); /* P1 */
        REQUIRE((float)((double)at[3][0] * at[3][0] + (double)at[3][1] * at[3][1]) == f);
        REQUIRE((float)((double)at[4][0] * at[4][0] + (double)at[4][1] * at[4][1]) == f);
        for (int i = 0; i < 70; i++) {
            double a = 6.283185307179586 * i / 70.0, r = 3.0 + 2.0 * i / 70.0;
            at[n][0] = (float)(r * cos(a)), at[n++][1] = (float)(r * sin(a));
        }
        for (int i = 0; i < 1000; i++) {
            at[n][0] = 100.0f + 3000.0f * scene_uniform(&rng);
            at[n++][1] = 100.0f + 3000.0f * scene_uniform(&rng);
        }
        check_hood_rows((const float(*)[2])at, n, k, distance);
        free(at);
    }
    {
        size_t n = 0;
        float(*at)[2] = malloc(4801 * sizeof *at);
        REQUIRE(at);
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 1200; i++) {
                at[n][0] = 1300.0f * (float)(c & 1) + 100.0f * scene_uniform(&rng);
                at[n++][1] = 1300.0f * (float)(c >> 1) + 100.0f * scene_uniform(&rng);
            }
        at[n][0] = 700.0f, at[n++][1] = 700.0f;
        check_hood_rows((const float(*)[2])at, n, 3, INFINITY);
        free(at);
    }
}

/* Whether two sets of q nearest rows (k entries a row) hold the same bytes. */
static bool same_rows(size_t q, size_t k, const size_t *a_counts, const uint32_t *a_ids,
                      const float *a_d2, const size_t *b_counts, const uint32_t *b_ids,
                      const float *b_d2) {
    if (memcmp(a_counts, b_counts, q * sizeof *a_counts) != 0) return false;
    for (size_t i = 0; i < q; i++)
        if (memcmp(a_ids + i * k, b_ids + i * k, a_counts[i] * sizeof *a_ids) != 0 ||
            memcmp(a_d2 + i * k, b_d2 + i * k, a_counts[i] * sizeof *a_d2) != 0)
            return false;
    return true;
}

/* Batched nearest searches large enough for the grid of centres (query_batch.c, near_grid):
 * every row equals the single search from its point, on the same scene kinds as above, for points
 * at the objects' centres, anywhere within their bounds, outside them and far away, and the same
 * point twice; distances from 0 to infinity, k from 1 past the ranking's 64, every method on 1
 * or 3 threads, the same bytes for all. */
TEST(nearest_batches_on_the_grid_equal_single_searches) {
    static const scene_kind kinds[] = {SCENE_SHAPES,    SCENE_SHAPES2D, SCENE_CLUSTERED,
                                       SCENE_IDENTICAL, SCENE_FLAT,     SCENE_HUGE,
                                       SCENE_TINY,      SCENE_MIXED,    SCENE_PLANE2D};
    static const float distances[] = {0.0f, 3.0f, 12.0f, INFINITY};
    static const size_t ks[] = {1, 10, 70};
    size_t n = 700, q = 900, served = 0, batches = 0;
    float *px = malloc(q * sizeof *px), *py = malloc(q * sizeof *py), *pz = malloc(q * sizeof *pz);
    uint32_t *ids = malloc(n * sizeof *ids), *got_ids = malloc(q * 70 * sizeof *got_ids);
    uint32_t *first_ids = malloc(q * 70 * sizeof *first_ids);
    float *got_d2 = malloc(q * 70 * sizeof *got_d2), *first_d2 = malloc(q * 70 * sizeof *first_d2);
    size_t *counts = malloc(q * sizeof *counts), *first_counts = malloc(q * sizeof *first_counts);
    uint32_t *grid_ids = malloc(q * 70 * sizeof *grid_ids);
    float *grid_d2 = malloc(q * 70 * sizeof *grid_d2);
    size_t *grid_counts = malloc(q * sizeof *grid_counts);
    REQUIRE(px && py && pz && ids && got_ids && first_ids && got_d2 && first_d2 && counts &&
            first_counts && grid_ids && grid_d2 && grid_counts);
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        scene sc;
        REQUIRE(scene_make(&sc, kinds[ki], n, 31 + ki));
        for (size_t di = 0; di < sizeof distances / sizeof distances[0]; di++) {
            for (size_t kk = 0; kk < sizeof ks / sizeof ks[0]; kk++) {
                size_t k = ks[kk];
                float distance = distances[di];
                for (int run = 0; run < METHODS; run++) { /* every method, on 1 or 3 threads */
                    TEST_CONTEXT("scene %zu distance %g k %zu method %s", ki, (double)distance, k,
                                 method_name(method_at((size_t)run)));
                    mirror m = {.dims = sc.dimensions};
                    broadphase_world *w = make_world(sc.dimensions, method_at((size_t)run),
                                                     BROADPHASE_UPDATE_AUTO, run % 2 ? 3 : 1);
                    REQUIRE(w);
                    add_scene_mirrored(&sc, w, ids, &m);
                    float lo[3], hi[3];
                    mirror_extent(&m, lo, hi);
                    uint64_t rng = 5 + ki;
                    for (size_t i = 0; i < q; i++) {
                        float *p[3] = {&px[i], &py[i], &pz[i]};
                        for (int a = 0; a < 3; a++) {
                            float span = hi[a] - lo[a];
                            float u = scene_uniform(&rng);
                            if (i < n) /* the objects' centres */
                                *p[a] =
                                    m.sphere[i]
                                        ? m.c[i][a]
                                        : (float)(((double)m.lo[i][a] + (double)m.hi[i][a]) * 0.5);
                            else if (i < n + 100) /* within the bounds */
                                *p[a] = lo[a] + u * span;
                            else if (i < n + 190) /* outside them */
                                *p[a] = lo[a] + (3.0f * u - 1.0f) * (span + 1.0f);
                            else if (i < q - 1) /* far away */
                                *p[a] = (u < 0.5f ? -1.0f : 1.0f) * 1e30f;
                            else /* the first point again */
                                *p[a] = *(a == 0 ? px : a == 1 ? py : pz);
                            if (a >= sc.dimensions) *p[a] = 0.0f;
                        }
                    }
                    broadphase_points pts = {px, py, sc.dimensions == 3 ? pz : NULL};
                    size_t bad = 0;
                    batches++;
                    CHECK_EQ_INT(broadphase_nearest_many_within(w, q, &pts, k, distance, got_ids,
                                                                got_d2, counts, &bad),
                                 BROADPHASE_OK);
                    CHECK_EQ_INT(bad, SIZE_MAX);
                    size_t wrong = SIZE_MAX;
                    for (size_t i = 0; i < q && wrong == SIZE_MAX; i++) {
                        float c[3] = {px[i], py[i], pz[i]};
                        uint32_t want_ids[80];
                        float want_d2[80];
                        size_t want = 0;
                        CHECK_EQ_INT(
                            broadphase_nearest_within(w, c, k, distance, want_ids, want_d2, &want),
                            BROADPHASE_OK);
                        if (counts[i] != want ||
                            memcmp(got_ids + i * k, want_ids, want * sizeof *want_ids) != 0 ||
                            memcmp(got_d2 + i * k, want_d2, want * sizeof *want_d2) != 0)
                            wrong = i;
                    }
                    CHECK_EQ_INT(wrong, SIZE_MAX);
                    /* the grid itself, called as the batch calls it: whether it served (else the
                     * batch went through the structures), and the same rows when it did */
                    neighbourhoods_state g;
                    memset(&g, 0, sizeof g);
                    const float *at[3] = {px, py, pz};
                    if (neighbourhoods_points(&g, &w->store, sc.dimensions, q, at, k, distance,
                                              grid_ids, grid_d2, grid_counts, &w->heap,
                                              w->workers)) {
                        served++;
                        CHECK(same_rows(q, k, grid_counts, grid_ids, grid_d2, counts, got_ids,
                                        got_d2));
                    } else {
                        CHECK(g.unfit);
                    }
                    neighbourhoods_release(&g, &w->heap);
                    if (run == 0) {
                        memcpy(first_counts, counts, q * sizeof *counts);
                        memcpy(first_ids, got_ids, q * k * sizeof *got_ids);
                        memcpy(first_d2, got_d2, q * k * sizeof *got_d2);
                    } else {
                        CHECK(same_rows(q, k, first_counts, first_ids, first_d2, counts, got_ids,
                                        got_d2));
                    }
                    broadphase_destroy(w);
                    mirror_free(&m);
                }
            }
        }
        scene_free(&sc);
    }
    /* most of them on the grid: where it is no use (the huge scene's wide objects, flat ones in
     * 3D with a large distance) the structures answered */
    printf("  the grid served %zu batches of %zu\n", served, batches);
    CHECK(served * 4 >= batches * 3);
    free(grid_ids);
    free(grid_d2);
    free(grid_counts);
    free(px);
    free(py);
    free(pz);
    free(ids);
    free(got_ids);
    free(first_ids);
    free(got_d2);
    free(first_d2);
    free(counts);
    free(first_counts);
}

/* A walking crowd asking for its neighbourhoods every frame (the grid's route, and the dense
 * one where more than the ranking's 64 are within the distance) allocates nothing once the
 * buffers have grown: from frame 110, when either crowd has crossed its middle once (a disc of
 * radius 106 at density 20, 50 at 90, walked at 2 a frame), through its next crossing. */
TEST(neighbourhoods_allocate_nothing_in_steady_state) {
    static const float densities[] = {20.0f, 90.0f};
    for (size_t di = 0; di < 2; di++) {
        crowd c;
        REQUIRE(crowd_make(&c, 2, 1000, 15.0f, 10, densities[di], 2.0f, 9));
        crowd_sets got;
        REQUIRE(crowd_sets_make(&got, c.count, c.k));
        crowd_runner r;
        CHECK_EQ_INT(crowd_runner_make(&r, &c, CROWD_HOODS, 2), BROADPHASE_OK);
        uint64_t steady = 0;
        for (int f = 0; f < 220; f++) {
            TEST_CONTEXT("density %g frame %d", (double)densities[di], f);
            CHECK_EQ_INT(crowd_runner_frame(&r, &c, &got), BROADPHASE_OK);
            if (f == 110) steady = allocations(r.world);
            crowd_advance(&c);
        }
        CHECK_EQ_INT(allocations(r.world), steady);
        crowd_runner_free(&r);
        crowd_sets_free(&got);
        crowd_free(&c);
    }
}

/* Through a whole crossing (2,000 agents walking 4 a frame through the disc's middle and out),
 * 2D and 3D, every agent's row against brute force every frame, 2 threads in 2D and 3 in 3D:
 * the cells of a call made for the crowd of the call before (once it has crowded), made again
 * where it has crowded or thinned out since, or held where the cells' cap leaves them as they
 * were. Asserts that calls sorted once on remembered cells, that cells were made again, and that
 * some were held. */
TEST(neighbourhoods_through_a_crossing) {
    for (int dims = 2; dims <= 3; dims++) {
        crowd c;
        REQUIRE(crowd_make(&c, dims, 2000, 15.0f, 10, 20.0f, 4.0f, 17));
        crowd_sets want, got;
        REQUIRE(crowd_sets_make(&want, c.count, c.k) && crowd_sets_make(&got, c.count, c.k));
        crowd_runner r;
        CHECK_EQ_INT(crowd_runner_make(&r, &c, CROWD_HOODS, dims == 2 ? 2 : 3), BROADPHASE_OK);
        const neighbourhoods_state *n = &r.world->neighbourhoods;
        size_t remembered = 0, frames = dims == 2 ? 100 : 60;
        for (size_t f = 0; f < frames; f++) {
            TEST_CONTEXT("dims %d frame %zu", dims, f);
            bool crowded = n->dense_share > 0.0 && n->dense_share < 1.0;
            size_t sorts = n->sorts;
            CHECK_EQ_INT(crowd_runner_frame(&r, &c, &got), BROADPHASE_OK);
            remembered += crowded && n->sorts == sorts + 1;
            crowd_brute(&c, &want, 1);
            CHECK_EQ_INT(crowd_sets_differ(&want, &got), SIZE_MAX);
            crowd_advance(&c);
        }
        TEST_CONTEXT("dims %d: %zu sorts over %zu frames, %zu in one on remembered cells, %zu held",
                     dims, n->sorts, frames, remembered, n->held);
        CHECK(remembered >= frames / 4); /* one sort where there were two */
        CHECK(n->sorts > frames + 2);    /* cells made again, smaller or larger */
        CHECK(n->held > 0);
        /* Nine in ten agents crowded into a twentieth of the disc, then every agent back where it
         * started: smaller cells, then cells of the first size again, then as they are (2D; in
         * 3D the cells' cap holds 2,000 agents' cells at the first size, and a 3D crowd spread
         * evenly holds more than twice per_cell in its centres' cells, each counting itself). */
        crowd start;
        REQUIRE(crowd_make(&start, dims, 2000, 15.0f, 10, 20.0f, 4.0f, 17));
        for (int f = 0; f < 3; f++) {
            TEST_CONTEXT("dims %d crowded then spread out, call %d (share %g)", dims, f,
                         n->dense_share);
            for (int a = 0; a < dims; a++)
                for (size_t i = 0; i < c.count; i++)
                    c.pos[a][i] = f == 0 && i % 10 != 0 ? 0.05f * start.pos[a][i] : start.pos[a][i];
            size_t sorts = n->sorts;
            CHECK_EQ_INT(crowd_runner_frame(&r, &c, &got), BROADPHASE_OK);
            if (dims == 2) {
                CHECK_EQ_INT(n->sorts - sorts, f == 2 ? 1 : 2); /* smaller, larger, as they are */
                CHECK(f == 0 ? n->dense_share < 1.0 : n->dense_share == 1.0);
            }
            crowd_brute(&c, &want, 1);
            CHECK_EQ_INT(crowd_sets_differ(&want, &got), SIZE_MAX);
        }
        crowd_free(&start);
        crowd_runner_free(&r);
        crowd_sets_free(&want);
        crowd_sets_free(&got);
        crowd_free(&c);
    }
}

/* Empty and one-object worlds, k = 0, and bad arguments (the world untouched). */
TEST(neighbourhoods_edges_and_bad_input) {
    broadphase_world *w = make_world(2, BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_AUTO, 2);
    REQUIRE(w);
    broadphase_neighbourhood_rows rows;
    CHECK_EQ_INT(broadphase_neighbourhoods(w, 5, 10.0f, &rows), BROADPHASE_OK);
    CHECK_EQ_INT(rows.count, 0);
    float x[2] = {1.0f, 1.0f}, y[2] = {2.0f, 2.0f};
    broadphase_boxes b = {x, y, NULL, x, y, NULL};
    uint32_t id[2];
    CHECK_EQ_INT(broadphase_add_boxes(w, 1, &b, id), BROADPHASE_OK);
    CHECK_EQ_INT(broadphase_neighbourhoods(w, 5, 10.0f, &rows), BROADPHASE_OK);
    CHECK(rows.count == 1 && rows.counts[0] == 0);
    /* two points at the same place: each the other's, at 0 */
    CHECK_EQ_INT(broadphase_add_boxes(w, 1, &b, id + 1), BROADPHASE_OK);
    CHECK_EQ_INT(broadphase_neighbourhoods(w, 5, 0.0f, &rows), BROADPHASE_OK);
    CHECK(rows.count == 2 && rows.counts[0] == 1 && rows.counts[1] == 1);
    CHECK(rows.ids[0 * 5] == 1 && rows.ids[1 * 5] == 0 && rows.dist2[0] == 0.0f);
    CHECK_EQ_INT(broadphase_neighbourhoods(w, 0, 1.0f, &rows), BROADPHASE_OK);
    CHECK(rows.count == 2 && rows.counts[0] == 0 && rows.counts[1] == 0);
    CHECK_EQ_INT(broadphase_neighbourhoods(NULL, 5, 1.0f, &rows),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_neighbourhoods(w, 5, 1.0f, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_neighbourhoods(w, 5, NAN, &rows), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_neighbourhoods(w, 5, -1.0f, &rows), BROADPHASE_ERROR_NEGATIVE_RADIUS);
    CHECK_EQ_INT(broadphase_neighbourhoods(w, SIZE_MAX / 4, 1.0f, &rows),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    /* the world as it was: the same pairs as a step before */
    broadphase_pairs p = step_ok(w);
    CHECK(p.count == 1 && p.data[0].a == 0 && p.data[0].b == 1);
    broadphase_destroy(w);
}

TEST_MAIN()

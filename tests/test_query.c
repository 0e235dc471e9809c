/* The spatial queries against the reference of query_oracle.h, which tests every object with the
 * exact predicates (its run over every method and scene is test_methods' queries_equal_reference):
 * the rest and the statics really queried, candidates pruned, batches against single queries for
 * 1..8 threads, queries from several threads at once (ThreadSanitizer), every kind of bad input,
 * the predicates by hand, and broadphase_visit_nodes against the stats and the levels. */
#include "query_oracle.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

/* A quarter of the first n ids made static, then steps with a few moves between them, so that
 * most of the rest comes to rest (rest_share 1). */
static void statics_then_rest(broadphase_world *w, mirror *m, uint32_t n, uint64_t *rng) {
    for (uint32_t id = 0; id < n; id += 4)
        CHECK_EQ_INT(broadphase_set_static(w, 1, &id, true), BROADPHASE_OK);
    step_ok(w);
    move_some(w, m, 50, 1, rng);
    step_ok(w);
    move_some(w, m, 54, 1, rng);
    step_ok(w);
}

/* The rest and the statics really took part (not only the changed-objects field). */
TEST(queries_see_rest_and_statics) {
    scratch s = {0};
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        scene sc;
        REQUIRE(scene_make(&sc, SCENE_SHAPES, 3000, 9));
        broadphase_config c = test_config(3, method_at(mi), BROADPHASE_UPDATE_AUTO, 2, 0);
        c.rest_share = 1.0f;
        broadphase_world *w = make_world_from(&c);
        REQUIRE(w);
        mirror m = {.dims = 3};
        uint32_t *ids = malloc(3000 * sizeof *ids);
        uint64_t rng = 3;
        add_scene_mirrored(&sc, w, ids, &m);
        statics_then_rest(w, &m, 3000, &rng);
        broadphase_stats st;
        CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
        TEST_CONTEXT("method %s resting %zu static %zu", method_name(method_at(mi)),
                     st.resting_objects, st.static_objects);
        CHECK(st.resting_objects > 1000);
        CHECK(st.static_objects == 750);
        check_queries(w, &m, 20, 11, &s);
        broadphase_destroy(w);
        free(ids);
        mirror_free(&m);
        scene_free(&sc);
    }
    scratch_free(&s);
}

/* The structure prunes: a small box's candidates are a small part of a large world. */
TEST(candidates_are_pruned) {
    scene sc;
    REQUIRE(scene_make(&sc, SCENE_UNIFORM, 20000, 4));
    uint32_t *ids = malloc(20000 * sizeof *ids);
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        broadphase_world *w = make_world(3, method_at(mi), BROADPHASE_UPDATE_AUTO, 2);
        REQUIRE(w);
        CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
        step_ok(w);
        float c = sc.world_size / 2, lo[3] = {c - 2, c - 2, c - 2}, hi[3] = {c + 2, c + 2, c + 2};
        size_t hits = 0, cand = 0;
        CHECK_EQ_INT(broadphase_query_box(w, lo, hi, NULL, 0, &hits),
                     BROADPHASE_ERROR_BUFFER_TOO_SMALL);
        CHECK_EQ_INT(broadphase_query_box_candidates(w, lo, hi, NULL, 0, &cand),
                     BROADPHASE_ERROR_BUFFER_TOO_SMALL);
        TEST_CONTEXT("method %s hits %zu candidates %zu", method_name(method_at(mi)), hits, cand);
        CHECK(hits > 0 && cand >= hits && cand < 2000);
        broadphase_destroy(w);
    }
    free(ids);
    scene_free(&sc);
}

/* ---- batches ------------------------------------------------------------------------------ */

TEST(batches_equal_single_queries) {
    const size_t nq = 300;
    for (int dims = 2; dims <= 3; dims++) {
        scene sc;
        REQUIRE(scene_make(&sc, dims == 3 ? SCENE_SHAPES : SCENE_SHAPES2D, 4000, 21));
        uint32_t *ids = malloc(4000 * sizeof *ids);
        /* queries: boxes, balls, rays and points around the world */
        float *col[16];
        for (int j = 0; j < 16; j++) col[j] = malloc(nq * sizeof(float));
        uint64_t rng = 8;
        float L = sc.world_size;
        for (size_t i = 0; i < nq; i++) {
            for (int k = 0; k < 3; k++) {
                float p = in_range(&rng, 0, L), h = in_range(&rng, 0, L * (i % 3 ? 0.02f : 0.2f));
                col[k][i] = p - h;                                /* box min */
                col[3 + k][i] = p + h;                            /* box max */
                col[6 + k][i] = p;                                /* centre, origin, point */
                col[9 + k][i] = in_range(&rng, -1, 1) * L * 0.1f; /* dir */
            }
            col[12][i] = in_range(&rng, 0, L * 0.05f); /* radius */
            col[13][i] = i % 5 == 0 ? INFINITY : 1.0f; /* max_t */
        }
        broadphase_boxes boxes = {col[0], col[1], col[2], col[3], col[4], col[5]};
        broadphase_spheres balls = {col[6], col[7], col[8], col[12]};
        broadphase_rays rays = {col[6], col[7], col[8], col[9], col[10], col[11], col[13]};
        broadphase_points pts = {col[6], col[7], col[8]};
        for (size_t mi = 0; mi < METHODS; mi++) {
            size_t *ref_off[3] = {NULL, NULL, NULL};
            uint32_t *ref_ids[2] = {NULL, NULL};
            broadphase_ray_hit *ref_hits = NULL, *ref_closest = NULL;
            uint32_t *ref_near = NULL;
            size_t *ref_counts = NULL;
            for (int threads = 1; threads <= 8; threads++) {
                TEST_CONTEXT("dims %d method %s threads %d", dims, method_name(method_at(mi)),
                             threads);
                broadphase_world *w =
                    make_world(dims, method_at(mi), BROADPHASE_UPDATE_AUTO, threads);
                REQUIRE(w);
                CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
                if (threads % 2) step_ok(w); /* odd: stepped; even: all objects pending */
                size_t *off[3];
                for (int j = 0; j < 3; j++) off[j] = malloc((nq + 1) * sizeof(size_t));
                /* ask for the sizes first: BUFFER_TOO_SMALL with the offsets filled */
                broadphase_id_rows rb = {off[0], NULL, 0, 0, 0};
                broadphase_status st = broadphase_query_boxes(w, nq, &boxes, &rb);
                CHECK(st == BROADPHASE_ERROR_BUFFER_TOO_SMALL || rb.total == 0);
                CHECK_EQ_INT(rb.total, off[0][nq]);
                rb.ids = malloc((rb.total + 1) * sizeof(uint32_t));
                rb.capacity = rb.total;
                CHECK_EQ_INT(broadphase_query_boxes(w, nq, &boxes, &rb), BROADPHASE_OK);
                broadphase_id_rows rs = {off[1], NULL, 0, 0, 0};
                broadphase_query_spheres(w, nq, &balls, &rs);
                rs.ids = malloc((rs.total + 1) * sizeof(uint32_t));
                rs.capacity = rs.total;
                CHECK_EQ_INT(broadphase_query_spheres(w, nq, &balls, &rs), BROADPHASE_OK);
                broadphase_hit_rows rr = {off[2], NULL, 0, 0, 0};
                broadphase_raycasts(w, nq, &rays, &rr);
                rr.hits = malloc((rr.total + 1) * sizeof(broadphase_ray_hit));
                rr.capacity = rr.total;
                CHECK_EQ_INT(broadphase_raycasts(w, nq, &rays, &rr), BROADPHASE_OK);
                broadphase_ray_hit *closest = malloc(nq * sizeof *closest);
                size_t bad = 0;
                CHECK_EQ_INT(broadphase_raycasts_closest(w, nq, &rays, closest, &bad),
                             BROADPHASE_OK);
                CHECK_EQ_INT(bad, SIZE_MAX);
                const size_t k = 16;
                uint32_t *near = malloc(nq * k * sizeof *near);
                float *nd2 = malloc(nq * k * sizeof *nd2);
                size_t *counts = malloc(nq * sizeof *counts);
                CHECK_EQ_INT(broadphase_nearest_many(w, nq, &pts, k, near, nd2, counts, NULL),
                             BROADPHASE_OK);
                /* bounded: a tenth of the world's side (runs of queries then share walks) */
                uint32_t *bnear = malloc(nq * k * sizeof *bnear);
                float *bnd2 = malloc(nq * k * sizeof *bnd2), bound = L * 0.05f;
                size_t *bcounts = malloc(nq * sizeof *bcounts);
                CHECK_EQ_INT(broadphase_nearest_many_within(w, nq, &pts, k, bound, bnear, bnd2,
                                                            bcounts, NULL),
                             BROADPHASE_OK);
                /* every row equals the single query */
                uint32_t one[4096];
                broadphase_ray_hit onehit[4096];
                float oned2[16];
                for (size_t i = 0; i < nq; i++) {
                    float lo[3] = {col[0][i], col[1][i], col[2][i]},
                          hi[3] = {col[3][i], col[4][i], col[5][i]},
                          p[3] = {col[6][i], col[7][i], col[8][i]},
                          d[3] = {col[9][i], col[10][i], col[11][i]};
                    size_t n1 = 0;
                    CHECK_EQ_INT(broadphase_query_box(w, lo, hi, one, 4096, &n1), BROADPHASE_OK);
                    CHECK(n1 == off[0][i + 1] - off[0][i] &&
                          !memcmp(one, rb.ids + off[0][i], n1 * sizeof(uint32_t)));
                    CHECK_EQ_INT(broadphase_query_sphere(w, p, col[12][i], one, 4096, &n1),
                                 BROADPHASE_OK);
                    CHECK(n1 == off[1][i + 1] - off[1][i] &&
                          !memcmp(one, rs.ids + off[1][i], n1 * sizeof(uint32_t)));
                    CHECK_EQ_INT(broadphase_raycast(w, p, d, col[13][i], onehit, 4096, &n1),
                                 BROADPHASE_OK);
                    CHECK(n1 == off[2][i + 1] - off[2][i] &&
                          !memcmp(onehit, rr.hits + off[2][i], n1 * sizeof(broadphase_ray_hit)));
                    CHECK(n1 ? closest[i].id == onehit[0].id && closest[i].t == onehit[0].t
                             : closest[i].id == BROADPHASE_NO_HIT);
                    CHECK_EQ_INT(broadphase_nearest(w, p, k, one, oned2, &n1), BROADPHASE_OK);
                    CHECK(n1 == counts[i] && !memcmp(one, near + i * k, n1 * sizeof(uint32_t)) &&
                          !memcmp(oned2, nd2 + i * k, n1 * sizeof(float)));
                    CHECK_EQ_INT(broadphase_nearest_within(w, p, k, bound, one, oned2, &n1),
                                 BROADPHASE_OK);
                    CHECK(n1 == bcounts[i] && !memcmp(one, bnear + i * k, n1 * sizeof(uint32_t)) &&
                          !memcmp(oned2, bnd2 + i * k, n1 * sizeof(float)));
                }
                /* and every thread count gives the same rows */
                if (threads == 1) {
                    for (int j = 0; j < 3; j++) {
                        ref_off[j] = malloc((nq + 1) * sizeof(size_t));
                        memcpy(ref_off[j], off[j], (nq + 1) * sizeof(size_t));
                    }
                    ref_ids[0] = malloc((rb.total + 1) * sizeof(uint32_t));
                    memcpy(ref_ids[0], rb.ids, rb.total * sizeof(uint32_t));
                    ref_ids[1] = malloc((rs.total + 1) * sizeof(uint32_t));
                    memcpy(ref_ids[1], rs.ids, rs.total * sizeof(uint32_t));
                    ref_hits = malloc((rr.total + 1) * sizeof(broadphase_ray_hit));
                    memcpy(ref_hits, rr.hits, rr.total * sizeof(broadphase_ray_hit));
                    ref_closest = malloc(nq * sizeof *ref_closest);
                    memcpy(ref_closest, closest, nq * sizeof *closest);
                    ref_near = malloc(nq * k * sizeof *ref_near);
                    memcpy(ref_near, near, nq * k * sizeof *near);
                    ref_counts = malloc(nq * sizeof *ref_counts);
                    memcpy(ref_counts, counts, nq * sizeof *counts);
                } else {
                    for (int j = 0; j < 3; j++)
                        CHECK(!memcmp(ref_off[j], off[j], (nq + 1) * sizeof(size_t)));
                    CHECK(!memcmp(ref_ids[0], rb.ids, rb.total * sizeof(uint32_t)));
                    CHECK(!memcmp(ref_ids[1], rs.ids, rs.total * sizeof(uint32_t)));
                    CHECK(!memcmp(ref_hits, rr.hits, rr.total * sizeof(broadphase_ray_hit)));
                    CHECK(!memcmp(ref_closest, closest, nq * sizeof *closest));
                    CHECK(!memcmp(ref_counts, counts, nq * sizeof *counts));
                    for (size_t i = 0; i < nq; i++)
                        CHECK(!memcmp(ref_near + i * k, near + i * k, counts[i] * sizeof *near));
                }
                CHECK(rb.total > nq && rs.total > nq / 2 && rr.total > nq / 4);
                for (int j = 0; j < 3; j++) free(off[j]);
                free(rb.ids);
                free(rs.ids);
                free(rr.hits);
                free(closest);
                free(near);
                free(nd2);
                free(counts);
                free(bnear);
                free(bnd2);
                free(bcounts);
                broadphase_destroy(w);
            }
            for (int j = 0; j < 3; j++) free(ref_off[j]);
            free(ref_ids[0]);
            free(ref_ids[1]);
            free(ref_hits);
            free(ref_closest);
            free(ref_near);
            free(ref_counts);
        }
        for (int j = 0; j < 16; j++) free(col[j]);
        free(ids);
        scene_free(&sc);
    }
}

/* ---- many threads at once ------------------------------------------------------------------ */

typedef struct reader {
    const broadphase_world *w;
    int seed;
    size_t sum; /* of all results: compared with the single-threaded run */
    int errors;
    const scene *sc; /* when set, the box queries' counts are checked against the scene */
} reader;

/* The scene's objects that overlap the closed box, by the exact predicates. */
static size_t scene_box_count(const scene *sc, const float lo[3], const float hi[3]) {
    size_t n = 0;
    for (size_t i = 0; i < sc->count; i++) {
        float mn[3], mx[3], c[3], r;
        scene_object(sc, i, mn, mx, c, &r);
        n += sc->is_sphere[i] ? simd_pair_box_sphere(lo, hi, c, r, 3)
                              : simd_pair_box_box(lo, hi, mn, mx, 3);
    }
    return n;
}

static bool count_node(const broadphase_node *node, void *user) {
    *(size_t *)user += 1 + node->object_count;
    return true;
}

/* Every read-only call a reader may make while no step or mutation runs: single and batched
 * queries, and the accessors. */
static void *read_world(void *p) {
    reader *r = p;
    uint64_t rng = (uint64_t)r->seed;
    uint32_t ids[2048];
    broadphase_ray_hit hits[2048];
    float d2[8];
    r->sum = 0;
    for (int i = 0; i < 200; i++) {
        float c[3] = {in_range(&rng, 0, 30), in_range(&rng, 0, 30), in_range(&rng, 0, 30)};
        float lo[3] = {c[0] - 2, c[1] - 2, c[2] - 2}, hi[3] = {c[0] + 2, c[1] + 2, c[2] + 2};
        float d[3] = {1, 0.5f, -0.25f};
        size_t n = 0;
        r->errors += broadphase_query_box(r->w, lo, hi, ids, 2048, &n) != BROADPHASE_OK;
        r->sum += n * 7 + (n ? ids[0] : 0);
        if (r->sc && n != scene_box_count(r->sc, lo, hi)) r->errors++;
        r->errors += broadphase_query_sphere(r->w, c, 3.0f, ids, 2048, &n) != BROADPHASE_OK;
        r->sum += n * 5;
        r->errors += broadphase_raycast(r->w, c, d, 10.0f, hits, 2048, &n) != BROADPHASE_OK;
        r->sum += n * 3 + (n ? hits[0].id : 0);
        r->errors += broadphase_nearest(r->w, c, 8, ids, d2, &n) != BROADPHASE_OK;
        r->sum += n ? ids[0] + ids[n - 1] : 0;
        broadphase_filter f;
        bool is_static;
        r->errors += broadphase_get_filter(r->w, (uint32_t)i, &f) != BROADPHASE_OK;
        r->errors += broadphase_get_static(r->w, (uint32_t)i, &is_static) != BROADPHASE_OK;
        r->sum += f.category + is_static + broadphase_object_count(r->w) +
                  broadphase_last_pairs(r->w).count;
        if (i % 50 == 0) { /* the inspection calls */
            broadphase_stats st;
            size_t levels = 0, nodes = 0;
            broadphase_events ev;
            r->errors += broadphase_get_stats(r->w, &st) != BROADPHASE_OK;
            broadphase_status ls = broadphase_get_levels(r->w, NULL, 0, &levels);
            r->errors += ls != BROADPHASE_OK && ls != BROADPHASE_ERROR_BUFFER_TOO_SMALL;
            r->errors += broadphase_visit_nodes(r->w, count_node, &nodes) != BROADPHASE_OK;
            r->errors += broadphase_pair_events(r->w, &ev) != BROADPHASE_ERROR_INVALID_CONFIG;
            r->sum += st.objects + st.pairs + levels * 17 + nodes * 19;
        }
        if (i % 25 == 0) { /* batches: 8 boxes and 8 nearest points around c */
            float col[6][8];
            for (int q = 0; q < 8; q++)
                for (int k = 0; k < 3; k++) {
                    col[k][q] = c[k] - 1.0f - (float)q * 0.5f;
                    col[3 + k][q] = c[k] + 1.0f + (float)q * 0.5f;
                }
            broadphase_boxes b = {col[0], col[1], col[2], col[3], col[4], col[5]};
            size_t offsets[9], counts[8];
            broadphase_id_rows rows = {offsets, ids, 2048, 0, 0};
            r->errors += broadphase_query_boxes(r->w, 8, &b, &rows) != BROADPHASE_OK;
            r->sum += rows.total * 11 + (rows.total ? ids[rows.total - 1] : 0);
            broadphase_points pts = {col[0], col[1], col[2]};
            r->errors +=
                broadphase_nearest_many(r->w, 8, &pts, 4, ids, NULL, counts, NULL) != BROADPHASE_OK;
            for (int q = 0; q < 8; q++) r->sum += counts[q] * 13 + ids[q * 4];
        }
    }
    return NULL;
}

/* Four threads query one world at once (every read-only call: single and batched queries, the
 * accessors), right after changes that the first query must catch up with: under
 * ThreadSanitizer this checks the lazy catch-up, the walks and the batches for races; the
 * results must equal a single thread's, whose box queries are checked against the scene. */
TEST(concurrent_queries) {
    scene sc;
    REQUIRE(scene_make(&sc, SCENE_SHAPES, 2000, 31));
    uint32_t *ids = malloc(2000 * sizeof *ids);
    for (size_t mi = 0; mi < METHODS; mi++) {
        broadphase_world *w = make_world(3, method_at(mi), BROADPHASE_UPDATE_AUTO, 2);
        REQUIRE(w);
        CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
        step_ok(w);
        for (int round = 0; round < 3; round++) {
            TEST_CONTEXT("method %s round %d", method_name(method_at(mi)), round);
            scene_advance(&sc); /* moves every object: the structures are all stale */
            CHECK_EQ_INT(scene_move_in_world(&sc, w, ids), BROADPHASE_OK);
            if (round == 2) step_ok(w);
            reader solo = {w, 100, 0, 0, &sc};
            reader many[4];
            pthread_t th[4];
            for (int i = 0; i < 4; i++) {
                many[i] = (reader){w, 100, 0, 0, NULL};
                CHECK(pthread_create(&th[i], NULL, read_world, &many[i]) == 0);
            }
            for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
            read_world(&solo); /* afterwards, checked against the scene */
            CHECK(solo.sum > 0);
            CHECK_EQ_INT(solo.errors, 0);
            for (int i = 0; i < 4; i++) {
                CHECK_EQ_INT(many[i].errors, 0);
                CHECK_EQ_INT(many[i].sum, solo.sum);
            }
        }
        broadphase_destroy(w);
    }
    free(ids);
    scene_free(&sc);
}

/* Batches whose queries all lie far from every object, on a world that has run no batch yet: a
 * group of them gathers nothing, and must still answer (it wrote its columns' sentinels through
 * a null pointer: a crash or memory corruption, found by the grid's test in test_neighbours).
 * Boxes, balls and nearest searches within a distance (the kinds that share walks), each kind on
 * a fresh world, both trees and brute force, 1 and 2 threads. */
TEST(batches_far_from_every_object) {
    scene sc;
    /* more than 8 objects a query: the nearest batch too goes through the structures' groups,
     * not the grid of centres (query_batch.c, near_grid) */
    REQUIRE(scene_make(&sc, SCENE_SHAPES, 8500, 41));
    uint32_t *ids = malloc(8500 * sizeof *ids);
    enum { Q = 1024 }; /* a batch this large goes in Morton order, in groups */
    float *col = malloc(7 * Q * sizeof *col);
    REQUIRE(col);
    float *x = col, *y = col + Q, *z = col + 2 * Q, *x1 = col + 3 * Q, *y1 = col + 4 * Q,
          *z1 = col + 5 * Q, *r = col + 6 * Q;
    for (int i = 0; i < Q; i++) {
        x[i] = 1e6f + (float)(i % 32);
        y[i] = 1e6f + (float)(i / 32);
        z[i] = 1e6f;
        x1[i] = x[i] + 1.0f;
        y1[i] = y[i] + 1.0f;
        z1[i] = z[i] + 1.0f;
        r[i] = 2.0f;
    }
    broadphase_boxes boxes = {x, y, z, x1, y1, z1};
    broadphase_spheres balls = {x, y, z, r};
    broadphase_points pts = {x, y, z};
    size_t *offsets = malloc((Q + 1) * sizeof *offsets), *counts = malloc(Q * sizeof *counts);
    size_t bad = 0;
    uint32_t *out = malloc(Q * 4 * sizeof *out);
    float *d2 = malloc(Q * 4 * sizeof *d2);
    REQUIRE(offsets && counts && out && d2);
    for (size_t mi = 0; mi < METHODS; mi++)
        for (int kind = 0; kind < 3; kind++)
            for (int threads = 1; threads <= 2; threads++) {
                TEST_CONTEXT("method %s kind %d threads %d", method_name(method_at(mi)), kind,
                             threads);
                broadphase_world *w = make_world(3, method_at(mi), BROADPHASE_UPDATE_AUTO, threads);
                REQUIRE(w);
                CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
                if (threads == 2) step_ok(w);
                broadphase_id_rows rows = {offsets, out, Q * 4, 0, 0};
                if (kind == 0) {
                    CHECK_EQ_INT(broadphase_query_boxes(w, Q, &boxes, &rows), BROADPHASE_OK);
                    CHECK_EQ_INT(rows.total, 0);
                } else if (kind == 1) {
                    CHECK_EQ_INT(broadphase_query_spheres(w, Q, &balls, &rows), BROADPHASE_OK);
                    CHECK_EQ_INT(rows.total, 0);
                } else {
                    CHECK_EQ_INT(
                        broadphase_nearest_many_within(w, Q, &pts, 4, 10.0f, out, d2, counts, &bad),
                        BROADPHASE_OK);
                    size_t any = 0;
                    for (int i = 0; i < Q; i++) any += counts[i];
                    CHECK_EQ_INT(any, 0);
                }
                broadphase_destroy(w);
            }
    free(col);
    free(offsets);
    free(counts);
    free(out);
    free(d2);
    free(ids);
    scene_free(&sc);
}

/* ---- bad input ------------------------------------------------------------------------------ */

TEST(bad_input_gets_its_status) {
    broadphase_world *w = make_world(3, BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_AUTO, 2);
    REQUIRE(w);
    scene sc;
    REQUIRE(scene_make(&sc, SCENE_UNIFORM, 500, 2));
    uint32_t ids[500];
    CHECK_EQ_INT(scene_add_to_world(&sc, w, ids), BROADPHASE_OK);
    step_ok(w);
    float z[3] = {0, 0, 0}, one[3] = {1, 1, 1}, big[3] = {1e9f, 1e9f, 1e9f};
    float nan3[3] = {0, NAN, 0}, inf3[3] = {INFINITY, 0, 0}, neg[3] = {-1e9f, -1e9f, -1e9f};
    uint32_t out[8];
    size_t n = 99;
    broadphase_ray_hit hit[8];
    bool found;
    CHECK_EQ_INT(broadphase_query_box(NULL, z, one, out, 8, &n), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_query_box(w, NULL, one, out, 8, &n), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_query_box(w, z, one, NULL, 8, &n), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_query_box(w, z, one, out, 8, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_query_box(w, nan3, one, out, 8, &n), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_query_box(w, z, inf3, out, 8, &n), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_query_box(w, one, z, out, 8, &n), BROADPHASE_ERROR_INVERTED_BOX);
    CHECK_EQ_INT(broadphase_query_box_candidates(w, one, z, out, 8, &n),
                 BROADPHASE_ERROR_INVERTED_BOX);
    CHECK_EQ_INT(broadphase_query_point(w, nan3, out, 8, &n), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_query_sphere(w, z, -1.0f, out, 8, &n),
                 BROADPHASE_ERROR_NEGATIVE_RADIUS);
    CHECK_EQ_INT(broadphase_query_sphere(w, z, NAN, out, 8, &n), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_query_sphere(w, NULL, 1.0f, out, 8, &n),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_raycast(w, z, z, 1.0f, hit, 8, &n), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_raycast(w, z, one, -1.0f, hit, 8, &n),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_raycast(w, z, one, NAN, hit, 8, &n), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_raycast(w, nan3, one, 1.0f, hit, 8, &n), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_raycast_closest(w, z, z, 1.0f, hit, &found),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_raycast_closest(w, z, one, 1.0f, NULL, &found),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    float degenerate[2][4] = {{1, 0, 0, 5}, {0, 0, 0, 1}};
    CHECK_EQ_INT(broadphase_query_planes(w, (const float(*)[4])degenerate, 2, out, 8, &n),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_query_planes(w, NULL, 1, out, 8, &n),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    float nanplane[1][4] = {{1, 0, 0, NAN}};
    CHECK_EQ_INT(broadphase_query_planes(w, (const float(*)[4])nanplane, 1, out, 8, &n),
                 BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_nearest(w, nan3, 3, out, NULL, &n), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_nearest(w, z, 3, NULL, NULL, &n), BROADPHASE_ERROR_INVALID_ARGUMENT);
    /* zero planes: everything; k larger than the world: all of it */
    CHECK_EQ_INT(broadphase_query_planes(w, NULL, 0, NULL, 0, &n),
                 BROADPHASE_ERROR_BUFFER_TOO_SMALL);
    CHECK_EQ_INT(n, 500);
    uint32_t all[600];
    float d2[600];
    CHECK_EQ_INT(broadphase_nearest(w, z, 600, all, d2, &n), BROADPHASE_OK);
    CHECK_EQ_INT(n, 500);
    for (size_t i = 1; i < n; i++) CHECK(d2[i - 1] <= d2[i]);
    /* the buffer-too-small protocol: the count, and the buffer untouched */
    for (int i = 0; i < 8; i++) out[i] = 12345;
    CHECK_EQ_INT(broadphase_query_box(w, neg, big, out, 8, &n), BROADPHASE_ERROR_BUFFER_TOO_SMALL);
    CHECK_EQ_INT(n, 500);
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(out[i], 12345);
    CHECK_EQ_INT(broadphase_query_box(w, neg, big, all, 600, &n), BROADPHASE_OK);
    for (size_t i = 0; i < 500; i++) CHECK_EQ_INT(all[i], ids[i]);
    /* batches name the first bad query and write nothing */
    float lo[4] = {0, 0, 0, 0}, hi[4] = {1, 1, 1, 1}, r[4] = {1, 1, -1, 1};
    hi[2] = NAN;
    broadphase_boxes bx = {lo, lo, lo, hi, hi, hi};
    size_t off[5];
    broadphase_id_rows rows = {off, out, 8, 0, 0};
    CHECK_EQ_INT(broadphase_query_boxes(w, 4, &bx, &rows), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(rows.bad_index, 2);
    broadphase_spheres sp = {lo, lo, lo, r};
    CHECK_EQ_INT(broadphase_query_spheres(w, 4, &sp, &rows), BROADPHASE_ERROR_NEGATIVE_RADIUS);
    CHECK_EQ_INT(rows.bad_index, 2);
    broadphase_boxes missing = {lo, lo, NULL, hi, hi, hi};
    CHECK_EQ_INT(broadphase_query_boxes(w, 4, &missing, &rows), BROADPHASE_ERROR_INVALID_ARGUMENT);
    rows.offsets = NULL;
    CHECK_EQ_INT(broadphase_query_spheres(w, 4, &sp, &rows), BROADPHASE_ERROR_INVALID_ARGUMENT);
    float dz[4] = {0, 0, 0, 0}, t1[4] = {1, 1, 1, 1};
    float dx[4] = {1, 1, 0, 1};
    broadphase_rays rays = {lo, lo, lo, dx, dz, dz, t1};
    size_t bad = 0;
    broadphase_ray_hit ch[4];
    CHECK_EQ_INT(broadphase_raycasts_closest(w, 4, &rays, ch, &bad),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(bad, 2);
    broadphase_points pts = {lo, hi, lo};
    size_t counts[4];
    CHECK_EQ_INT(broadphase_nearest_many(w, 4, &pts, 2, out, NULL, counts, &bad),
                 BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(bad, 2);
    /* a batch long enough to be checked in chunks over the workers: the first bad query is
     * named (a later chunk's, and one further on in the same chunk, are bad too), whatever the
     * thread count; a chunk's first and last */
    enum { LONG = 20000 };
    float *px = calloc(LONG, sizeof(float)), *py = calloc(LONG, sizeof(float));
    float *pr = malloc(LONG * sizeof(float));
    size_t *loff = malloc((LONG + 1) * sizeof(size_t));
    REQUIRE(px && py && pr && loff);
    for (size_t i = 0; i < LONG; i++) pr[i] = 1.0f;
    size_t firsts[] = {17000, 4096, 4095, 12287, 0};
    for (int t = 1; t <= 4; t++) {
        broadphase_world *v =
            make_world(3, method_at((size_t)t % METHODS), BROADPHASE_UPDATE_AUTO, t);
        REQUIRE(v);
        for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
            TEST_CONTEXT("threads %d first bad %zu", t, firsts[f]);
            size_t first = firsts[f];
            px[first] = NAN;
            py[first + 1000 < LONG ? first + 1000 : LONG - 1] = INFINITY;
            pr[19999] = -1.0f;
            broadphase_points lp = {px, py, px};
            size_t *lcounts = malloc(LONG * sizeof(size_t));
            uint32_t *lids = malloc(LONG * 2 * sizeof(uint32_t));
            REQUIRE(lcounts && lids);
            CHECK_EQ_INT(
                broadphase_nearest_many_within(v, LONG, &lp, 2, 1.0f, lids, NULL, lcounts, &bad),
                BROADPHASE_ERROR_NONFINITE);
            CHECK_EQ_INT(bad, first);
            broadphase_spheres ls = {py, px, py, pr};
            broadphase_id_rows lrows = {loff, NULL, 0, 0, 0};
            CHECK_EQ_INT(broadphase_query_spheres(v, LONG, &ls, &lrows),
                         BROADPHASE_ERROR_NONFINITE);
            CHECK_EQ_INT(lrows.bad_index, first);
            px[first] = 0.0f;
            py[first + 1000 < LONG ? first + 1000 : LONG - 1] = 0.0f;
            CHECK_EQ_INT(broadphase_query_spheres(v, LONG, &ls, &lrows),
                         BROADPHASE_ERROR_NEGATIVE_RADIUS);
            CHECK_EQ_INT(lrows.bad_index, 19999);
            pr[19999] = 1.0f;
            free(lcounts);
            free(lids);
        }
        broadphase_destroy(v);
    }
    free(px);
    free(py);
    free(pr);
    free(loff);
    broadphase_destroy(w);
    scene_free(&sc);
}

/* The exact predicates on hand-computed cases. */
TEST(predicates_by_hand) {
    float lo[3] = {1, 1, 1}, hi[3] = {2, 2, 2}, o[3] = {0, 1.5f, 1.5f}, d[3] = {1, 0, 0};
    qm_ray r;
    double t = -1;
    qm_ray_init(&r, o, d, 10.0, 3);
    CHECK(qm_ray_box(&r, lo, hi, 3, 10.0, &t) && t == 1.0);
    CHECK(!qm_ray_box(&r, lo, hi, 3, 0.5, &t));            /* too short */
    CHECK(qm_ray_box(&r, lo, hi, 3, 1.0, &t) && t == 1.0); /* exactly reaching: closed */
    float o2[3] = {0, 2.5f, 1.5f};
    qm_ray_init(&r, o2, d, 10.0, 3);
    CHECK(!qm_ray_box(&r, lo, hi, 3, 10.0, &t)); /* parallel, outside */
    float o3[3] = {1.5f, 1.5f, 1.5f}, back[3] = {-1, 0, 0};
    qm_ray_init(&r, o3, back, 10.0, 3);
    CHECK(qm_ray_box(&r, lo, hi, 3, 10.0, &t) && t == 0.0); /* from inside */
    float c[3] = {5, 0, 0}, zero[3] = {0, 0, 0};
    qm_ray_init(&r, zero, d, 100.0, 3);
    CHECK(qm_ray_sphere(&r, c, 1.0f, 3, 100.0, &t) && t == 4.0);
    float away[3] = {-1, 0, 0};
    qm_ray_init(&r, zero, away, 100.0, 3);
    CHECK(!qm_ray_sphere(&r, c, 1.0f, 3, 100.0, &t));
    /* Huge origin and direction along z (the fuzzer's finding): the textbook discriminant
     * cancels and "hits" a sphere 40 units off the line; the line through its centre hits. */
    float far_o[3] = {45.0f, 0.0f, -1e37f}, far_d[3] = {0.0f, 0.0f, 4e37f}, ball[3] = {5, 0, 0};
    qm_ray_init(&r, far_o, far_d, 1.0, 3);
    CHECK(!qm_ray_sphere(&r, ball, 10.0f, 3, 1.0, &t));
    far_o[0] = 5.0f;
    qm_ray_init(&r, far_o, far_d, 1.0, 3);
    CHECK(qm_ray_sphere(&r, ball, 10.0f, 3, 1.0, &t) && fabs(t - 0.25) < 1e-9);
    float p[3] = {4, 1.5f, 1.5f};
    CHECK(qm_box_dist2(p, lo, hi, 3) == 4.0);
    CHECK(qm_box_far2(p, lo, hi, 3) == 9.0 + 0.25 + 0.25);
    CHECK(qm_sphere_dist2(p, c, 1.0f, 3) ==
          (sqrt(1 + 2.25 + 2.25) - 1) * (sqrt(1 + 2.25 + 2.25) - 1));
    float pl[1][4] = {{1, 0, 0, -2}};                          /* x >= 2 */
    CHECK(qm_planes_box((const float(*)[4])pl, 1, lo, hi, 3)); /* touches at x = 2 */
    CHECK(!qm_planes_box_inside((const float(*)[4])pl, 1, lo, hi, 3));
    float cs[3] = {1, 0, 0};
    CHECK(qm_planes_sphere((const float(*)[4])pl, 1, cs, 1.0f, 3)); /* touches */
    CHECK(!qm_planes_sphere((const float(*)[4])pl, 1, cs, 0.99f, 3));
}

/* ---- broadphase_visit_nodes ------------------------------------------------------------------ */

typedef struct seen_node {
    broadphase_node n;
    uint32_t *ids; /* a copy: the pointer is valid during the call only */
} seen_node;

typedef struct visit_log {
    seen_node *nodes;
    size_t count, cap, stop_after;
} visit_log;

static bool log_node(const broadphase_node *n, void *p) {
    visit_log *log = p;
    if (log->count == log->cap) {
        log->cap = log->cap ? 2 * log->cap : 256;
        log->nodes = realloc(log->nodes, log->cap * sizeof *log->nodes);
    }
    seen_node *s = &log->nodes[log->count++];
    s->n = *n;
    s->ids = malloc((n->object_count + 1) * sizeof *s->ids);
    memcpy(s->ids, n->ids, n->object_count * sizeof *s->ids);
    return log->stop_after == 0 || log->count < log->stop_after;
}

static void log_free(visit_log *log) {
    for (size_t i = 0; i < log->count; i++) free(log->nodes[i].ids);
    free(log->nodes);
    *log = (visit_log){0};
}

static void object_box(const mirror *m, uint32_t id, float lo[3], float hi[3]) {
    for (int k = 0; k < 3; k++) {
        lo[k] = m->sphere[id] ? m->c[id][k] - m->r[id] : m->lo[id][k];
        hi[k] = m->sphere[id] ? m->c[id][k] + m->r[id] : m->hi[id][k];
        if (k >= m->dims) lo[k] = hi[k] = 0.0f;
    }
}

static bool box_within(const float lo[3], const float hi[3], const float blo[3], const float bhi[3],
                       float slack) {
    for (int k = 0; k < 3; k++)
        if (!(lo[k] >= blo[k] - slack && hi[k] <= bhi[k] + slack)) return false;
    return true;
}

/* One world's visit against its stats, its levels and the objects it holds. */
static void check_visit(const broadphase_world *w, const mirror *m, broadphase_method method,
                        float looseness) {
    visit_log log = {0};
    CHECK_EQ_INT(broadphase_visit_nodes(w, log_node, &log), BROADPHASE_OK);
    broadphase_stats st;
    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
    size_t levels_n = 0;
    broadphase_level levels[256] = {{0}}, seen_levels[256] = {{0}};
    CHECK(broadphase_get_levels(w, levels, 256, &levels_n) == BROADPHASE_OK);
    size_t held[3] = {0}, nodes[3] = {0}, leaves = 0, depth = 0;
    uint8_t *found = calloc(m->cap + 1, 1);
    size_t first = 0; /* the current structure's root in the log */
    for (size_t i = 0; i < log.count; i++) {
        const broadphase_node *n = &log.nodes[i].n;
        if (n->parent == BROADPHASE_NO_NODE) first = i;
        CHECK_EQ_INT(n->index, i - first);
        int s = (int)n->structure;
        REQUIRE(s >= 0 && s < 3);
        nodes[s]++;
        held[s] += n->object_count;
        CHECK_EQ_INT(n->has_cell, s == BROADPHASE_STRUCTURE_TREE);
        /* the family: parent before child, one level up, children counted, counts summed */
        size_t kids = 0, below = n->object_count;
        for (size_t j = i + 1; j < log.count && log.nodes[j].n.parent != BROADPHASE_NO_NODE; j++) {
            const broadphase_node *c = &log.nodes[j].n;
            if (c->parent != n->index) continue;
            kids++;
            below += c->subtree_count;
            CHECK_EQ_INT(c->depth, n->depth + 1);
            CHECK(box_within(c->bounds_min, c->bounds_max, n->bounds_min, n->bounds_max, 0.0f) ||
                  c->subtree_count == 0);
            if (s == BROADPHASE_STRUCTURE_TREE) {
                float slack = 1e-5f * (n->cell_max[0] - n->cell_min[0]);
                if (!isfinite(slack)) slack = 0.0f;
                CHECK(box_within(c->cell_min, c->cell_max, n->cell_min, n->cell_max, slack));
            }
        }
        CHECK_EQ_INT(kids, n->children);
        CHECK_EQ_INT(below, n->subtree_count);
        if (n->parent == BROADPHASE_NO_NODE) CHECK_EQ_INT(n->depth, 0);
        if (s == BROADPHASE_STRUCTURE_TREE) {
            leaves += n->children == 0;
            depth = n->depth > depth ? n->depth : depth;
            if (n->depth < 256) {
                seen_levels[n->depth].nodes++;
                seen_levels[n->depth].leaves += n->children == 0;
                seen_levels[n->depth].objects += n->object_count;
            }
        }
        /* every object once, inside its node's bounds (and its cell, loosely for the octree) */
        for (size_t j = 0; j < n->object_count; j++) {
            uint32_t id = log.nodes[i].ids[j];
            REQUIRE(id < m->cap && m->alive[id]);
            CHECK(!found[id]);
            found[id] = 1;
            float lo[3], hi[3];
            object_box(m, id, lo, hi);
            CHECK(box_within(lo, hi, n->bounds_min, n->bounds_max, 0.0f));
            if (s != BROADPHASE_STRUCTURE_TREE) continue;
            if (method == BROADPHASE_METHOD_KDTREE) {
                for (int k = 0; k < m->dims; k++)
                    CHECK(lo[k] > n->cell_min[k] && hi[k] < n->cell_max[k]);
            } else {
                float side = n->cell_max[0] - n->cell_min[0];
                CHECK(box_within(lo, hi, n->cell_min, n->cell_max,
                                 side * ((looseness - 1.0f) / 2.0f + 1e-5f)));
            }
        }
    }
    size_t live = 0;
    for (uint32_t id = 0; id < m->cap; id++) {
        live += m->alive[id];
        if (m->alive[id] && method_has_tree(method)) CHECK(found[id]);
    }
    if (!method_has_tree(method)) {
        CHECK_EQ_INT(log.count, 0);
    } else {
        CHECK_EQ_INT(held[0] + held[1] + held[2], live);
        CHECK_EQ_INT(held[BROADPHASE_STRUCTURE_STATIC], st.static_objects);
        CHECK_EQ_INT(held[BROADPHASE_STRUCTURE_REST], st.resting_objects);
        CHECK_EQ_INT(nodes[BROADPHASE_STRUCTURE_TREE], st.nodes);
        CHECK_EQ_INT(leaves, st.leaves);
        CHECK_EQ_INT(depth, st.depth);
        CHECK_EQ_INT(levels_n, st.depth + 1);
        for (size_t l = 0; l < levels_n && l < 256; l++) {
            CHECK_EQ_INT(seen_levels[l].nodes, levels[l].nodes);
            CHECK_EQ_INT(seen_levels[l].leaves, levels[l].leaves);
            CHECK_EQ_INT(seen_levels[l].objects, levels[l].objects);
        }
    }
    free(found);
    log_free(&log);
}

TEST(visit_nodes_show_the_structures) {
    static const scene_kind kinds[] = {SCENE_SHAPES, SCENE_SHAPES2D, SCENE_CLUSTERED};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        for (size_t mi = 0; mi < METHODS; mi++) {
            TEST_CONTEXT("scene %s method %s", scene_name(kinds[ki]), method_name(method_at(mi)));
            scene sc;
            REQUIRE(scene_make(&sc, kinds[ki], 4000, 21));
            broadphase_config c =
                test_config(sc.dimensions, method_at(mi), BROADPHASE_UPDATE_AUTO, 2, 0);
            c.rest_share = 1.0f;
            broadphase_world *w = make_world_from(&c);
            REQUIRE(w);
            mirror m = {.dims = sc.dimensions};
            uint32_t *ids = malloc(4000 * sizeof *ids);
            uint64_t rng = 8;
            add_scene_mirrored(&sc, w, ids, &m);
            visit_log log = {0};
            CHECK_EQ_INT(broadphase_visit_nodes(w, log_node, &log), BROADPHASE_OK);
            CHECK_EQ_INT(log.count, 0); /* nothing before the first step */
            step_ok(w);
            check_visit(w, &m, method_at(mi), c.looseness); /* the tree alone */
            if (method_has_tree(method_at(mi))) {
                log.stop_after = 5; /* the visitor stops it */
                CHECK_EQ_INT(broadphase_visit_nodes(w, log_node, &log), BROADPHASE_OK);
                CHECK_EQ_INT(log.count, 5);
                log_free(&log);
            }
            statics_then_rest(w, &m, 4000, &rng);
            broadphase_stats st;
            CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
            CHECK(!method_has_tree(method_at(mi)) ||
                  (st.resting_objects > 1000 && st.static_objects == 1000));
            check_visit(w, &m, method_at(mi), c.looseness); /* tree, statics and rest */
            CHECK_EQ_INT(broadphase_visit_nodes(NULL, log_node, &log),
                         BROADPHASE_ERROR_INVALID_ARGUMENT);
            CHECK_EQ_INT(broadphase_visit_nodes(w, NULL, &log), BROADPHASE_ERROR_INVALID_ARGUMENT);
            CHECK_EQ_INT(log.count, 0);
            broadphase_destroy(w);
            free(ids);
            mirror_free(&m);
            scene_free(&sc);
        }
    }
}

/* A defect found from outside: a static field or a field at rest of 1 to 8 objects (one block, so
 * a root with no entry below it) was shown with empty bounds ([+inf, -inf]) over its objects.
 * Fields of 1 to 12 objects, alone and beside a few tree objects, both trees, 2D and 3D: every
 * node's bounds hold its objects and its children (check_visit). */
TEST(visit_nodes_small_fields) {
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t mi = 0; mi < METHODS; mi++) {
            if (!method_has_tree(method_at(mi))) continue;
            for (int rest = 0; rest < 2; rest++) {
                for (size_t n = 1; n <= 12; n++) {
                    TEST_CONTEXT("dims %d method %s field of %zu %s", dims,
                                 method_name(method_at(mi)), n, rest ? "at rest" : "static");
                    scene sc;
                    REQUIRE(
                        scene_make(&sc, dims == 3 ? SCENE_SHAPES : SCENE_SHAPES2D, n + 3, 40 + n));
                    broadphase_config c =
                        test_config(dims, method_at(mi), BROADPHASE_UPDATE_AUTO, 2, 0);
                    c.rest_share = 1.0f;
                    broadphase_world *w = make_world_from(&c);
                    REQUIRE(w);
                    mirror m = {.dims = dims};
                    uint32_t ids[16];
                    add_scene_mirrored(&sc, w, ids, &m);
                    if (rest) {
                        /* the field's objects rest; the last three keep moving */
                        uint64_t rng = 3;
                        step_ok(w);
                        for (int f = 0; f < 2; f++) {
                            move_some(w, &m, 1, n, &rng);
                            step_ok(w);
                        }
                    } else {
                        CHECK_EQ_INT(broadphase_set_static(w, n, ids, true), BROADPHASE_OK);
                        step_ok(w);
                    }
                    broadphase_stats st;
                    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
                    CHECK_EQ_INT(rest ? st.resting_objects : st.static_objects, n);
                    check_visit(w, &m, method_at(mi), c.looseness);
                    broadphase_destroy(w);
                    mirror_free(&m);
                    scene_free(&sc);
                }
            }
        }
    }
}

TEST_MAIN()

/* The conformance table: every method runs the same behaviours through the public API, in 2D
 * and 3D, under each update policy and several thread counts: an empty world and one object
 * give no pairs; removing everything gives none and the ids come back; statics, objects at rest
 * and collision filters give the pairs of the naive reference; pair events are the difference of
 * consecutive pair sets; the queries equal the reference over the objects; the levels add up to
 * the statistics. The rows are the one list of methods (BROADPHASE_METHOD_LIST). */
#include "method.h"
#include "query_oracle.h"

#include <float.h>
#include <limits.h>
#include <math.h>

/* The methods are the one list (BROADPHASE_METHOD_LIST): method_at(0 .. METHODS), oracle.h. A
 * method added there runs every test here. */

/* The registry (engine/method.c) gives every method of the list its table, under its own id
 * and name, with what the frame needs of it; the enum's values are the list's order, and a
 * value past the list names no method. */
TEST(registry_covers_the_list) {
    static const struct {
        broadphase_method method;
        const char *name;
    } rows[] = {
#define METHOD_ROW_(id, name) {id, #name},
        BROADPHASE_METHOD_LIST(METHOD_ROW_)
#undef METHOD_ROW_
    };
    CHECK_EQ_INT(sizeof rows / sizeof rows[0], METHODS);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        TEST_CONTEXT("method %s", rows[r].name);
        CHECK_EQ_INT((size_t)rows[r].method, r);
        const method_table *m = method_for(rows[r].method);
        REQUIRE(m != NULL);
        CHECK_EQ_INT(m->id, rows[r].method);
        CHECK(strcmp(m->name, rows[r].name) == 0);
        CHECK(strcmp(broadphase_method_name(rows[r].method), rows[r].name) == 0);
        CHECK(m->update != NULL && m->plan_search != NULL && m->destroy != NULL);
        CHECK(m->leaf_size >= 1);
    }
    CHECK(method_for((broadphase_method)METHODS) == NULL);
    CHECK(method_for((broadphase_method)-1) == NULL);
    CHECK(broadphase_method_name((broadphase_method)METHODS) == NULL);
}

/* The settings a row runs the small behaviours under: each update policy, 1 to 8 threads, the
 * default looseness and the strict one (read by the octree alone). Brute force ignores the
 * policy and the looseness, and runs them all the same. */
typedef struct setting {
    broadphase_update_policy update;
    int threads;
    float looseness; /* 0: the default */
} setting;

static const setting SETTINGS[] = {
    {BROADPHASE_UPDATE_AUTO, 1, 0.0f},    {BROADPHASE_UPDATE_AUTO, 3, 0.0f},
    {BROADPHASE_UPDATE_REBUILD, 2, 0.0f}, {BROADPHASE_UPDATE_REBUILD, 8, 1.0f},
    {BROADPHASE_UPDATE_REFIT, 1, 0.0f},   {BROADPHASE_UPDATE_REFIT, 3, 1.0f},
    {BROADPHASE_UPDATE_AUTO, 2, 1.0f},
};
enum { SETTING_COUNT = sizeof SETTINGS / sizeof SETTINGS[0] };

#define SETTING_FMT "policy %s threads %d looseness %g"
#define SETTING_ARGS(s) policy_names[(s)->update], (s)->threads, (double)(s)->looseness

/* The scene tests, too long to run each scene under every policy, take the policies in turn. */
static broadphase_update_policy scene_policy(int kind, int variant) {
    return (broadphase_update_policy)((kind + variant) % 3);
}

/* The levels add up to the statistics (check_levels, oracle.h): one level more than the depth,
 * their nodes and leaves summing to the stats' and their objects to the objects less the statics
 * and those at rest. A node's number of children is the method's own and is not bounded here; a
 * method that keeps no tree reports no nodes and no levels. */
static void check_levels_add_up(const broadphase_world *w) {
    broadphase_stats st;
    REQUIRE(broadphase_get_stats(w, &st) == BROADPHASE_OK);
    check_levels(w, st.nodes == 0 ? 0 : INT_MAX);
}

/* Adds (add: ids[i] receives object i's id) or moves (to ids[i]) the scene's objects idx[0, n),
 * each run of one kind in one call, so that the ids handed out follow the order of idx. */
static void scene_put(const scene *s, broadphase_world *w, const size_t *idx, size_t n,
                      uint32_t *ids, bool add) {
    float *col[7];
    for (int k = 0; k < 7; k++) col[k] = malloc((n + 1) * sizeof(float));
    uint32_t *batch = malloc((n + 1) * sizeof *batch);
    for (size_t j = 0; j < n;) {
        bool sphere = s->is_sphere[idx[j]];
        size_t m = 0, first = j;
        for (; j < n && (bool)s->is_sphere[idx[j]] == sphere; j++, m++) {
            float lo[3], hi[3], c[3], r;
            scene_object(s, idx[j], lo, hi, c, &r);
            for (int k = 0; k < 3; k++) {
                col[k][m] = sphere ? c[k] : lo[k];
                col[3 + k][m] = hi[k];
            }
            col[6][m] = r;
            batch[m] = ids[idx[j]];
        }
        broadphase_boxes bx = {col[0], col[1], col[2], col[3], col[4], col[5]};
        broadphase_spheres sp = {col[0], col[1], col[2], col[6]};
        broadphase_status st;
        if (add)
            st = sphere ? broadphase_add_spheres(w, m, &sp, batch)
                        : broadphase_add_boxes(w, m, &bx, batch);
        else
            st = sphere ? broadphase_move_spheres(w, m, batch, &sp)
                        : broadphase_move_boxes(w, m, batch, &bx);
        CHECK_EQ_INT(st, BROADPHASE_OK);
        if (add)
            for (size_t q = 0; q < m; q++) ids[idx[first + q]] = batch[q];
    }
    for (int k = 0; k < 7; k++) free(col[k]);
    free(batch);
}

/* The naive reference's pairs among the live objects of the scene (live by scene index; NULL:
 * all), as sorted pairs of their ids. `by_index` holds the pairs by scene index. */
static void live_pairs(const scene *s, const uint32_t *ids, const uint8_t *live,
                       pair_list *by_index, pair_list *out) {
    uint32_t *index = malloc((s->count + 1) * sizeof *index);
    for (size_t i = 0; i < s->count; i++) index[i] = (uint32_t)i;
    naive_pairs(s, index, by_index);
    free(index);
    out->count = 0;
    for (size_t p = 0; p < by_index->count; p++) {
        uint32_t a = by_index->data[p].a, b = by_index->data[p].b;
        if (!live || (live[a] && live[b])) pair_list_push(out, ids[a], ids[b]);
    }
    if (out->count) qsort(out->data, out->count, sizeof *out->data, pair_compare);
}

/* ---- an empty world, one object, everything removed --------------------------------------- */

/* One box or sphere at x, of half-size (or radius) h, for a world of `dims`. */
static uint32_t add_one(broadphase_world *w, int dims, bool sphere, float x, float h) {
    float c[3] = {x, 0.0f, 0.0f}, lo[3] = {x - h, -h, -h}, hi[3] = {x + h, h, h};
    uint32_t id = UINT32_MAX;
    if (sphere) {
        broadphase_spheres sp = {&c[0], &c[1], dims == 3 ? &c[2] : NULL, &h};
        CHECK_EQ_INT(broadphase_add_spheres(w, 1, &sp, &id), BROADPHASE_OK);
    } else {
        broadphase_boxes b = {&lo[0], &lo[1], dims == 3 ? &lo[2] : NULL,
                              &hi[0], &hi[1], dims == 3 ? &hi[2] : NULL};
        CHECK_EQ_INT(broadphase_add_boxes(w, 1, &b, &id), BROADPHASE_OK);
    }
    return id;
}

static void move_one_sphere(broadphase_world *w, int dims, uint32_t id, float x, float r) {
    float c[3] = {x, 0.0f, 0.0f};
    broadphase_spheres sp = {&c[0], &c[1], dims == 3 ? &c[2] : NULL, &r};
    CHECK_EQ_INT(broadphase_move_spheres(w, 1, &id, &sp), BROADPHASE_OK);
}

/* A step's pair count, and the levels after it. */
static size_t step_count(broadphase_world *w) {
    size_t n = step_ok(w).count;
    check_levels_add_up(w);
    return n;
}

/* An empty world steps to no pairs; one object alone (a box, then a sphere) gives none; a second
 * one on it gives one pair, and removing them brings back none. (From test_world, where it ran
 * in 3D over the methods and 1 and 2 threads.) */
TEST(step_empty_and_single_object) {
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t mi = 0; mi < METHODS; mi++) {
            for (size_t si = 0; si < SETTING_COUNT; si++) {
                const setting *set = &SETTINGS[si];
                TEST_CONTEXT("%dD %s " SETTING_FMT, dims, method_name(method_at(mi)),
                             SETTING_ARGS(set));
                broadphase_world *w = make_world_loose(dims, method_at(mi), set->update,
                                                       set->threads, set->looseness);
                REQUIRE(w);
                check_levels_add_up(w); /* before the first step: no levels */
                CHECK_EQ_INT(step_count(w), 0);
                CHECK_EQ_INT(broadphase_last_pairs(w).count, 0);
                CHECK_EQ_INT(step_count(w), 0);
                uint32_t id = add_one(w, dims, false, 0.0f, 0.5f);
                CHECK_EQ_INT(step_count(w), 0);
                CHECK_EQ_INT(step_count(w), 0);
                move_one_sphere(w, dims, id, 0.0f, 1.0f);
                CHECK_EQ_INT(step_count(w), 0);
                /* Two objects overlapping, then one removed: back to none. */
                uint32_t other = add_one(w, dims, true, 0.5f, 1.0f);
                broadphase_pairs p = step_ok(w);
                CHECK(p.count == 1 && p.data[0].a == id && p.data[0].b == other);
                check_levels_add_up(w);
                CHECK_EQ_INT(broadphase_remove(w, 1, &other), BROADPHASE_OK);
                CHECK_EQ_INT(step_count(w), 0);
                CHECK_EQ_INT(broadphase_remove(w, 1, &id), BROADPHASE_OK);
                CHECK_EQ_INT(step_count(w), 0);
                CHECK_EQ_INT(broadphase_object_count(w), 0);
                broadphase_destroy(w);
            }
        }
    }
}

/* Add a scene, remove half, then the rest: the pairs those of the reference at each step, none
 * once empty, with the levels adding up (to no object at all once empty), and the ids 0..n-1
 * handed out again when the scene comes back (three rounds). Every method and setting, 2D and
 * 3D. (From test_update, where it ran the trees against brute force.) */
TEST(empty_and_refill) {
    pair_list by_index = {0}, all = {0}, want = {0};
    for (int dims = 2; dims <= 3; dims++) {
        scene s;
        REQUIRE(scene_make(&s, dims == 3 ? SCENE_SHAPES : SCENE_SHAPES2D, 2000, 3));
        size_t n = s.count;
        uint32_t *ids = malloc(n * sizeof *ids), *gone = malloc(n * sizeof *gone);
        size_t *every = malloc(n * sizeof *every);
        uint8_t *live = malloc(n);
        for (size_t i = 0; i < n; i++) {
            every[i] = i;
            ids[i] = (uint32_t)i;
        }
        for (size_t i = 0; i < n; i++) live[i] = i % 2 == 0; /* the half kept */
        live_pairs(&s, ids, NULL, &by_index, &all);
        live_pairs(&s, ids, live, &by_index, &want);
        for (size_t mi = 0; mi < METHODS; mi++) {
            for (size_t si = 0; si < SETTING_COUNT; si++) {
                const setting *set = &SETTINGS[si];
                broadphase_world *w = make_world_loose(dims, method_at(mi), set->update,
                                                       set->threads, set->looseness);
                REQUIRE(w);
                for (int round = 0; round < 3; round++) {
                    TEST_CONTEXT("%dD %s " SETTING_FMT " round %d", dims,
                                 method_name(method_at(mi)), SETTING_ARGS(set), round);
                    for (size_t i = 0; i < n; i++) ids[i] = UINT32_MAX;
                    scene_put(&s, w, every, n, ids, true);
                    bool in_order = true;
                    for (size_t i = 0; i < n; i++) in_order &= ids[i] == (uint32_t)i;
                    REQUIRE(in_order); /* 0..n-1, from an empty world every time */
                    broadphase_pairs got = step_ok(w);
                    CHECK(pairs_equal(all.data, all.count, got.data, got.count, "refill"));
                    check_levels_add_up(w);
                    /* Remove the odd ones, step, then the rest. */
                    size_t k = 0;
                    for (size_t i = 1; i < n; i += 2) gone[k++] = (uint32_t)i;
                    CHECK_EQ_INT(broadphase_remove(w, k, gone), BROADPHASE_OK);
                    got = step_ok(w);
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, "half removed"));
                    check_levels_add_up(w);
                    k = 0;
                    for (size_t i = 0; i < n; i += 2) gone[k++] = (uint32_t)i;
                    CHECK_EQ_INT(broadphase_remove(w, k, gone), BROADPHASE_OK);
                    CHECK_EQ_INT(step_ok(w).count, 0);
                    CHECK_EQ_INT(broadphase_object_count(w), 0);
                    broadphase_stats st;
                    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
                    CHECK_EQ_INT(st.objects, 0);
                    check_levels_add_up(w);
                }
                broadphase_destroy(w);
            }
        }
        free(ids);
        free(gone);
        free(every);
        free(live);
        scene_free(&s);
    }
    free(by_index.data);
    free(all.data);
    free(want.data);
}

/* ---- statics, rest and filters against the reference ------------------------------------- */

/* Collision filters on every scene: random categories, masks and groups on the objects, every
 * method at 1 and 3 threads (the update policy changing with the scene) over a few moving frames,
 * against the naive reference with the same rule applied to its pairs (the engine filters inside
 * the search; the reference afterwards). */
TEST(filters_on_every_scene) {
    pair_list all = {0}, want = {0};
    size_t kept_total = 0, dropped_total = 0;
    for (int kind = 0; kind < SCENE_KIND_COUNT; kind++) {
        const size_t n = 700; /* dense, whose pairs are almost all pairs, at its cap too */
        for (size_t mi = 0; mi < METHODS; mi++) {
            for (int ti = 0; ti < 2; ti++) {
                scene s;
                REQUIRE(scene_make(&s, (scene_kind)kind, n, 77));
                uint32_t *ids = malloc((n + 1) * sizeof *ids);
                broadphase_filter *fl = malloc((n + 1) * sizeof *fl);
                int threads = ti == 0 ? 1 : 3;
                broadphase_update_policy policy = scene_policy(kind, ti);
                TEST_CONTEXT("scene %s method %s threads %d policy %s", scene_name(s.kind),
                             method_name(method_at(mi)), threads, policy_names[policy]);
                broadphase_world *w = make_world(s.dimensions, method_at(mi), policy, threads);
                REQUIRE(w);
                CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
                uint64_t rng = 99 + (uint64_t)kind;
                for (size_t i = 0; i < n; i++) {
                    fl[i].category = 1u << (int)(scene_uniform(&rng) * 2.99f);
                    fl[i].mask = scene_uniform(&rng) < 0.5f
                                     ? 0xFFFFFFFFu
                                     : (uint32_t)(scene_uniform(&rng) * 7.99f);
                    fl[i].group = scene_uniform(&rng) < 0.7f ? 0u : 1u + (uint32_t)(i % 5);
                }
                CHECK_EQ_INT(broadphase_set_filters(w, n, ids, fl), BROADPHASE_OK);
                for (int f = 0; f < 3; f++) {
                    if (f > 0) {
                        scene_advance(&s);
                        CHECK_EQ_INT(scene_move_in_world(&s, w, ids), BROADPHASE_OK);
                    }
                    broadphase_pairs got = step_ok(w);
                    naive_pairs(&s, ids, &all);
                    want.count = 0;
                    for (size_t p = 0; p < all.count; p++) {
                        /* ids are 0..n-1 in scene order: the world was empty */
                        const broadphase_filter *a = &fl[all.data[p].a], *b = &fl[all.data[p].b];
                        bool pass = (a->category & b->mask) && (b->category & a->mask) &&
                                    !(a->group != 0 && a->group == b->group);
                        if (pass) pair_list_push(&want, all.data[p].a, all.data[p].b);
                    }
                    kept_total += want.count;
                    dropped_total += all.count - want.count;
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, "filtered"));
                }
                broadphase_destroy(w);
                free(fl);
                free(ids);
                scene_free(&s);
            }
        }
    }
    CHECK(kept_total > 10000 && dropped_total > 10000);
    free(all.data);
    free(want.data);
}

/* Static objects on every scene: a share of the objects static (none, some, most, all), every
 * method at 1 and 3 threads (the update policy changing with the scene), against the naive
 * reference without the static-static pairs; the levels add up after every step.
 * Frame 1 changes nothing (the statics' structure is reused), frame 2 moves everything (it is
 * built again), frame 3 makes a third of the statics move again and some others static. */
TEST(statics_on_every_scene) {
    static const float shares[] = {0.0f, 0.3f, 0.9f, 1.0f};
    pair_list all = {0}, want = {0};
    size_t with_static = 0, dropped = 0;
    for (int kind = 0; kind < SCENE_KIND_COUNT; kind++) {
        const size_t n = 700; /* dense, whose pairs are almost all pairs, at its cap too */
        for (size_t mi = 0; mi < METHODS; mi++) {
            for (int ti = 0; ti < 2; ti++) {
                float share = shares[(size_t)(kind + (int)mi + ti) % 4];
                scene s;
                REQUIRE(scene_make(&s, (scene_kind)kind, n, 78));
                uint32_t *ids = malloc((n + 1) * sizeof *ids);
                uint8_t *flag = calloc(n + 1, 1);
                uint32_t *pick = malloc((n + 1) * sizeof *pick);
                int threads = ti == 0 ? 1 : 3;
                broadphase_update_policy policy = scene_policy(kind, ti);
                TEST_CONTEXT("scene %s method %s threads %d policy %s static share %g",
                             scene_name(s.kind), method_name(method_at(mi)), threads,
                             policy_names[policy], (double)share);
                broadphase_world *w = make_world(s.dimensions, method_at(mi), policy, threads);
                REQUIRE(w);
                CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
                uint64_t rng = 5 + (uint64_t)kind;
                size_t picked = 0;
                for (size_t i = 0; i < n; i++)
                    if (scene_uniform(&rng) < share) pick[picked++] = ids[i];
                CHECK_EQ_INT(broadphase_set_static(w, picked, pick, true), BROADPHASE_OK);
                for (size_t i = 0; i < picked; i++) flag[pick[i]] = 1;
                for (int f = 0; f < 4; f++) {
                    if (f == 2) {
                        scene_advance(&s);
                        CHECK_EQ_INT(scene_move_in_world(&s, w, ids), BROADPHASE_OK);
                    }
                    if (f == 3) {
                        size_t on = 0, off = 0;
                        for (size_t i = 0; i < n; i++) {
                            float u = scene_uniform(&rng);
                            if (flag[i] && u < 0.33f) pick[off++] = (uint32_t)i;
                            if (!flag[i] && u < 0.2f) pick[n - 1 - on++] = (uint32_t)i;
                        }
                        CHECK_EQ_INT(broadphase_set_static(w, off, pick, false), BROADPHASE_OK);
                        CHECK_EQ_INT(broadphase_set_static(w, on, pick + n - on, true),
                                     BROADPHASE_OK);
                        for (size_t i = 0; i < off; i++) flag[pick[i]] = 0;
                        for (size_t i = 0; i < on; i++) flag[pick[n - 1 - i]] = 1;
                    }
                    broadphase_pairs got = step_ok(w);
                    naive_pairs(&s, ids, &all);
                    want.count = 0;
                    for (size_t p = 0; p < all.count; p++) {
                        /* ids are 0..n-1 in scene order: the world was empty */
                        uint32_t a = all.data[p].a, b = all.data[p].b;
                        if (flag[a] && flag[b]) {
                            dropped++;
                            continue;
                        }
                        with_static += flag[a] || flag[b];
                        pair_list_push(&want, a, b);
                    }
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, "statics"));
                    broadphase_stats st;
                    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
                    size_t flagged = 0;
                    for (size_t i = 0; i < n; i++) flagged += flag[i];
                    CHECK_EQ_INT(st.static_objects, flagged);
                    check_levels_add_up(w);
                }
                broadphase_destroy(w);
                free(pick);
                free(flag);
                free(ids);
                scene_free(&s);
            }
        }
    }
    TEST_CONTEXT("%zu pairs with a static, %zu static-static pairs dropped", with_static, dropped);
    CHECK(with_static > 10000 && dropped > 10000);
    free(all.data);
    free(want.data);
}

static float within_floats(double v) {
    return v < -FLT_MAX ? -FLT_MAX : v > FLT_MAX ? FLT_MAX : (float)v;
}

/* Shifts the scene's objects pick[0, n) by up to `step` per axis and moves them in the world (the
 * boxes and the spheres in a batch each); every fifth of them is then pushed once more with the
 * shape it now has, which must not count as a change. */
static void shift_some(scene *s, broadphase_world *w, const uint32_t *ids, const size_t *pick,
                       size_t n, uint64_t *rng, float step) {
    float *col[7];
    for (int k = 0; k < 7; k++) col[k] = malloc((n + 1) * sizeof(float));
    uint32_t *moved = malloc((n + 1) * sizeof *moved);
    for (int sphere = 0; sphere < 2; sphere++) {
        for (int again = 0; again < 2; again++) {
            size_t m = 0;
            for (size_t j = 0; j < n; j++) {
                size_t i = pick[j];
                if (s->is_sphere[i] != sphere || (again && j % 5 != 0)) continue;
                for (int k = 0; k < s->dimensions && !again; k++) {
                    float d = step * (2.0f * scene_uniform(rng) - 1.0f);
                    /* kept within the float range (the edge scenes reach its end) */
                    s->min[k][i] = within_floats((double)s->min[k][i] + d);
                    s->max[k][i] = within_floats((double)s->max[k][i] + d);
                    if (s->center[k]) s->center[k][i] = within_floats((double)s->center[k][i] + d);
                }
                float lo[3], hi[3], c[3], r;
                scene_object(s, i, lo, hi, c, &r);
                for (int k = 0; k < 3; k++) {
                    col[k][m] = sphere ? c[k] : lo[k];
                    col[3 + k][m] = hi[k];
                }
                col[6][m] = r;
                moved[m++] = ids[i];
            }
            if (m == 0) continue;
            if (sphere) {
                broadphase_spheres sp = {col[0], col[1], col[2], col[6]};
                CHECK_EQ_INT(broadphase_move_spheres(w, m, moved, &sp), BROADPHASE_OK);
            } else {
                broadphase_boxes bx = {col[0], col[1], col[2], col[3], col[4], col[5]};
                CHECK_EQ_INT(broadphase_move_boxes(w, m, moved, &bx), BROADPHASE_OK);
            }
        }
    }
    for (int k = 0; k < 7; k++) free(col[k]);
    free(moved);
}

/* Only-moved updates on every scene: every method at 1 and 3 threads (the update policy changing
 * with the scene; brute force ignores the rest), with every unchanged object allowed to rest
 * (rest_share 1) or the default share, some worlds with a third of their objects
 * static. Frames move none, a few, a fifth or all of the objects (a few again pushed unchanged),
 * and one flips static flags (the rest must go); every step against the naive reference without
 * the static-static pairs, and the levels against the objects left in the tree. */
TEST(rest_on_every_scene) {
    static const float moving[] = {0.0f, 0.0f,  0.01f, 0.01f, 0.2f,  0.0f, 0.0f,
                                   0.0f, 0.05f, 1.0f,  0.01f, 0.02f, 0.0f};
    enum { FRAMES = sizeof moving / sizeof moving[0] };
    pair_list all = {0}, want = {0};
    size_t rested = 0, carried_frames = 0, idle_frames = 0;
    for (int kind = 0; kind < SCENE_KIND_COUNT; kind++) {
        const size_t n = 700; /* dense, whose pairs are almost all pairs, at its cap too */
        for (size_t mi = 0; mi < METHODS; mi++) {
            for (int ti = 0; ti < 2; ti++) {
                scene s;
                REQUIRE(scene_make(&s, (scene_kind)kind, n, 79));
                uint32_t *ids = malloc((n + 1) * sizeof *ids);
                size_t *pick = malloc((n + 1) * sizeof *pick);
                uint8_t *flag = calloc(n + 1, 1);
                int threads = ti == 0 ? 1 : 3;
                broadphase_update_policy policy = scene_policy(kind, ti);
                broadphase_config c =
                    test_config(s.dimensions, method_at(mi), policy, threads, 0.0f);
                c.rest_share = (kind + ti) % 2 ? 1.0f : c.rest_share;
                bool statics = (kind + (int)mi) % 3 == 0;
                TEST_CONTEXT("scene %s method %s threads %d policy %s rest share %g statics %d",
                             scene_name(s.kind), method_name(method_at(mi)), threads,
                             policy_names[policy], (double)c.rest_share, (int)statics);
                broadphase_world *w = make_world_from(&c);
                REQUIRE(w);
                CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
                uint64_t rng = 11 + (uint64_t)kind;
                float step = s.world_size * 0.01f;
                for (int f = 0; f < FRAMES; f++) {
                    /* Picks: a random subset of the objects, by a partial shuffle. */
                    for (size_t i = 0; i < n; i++) pick[i] = i;
                    size_t count = (size_t)(moving[f] * (float)n);
                    for (size_t i = 0; i < count; i++) {
                        size_t j = i + (size_t)(scene_uniform(&rng) * (float)(n - i));
                        size_t t = pick[i];
                        pick[i] = pick[j < n ? j : n - 1];
                        pick[j < n ? j : n - 1] = t;
                    }
                    shift_some(&s, w, ids, pick, count, &rng, step);
                    if (statics && (f == 1 || f == 7)) {
                        /* A third static at frame 1; at frame 7 some of them not, others so. */
                        uint32_t *on = malloc((n + 1) * sizeof *on), *off = malloc((n + 1) * 4);
                        size_t non = 0, noff = 0;
                        for (size_t i = 0; i < n; i++) {
                            float u = scene_uniform(&rng);
                            if (!flag[i] && u < (f == 1 ? 0.33f : 0.05f)) on[non++] = ids[i];
                            if (flag[i] && u < 0.1f) off[noff++] = ids[i];
                        }
                        CHECK_EQ_INT(broadphase_set_static(w, non, on, true), BROADPHASE_OK);
                        CHECK_EQ_INT(broadphase_set_static(w, noff, off, false), BROADPHASE_OK);
                        for (size_t i = 0; i < non; i++) flag[on[i]] = 1;
                        for (size_t i = 0; i < noff; i++) flag[off[i]] = 0;
                        free(on);
                        free(off);
                    }
                    broadphase_stats before;
                    CHECK_EQ_INT(broadphase_get_stats(w, &before), BROADPHASE_OK);
                    broadphase_pairs got = step_ok(w);
                    naive_pairs(&s, ids, &all);
                    want.count = 0;
                    for (size_t p = 0; p < all.count; p++) /* ids are the scene's indices */
                        if (!(flag[all.data[p].a] && flag[all.data[p].b]))
                            pair_list_push(&want, all.data[p].a, all.data[p].b);
                    TEST_CONTEXT("scene %s method %s threads %d policy %s rest share %g statics %d "
                                 "frame %d",
                                 scene_name(s.kind), method_name(method_at(mi)), threads,
                                 policy_names[policy], (double)c.rest_share, (int)statics, f);
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, "rest"));
                    broadphase_stats st;
                    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
                    rested += st.resting_objects;
                    carried_frames += before.resting_objects > 0 && st.resting_objects > 0;
                    /* Nothing changed: the step kept the pairs; or everything resting or
                     * static, already so at the last step: the empty tree is kept, not built
                     * again. */
                    bool kept = st.unchanged_steps > before.unchanged_steps;
                    CHECK(!kept || st.rebuilds + st.refits == before.rebuilds + before.refits);
                    idle_frames +=
                        kept || (st.resting_objects + st.static_objects == st.objects &&
                                 before.resting_objects + before.static_objects == st.objects &&
                                 st.rebuilds == before.rebuilds);
                    check_levels_add_up(w);
                }
                broadphase_destroy(w);
                free(flag);
                free(pick);
                free(ids);
                scene_free(&s);
            }
        }
    }
    TEST_CONTEXT("%zu object-frames at rest, %zu frames carried pairs over, %zu without an update",
                 rested, carried_frames, idle_frames);
    CHECK(rested > 100000 && carried_frames > 100 && idle_frames > 20);
    free(all.data);
    free(want.data);
}

/* ---- by hand ------------------------------------------------------------------------------- */

/* A 2D world of `method` with four unit boxes on one spot (all six pairs overlap), ids 0..3. */
static broadphase_world *four_boxes(broadphase_method method, uint32_t ids[4]) {
    broadphase_world *w = make_world(2, method, BROADPHASE_UPDATE_AUTO, 2);
    if (!w) return NULL;
    float lo[] = {0, 0, 0, 0}, hi[] = {1, 1, 1, 1};
    broadphase_boxes b = {lo, lo, NULL, hi, hi, NULL};
    CHECK_EQ_INT(broadphase_add_boxes(w, 4, &b, ids), BROADPHASE_OK);
    return w;
}

/* Filters by hand: categories and masks both ways, groups, defaults for new and reused ids,
 * and bad input refused with nothing changed. */
TEST(filters_by_hand_and_bad_input) {
    for (size_t mi = 0; mi < METHODS; mi++) {
        broadphase_method method = method_at(mi);
        TEST_CONTEXT("method %s", method_name(method_at(mi)));
        uint32_t ids[4];
        broadphase_world *w = four_boxes(method, ids);
        REQUIRE(w);
        float lo[] = {0, 0, 0, 0}, hi[] = {1, 1, 1, 1};
        broadphase_filter f;
        CHECK_EQ_INT(broadphase_get_filter(w, 3, &f), BROADPHASE_OK);
        CHECK(f.category == 1 && f.mask == 0xFFFFFFFFu && f.group == 0);
        /* 0: category 2, pairs only with category 4; 1: category 4; 2, 3: group 7. */
        broadphase_filter set[] = {
            {2, 4, 0}, {4, 0xFFFFFFFFu, 0}, {1, 0xFFFFFFFFu, 7}, {1, 0xFFFFFFFFu, 7}};
        CHECK_EQ_INT(broadphase_set_filters(w, 4, ids, set), BROADPHASE_OK);
        broadphase_pairs got = step_ok(w);
        /* 0-1 (each in the other's mask), 1-2 and 1-3; not 0-2 or 0-3 (their category 1 is not
         * in 0's mask), not 2-3 (one group). */
        broadphase_pair want[] = {{0, 1}, {1, 2}, {1, 3}};
        CHECK(pairs_equal(want, 3, got.data, got.count, "filtered"));
        /* Bad input: an unknown id (at index 1), a repeated id, NULL; nothing changes. */
        uint32_t unknown[] = {0, 9}, twice[] = {1, 1};
        broadphase_filter none[] = {{0, 0, 0}, {0, 0, 0}};
        CHECK_EQ_INT(broadphase_set_filters(w, 2, unknown, none), BROADPHASE_ERROR_UNKNOWN_ID);
        CHECK(broadphase_last_error_index(w) == 1);
        CHECK_EQ_INT(broadphase_set_filters(w, 2, twice, none), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK(broadphase_last_error_index(w) == 1);
        CHECK_EQ_INT(broadphase_set_filters(w, 2, NULL, none), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_set_filters(w, 2, ids, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_get_filter(w, 9, &f), BROADPHASE_ERROR_UNKNOWN_ID);
        CHECK_EQ_INT(broadphase_get_filter(w, 0, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_get_filter(w, 0, &f), BROADPHASE_OK);
        CHECK(f.category == 2 && f.mask == 4 && f.group == 0);
        got = step_ok(w);
        CHECK(pairs_equal(want, 3, got.data, got.count, "unchanged after bad input"));
        /* Object 2 removed, and a new object added on the same spot gets id 2 back with the
         * default filter: it pairs with 1 and with 3 (no group now), not with 0 (0's mask). */
        uint32_t two = 2;
        CHECK_EQ_INT(broadphase_remove(w, 1, &two), BROADPHASE_OK);
        broadphase_boxes one = {lo, lo, NULL, hi, hi, NULL};
        uint32_t again;
        CHECK_EQ_INT(broadphase_add_boxes(w, 1, &one, &again), BROADPHASE_OK);
        CHECK(again == 2);
        CHECK_EQ_INT(broadphase_get_filter(w, 2, &f), BROADPHASE_OK);
        CHECK(f.category == 1 && f.mask == 0xFFFFFFFFu && f.group == 0);
        got = step_ok(w);
        broadphase_pair after[] = {{0, 1}, {1, 2}, {1, 3}, {2, 3}};
        CHECK(pairs_equal(after, 4, got.data, got.count, "reused id"));
        broadphase_destroy(w);
    }
}

/* Only-moved updates by hand (share 0.5, so that one object of four moving leaves the others
 * to settle): a step that finds nothing changed keeps the pairs and puts nothing to rest; at a
 * step where some objects changed, the unchanged ones come to rest; a moved resting object leaves
 * the rest, filters and removal wake objects, a new static sends everything back into the tree;
 * every step's pairs by hand. Brute force never rests. Bad shares are refused. */
TEST(rest_by_hand_and_bad_config) {
    for (size_t mi = 0; mi < METHODS; mi++) {
        broadphase_method method = method_at(mi);
        bool tree = method_has_tree(method); /* brute force never rests */
        TEST_CONTEXT("method %s", method_name(method_at(mi)));
        uint32_t ids[4];
        broadphase_config cfg = test_config(2, method, BROADPHASE_UPDATE_AUTO, 2, 0.0f);
        cfg.rest_share = 0.5f;
        broadphase_world *w = make_world_from(&cfg);
        REQUIRE(w);
        float lo[] = {0, 0, 0, 0}, hi[] = {1, 1, 1, 1};
        broadphase_boxes same = {lo, lo, NULL, hi, hi, NULL};
        CHECK_EQ_INT(broadphase_add_boxes(w, 4, &same, ids), BROADPHASE_OK);
        broadphase_pair all[] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
        broadphase_stats st;
/* A step: its pairs, then the objects at rest and the rest builds so far (none for brute force). */
#define STEP_EXPECT(WANT, N, LABEL, RESTING, BUILDS)                                               \
    do {                                                                                           \
        got = step_ok(w);                                                                          \
        CHECK(pairs_equal(WANT, N, got.data, got.count, LABEL));                                   \
        CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);                                 \
        CHECK_EQ_INT(st.resting_objects, (tree ? (RESTING) : 0));                                  \
        CHECK_EQ_INT(st.rest_builds, (tree ? (BUILDS) : 0));                                       \
    } while (0)
        broadphase_pairs got;
        STEP_EXPECT(all, 6, "first step", 0, 0);
        STEP_EXPECT(all, 6, "nothing changed", 0, 0);
        CHECK_EQ_INT(broadphase_move_boxes(w, 4, ids, &same), BROADPHASE_OK);
        STEP_EXPECT(all, 6, "same shapes pushed", 0, 0);
        float far_lo[] = {5}, far_hi[] = {6};
        broadphase_boxes away = {far_lo, far_lo, NULL, far_hi, far_hi, NULL};
        CHECK_EQ_INT(broadphase_move_boxes(w, 1, &ids[3], &away), BROADPHASE_OK);
        broadphase_pair three[] = {{0, 1}, {0, 2}, {1, 2}};
        STEP_EXPECT(three, 3, "3 moved away, 0 1 2 at rest", 3, 1);
        STEP_EXPECT(three, 3, "nothing changed again", 3, 1);
        /* 0 nudged (still meeting 1 and 2): it leaves the rest; 3, unchanged now, settles. */
        float nudge_lo[] = {0.25f}, nudge_hi[] = {1};
        broadphase_boxes nudge = {nudge_lo, nudge_lo, NULL, nudge_hi, nudge_hi, NULL};
        CHECK_EQ_INT(broadphase_move_boxes(w, 1, &ids[0], &nudge), BROADPHASE_OK);
        STEP_EXPECT(three, 3, "0 nudged, 1 2 3 at rest", 3, 2);
        CHECK_EQ_INT(broadphase_move_boxes(w, 1, &ids[3], &same), BROADPHASE_OK);
        STEP_EXPECT(all, 6, "3 back, 0 1 2 at rest", 3, 3);
        /* 0 and 1 in one group: their pair goes, though neither moved; both wake, 3 settles. */
        broadphase_filter group[] = {{1u, 0xFFFFFFFFu, 7u}, {1u, 0xFFFFFFFFu, 7u}};
        CHECK_EQ_INT(broadphase_set_filters(w, 2, ids, group), BROADPHASE_OK);
        STEP_EXPECT(all + 1, 5, "0 and 1 grouped, 2 3 at rest", 2, 4);
        CHECK_EQ_INT(broadphase_remove(w, 1, &ids[2]), BROADPHASE_OK);
        broadphase_pair no_two[] = {{0, 3}, {1, 3}};
        /* 0 and 1 unchanged since the last step settle as 2 goes: 0 1 3 at rest. */
        STEP_EXPECT(no_two, 2, "2 removed", 3, 5);
        STEP_EXPECT(no_two, 2, "nothing changed after the removal", 3, 5);
        /* A new static: its pairs with objects at rest would be found by no one, so the rest
         * goes; 3 static and 0, 1 its partners. */
        CHECK_EQ_INT(broadphase_set_static(w, 1, &ids[3], true), BROADPHASE_OK);
        STEP_EXPECT(no_two, 2, "3 static", 0, 5);
        /* 0 nudged back: 1 rests beside static 3. */
        nudge_lo[0] = 0;
        CHECK_EQ_INT(broadphase_move_boxes(w, 1, &ids[0], &nudge), BROADPHASE_OK);
        STEP_EXPECT(no_two, 2, "1 rests beside static 3", 1, 6);
#undef STEP_EXPECT
        broadphase_destroy(w);
    }
    broadphase_config c = broadphase_config_default(3);
    CHECK(c.rest_share > 0.0f && c.rest_share < 1.0f);
    static const float bad[] = {-0.5f, 1.5f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        c.rest_share = bad[i];
        broadphase_world *w = NULL;
        CHECK_EQ_INT(broadphase_create(&c, &w), BROADPHASE_ERROR_INVALID_CONFIG);
        CHECK(w == NULL);
    }
    for (int i = 0; i < 2; i++) {
        c.rest_share = (float)i;
        broadphase_world *w = NULL;
        CHECK_EQ_INT(broadphase_create(&c, &w), BROADPHASE_OK);
        broadphase_destroy(w);
    }
}

/* Static flags by hand: static-static pairs vanish, static-moving ones stay, through moves,
 * removal and id reuse; bad input changes nothing. */
TEST(statics_by_hand_and_bad_input) {
    for (size_t mi = 0; mi < METHODS; mi++) {
        broadphase_method method = method_at(mi);
        TEST_CONTEXT("method %s", method_name(method_at(mi)));
        uint32_t ids[4];
        broadphase_world *w = four_boxes(method, ids);
        REQUIRE(w);
        float lo[] = {0, 0, 0, 0}, hi[] = {1, 1, 1, 1};
        bool flag = true;
        CHECK_EQ_INT(broadphase_get_static(w, 3, &flag), BROADPHASE_OK);
        CHECK(!flag);
        uint32_t two[] = {0, 1};
        CHECK_EQ_INT(broadphase_set_static(w, 2, two, true), BROADPHASE_OK);
        broadphase_pairs got = step_ok(w);
        broadphase_pair want[] = {{0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
        CHECK(pairs_equal(want, 5, got.data, got.count, "0-1 static"));
        /* Bad input: an unknown id (at index 1), a repeated id, NULL; nothing changes. */
        uint32_t unknown[] = {2, 9}, twice[] = {3, 3};
        CHECK_EQ_INT(broadphase_set_static(w, 2, unknown, true), BROADPHASE_ERROR_UNKNOWN_ID);
        CHECK(broadphase_last_error_index(w) == 1);
        CHECK_EQ_INT(broadphase_set_static(w, 2, twice, true), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK(broadphase_last_error_index(w) == 1);
        CHECK_EQ_INT(broadphase_set_static(w, 2, NULL, true), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_set_static(NULL, 2, two, true), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_get_static(w, 9, &flag), BROADPHASE_ERROR_UNKNOWN_ID);
        CHECK_EQ_INT(broadphase_get_static(w, 0, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_get_static(w, 2, &flag), BROADPHASE_OK);
        CHECK(!flag);
        got = step_ok(w);
        CHECK(pairs_equal(want, 5, got.data, got.count, "unchanged after bad input"));
        /* Static 1 moves away and 3 joins it there as a static: no pair between them. */
        float flo[] = {50, 50}, fhi[] = {51, 51};
        broadphase_boxes far = {flo, flo, NULL, fhi, fhi, NULL};
        uint32_t movers[] = {1, 3};
        CHECK_EQ_INT(broadphase_move_boxes(w, 2, movers, &far), BROADPHASE_OK);
        CHECK_EQ_INT(broadphase_set_static(w, 1, &movers[1], true), BROADPHASE_OK);
        got = step_ok(w);
        broadphase_pair moved[] = {{0, 2}};
        CHECK(pairs_equal(moved, 1, got.data, got.count, "statics moved"));
        /* 3 moving again: it pairs with static 1. Static 0 removed; its id comes back, not
         * static, on top of 2. */
        CHECK_EQ_INT(broadphase_set_static(w, 1, &movers[1], false), BROADPHASE_OK);
        uint32_t zero = 0, again = 99;
        CHECK_EQ_INT(broadphase_remove(w, 1, &zero), BROADPHASE_OK);
        broadphase_boxes one = {lo, lo, NULL, hi, hi, NULL};
        CHECK_EQ_INT(broadphase_add_boxes(w, 1, &one, &again), BROADPHASE_OK);
        CHECK(again == 0);
        CHECK_EQ_INT(broadphase_get_static(w, 0, &flag), BROADPHASE_OK);
        CHECK(!flag);
        got = step_ok(w);
        broadphase_pair after[] = {{0, 2}, {1, 3}};
        CHECK(pairs_equal(after, 2, got.data, got.count, "reused id, static no more"));
        broadphase_stats st;
        CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
        CHECK_EQ_INT(st.static_objects, 1);
        broadphase_destroy(w);
    }
}

static int id_compare(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* ---- pair events ----------------------------------------------------------------------------- */

/* The events of every step are the difference between its pairs and the last step's: a moving
 * scene (every live object moved each frame) where objects are removed (their pairs end), come
 * back a frame later (their pairs begin), or are removed and come back within one frame (a pair
 * on both sides then both ends and begins), their ids handed out again each time. Every method
 * and setting, 2D and 3D, side by side; the pairs against the reference too. */
TEST(pair_events_are_the_difference_of_steps) {
    enum { FRAMES = 13, WORLDS = METHODS * SETTING_COUNT };
    pair_list by_index = {0}, want = {0}, before = {0}, begun = {0}, ended = {0};
    size_t begun_total = 0, ended_total = 0, both_total = 0;
    for (int dims = 2; dims <= 3; dims++) {
        scene s;
        REQUIRE(scene_make(&s, dims == 3 ? SCENE_MOVING : SCENE_MOVING2D, 800, 40));
        size_t n = s.count;
        uint32_t *ids = malloc(n * sizeof *ids), *gone = malloc(n * sizeof *gone);
        uint32_t *got_ids = malloc(n * sizeof *got_ids);
        uint32_t *gen = calloc(n, sizeof *gen), *before_gen = calloc(n, sizeof *gen);
        size_t *pick = malloc(n * sizeof *pick);
        uint8_t *live = malloc(n);
        broadphase_world *w[WORLDS];
        for (size_t v = 0; v < WORLDS; v++) { /* the worlds step side by side */
            const setting *set = &SETTINGS[v / METHODS];
            w[v] = make_world_events(dims, method_at(v % METHODS), set->update, set->threads,
                                     set->looseness, 0.125f);
            REQUIRE(w[v]);
        }
        /* Adds the objects pick[0, m) to every world: each hands out the same ids. */
#define ADD_TO_ALL(m)                                                                              \
    for (size_t v = 0; v < WORLDS; v++) {                                                          \
        scene_put(&s, w[v], pick, m, v == 0 ? ids : got_ids, true);                                \
        for (size_t q = 0; v > 0 && q < (m); q++) CHECK_EQ_INT(got_ids[pick[q]], ids[pick[q]]);    \
    }
        for (size_t i = 0; i < n; i++) {
            pick[i] = i;
            live[i] = 1;
        }
        ADD_TO_ALL(n);
        for (size_t i = 0; i < n; i++) gen[ids[i]]++;
        before.count = 0;
        for (int f = 0; f < FRAMES; f++) {
            TEST_CONTEXT("%dD frame %d", dims, f);
            if (f > 0) {
                scene_advance(&s);
                size_t m = 0;
                for (size_t i = 0; i < n; i++)
                    if (live[i]) pick[m++] = i;
                for (size_t v = 0; v < WORLDS; v++) scene_put(&s, w[v], pick, m, ids, false);
            }
            /* frame 4k+1: every 7th object goes; 4k+2: they come back; 4k+3: every 11th goes
             * and comes back at once. Only the ids of those that went are free, and they are
             * handed out again (lowest first). */
            if (f % 4 == 1 || f % 4 == 3) {
                size_t m = 0, stride = f % 4 == 1 ? 7 : 11;
                for (size_t i = (size_t)f % stride; i < n; i += stride) {
                    gone[m++] = ids[i];
                    live[i] = 0;
                }
                for (size_t v = 0; v < WORLDS; v++)
                    CHECK_EQ_INT(broadphase_remove(w[v], m, gone), BROADPHASE_OK);
            }
            if (f % 4 == 2 || f % 4 == 3) {
                size_t m = 0;
                for (size_t i = 0; i < n; i++)
                    if (!live[i]) pick[m++] = i;
                qsort(gone, m, sizeof *gone, id_compare);
                ADD_TO_ALL(m);
                for (size_t q = 0; q < m; q++) {
                    live[pick[q]] = 1;
                    gen[ids[pick[q]]]++;
                    CHECK_EQ_INT(ids[pick[q]], gone[q]);
                }
            }
            live_pairs(&s, ids, live, &by_index, &want);
            expected_events(&before, before_gen, &want, gen, &begun, &ended);
            for (size_t v = 0; v < WORLDS; v++) {
                const setting *set = &SETTINGS[v / METHODS];
                TEST_CONTEXT("%dD %s " SETTING_FMT " frame %d", dims,
                             method_name(method_at(v % METHODS)), SETTING_ARGS(set), f);
                broadphase_pairs got = step_ok(w[v]);
                CHECK(pairs_equal(want.data, want.count, got.data, got.count, "pairs"));
                broadphase_events ev;
                CHECK_EQ_INT(broadphase_pair_events(w[v], &ev), BROADPHASE_OK);
                CHECK(pairs_equal(begun.data, begun.count, ev.begun.data, ev.begun.count, "begun"));
                CHECK(pairs_equal(ended.data, ended.count, ev.ended.data, ev.ended.count, "ended"));
            }
            if (f > 0) {
                begun_total += begun.count;
                ended_total += ended.count;
                for (size_t p = 0; p < begun.count; p++) /* begun and ended at once */
                    both_total += bsearch(&begun.data[p], before.data, before.count,
                                          sizeof *before.data, pair_compare) != NULL;
            }
            before.count = 0;
            for (size_t p = 0; p < want.count; p++)
                pair_list_push(&before, want.data[p].a, want.data[p].b);
            memcpy(before_gen, gen, n * sizeof *gen);
        }
#undef ADD_TO_ALL
        for (size_t v = 0; v < WORLDS; v++) broadphase_destroy(w[v]);
        free(ids);
        free(got_ids);
        free(gone);
        free(gen);
        free(before_gen);
        free(pick);
        free(live);
        scene_free(&s);
    }
    /* Every kind of event happened: pairs that began, that ended, and that did both (an id
     * handed out again between two steps in which it had the pair). */
    TEST_CONTEXT("%zu begun, %zu ended, %zu both", begun_total, ended_total, both_total);
    CHECK(begun_total > 1000 && ended_total > 1000 && both_total > 300);
    free(by_index.data);
    free(want.data);
    free(before.data);
    free(begun.data);
    free(ended.data);
}

/* A defect found from outside: an id removed and handed out again, then a later add call that
 * grows the id range. The grow dropped the marks of the ids reused since the last step, so the
 * pair of the reused id went on as if nothing had happened (begun {} and ended {}). Every method,
 * 2D and 3D, with 1 to 40 far objects in the later call (so that it crosses the marks' growth
 * at several sizes), each under one of the settings. */
TEST(pair_events_reused_id_then_new_ids) {
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t mi = 0; mi < METHODS; mi++) {
            for (size_t far = 1; far <= 40; far += 3) {
                const setting *set = &SETTINGS[far % SETTING_COUNT];
                TEST_CONTEXT("dims %d method %s " SETTING_FMT " far objects %zu", dims,
                             method_name(method_at(mi)), SETTING_ARGS(set), far);
                broadphase_world *w = make_world_events(dims, method_at(mi), set->update,
                                                        set->threads, set->looseness, 0.125f);
                REQUIRE(w);
                float lo[] = {0, 0.5f}, hi[] = {1, 1.5f};
                broadphase_boxes two = {lo, lo, lo, hi, hi, hi};
                uint32_t ids[2];
                CHECK_EQ_INT(broadphase_add_boxes(w, 2, &two, ids), BROADPHASE_OK);
                step_ok(w);
                uint32_t one = 1, again = 0;
                CHECK_EQ_INT(broadphase_remove(w, 1, &one), BROADPHASE_OK);
                broadphase_boxes same = {lo + 1, lo + 1, lo + 1, hi + 1, hi + 1, hi + 1};
                CHECK_EQ_INT(broadphase_add_boxes(w, 1, &same, &again), BROADPHASE_OK);
                CHECK_EQ_INT(again, 1);
                float fmin[40], fmax[40];
                for (size_t i = 0; i < far; i++) {
                    fmin[i] = 100.0f + 3.0f * (float)i;
                    fmax[i] = fmin[i] + 1.0f;
                }
                broadphase_boxes away = {fmin, fmin, fmin, fmax, fmax, fmax};
                uint32_t far_ids[40];
                CHECK_EQ_INT(broadphase_add_boxes(w, far, &away, far_ids), BROADPHASE_OK);
                CHECK_EQ_INT(far_ids[0], 2);
                step_ok(w);
                broadphase_events ev;
                CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_OK);
                broadphase_pair pair[] = {{0, 1}};
                CHECK(pairs_equal(pair, 1, ev.begun.data, ev.begun.count, "begun"));
                CHECK(pairs_equal(pair, 1, ev.ended.data, ev.ended.count, "ended"));
                step_ok(w); /* and then nothing */
                CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_OK);
                CHECK(ev.begun.count == 0 && ev.ended.count == 0);
                broadphase_destroy(w);
            }
        }
    }
}

/* Pair events by hand, for every method and setting: a pair that continues is no event; a removed
 * object ends its pairs; an id handed out again to a new object in the same place ends the old pair
 * and begins the new one; a world without pair_events refuses, and NULL is refused. */
TEST(pair_events_removal_and_reused_id) {
    for (size_t mi = 0; mi < METHODS * SETTING_COUNT; mi++) {
        broadphase_method method = method_at(mi % METHODS);
        const setting *set = &SETTINGS[mi / METHODS];
        TEST_CONTEXT("method %s " SETTING_FMT, method_name(method_at(mi % METHODS)),
                     SETTING_ARGS(set));
        broadphase_world *w =
            make_world_events(3, method, set->update, set->threads, set->looseness, 1.0f);
        REQUIRE(w);
        /* 0 and 1 overlap, 2 overlaps 1, 3 is alone. */
        float x0[] = {0, 1.5f, 2.5f, 10}, x1[] = {2, 3, 4, 11}, lo[] = {0, 0, 0, 0},
              hi[] = {1, 1, 1, 1};
        broadphase_boxes b = {x0, lo, lo, x1, hi, hi};
        uint32_t ids[4];
        CHECK_EQ_INT(broadphase_add_boxes(w, 4, &b, ids), BROADPHASE_OK);
        step_ok(w);
        broadphase_events ev;
        CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_OK);
        broadphase_pair first[] = {{0, 1}, {1, 2}};
        CHECK(pairs_equal(first, 2, ev.begun.data, ev.begun.count, "first begun"));
        CHECK(ev.ended.count == 0);
        step_ok(w); /* nothing moved: no events */
        CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_OK);
        CHECK(ev.begun.count == 0 && ev.ended.count == 0);
        /* Object 0 is removed and a new object is added where it was: it gets id 0 again. */
        uint32_t zero = 0, again;
        CHECK_EQ_INT(broadphase_remove(w, 1, &zero), BROADPHASE_OK);
        broadphase_boxes one = {x0, lo, lo, x1, hi, hi};
        CHECK_EQ_INT(broadphase_add_boxes(w, 1, &one, &again), BROADPHASE_OK);
        CHECK(again == 0);
        /* And object 2 is removed for good. */
        uint32_t two = 2;
        CHECK_EQ_INT(broadphase_remove(w, 1, &two), BROADPHASE_OK);
        step_ok(w);
        CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_OK);
        broadphase_pair began[] = {{0, 1}}, ended[] = {{0, 1}, {1, 2}};
        CHECK(pairs_equal(began, 1, ev.begun.data, ev.begun.count, "reused begun"));
        CHECK(pairs_equal(ended, 2, ev.ended.data, ev.ended.count, "reused ended"));
        CHECK_EQ_INT(broadphase_pair_events(w, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_pair_events(NULL, &ev), BROADPHASE_ERROR_INVALID_ARGUMENT);
        broadphase_destroy(w);
        w = make_world_loose(3, method, set->update, set->threads, set->looseness);
        REQUIRE(w);
        CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_ERROR_INVALID_CONFIG);
        broadphase_destroy(w);
    }
}

/* ---- queries ------------------------------------------------------------------------------- */

static const scene_kind query_scenes[] = {
    SCENE_UNIFORM, SCENE_CLUSTERED, SCENE_MIXED,     SCENE_SPHERES, SCENE_PLANE2D,
    SCENE_SHAPES,  SCENE_SHAPES2D,  SCENE_IDENTICAL, SCENE_FLAT,    SCENE_HUGE,
    SCENE_TINY,    SCENE_FAR,       SCENE_DENSE,     SCENE_EDGE,    SCENE_EDGE2D};
static const size_t query_sizes[] = {0, 1, 57, 900};

/* Objects at rest when the queries ran, so that the rest is known to have been queried. */
static size_t rested_seen;

/* One world through its life: queries before the first step, after it, after changes not yet
 * stepped (moves, removals, additions), with statics, and with most objects at rest. */
static void world_life(scene_kind kind, size_t n, broadphase_method method,
                       broadphase_update_policy policy, int threads, scratch *s) {
    scene sc;
    REQUIRE(scene_make(&sc, kind, n, 77 + n));
    broadphase_config c = test_config(sc.dimensions, method, policy, threads, 0);
    c.rest_share = 1.0f;
    broadphase_world *w = make_world_from(&c);
    REQUIRE(w);
    mirror m = {.dims = sc.dimensions};
    uint32_t *ids = malloc((n + 1) * sizeof *ids);
    uint64_t rng = 5 + n;
    add_scene_mirrored(&sc, w, ids, &m);
    int per = n > 100 ? 12 : 6;
    check_queries(w, &m, per, 1, s); /* before any step: every object is "changed" */
    step_ok(w);
    check_queries(w, &m, per, 2, s);
    move_some(w, &m, 13, 0, &rng);
    remove_some(w, &m, 29, 3);
    add_some(w, &m, 6, &rng);
    check_queries(w, &m, per, 3, s); /* changed since the step */
    step_ok(w);
    check_queries(w, &m, per, 4, s);
    if (n > 0) { /* a third static, then a few moves: the rest forms, then some wake */
        for (uint32_t id = 0; id < m.cap; id += 3) {
            if (!m.alive[id]) continue;
            CHECK_EQ_INT(broadphase_set_static(w, 1, &id, true), BROADPHASE_OK);
        }
        step_ok(w);
        move_some(w, &m, 99, 1, &rng);
        step_ok(w);
        move_some(w, &m, 90, 2, &rng);
        step_ok(w);
        broadphase_stats st;
        CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
        rested_seen += st.resting_objects;
        check_queries(w, &m, per, 5, s);
        move_some(w, &m, 31, 0, &rng);
        remove_some(w, &m, 41, 5);
        check_queries(w, &m, per, 6, s);
    }
    broadphase_destroy(w);
    free(ids);
    mirror_free(&m);
    scene_free(&sc);
}

/* Every query (box, its candidates, ball, point, rays, closest ray, planes, nearest) against the
 * reference over the objects (query_oracle.h), on every query scene and size, for every method at
 * 1 and 3 threads (the update policy changing with the scene). (From test_query.) */
TEST(queries_equal_reference) {
    scratch s = {0};
    checked_results = 0;
    rested_seen = 0;
    for (size_t ki = 0; ki < sizeof query_scenes / sizeof query_scenes[0]; ki++)
        for (size_t ni = 0; ni < sizeof query_sizes / sizeof query_sizes[0]; ni++)
            for (size_t mi = 0; mi < METHODS; mi++)
                for (int threads = 1; threads <= 3; threads += 2) {
                    broadphase_update_policy policy = scene_policy((int)(ki + ni), threads);
                    TEST_CONTEXT("scene %s n %zu method %s threads %d policy %s",
                                 scene_name(query_scenes[ki]), query_sizes[ni],
                                 method_name(method_at(mi)), threads, policy_names[policy]);
                    world_life(query_scenes[ki], query_sizes[ni], method_at(mi), policy, threads,
                               &s);
                }
    /* the queries found things: a test of empty answers proves nothing */
    CHECK(checked_results > 1000000);
    CHECK(rested_seen > 20000);
    scratch_free(&s);
}

/* ---- levels ---------------------------------------------------------------------------------- */

/* broadphase_get_levels against the statistics (check_levels_add_up) before the first step,
 * after each step of a moving scene, with a share of the objects static from frame 2 and those
 * that stop at rest (the others stop from frame 5), with half removed at frame 7, and once
 * empty. Every method and setting, 2D and 3D. */
TEST(levels_add_up_to_the_stats) {
    enum { FRAMES = 10 };
    size_t resting = 0, statics = 0, nodes = 0;
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t mi = 0; mi < METHODS; mi++) {
            for (size_t si = 0; si < SETTING_COUNT; si++) {
                const setting *set = &SETTINGS[si];
                scene s;
                REQUIRE(scene_make(&s, dims == 3 ? SCENE_MOVING : SCENE_MOVING2D, 3000, 8));
                size_t n = s.count;
                uint32_t *ids = malloc(n * sizeof *ids), *some = malloc(n * sizeof *some);
                size_t *pick = malloc(n * sizeof *pick);
                uint8_t *live = malloc(n);
                broadphase_config c =
                    test_config(dims, method_at(mi), set->update, set->threads, set->looseness);
                c.rest_share = si % 2 ? 1.0f : c.rest_share;
                broadphase_world *w = make_world_from(&c);
                REQUIRE(w);
                TEST_CONTEXT("%dD %s " SETTING_FMT " before the first step", dims,
                             method_name(method_at(mi)), SETTING_ARGS(set));
                check_levels_add_up(w);
                CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
                check_levels_add_up(w);
                memset(live, 1, n);
                for (int f = 0; f < FRAMES; f++) {
                    TEST_CONTEXT("%dD %s " SETTING_FMT " rest share %g frame %d", dims,
                                 method_name(method_at(mi)), SETTING_ARGS(set),
                                 (double)c.rest_share, f);
                    if (f == 2) { /* every 5th static */
                        size_t m = 0;
                        for (size_t i = 0; i < n; i += 5) some[m++] = ids[i];
                        CHECK_EQ_INT(broadphase_set_static(w, m, some, true), BROADPHASE_OK);
                    }
                    if (f == 7) { /* every other one gone */
                        size_t m = 0;
                        for (size_t i = 1; i < n; i += 2) {
                            some[m++] = ids[i];
                            live[i] = 0;
                        }
                        CHECK_EQ_INT(broadphase_remove(w, m, some), BROADPHASE_OK);
                    }
                    step_ok(w);
                    check_levels_add_up(w);
                    broadphase_stats st;
                    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
                    resting += st.resting_objects;
                    statics += st.static_objects;
                    nodes += st.nodes;
                    /* the movers: all of them until frame 5, then every 10th */
                    scene_advance(&s);
                    size_t m = 0;
                    for (size_t i = 0; i < n; i++)
                        if (live[i] && i % 5 != 0 && (f < 5 || i % 10 == 1)) pick[m++] = i;
                    scene_put(&s, w, pick, m, ids, false);
                }
                size_t m = 0;
                for (size_t i = 0; i < n; i++)
                    if (live[i]) some[m++] = ids[i];
                CHECK_EQ_INT(broadphase_remove(w, m, some), BROADPHASE_OK);
                TEST_CONTEXT("%dD %s " SETTING_FMT " emptied", dims, method_name(method_at(mi)),
                             SETTING_ARGS(set));
                CHECK_EQ_INT(step_ok(w).count, 0);
                check_levels_add_up(w);
                broadphase_destroy(w);
                free(ids);
                free(some);
                free(pick);
                free(live);
                scene_free(&s);
            }
        }
    }
    /* The levels were read with trees, statics and objects at rest about. */
    TEST_CONTEXT("object-frames at rest %zu static %zu, nodes %zu", resting, statics, nodes);
    CHECK(resting > 100000 && statics > 100000 && nodes > 10000);
}

TEST_MAIN()

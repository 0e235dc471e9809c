/* Worlds that change between steps, for the kd-tree and the octree (loose and strict): REFIT and
 * AUTO agree with REBUILD on every frame; random adds, removes, moves (small steps and teleports)
 * and shape changes interleaved with steps over 200 frames agree with brute force; steady-state
 * steps allocate nothing. */
#include "bits.h"
#include "oracle.h"
#include "parallel.h"
#include "team.h"
#include "world.h"

#include <float.h>
#include <math.h>

TEST(refit_and_auto_equal_rebuild_every_frame) {
    static const scene_kind kinds[] = {SCENE_MOVING, SCENE_MOVING2D};
    /* Every tree of the list at its default looseness (the strict octree's updates are compared
     * with brute force every frame in test_oracle and test_octree). */
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        for (size_t ki = 0; ki < 2; ki++) {
            scene s;
            REQUIRE(scene_make(&s, kinds[ki], 3000, 21));
            uint32_t *ids = malloc(s.count * sizeof *ids);
            broadphase_world *w[3];
            for (int p = 0; p < 3; p++) {
                w[p] = make_world(s.dimensions, method_at(mi), (broadphase_update_policy)p, 2);
                REQUIRE(w[p]);
                CHECK_EQ_INT(scene_add_to_world(&s, w[p], ids), BROADPHASE_OK);
            }
            for (int f = 0; f < 150; f++) {
                broadphase_pairs want = step_ok(w[BROADPHASE_UPDATE_REBUILD]);
                for (int p = 0; p < 3; p++) {
                    if (p == BROADPHASE_UPDATE_REBUILD) continue;
                    TEST_CONTEXT("%s scene %s policy %s frame %d", method_name(method_at(mi)),
                                 scene_name(s.kind), policy_names[p], f);
                    broadphase_pairs got = step_ok(w[p]);
                    CHECK(pairs_equal(want.data, want.count, got.data, got.count, "update"));
                }
                scene_advance(&s);
                for (int p = 0; p < 3; p++) scene_move_in_world(&s, w[p], ids);
            }
            TEST_CONTEXT("%s scene %s", method_name(method_at(mi)), scene_name(s.kind));
            broadphase_stats st;
            broadphase_get_stats(w[BROADPHASE_UPDATE_REFIT], &st);
            /* REFIT must really have refitted: one build, then refits (an octree also builds
             * again each time its root grows). */
            CHECK(st.rebuilds >= 1 && st.rebuilds <= 1 + st.root_growths);
            if (method_at(mi) == BROADPHASE_METHOD_KDTREE) { /* whose root never grows */
                CHECK_EQ_INT(st.rebuilds, 1);
                CHECK_EQ_INT(st.rebuilds + st.refits, st.steps);
            }
            CHECK(st.refits + st.root_growths >= 149);
            broadphase_get_stats(w[BROADPHASE_UPDATE_REBUILD], &st);
            CHECK_EQ_INT(st.rebuilds, 150);
            for (int p = 0; p < 3; p++) broadphase_destroy(w[p]);
            free(ids);
            scene_free(&s);
        }
    }
}

/* The refit's passes over slots are cut by threads_chunk_size: the octree's into chunks of 4,096
 * below 65,536 slots (octree_internal.h, SMALL_CHUNK), both trees' larger ones into chunks of
 * 16,384 or, so that each worker has four, of fewer (not below 4,096); the chunks' movers are
 * counted, gathered and laid out across chunk ends, and the kd-tree's sweep nodes resorted by
 * chunk. 10,000 objects (three chunks) and 70,000 (five on 1 thread, twelve of 5,888 on 3, eighteen
 * of 4,096 on 16), moving, octree and kd-tree with REFIT against brute force every frame, through
 * the relayouts the movers and the tightening cause. */
typedef struct chunked_world {
    broadphase_method method;
    int threads;
} chunked_world;

TEST(trees_refit_in_chunks_equal_brute_force) {
    static const size_t counts[] = {10000, 70000};
    /* Every tree of the list on 1, 3 and 16 threads. */
    static const int thread_counts[] = {1, 3, 16};
    chunked_world kinds[BROADPHASE_METHOD_COUNT * 3];
    int kind_count = 0;
    for (size_t mi = 0; mi < METHODS; mi++)
        for (int t = 0; t < 3 && method_has_tree(method_at(mi)); t++)
            kinds[kind_count++] = (chunked_world){method_at(mi), thread_counts[t]};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        scene s;
        REQUIRE(scene_make(&s, SCENE_MOVING, counts[ci], 31));
        uint32_t *ids = malloc(s.count * sizeof *ids);
        broadphase_world *ref =
            make_world(3, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
        broadphase_world *w[BROADPHASE_METHOD_COUNT * 3];
        REQUIRE(ids && ref);
        CHECK_EQ_INT(scene_add_to_world(&s, ref, ids), BROADPHASE_OK);
        for (int i = 0; i < kind_count; i++) {
            w[i] = make_world(3, kinds[i].method, BROADPHASE_UPDATE_REFIT, kinds[i].threads);
            REQUIRE(w[i]);
            CHECK_EQ_INT(scene_add_to_world(&s, w[i], ids), BROADPHASE_OK);
        }
        int frames = counts[ci] > 20000 ? 8 : 30;
        for (int f = 0; f < frames; f++) {
            broadphase_pairs want = step_ok(ref);
            for (int i = 0; i < kind_count; i++) {
                TEST_CONTEXT("n %zu %s threads %d frame %d", counts[ci],
                             method_name(kinds[i].method), kinds[i].threads, f);
                broadphase_pairs got = step_ok(w[i]);
                CHECK(pairs_equal(want.data, want.count, got.data, got.count, "refit"));
            }
            scene_advance(&s);
            CHECK_EQ_INT(scene_move_in_world(&s, ref, ids), BROADPHASE_OK);
            for (int i = 0; i < kind_count; i++)
                CHECK_EQ_INT(scene_move_in_world(&s, w[i], ids), BROADPHASE_OK);
        }
        for (int i = 0; i < kind_count; i++) {
            broadphase_stats st;
            broadphase_get_stats(w[i], &st);
            TEST_CONTEXT("n %zu world %d", counts[ci], i);
            CHECK(st.refits + st.root_growths >= (uint64_t)frames - 1);
            broadphase_destroy(w[i]);
        }
        broadphase_destroy(ref);
        free(ids);
        scene_free(&s);
    }
}

/* Relayouts whose moves cross the chunks of the refit's passes: every step some objects jitter
 * across cell borders, some jump into a hot spot (crowding a leaf, which splits with arrivals),
 * some are removed and as many added, so every step lays the slots out anew. With max_depth 1
 * the leaves hold 4,000-5,000 objects each, more than a chunk of slots, so one leaf's movers are
 * met by several chunks. Octree worlds at 1, 2, 3 and 8 threads against brute force. */
static void relayout_case(int dims, size_t n, int max_depth, int frames) {
    static const int threads[] = {1, 2, 3, 8};
    enum { WORLDS = sizeof threads / sizeof threads[0] };
    size_t cap = n + n / 2;
    float side = dims == 3 ? cbrtf((float)n / 0.075f) : sqrtf((float)n / 0.3f);
    float *box = malloc(cap * 6 * sizeof *box);
    bool *live = calloc(cap, sizeof *live);
    uint32_t *ids = malloc(cap * sizeof *ids), *got = malloc(cap * sizeof *got);
    float *col = malloc(6 * cap * sizeof *col);
    REQUIRE(box && live && ids && got && col);
    uint64_t rng = 77 + (uint64_t)dims * 1000 + (uint64_t)max_depth;
    broadphase_world *ref =
        make_world(dims, BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO, 2);
    broadphase_world *w[WORLDS];
    REQUIRE(ref);
    for (int i = 0; i < WORLDS; i++) {
        broadphase_config c =
            test_config(dims, BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_REFIT, threads[i], 0.0f);
        c.max_depth = max_depth;
        REQUIRE((w[i] = make_world_from(&c)) != NULL);
    }
    /* Puts a box of half-extent h about c into box[id]. */
#define PUT(id, c, h)                                                                              \
    for (int k = 0; k < 3; k++) {                                                                  \
        box[(size_t)(id)*6 + (size_t)k] = k < dims ? (c)[k] - (h) : 0.0f;                          \
        box[(size_t)(id)*6 + 3 + (size_t)k] = k < dims ? (c)[k] + (h) : 0.0f;                      \
    }
    /* Applies a batch of ids (their boxes from box[]) to every world: add, move or remove. */
#define APPLY(kind, count)                                                                         \
    do {                                                                                           \
        for (size_t q = 0; q < (count); q++)                                                       \
            for (int k = 0; k < 6; k++)                                                            \
                col[(size_t)k * cap + q] = box[(size_t)ids[q] * 6 + (size_t)k];                    \
        broadphase_boxes bx = {col,           col + cap,     col + 2 * cap,                        \
                               col + 3 * cap, col + 4 * cap, col + 5 * cap};                       \
        broadphase_world *all[WORLDS + 1] = {ref};                                                 \
        for (int i = 0; i < WORLDS; i++) all[i + 1] = w[i];                                        \
        for (int i = 0; i <= WORLDS; i++) {                                                        \
            broadphase_status st = (kind) == 0 ? broadphase_add_boxes(all[i], (count), &bx, got)   \
                                   : (kind) == 1                                                   \
                                       ? broadphase_move_boxes(all[i], (count), ids, &bx)          \
                                       : broadphase_remove(all[i], (count), ids);                  \
            CHECK_EQ_INT(st, BROADPHASE_OK);                                                       \
            if ((kind) == 0)                                                                       \
                for (size_t q = 0; q < (count); q++) CHECK_EQ_INT(got[q], ids[q]);                 \
        }                                                                                          \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        float c[3];
        for (int k = 0; k < 3; k++) c[k] = side * scene_uniform(&rng);
        ids[i] = (uint32_t)i;
        PUT(i, c, 0.5f + 0.5f * scene_uniform(&rng));
        live[i] = true;
    }
    APPLY(0, n);
    size_t high = n; /* ids handed out so far: [0, high) */
    for (int f = 0; f < frames; f++) {
        broadphase_pairs want = step_ok(ref);
        for (int i = 0; i < WORLDS; i++) {
            TEST_CONTEXT("%dD n %zu max_depth %d threads %d frame %d", dims, n, max_depth,
                         threads[i], f);
            broadphase_pairs p = step_ok(w[i]);
            CHECK(pairs_equal(want.data, want.count, p.data, p.count, "relayout"));
            broadphase_stats st;
            broadphase_get_stats(w[i], &st);
            CHECK_EQ_INT((int)st.rebuilds, 1);
        }
        TEST_CONTEXT("%dD n %zu max_depth %d frame %d: changes", dims, n, max_depth, f);
        /* Every live object jitters; one in 100 jumps into this frame's hot spot. */
        float spot[3];
        for (int k = 0; k < 3; k++) spot[k] = side * (0.2f + 0.6f * scene_uniform(&rng));
        size_t m = 0;
        for (size_t i = 0; i < high; i++) {
            if (!live[i]) continue;
            float c[3], h = 0.5f * (box[i * 6 + 3] - box[i * 6]);
            bool jump = scene_uniform(&rng) < 0.01f;
            for (int k = 0; k < 3; k++) {
                float at = 0.5f * (box[i * 6 + (size_t)k] + box[i * 6 + 3 + (size_t)k]);
                at += 1.4f * (scene_uniform(&rng) - 0.5f);
                c[k] = jump ? spot[k] + 6.0f * scene_uniform(&rng) : fminf(fmaxf(at, 0.0f), side);
            }
            PUT(i, c, h);
            ids[m++] = (uint32_t)i;
        }
        APPLY(1, m);
        /* One in 100 removed, then as many added (the lowest free ids come back first). */
        m = 0;
        for (size_t i = 0; i < high; i++)
            if (live[i] && scene_uniform(&rng) < 0.01f) {
                ids[m++] = (uint32_t)i;
                live[i] = false;
            }
        APPLY(2, m);
        size_t added = 0;
        for (size_t i = 0; i < cap && added < m; i++) {
            if (live[i]) continue;
            float c[3];
            bool hot = added % 2 == 0;
            for (int k = 0; k < 3; k++)
                c[k] = hot ? spot[k] + 6.0f * scene_uniform(&rng) : side * scene_uniform(&rng);
            PUT(i, c, 0.5f + 0.5f * scene_uniform(&rng));
            live[i] = true;
            ids[added++] = (uint32_t)i;
            if (i + 1 > high) high = i + 1;
        }
        APPLY(0, added);
    }
#undef PUT
#undef APPLY
    for (int i = 0; i < WORLDS; i++) broadphase_destroy(w[i]);
    broadphase_destroy(ref);
    free(box);
    free(live);
    free(ids);
    free(got);
    free(col);
}

TEST(octree_relayout_across_chunks_3d) {
    relayout_case(3, 20000, 40, 10);
    relayout_case(3, 36000, 1, 4);
}

TEST(quadtree_relayout_across_chunks_2d) {
    relayout_case(2, 20000, 40, 10);
    relayout_case(2, 20000, 1, 4);
}

/* A world driven by random operations, mirrored in plain arrays for the reference. */
typedef struct model {
    int dims;
    size_t capacity;
    bool *live;
    uint32_t *gen; /* by id: how many times it was handed out (a new object each time) */
    uint32_t *cat, *mask, *group; /* collision filters, as broadphase_set_filters sets them */
    uint8_t *is_sphere;
    uint8_t *is_static; /* as broadphase_set_static sets it */
    float *min[3], *max[3], *center[3], *radius;
} model;

static void model_init(model *m, int dims, size_t capacity) {
    memset(m, 0, sizeof *m);
    m->dims = dims;
    m->capacity = capacity;
    m->live = calloc(capacity, 1);
    m->gen = calloc(capacity, sizeof(uint32_t));
    m->cat = calloc(capacity, sizeof(uint32_t));
    m->mask = calloc(capacity, sizeof(uint32_t));
    m->group = calloc(capacity, sizeof(uint32_t));
    m->is_sphere = calloc(capacity, 1);
    m->is_static = calloc(capacity, 1);
    for (int k = 0; k < 3; k++) {
        m->min[k] = calloc(capacity, sizeof(float));
        m->max[k] = calloc(capacity, sizeof(float));
        m->center[k] = calloc(capacity, sizeof(float));
    }
    m->radius = calloc(capacity, sizeof(float));
}

static void model_free(model *m) {
    free(m->live);
    free(m->gen);
    free(m->cat);
    free(m->mask);
    free(m->group);
    free(m->is_sphere);
    free(m->is_static);
    for (int k = 0; k < 3; k++) {
        free(m->min[k]);
        free(m->max[k]);
        free(m->center[k]);
    }
    free(m->radius);
}

static void model_pairs(const model *m, pair_list *out) {
    out->count = 0;
    for (size_t i = 0; i < m->capacity; i++) {
        if (!m->live[i]) continue;
        float amin[3] = {m->min[0][i], m->min[1][i], m->min[2][i]};
        float amax[3] = {m->max[0][i], m->max[1][i], m->max[2][i]};
        float ac[3] = {m->center[0][i], m->center[1][i], m->center[2][i]};
        for (size_t j = i + 1; j < m->capacity; j++) {
            if (!m->live[j] || (m->is_static[i] && m->is_static[j])) continue;
            if (!(m->cat[i] & m->mask[j]) || !(m->cat[j] & m->mask[i]) ||
                (m->group[i] != 0 && m->group[i] == m->group[j]))
                continue;
            float bmin[3] = {m->min[0][j], m->min[1][j], m->min[2][j]};
            float bmax[3] = {m->max[0][j], m->max[1][j], m->max[2][j]};
            float bc[3] = {m->center[0][j], m->center[1][j], m->center[2][j]};
            int hit;
            if (!m->is_sphere[i] && !m->is_sphere[j])
                hit = simd_pair_box_box(amin, amax, bmin, bmax, m->dims);
            else if (m->is_sphere[i] && m->is_sphere[j])
                hit = simd_pair_sphere_sphere(ac, m->radius[i], bc, m->radius[j], m->dims);
            else if (m->is_sphere[i])
                hit = simd_pair_box_sphere(bmin, bmax, ac, m->radius[i], m->dims);
            else
                hit = simd_pair_box_sphere(amin, amax, bc, m->radius[j], m->dims);
            if (hit) pair_list_push(out, (uint32_t)i, (uint32_t)j);
        }
    }
    if (out->count) qsort(out->data, out->count, sizeof *out->data, pair_compare);
}

/* One random shape near (or, for a teleport, anywhere in) a world of side `side`. */
static void random_shape(uint64_t *rng, int dims, float side, bool sphere, float mn[3], float mx[3],
                         float c[3], float *r) {
    for (int k = 0; k < 3; k++) {
        float h = 0.3f + 2.0f * scene_uniform(rng);
        c[k] = k < dims ? side * scene_uniform(rng) : 0.0f;
        mn[k] = k < dims ? c[k] - h : 0.0f;
        mx[k] = k < dims ? c[k] + h : 0.0f;
    }
    *r = sphere ? 0.3f + 1.5f * scene_uniform(rng) : 0.0f;
}

static void apply(broadphase_world **w, int count, model *m, uint32_t *ids, size_t n, bool sphere,
                  bool add, float (*mn)[3], float (*mx)[3], float (*c)[3], float *r) {
    float *cols[10];
    for (int k = 0; k < 3; k++) {
        cols[k] = malloc(n * sizeof(float) + 4);
        cols[3 + k] = malloc(n * sizeof(float) + 4);
        cols[6 + k] = malloc(n * sizeof(float) + 4);
        for (size_t i = 0; i < n; i++) {
            cols[k][i] = mn[i][k];
            cols[3 + k][i] = mx[i][k];
            cols[6 + k][i] = c[i][k];
        }
    }
    broadphase_boxes boxes = {cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]};
    broadphase_spheres spheres = {cols[6], cols[7], cols[8], r};
    for (int i = 0; i < count; i++) {
        broadphase_status st;
        uint32_t got[64];
        if (add) {
            st = sphere ? broadphase_add_spheres(w[i], n, &spheres, got)
                        : broadphase_add_boxes(w[i], n, &boxes, got);
            if (i == 0)
                memcpy(ids, got, n * sizeof *ids);
            else
                CHECK(memcmp(ids, got, n * sizeof *ids) == 0);
        } else {
            st = sphere ? broadphase_move_spheres(w[i], n, ids, &spheres)
                        : broadphase_move_boxes(w[i], n, ids, &boxes);
        }
        CHECK_EQ_INT(st, BROADPHASE_OK);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        m->live[id] = true;
        m->gen[id] += add;
        if (add) { /* every new object starts with the default filter, and not static */
            m->is_static[id] = 0;
            m->cat[id] = 1;
            m->mask[id] = 0xFFFFFFFFu;
            m->group[id] = 0;
        }
        m->is_sphere[id] = sphere;
        for (int k = 0; k < 3; k++) {
            /* The model keeps what the predicates need: boxes their bounds, spheres centre and
             * radius. */
            m->min[k][id] = mn[i][k];
            m->max[k][id] = mx[i][k];
            m->center[k][id] = c[i][k];
        }
        m->radius[id] = r[i];
    }
    for (int k = 0; k < 9; k++) free(cols[k]);
}

static size_t pick_live(const model *m, uint64_t *rng) {
    for (;;) {
        size_t i = (size_t)(scene_uniform(rng) * (float)m->capacity);
        if (i < m->capacity && m->live[i]) return i;
    }
}

/* n different live ids, chosen at random. */
static void pick_distinct_live(const model *m, uint64_t *rng, uint32_t *ids, size_t n) {
    size_t k = 0;
    while (k < n) {
        uint32_t id = (uint32_t)pick_live(m, rng);
        bool dup = false;
        for (size_t j = 0; j < k; j++) dup |= ids[j] == id;
        if (!dup) ids[k++] = id;
    }
}

static size_t live_count(const model *m) {
    size_t n = 0;
    for (size_t i = 0; i < m->capacity; i++) n += m->live[i];
    return n;
}

/* Every step of every method is checked against the model's pairs, with collision filters set
 * at random on the way, and its pair events against the model's difference of consecutive steps
 * (ids reused by later adds included). Every method of the list at AUTO with the default rest
 * share, then the trees' other policies: two of those worlds let every unchanged object rest
 * (rest_share 1), one never rests. */
static void interleaved(int dims) {
    enum { VARIANTS = 5, WORLDS = METHODS + VARIANTS, CAP = 4096, FRAMES = 200 };
    enum { KD_REST_ALL = METHODS + 1, KD_NEVER_REST = METHODS + 2, OCT_REST_ALL = METHODS + 3 };
    broadphase_world *w[WORLDS];
    const float rest_default = broadphase_config_default(dims).rest_share;
    for (size_t mi = 0; mi < METHODS; mi++)
        w[mi] =
            make_world_events(dims, method_at(mi), BROADPHASE_UPDATE_AUTO, 2, 0.0f, rest_default);
    w[METHODS] = make_world_events(dims, BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_REFIT, 2, 0.0f,
                                   rest_default);
    w[KD_REST_ALL] =
        make_world_events(dims, BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_AUTO, 3, 0.0f, 1.0f);
    w[KD_NEVER_REST] =
        make_world_events(dims, BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_REBUILD, 1, 0.0f, 0.0f);
    w[OCT_REST_ALL] =
        make_world_events(dims, BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_REFIT, 2, 0.0f, 1.0f);
    w[METHODS + 4] = make_world_events(dims, BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_AUTO, 3,
                                       1.0f, rest_default);
    for (int i = 0; i < WORLDS; i++) {
        REQUIRE(w[i]);
        broadphase_events none;
        CHECK_EQ_INT(broadphase_pair_events(w[i], &none), BROADPHASE_OK);
        CHECK(none.begun.count == 0 && none.ended.count == 0); /* before the first step */
    }
    model m;
    model_init(&m, dims, CAP);
    pair_list want = {0}, before = {0}, begun = {0}, ended = {0};
    uint32_t *before_gen = calloc(CAP, sizeof(uint32_t));
    size_t begun_total = 0, ended_total = 0, reborn = 0, filtered = 0, flagged = 0;
    size_t static_pairs = 0, rested[WORLDS] = {0};
    uint64_t rng = 12345 + (uint64_t)dims;
    float side = dims == 3 ? 30.0f : 80.0f;
    float mn[64][3], mx[64][3], c[64][3], r[64];
    uint32_t ids[64];
    for (int f = 0; f < FRAMES; f++) {
        int ops = 1 + (int)(scene_uniform(&rng) * 6);
        for (int op = 0; op < ops; op++) {
            float u = scene_uniform(&rng);
            size_t live = live_count(&m);
            size_t n = 1 + (size_t)(scene_uniform(&rng) * 40);
            bool sphere = scene_uniform(&rng) < 0.4f;
            if (u < 0.35f && live + n < CAP - 64) {
                for (size_t i = 0; i < n; i++)
                    random_shape(&rng, dims, side, sphere, mn[i], mx[i], c[i], &r[i]);
                apply(w, WORLDS, &m, ids, n, sphere, true, mn, mx, c, r);
            } else if (u < 0.43f && live > n) {
                /* Filters on n distinct live objects: one of four categories, a mask of some of
                 * them (sometimes all bits), and now and then one of three groups. */
                pick_distinct_live(&m, &rng, ids, n);
                broadphase_filter fl[64];
                for (size_t i = 0; i < n; i++) {
                    fl[i].category = 1u << (int)(scene_uniform(&rng) * 3.99f);
                    fl[i].mask = scene_uniform(&rng) < 0.3f
                                     ? 0xFFFFFFFFu
                                     : (uint32_t)(scene_uniform(&rng) * 15.99f);
                    fl[i].group = scene_uniform(&rng) < 0.6f
                                      ? 0u
                                      : 1u + (uint32_t)(scene_uniform(&rng) * 2.99f);
                    m.cat[ids[i]] = fl[i].category;
                    m.mask[ids[i]] = fl[i].mask;
                    m.group[ids[i]] = fl[i].group;
                }
                for (int i = 0; i < WORLDS; i++)
                    CHECK_EQ_INT(broadphase_set_filters(w[i], n, ids, fl), BROADPHASE_OK);
                filtered += n;
            } else if (u < 0.52f && live > n) {
                /* Static or not: n distinct live objects, mostly made static (so that about
                 * half the world is), sometimes made moving again. */
                pick_distinct_live(&m, &rng, ids, n);
                bool flag = scene_uniform(&rng) < 0.6f;
                for (size_t j = 0; j < n; j++) m.is_static[ids[j]] = flag;
                for (int i = 0; i < WORLDS; i++)
                    CHECK_EQ_INT(broadphase_set_static(w[i], n, ids, flag), BROADPHASE_OK);
                flagged += n;
            } else if (u < 0.62f && live > n) {
                /* Remove n distinct live objects. */
                pick_distinct_live(&m, &rng, ids, n);
                for (int i = 0; i < WORLDS; i++)
                    CHECK_EQ_INT(broadphase_remove(w[i], n, ids), BROADPHASE_OK);
                for (size_t j = 0; j < n; j++) m.live[ids[j]] = false;
            } else if (live > n) {
                /* Move n distinct objects: mostly small steps, sometimes teleports, sometimes a
                 * change of shape. */
                pick_distinct_live(&m, &rng, ids, n);
                bool teleport = scene_uniform(&rng) < 0.2f;
                for (size_t i = 0; i < n; i++) {
                    uint32_t id = ids[i];
                    if (teleport || m.is_sphere[id] != sphere) {
                        random_shape(&rng, dims, side, sphere, mn[i], mx[i], c[i], &r[i]);
                        continue;
                    }
                    for (int a = 0; a < 3; a++) {
                        float d = a < dims ? 0.8f * (scene_uniform(&rng) - 0.5f) : 0.0f;
                        mn[i][a] = m.min[a][id] + d;
                        mx[i][a] = m.max[a][id] + d;
                        c[i][a] = m.center[a][id] + d;
                    }
                    r[i] = m.radius[id];
                }
                apply(w, WORLDS, &m, ids, n, sphere, false, mn, mx, c, r);
            }
        }
        model_pairs(&m, &want);
        for (size_t i = 0; i < want.count; i++)
            static_pairs += m.is_static[want.data[i].a] || m.is_static[want.data[i].b];
        expected_events(&before, before_gen, &want, m.gen, &begun, &ended);
        begun_total += begun.count;
        ended_total += ended.count;
        for (size_t i = 0; i < begun.count; i++)
            reborn += m.gen[begun.data[i].a] != before_gen[begun.data[i].a] &&
                      before_gen[begun.data[i].a] != 0;
        for (int i = 0; i < WORLDS; i++) {
            TEST_CONTEXT("dims %d frame %d world %d objects %zu", dims, f, i, live_count(&m));
            CHECK_EQ_INT(broadphase_object_count(w[i]), live_count(&m));
            broadphase_pairs got = step_ok(w[i]);
            CHECK(pairs_equal(want.data, want.count, got.data, got.count, "interleaved"));
            broadphase_events ev;
            CHECK_EQ_INT(broadphase_pair_events(w[i], &ev), BROADPHASE_OK);
            CHECK(pairs_equal(begun.data, begun.count, ev.begun.data, ev.begun.count, "begun"));
            CHECK(pairs_equal(ended.data, ended.count, ev.ended.data, ev.ended.count, "ended"));
            if (i >= 4) check_levels(w[i], 1 << dims);
            broadphase_stats st;
            CHECK_EQ_INT(broadphase_get_stats(w[i], &st), BROADPHASE_OK);
            rested[i] += st.resting_objects;
        }
        before.count = 0;
        for (size_t i = 0; i < want.count; i++)
            pair_list_push(&before, want.data[i].a, want.data[i].b);
        memcpy(before_gen, m.gen, CAP * sizeof(uint32_t));
    }
    /* The scenario must have exercised every kind of event, reused ids included. */
    TEST_CONTEXT("dims %d: %zu begun, %zu ended, %zu by reused ids, %zu filters set, %zu static "
                 "flags set, %zu pairs with a static",
                 dims, begun_total, ended_total, reborn, filtered, flagged, static_pairs);
    CHECK(begun_total > 1000 && ended_total > 1000 && reborn > 10 && filtered > 1000);
    CHECK(flagged > 1000 && static_pairs > 10000);
    /* Object-frames at rest: none for brute force and with rest off, many with rest_share 1. */
    for (int i = 0; i < WORLDS; i++) {
        TEST_CONTEXT("dims %d: world %d at rest %zu", dims, i, rested[i]);
        if (i < METHODS && !method_has_tree(method_at((size_t)i))) CHECK_EQ_INT(rested[i], 0);
        if (i == KD_NEVER_REST) CHECK_EQ_INT(rested[i], 0);
        if (i == KD_REST_ALL || i == OCT_REST_ALL) CHECK(rested[i] > 20000);
    }
    for (int i = 0; i < WORLDS; i++) broadphase_destroy(w[i]);
    model_free(&m);
    free(want.data);
    free(before.data);
    free(begun.data);
    free(ended.data);
    free(before_gen);
}

TEST(interleaved_add_remove_move_3d) {
    interleaved(3);
}

TEST(interleaved_add_remove_move_2d) {
    interleaved(2);
}

/* After warm-up, steps allocate nothing: the world's allocation count stands still. */
TEST(no_allocation_in_steady_state) {
    typedef struct variant {
        broadphase_method method;
        broadphase_update_policy update;
        float looseness;
    } variant;
    /* Every method of the one list under AUTO, then the trees' other policies. */
#define VARIANT_ROWS_(id, name) {id, BROADPHASE_UPDATE_AUTO, 0.0f},
    static const variant variants[] = {
        BROADPHASE_METHOD_LIST(VARIANT_ROWS_){BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_REBUILD,
                                              0.0f},
        {BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_REFIT, 0.0f},
        {BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_REFIT, 0.0f},
    };
#undef VARIANT_ROWS_
    static const scene_kind kinds[] = {SCENE_MOVING, SCENE_UNIFORM, SCENE_MOVING2D, SCENE_SHAPES,
                                       SCENE_SLEEPING};
    /* Half the objects static in every other world; every object moves, so that the statics'
     * structure is built again at every step too. In the scenes where nothing or 1% moves, the
     * others rest (and their pairs are carried over). */
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        for (size_t vi = 0; vi < 2 * sizeof variants / sizeof variants[0]; vi++) {
            const variant *v = &variants[vi / 2];
            bool statics = vi % 2 == 1;
            bool brute = !method_has_tree(v->method); /* a method that tests every pair */
            scene s;
            REQUIRE(scene_make(&s, kinds[ki], brute ? 3000 : 20000, 8));
            uint32_t *ids = malloc(s.count * sizeof *ids);
            /* All the threads every step: a team that shrinks while the machine is busy (config.
             * fixed_threads) gives one worker more of the work, and its scratch grows once. */
            broadphase_config cfg =
                test_config(s.dimensions, v->method, v->update, 2, v->looseness);
            cfg.fixed_threads = true;
            broadphase_world *w = make_world_from(&cfg);
            REQUIRE(w);
            CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
            if (statics)
                CHECK_EQ_INT(broadphase_set_static(w, s.count / 2, ids, true), BROADPHASE_OK);
            broadphase_stats before, after;
            for (int f = 0; f < 40; f++) {
                if (f == 20) broadphase_get_stats(w, &before);
                step_ok(w);
                scene_advance(&s);
                scene_move_in_world(&s, w, ids);
            }
            broadphase_get_stats(w, &after);
            TEST_CONTEXT("scene %s method %d update %s looseness %g statics %d allocations "
                         "%llu -> %llu bytes %zu -> %zu",
                         scene_name(s.kind), (int)v->method, policy_names[v->update],
                         (double)v->looseness, (int)statics, (unsigned long long)before.allocations,
                         (unsigned long long)after.allocations, before.bytes_in_use,
                         after.bytes_in_use);
            CHECK(after.allocations == before.allocations);
            CHECK(after.bytes_in_use == before.bytes_in_use);
            CHECK(after.steps == 40);
            broadphase_destroy(w);
            free(ids);
            scene_free(&s);
        }
    }
}

/* The pair output sorts keys in buckets sized from the previous step's count. These frames jump
 * from a few pairs to millions (one bucket far over a worker's share, sorted by all workers),
 * stay there (many buckets), make one object overlap everything (a bucket much larger than the
 * rest), and fall back, on every method, with 1 and 3 threads, each frame against the naive
 * reference. */
TEST(pair_count_jumps_and_skew) {
    static const int threads[] = {1, 3};
    enum { N = 2000 };
    pair_list want = {0}, before = {0}, begun = {0}, ended = {0};
    static const uint32_t gen[N]; /* no id is handed out twice here */
    for (size_t mi = 0; mi < METHODS; mi++) {
        for (size_t ti = 0; ti < 2; ti++) {
            scene s;
            REQUIRE(scene_make(&s, SCENE_UNIFORM, N, 21));
            float spread[6][N];
            for (int k = 0; k < 3; k++) {
                memcpy(spread[k], s.min[k], N * sizeof(float));
                memcpy(spread[3 + k], s.max[k], N * sizeof(float));
            }
            uint32_t ids[N];
            broadphase_world *w = make_world_events(3, method_at(mi), BROADPHASE_UPDATE_AUTO,
                                                    threads[ti], 0.0f, 1.0f);
            REQUIRE(w);
            CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
            before.count = 0;
            /* Pair events are checked too: the jumps between a few pairs and millions make
             * merges of many chunks, led by either list. 0, 1: spread; 2, 3: all nearly on one spot
             * (the pool overflows, and the step is searched again); 4, 5: spread with object 0
             * covering the world; 6: spread again; 7: on one spot again; 8, 9: spread with objects
             * 0..39 covering the world, whose 80 000 pairs all fall in the first bucket, more than
             * a worker's share. */
            for (int f = 0; f < 10; f++) {
                for (size_t i = 0; i < N; i++) {
                    for (int k = 0; k < 3; k++) {
                        float lo = spread[k][i], hi = spread[3 + k][i];
                        if (f == 2 || f == 3 || f == 7) {
                            lo = 0.001f * (float)(i % 7);
                            hi = lo + 1.0f;
                        } else if (((f == 4 || f == 5) && i == 0) || (f >= 8 && i < 40)) {
                            lo = -1.0f;
                            hi = s.world_size + 1.0f;
                        }
                        s.min[k][i] = lo;
                        s.max[k][i] = hi;
                    }
                }
                CHECK_EQ_INT(scene_move_in_world(&s, w, ids), BROADPHASE_OK);
                TEST_CONTEXT("method %s threads %d frame %d", method_name(method_at(mi)),
                             threads[ti], f);
                broadphase_pairs got = step_ok(w);
                naive_pairs(&s, ids, &want);
                CHECK(pairs_equal(want.data, want.count, got.data, got.count, "step"));
                if (f == 2) CHECK(got.count == (size_t)N * (N - 1) / 2);
                if (f == 4) CHECK(got.count > N - 1);
                expected_events(&before, gen, &want, gen, &begun, &ended);
                broadphase_events ev;
                CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_OK);
                CHECK(pairs_equal(begun.data, begun.count, ev.begun.data, ev.begun.count, "begun"));
                CHECK(pairs_equal(ended.data, ended.count, ev.ended.data, ev.ended.count, "ended"));
                before.count = 0;
                for (size_t i = 0; i < want.count; i++)
                    pair_list_push(&before, want.data[i].a, want.data[i].b);
            }
            broadphase_destroy(w);
            scene_free(&s);
        }
    }
    free(want.data);
    free(before.data);
    free(begun.data);
    free(ended.data);
}

/* While a step holds the world, every mutation and a second step are refused with BUSY and
 * change nothing. The flag is raised by hand here: a real race cannot be timed in a test. */
TEST(busy_world_refuses_mutations) {
    scene s;
    REQUIRE(scene_make(&s, SCENE_SHAPES, 500, 4));
    uint32_t *ids = malloc(s.count * sizeof *ids);
    broadphase_world *w = make_world(3, BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_AUTO, 2);
    REQUIRE(w);
    CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
    broadphase_pairs p = step_ok(w);
    size_t before = p.count;
    broadphase_pair first = p.data[0];
    __atomic_store_n(&w->busy, 1, __ATOMIC_RELEASE);
    float one[1] = {1.0f};
    broadphase_boxes box = {one, one, one, one, one, one};
    broadphase_spheres ball = {one, one, one, one};
    uint32_t id = 0, out = 0;
    CHECK_EQ_INT(broadphase_add_boxes(w, 1, &box, &out), BROADPHASE_ERROR_BUSY);
    CHECK_EQ_INT(broadphase_add_spheres(w, 1, &ball, &out), BROADPHASE_ERROR_BUSY);
    CHECK_EQ_INT(broadphase_move_boxes(w, 1, &id, &box), BROADPHASE_ERROR_BUSY);
    CHECK_EQ_INT(broadphase_move_spheres(w, 1, &id, &ball), BROADPHASE_ERROR_BUSY);
    CHECK_EQ_INT(broadphase_remove(w, 1, &id), BROADPHASE_ERROR_BUSY);
    CHECK_EQ_INT(broadphase_step(w, &p), BROADPHASE_ERROR_BUSY);
    __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    CHECK_EQ_INT(broadphase_object_count(w), s.count);
    p = step_ok(w);
    CHECK_EQ_INT(p.count, before);
    CHECK(p.count > 0 && p.data[0].a == first.a && p.data[0].b == first.b);
    broadphase_destroy(w);
    free(ids);
    scene_free(&s);
}

/* Batches large enough to be validated over several chunks in parallel still name their first
 * bad element, and leave the world as it was. */
TEST(large_batch_names_first_bad_element) {
    enum { N = 200000 };
    scene s;
    REQUIRE(scene_make(&s, SCENE_UNIFORM, N, 6));
    uint32_t *ids = malloc(N * sizeof *ids);
    broadphase_world *w = make_world(3, BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_AUTO, 2);
    REQUIRE(w);
    CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
    broadphase_pairs p = step_ok(w);
    size_t before = p.count;
    broadphase_boxes boxes = {s.min[0], s.min[1], s.min[2], s.max[0], s.max[1], s.max[2]};
    float keep_a = s.min[1][150001], keep_b = s.max[2][70001];
    s.min[1][150001] = NAN;      /* later chunk: must not be the one reported */
    s.max[2][70001] = -INFINITY; /* first bad element */
    CHECK_EQ_INT(broadphase_move_boxes(w, N, ids, &boxes), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_last_error_index(w), 70001);
    s.max[2][70001] = keep_b;
    /* A valid new shape in a chunk before the bad element, in the middle of unchanged ones
     * (the move compares before it checks): not written by the refused call. */
    float old_lo = w->store.box[ids[98000]].lo[0];
    s.min[0][98000] = old_lo - 0.25f;
    s.min[1][99999] = s.max[1][99999] + 1.0f; /* inverted, before the NaN */
    CHECK_EQ_INT(broadphase_move_boxes(w, N, ids, &boxes), BROADPHASE_ERROR_INVERTED_BOX);
    CHECK_EQ_INT(broadphase_last_error_index(w), 99999);
    uint32_t *fresh = malloc(N * sizeof *fresh);
    CHECK_EQ_INT(broadphase_add_boxes(w, N, &boxes, fresh), BROADPHASE_ERROR_INVERTED_BOX);
    CHECK_EQ_INT(broadphase_last_error_index(w), 99999);
    CHECK_EQ_INT(broadphase_object_count(w), N);
    CHECK(w->store.box[ids[98000]].lo[0] == old_lo);
    p = step_ok(w);
    CHECK_EQ_INT(p.count, before);
    /* Pushed unchanged, nothing counts as moved; the one new shape does, and is written. */
    s.min[1][150001] = keep_a;
    s.min[1][99999] = s.max[1][99999] - 0.5f;
    float fixed_lo = s.min[1][99999];
    s.min[1][99999] = w->store.box[ids[99999]].lo[1];
    s.min[0][98000] = old_lo;
    CHECK_EQ_INT(broadphase_move_boxes(w, N, ids, &boxes), BROADPHASE_OK);
    CHECK_EQ_INT(w->moved_count, 0);
    s.min[1][99999] = fixed_lo == s.min[1][99999] ? fixed_lo - 0.5f : fixed_lo;
    CHECK_EQ_INT(broadphase_move_boxes(w, N, ids, &boxes), BROADPHASE_OK);
    CHECK_EQ_INT(w->moved_count, 1);
    CHECK(w->store.box[ids[99999]].lo[1] == s.min[1][99999]);
    broadphase_destroy(w);
    free(fresh);
    free(ids);
    scene_free(&s);
}

static int by_pair(const void *x, const void *y) {
    const broadphase_pair *a = x, *b = y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* The output sort keeps a pair's bits below its bucket's in 32 bits when they fit (a "narrow"
 * pool: up to about 2^16 ids) and whole 64-bit keys above. A chain of boxes, each meeting only
 * the next, laid out in a random order of ids, has its pairs known by construction and spread
 * over every bucket; both key widths, both trees, 1 and 3 threads. */
TEST(pair_keys_narrow_and_wide) {
    static const struct {
        size_t n;
        bool narrow;
    } sizes[] = {{60000, true}, {300000, false}};
    for (size_t si = 0; si < 2; si++) {
        size_t n = sizes[si].n;
        float *col = malloc(6 * n * sizeof *col);
        uint32_t *at = malloc(n * sizeof *at), *ids = malloc(n * sizeof *ids);
        broadphase_pair *want = malloc(n * sizeof *want);
        REQUIRE(col && at && ids && want);
        for (size_t p = 0; p < n; p++) at[p] = (uint32_t)p; /* at[p]: the object at place p */
        uint64_t rng = 0x9e3779b97f4a7c15ull * (si + 1);
        for (size_t p = n - 1; p > 0; p--) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t q = (size_t)(rng >> 33) % (p + 1);
            uint32_t t = at[p];
            at[p] = at[q];
            at[q] = t;
        }
        for (size_t p = 0; p < n; p++) {
            size_t i = at[p];
            col[i] = (float)p; /* min x; y and z span [0, 1] */
            col[3 * n + i] = (float)p + 1.5f;
            col[n + i] = col[2 * n + i] = 0.0f;
            col[4 * n + i] = col[5 * n + i] = 1.0f;
        }
        for (size_t p = 0; p + 1 < n; p++) {
            uint32_t a = at[p], b = at[p + 1];
            want[p] = (broadphase_pair){a < b ? a : b, a < b ? b : a};
        }
        qsort(want, n - 1, sizeof *want, by_pair);
        broadphase_boxes b = {col, col + n, col + 2 * n, col + 3 * n, col + 4 * n, col + 5 * n};
        for (size_t mi = 0; mi < METHODS; mi++) {
            if (!method_has_tree(method_at(mi))) continue;
            for (int threads = 1; threads <= 3; threads += 2) {
                TEST_CONTEXT("n %zu %s threads %d", n, method_name(method_at(mi)), threads);
                broadphase_world *w = make_world(3, method_at(mi), BROADPHASE_UPDATE_AUTO, threads);
                REQUIRE(w);
                CHECK_EQ_INT(broadphase_add_boxes(w, n, &b, ids), BROADPHASE_OK);
                for (int f = 0; f < 2; f++) { /* the second step sizes its pool from the first */
                    broadphase_pairs got = step_ok(w);
                    CHECK(pairs_equal(want, n - 1, got.data, got.count, "chain"));
                    CHECK(w->pairs.narrow == sizes[si].narrow);
                }
                broadphase_destroy(w);
            }
        }
        free(col);
        free(at);
        free(ids);
        free(want);
    }
}

/* The bounds the engine derives from coordinates (bits_round_down / bits_round_up: sphere
 * boxes, query balls, reaches, the statics cache's grown boxes) are rounded outward and stay
 * finite at the float range's end, where an infinite bound would take the columns' sentinels
 * for boxes (a defect found from outside). */
TEST(derived_bounds_stay_finite) {
    static const double xs[] = {0.0,     1.0,      -1.0,     0.1,      -0.1,    1e-45,
                                -1e-45,  1e38,     -1e38,    3.4e38,   -3.4e38, (double)FLT_MAX,
                                3.5e38,  -3.5e38,  1e39,     -1e39,    1e300,   -1e300,
                                DBL_MAX, -DBL_MAX, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        float lo = bits_round_down(x), hi = bits_round_up(x);
        TEST_CONTEXT("x %g: down %g, up %g", x, (double)lo, (double)hi);
        CHECK(isfinite(lo) && isfinite(hi));
        /* outward: at or beyond x, unless x lies past the float range (clamped to its end) */
        CHECK((double)lo <= x || (lo == -FLT_MAX && x < -(double)FLT_MAX));
        CHECK((double)hi >= x || (hi == FLT_MAX && x > (double)FLT_MAX));
        CHECK(lo <= hi);
    }
    /* A box grown past FLT_MAX on both sides stays a box within the range. */
    CHECK(bits_round_down(-(double)FLT_MAX - 1e38) == -FLT_MAX);
    CHECK(bits_round_up((double)FLT_MAX + 1e38) == FLT_MAX);
}

/* ---- the team a step runs on (team.h) ----------------------------------------------------------
 */

/* The team's decisions, fed figures: small stalls now and then keep it whole, and so does one
 * held-up step alone, however long; a second step held up for most of its time right after, or
 * steps held up again and again, shrink it one thread at a time, never below one; it tries one
 * thread more only after its patience and with a core idle; a try that must shrink again soon
 * doubles the patience, one that holds resets it; fixed never moves. */
TEST(team_policy) {
    team t;
    team_init(&t, 4, false);
    CHECK_EQ_INT(team_choose(&t), 4);
    CHECK(!team_needs_reading(&t, 1000.0)); /* whole: nothing to read */
    /* A kernel thread's tick now and then: 2 ms of a 10 ms step, every 30th step. */
    for (int f = 0; f < 600; f++) {
        team_choose(&t);
        team_observe(&t, f % 30 == 0 ? 2.0 : 0.0, 10.0);
    }
    CHECK_EQ_INT(t.size, 4);
    CHECK_EQ_INT(t.preempted_steps, 20);
    /* Below the thresholds it is not even counted (0.2 ms; 0.4 ms of 10 ms). */
    team_observe(&t, 0.2, 1.0);
    team_observe(&t, 0.4, 10.0);
    CHECK_EQ_INT(t.preempted_steps, 20);
    /* One step held up for the whole of its 10 ms, alone: a passing stall, nothing changes. */
    team_choose(&t);
    team_observe(&t, 10.0, 10.0);
    CHECK_EQ_INT(t.size, 4);
    for (int f = 0; f < 20; f++) team_observe(&t, 0.0, 10.0); /* the average decays */
    /* Two in a row held up for 3 of their 10 ms: not yet; for 5 of 10: one thread fewer. */
    team_observe(&t, 3.0, 10.0);
    team_observe(&t, 3.0, 10.0);
    CHECK_EQ_INT(t.size, 4);
    for (int f = 0; f < 20; f++) team_observe(&t, 0.0, 10.0);
    team_choose(&t);
    team_observe(&t, 5.0, 10.0);
    CHECK_EQ_INT(t.size, 4);
    team_observe(&t, 5.0, 10.0);
    CHECK_EQ_INT(t.size, 3);
    CHECK_EQ_INT(team_choose(&t), 3);
    /* A third of every step: down to one, and no further. */
    for (int f = 0; f < 100; f++) {
        team_choose(&t);
        team_observe(&t, 3.0, 10.0);
    }
    CHECK_EQ_INT(t.size, 1);
    /* Quiet now, but no idle figure read yet: no try, however long it waits. */
    for (int f = 0; f < 100; f++) CHECK_EQ_INT(team_choose(&t), 1);
    /* The machine busy (0.3 of a core idle over the span): still no try. */
    double now = 1000.0, idle = 5000.0;
    CHECK(team_needs_reading(&t, now));
    team_take_reading(&t, now, idle);
    now += 100.0, idle += 30.0;
    CHECK(team_needs_reading(&t, now));
    team_take_reading(&t, now, idle);
    CHECK(!team_needs_reading(&t, now + 10.0)); /* too soon for the next */
    for (int f = 0; f < 5000; f++) team_choose(&t);
    CHECK_EQ_INT(t.size, 1);
    /* A core idle (0.9 over the span): a try after 16 quiet steps. */
    now += 100.0, idle += 90.0;
    team_take_reading(&t, now, idle);
    t.quiet = 0;
    int steps = 0;
    while (team_choose(&t) == 1 && steps < 1000) team_observe(&t, 0.0, 10.0), steps++;
    CHECK_EQ_INT(steps, 15);
    CHECK_EQ_INT(t.size, 2);
    /* Held up again soon after: back to one, and the next try waits twice as long. */
    team_observe(&t, 8.0, 10.0);
    team_observe(&t, 8.0, 10.0);
    CHECK_EQ_INT(t.size, 1);
    CHECK_EQ_INT(t.patience, 32);
    now += 100.0, idle += 90.0;
    team_take_reading(&t, now, idle);
    now += 100.0, idle += 90.0;
    team_take_reading(&t, now, idle);
    steps = 0;
    while (team_choose(&t) == 1 && steps < 1000) team_observe(&t, 0.0, 10.0), steps++;
    CHECK_EQ_INT(steps, 31);
    /* This try holds through its probation: the patience is back to the first. */
    for (int f = 0; f < 64; f++) team_observe(&t, 0.0, 10.0);
    CHECK_EQ_INT(t.size, 2);
    CHECK_EQ_INT(t.patience, 16);
    /* A call that changes the world (a move) held up for most of it, 1 ms or more, right after
     * another such call or a held-up step, shrinks the team at once; alone it does not, nor
     * one held up less, or for less of it; nor does it enter the steps' average. */
    team u;
    team_init(&u, 2, false);
    team_observe_call(&u, 0.9, 1.0); /* under 1 ms */
    team_observe_call(&u, 1.9, 4.0); /* under half */
    team_observe_call(&u, 1.9, 4.0);
    CHECK_EQ_INT(u.size, 2);
    CHECK(u.stall_share == 0.0);
    team_observe_call(&u, 2.0, 4.0); /* alone */
    CHECK_EQ_INT(u.size, 2);
    team_observe(&u, 0.0, 10.0); /* a quiet step between */
    team_observe_call(&u, 2.0, 4.0);
    CHECK_EQ_INT(u.size, 2);
    team_observe_call(&u, 2.0, 4.0);
    CHECK_EQ_INT(u.size, 1);
    team_init(&u, 2, false);
    team_observe(&u, 6.0, 10.0); /* a held-up step, then a held-up move */
    CHECK_EQ_INT(u.size, 2);
    team_observe_call(&u, 2.0, 4.0);
    CHECK_EQ_INT(u.size, 1);
    team_observe_call(&u, 4.0, 4.0); /* never below one */
    CHECK_EQ_INT(u.size, 1);
    team_init(&u, 2, true);
    team_observe_call(&u, 4.0, 4.0); /* fixed never moves */
    CHECK_EQ_INT(u.size, 2);
    /* Where the system does not say how idle the machine is, the patience alone paces tries. */
    team_observe(&t, 9.0, 10.0);
    team_observe(&t, 9.0, 10.0);
    CHECK_EQ_INT(t.size, 1);
    team_take_reading(&t, now + 500.0, -1.0);
    steps = 0;
    while (team_choose(&t) == 1 && steps < 1000) team_observe(&t, 0.0, 10.0), steps++;
    CHECK_EQ_INT(steps, 15);
    /* A large team loses a quarter at a time: 16, 12, 9, 7, then one at a time. */
    team_init(&t, 16, false);
    team_observe(&t, 9.0, 10.0);
    CHECK_EQ_INT(t.size, 16);
    static const int sizes[] = {12, 9, 7, 6, 5, 4, 3, 2, 1, 1};
    for (int i = 0; i < 10; i++) {
        team_choose(&t);
        team_observe(&t, 9.0, 10.0);
        CHECK_EQ_INT(t.size, sizes[i]);
    }
    /* Never above the workers. */
    team_init(&t, 2, false);
    for (int f = 0; f < 1000; f++) CHECK_EQ_INT(team_choose(&t), 2);
    /* Fixed: all the workers, held up or not, and the held-up steps still counted. */
    team_init(&t, 4, true);
    for (int f = 0; f < 50; f++) {
        CHECK_EQ_INT(team_choose(&t), 4);
        team_observe(&t, 9.0, 10.0);
    }
    CHECK_EQ_INT(t.size, 4);
    CHECK_EQ_INT(t.preempted_steps, 50);
    CHECK(!team_needs_reading(&t, 1e9));
}

/* The team tests' pair of worlds: a scene's objects in a one-thread world and in a four-worker
 * one, events on, the method mi of the list. */
typedef struct twins {
    scene s;
    uint32_t *ids;
    broadphase_world *one, *four;
} twins;

static bool twins_make(twins *t, size_t mi, scene_kind kind, uint64_t seed) {
    memset(t, 0, sizeof *t);
    if (!scene_make(&t->s, kind, 6000, seed)) return false;
    t->ids = malloc(t->s.count * sizeof *t->ids);
    t->one =
        make_world_events(t->s.dimensions, method_at(mi), BROADPHASE_UPDATE_AUTO, 1, 0.0f, 0.125f);
    t->four =
        make_world_events(t->s.dimensions, method_at(mi), BROADPHASE_UPDATE_AUTO, 4, 0.0f, 0.125f);
    if (!t->ids || !t->one || !t->four) return false;
    CHECK_EQ_INT(scene_add_to_world(&t->s, t->one, t->ids), BROADPHASE_OK);
    CHECK_EQ_INT(scene_add_to_world(&t->s, t->four, t->ids), BROADPHASE_OK);
    return true;
}

/* The two steps' pairs and events equal (the one-thread world stepped before), then the scene's
 * next frame pushed to both. */
static void twins_compare_and_advance(twins *t, broadphase_pairs want, broadphase_pairs got) {
    CHECK(pairs_equal(want.data, want.count, got.data, got.count, "team"));
    CHECK(same_events(t->one, t->four));
    scene_advance(&t->s);
    CHECK_EQ_INT(scene_move_in_world(&t->s, t->one, t->ids), BROADPHASE_OK);
    CHECK_EQ_INT(scene_move_in_world(&t->s, t->four, t->ids), BROADPHASE_OK);
}

static void twins_free(twins *t) {
    broadphase_destroy(t->one);
    broadphase_destroy(t->four);
    free(t->ids);
    scene_free(&t->s);
}

/* Steps on every team size from one to the workers, changing every frame (as they do while the
 * machine is busy), give the same bytes as one thread: 4 workers' chunks on 1, 2, 3 and 4
 * threads, both trees, 2D and 3D, events on. The last step's thread count is reported. */
TEST(team_sizes_mid_run_give_the_same_pairs) {
    static const scene_kind kinds[] = {SCENE_MOVING, SCENE_MOVING2D, SCENE_CLUSTERED};
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
            twins t;
            REQUIRE(twins_make(&t, mi, kinds[ki], 5));
            uint64_t unchanged = 0;
            for (int f = 0; f < 24; f++) {
                TEST_CONTEXT("%s scene %s frame %d", method_name(method_at(mi)),
                             scene_name(t.s.kind), f);
                t.four->team.size = 1 + (f * 3) % 4;
                t.four->team.patience = UINT32_MAX; /* no try of its own */
                int size = t.four->team.size;
                broadphase_pairs want = step_ok(t.one);
                broadphase_pairs got = step_ok(t.four);
                broadphase_stats st;
                broadphase_get_stats(t.four, &st);
                /* A step that found nothing changed runs nothing in parallel: one thread. */
                CHECK_EQ_INT(st.step_threads, st.unchanged_steps > unchanged ? 1 : size);
                unchanged = st.unchanged_steps;
                twins_compare_and_advance(&t, want, got);
            }
            twins_free(&t);
        }
    }
}

/* A step that meets other work mid-way shrinks its team at once, for its remaining parallel
 * calls (threads_shrink_after_calls makes the k-th call count as held up): wherever in the step
 * that happens, the pairs and the events are the bytes of one thread's. Both trees, 2D and 3D,
 * the shrink at each of a step's first five calls in turn. */
/* A step whose limit was lowered mid-way (its second held-up call, threads_call_done) leaves the
 * team shrunk for the next steps; one whose limit stayed leaves it whole; fixed never moves. */
TEST(team_follows_a_step_that_shrank_itself) {
    team t;
    team_init(&t, 2, false);
    CHECK_EQ_INT(team_begin(&t), 2);
    threads_set_team_limit(1); /* as a second held-up call leaves it */
    team_end(&t, 10.0);
    CHECK_EQ_INT(t.size, 1);
    CHECK_EQ_INT(threads_team_limit_now(), 0);
    team_init(&t, 2, false);
    team_begin(&t);
    team_end(&t, 10.0);
    CHECK_EQ_INT(t.size, 2);
    team_init(&t, 2, true);
    team_begin(&t);
    threads_set_team_limit(1);
    team_end(&t, 10.0);
    CHECK_EQ_INT(t.size, 2);
}

TEST(team_shrinking_inside_a_step_gives_the_same_pairs) {
    static const scene_kind kinds[] = {SCENE_MOVING, SCENE_MOVING2D};
    for (size_t mi = 0; mi < METHODS; mi++) {
        if (!method_has_tree(method_at(mi))) continue;
        for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
            twins t;
            REQUIRE(twins_make(&t, mi, kinds[ki], 9));
            step_ok(t.one);
            step_ok(t.four); /* (the first step, a build, not counted) */
            int shrunk = 0;  /* steps that made the call that shrinks their team */
            for (int f = 0; f < 48; f++) {
                TEST_CONTEXT("%s scene %s frame %d", method_name(method_at(mi)),
                             scene_name(t.s.kind), f);
                t.four->team.size = 4;
                t.four->team.patience = UINT32_MAX; /* no try of its own */
                broadphase_pairs want = step_ok(t.one);
                threads_shrink_after_calls(1 + f % 5);
                broadphase_pairs got = step_ok(t.four);
                shrunk += threads_shrink_pending() == 0;
                threads_shrink_after_calls(0);
                twins_compare_and_advance(&t, want, got);
            }
            CHECK(shrunk >= 40); /* (an octree's step makes 5-8 calls, a kd-tree's 15) */
            twins_free(&t);
        }
    }
}

TEST_MAIN()

/* Tests for the public world API: configuration, status strings, id allocation, whole-batch
 * validation (every failing call leaves the world exactly as it was), 2D z arrays, closed overlap
 * semantics for boxes and spheres with every method and thread count, shape changes, statistics. */
#include <float.h>
#include <pthread.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broadphase.h"
#include "method.h"
#include "scenes.h"
#include "test.h"

/* ---- shapes and columns ---------------------------------------------------------------------- */

/* One object as the test sees it: a box (lo, hi) or a sphere (c, r). */
typedef struct shape {
    bool sphere;
    float lo[3], hi[3];
    float c[3], r;
} shape;

static shape box_shape(float x0, float y0, float z0, float x1, float y1, float z1) {
    shape s = {.sphere = false, .lo = {x0, y0, z0}, .hi = {x1, y1, z1}};
    return s;
}

static shape sphere_shape(float x, float y, float z, float r) {
    shape s = {.sphere = true, .c = {x, y, z}, .r = r};
    return s;
}

/* Caller-side SoA columns for a batch: boxes use col[0..2] = min, col[3..5] = max; spheres use
 * col[0..2] = centre, col[3] = radius. Each column is allocated to exactly n floats. */
typedef struct columns {
    float *col[6];
    size_t n;
    int dims; /* 2: the z columns are handed to the library as NULL */
} columns;

static float *column_new(size_t n) {
    float *c = malloc(n ? n * sizeof *c : 1);
    if (!c) abort();
    return c;
}

static void columns_from_shapes(columns *c, const shape *s, size_t n, int dims) {
    c->n = n;
    c->dims = dims;
    for (int k = 0; k < 6; k++) c->col[k] = column_new(n);
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++) {
            c->col[k][i] = s[i].sphere ? s[i].c[k] : s[i].lo[k];
            c->col[3 + k][i] = s[i].sphere ? (k == 0 ? s[i].r : 0.0f) : s[i].hi[k];
        }
    }
}

static void columns_free(columns *c) {
    for (int k = 0; k < 6; k++) free(c->col[k]);
}

static broadphase_boxes columns_boxes(const columns *c) {
    bool z = c->dims == 3;
    broadphase_boxes b = {c->col[0], c->col[1], z ? c->col[2] : NULL,
                          c->col[3], c->col[4], z ? c->col[5] : NULL};
    return b;
}

static broadphase_spheres columns_spheres(const columns *c) {
    broadphase_spheres s = {c->col[0], c->col[1], c->dims == 3 ? c->col[2] : NULL, c->col[3]};
    return s;
}

/* Adds n shapes of one kind in one call. */
static broadphase_status add_batch(broadphase_world *w, const shape *s, size_t n, int dims,
                                   uint32_t *ids_out) {
    columns c;
    columns_from_shapes(&c, s, n, dims);
    broadphase_boxes b = columns_boxes(&c);
    broadphase_spheres sp = columns_spheres(&c);
    broadphase_status st = n > 0 && s[0].sphere ? broadphase_add_spheres(w, n, &sp, ids_out)
                                                : broadphase_add_boxes(w, n, &b, ids_out);
    columns_free(&c);
    return st;
}

/* Moves n objects to n shapes of one kind in one call. */
static broadphase_status move_batch(broadphase_world *w, const uint32_t *ids, const shape *s,
                                    size_t n, int dims) {
    columns c;
    columns_from_shapes(&c, s, n, dims);
    broadphase_boxes b = columns_boxes(&c);
    broadphase_spheres sp = columns_spheres(&c);
    broadphase_status st = n > 0 && s[0].sphere ? broadphase_move_spheres(w, n, ids, &sp)
                                                : broadphase_move_boxes(w, n, ids, &b);
    columns_free(&c);
    return st;
}

static uint32_t add_one(broadphase_world *w, shape s, int dims) {
    uint32_t id = UINT32_MAX;
    CHECK_EQ_INT(add_batch(w, &s, 1, dims, &id), BROADPHASE_OK);
    return id;
}

static void move_one(broadphase_world *w, uint32_t id, shape s, int dims) {
    CHECK_EQ_INT(move_batch(w, &id, &s, 1, dims), BROADPHASE_OK);
}

static void remove_one(broadphase_world *w, uint32_t id) {
    CHECK_EQ_INT(broadphase_remove(w, 1, &id), BROADPHASE_OK);
}

/* ---- worlds and runs ------------------------------------------------------------------------- */

static broadphase_world *world_with(const broadphase_config *cfg) {
    broadphase_world *w = NULL;
    broadphase_status s = broadphase_create(cfg, &w);
    CHECK_EQ_INT(s, BROADPHASE_OK);
    return s == BROADPHASE_OK ? w : NULL;
}

/* looseness 0 keeps the default (it only matters to the octree). */
static broadphase_world *world_new_loose(int dims, broadphase_method method, int threads,
                                         float looseness) {
    broadphase_config cfg = broadphase_config_default(dims);
    cfg.method = method;
    cfg.threads = threads;
    if (looseness != 0.0f) cfg.looseness = looseness;
    return world_with(&cfg);
}

static broadphase_world *world_new(int dims, broadphase_method method, int threads) {
    return world_new_loose(dims, method, threads, 0.0f);
}

/* Every method, thread count and octree looseness the step must agree on. */
typedef struct run {
    broadphase_method method;
    int threads;
    float looseness; /* 0: the default */
} run;

/* Every method of the one list on 1 and 2 threads, and the strict octree. */
#define RUN_ROWS_(id, name) {id, 1, 0.0f}, {id, 2, 0.0f},
static const run RUNS[] = {BROADPHASE_METHOD_LIST(RUN_ROWS_){BROADPHASE_METHOD_OCTREE, 2, 1.0f}};
#undef RUN_ROWS_
enum { RUN_COUNT = sizeof RUNS / sizeof RUNS[0] };

static broadphase_world *run_world(int dims, const run *r) {
    return world_new_loose(dims, r->method, r->threads, r->looseness);
}

/* ---- pairs ----------------------------------------------------------------------------------- */

typedef struct pair_list {
    broadphase_pair *data;
    size_t count, capacity;
} pair_list;

static void pair_list_push(pair_list *l, uint32_t a, uint32_t b) {
    if (l->count == l->capacity) {
        l->capacity = l->capacity ? 2 * l->capacity : 64;
        l->data = realloc(l->data, l->capacity * sizeof *l->data);
        if (!l->data) abort();
    }
    l->data[l->count++] = (broadphase_pair){a, b};
}

static int pair_compare(const void *x, const void *y) {
    const broadphase_pair *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* a < b, strictly increasing by (a, b): sorted and every pair once. */
static void check_wellformed(broadphase_pairs got) {
    for (size_t i = 0; i < got.count; i++) {
        CHECK(got.data[i].a < got.data[i].b);
        if (i > 0) CHECK(pair_compare(&got.data[i - 1], &got.data[i]) < 0);
    }
}

static void check_pairs(broadphase_pairs got, const broadphase_pair *want, size_t count) {
    check_wellformed(got);
    CHECK_EQ_INT(got.count, count);
    size_t n = got.count < count ? got.count : count;
    for (size_t i = 0; i < n; i++) {
        if (got.data[i].a != want[i].a || got.data[i].b != want[i].b) {
            test_failures++;
            fprintf(stderr, "pair %zu: got (%u, %u), want (%u, %u) [%s]\n", i, got.data[i].a,
                    got.data[i].b, want[i].a, want[i].b, test_context);
            return;
        }
    }
}

static broadphase_pairs step_ok(broadphase_world *w) {
    broadphase_pairs p = {NULL, 0};
    CHECK_EQ_INT(broadphase_step(w, &p), BROADPHASE_OK);
    return p;
}

/* ---- the oracle: the contract's overlap rules in double precision ---------------------------- */

static double axis_gap(double c, double lo, double hi) {
    return c < lo ? lo - c : (c > hi ? c - hi : 0.0);
}

static bool shapes_overlap(const shape *p, const shape *q, int dims) {
    if (!p->sphere && !q->sphere) {
        for (int k = 0; k < dims; k++)
            if (!(p->lo[k] <= q->hi[k] && q->lo[k] <= p->hi[k])) return false;
        return true;
    }
    if (p->sphere && q->sphere) {
        double d2 = 0.0;
        for (int k = 0; k < dims; k++) {
            double d = (double)p->c[k] - (double)q->c[k];
            d2 += d * d;
        }
        double s = (double)p->r + (double)q->r;
        return d2 <= s * s;
    }
    const shape *b = p->sphere ? q : p, *s = p->sphere ? p : q;
    double d2 = 0.0;
    for (int k = 0; k < dims; k++) {
        double g = axis_gap(s->c[k], b->lo[k], b->hi[k]);
        d2 += g * g;
    }
    return d2 <= (double)s->r * (double)s->r;
}

/* Pairs among the live shapes (live NULL: all), sorted by (a, b). */
static void oracle_pairs(const shape *s, const bool *live, size_t n, int dims, pair_list *out) {
    out->count = 0;
    for (size_t a = 0; a < n; a++) {
        if (live && !live[a]) continue;
        for (size_t b = a + 1; b < n; b++) {
            if (live && !live[b]) continue;
            if (shapes_overlap(&s[a], &s[b], dims)) pair_list_push(out, (uint32_t)a, (uint32_t)b);
        }
    }
}

/* ---- scenes: a list of shapes with the pairs they must give ---------------------------------- */

/* Adds the shapes one at a time (ids follow the order, or the reverse order), steps twice (the
 * second step refits the kd-tree) and compares both with `want`, for every run. */
static void expect_scene(int dims, const shape *s, size_t n, const broadphase_pair *want,
                         size_t want_count, const char *what) {
    pair_list mapped = {0};
    for (int r = 0; r < RUN_COUNT; r++) {
        for (int reverse = 0; reverse < 2; reverse++) {
            TEST_CONTEXT("%s: %dD %s threads=%d looseness=%g %s order", what, dims,
                         broadphase_method_name(RUNS[r].method), RUNS[r].threads,
                         (double)RUNS[r].looseness, reverse ? "reverse" : "forward");
            broadphase_world *w = run_world(dims, &RUNS[r]);
            if (!w) break;
            for (size_t i = 0; i < n; i++) {
                size_t src = reverse ? n - 1 - i : i;
                CHECK_EQ_INT(add_one(w, s[src], dims), i);
            }
            mapped.count = 0;
            for (size_t i = 0; i < want_count; i++) {
                uint32_t a = want[i].a, b = want[i].b;
                if (reverse) {
                    a = (uint32_t)(n - 1 - want[i].b);
                    b = (uint32_t)(n - 1 - want[i].a);
                }
                pair_list_push(&mapped, a, b);
            }
            if (mapped.count > 1)
                qsort(mapped.data, mapped.count, sizeof *mapped.data, pair_compare);
            check_pairs(step_ok(w), mapped.data, mapped.count);
            check_pairs(step_ok(w), mapped.data, mapped.count);
            broadphase_destroy(w);
        }
    }
    free(mapped.data);
}

/* Two shapes: they overlap or they do not. */
static void expect_two(int dims, shape p, shape q, bool overlap, const char *what) {
    shape s[2] = {p, q};
    broadphase_pair want = {0, 1};
    expect_scene(dims, s, 2, &want, overlap ? 1 : 0, what);
}

/* ---- the fixture for failing calls ----------------------------------------------------------- */

/* A 3D world holding a chain of boxes 0..10 (box i overlaps i+1) with id 11 removed, and the
 * pairs it gives. Failing calls use batches of BATCH elements with the bad one at BAD; the valid
 * elements of a move would break every pair of the chain if they were applied. */
enum { BATCH = 10, BAD = 7, CHAIN = 12, FREE_ID = 11 };

typedef struct fixture {
    broadphase_world *w;
    broadphase_pair pairs[CHAIN];
    size_t pair_count, objects;
} fixture;

static bool fixture_init(fixture *fx) {
    memset(fx, 0, sizeof *fx);
    fx->w = world_new(3, BROADPHASE_METHOD_KDTREE, 2);
    if (!fx->w) return false;
    shape s[CHAIN];
    for (int i = 0; i < CHAIN; i++) s[i] = box_shape((float)i, 0, 0, (float)i + 1.5f, 1, 1);
    uint32_t ids[CHAIN];
    CHECK_EQ_INT(add_batch(fx->w, s, CHAIN, 3, ids), BROADPHASE_OK);
    remove_one(fx->w, FREE_ID);
    broadphase_pairs p = step_ok(fx->w);
    CHECK_EQ_INT(p.count, CHAIN - 2);
    if (p.count != CHAIN - 2) return false;
    memcpy(fx->pairs, p.data, p.count * sizeof *p.data);
    fx->pair_count = p.count;
    fx->objects = CHAIN - 1;
    return true;
}

/* A valid batch for the fixture: BATCH boxes or spheres far from the chain, ids 0..BATCH-1. */
static void fixture_batch(columns *c, uint32_t *ids, bool spheres) {
    shape s[BATCH];
    for (int i = 0; i < BATCH; i++) {
        float x = 100.0f + 10.0f * (float)i;
        s[i] = spheres ? sphere_shape(x, 0.5f, 0.5f, 1.0f) : box_shape(x, 0, 0, x + 1, 1, 1);
        ids[i] = (uint32_t)i;
    }
    columns_from_shapes(c, s, BATCH, 3);
}

/* Checks a call's status and error index, then that the world is exactly as it was: the same
 * object count, the same pairs, and the next add gets the id it would have got. */
static void expect_unchanged(fixture *fx, broadphase_status got, broadphase_status want,
                             size_t index) {
    CHECK_EQ_INT(got, want);
    CHECK(broadphase_last_error_index(fx->w) == index);
    CHECK_EQ_INT(broadphase_object_count(fx->w), fx->objects);
    broadphase_pairs p = step_ok(fx->w);
    CHECK_EQ_INT(p.count, fx->pair_count);
    if (p.count == fx->pair_count) CHECK(memcmp(p.data, fx->pairs, p.count * sizeof *p.data) == 0);
    uint32_t id = add_one(fx->w, box_shape(-50, -50, -50, -49, -49, -49), 3);
    CHECK_EQ_INT(id, FREE_ID);
    remove_one(fx->w, id);
}

/* Leaves a failed call's index (BAD) behind, so that a later call must clear it. */
static void prime_error_index(fixture *fx) {
    columns c;
    uint32_t ids[BATCH];
    fixture_batch(&c, ids, false);
    c.col[0][BAD] = NAN;
    broadphase_boxes b = columns_boxes(&c);
    CHECK_EQ_INT(broadphase_add_boxes(fx->w, BATCH, &b, ids), BROADPHASE_ERROR_NONFINITE);
    CHECK_EQ_INT(broadphase_last_error_index(fx->w), BAD);
    columns_free(&c);
}

/* The five mutating calls, with a NULL struct or a NULL id array on request. */
enum op { OP_ADD_BOXES, OP_ADD_SPHERES, OP_MOVE_BOXES, OP_MOVE_SPHERES, OP_REMOVE, OP_COUNT };
enum { NULL_STRUCT = 1, NULL_IDS = 2 };

static const char *const OP_NAMES[OP_COUNT] = {"add_boxes", "add_spheres", "move_boxes",
                                               "move_spheres", "remove"};

static bool op_spheres(int op) {
    return op == OP_ADD_SPHERES || op == OP_MOVE_SPHERES;
}

static broadphase_status run_op(broadphase_world *w, int op, size_t count, const columns *c,
                                const uint32_t *ids, int flags) {
    broadphase_boxes b = columns_boxes(c);
    broadphase_spheres s = columns_spheres(c);
    const broadphase_boxes *bp = flags & NULL_STRUCT ? NULL : &b;
    const broadphase_spheres *sp = flags & NULL_STRUCT ? NULL : &s;
    uint32_t out[BATCH];
    uint32_t *ids_out = flags & NULL_IDS ? NULL : out;
    const uint32_t *ids_in = flags & NULL_IDS ? NULL : ids;
    if (count > BATCH) abort();
    switch (op) {
    case OP_ADD_BOXES:
        return broadphase_add_boxes(w, count, bp, ids_out);
    case OP_ADD_SPHERES:
        return broadphase_add_spheres(w, count, sp, ids_out);
    case OP_MOVE_BOXES:
        return broadphase_move_boxes(w, count, ids_in, bp);
    case OP_MOVE_SPHERES:
        return broadphase_move_spheres(w, count, ids_in, sp);
    default:
        return broadphase_remove(w, count, ids_in);
    }
}

/* Runs op on a fresh valid batch with column[BAD] = value, expecting failure. */
static void expect_value_rejected(fixture *fx, int op, int column, float value,
                                  broadphase_status want) {
    columns c;
    uint32_t ids[BATCH];
    fixture_batch(&c, ids, op_spheres(op));
    c.col[column][BAD] = value;
    expect_unchanged(fx, run_op(fx->w, op, BATCH, &c, ids, 0), want, BAD);
    columns_free(&c);
}

/* Runs op on a fresh valid batch whose id list has ids[BAD] = bad_id, expecting failure. */
static void expect_id_rejected(fixture *fx, int op, uint32_t bad_id, broadphase_status want) {
    columns c;
    uint32_t ids[BATCH];
    fixture_batch(&c, ids, op_spheres(op));
    ids[BAD] = bad_id;
    expect_unchanged(fx, run_op(fx->w, op, BATCH, &c, ids, 0), want, BAD);
    columns_free(&c);
}

/* Runs op with one column (or the struct, or the ids) NULL: INVALID_ARGUMENT, no index. */
static void expect_null_rejected(fixture *fx, int op, int null_column, int flags) {
    columns c;
    uint32_t ids[BATCH];
    fixture_batch(&c, ids, op_spheres(op));
    if (null_column >= 0) {
        free(c.col[null_column]);
        c.col[null_column] = NULL;
    }
    prime_error_index(fx);
    expect_unchanged(fx, run_op(fx->w, op, BATCH, &c, ids, flags),
                     BROADPHASE_ERROR_INVALID_ARGUMENT, SIZE_MAX);
    columns_free(&c);
}

static const char *const BOX_COLUMNS[6] = {"min_x", "min_y", "min_z", "max_x", "max_y", "max_z"};
static const char *const SPHERE_COLUMNS[4] = {"x", "y", "z", "radius"};

/* ---- configuration --------------------------------------------------------------------------- */

TEST(config_defaults) {
    for (int dims = 2; dims <= 3; dims++) {
        TEST_CONTEXT("dims=%d", dims);
        broadphase_config c = broadphase_config_default(dims);
        CHECK_EQ_INT(c.dimensions, dims);
        CHECK_EQ_INT(c.method, BROADPHASE_METHOD_KDTREE);
        CHECK_EQ_INT(c.update, BROADPHASE_UPDATE_AUTO);
        CHECK_EQ_INT(c.threads, 0);
        CHECK_EQ_INT(c.leaf_size, 0); /* the method's own */
        CHECK_EQ_INT(c.max_depth, 40);
        CHECK(c.rebuild_threshold == 1.5f);
        CHECK_EQ_INT(c.initial_capacity, 0);
        CHECK(c.looseness == 1.5f); /* broadphase.h: measured best */
        broadphase_world *w = world_with(&c);
        CHECK(w != NULL);
        broadphase_destroy(w);
    }
    /* Dimensions other than 2 or 3 are kept, so that create() rejects them. */
    CHECK_EQ_INT(broadphase_config_default(1).dimensions, 1);
    CHECK_EQ_INT(broadphase_config_default(4).dimensions, 4);
}

/* One config field set to one value. */
enum config_field {
    F_DIMS,
    F_METHOD,
    F_UPDATE,
    F_THREADS,
    F_LEAF,
    F_DEPTH,
    F_THRESHOLD,
    F_LOOSENESS,        /* for the default method (the range holds whatever the method) */
    F_OCTREE_LOOSENESS, /* for the octree */
    F_OCTREE_LEAF,
    F_OCTREE_DEPTH,
};
typedef struct config_case {
    const char *what;
    enum config_field field;
    double value;
} config_case;

static broadphase_config config_with(int dims, config_case cc) {
    broadphase_config c = broadphase_config_default(dims);
    switch (cc.field) {
    case F_DIMS:
        c.dimensions = (int)cc.value;
        break;
    case F_METHOD:
        c.method = (broadphase_method)(int)cc.value;
        break;
    case F_UPDATE:
        c.update = (broadphase_update_policy)(int)cc.value;
        break;
    case F_THREADS:
        c.threads = (int)cc.value;
        break;
    case F_LEAF:
        c.leaf_size = (int)cc.value;
        break;
    case F_DEPTH:
        c.max_depth = (int)cc.value;
        break;
    case F_THRESHOLD:
        c.rebuild_threshold = (float)cc.value;
        break;
    case F_LOOSENESS:
        c.looseness = (float)cc.value;
        break;
    case F_OCTREE_LOOSENESS:
        c.method = BROADPHASE_METHOD_OCTREE;
        c.looseness = (float)cc.value;
        break;
    case F_OCTREE_LEAF:
        c.method = BROADPHASE_METHOD_OCTREE;
        c.leaf_size = (int)cc.value;
        break;
    case F_OCTREE_DEPTH:
        c.method = BROADPHASE_METHOD_OCTREE;
        c.max_depth = (int)cc.value;
        break;
    }
    return c;
}

TEST(config_rejects_invalid) {
    static const config_case bad[] = {
        {"dims 0", F_DIMS, 0},
        {"dims 1", F_DIMS, 1},
        {"dims 4", F_DIMS, 4},
        {"the first value past the list of methods", F_METHOD, BROADPHASE_METHOD_COUNT},
        {"method 99", F_METHOD, 99},
        {"update 3", F_UPDATE, 3},
        {"update 99", F_UPDATE, 99},
        {"threads -1", F_THREADS, -1},
        {"threads 1025", F_THREADS, 1025},
        {"leaf_size -1", F_LEAF, -1},
        {"leaf_size 4097", F_LEAF, 4097},
        {"max_depth 0", F_DEPTH, 0},
        {"max_depth 65", F_DEPTH, 65},
        {"rebuild_threshold nan", F_THRESHOLD, NAN},
        {"rebuild_threshold 0.5", F_THRESHOLD, 0.5},
        {"rebuild_threshold 0.999", F_THRESHOLD, 0.999},
        {"rebuild_threshold 1000.5", F_THRESHOLD, 1000.5},
        {"rebuild_threshold inf", F_THRESHOLD, INFINITY},
        {"rebuild_threshold -inf", F_THRESHOLD, -INFINITY},
        {"looseness nan", F_LOOSENESS, NAN},
        {"looseness 0", F_LOOSENESS, 0.0},
        {"looseness 4.5", F_LOOSENESS, 4.5},
        {"octree looseness nan", F_OCTREE_LOOSENESS, NAN},
        {"octree looseness -nan", F_OCTREE_LOOSENESS, -NAN},
        {"octree looseness 0", F_OCTREE_LOOSENESS, 0.0},
        {"octree looseness -1", F_OCTREE_LOOSENESS, -1.0},
        {"octree looseness 0.5", F_OCTREE_LOOSENESS, 0.5},
        {"octree looseness just below 1", F_OCTREE_LOOSENESS, 0.99999994},
        {"octree looseness just above 4", F_OCTREE_LOOSENESS, 4.0000005},
        {"octree looseness 5", F_OCTREE_LOOSENESS, 5.0},
        {"octree looseness inf", F_OCTREE_LOOSENESS, INFINITY},
        {"octree looseness -inf", F_OCTREE_LOOSENESS, -INFINITY},
        {"octree leaf_size -1", F_OCTREE_LEAF, -1},
        {"octree leaf_size 4097", F_OCTREE_LEAF, 4097},
        {"octree max_depth 0", F_OCTREE_DEPTH, 0},
        {"octree max_depth 65", F_OCTREE_DEPTH, 65},
    };
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            TEST_CONTEXT("dims=%d %s", dims, bad[i].what);
            broadphase_config c = config_with(dims, bad[i]);
            broadphase_world *w = NULL;
            CHECK_EQ_INT(broadphase_create(&c, &w), BROADPHASE_ERROR_INVALID_CONFIG);
            CHECK(w == NULL);
            broadphase_destroy(w);
        }
    }
}

TEST(config_accepts_range_bounds) {
    static const config_case good[] = {
        {"method brute force", F_METHOD, BROADPHASE_METHOD_BRUTE_FORCE},
        {"method octree", F_METHOD, BROADPHASE_METHOD_OCTREE},
        {"octree looseness 1", F_OCTREE_LOOSENESS, 1.0},
        {"octree looseness 1.5", F_OCTREE_LOOSENESS, 1.5},
        {"octree looseness 4", F_OCTREE_LOOSENESS, 4.0},
        {"octree leaf_size 1", F_OCTREE_LEAF, 1},
        {"octree leaf_size 4096", F_OCTREE_LEAF, 4096},
        {"octree max_depth 1", F_OCTREE_DEPTH, 1},
        {"octree max_depth 64", F_OCTREE_DEPTH, 64},
        {"looseness 1", F_LOOSENESS, 1.0},
        {"looseness 4", F_LOOSENESS, 4.0},
        {"update rebuild", F_UPDATE, BROADPHASE_UPDATE_REBUILD},
        {"update refit", F_UPDATE, BROADPHASE_UPDATE_REFIT},
        {"threads 1", F_THREADS, 1},
        {"threads 1024", F_THREADS, 1024},
        {"leaf_size 0 (the method's own)", F_LEAF, 0},
        {"octree leaf_size 0 (the method's own)", F_OCTREE_LEAF, 0},
        {"leaf_size 1", F_LEAF, 1},
        {"leaf_size 4096", F_LEAF, 4096},
        {"max_depth 1", F_DEPTH, 1},
        {"max_depth 64", F_DEPTH, 64},
        {"rebuild_threshold 1", F_THRESHOLD, 1.0},
        {"rebuild_threshold 1000", F_THRESHOLD, 1000.0},
    };
    for (int dims = 2; dims <= 3; dims++) {
        for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
            TEST_CONTEXT("dims=%d %s", dims, good[i].what);
            broadphase_config c = config_with(dims, good[i]);
            broadphase_world *w = world_with(&c);
            CHECK(w != NULL);
            if (w) CHECK_EQ_INT(broadphase_object_count(w), 0);
            broadphase_destroy(w);
        }
    }
}

TEST(create_null_arguments) {
    broadphase_config c = broadphase_config_default(3);
    broadphase_world *w = NULL;
    CHECK_EQ_INT(broadphase_create(NULL, &w), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK(w == NULL);
    CHECK_EQ_INT(broadphase_create(&c, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_create(NULL, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
    broadphase_destroy(NULL); /* a no-op: must not crash */
}

/* ---- the user's allocator ------------------------------------------------------------------- */

/* An allocator that keeps every live block (pointer, size, alignment) and every fault it sees:
 * a misaligned block, a free of a pointer it did not give, a free with another size than the
 * block was asked for. Thread-safe: a step's workers and the queries allocate side by side. */
enum { TRACK_MAX = 1 << 16 };
typedef struct tracker {
    pthread_mutex_t lock;
    void *ptr[TRACK_MAX];
    size_t size[TRACK_MAX];
    size_t live, allocs, frees, faults, refuse_after; /* refuse_after: fail allocs past this */
} tracker;

static void *track_alloc(size_t size, size_t alignment, void *user) {
    tracker *t = user;
    pthread_mutex_lock(&t->lock);
    void *p = NULL;
    if (t->allocs < t->refuse_after && t->live < TRACK_MAX) {
        p = aligned_alloc(alignment, size);
        if (p) {
            if ((uintptr_t)p % alignment != 0 || alignment < 64 || size % alignment != 0)
                t->faults++;
            t->ptr[t->live] = p;
            t->size[t->live++] = size;
            t->allocs++;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return p;
}

static void track_free(void *ptr, size_t size, void *user) {
    tracker *t = user;
    pthread_mutex_lock(&t->lock);
    size_t i = 0;
    while (i < t->live && t->ptr[i] != ptr) i++;
    if (ptr == NULL || i == t->live || t->size[i] != size) {
        t->faults++;
    } else {
        t->ptr[i] = t->ptr[t->live - 1];
        t->size[i] = t->size[--t->live];
        t->frees++;
        free(ptr);
    }
    pthread_mutex_unlock(&t->lock);
}

/* A world with its own allocator does everything a world does (steps with moves, statics,
 * filters and events; single and batched queries), gives byte for byte the pairs of a world on
 * the C library's allocator, and every allocation it makes is the allocator's: the world's
 * count of allocations equals the allocator's, every block comes back (with its size) when the
 * world is destroyed, and none is misaligned. Every method, 1 and 3 threads. */
TEST(user_allocator_sees_every_allocation) {
    static tracker t; /* large: not on the stack */
    pthread_mutex_init(&t.lock, NULL);
    for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++) {
        for (int threads = 1; threads <= 3; threads += 2) {
            TEST_CONTEXT("method %s threads %d", broadphase_method_name((broadphase_method)m),
                         threads);
            t.live = t.allocs = t.frees = t.faults = 0;
            t.refuse_after = SIZE_MAX;
            scene s;
            REQUIRE(scene_make(&s, SCENE_SHAPES, 3000, 11));
            broadphase_config c = broadphase_config_default(3);
            c.method = (broadphase_method)m;
            c.threads = threads;
            c.pair_events = true;
            broadphase_world *plain = NULL, *mine = NULL;
            REQUIRE(broadphase_create(&c, &plain) == BROADPHASE_OK);
            c.allocator = (broadphase_allocator){track_alloc, track_free, &t};
            REQUIRE(broadphase_create(&c, &mine) == BROADPHASE_OK);
            uint32_t *ids = malloc(s.count * sizeof *ids), *ids2 = malloc(s.count * sizeof *ids);
            CHECK_EQ_INT(scene_add_to_world(&s, plain, ids), BROADPHASE_OK);
            CHECK_EQ_INT(scene_add_to_world(&s, mine, ids2), BROADPHASE_OK);
            for (int f = 0; f < 12; f++) {
                if (f == 4) {
                    CHECK_EQ_INT(broadphase_set_static(plain, s.count / 3, ids, true), 0);
                    CHECK_EQ_INT(broadphase_set_static(mine, s.count / 3, ids2, true), 0);
                }
                broadphase_pairs a, b;
                CHECK_EQ_INT(broadphase_step(plain, &a), BROADPHASE_OK);
                CHECK_EQ_INT(broadphase_step(mine, &b), BROADPHASE_OK);
                CHECK_EQ_INT(a.count, b.count);
                CHECK(a.count == b.count &&
                      (a.count == 0 || memcmp(a.data, b.data, a.count * sizeof *a.data) == 0));
                scene_advance(&s);
                CHECK_EQ_INT(scene_move_in_world(&s, plain, ids), BROADPHASE_OK);
                CHECK_EQ_INT(scene_move_in_world(&s, mine, ids2), BROADPHASE_OK);
            }
            /* Queries on the moved world: a box over everything (past the stack's room for
             * results), and a batch of nearest searches. */
            float lo[3] = {-1e6f, -1e6f, -1e6f}, hi[3] = {1e6f, 1e6f, 1e6f};
            size_t got = 0, want = 0;
            uint32_t *out = malloc(s.count * sizeof *out);
            CHECK_EQ_INT(broadphase_query_box(plain, lo, hi, out, s.count, &want), BROADPHASE_OK);
            CHECK_EQ_INT(broadphase_query_box(mine, lo, hi, out, s.count, &got), BROADPHASE_OK);
            CHECK_EQ_INT(got, want);
            enum { Q = 600, K = 4 };
            static float px[Q], py[Q], pz[Q];
            static uint32_t near_ids[Q * K];
            static size_t near_counts[Q];
            for (size_t q = 0; q < Q; q++) px[q] = py[q] = pz[q] = (float)q;
            broadphase_points pts = {px, py, pz};
            size_t bad = 0;
            CHECK_EQ_INT(
                broadphase_nearest_many(mine, Q, &pts, K, near_ids, NULL, near_counts, &bad),
                BROADPHASE_OK);
            broadphase_stats st;
            CHECK_EQ_INT(broadphase_get_stats(mine, &st), BROADPHASE_OK);
            pthread_mutex_lock(&t.lock);
            CHECK_EQ_INT(st.allocations, t.allocs);
            CHECK(t.live > 0);
            pthread_mutex_unlock(&t.lock);
            broadphase_destroy(mine);
            broadphase_destroy(plain);
            CHECK_EQ_INT(t.live, 0);
            CHECK_EQ_INT(t.frees, t.allocs);
            CHECK_EQ_INT(t.faults, 0);
            free(out);
            free(ids);
            free(ids2);
            scene_free(&s);
        }
    }
    pthread_mutex_destroy(&t.lock);
}

/* An allocator that has nothing to give: create reports out of memory and leaves nothing
 * behind; one that fails later makes the calls that needed it report out of memory. A config
 * with one of alloc and free set is refused. */
TEST(user_allocator_out_of_memory_and_bad_config) {
    static tracker t;
    pthread_mutex_init(&t.lock, NULL);
    broadphase_config c = broadphase_config_default(3);
    c.allocator = (broadphase_allocator){track_alloc, track_free, &t};
    broadphase_world *w = NULL;
    t.live = t.allocs = t.frees = t.faults = 0;
    t.refuse_after = 0;
    CHECK_EQ_INT(broadphase_create(&c, &w), BROADPHASE_ERROR_OUT_OF_MEMORY);
    CHECK(w == NULL);
    CHECK_EQ_INT(t.live, 0);
    /* Room for the world and a little more: adding many objects runs out. */
    t.refuse_after = 2;
    REQUIRE(broadphase_create(&c, &w) == BROADPHASE_OK);
    enum { N = 5000 };
    static float x[N], y[N], z[N], x1[N], y1[N], z1[N];
    for (int i = 0; i < N; i++) {
        x[i] = y[i] = z[i] = (float)i;
        x1[i] = y1[i] = z1[i] = (float)i + 0.5f;
    }
    broadphase_boxes b = {x, y, z, x1, y1, z1};
    static uint32_t ids[N];
    CHECK_EQ_INT(broadphase_add_boxes(w, N, &b, ids), BROADPHASE_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_INT(broadphase_object_count(w), 0);
    broadphase_destroy(w);
    CHECK_EQ_INT(t.live, 0);
    CHECK_EQ_INT(t.faults, 0);
    broadphase_config half = broadphase_config_default(3);
    half.allocator.alloc = track_alloc;
    CHECK_EQ_INT(broadphase_create(&half, &w), BROADPHASE_ERROR_INVALID_CONFIG);
    half.allocator = (broadphase_allocator){NULL, track_free, &t};
    CHECK_EQ_INT(broadphase_create(&half, &w), BROADPHASE_ERROR_INVALID_CONFIG);
    pthread_mutex_destroy(&t.lock);
}

/* ---- status strings and SIMD level ----------------------------------------------------------- */

TEST(status_strings) {
    const int last = BROADPHASE_ERROR_CAPACITY;
    for (int i = 0; i <= last; i++) {
        TEST_CONTEXT("status %d", i);
        const char *s = broadphase_status_string((broadphase_status)i);
        REQUIRE(s != NULL);
        CHECK(s[0] != '\0');
        CHECK(strcmp(s, "unknown status") != 0);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(s, broadphase_status_string((broadphase_status)j)) != 0);
    }
    TEST_CONTEXT("out of range");
    const int outside[] = {last + 1, last + 100, -1};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        const char *s = broadphase_status_string((broadphase_status)outside[i]);
        REQUIRE(s != NULL);
        CHECK(strcmp(s, "unknown status") == 0);
    }
    CHECK(strcmp(broadphase_status_string(BROADPHASE_OK), "ok") == 0);
}

TEST(simd_level) {
    const char *level = broadphase_simd_level();
    REQUIRE(level != NULL);
    CHECK(strcmp(level, "avx2") == 0 || strcmp(level, "baseline") == 0 ||
          strcmp(level, "scalar") == 0);
    CHECK(strcmp(broadphase_simd_level(), level) == 0); /* chosen once */
}

/* ---- ids ---------------------------------------------------------------------------------------
 */

static shape unit_box_at(int i) {
    return box_shape((float)i * 3, 0, 0, (float)i * 3 + 1, 1, 1);
}

/* Adds count boxes (or spheres) in one call and checks the ids handed out. */
static void expect_add_ids(broadphase_world *w, size_t count, bool spheres, const uint32_t *want) {
    shape s[8];
    uint32_t ids[8];
    if (count > 8) abort();
    for (size_t i = 0; i < count; i++)
        s[i] = spheres ? sphere_shape((float)i * 3, 0, 0, 1) : unit_box_at((int)i);
    CHECK_EQ_INT(add_batch(w, s, count, 3, ids), BROADPHASE_OK);
    for (size_t i = 0; i < count; i++) CHECK_EQ_INT(ids[i], want[i]);
}

TEST(ids_sequential_from_empty) {
    for (int spheres = 0; spheres < 2; spheres++) {
        TEST_CONTEXT("%s", spheres ? "spheres" : "boxes");
        broadphase_world *w = world_new(3, BROADPHASE_METHOD_KDTREE, 1);
        REQUIRE(w);
        CHECK(broadphase_last_error_index(w) == SIZE_MAX);
        const uint32_t want[5] = {0, 1, 2, 3, 4};
        expect_add_ids(w, 5, spheres, want);
        CHECK_EQ_INT(broadphase_object_count(w), 5);
        const uint32_t next[1] = {5};
        expect_add_ids(w, 1, !spheres, next);
        broadphase_destroy(w);
    }
}

TEST(ids_lowest_free_first) {
    broadphase_world *w = world_new(3, BROADPHASE_METHOD_KDTREE, 1);
    REQUIRE(w);
    const uint32_t first[5] = {0, 1, 2, 3, 4};
    expect_add_ids(w, 5, false, first);
    const uint32_t gone[2] = {3, 1}; /* removed out of order */
    CHECK_EQ_INT(broadphase_remove(w, 2, gone), BROADPHASE_OK);
    CHECK_EQ_INT(broadphase_object_count(w), 3);
    const uint32_t again[3] = {1, 3, 5};
    expect_add_ids(w, 3, false, again);
    CHECK_EQ_INT(broadphase_object_count(w), 6);
    /* Across single adds, with a step in between, and for spheres. */
    const uint32_t gone2[3] = {4, 0, 2};
    CHECK_EQ_INT(broadphase_remove(w, 3, gone2), BROADPHASE_OK);
    step_ok(w);
    CHECK_EQ_INT(add_one(w, sphere_shape(0, 0, 0, 1), 3), 0);
    CHECK_EQ_INT(add_one(w, unit_box_at(9), 3), 2);
    CHECK_EQ_INT(add_one(w, sphere_shape(9, 9, 9, 1), 3), 4);
    CHECK_EQ_INT(add_one(w, unit_box_at(7), 3), 6);
    CHECK_EQ_INT(broadphase_object_count(w), 7);
    broadphase_destroy(w);
}

TEST(ids_reuse_after_removing_all) {
    for (int with_step = 0; with_step < 2; with_step++) {
        TEST_CONTEXT("step before re-adding: %d", with_step);
        broadphase_world *w = world_new(3, BROADPHASE_METHOD_KDTREE, 2);
        REQUIRE(w);
        const uint32_t want[6] = {0, 1, 2, 3, 4, 5};
        expect_add_ids(w, 6, false, want);
        step_ok(w);
        const uint32_t all[6] = {4, 2, 0, 5, 3, 1};
        CHECK_EQ_INT(broadphase_remove(w, 6, all), BROADPHASE_OK);
        CHECK_EQ_INT(broadphase_object_count(w), 0);
        if (with_step) CHECK_EQ_INT(step_ok(w).count, 0);
        expect_add_ids(w, 6, true, want);
        CHECK_EQ_INT(broadphase_object_count(w), 6);
        CHECK_EQ_INT(add_one(w, unit_box_at(20), 3), 6);
        broadphase_destroy(w);
    }
}

TEST(object_count_tracks_adds_and_removes) {
    broadphase_world *w = world_new(3, BROADPHASE_METHOD_BRUTE_FORCE, 1);
    REQUIRE(w);
    CHECK_EQ_INT(broadphase_object_count(w), 0);
    const uint32_t want[4] = {0, 1, 2, 3};
    expect_add_ids(w, 4, false, want);
    CHECK_EQ_INT(broadphase_object_count(w), 4);
    expect_add_ids(w, 2, true, (const uint32_t[]){4, 5});
    CHECK_EQ_INT(broadphase_object_count(w), 6);
    remove_one(w, 2);
    CHECK_EQ_INT(broadphase_object_count(w), 5);
    move_one(w, 0, sphere_shape(1, 1, 1, 1), 3);
    CHECK_EQ_INT(broadphase_object_count(w), 5);
    step_ok(w);
    CHECK_EQ_INT(broadphase_object_count(w), 5);
    const uint32_t rest[5] = {5, 0, 1, 3, 4};
    CHECK_EQ_INT(broadphase_remove(w, 5, rest), BROADPHASE_OK);
    CHECK_EQ_INT(broadphase_object_count(w), 0);
    broadphase_destroy(w);
}

TEST(zero_count_calls_change_nothing) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    for (int op = 0; op < OP_COUNT; op++) {
        TEST_CONTEXT("%s count 0", OP_NAMES[op]);
        columns c;
        uint32_t ids[BATCH];
        fixture_batch(&c, ids, op_spheres(op));
        prime_error_index(&fx);
        expect_unchanged(&fx, run_op(fx.w, op, 0, &c, ids, 0), BROADPHASE_OK, SIZE_MAX);
        columns_free(&c);
    }
    broadphase_destroy(fx.w);
}

/* ---- bad input: every failing call leaves the world as it was -------------------------------- */

TEST(bad_input_null_pointers) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    for (int op = 0; op < OP_COUNT; op++) {
        bool spheres = op_spheres(op);
        if (op != OP_REMOVE) {
            TEST_CONTEXT("%s NULL struct", OP_NAMES[op]);
            expect_null_rejected(&fx, op, -1, NULL_STRUCT);
            for (int k = 0; k < (spheres ? 4 : 6); k++) {
                TEST_CONTEXT("%s NULL %s", OP_NAMES[op],
                             spheres ? SPHERE_COLUMNS[k] : BOX_COLUMNS[k]);
                expect_null_rejected(&fx, op, k, 0);
            }
        }
        TEST_CONTEXT("%s NULL ids", OP_NAMES[op]);
        expect_null_rejected(&fx, op, -1, NULL_IDS);
    }
    /* A NULL world is refused by every call. */
    TEST_CONTEXT("NULL world");
    columns c;
    uint32_t ids[BATCH];
    fixture_batch(&c, ids, false);
    for (int op = 0; op < OP_COUNT; op++)
        CHECK_EQ_INT(run_op(NULL, op, BATCH, &c, ids, 0), BROADPHASE_ERROR_INVALID_ARGUMENT);
    broadphase_pairs p;
    CHECK_EQ_INT(broadphase_step(NULL, &p), BROADPHASE_ERROR_INVALID_ARGUMENT);
    columns_free(&c);
    broadphase_destroy(fx.w);
}

static const float NONFINITE_VALUES[3] = {NAN, INFINITY, -INFINITY};

TEST(bad_input_nonfinite_boxes) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    const int ops[2] = {OP_ADD_BOXES, OP_MOVE_BOXES};
    for (int o = 0; o < 2; o++) {
        for (int k = 0; k < 6; k++) {
            for (int v = 0; v < 3; v++) {
                TEST_CONTEXT("%s %s[%d] = %g", OP_NAMES[ops[o]], BOX_COLUMNS[k], BAD,
                             (double)NONFINITE_VALUES[v]);
                expect_value_rejected(&fx, ops[o], k, NONFINITE_VALUES[v],
                                      BROADPHASE_ERROR_NONFINITE);
            }
        }
    }
    broadphase_destroy(fx.w);
}

TEST(bad_input_nonfinite_spheres) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    const int ops[2] = {OP_ADD_SPHERES, OP_MOVE_SPHERES};
    for (int o = 0; o < 2; o++) {
        for (int k = 0; k < 4; k++) {
            for (int v = 0; v < 3; v++) {
                TEST_CONTEXT("%s %s[%d] = %g", OP_NAMES[ops[o]], SPHERE_COLUMNS[k], BAD,
                             (double)NONFINITE_VALUES[v]);
                expect_value_rejected(&fx, ops[o], k, NONFINITE_VALUES[v],
                                      BROADPHASE_ERROR_NONFINITE);
            }
        }
    }
    broadphase_destroy(fx.w);
}

/* A batch accepted as a whole: the fixture's world takes it (count grows by BATCH for adds). */
static void expect_value_accepted(int op, int column, float value) {
    fixture fx;
    if (!fixture_init(&fx)) return;
    columns c;
    uint32_t ids[BATCH];
    fixture_batch(&c, ids, op_spheres(op));
    c.col[column][BAD] = value;
    prime_error_index(&fx);
    CHECK_EQ_INT(run_op(fx.w, op, BATCH, &c, ids, 0), BROADPHASE_OK);
    CHECK(broadphase_last_error_index(fx.w) == SIZE_MAX);
    bool add = op == OP_ADD_BOXES || op == OP_ADD_SPHERES;
    CHECK_EQ_INT(broadphase_object_count(fx.w), fx.objects + (add ? BATCH : 0));
    step_ok(fx.w);
    columns_free(&c);
    broadphase_destroy(fx.w);
}

TEST(bad_input_inverted_box) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    const int ops[2] = {OP_ADD_BOXES, OP_MOVE_BOXES};
    for (int o = 0; o < 2; o++) {
        for (int k = 0; k < 3; k++) {
            /* fixture_batch's max on axis k at BAD; min set just above it. */
            columns c;
            uint32_t ids[BATCH];
            fixture_batch(&c, ids, false);
            float max = c.col[3 + k][BAD];
            columns_free(&c);
            TEST_CONTEXT("%s min > max on axis %d", OP_NAMES[ops[o]], k);
            expect_value_rejected(&fx, ops[o], k, nextafterf(max, INFINITY),
                                  BROADPHASE_ERROR_INVERTED_BOX);
            TEST_CONTEXT("%s min == max on axis %d", OP_NAMES[ops[o]], k);
            expect_value_accepted(ops[o], k, max);
        }
    }
    broadphase_destroy(fx.w);
}

TEST(bad_input_negative_radius) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    const float negative[4] = {-1.0f, -FLT_MIN, -0x1p-149f, -FLT_MAX};
    const int ops[2] = {OP_ADD_SPHERES, OP_MOVE_SPHERES};
    for (int o = 0; o < 2; o++) {
        for (int v = 0; v < 4; v++) {
            TEST_CONTEXT("%s radius[%d] = %g", OP_NAMES[ops[o]], BAD, (double)negative[v]);
            expect_value_rejected(&fx, ops[o], 3, negative[v], BROADPHASE_ERROR_NEGATIVE_RADIUS);
        }
        TEST_CONTEXT("%s radius 0", OP_NAMES[ops[o]]);
        expect_value_accepted(ops[o], 3, 0.0f);
        TEST_CONTEXT("%s radius -0", OP_NAMES[ops[o]]);
        expect_value_accepted(ops[o], 3, -0.0f);
    }
    broadphase_destroy(fx.w);
}

TEST(bad_input_unknown_id) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    /* Removed; never issued (the next fresh id); far beyond every issued id; the largest. */
    const uint32_t unknown[5] = {FREE_ID, CHAIN, 1000, UINT32_MAX - 1, UINT32_MAX};
    const int ops[3] = {OP_MOVE_BOXES, OP_MOVE_SPHERES, OP_REMOVE};
    for (int o = 0; o < 3; o++) {
        for (int u = 0; u < 5; u++) {
            TEST_CONTEXT("%s ids[%d] = %u", OP_NAMES[ops[o]], BAD, unknown[u]);
            expect_id_rejected(&fx, ops[o], unknown[u], BROADPHASE_ERROR_UNKNOWN_ID);
        }
    }
    broadphase_destroy(fx.w);
}

/* Batches large enough to be checked in parallel chunks (the world cuts one of 32768 or more
 * into 256, here of 586 ids each): an id repeated across chunks, or within a later chunk, or
 * after an unknown one, is named at its first bad position whatever the thread count, and
 * nothing changes. Batches whose ids rise are checked without stamps: a repeat that leaves the
 * rest rising (next to itself, within a chunk or across a chunk's end) and an unknown id among
 * rising ones are caught too; rising ids with gaps and falling ids go through. */
TEST(bad_input_large_batches) {
    enum { N = 150000 };
    float *col = malloc(6 * N * sizeof *col);
    uint32_t *ids = malloc(N * sizeof *ids), *batch = malloc(N * sizeof *batch);
    REQUIRE(col && ids && batch);
    for (size_t i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++) {
            col[k * N + i] = (float)i * 4.0f + (float)k;
            col[(3 + k) * N + i] = (float)i * 4.0f + (float)k + 5.0f; /* meets the next */
        }
    }
    broadphase_boxes b = {col, col + N, col + 2 * N, col + 3 * N, col + 4 * N, col + 5 * N};
    static const int threads[] = {1, 4};
    for (int t = 0; t < 2; t++) {
        broadphase_config cfg = broadphase_config_default(3);
        cfg.threads = threads[t];
        broadphase_world *w = NULL;
        REQUIRE(broadphase_create(&cfg, &w) == BROADPHASE_OK);
        REQUIRE(broadphase_add_boxes(w, N, &b, ids) == BROADPHASE_OK);
        broadphase_pairs before;
        REQUIRE(broadphase_step(w, &before) == BROADPHASE_OK);
        size_t pairs_before = before.count;
        CHECK_EQ_INT(pairs_before, N - 1);
        /* {position, what it holds, expected status, expected index} */
        static const struct {
            size_t at, value, at2, value2;
            broadphase_status want;
            size_t bad;
        } cases[] = {
            {140000, 10, 0, 0, BROADPHASE_ERROR_INVALID_ARGUMENT, 140000},     /* across chunks */
            {100001, 100000, 0, 0, BROADPHASE_ERROR_INVALID_ARGUMENT, 100001}, /* one chunk */
            {120000, 5, 90000, 7, BROADPHASE_ERROR_INVALID_ARGUMENT, 90000},   /* two repeats */
            {130000, 3, 110000, N + 9, BROADPHASE_ERROR_UNKNOWN_ID, 110000},   /* unknown first */
            {70000, N + 9, 140000, 1, BROADPHASE_ERROR_UNKNOWN_ID, 70000},     /* before a repeat */
            {58600, 58599, 0, 0, BROADPHASE_ERROR_INVALID_ARGUMENT, 58600}, /* at a chunk's end */
            {100000, 100001, 0, 0, BROADPHASE_ERROR_INVALID_ARGUMENT, 100001}, /* in a chunk */
            {N - 1, N + 5, 0, 0, BROADPHASE_ERROR_UNKNOWN_ID, N - 1},          /* still rising */
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            TEST_CONTEXT("threads %d case %zu", threads[t], c);
            memcpy(batch, ids, N * sizeof *batch);
            batch[cases[c].at] = (uint32_t)cases[c].value;
            if (cases[c].at2) batch[cases[c].at2] = (uint32_t)cases[c].value2;
            CHECK_EQ_INT(broadphase_move_boxes(w, N, batch, &b), cases[c].want);
            CHECK_EQ_INT(broadphase_last_error_index(w), cases[c].bad);
            CHECK_EQ_INT(broadphase_remove(w, N, batch), cases[c].want);
            CHECK_EQ_INT(broadphase_last_error_index(w), cases[c].bad);
            CHECK_EQ_INT(broadphase_object_count(w), N);
        }
        /* Every other id (rising with gaps), then all of them falling, go through. */
        for (size_t i = 0; i < N / 2; i++) batch[i] = ids[2 * i];
        CHECK_EQ_INT(broadphase_move_boxes(w, N / 2, batch, &b), BROADPHASE_OK);
        for (size_t i = 0; i < N; i++) batch[i] = ids[N - 1 - i];
        CHECK_EQ_INT(broadphase_move_boxes(w, N, batch, &b), BROADPHASE_OK);
        /* The same batch without faults goes through, and the world is as it was. */
        CHECK_EQ_INT(broadphase_move_boxes(w, N, ids, &b), BROADPHASE_OK);
        broadphase_pairs after;
        CHECK_EQ_INT(broadphase_step(w, &after), BROADPHASE_OK);
        CHECK_EQ_INT(after.count, pairs_before);
        broadphase_destroy(w);
    }
    free(col);
    free(ids);
    free(batch);
}

/* config.max_objects: an add that would pass it is refused whole (CAPACITY, no element named,
 * nothing changed); removing makes room again, and ids stay below the cap. Past the id space the
 * config itself is invalid. */
TEST(object_cap) {
    for (int spheres = 0; spheres < 2; spheres++) {
        broadphase_config c = broadphase_config_default(3);
        c.max_objects = 10;
        broadphase_world *w = NULL;
        REQUIRE(broadphase_create(&c, &w) == BROADPHASE_OK);
        float zero[16] = {0}, one[16];
        for (int i = 0; i < 16; i++) one[i] = 1.0f;
        broadphase_boxes b = {zero, zero, zero, one, one, one};
        broadphase_spheres sp = {zero, zero, zero, one};
        uint32_t ids[16];
#define ADD(n)                                                                                     \
    (spheres ? broadphase_add_spheres(w, (n), &sp, ids) : broadphase_add_boxes(w, (n), &b, ids))
        TEST_CONTEXT("%s", spheres ? "spheres" : "boxes");
        CHECK_EQ_INT(ADD(11), BROADPHASE_ERROR_CAPACITY);
        CHECK_EQ_INT(broadphase_last_error_index(w), SIZE_MAX);
        CHECK_EQ_INT(broadphase_object_count(w), 0);
        CHECK_EQ_INT(ADD(8), BROADPHASE_OK);
        CHECK_EQ_INT(ADD(3), BROADPHASE_ERROR_CAPACITY);
        CHECK_EQ_INT(ADD(SIZE_MAX), BROADPHASE_ERROR_CAPACITY); /* the arrays are not read */
        CHECK_EQ_INT(broadphase_object_count(w), 8);
        CHECK_EQ_INT(ADD(2), BROADPHASE_OK);
        CHECK_EQ_INT(ADD(1), BROADPHASE_ERROR_CAPACITY);
        uint32_t gone[2] = {3, 7};
        CHECK_EQ_INT(broadphase_remove(w, 2, gone), BROADPHASE_OK);
        CHECK_EQ_INT(ADD(2), BROADPHASE_OK);
        CHECK(ids[0] == 3 && ids[1] == 7);
        broadphase_pairs p;
        CHECK_EQ_INT(broadphase_step(w, &p), BROADPHASE_OK);
        CHECK_EQ_INT(p.count, 45); /* ten objects all at the same place */
        CHECK_EQ_INT(ADD(1), BROADPHASE_ERROR_CAPACITY);
        CHECK_EQ_INT(broadphase_object_count(w), 10);
#undef ADD
        broadphase_destroy(w);
    }
    TEST_CONTEXT("config");
    broadphase_config c = broadphase_config_default(2);
    c.max_objects = BROADPHASE_MAX_OBJECTS;
    broadphase_world *w = NULL;
    CHECK_EQ_INT(broadphase_create(&c, &w), BROADPHASE_OK);
    broadphase_destroy(w);
    w = NULL;
    c.max_objects = BROADPHASE_MAX_OBJECTS + 1;
    CHECK_EQ_INT(broadphase_create(&c, &w), BROADPHASE_ERROR_INVALID_CONFIG);
    CHECK(w == NULL);
    c.max_objects = SIZE_MAX;
    CHECK_EQ_INT(broadphase_create(&c, &w), BROADPHASE_ERROR_INVALID_CONFIG);
}

/* A batch longer than the live objects cannot hold distinct live ids: refused before any of its
 * arrays is read (so SIZE_MAX with short arrays is safe), naming no element; the same for a
 * query batch past BROADPHASE_MAX_BATCH or a nearest batch whose count * k cannot fit. */
TEST(overlong_batches_refused_unread) {
    broadphase_config cfg = broadphase_config_default(3);
    cfg.threads = 2;
    broadphase_world *w = NULL;
    REQUIRE(broadphase_create(&cfg, &w) == BROADPHASE_OK);
    float zero[4] = {0}, one[4] = {1, 1, 1, 1};
    broadphase_boxes b = {zero, zero, zero, one, one, one};
    broadphase_spheres sp = {zero, zero, zero, one};
    uint32_t ids[4];
    REQUIRE(broadphase_add_boxes(w, 3, &b, ids) == BROADPHASE_OK);
    broadphase_filter f[4] = {{1, 1, 0}};
    const size_t counts[] = {4, 1000, SIZE_MAX};
    for (size_t i = 0; i < 3; i++) {
        size_t n = counts[i];
        TEST_CONTEXT("count %zu", n);
        CHECK_EQ_INT(broadphase_move_boxes(w, n, ids, &b), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_last_error_index(w), SIZE_MAX);
        CHECK_EQ_INT(broadphase_move_spheres(w, n, ids, &sp), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_remove(w, n, ids), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_set_filters(w, n, ids, f), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_set_static(w, n, ids, true), BROADPHASE_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(broadphase_last_error_index(w), SIZE_MAX);
        CHECK_EQ_INT(broadphase_object_count(w), 3);
    }
    CHECK_EQ_INT(broadphase_remove(w, 3, ids), BROADPHASE_OK); /* exactly the live ones */
    size_t offsets[4];
    uint32_t out[4];
    size_t nc[4];
    broadphase_id_rows rows = {offsets, out, 4, 0, 0};
    broadphase_ray_hit hits[4];
    broadphase_points pts = {zero, zero, zero};
    CHECK_EQ_INT(broadphase_query_boxes(w, SIZE_MAX, &b, &rows), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_query_spheres(w, BROADPHASE_MAX_BATCH + 1, &sp, &rows),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    broadphase_rays rays = {zero, zero, zero, one, one, one, one};
    CHECK_EQ_INT(broadphase_raycasts_closest(w, SIZE_MAX, &rays, hits, NULL),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_nearest_many(w, SIZE_MAX, &pts, 1, out, NULL, nc, NULL),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_nearest_many(w, 2, &pts, SIZE_MAX / 4, out, NULL, nc, NULL),
                 BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_nearest_many(w, 2, &pts, 2, out, NULL, nc, NULL), BROADPHASE_OK);
    broadphase_destroy(w);
}

TEST(bad_input_repeated_id) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    const int ops[3] = {OP_MOVE_BOXES, OP_MOVE_SPHERES, OP_REMOVE};
    for (int o = 0; o < 3; o++) {
        /* ids[BAD] repeats an earlier id, far before it or right before it. */
        const uint32_t repeat[2] = {2, BAD - 1};
        for (int r = 0; r < 2; r++) {
            TEST_CONTEXT("%s ids[%d] = ids[%u]", OP_NAMES[ops[o]], BAD, repeat[r]);
            expect_id_rejected(&fx, ops[o], repeat[r], BROADPHASE_ERROR_INVALID_ARGUMENT);
        }
    }
    /* The same ids in consecutive batches are not repeats. */
    TEST_CONTEXT("consecutive batches");
    columns c;
    uint32_t ids[BATCH];
    fixture_batch(&c, ids, false);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(run_op(fx.w, OP_MOVE_BOXES, BATCH, &c, ids, 0), BROADPHASE_OK);
    CHECK_EQ_INT(run_op(fx.w, OP_REMOVE, BATCH, &c, ids, 0), BROADPHASE_OK);
    CHECK_EQ_INT(broadphase_object_count(fx.w), 1);
    columns_free(&c);
    broadphase_destroy(fx.w);
}

/* Several bad elements in one batch: the first one is named, whatever check finds it. A case
 * edits a valid fixture batch: up to two column values and up to two ids. */
typedef struct batch_edit {
    int at;      /* index in the batch; -1: no edit */
    int column;  /* value edits: the column */
    float value; /* value edits: the new value; id edits: the new id */
} batch_edit;

typedef struct mixed_case {
    const char *what;
    int op;
    batch_edit values[2], ids[2];
    broadphase_status want;
    size_t index;
} mixed_case;

#define NO_EDIT                                                                                    \
    { -1, 0, 0 }

static void expect_mixed_cases(const mixed_case *cases, size_t count) {
    fixture fx;
    if (!fixture_init(&fx)) return;
    for (size_t i = 0; i < count; i++) {
        const mixed_case *m = &cases[i];
        TEST_CONTEXT("%s", m->what);
        columns c;
        uint32_t ids[BATCH];
        fixture_batch(&c, ids, op_spheres(m->op));
        for (int e = 0; e < 2; e++) {
            if (m->values[e].at >= 0)
                c.col[m->values[e].column][m->values[e].at] = m->values[e].value;
            if (m->ids[e].at >= 0) ids[m->ids[e].at] = (uint32_t)m->ids[e].value;
        }
        expect_unchanged(&fx, run_op(fx.w, m->op, BATCH, &c, ids, 0), m->want, m->index);
        columns_free(&c);
    }
    broadphase_destroy(fx.w);
}

TEST(bad_input_first_bad_element_named) {
    static const mixed_case cases[] = {
        {"add_boxes: inverted at 3, nan at 7",
         OP_ADD_BOXES,
         {{3, 0, 5000}, {BAD, 4, NAN}},
         {NO_EDIT, NO_EDIT},
         BROADPHASE_ERROR_INVERTED_BOX,
         3},
        {"add_boxes: nan at 7, inverted at 9",
         OP_ADD_BOXES,
         {{BAD, 1, NAN}, {9, 0, 5000}},
         {NO_EDIT, NO_EDIT},
         BROADPHASE_ERROR_NONFINITE,
         BAD},
        {"add_spheres: negative radius at 4, inf at 6",
         OP_ADD_SPHERES,
         {{4, 3, -1}, {6, 0, INFINITY}},
         {NO_EDIT, NO_EDIT},
         BROADPHASE_ERROR_NEGATIVE_RADIUS,
         4},
        {"remove: unknown id at 3, repeated id at 7",
         OP_REMOVE,
         {NO_EDIT, NO_EDIT},
         {{3, 0, 1000}, {BAD, 0, 0}},
         BROADPHASE_ERROR_UNKNOWN_ID,
         3},
        {"move_boxes: unknown id at 3, nan at 7",
         OP_MOVE_BOXES,
         {{BAD, 0, NAN}, NO_EDIT},
         {{3, 0, 1000}, NO_EDIT},
         BROADPHASE_ERROR_UNKNOWN_ID,
         3},
    };
    expect_mixed_cases(cases, sizeof cases / sizeof cases[0]);
}

/* A move batch whose bad value comes before its bad id: the value is the first bad element. */
TEST(bad_input_move_names_first_bad_element) {
    static const mixed_case cases[] = {
        {"move_boxes: nan at 5, unknown id at 7",
         OP_MOVE_BOXES,
         {{5, 2, NAN}, NO_EDIT},
         {{BAD, 0, 1000}, NO_EDIT},
         BROADPHASE_ERROR_NONFINITE,
         5},
        {"move_spheres: negative radius at 5, repeated id at 7",
         OP_MOVE_SPHERES,
         {{5, 3, -1}, NO_EDIT},
         {{BAD, 0, 2}, NO_EDIT},
         BROADPHASE_ERROR_NEGATIVE_RADIUS,
         5},
    };
    expect_mixed_cases(cases, sizeof cases / sizeof cases[0]);
}

TEST(last_error_index_cleared_on_success) {
    fixture fx;
    REQUIRE(fixture_init(&fx));
    CHECK_EQ_INT(broadphase_last_error_index(NULL), SIZE_MAX);
    for (int op = 0; op < OP_COUNT; op++) {
        TEST_CONTEXT("%s succeeds after a failure", OP_NAMES[op]);
        columns c;
        uint32_t ids[BATCH];
        fixture_batch(&c, ids, op_spheres(op));
        prime_error_index(&fx);
        CHECK_EQ_INT(run_op(fx.w, op, op == OP_REMOVE ? 1 : BATCH, &c, ids, 0), BROADPHASE_OK);
        CHECK(broadphase_last_error_index(fx.w) == SIZE_MAX);
        columns_free(&c);
    }
    TEST_CONTEXT("step succeeds after a failure");
    prime_error_index(&fx);
    step_ok(fx.w);
    CHECK(broadphase_last_error_index(fx.w) == SIZE_MAX);
    broadphase_destroy(fx.w);
}

/* ---- 2D ----------------------------------------------------------------------------------------
 */

TEST(two_d_z_arrays_optional) {
    for (int r = 0; r < RUN_COUNT; r++) {
        TEST_CONTEXT("2D %s threads=%d looseness=%g", broadphase_method_name(RUNS[r].method),
                     RUNS[r].threads, (double)RUNS[r].looseness);
        broadphase_world *w = run_world(2, &RUNS[r]);
        REQUIRE(w);
        /* 0, 1 touch; sphere 2 is off box 0's corner but reaches box 1's top face. */
        CHECK_EQ_INT(add_one(w, box_shape(0, 0, 0, 1, 1, 0), 2), 0);
        CHECK_EQ_INT(add_one(w, box_shape(1, 0, 0, 2, 1, 0), 2), 1);
        CHECK_EQ_INT(add_one(w, sphere_shape(1.6f, 1.6f, 0, 0.8f), 2), 2);
        /* z arrays full of NaN are ignored in 2D, for boxes and spheres. */
        float nan_z = NAN, x = 5, y = 5, r5 = 1, hi = 6;
        broadphase_spheres s = {&x, &y, &nan_z, &r5};
        uint32_t id = 0;
        CHECK_EQ_INT(broadphase_add_spheres(w, 1, &s, &id), BROADPHASE_OK);
        CHECK_EQ_INT(id, 3);
        broadphase_boxes b = {&x, &y, &nan_z, &hi, &hi, &nan_z};
        CHECK_EQ_INT(broadphase_add_boxes(w, 1, &b, &id), BROADPHASE_OK);
        CHECK_EQ_INT(id, 4);
        const broadphase_pair want[3] = {{0, 1}, {1, 2}, {3, 4}};
        check_pairs(step_ok(w), want, 3);
        /* Moves with NULL z arrays. */
        move_one(w, 3, sphere_shape(10, 10, 0, 1), 2);
        move_one(w, 0, box_shape(0, 0, 0, 0.5f, 1, 0), 2);
        const broadphase_pair after[1] = {{1, 2}};
        check_pairs(step_ok(w), after, 1);
        broadphase_destroy(w);
    }
    /* The same NULL z arrays are refused in 3D (covered per column in bad_input_null_pointers). */
    fixture fx;
    REQUIRE(fixture_init(&fx));
    TEST_CONTEXT("3D add_boxes NULL z");
    expect_null_rejected(&fx, OP_ADD_BOXES, 2, 0);
    TEST_CONTEXT("3D add_spheres NULL z");
    expect_null_rejected(&fx, OP_ADD_SPHERES, 2, 0);
    broadphase_destroy(fx.w);
}

/* ---- overlap semantics, with every method and thread count ----------------------------------- */

TEST(overlap_touching_boxes) {
    for (int k = 0; k < 3; k++) {
        float lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
        shape a = box_shape(0, 0, 0, 1, 1, 1);
        lo[k] = 1;
        hi[k] = 2;
        shape b = box_shape(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]);
        expect_two(3, a, b, true, "touching faces");
        lo[k] = nextafterf(1.0f, 2.0f);
        shape c = box_shape(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]);
        expect_two(3, a, c, false, "separated by one float");
    }
    /* Touching edge and corner; touching across signed zero. */
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), box_shape(1, 1, 1, 2, 2, 2), true, "corner");
    expect_two(3, box_shape(-1, 0, 0, -0.0f, 1, 1), box_shape(0, 0, 0, 1, 1, 1), true,
               "-0 touches +0");
    expect_two(2, box_shape(0, 0, 0, 1, 1, 0), box_shape(nextafterf(1, 2), 0, 0, 2, 1, 0), false,
               "2D separated by one float");
}

TEST(overlap_point_boxes) {
    shape p = box_shape(0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f);
    expect_two(3, p, p, true, "two points at the same place");
    expect_two(3, p, box_shape(0.5f, 0.5f, nextafterf(0.5f, 1), 0.5f, 0.5f, 1), false,
               "points one float apart");
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), box_shape(1, 1, 1, 1, 1, 1), true,
               "point on a box corner");
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), p, true, "point inside a box");
}

TEST(overlap_sphere_sphere) {
    for (int k = 0; k < 3; k++) {
        float c[3] = {0, 0, 0};
        c[k] = 2;
        shape a = sphere_shape(0, 0, 0, 1);
        expect_two(3, a, sphere_shape(c[0], c[1], c[2], 1), true, "touching spheres");
        expect_two(3, a, sphere_shape(c[0], c[1], c[2], 0.99f), false, "radii 1 and 0.99");
    }
    shape s = sphere_shape(0.25f, -3, 7, 0.5f);
    expect_two(3, s, s, true, "identical spheres");
    shape z = sphere_shape(1, 1, 1, 0);
    expect_two(3, z, sphere_shape(1, 1, 1, -0.0f), true, "radius 0 and -0 at the same place");
    expect_two(3, sphere_shape(1e-30f, 0, 0, 0), sphere_shape(2e-30f, 0, 0, 0), false,
               "radius-0 spheres at 1e-30 and 2e-30");
    /* Tiny spheres: float squares would underflow to 0 and call everything touching. */
    const float r = 1e-30f;
    expect_two(3, sphere_shape(0, 0, 0, r), sphere_shape(2 * r, 0, 0, r), true,
               "tiny spheres touching");
    expect_two(3, sphere_shape(0, 0, 0, r), sphere_shape(2.001f * r, 0, 0, r), false,
               "tiny spheres apart, bounding boxes overlapping");
    expect_two(2, sphere_shape(0, 0, 0, 1), sphere_shape(0, 2, 0, 1), true, "2D touching spheres");
    expect_two(2, sphere_shape(0, 0, 0, 1), sphere_shape(1.5f, 1.5f, 0, 1), false,
               "2D diagonal, bounding boxes overlapping");
}

TEST(overlap_box_sphere_face) {
    /* The centre exactly r from each of the six faces of [0,1]^3 touches; a float less reach
     * does not. */
    const float r = 0.5f;
    for (int k = 0; k < 3; k++) {
        for (int side = 0; side < 2; side++) {
            float c[3] = {0.5f, 0.5f, 0.5f};
            c[k] = side ? 1.0f + r : -r;
            shape box = box_shape(0, 0, 0, 1, 1, 1);
            expect_two(3, box, sphere_shape(c[0], c[1], c[2], r), true, "sphere touches a face");
            expect_two(3, box, sphere_shape(c[0], c[1], c[2], nextafterf(r, 0)), false,
                       "sphere one float short of a face");
        }
    }
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), sphere_shape(0.5f, 0.5f, 0.5f, 0), true,
               "radius-0 sphere inside a box");
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), sphere_shape(1, 1, 1, 0), true,
               "radius-0 sphere on a box corner");
}

TEST(overlap_box_sphere_corner) {
    /* Bounding boxes overlap, but the corner is sqrt(3 * 0.64) = 1.386 > 1 away. */
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), sphere_shape(1.8f, 1.8f, 1.8f, 1), false,
               "sphere off a box corner");
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), sphere_shape(1.5f, 1.5f, 1.5f, 1), true,
               "sphere reaching a box corner (0.866 < 1)");
    /* The corner (1, 1, 1) at distance exactly 3 from (3, 3, 2): 4 + 4 + 1 = 9. */
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), sphere_shape(3, 3, 2, 3), true,
               "sphere touching a box corner");
    expect_two(3, box_shape(0, 0, 0, 1, 1, 1), sphere_shape(3, 3, 2, nextafterf(3, 0)), false,
               "sphere one float short of a box corner");
    expect_two(2, box_shape(0, 0, 0, 1, 1, 0), sphere_shape(1.6f, 1.6f, 0, 0.8f), false,
               "2D sphere off a box corner");
}

TEST(overlap_identical_and_extreme) {
    shape b = box_shape(-2, -2, -2, 3, 3, 3);
    expect_two(3, b, b, true, "identical boxes");
    expect_two(3, box_shape(FLT_MAX / 2, 0, 0, FLT_MAX, 1, 1),
               box_shape(FLT_MAX, 0, 0, FLT_MAX, 1, 1), true, "touching at FLT_MAX");
    expect_two(3, sphere_shape(-FLT_MAX, 0, 0, FLT_MAX), sphere_shape(FLT_MAX, 0, 0, FLT_MAX), true,
               "huge spheres touching at 0");
    expect_two(3, sphere_shape(-FLT_MAX, 0, 0, FLT_MAX),
               sphere_shape(FLT_MAX, 0, 0, nextafterf(FLT_MAX, 0)), false,
               "huge spheres one float apart");
    expect_two(3, box_shape(-FLT_MAX, -FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX),
               sphere_shape(12345, -6789, 0.5f, 0), true, "everything box");
}

TEST(overlap_many_pairs_sorted_once) {
    /* Ten identical boxes and ten spheres at one point: every pair, each once, sorted. */
    shape s[20];
    for (int i = 0; i < 20; i++)
        s[i] = i % 2 ? sphere_shape(1, 1, 1, 0.5f) : box_shape(0, 0, 0, 2, 2, 2);
    pair_list want = {0};
    oracle_pairs(s, NULL, 20, 3, &want);
    CHECK_EQ_INT(want.count, 190);
    expect_scene(3, s, 20, want.data, want.count, "all overlapping");
    free(want.data);
}

/* ---- random scenes against the oracle -------------------------------------------------------- */

static uint32_t rng_below(uint64_t *state, uint32_t n) {
    return (uint32_t)(scene_splitmix64(state) % n);
}

/* Coordinates and sizes on a grid of 1/4, so that ties (touching) are common and every oracle
 * computation is exact. */
static shape random_shape(uint64_t *rng, int dims, bool sphere, uint32_t extent) {
    shape s = {.sphere = sphere};
    for (int k = 0; k < dims; k++) {
        float x = (float)rng_below(rng, 4 * extent) * 0.25f;
        s.c[k] = x;
        s.lo[k] = x;
        s.hi[k] = x + (float)rng_below(rng, 9) * 0.25f;
    }
    s.r = sphere ? (float)rng_below(rng, 7) * 0.25f : 0.0f;
    return s;
}

/* The world and the test's copy of it, indexed by id. */
enum { MODEL_MAX = 1024 };
typedef struct model {
    shape s[MODEL_MAX];
    bool live[MODEL_MAX];
    uint32_t end; /* every id handed out is below end */
    size_t live_count;
} model;

static uint32_t model_next_id(model *m) {
    for (uint32_t i = 0; i < m->end; i++)
        if (!m->live[i]) return i;
    return m->end;
}

/* Adds n random shapes of one kind; the ids must be the lowest free ones, in order. */
static void model_add(model *m, broadphase_world *w, uint64_t *rng, size_t n, int dims,
                      bool sphere) {
    shape s[64] = {{0}};
    uint32_t ids[64];
    if (n > 64 || m->live_count + n > MODEL_MAX) return;
    for (size_t i = 0; i < n; i++) s[i] = random_shape(rng, dims, sphere, 12);
    CHECK_EQ_INT(add_batch(w, s, n, dims, ids), BROADPHASE_OK);
    for (size_t i = 0; i < n; i++) {
        uint32_t want = model_next_id(m);
        CHECK_EQ_INT(ids[i], want);
        m->s[want] = s[i];
        m->live[want] = true;
        if (want == m->end) m->end++;
        m->live_count++;
    }
}

/* Picks up to n distinct live ids at random. */
static size_t model_pick(const model *m, uint64_t *rng, size_t n, uint32_t *out) {
    uint32_t live[MODEL_MAX];
    size_t count = 0;
    for (uint32_t i = 0; i < m->end; i++)
        if (m->live[i]) live[count++] = i;
    if (n > count) n = count;
    for (size_t i = 0; i < n; i++) {
        size_t j = i + rng_below(rng, (uint32_t)(count - i));
        uint32_t t = live[i];
        live[i] = live[j];
        live[j] = t;
        out[i] = live[i];
    }
    return n;
}

/* Moves some objects: nearby (a small shift) or anywhere, keeping or changing their kind. */
static void model_move(model *m, broadphase_world *w, uint64_t *rng, size_t n, int dims,
                       bool sphere) {
    uint32_t ids[64] = {0};
    shape s[64] = {{0}};
    n = model_pick(m, rng, n > 64 ? 64 : n, ids);
    for (size_t i = 0; i < n; i++) {
        if (rng_below(rng, 2) && m->s[ids[i]].sphere == sphere) {
            s[i] = m->s[ids[i]];
            int k = (int)rng_below(rng, (uint32_t)dims);
            float d = ((float)rng_below(rng, 5) - 2.0f) * 0.25f;
            s[i].c[k] += d;
            s[i].lo[k] += d;
            s[i].hi[k] += d;
        } else {
            s[i] = random_shape(rng, dims, sphere, 12);
        }
    }
    CHECK_EQ_INT(move_batch(w, ids, s, n, dims), BROADPHASE_OK);
    for (size_t i = 0; i < n; i++) m->s[ids[i]] = s[i];
}

static void model_remove(model *m, broadphase_world *w, uint64_t *rng, size_t n) {
    uint32_t ids[64];
    n = model_pick(m, rng, n > 64 ? 64 : n, ids);
    CHECK_EQ_INT(broadphase_remove(w, n, ids), BROADPHASE_OK);
    for (size_t i = 0; i < n; i++) m->live[ids[i]] = false;
    m->live_count -= n;
}

static void model_check(const model *m, broadphase_world *w, int dims, pair_list *want) {
    oracle_pairs(m->s, m->live, m->end, dims, want);
    CHECK_EQ_INT(broadphase_object_count(w), m->live_count);
    check_pairs(step_ok(w), want->data, want->count);
}

typedef struct churn_config {
    broadphase_method method;
    broadphase_update_policy update;
    int threads, leaf_size, max_depth;
    float looseness; /* 0: the default */
} churn_config;

TEST(pairs_match_oracle_under_churn) {
    /* Every method of the one list under each policy on 1 and 2 threads, then each tree's
     * extremes of leaf size, depth and looseness. */
#define CHURN_ROWS_(id, name)                                                                      \
    {id, BROADPHASE_UPDATE_AUTO, 1, 8, 40, 0.0f}, {id, BROADPHASE_UPDATE_AUTO, 2, 8, 40, 0.0f},    \
        {id, BROADPHASE_UPDATE_REFIT, 1, 8, 40, 0.0f},                                             \
        {id, BROADPHASE_UPDATE_REFIT, 2, 8, 40, 0.0f},                                             \
        {id, BROADPHASE_UPDATE_REBUILD, 1, 8, 40, 0.0f},                                           \
        {id, BROADPHASE_UPDATE_REBUILD, 2, 8, 40, 0.0f},
    static const churn_config configs[] = {
        BROADPHASE_METHOD_LIST(CHURN_ROWS_){BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_AUTO, 2, 1,
                                            64, 0.0f},
        {BROADPHASE_METHOD_KDTREE, BROADPHASE_UPDATE_REFIT, 2, 2, 5, 0.0f},
        {BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_AUTO, 2, 1, 64, 2.0f},
        {BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_REFIT, 2, 2, 5, 0.0f},
        {BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_REFIT, 2, 8, 40, 1.0f},
        {BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_AUTO, 1, 1, 3, 1.0f},
        {BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_REBUILD, 2, 2, 64, 1.0f},
        {BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_REFIT, 2, 1, 64, 4.0f},
    };
#undef CHURN_ROWS_
    model *m = malloc(sizeof *m);
    REQUIRE(m);
    pair_list want = {0};
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        for (int dims = 2; dims <= 3; dims++) {
            const churn_config *cc = &configs[ci];
            uint64_t seed = 1000 + ci * 10 + (uint64_t)dims, rng = seed;
            broadphase_config cfg = broadphase_config_default(dims);
            cfg.method = cc->method;
            cfg.update = cc->update;
            cfg.threads = cc->threads;
            cfg.leaf_size = cc->leaf_size;
            cfg.max_depth = cc->max_depth;
            if (cc->looseness != 0.0f) cfg.looseness = cc->looseness;
            broadphase_world *w = world_with(&cfg);
            if (!w) break;
            memset(m, 0, sizeof *m);
            for (int round = 0; round < 24; round++) {
                TEST_CONTEXT("%dD %s update=%d threads=%d leaf=%d depth=%d looseness=%g seed=%llu "
                             "round=%d",
                             dims, broadphase_method_name(cc->method), (int)cc->update, cc->threads,
                             cc->leaf_size, cc->max_depth, (double)cc->looseness,
                             (unsigned long long)seed, round);
                int before = test_failures;
                if (round == 0) {
                    model_add(m, w, &rng, 64, dims, false);
                    model_add(m, w, &rng, 64, dims, true);
                    model_add(m, w, &rng, 64, dims, false);
                } else {
                    model_move(m, w, &rng, rng_below(&rng, 40), dims, false);
                    model_move(m, w, &rng, rng_below(&rng, 40), dims, true);
                    model_remove(m, w, &rng, rng_below(&rng, round % 6 == 5 ? 64 : 12));
                    model_add(m, w, &rng, rng_below(&rng, 12), dims, rng_below(&rng, 2));
                    model_add(m, w, &rng, rng_below(&rng, round % 8 == 7 ? 64 : 6), dims,
                              rng_below(&rng, 2));
                }
                model_check(m, w, dims, &want);
                if (round % 5 == 4) model_check(m, w, dims, &want); /* a step with no change */
                if (test_failures != before) break;
            }
            broadphase_destroy(w);
        }
    }
    free(want.data);
    free(m);
}

/* ---- shape change ------------------------------------------------------------------------------
 */

TEST(shape_change_box_sphere_box) {
    /* Object 0 is the box [-1,1]^3 or the sphere of radius 1 at the origin. Box 1 sits in its
     * corner (out of the sphere's reach), box 2 on its +x face (inside both), sphere 3 in the
     * corner of both 0's box and box 1. */
    const shape as_box = box_shape(-1, -1, -1, 1, 1, 1);
    const shape as_sphere = sphere_shape(0, 0, 0, 1);
    const shape three = sphere_shape(0.875f, 0.875f, 0.875f, 0.25f);
    const broadphase_pair box_pairs[4] = {{0, 1}, {0, 2}, {0, 3}, {1, 3}};
    const broadphase_pair sphere_pairs[2] = {{0, 2}, {1, 3}};
    const broadphase_pair three_away[2] = {{0, 1}, {0, 2}};
    for (int r = 0; r < RUN_COUNT; r++) {
        TEST_CONTEXT("%s threads=%d looseness=%g", broadphase_method_name(RUNS[r].method),
                     RUNS[r].threads, (double)RUNS[r].looseness);
        broadphase_world *w = run_world(3, &RUNS[r]);
        REQUIRE(w);
        add_one(w, as_box, 3);
        add_one(w, box_shape(0.75f, 0.75f, 0.75f, 1, 1, 1), 3);
        add_one(w, box_shape(0.875f, -0.125f, -0.125f, 1, 0.125f, 0.125f), 3);
        add_one(w, three, 3);
        check_pairs(step_ok(w), box_pairs, 4);
        move_one(w, 0, as_sphere, 3);
        check_pairs(step_ok(w), sphere_pairs, 2);
        move_one(w, 0, as_box, 3);
        check_pairs(step_ok(w), box_pairs, 4);
        /* Sphere 3 becomes a far box and back, with no step in between the second time. */
        move_one(w, 3, box_shape(2, 2, 2, 3, 3, 3), 3);
        check_pairs(step_ok(w), three_away, 2);
        move_one(w, 3, three, 3);
        check_pairs(step_ok(w), box_pairs, 4);
        move_one(w, 0, as_sphere, 3);
        move_one(w, 0, as_box, 3);
        move_one(w, 0, as_sphere, 3);
        check_pairs(step_ok(w), sphere_pairs, 2);
        broadphase_destroy(w);
    }
}

/* ---- the step's output ---------------------------------------------------------------------- */

TEST(step_pairs_out_may_be_null) {
    for (int r = 0; r < RUN_COUNT; r++) {
        TEST_CONTEXT("%s threads=%d looseness=%g", broadphase_method_name(RUNS[r].method),
                     RUNS[r].threads, (double)RUNS[r].looseness);
        broadphase_world *w = run_world(3, &RUNS[r]);
        REQUIRE(w);
        CHECK_EQ_INT(broadphase_last_pairs(w).count, 0); /* before the first step */
        add_one(w, box_shape(0, 0, 0, 1, 1, 1), 3);
        add_one(w, box_shape(5, 5, 5, 6, 6, 6), 3);
        add_one(w, sphere_shape(1, 1, 1, 0.5f), 3);
        CHECK_EQ_INT(broadphase_step(w, NULL), BROADPHASE_OK);
        const broadphase_pair want[1] = {{0, 2}};
        check_pairs(broadphase_last_pairs(w), want, 1);
        broadphase_pairs p = step_ok(w);
        check_pairs(p, want, 1);
        broadphase_pairs last = broadphase_last_pairs(w);
        CHECK(last.count == p.count && last.data == p.data);
        CHECK_EQ_INT(broadphase_last_pairs(NULL).count, 0);
        broadphase_destroy(w);
    }
}

/* ---- statistics ------------------------------------------------------------------------------ */

static void expect_stats(broadphase_world *w, size_t objects, size_t pairs, uint64_t steps) {
    broadphase_stats s;
    memset(&s, 0xA5, sizeof s);
    REQUIRE(broadphase_get_stats(w, &s) == BROADPHASE_OK);
    CHECK_EQ_INT(s.objects, objects);
    CHECK_EQ_INT(s.pairs, pairs);
    CHECK_EQ_INT(s.steps, steps);
    CHECK(s.bytes_in_use > 0);
}

TEST(stats) {
    for (int r = 0; r < RUN_COUNT; r++) {
        TEST_CONTEXT("%s threads=%d looseness=%g", broadphase_method_name(RUNS[r].method),
                     RUNS[r].threads, (double)RUNS[r].looseness);
        broadphase_world *w = run_world(3, &RUNS[r]);
        REQUIRE(w);
        expect_stats(w, 0, 0, 0);
        shape s[40];
        uint32_t ids[40];
        for (int i = 0; i < 40; i++) s[i] = box_shape((float)i, 0, 0, (float)i + 1, 1, 1);
        CHECK_EQ_INT(add_batch(w, s, 40, 3, ids), BROADPHASE_OK);
        expect_stats(w, 40, 0, 0);
        CHECK_EQ_INT(step_ok(w).count, 39);
        expect_stats(w, 40, 39, 1);
        step_ok(w);
        step_ok(w);
        expect_stats(w, 40, 39, 3);
        remove_one(w, 0);
        expect_stats(w, 39, 39, 3); /* pairs are those of the last step */
        CHECK_EQ_INT(step_ok(w).count, 38);
        expect_stats(w, 39, 38, 4);
        broadphase_stats st;
        REQUIRE(broadphase_get_stats(w, &st) == BROADPHASE_OK);
        if (method_for(RUNS[r].method)->fill_levels != NULL) { /* a method with a tree */
            CHECK(st.nodes >= 1);
            CHECK(st.leaves >= 1 && st.leaves <= st.nodes);
            /* Steps 2 and 3 found nothing changed and kept the pairs; the others updated. */
            CHECK(st.rebuilds + st.refits + st.unchanged_steps == st.steps);
        } else {
            CHECK_EQ_INT(st.nodes, 0);
        }
        CHECK_EQ_INT(st.unchanged_steps, 2);
        CHECK(st.allocations >= 1);
        broadphase_destroy(w);
    }
}

/* The pairs a text "a-b a-b ..." names. */
static size_t p_count(const char *text) {
    size_t n = 0;
    for (const char *c = text; *c; c++) n += *c == '-';
    return n;
}

/* The step's pairs as a text "a-b a-b ...". */
static void pairs_text(broadphase_pairs p, char *out, size_t size) {
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < p.count && at + 24 < size; i++)
        at += (size_t)snprintf(out + at, size - at, "%s%u-%u", i ? " " : "", p.data[i].a,
                               p.data[i].b);
}

static void expect_step(broadphase_world *w, const char *pairs, size_t begun, size_t ended,
                        uint64_t unchanged) {
    char text[256];
    pairs_text(step_ok(w), text, sizeof text);
    CHECK(strcmp(text, pairs) == 0);
    if (strcmp(text, pairs) != 0) fprintf(stderr, "  pairs \"%s\", want \"%s\"\n", text, pairs);
    broadphase_events ev;
    CHECK_EQ_INT(broadphase_pair_events(w, &ev), BROADPHASE_OK);
    CHECK_EQ_INT(ev.begun.count, begun);
    CHECK_EQ_INT(ev.ended.count, ended);
    broadphase_stats st;
    CHECK_EQ_INT(broadphase_get_stats(w, &st), BROADPHASE_OK);
    CHECK_EQ_INT(st.unchanged_steps, unchanged);
    CHECK_EQ_INT(st.pairs, p_count(pairs));
}

/* A step that finds nothing changed keeps the last pairs (stats.unchanged_steps) and reports no
 * event; a push of the shapes objects already have is no change; every call that changes a
 * pair is one: a new shape, a filter, a static flag, a remove, an add, a shape of the other
 * kind. Every method, 1 and 2 threads. */
TEST(unchanged_steps_keep_pairs_and_every_change_counts) {
    for (int r = 0; r < RUN_COUNT; r++) {
        TEST_CONTEXT("%s threads=%d looseness=%g", broadphase_method_name(RUNS[r].method),
                     RUNS[r].threads, (double)RUNS[r].looseness);
        broadphase_config cfg = broadphase_config_default(3);
        cfg.method = RUNS[r].method;
        cfg.threads = RUNS[r].threads;
        if (RUNS[r].looseness != 0.0f) cfg.looseness = RUNS[r].looseness;
        cfg.pair_events = true;
        broadphase_world *w = world_with(&cfg);
        REQUIRE(w);
        shape s[3] = {box_shape(0, 0, 0, 1, 1, 1), box_shape(0.5f, 0.5f, 0.5f, 1.5f, 1.5f, 1.5f),
                      box_shape(10, 10, 10, 11, 11, 11)};
        uint32_t ids[3];
        CHECK_EQ_INT(add_batch(w, s, 3, 3, ids), BROADPHASE_OK);
        expect_step(w, "0-1", 1, 0, 0);
        expect_step(w, "0-1", 0, 0, 1); /* nothing called */
        CHECK_EQ_INT(move_batch(w, ids, s, 3, 3), BROADPHASE_OK);
        expect_step(w, "0-1", 0, 0, 2); /* everything pushed as it was */
        move_one(w, ids[2], box_shape(1.25f, 1.25f, 1.25f, 3, 3, 3), 3);
        expect_step(w, "0-1 1-2", 1, 0, 2);
        broadphase_filter none = {1, 0, 0};
        CHECK_EQ_INT(broadphase_set_filters(w, 1, &ids[2], &none), BROADPHASE_OK);
        expect_step(w, "0-1", 0, 1, 2);
        CHECK_EQ_INT(broadphase_set_static(w, 1, &ids[0], true), BROADPHASE_OK);
        expect_step(w, "0-1", 0, 0, 2); /* a flag changed: the pair is found again */
        CHECK_EQ_INT(broadphase_set_static(w, 1, &ids[1], true), BROADPHASE_OK);
        expect_step(w, "", 0, 1, 2); /* two statics make no pair */
        CHECK_EQ_INT(broadphase_set_static(w, 1, &ids[1], false), BROADPHASE_OK);
        expect_step(w, "0-1", 1, 0, 2);
        remove_one(w, ids[1]);
        expect_step(w, "", 0, 1, 2);
        uint32_t d = add_one(w, sphere_shape(0.5f, 0.5f, 0.5f, 0.25f), 3); /* id 1 again */
        CHECK_EQ_INT(d, 1);
        expect_step(w, "0-1", 1, 0, 2);
        expect_step(w, "0-1", 0, 0, 3);
        move_one(w, d, sphere_shape(0.5f, 0.5f, 0.5f, 0.25f), 3); /* the same sphere */
        expect_step(w, "0-1", 0, 0, 4);
        move_one(w, d, box_shape(0.25f, 0.25f, 0.25f, 0.75f, 0.75f, 0.75f), 3); /* its box */
        expect_step(w, "0-1", 0, 0, 4);
        move_one(w, d, sphere_shape(5, 5, 5, 0.25f), 3);
        expect_step(w, "", 0, 1, 4);
        broadphase_destroy(w);
    }
}

TEST(stats_null_arguments) {
    broadphase_world *w = world_new(3, BROADPHASE_METHOD_KDTREE, 1);
    REQUIRE(w);
    broadphase_stats s;
    CHECK_EQ_INT(broadphase_get_stats(NULL, &s), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_get_stats(w, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(broadphase_get_stats(NULL, NULL), BROADPHASE_ERROR_INVALID_ARGUMENT);
    broadphase_destroy(w);
}

TEST_MAIN()

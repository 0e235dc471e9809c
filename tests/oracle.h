/* Shared by the oracle tests: worlds built from scenes, a naive reference that tests every pair
 * with the single-pair predicates (no SIMD kernel, no threads, no tree), and pair-list
 * comparison that names the first difference. */
#pragma once

#include "broadphase.h"
#include "method.h"
#include "overlap.h"
#include "scenes.h"
#include "test.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pair_list {
    broadphase_pair *data;
    size_t count, capacity;
} pair_list;

static inline void pair_list_push(pair_list *l, uint32_t a, uint32_t b) {
    if (l->count == l->capacity) {
        l->capacity = l->capacity ? l->capacity * 2 : 1024;
        l->data = realloc(l->data, l->capacity * sizeof *l->data);
    }
    l->data[l->count].a = a < b ? a : b;
    l->data[l->count].b = a < b ? b : a;
    l->count++;
}

static inline int pair_compare(const void *x, const void *y) {
    const broadphase_pair *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* Object i of the scene as the predicates see it. */
static inline void scene_object(const scene *s, size_t i, float mn[3], float mx[3], float c[3],
                                float *r) {
    for (int k = 0; k < 3; k++) {
        bool used = k < s->dimensions;
        mn[k] = used && s->min[k] ? s->min[k][i] : 0.0f;
        mx[k] = used && s->max[k] ? s->max[k][i] : 0.0f;
        c[k] = used && s->center[k] ? s->center[k][i] : 0.0f;
    }
    *r = s->radius ? s->radius[i] : 0.0f;
}

/* Every pair of the scene's objects that overlap, as sorted (id, id) pairs. */
static inline void naive_pairs(const scene *s, const uint32_t *ids, pair_list *out) {
    out->count = 0;
    int d = s->dimensions;
    for (size_t i = 0; i < s->count; i++) {
        float amin[3], amax[3], ac[3], ar;
        scene_object(s, i, amin, amax, ac, &ar);
        for (size_t j = i + 1; j < s->count; j++) {
            float bmin[3], bmax[3], bc[3], br;
            scene_object(s, j, bmin, bmax, bc, &br);
            int hit;
            if (!s->is_sphere[i] && !s->is_sphere[j])
                hit = simd_pair_box_box(amin, amax, bmin, bmax, d);
            else if (s->is_sphere[i] && s->is_sphere[j])
                hit = simd_pair_sphere_sphere(ac, ar, bc, br, d);
            else if (s->is_sphere[i])
                hit = simd_pair_box_sphere(bmin, bmax, ac, ar, d);
            else
                hit = simd_pair_box_sphere(amin, amax, bc, br, d);
            if (hit) pair_list_push(out, ids[i], ids[j]);
        }
    }
    if (out->count) qsort(out->data, out->count, sizeof *out->data, pair_compare);
}

/* True when equal; otherwise reports the first difference (missing from or extra in `got`). */
static inline bool pairs_equal(const broadphase_pair *want, size_t want_count,
                               const broadphase_pair *got, size_t got_count, const char *what) {
    size_t i = 0, j = 0;
    while (i < want_count || j < got_count) {
        int c = i == want_count ? 1 : j == got_count ? -1 : pair_compare(&want[i], &got[j]);
        if (c == 0) {
            i++;
            j++;
            continue;
        }
        const broadphase_pair *p = c < 0 ? &want[i] : &got[j];
        fprintf(stderr, "%s: pair (%u, %u) %s (expected %zu pairs, got %zu) [%s]\n", what, p->a,
                p->b, c < 0 ? "missing" : "extra", want_count, got_count, test_context);
        return false;
    }
    return true;
}

/* Neighbour rows (broadphase_neighbours) against the pairs they come from, rebuilt here the plain
 * way (a counting sort over every pair, in pair order): the same count of rows as `min_rows` at
 * least and no id beyond them, the same offsets, the same partners in the same order. */
static inline bool rows_equal_pairs(const broadphase_pair *pairs, size_t count,
                                    const broadphase_neighbour_rows *rows, size_t min_rows,
                                    const char *what) {
    bool ok = rows->count >= min_rows && rows->offsets && rows->offsets[0] == 0;
    for (size_t i = 0; ok && i < count; i++) ok = pairs[i].b < rows->count;
    if (!ok) {
        fprintf(stderr, "%s: %zu rows, %zu wanted at least, or a pair beyond them [%s]\n", what,
                rows->count, min_rows, test_context);
        return false;
    }
    size_t n = rows->count, *off = calloc(n + 1, sizeof *off), *at = calloc(n + 1, sizeof *at);
    uint32_t *ids = malloc((2 * count + 1) * sizeof *ids);
    for (size_t i = 0; i < count; i++) {
        off[pairs[i].a + 1]++;
        off[pairs[i].b + 1]++;
    }
    for (size_t r = 0; r < n; r++) off[r + 1] += off[r];
    memcpy(at, off, (n + 1) * sizeof *at);
    /* pair order gives each row its lower partners ascending, then its upper ones */
    for (size_t i = 0; i < count; i++) {
        ids[at[pairs[i].b]++] = pairs[i].a;
        ids[at[pairs[i].a]++] = pairs[i].b;
    }
    for (size_t r = 0; ok && r <= n; r++) {
        if (rows->offsets[r] != off[r]) {
            fprintf(stderr, "%s: row %zu starts at %zu, want %zu [%s]\n", what, r, rows->offsets[r],
                    off[r], test_context);
            ok = false;
        }
    }
    for (size_t j = 0; ok && j < 2 * count; j++) {
        if (rows->ids[j] != ids[j]) {
            fprintf(stderr, "%s: entry %zu is %u, want %u [%s]\n", what, j, rows->ids[j], ids[j],
                    test_context);
            ok = false;
        }
    }
    for (size_t r = 0; ok && r < n; r++) /* ascending, each partner once */
        for (size_t j = off[r] + 1; ok && j < off[r + 1]; j++)
            if (!(ids[j - 1] < ids[j])) {
                fprintf(stderr, "%s: row %zu not ascending [%s]\n", what, r, test_context);
                ok = false;
            }
    free(off);
    free(at);
    free(ids);
    return ok;
}

/* Two worlds' last pair events are the same (both made with pair_events). */
static inline bool same_events(const broadphase_world *a, const broadphase_world *b) {
    broadphase_events ea, eb;
    if (broadphase_pair_events(a, &ea) != BROADPHASE_OK ||
        broadphase_pair_events(b, &eb) != BROADPHASE_OK) {
        fprintf(stderr, "pair_events failed [%s]\n", test_context);
        return false;
    }
    return pairs_equal(ea.begun.data, ea.begun.count, eb.begun.data, eb.begun.count, "begun") &&
           pairs_equal(ea.ended.data, ea.ended.count, eb.ended.data, eb.ended.count, "ended");
}

/* looseness 0 keeps the default (it only matters to the octree). */
static inline broadphase_config test_config(int dims, broadphase_method method,
                                            broadphase_update_policy update, int threads,
                                            float looseness) {
    broadphase_config c = broadphase_config_default(dims);
    c.method = method;
    c.update = update;
    c.threads = threads;
    if (looseness != 0.0f) c.looseness = looseness;
    return c;
}

static inline broadphase_world *make_world_from(const broadphase_config *c) {
    broadphase_world *w = NULL;
    if (broadphase_create(c, &w) != BROADPHASE_OK) return NULL;
    return w;
}

static inline broadphase_world *make_world_loose(int dims, broadphase_method method,
                                                 broadphase_update_policy update, int threads,
                                                 float looseness) {
    broadphase_config c = test_config(dims, method, update, threads, looseness);
    return make_world_from(&c);
}

static inline broadphase_world *make_world(int dims, broadphase_method method,
                                           broadphase_update_policy update, int threads) {
    return make_world_loose(dims, method, update, threads, 0.0f);
}

/* The events between two steps, from their pair sets (sorted): pairs in `now` and not in
 * `before` began, pairs in `before` and not in `now` ended, and a pair in both whose ids were
 * handed out again in between (gen, by id: how many times it was handed out, differs from
 * before_gen) did both. */
static inline void expected_events(const pair_list *before, const uint32_t *before_gen,
                                   const pair_list *now, const uint32_t *gen, pair_list *begun,
                                   pair_list *ended) {
    begun->count = ended->count = 0;
    size_t i = 0, j = 0;
    while (i < now->count || j < before->count) {
        uint64_t kn = i < now->count ? (uint64_t)now->data[i].a << 32 | now->data[i].b : UINT64_MAX;
        uint64_t kb =
            j < before->count ? (uint64_t)before->data[j].a << 32 | before->data[j].b : UINT64_MAX;
        if (kn < kb) {
            pair_list_push(begun, now->data[i].a, now->data[i].b);
            i++;
        } else if (kb < kn) {
            pair_list_push(ended, before->data[j].a, before->data[j].b);
            j++;
        } else {
            broadphase_pair p = now->data[i];
            if (gen[p.a] != before_gen[p.a] || gen[p.b] != before_gen[p.b]) {
                pair_list_push(begun, p.a, p.b);
                pair_list_push(ended, p.a, p.b);
            }
            i++;
            j++;
        }
    }
}

/* A world that reports pair events, with the given share of objects allowed to rest. */
static inline broadphase_world *make_world_events(int dims, broadphase_method method,
                                                  broadphase_update_policy update, int threads,
                                                  float looseness, float rest_share) {
    broadphase_config c = test_config(dims, method, update, threads, looseness);
    c.pair_events = true;
    c.rest_share = rest_share;
    return make_world_from(&c);
}

/* The tree's levels against its statistics, right after a step: one root, sums over the levels
 * equal the totals, every level above the deepest has an inner node, a node has at most
 * `branching` children (2 for the kd-tree, 4 or 8 for the octree; 0 for brute force, which has
 * no levels), and objects_in_internal_nodes lies between the objects of the levels made only of
 * inner nodes and those of the levels that have any. */
static inline void check_levels(const broadphase_world *w, int branching) {
    broadphase_stats st;
    REQUIRE(broadphase_get_stats(w, &st) == BROADPHASE_OK);
    size_t n = SIZE_MAX;
    broadphase_status s = broadphase_get_levels(w, NULL, 0, &n);
    if (branching == 0) {
        CHECK_EQ_INT(s, BROADPHASE_OK);
        CHECK_EQ_INT(n, 0);
        return;
    }
    CHECK_EQ_INT(s, BROADPHASE_ERROR_BUFFER_TOO_SMALL);
    REQUIRE(n == st.depth + 1);
    broadphase_level *lv = malloc((n + 1) * sizeof *lv);
    REQUIRE(lv);
    memset(lv, 0xA5, (n + 1) * sizeof *lv);
    size_t m = SIZE_MAX;
    CHECK_EQ_INT(broadphase_get_levels(w, lv, n + 1, &m), BROADPHASE_OK);
    CHECK_EQ_INT(m, n);
    size_t nodes = 0, leaves = 0, objects = 0, inner_low = 0, inner_high = 0;
    for (size_t k = 0; k < n; k++) {
        size_t inner = lv[k].nodes - lv[k].leaves;
        CHECK(lv[k].leaves <= lv[k].nodes);
        CHECK(lv[k].nodes >= 1);
        if (k + 1 < n) {
            CHECK(inner >= 1);
            CHECK(lv[k + 1].nodes >= inner && lv[k + 1].nodes <= (size_t)branching * inner);
        } else {
            CHECK_EQ_INT(inner, 0);
        }
        nodes += lv[k].nodes;
        leaves += lv[k].leaves;
        objects += lv[k].objects;
        if (lv[k].leaves == 0) inner_low += lv[k].objects;
        if (inner > 0) inner_high += lv[k].objects;
    }
    CHECK_EQ_INT(lv[0].nodes, 1);
    CHECK_EQ_INT(nodes, st.nodes);
    CHECK_EQ_INT(leaves, st.leaves);
    /* The statics and the objects at rest are not in the tree. */
    CHECK_EQ_INT(objects, st.objects - st.static_objects - st.resting_objects);
    CHECK(st.objects_in_internal_nodes >= inner_low);
    CHECK(st.objects_in_internal_nodes <= inner_high);
    free(lv);
}

/* The methods, from the one list (BROADPHASE_METHOD_LIST): method_at(i) for i < METHODS. A
 * test that loops over the methods loops over these, so that a new method runs it too. */
enum { METHODS = BROADPHASE_METHOD_COUNT };

static inline broadphase_method method_at(size_t i) {
    return (broadphase_method)i;
}

static inline const char *method_name(broadphase_method method) {
    return broadphase_method_name(method);
}

/* The children a node of the method's tree has at most (check_levels): 2 for the kd-tree, 2^dims
 * for the octree, unbounded for another method with a tree, 0 without one. */
static inline int method_branching(broadphase_method method, int dims) {
    return method == BROADPHASE_METHOD_KDTREE   ? 2
           : method == BROADPHASE_METHOD_OCTREE ? 1 << dims
           : method_has_tree(method)            ? INT_MAX
                                                : 0;
}

static inline broadphase_pairs step_ok(broadphase_world *w) {
    broadphase_pairs p = {NULL, 0};
    broadphase_status s = broadphase_step(w, &p);
    if (s != BROADPHASE_OK) {
        test_failures++;
        fprintf(stderr, "step failed: %s [%s]\n", broadphase_status_string(s), test_context);
    }
    return p;
}

static const char *const policy_names[] = {"auto", "rebuild", "refit"};

/* Tests for simd/: every compiled kernel variant (and the dispatched one) against its scalar twin
 * and against a naive loop over the single-pair predicates, bit for bit, on random ranges and id
 * lists, and on hand-computed edge cases: touching, zero size, huge and tiny coordinates. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "overlap.h"
#include "overlap_wide.h"
#include "query_math.h"
#include "scenes.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static uint32_t rng_below(uint64_t *state, uint32_t n) {
    return (uint32_t)(scene_splitmix64(state) % n);
}

/* Coordinates in one of several styles, so that random data hits exact ties (small grid), plain
 * floats, and a wide spread of exponents (where float squares would overflow or underflow). */
enum { STYLE_GRID, STYLE_UNIT, STYLE_WIDE, STYLE_COUNT };

static float rng_coord(uint64_t *state, int style) {
    switch (style) {
    case STYLE_GRID:
        return (float)rng_below(state, 17) * 0.5f - 4.0f;
    case STYLE_UNIT:
        return (float)((double)(scene_splitmix64(state) >> 11) * 0x1p-53 * 4.0 - 2.0);
    default: {
        float m = (float)((double)(scene_splitmix64(state) >> 11) * 0x1p-53 + 0.5);
        int e = (int)rng_below(state, 2 * 36 + 1) - 36;
        return ldexpf(rng_below(state, 2) ? -m : m, e * 3);
    }
    }
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *state) {
    return (double)(scene_splitmix64(state) >> 11) * 0x1p-53;
}

/* A non-negative length in the same style: a box extent or a radius. */
static float rng_length(uint64_t *state, int style) {
    if (rng_below(state, 8) == 0) return 0.0f;
    return fabsf(rng_coord(state, style));
}

static float *column_new(size_t n) {
    float *c = malloc(n ? n * sizeof *c : 1);
    if (!c) abort();
    return c;
}

/* Box columns allocated to exactly `n` entries, so that AddressSanitizer catches any read past
 * the SIMD_PAD that the kernels are allowed. The z columns are NULL in 2D. */
typedef struct box_set {
    simd_boxes cols;
    float *min[3], *max[3];
    size_t n;
} box_set;

static void box_set_init(box_set *b, size_t n, int dims) {
    memset(b, 0, sizeof *b);
    b->n = n;
    for (int k = 0; k < dims; k++) {
        b->cols.min[k] = b->min[k] = column_new(n);
        b->cols.max[k] = b->max[k] = column_new(n);
    }
}

static void box_set_free(box_set *b) {
    for (int k = 0; k < 3; k++) {
        free(b->min[k]);
        free(b->max[k]);
    }
}

static void box_set_sentinel(box_set *b, size_t i, int dims) {
    for (int k = 0; k < dims; k++) {
        b->min[k][i] = INFINITY;
        b->max[k][i] = -INFINITY;
    }
}

static void box_set_put(box_set *b, size_t i, const float mn[3], const float mx[3], int dims) {
    for (int k = 0; k < dims; k++) {
        b->min[k][i] = mn[k];
        b->max[k][i] = mx[k];
    }
}

static void box_get(const box_set *b, size_t i, int dims, float mn[3], float mx[3]) {
    for (int k = 0; k < 3; k++) {
        mn[k] = k < dims ? b->min[k][i] : 0.0f;
        mx[k] = k < dims ? b->max[k][i] : 0.0f;
    }
}

static void rng_box(uint64_t *state, int style, float mn[3], float mx[3]) {
    for (int k = 0; k < 3; k++) {
        mn[k] = rng_coord(state, style);
        mx[k] = mn[k] + rng_length(state, style);
        if (!(mx[k] >= mn[k]) || isinf(mx[k])) mx[k] = mn[k];
    }
}

typedef struct sphere_set {
    simd_spheres cols;
    float *c[3], *r;
    size_t n;
} sphere_set;

static void sphere_set_init(sphere_set *s, size_t n, int dims) {
    memset(s, 0, sizeof *s);
    s->n = n;
    for (int k = 0; k < dims; k++) s->cols.c[k] = s->c[k] = column_new(n);
    s->cols.r = s->r = column_new(n);
}

static void sphere_set_free(sphere_set *s) {
    for (int k = 0; k < 3; k++) free(s->c[k]);
    free(s->r);
}

static void sphere_set_put(sphere_set *s, size_t i, const float c[3], float r, int dims) {
    for (int k = 0; k < dims; k++) s->c[k][i] = c[k];
    s->r[i] = r;
}

static void sphere_get(const sphere_set *s, size_t i, int dims, float c[3], float *r) {
    for (int k = 0; k < 3; k++) c[k] = k < dims ? s->c[k][i] : 0.0f;
    *r = s->r[i];
}

static uint32_t *ids_new(size_t n) {
    uint32_t *p = malloc(n ? n * sizeof *p : 1);
    if (!p) abort();
    return p;
}

/* The kernel variants under test: each compiled one this CPU runs, plus the dispatched entry
 * points (whatever simd_level() says) so that the dispatch itself is covered. */
enum { VARIANT_AVX2, VARIANT_BASELINE, VARIANT_SCALAR, VARIANT_DISPATCH, VARIANT_COUNT };
static const char *const variant_names[VARIANT_COUNT] = {"avx2", "baseline", "scalar", "dispatch"};
static const simd_kernels dispatch_kernels = {"dispatch",
                                              simd_box_vs_boxes,
                                              simd_sphere_vs_spheres,
                                              simd_sphere_vs_boxes,
                                              simd_box_vs_spheres,
                                              simd_boxes_vs_boxes_pairs,
                                              simd_boxes_pairs_within,
                                              simd_boxes_sweep_pairs,
                                              simd_ray_vs_boxes,
                                              simd_point_vs_boxes,
                                              simd_point_nearest_rank,
                                              simd_boxes_select,
                                              simd_boxes_cross_pairs,
                                              simd_blocks_vs_boxes,
                                              simd_boxes_bounds,
                                              simd_boxes_first_invalid,
                                              simd_spheres_first_invalid,
                                              simd_stream_floats,
                                              simd_stream_fence,
                                              simd_cell_keys,
                                              simd_point_nearest_runs};

static const simd_kernels *variant(int v) {
    return v == VARIANT_DISPATCH ? &dispatch_kernels : simd_kernels_for(variant_names[v]);
}

static int same_ids(const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* ---- dispatch ------------------------------------------------------------------------------ */

TEST(dispatch_levels) {
    const char *level = simd_level();
    CHECK(strcmp(level, "avx2") == 0 || strcmp(level, "baseline") == 0 ||
          strcmp(level, "scalar") == 0);
    CHECK(simd_kernels_for(level) != NULL);
    CHECK(strcmp(simd_kernels_choose(getenv("BROADPHASE_SIMD"))->level, level) == 0);
    CHECK(strcmp(simd_level(), level) == 0); /* chosen once */

    /* Overrides: an available level wins; anything else falls back to the best one. */
    const simd_kernels *best = simd_kernels_choose(NULL);
    CHECK(strcmp(simd_kernels_choose("scalar")->level, "scalar") == 0);
    CHECK(simd_kernels_choose("no-such-level") == best);
    CHECK(simd_kernels_for("no-such-level") == NULL);
    for (int v = 0; v < VARIANT_SCALAR; v++) {
        const simd_kernels *k = simd_kernels_for(variant_names[v]);
        CHECK(simd_kernels_choose(variant_names[v]) == (k ? k : best));
    }
    if (simd_kernels_for("avx2"))
        CHECK(strcmp(best->level, "avx2") == 0);
    else if (simd_kernels_for("baseline"))
        CHECK(strcmp(best->level, "baseline") == 0);
    else
        CHECK(strcmp(best->level, "scalar") == 0);

    printf("simd level %s; variants tested:", level);
    for (int v = 0; v < VARIANT_COUNT; v++)
        if (variant(v)) printf(" %s", variant_names[v]);
    printf("\n");
}

/* ---- box-box ------------------------------------------------------------------------------- */

/* Every variant on [begin, end) of b, against a naive loop over simd_pair_box_box. */
static void check_box_range(const float qmin[3], const float qmax[3], const box_set *b,
                            size_t begin, size_t end, int dims) {
    size_t len = end - begin;
    uint32_t *expect = ids_new(len);
    size_t expect_count = 0;
    for (size_t i = begin; i < end; i++) {
        float mn[3], mx[3];
        box_get(b, i, dims, mn, mx);
        if (simd_pair_box_box(qmin, qmax, mn, mx, dims)) expect[expect_count++] = (uint32_t)i;
    }
    uint32_t *hits = ids_new(len + SIMD_PAD);
    for (int v = 0; v < VARIANT_COUNT; v++) {
        const simd_kernels *k = variant(v);
        if (!k) continue;
        size_t count = k->box_vs_boxes(qmin, qmax, &b->cols, begin, end, dims, hits);
        if (!same_ids(hits, count, expect, expect_count)) {
            CHECK(same_ids(hits, count, expect, expect_count));
            fprintf(stderr, "  %s: box_vs_boxes [%zu, %zu) gave %zu hits, expected %zu\n",
                    variant_names[v], begin, end, count, expect_count);
        }
    }
    free(hits);
    free(expect);
}

TEST(box_vs_boxes_random) {
    int failures_before = test_failures;
    long long hits_seen = 0, tests = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 7919 + (uint64_t)dims;
            int style = (int)(seed % STYLE_COUNT);
            for (size_t len = 0; len <= 40; len++) {
                TEST_CONTEXT("seed %llu dims %d style %d len %zu", (unsigned long long)seed, dims,
                             style, len);
                size_t begin = rng_below(&state, 13);
                size_t end = begin + len;
                box_set b;
                box_set_init(&b, end + SIMD_PAD, dims);
                /* Past end: real boxes (a sub-range of a longer array) or world sentinels. */
                int sentinel_tail = rng_below(&state, 2);
                for (size_t i = 0; i < b.n; i++) {
                    float mn[3], mx[3];
                    rng_box(&state, style, mn, mx);
                    if (i >= end && sentinel_tail)
                        box_set_sentinel(&b, i, dims);
                    else
                        box_set_put(&b, i, mn, mx, dims);
                }
                /* A larger query, so that masks with many lanes set are common too. */
                float qmin[3], qmax[3];
                rng_box(&state, style, qmin, qmax);
                for (int k = 0; k < 3; k++) qmax[k] += 2.0f * (qmax[k] - qmin[k]);
                check_box_range(qmin, qmax, &b, begin, end, dims);
                for (size_t i = begin; i < end; i++) {
                    float mn[3], mx[3];
                    box_get(&b, i, dims, mn, mx);
                    hits_seen += simd_pair_box_box(qmin, qmax, mn, mx, dims);
                    tests++;
                }
                box_set_free(&b);
                REQUIRE(test_failures == failures_before);
            }
        }
    }
    /* The data must exercise both outcomes, or the comparison proves little. */
    printf("box_vs_boxes_random: %lld of %lld overlap\n", hits_seen, tests);
    CHECK(hits_seen > tests / 10);
    CHECK(hits_seen < tests - tests / 10);
}

/* ---- ray-box filter -------------------------------------------------------------------------- */

/* A random segment: origins and directions in the style, some direction components 0, some
 * max_t infinite or 0. */
static void rng_ray(uint64_t *state, int style, int dims, float o[3], float d[3], float *max_t) {
    for (int k = 0; k < 3; k++) {
        o[k] = k < dims ? rng_coord(state, style) : 0.0f;
        d[k] = k < dims ? rng_coord(state, style) : 0.0f;
        if (rng_below(state, 6) == 0) d[k] = 0.0f;
    }
    if (d[0] == 0.0f && d[1] == 0.0f && d[2] == 0.0f) d[0] = 1.0f;
    uint32_t pick = rng_below(state, 8);
    *max_t = pick == 0 ? INFINITY : pick == 1 ? 0.0f : fabsf(rng_coord(state, style)) * 4.0f;
}

/* The kernel's ray from the exact one, as the queries build it. */
static simd_ray kernel_ray(const qm_ray *r, float max_t) {
    simd_ray k = {.max_t = max_t};
    for (int a = 0; a < 3; a++) {
        k.o[a] = (float)r->o[a];
        k.flat[a] = r->d[a] == 0.0;
        k.inv[a] = k.flat[a] ? 0.0f : (float)r->inv[a];
    }
    return k;
}

/* Boxes [begin, begin + len) at a random offset, a tenth of them world sentinels (empty), and
 * sentinels past the end; returns begin. */
static size_t holey_range(box_set *b, size_t len, uint64_t *state, int style, int dims) {
    size_t begin = rng_below(state, 13), end = begin + len;
    box_set_init(b, end + SIMD_PAD, dims);
    for (size_t i = 0; i < b->n; i++) {
        float mn[3], mx[3];
        rng_box(state, style, mn, mx);
        if (rng_below(state, 10) == 0 || i >= end)
            box_set_sentinel(b, i, dims);
        else
            box_set_put(b, i, mn, mx, dims);
    }
    return begin;
}

/* A nearest search's ranking: every variant, and the twin, give the reference's rows: the hits
 * within max_d2 by qm_box_dist2 (the queries' exact distance), sorted by (its float, id), the
 * first k. Grid coordinates and a few ids give many equal distances, broken by id; the bound is
 * often one hit's own distance, so that hits lie exactly on it. */
typedef struct ranked {
    float d;
    uint32_t id;
} ranked;

static int ranked_order(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

TEST(point_nearest_rank_random) {
    int failures_before = test_failures;
    long long rows = 0, ties = 0, cut = 0;
    for (uint64_t seed = 1; seed <= 120; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 7919 + (uint64_t)dims;
            int style = (int)(seed % STYLE_COUNT);
            for (size_t h = 0; h <= SIMD_RANK_MAX; h += 1 + h / 8) {
                TEST_CONTEXT("seed %llu dims %d style %d h %zu", (unsigned long long)seed, dims,
                             style, h);
                size_t n = h + 20;
                box_set b;
                box_set_init(&b, n, dims);
                uint32_t *ids = ids_new(n), *at = ids_new(h + 1);
                for (size_t i = 0; i < n; i++) {
                    float mn[3], mx[3];
                    rng_box(&state, style, mn, mx);
                    box_set_put(&b, i, mn, mx, dims);
                    ids[i] = (uint32_t)(i * 2654435761u % 1000003u); /* distinct, unordered */
                }
                if (rng_below(&state, 4) == 0) ids[rng_below(&state, (uint32_t)n)] = UINT32_MAX - 1;
                /* h distinct positions, in no order */
                uint32_t *perm = ids_new(n);
                for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
                for (size_t i = n; i > 1; i--) {
                    uint32_t x = rng_below(&state, (uint32_t)i), t = perm[x];
                    perm[x] = perm[i - 1];
                    perm[i - 1] = t;
                }
                for (size_t j = 0; j < h; j++) at[j] = perm[j];
                free(perm);
                float p[3] = {0, 0, 0};
                for (int a = 0; a < dims; a++) p[a] = rng_coord(&state, style);
                double max_d2 = INFINITY;
                uint32_t pick = rng_below(&state, 3);
                if (h > 0 && pick > 0) {
                    float mn[3], mx[3];
                    box_get(&b, at[rng_below(&state, (uint32_t)h)], dims, mn, mx);
                    max_d2 = qm_box_dist2(p, mn, mx, dims);
                }
                ranked want[SIMD_RANK_MAX];
                size_t kept = 0;
                for (size_t j = 0; j < h; j++) {
                    float mn[3], mx[3];
                    box_get(&b, at[j], dims, mn, mx);
                    double d2 = qm_box_dist2(p, mn, mx, dims);
                    if (d2 <= max_d2) want[kept++] = (ranked){(float)d2, ids[at[j]]};
                }
                qsort(want, kept, sizeof *want, ranked_order);
                for (size_t j = 1; j < kept; j++) ties += want[j].d == want[j - 1].d;
                size_t k = 1 + rng_below(&state, 40);
                size_t m = kept < k ? kept : k;
                cut += kept > k;
                rows++;
                for (int v = 0; v < VARIANT_COUNT; v++) {
                    const simd_kernels *kr = variant(v);
                    if (!kr) continue;
                    float d2[64];
                    uint32_t got[64];
                    size_t gm =
                        kr->point_nearest_rank(p, max_d2, &b.cols, at, h, ids, dims, k, d2, got);
                    bool same = gm == m;
                    for (size_t j = 0; same && j < m; j++)
                        same =
                            memcmp(&d2[j], &want[j].d, sizeof(float)) == 0 && got[j] == want[j].id;
                    if (!same) {
                        CHECK(same);
                        fprintf(stderr, "  %s: %zu of %zu kept (k %zu), the reference %zu\n",
                                variant_names[v], gm, kept, k, m);
                    }
                }
                free(ids);
                free(at);
                box_set_free(&b);
                REQUIRE(test_failures == failures_before);
            }
        }
    }
    printf("point_nearest_rank_random: %lld rows, %lld ties, %lld cut at k\n", rows, ties, cut);
    CHECK(ties > rows && cut > rows / 4);
}

/* The same exact step over runs of positions: every variant, and the twin, give the reference's
 * rows over every position of the runs (1 to 9 disjoint runs of a column of up to 150 boxes, the
 * bound infinite or one box's own distance), or say that more than SIMD_RANK_MAX are within it. */
TEST(point_nearest_runs_random) {
    int failures_before = test_failures;
    long long rows = 0, ties = 0, over = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        int dims = 2 + (int)(seed % 2);
        uint64_t state = seed * 104729 + (uint64_t)dims;
        int style = (int)(seed % STYLE_COUNT);
        size_t n = 1 + rng_below(&state, 150);
        TEST_CONTEXT("seed %llu dims %d style %d n %zu", (unsigned long long)seed, dims, style, n);
        box_set b;
        box_set_init(&b, n + SIMD_PAD, dims);
        uint32_t *ids = ids_new(n + SIMD_PAD);
        for (size_t i = 0; i < n + SIMD_PAD; i++) {
            float mn[3], mx[3];
            rng_box(&state, style, mn, mx);
            if (i < n)
                box_set_put(&b, i, mn, mx, dims);
            else
                box_set_sentinel(&b, i, dims);
            ids[i] = (uint32_t)(i * 2654435761u % 1000003u); /* distinct, unordered */
        }
        /* disjoint runs: the column cut at random places, some pieces taken */
        uint32_t runs[9][2];
        size_t run_count = 0;
        for (uint32_t at = 0; at < n && run_count < 9;) {
            uint32_t len = 1 + rng_below(&state, (uint32_t)(n - at < 40 ? n - at : 40));
            if (rng_below(&state, 3) != 0) {
                runs[run_count][0] = at;
                runs[run_count][1] = at + len;
                run_count++;
            }
            at += len;
        }
        float p[3] = {0, 0, 0};
        for (int a = 0; a < dims; a++) p[a] = rng_coord(&state, style);
        double max_d2 = INFINITY;
        if (rng_below(&state, 3) > 0) {
            float mn[3], mx[3];
            box_get(&b, rng_below(&state, (uint32_t)n), dims, mn, mx);
            max_d2 = qm_box_dist2(p, mn, mx, dims);
        }
        ranked want[160];
        size_t kept = 0;
        for (size_t r = 0; r < run_count; r++)
            for (uint32_t j = runs[r][0]; j < runs[r][1]; j++) {
                float mn[3], mx[3];
                box_get(&b, j, dims, mn, mx);
                double d2 = qm_box_dist2(p, mn, mx, dims);
                if (d2 <= max_d2) want[kept++] = (ranked){(float)d2, ids[j]};
            }
        qsort(want, kept, sizeof *want, ranked_order);
        for (size_t j = 1; j < kept; j++) ties += want[j].d == want[j - 1].d;
        size_t k = 1 + rng_below(&state, 70);
        size_t m = kept > SIMD_RANK_MAX ? SIZE_MAX : kept < k ? kept : k;
        over += kept > SIMD_RANK_MAX;
        rows++;
        for (int v = 0; v < VARIANT_COUNT; v++) {
            const simd_kernels *kr = variant(v);
            if (!kr) continue;
            float d2[80];
            uint32_t got[80];
            size_t gm = kr->point_nearest_runs(p, max_d2, &b.cols, (const uint32_t(*)[2])runs,
                                               run_count, ids, dims, k, d2, got);
            bool same = gm == m;
            for (size_t j = 0; same && m != SIZE_MAX && j < m; j++)
                same = memcmp(&d2[j], &want[j].d, sizeof(float)) == 0 && got[j] == want[j].id;
            if (!same) {
                CHECK(same);
                fprintf(stderr, "  %s: %zu of %zu kept (k %zu), the reference %zu\n",
                        variant_names[v], gm, kept, k, m);
            }
        }
        free(ids);
        box_set_free(&b);
        REQUIRE(test_failures == failures_before);
    }
    printf("point_nearest_runs_random: %lld rows, %lld ties, %lld past the ranking's room\n", rows,
           ties, over);
    CHECK(ties > rows / 4 && over > rows / 20 && over < rows / 2);
}

TEST(ray_vs_boxes_random) {
    int failures_before = test_failures;
    long long exact_hits = 0, kept = 0, tests = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 104729 + (uint64_t)dims;
            int style = (int)(seed % STYLE_COUNT);
            for (size_t len = 0; len <= 40; len++) {
                TEST_CONTEXT("seed %llu dims %d style %d len %zu", (unsigned long long)seed, dims,
                             style, len);
                box_set b;
                size_t begin = holey_range(&b, len, &state, style, dims), end = begin + len;
                float o[3], d[3], max_t;
                rng_ray(&state, style, dims, o, d, &max_t);
                qm_ray r;
                qm_ray_init(&r, o, d, max_t, dims);
                bool usable = true; /* the kernel's condition on inv */
                for (int k = 0; k < dims; k++)
                    usable &= r.d[k] == 0.0 || (fabs(r.inv[k]) > 1e-30 && fabs(r.inv[k]) < 1e30);
                simd_ray kr = kernel_ray(&r, max_t);
                uint32_t *want = ids_new(len + SIMD_PAD), *got = ids_new(len + SIMD_PAD);
                size_t nwant = simd_ray_vs_boxes_scalar(&kr, &b.cols, begin, end, dims, want);
                for (int v = 0; v < VARIANT_COUNT; v++) { /* bit for bit with the twin */
                    const simd_kernels *k = variant(v);
                    if (!k) continue;
                    size_t n = k->ray_vs_boxes(&kr, &b.cols, begin, end, dims, got);
                    if (!same_ids(got, n, want, nwant)) {
                        CHECK(same_ids(got, n, want, nwant));
                        fprintf(stderr, "  %s: ray_vs_boxes gave %zu, the twin %zu\n",
                                variant_names[v], n, nwant);
                    }
                }
                /* a superset of the exact test's hits */
                size_t j = 0;
                for (size_t i = begin; i < end; i++) {
                    float mn[3], mx[3];
                    box_get(&b, i, dims, mn, mx);
                    double t;
                    bool hit = qm_ray_box(&r, mn, mx, dims, max_t, &t);
                    while (j < nwant && want[j] < i) j++;
                    bool in = j < nwant && want[j] == i;
                    if (usable && hit && !in) {
                        CHECK(in);
                        fprintf(stderr, "  box %zu hit at t %.9g dropped by the filter\n", i, t);
                    }
                    if (style == STYLE_WIDE) continue; /* beyond 1e30 the filter keeps all */
                    exact_hits += hit;
                    kept += in;
                    tests += mn[0] <= mx[0];
                }
                free(want);
                free(got);
                box_set_free(&b);
                REQUIRE(test_failures == failures_before);
            }
        }
    }
    /* The filter must filter: it keeps few boxes beyond the exact hits (at ordinary scales). */
    printf("ray_vs_boxes_random: %lld kept, %lld exact hits, of %lld boxes\n", kept, exact_hits,
           tests);
    CHECK(exact_hits > tests / 50);
    CHECK(kept - exact_hits < (tests - exact_hits) / 20);
}

/* Near the boundary: a box whose corner the segment grazes, entering the x slab at about the
 * moment it leaves the y slab (t* random in (0, 1)), the faces nudged by -2..2 ulps, so that the
 * exact test says yes about half the time and float rounding decides the rest; every exact hit
 * must be kept. */
static float nudge_ulps(uint64_t *state, float x) {
    int n = (int)rng_below(state, 5) - 2;
    for (int u = 0; u < abs(n); u++) x = nextafterf(x, n > 0 ? INFINITY : -INFINITY);
    return x;
}

TEST(ray_vs_boxes_near_boundary) {
    uint64_t state = 5;
    long long hits = 0;
    const int trials = 40000;
    for (int trial = 0; trial < trials; trial++) {
        int dims = 2 + trial % 2;
        float o[3] = {0, 0, 0}, d[3] = {0, 0, 0};
        for (int k = 0; k < dims; k++) {
            o[k] = rng_coord(&state, STYLE_UNIT) * 100.0f;
            d[k] = rng_coord(&state, STYLE_UNIT) * 10.0f;
            if (d[k] == 0.0f) d[k] = 1.0f;
        }
        double ts = (double)(scene_splitmix64(&state) >> 11) * 0x1p-53;
        float p[3], mn[3], mx[3];
        for (int k = 0; k < dims; k++) p[k] = (float)((double)o[k] + ts * (double)d[k]);
        /* x: entered at t* (the near face at p); y: left at t* (the far face at p) */
        mn[0] = d[0] > 0.0f ? nudge_ulps(&state, p[0]) : p[0] - 1.0f;
        mx[0] = d[0] > 0.0f ? p[0] + 1.0f : nudge_ulps(&state, p[0]);
        mn[1] = d[1] > 0.0f ? p[1] - 1.0f : nudge_ulps(&state, p[1]);
        mx[1] = d[1] > 0.0f ? nudge_ulps(&state, p[1]) : p[1] + 1.0f;
        mn[2] = dims == 3 ? p[2] - 1.0f : 0.0f;
        mx[2] = dims == 3 ? p[2] + 1.0f : 0.0f;
        box_set b;
        box_set_init(&b, 1 + SIMD_PAD, dims);
        for (size_t i = 0; i < b.n; i++) box_set_sentinel(&b, i, dims);
        box_set_put(&b, 0, mn, mx, dims);
        float max_t = 1.0f;
        qm_ray r;
        qm_ray_init(&r, o, d, max_t, dims);
        simd_ray kr = kernel_ray(&r, max_t);
        double t;
        bool hit = qm_ray_box(&r, mn, mx, dims, max_t, &t);
        hits += hit;
        for (int v = 0; v < VARIANT_COUNT; v++) {
            const simd_kernels *k = variant(v);
            if (!k) continue;
            uint32_t got[1 + SIMD_PAD];
            size_t n = k->ray_vs_boxes(&kr, &b.cols, 0, 1, dims, got);
            TEST_CONTEXT("trial %d variant %s", trial, variant_names[v]);
            if (hit) CHECK(n == 1);
        }
        box_set_free(&b);
    }
    printf("ray_vs_boxes_near_boundary: %lld of %d hit\n", hits, trials);
    CHECK(hits > trials / 5 && hits < trials - trials / 5);
}

/* ---- point-box distance filter --------------------------------------------------------------- */

/* Every variant bit for bit with the twin, and a superset of the boxes whose exact (double)
 * squared distance is within a bound, given the limit the queries pass (bound + 1e-5 relative). */
TEST(point_vs_boxes_random) {
    int failures_before = test_failures;
    long long within = 0, kept = 0, tests = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 15485863 + (uint64_t)dims;
            int style = (int)(seed % STYLE_COUNT);
            for (size_t len = 0; len <= 40; len++) {
                TEST_CONTEXT("seed %llu dims %d style %d len %zu", (unsigned long long)seed, dims,
                             style, len);
                box_set b;
                size_t begin = holey_range(&b, len, &state, style, dims), end = begin + len;
                float p[3] = {0, 0, 0};
                for (int k = 0; k < dims; k++) p[k] = rng_coord(&state, style);
                /* the bound: some box's exact distance, so that ties at the bound are common */
                float mn[3], mx[3];
                box_get(&b, begin + rng_below(&state, (uint32_t)len + 1) % (len ? len : 1), dims,
                        mn, mx);
                double exact = qm_box_dist2(p, mn, mx, dims);
                float bound = (float)exact;
                if (rng_below(&state, 4) == 0 || !(bound < INFINITY)) bound = INFINITY;
                float limit = bound * 1.00001f;
                uint32_t *want = ids_new(len + SIMD_PAD), *got = ids_new(len + SIMD_PAD);
                size_t nwant =
                    simd_point_vs_boxes_scalar(p, limit, &b.cols, begin, end, dims, want);
                for (int v = 0; v < VARIANT_COUNT; v++) {
                    const simd_kernels *k = variant(v);
                    if (!k) continue;
                    size_t n = k->point_vs_boxes(p, limit, &b.cols, begin, end, dims, got);
                    if (!same_ids(got, n, want, nwant)) {
                        CHECK(same_ids(got, n, want, nwant));
                        fprintf(stderr, "  %s: point_vs_boxes gave %zu, the twin %zu\n",
                                variant_names[v], n, nwant);
                    }
                }
                size_t j = 0;
                for (size_t i = begin; i < end; i++) {
                    box_get(&b, i, dims, mn, mx);
                    if (!(mn[0] <= mx[0])) continue;
                    bool in_bound = (double)(float)qm_box_dist2(p, mn, mx, dims) <= (double)bound;
                    while (j < nwant && want[j] < i) j++;
                    bool in = j < nwant && want[j] == i;
                    CHECK(!in_bound || in);
                    if (style == STYLE_WIDE || bound == INFINITY) continue;
                    within += in_bound;
                    kept += in;
                    tests++;
                }
                free(want);
                free(got);
                box_set_free(&b);
                REQUIRE(test_failures == failures_before);
            }
        }
    }
    printf("point_vs_boxes_random: %lld kept, %lld within the bound, of %lld boxes\n", kept, within,
           tests);
    CHECK(within > tests / 20 && within < tests - tests / 20);
    CHECK(kept - within < (tests - within) / 20);
}

/* ---- box-box, many against many ------------------------------------------------------------ */

/* The pair kernels' contract by hand: rows in order, whole rows while width + SIMD_PAD fit. */
static size_t expect_pairs(const box_set *a, size_t a_begin, size_t a_end, const box_set *b,
                           size_t b_begin, size_t b_end, int within, int dims, uint32_t *rows,
                           uint32_t *cols, size_t capacity, size_t *a_next) {
    size_t n = 0, r = a_begin;
    for (; r < a_end; r++) {
        size_t lo = within ? r + 1 : b_begin;
        if (lo >= b_end) continue;
        if (capacity - n < b_end - lo + SIMD_PAD) break;
        float qmin[3], qmax[3];
        box_get(a, r, dims, qmin, qmax);
        for (size_t i = lo; i < b_end; i++) {
            float mn[3], mx[3];
            box_get(b, i, dims, mn, mx);
            if (simd_pair_box_box(qmin, qmax, mn, mx, dims)) {
                rows[n] = (uint32_t)r;
                cols[n++] = (uint32_t)i;
            }
        }
    }
    *a_next = r;
    return n;
}

static void fill_boxes(box_set *b, size_t end, uint64_t *state, int style, int dims) {
    int sentinel_tail = rng_below(state, 2);
    for (size_t i = 0; i < b->n; i++) {
        float mn[3], mx[3];
        rng_box(state, style, mn, mx);
        /* Larger boxes now and then, so that rows with many hits are common too. */
        if (rng_below(state, 4) == 0)
            for (int k = 0; k < 3; k++) mx[k] += 2.0f * (mx[k] - mn[k]);
        if (i >= end && sentinel_tail)
            box_set_sentinel(b, i, dims);
        else
            box_set_put(b, i, mn, mx, dims);
    }
}

TEST(boxes_pairs_random) {
    int failures_before = test_failures;
    long long pairs_seen = 0, partial_calls = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            for (int within = 0; within <= 1; within++) {
                uint64_t state = seed * 104729 + (uint64_t)dims * 2 + (uint64_t)within;
                int style = (int)(seed % STYLE_COUNT);
                size_t a_begin = rng_below(&state, 9), a_end = a_begin + rng_below(&state, 30);
                size_t b_begin = within ? a_begin : rng_below(&state, 9);
                size_t b_end = within ? a_end : b_begin + rng_below(&state, 45);
                TEST_CONTEXT("seed %llu dims %d within %d a [%zu, %zu) b [%zu, %zu)",
                             (unsigned long long)seed, dims, within, a_begin, a_end, b_begin,
                             b_end);
                box_set a, b;
                box_set_init(&a, a_end + SIMD_PAD, dims);
                fill_boxes(&a, a_end, &state, style, dims);
                const box_set *bp = &a;
                if (!within) {
                    box_set_init(&b, b_end + SIMD_PAD, dims);
                    fill_boxes(&b, b_end, &state, style, dims);
                    bp = &b;
                }
                /* From room for one widest row to room for everything. */
                size_t width = b_end > b_begin ? b_end - b_begin : 0;
                size_t capacity = width + SIMD_PAD + rng_below(&state, 3) * rng_below(&state, 200);
                uint32_t *er = ids_new(capacity), *ec = ids_new(capacity);
                uint32_t *rows = ids_new(capacity), *cols = ids_new(capacity);
                for (int v = 0; v < VARIANT_COUNT; v++) {
                    const simd_kernels *k = variant(v);
                    if (!k) continue;
                    for (size_t r = a_begin, en = r; r < a_end; r = en) {
                        size_t next, got_next;
                        size_t n = expect_pairs(&a, r, a_end, bp, b_begin, b_end, within, dims, er,
                                                ec, capacity, &next);
                        size_t got = within ? k->boxes_pairs_within(&a.cols, r, a_end, dims, rows,
                                                                    cols, capacity, &got_next)
                                            : k->boxes_vs_boxes_pairs(&a.cols, r, a_end, &bp->cols,
                                                                      b_begin, b_end, dims, rows,
                                                                      cols, capacity, &got_next);
                        if (!same_ids(rows, got, er, n) || !same_ids(cols, got, ec, n) ||
                            got_next != next) {
                            CHECK(0);
                            fprintf(stderr,
                                    "  %s: from row %zu gave %zu pairs to row %zu, expected "
                                    "%zu to row %zu\n",
                                    variant_names[v], r, got, got_next, n, next);
                            break;
                        }
                        REQUIRE(next > r); /* the capacity always fits one row */
                        if (v == VARIANT_SCALAR) {
                            pairs_seen += (long long)n;
                            partial_calls += next < a_end;
                        }
                        en = next;
                    }
                }
                free(er);
                free(ec);
                free(rows);
                free(cols);
                box_set_free(&a);
                if (!within) box_set_free(&b);
                REQUIRE(test_failures == failures_before);
            }
        }
    }
    printf("boxes_pairs_random: %lld pairs, %lld calls stopped early for room\n", pairs_seen,
           partial_calls);
    CHECK(pairs_seen > 1000);
    CHECK(partial_calls > 10);
}

/* Entries [begin, end) of a set sorted by min x (insertion sort: the sets are small). */
static void sort_by_min_x(box_set *b, size_t begin, size_t end, int dims) {
    for (size_t i = begin + 1; i < end; i++) {
        float mn[3], mx[3];
        box_get(b, i, dims, mn, mx);
        size_t j = i;
        for (; j > begin; j--) {
            float pn[3], px[3];
            box_get(b, j - 1, dims, pn, px);
            if (pn[0] <= mn[0]) break;
            box_set_put(b, j, pn, px, dims);
        }
        box_set_put(b, j, mn, mx, dims);
    }
}

/* With `capacity` entries of room, call by call from a_begin: every variant gives the scalar
 * twin's pairs and stopping row. Counts the calls that stopped early; false on a difference. */
static bool v_scalar_sweep_matches(const box_set *a, const box_set *b, size_t a_begin, size_t a_end,
                                   size_t b_begin, size_t b_end, float reach, int within, int dims,
                                   size_t capacity, uint32_t *er, uint32_t *ec, uint32_t *rows,
                                   uint32_t *cols, long long *partial_calls) {
    const simd_kernels *scalar = variant(VARIANT_SCALAR);
    for (int v = 0; v < VARIANT_COUNT; v++) {
        const simd_kernels *k = variant(v);
        if (!k || v == VARIANT_SCALAR) continue;
        for (size_t r = a_begin, en = r; r < a_end; r = en) {
            size_t next, got_next;
            size_t n = scalar->boxes_sweep_pairs(&a->cols, r, a_end, &b->cols, b_begin, b_end,
                                                 reach, within, dims, er, ec, capacity, &next);
            size_t got = k->boxes_sweep_pairs(&a->cols, r, a_end, &b->cols, b_begin, b_end, reach,
                                              within, dims, rows, cols, capacity, &got_next);
            if (!same_ids(rows, got, er, n) || !same_ids(cols, got, ec, n) || got_next != next) {
                CHECK(0);
                fprintf(stderr, "  %s: from row %zu gave %zu pairs to row %zu, scalar %zu to %zu\n",
                        variant_names[v], r, got, got_next, n, next);
                return false;
            }
            if (next <= r) { /* the capacity always fits one row */
                CHECK(0);
                return false;
            }
            *partial_calls += next < a_end;
            en = next;
        }
    }
    return true;
}

/* The sweep kernel on sorted sets: with room for everything, exactly the pairs of the plain
 * many-against-many kernel's contract (expect_pairs); with less room, the wide variants stop
 * at the scalar twin's row with the scalar twin's pairs. */
TEST(boxes_sweep_random) {
    int failures_before = test_failures;
    long long pairs_seen = 0, partial_calls = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            for (int within = 0; within <= 1; within++) {
                uint64_t state = seed * 7919 + (uint64_t)dims * 2 + (uint64_t)within;
                int style = (int)(seed % STYLE_COUNT);
                size_t a_begin = rng_below(&state, 9), a_end = a_begin + rng_below(&state, 40);
                size_t b_begin = within ? a_begin : rng_below(&state, 9);
                size_t b_end = within ? a_end : b_begin + rng_below(&state, 60);
                TEST_CONTEXT("seed %llu dims %d within %d a [%zu, %zu) b [%zu, %zu)",
                             (unsigned long long)seed, dims, within, a_begin, a_end, b_begin,
                             b_end);
                box_set a, b;
                box_set_init(&a, a_end + SIMD_PAD, dims);
                fill_boxes(&a, a_end, &state, style, dims);
                sort_by_min_x(&a, a_begin, a_end, dims);
                const box_set *bp = &a;
                if (!within) {
                    box_set_init(&b, b_end + SIMD_PAD, dims);
                    fill_boxes(&b, b_end, &state, style, dims);
                    sort_by_min_x(&b, b_begin, b_end, dims);
                    bp = &b;
                }
                float reach = 0.0f;
                for (size_t i = b_begin; i < b_end; i++) {
                    float mn[3], mx[3];
                    box_get(bp, i, dims, mn, mx);
                    reach = mx[0] - mn[0] > reach ? mx[0] - mn[0] : reach;
                }
                size_t all = (a_end - a_begin + 1) * (b_end - b_begin + SIMD_PAD + 1);
                size_t width = b_end > b_begin ? b_end - b_begin : 0;
                size_t tight = width + SIMD_PAD + rng_below(&state, 3) * rng_below(&state, 50);
                uint32_t *er = ids_new(all), *ec = ids_new(all), *rows = ids_new(all),
                         *cols = ids_new(all);
                size_t next, got_next;
                size_t n = expect_pairs(&a, a_begin, a_end, bp, b_begin, b_end, within, dims, er,
                                        ec, all, &next);
                for (int v = 0; v < VARIANT_COUNT; v++) {
                    const simd_kernels *k = variant(v);
                    if (!k) continue;
                    size_t got =
                        k->boxes_sweep_pairs(&a.cols, a_begin, a_end, &bp->cols, b_begin, b_end,
                                             reach, within, dims, rows, cols, all, &got_next);
                    if (!same_ids(rows, got, er, n) || !same_ids(cols, got, ec, n) ||
                        got_next != a_end) {
                        CHECK(0);
                        fprintf(stderr, "  %s: %zu pairs to row %zu, expected %zu to row %zu\n",
                                variant_names[v], got, got_next, n, a_end);
                    }
                }
                if (v_scalar_sweep_matches(&a, bp, a_begin, a_end, b_begin, b_end, reach, within,
                                           dims, tight, er, ec, rows, cols, &partial_calls))
                    pairs_seen += (long long)n;
                free(er);
                free(ec);
                free(rows);
                free(cols);
                box_set_free(&a);
                if (!within) box_set_free(&b);
                REQUIRE(test_failures == failures_before);
            }
        }
    }
    printf("boxes_sweep_random: %lld pairs, %lld calls stopped early for room\n", pairs_seen,
           partial_calls);
    CHECK(pairs_seen > 1000);
    CHECK(partial_calls > 10);
}

/* ---- selection by a plane ------------------------------------------------------------------ */

/* The cross kernel's contract by hand: a's entries that reach b's bounds against b's entries that
 * reach a's bounds, rows ascending, columns ascending within a row. */
static size_t expect_cross(const box_set *a, size_t a_begin, size_t a_end, const float a_lo[3],
                           const float a_hi[3], const box_set *b, size_t b_begin, size_t b_end,
                           const float b_lo[3], const float b_hi[3], int dims, uint32_t *rows,
                           uint32_t *cols) {
    size_t n = 0;
    for (size_t r = a_begin; r < a_end; r++) {
        float qmin[3], qmax[3];
        box_get(a, r, dims, qmin, qmax);
        if (!simd_pair_box_box(qmin, qmax, b_lo, b_hi, dims)) continue;
        for (size_t i = b_begin; i < b_end; i++) {
            float mn[3], mx[3];
            box_get(b, i, dims, mn, mx);
            if (simd_pair_box_box(mn, mx, a_lo, a_hi, dims) &&
                simd_pair_box_box(qmin, qmax, mn, mx, dims)) {
                rows[n] = (uint32_t)r;
                cols[n++] = (uint32_t)i;
            }
        }
    }
    return n;
}

/* A random box around part of a set: the bounds of some of its entries, grown or shrunk. */
static void rng_bounds(uint64_t *state, const box_set *s, size_t begin, size_t end, int dims,
                       float lo[3], float hi[3]) {
    for (int k = 0; k < 3; k++) {
        lo[k] = k < dims ? INFINITY : 0.0f;
        hi[k] = k < dims ? -INFINITY : 0.0f;
    }
    for (size_t i = begin; i < end; i++) {
        if (rng_below(state, 3) == 0) continue;
        float mn[3], mx[3];
        box_get(s, i, dims, mn, mx);
        for (int k = 0; k < dims; k++) {
            lo[k] = mn[k] < lo[k] ? mn[k] : lo[k];
            hi[k] = mx[k] > hi[k] ? mx[k] : hi[k];
        }
    }
    if (rng_below(state, 3) == 0) { /* an empty set's bounds, inverted */
        for (int k = 0; k < dims; k++) {
            lo[k] = INFINITY;
            hi[k] = -INFINITY;
        }
    }
}

TEST(boxes_cross_random) {
    int failures_before = test_failures;
    long long pairs_seen = 0, narrowed = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 7919 + (uint64_t)dims;
            int style = (int)(seed % STYLE_COUNT);
            /* Up to the kernel's limit on each side, often exactly at it or at a chunk edge. */
            size_t a_begin = rng_below(&state, 9), b_begin = rng_below(&state, 9);
            size_t a_len = rng_below(&state, 4) == 0 ? SIMD_CROSS_MAX : rng_below(&state, 65);
            size_t b_len =
                rng_below(&state, 4) == 0 ? 8 * rng_below(&state, 9) : rng_below(&state, 65);
            size_t a_end = a_begin + a_len, b_end = b_begin + b_len;
            TEST_CONTEXT("seed %llu dims %d a [%zu, %zu) b [%zu, %zu)", (unsigned long long)seed,
                         dims, a_begin, a_end, b_begin, b_end);
            box_set a, b;
            box_set_init(&a, a_end + SIMD_PAD, dims);
            box_set_init(&b, b_end + SIMD_PAD, dims);
            fill_boxes(&a, a_end, &state, style, dims);
            fill_boxes(&b, b_end, &state, style, dims);
            float a_lo[3], a_hi[3], b_lo[3], b_hi[3];
            rng_bounds(&state, &a, a_begin, a_end, dims, a_lo, a_hi);
            rng_bounds(&state, &b, b_begin, b_end, dims, b_lo, b_hi);
            size_t capacity = a_len * b_len + SIMD_PAD;
            uint32_t *er = ids_new(capacity), *ec = ids_new(capacity);
            uint32_t *rows = ids_new(capacity), *cols = ids_new(capacity);
            size_t n = expect_cross(&a, a_begin, a_end, a_lo, a_hi, &b, b_begin, b_end, b_lo, b_hi,
                                    dims, er, ec);
            for (int v = 0; v < VARIANT_COUNT; v++) {
                const simd_kernels *k = variant(v);
                if (!k) continue;
                size_t got = k->boxes_cross_pairs(&a.cols, a_begin, a_end, a_lo, a_hi, &b.cols,
                                                  b_begin, b_end, b_lo, b_hi, dims, rows, cols);
                if (!same_ids(rows, got, er, n) || !same_ids(cols, got, ec, n)) {
                    CHECK(0);
                    fprintf(stderr, "  %s: %zu pairs, expected %zu\n", variant_names[v], got, n);
                }
            }
            /* Pairs the bounds ruled out: all pairs of the two ranges minus the kept ones. */
            size_t all = 0;
            for (size_t r = a_begin; r < a_end; r++) {
                float qmin[3], qmax[3];
                box_get(&a, r, dims, qmin, qmax);
                for (size_t i = b_begin; i < b_end; i++) {
                    float mn[3], mx[3];
                    box_get(&b, i, dims, mn, mx);
                    all += (size_t)simd_pair_box_box(qmin, qmax, mn, mx, dims);
                }
            }
            pairs_seen += (long long)n;
            narrowed += all > n;
            free(er);
            free(ec);
            free(rows);
            free(cols);
            box_set_free(&a);
            box_set_free(&b);
            REQUIRE(test_failures == failures_before);
        }
    }
    printf("boxes_cross_random: %lld pairs; %lld cases where the bounds ruled pairs out\n",
           pairs_seen, narrowed);
    CHECK(pairs_seen > 1000);
    CHECK(narrowed > 50);
}

/* The frontier kernel against the pair predicate, lane by lane: random blocks (some lanes empty,
 * as a pyramid's padding is), random queries, entries naming blocks and queries in any order. */
TEST(blocks_vs_boxes_random) {
    int failures_before = test_failures;
    long long lanes = 0, hits = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 31337 + (uint64_t)dims;
            int style = (int)(seed % STYLE_COUNT);
            size_t nblocks = 1 + rng_below(&state, 12), nq = 1 + rng_below(&state, 16);
            size_t count = rng_below(&state, 40);
            float *blocks = malloc(nblocks * 48 * sizeof(float));
            float(*qmin)[3] = malloc(nq * sizeof *qmin), (*qmax)[3] = malloc(nq * sizeof *qmax);
            uint32_t *pairs = malloc((2 * count + 1) * sizeof(uint32_t));
            REQUIRE(blocks && qmin && qmax && pairs);
            for (size_t b = 0; b < nblocks; b++) {
                for (int l = 0; l < 8; l++) {
                    float mn[3], mx[3];
                    rng_box(&state, style, mn, mx);
                    if (rng_below(&state, 6) == 0) /* an empty lane: +inf min, -inf max */
                        for (int k = 0; k < 3; k++) {
                            mn[k] = INFINITY;
                            mx[k] = -INFINITY;
                        }
                    for (int k = 0; k < 3; k++) {
                        blocks[b * 48 + 8 * (size_t)k + (size_t)l] = mn[k];
                        blocks[b * 48 + 24 + 8 * (size_t)k + (size_t)l] = mx[k];
                    }
                }
            }
            for (size_t q = 0; q < nq; q++) {
                rng_box(&state, style, qmin[q], qmax[q]);
                if (rng_below(&state, 3) == 0) /* larger queries now and then */
                    for (int k = 0; k < 3; k++) qmax[q][k] += 3.0f * (qmax[q][k] - qmin[q][k]);
            }
            for (size_t e = 0; e < count; e++) {
                pairs[2 * e] = (uint32_t)rng_below(&state, nblocks);
                pairs[2 * e + 1] = (uint32_t)rng_below(&state, nq);
            }
            uint8_t expect[40], got[40];
            for (size_t e = 0; e < count; e++) {
                const float *b = blocks + (size_t)pairs[2 * e] * 48;
                unsigned m = 0;
                for (int l = 0; l < 8; l++) {
                    float mn[3], mx[3];
                    for (int k = 0; k < 3; k++) {
                        mn[k] = b[8 * k + l];
                        mx[k] = b[24 + 8 * k + l];
                    }
                    m |= (unsigned)simd_pair_box_box(qmin[pairs[2 * e + 1]], qmax[pairs[2 * e + 1]],
                                                     mn, mx, dims)
                         << l;
                }
                expect[e] = (uint8_t)m;
                lanes += 8;
                hits += __builtin_popcount(m);
            }
            for (int v = 0; v < VARIANT_COUNT; v++) {
                const simd_kernels *k = variant(v);
                if (!k) continue;
                memset(got, 0xAA, sizeof got);
                k->blocks_vs_boxes(blocks, pairs, count, (const float(*)[3])qmin,
                                   (const float(*)[3])qmax, dims, got);
                for (size_t e = 0; e < count; e++) {
                    if (got[e] != expect[e]) {
                        CHECK(0);
                        fprintf(
                            stderr, "  %s seed %llu dims %d entry %zu: mask %02x, expected %02x\n",
                            variant_names[v], (unsigned long long)seed, dims, e, got[e], expect[e]);
                        break;
                    }
                }
            }
            free(blocks);
            free(qmin);
            free(qmax);
            free(pairs);
            REQUIRE(test_failures == failures_before);
        }
    }
    printf("blocks_vs_boxes_random: %lld of %lld lanes hit\n", hits, lanes);
    CHECK(hits > lanes / 20 && hits < lanes - lanes / 20);
}

/* Bounds of random ranges (exactly allocated, so AddressSanitizer sees any read past the end),
 * with signed zeros among the values: every variant against a naive minimum and maximum, and
 * bit for bit against the scalar twin. */
TEST(boxes_bounds_random) {
    int failures_before = test_failures;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        uint64_t state = seed * 7919;
        int style = (int)(seed % STYLE_COUNT);
        size_t begin = rng_below(&state, 11), end = begin + rng_below(&state, 70);
        box_set b;
        box_set_init(&b, end, 3);
        for (size_t i = 0; i < end; i++) {
            float mn[3], mx[3];
            rng_box(&state, style, mn, mx);
            for (int k = 0; k < 3; k++) {
                if (rng_below(&state, 5) == 0) mn[k] = rng_below(&state, 2) ? -0.0f : 0.0f;
                if (rng_below(&state, 5) == 0) mx[k] = rng_below(&state, 2) ? -0.0f : 0.0f;
            }
            box_set_put(&b, i, mn, mx, 3);
        }
        float want_lo[3], want_hi[3], twin_lo[3], twin_hi[3];
        for (int k = 0; k < 3; k++) {
            want_lo[k] = INFINITY;
            want_hi[k] = -INFINITY;
            for (size_t i = begin; i < end; i++) {
                want_lo[k] = fminf(want_lo[k], b.min[k][i]);
                want_hi[k] = fmaxf(want_hi[k], b.max[k][i]);
            }
        }
        simd_boxes_bounds_scalar(&b.cols, begin, end, twin_lo, twin_hi);
        for (int v = 0; v < VARIANT_COUNT; v++) {
            const simd_kernels *kern = variant(v);
            if (!kern) continue;
            TEST_CONTEXT("seed %llu [%zu, %zu) variant %s", (unsigned long long)seed, begin, end,
                         variant_names[v]);
            float lo[3], hi[3];
            kern->boxes_bounds(&b.cols, begin, end, lo, hi);
            for (int k = 0; k < 3; k++) {
                CHECK(lo[k] == want_lo[k] && hi[k] == want_hi[k]);
                CHECK(memcmp(&lo[k], &twin_lo[k], sizeof(float)) == 0);
                CHECK(memcmp(&hi[k], &twin_hi[k], sizeof(float)) == 0);
            }
        }
        box_set_free(&b);
        REQUIRE(test_failures == failures_before);
    }
}

/* The octree's keys (simd_cell_keys), every variant against a plain reference: frexp for the
 * first level tried, then one level at a time up to the root, and the code interleaved bit by
 * bit. The grids are the build's (a power-of-two root about the boxes' bounds, or larger), the
 * looseness from strict to 4, and the boxes of every size, many with an edge on a cell's loose
 * border or a point on a cell's corner, so that the closed tests meet their equalities. */
static int ref_ceil_log2(double x) {
    int e;
    double f = frexp(x, &e);
    return f == 0.5 ? e - 1 : e;
}

static uint64_t ref_cell_key(const simd_cell_grid *g, const float *box) {
    int dims = g->dims, depth = g->depth;
    double umin[3], umax[3], c[3], ext = 0.0;
    for (int k = 0; k < dims; k++) {
        umin[k] = ((double)box[k] - g->origin[k]) * g->scale;
        umax[k] = ((double)box[4 + k] - g->origin[k]) * g->scale;
        ext = fmax(ext, umax[k] - umin[k]);
        c[k] = fmin(fmax(umin[k] * 0.5 + umax[k] * 0.5, 0.0), g->top);
    }
    int level = g->max_level;
    if (ext > 0.0 && depth - ref_ceil_log2(ext / g->loose) < level)
        level = depth - ref_ceil_log2(ext / g->loose);
    if (level < 0) level = 0;
    for (; level > 0; level--) {
        double size = ldexp(1.0, depth - level), m = g->margin * size;
        bool holds = true;
        for (int k = 0; k < dims; k++) {
            double lo = floor(c[k] / size) * size;
            holds = holds && umin[k] >= lo - m && umax[k] <= lo + size + m;
        }
        if (holds) break;
    }
    uint64_t code = 0;
    for (int k = 0; k < dims; k++) {
        uint64_t cell = (uint64_t)floor(c[k] / ldexp(1.0, depth - level)) << (depth - level);
        for (int b = 0; b * dims + k < 64 - g->level_bits; b++)
            code |= (cell >> b & 1u) << (b * dims + k);
    }
    return code << g->level_bits | (uint64_t)level;
}

TEST(cell_keys_random) {
    enum { N = 203 };
    static const float loose[] = {1.0f, 1.25f, 1.5f, 2.0f, 4.0f};
    float *boxes = aligned_alloc(32, N * 8 * sizeof(float));
    uint32_t *ids = ids_new(N);
    uint64_t want[N], got[N];
    long long keys = 0, bordered = 0, levels[3] = {0, 0, 0};
    for (uint64_t seed = 1; seed <= 400; seed++) {
        uint64_t state = seed * 6151;
        int dims = 2 + (int)(seed & 1), style = (int)(seed / 2 % STYLE_COUNT);
        simd_cell_grid g;
        g.dims = dims;
        g.depth = dims == 3 ? 19 : 29;
        g.max_level =
            rng_below(&state, 4) == 0 ? (int)rng_below(&state, (uint32_t)g.depth + 1) : g.depth;
        g.margin = ((double)loose[rng_below(&state, 5)] - 1.0) * 0.5;
        g.loose = 1.0 + 2.0 * g.margin;
        g.level_bits = 5;
        g.top = ldexp(1.0, g.depth) - 1.0;
        /* The root: about a random centre, a power of two wide (the build's choose_root). */
        double side = ldexp(1.0, (int)rng_below(&state, 40) - 20);
        if (style == STYLE_WIDE) side = ldexp(1.0, (int)rng_below(&state, 200) - 100);
        g.scale = ldexp(1.0, g.depth) / side;
        double centre[3];
        for (int k = 0; k < 3; k++) {
            centre[k] = (double)rng_coord(&state, style);
            g.origin[k] = centre[k] - side * 0.5;
        }
        TEST_CONTEXT("seed %llu dims %d style %d margin %g max_level %d side %g",
                     (unsigned long long)seed, dims, style, g.margin, g.max_level, side);
        for (size_t i = 0; i < N; i++) {
            float *b = boxes + 8 * i;
            b[3] = b[7] = NAN; /* unused: must not matter */
            for (int k = 0; k < 3; k++) {
                double lo, hi;
                uint32_t kind = rng_below(&state, 4);
                int level = 1 + (int)rng_below(&state, (uint32_t)g.depth);
                double cell = ldexp(1.0, g.depth - level); /* a cell's width, in grid units */
                if (kind == 0) {                           /* anywhere, of any size */
                    double len = side * ldexp(rng_unit(&state), -(int)rng_below(&state, 40)) * 2.0;
                    lo = g.origin[k] + rng_unit(&state) * side - len * 0.5;
                    hi = lo + len;
                } else { /* an edge on a cell's loose border, or a point on its corner */
                    double at = (double)rng_below(&state, 1u << (level < 8 ? level : 8)) * cell;
                    double m = kind == 1 ? g.margin * cell : 0.0;
                    lo = (at - m) / g.scale + g.origin[k];
                    hi = kind == 3 ? lo : (at + cell + m) / g.scale + g.origin[k];
                    if (kind == 2) hi = lo + (hi - lo) * rng_unit(&state);
                    bordered++;
                }
                b[k] = (float)lo;
                b[4 + k] = (float)hi < b[k] ? b[k] : (float)hi;
            }
        }
        size_t n = 0;
        for (size_t i = 0; i < N; i++)
            if (rng_below(&state, 6) != 0)
                ids[n++] = (uint32_t)(rng_below(&state, 5) == 0 ? N - 1 - i : i);
        for (size_t j = 0; j < n; j++) {
            want[j] = ref_cell_key(&g, boxes + 8 * (size_t)ids[j]);
            int lv = (int)(want[j] & 31u);
            levels[lv == 0 ? 0 : lv == g.max_level ? 2 : 1]++;
        }
        keys += (long long)n;
        for (int v = 0; v < VARIANT_COUNT; v++) {
            const simd_kernels *kern = variant(v);
            if (!kern) continue;
            memset(got, 0xa5, sizeof got);
            kern->cell_keys(&g, boxes, ids, n, got);
            for (size_t j = 0; j < n; j++) {
                TEST_CONTEXT("seed %llu dims %d style %d margin %g variant %s box %u",
                             (unsigned long long)seed, dims, style, g.margin, variant_names[v],
                             ids[j]);
                REQUIRE(got[j] == want[j]);
            }
        }
    }
    printf("cell_keys_random: %lld keys, %lld bordered sides; at the root %lld, between %lld, "
           "at max_level %lld\n",
           keys, bordered, levels[0], levels[1], levels[2]);
    CHECK(levels[0] > 0 && levels[1] > keys / 4 && levels[2] > 0);
    free(ids);
    free(boxes);
}

/* Validation of a caller's batch: random valid boxes and spheres (signed zeros, subnormals and
 * the largest floats among them) with a few bad elements planted (NaN, infinities, an inverted
 * box, a negative radius), in columns allocated exactly to the range's end so that
 * AddressSanitizer sees any read past it. Every variant must name the first bad position that a
 * plain loop over the definition finds, or the end. */
static float valid_value(uint64_t *state) {
    static const float special[] = {0.0f, -0.0f, 1e-40f, -1e-40f, FLT_MAX, -FLT_MAX, 1.0f};
    if (rng_below(state, 8) == 0) return special[rng_below(state, 7)];
    return (float)rng_below(state, 2001) - 1000.0f;
}

static float bad_value(uint64_t *state) {
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    return bad[rng_below(state, 3)];
}

/* Streamed copies land exactly in [dst, dst + count) from every alignment of dst (plain stores
 * before a vector boundary and after the last whole vector, streamed ones between), NaN payloads
 * and signed zeros included; the guard values around the range stay. */
TEST(stream_floats_random) {
    enum { ROOM = 160, GUARD = 8 };
    float *buf = aligned_alloc(64, (ROOM + 2 * GUARD) * sizeof(float));
    float src[ROOM];
    REQUIRE(buf != NULL);
    for (uint64_t seed = 1; seed <= 300; seed++) {
        uint64_t state = seed * 7919;
        size_t offset = rng_below(&state, 17), count = rng_below(&state, ROOM - 16);
        for (size_t i = 0; i < count; i++) {
            uint32_t bits = (uint32_t)rng_below(&state, 0xffffffffu);
            memcpy(&src[i], &bits, sizeof bits);
        }
        for (int v = 0; v < VARIANT_COUNT; v++) {
            const simd_kernels *kern = variant(v);
            if (!kern) continue;
            TEST_CONTEXT("seed %llu offset %zu count %zu variant %s", (unsigned long long)seed,
                         offset, count, variant_names[v]);
            memset(buf, 0xa5, (ROOM + 2 * GUARD) * sizeof(float));
            float *dst = buf + GUARD + offset;
            kern->stream_floats(dst, src, count);
            kern->stream_fence();
            CHECK(memcmp(dst, src, count * sizeof(float)) == 0);
            const unsigned char *bytes = (const unsigned char *)buf;
            size_t first = (GUARD + offset) * sizeof(float), last = first + count * sizeof(float);
            bool guards = true;
            for (size_t b = 0; b < (ROOM + 2 * GUARD) * sizeof(float); b++)
                if (b < first || b >= last) guards = guards && bytes[b] == 0xa5;
            CHECK(guards);
        }
    }
    free(buf);
}

TEST(first_invalid_random) {
    int failures_before = test_failures;
    long long planted = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        uint64_t state = seed * 104729;
        int dims = 2 + (int)(seed % 2);
        size_t begin = rng_below(&state, 9), end = begin + rng_below(&state, 60);
        float *lo[3], *hi[3], *c[3], *r = malloc((end ? end : 1) * sizeof(float));
        for (int k = 0; k < 3; k++) {
            lo[k] = malloc((end ? end : 1) * sizeof(float));
            hi[k] = malloc((end ? end : 1) * sizeof(float));
            c[k] = malloc((end ? end : 1) * sizeof(float));
        }
        for (size_t i = 0; i < end; i++) {
            for (int k = 0; k < 3; k++) {
                float a = valid_value(&state), b = valid_value(&state);
                lo[k][i] = a < b ? a : b;
                hi[k][i] = a < b ? b : a;
                c[k][i] = valid_value(&state);
            }
            float rv = valid_value(&state);
            r[i] = rv < 0.0f ? -rv : rv;
            if (rng_below(&state, 40) == 0) r[i] = -0.0f;
        }
        /* Up to three bad elements; some only on the unused z axis in 2D (not bad there). */
        for (int p = (int)rng_below(&state, 4); p > 0 && end > begin; p--) {
            size_t i = begin + rng_below(&state, end - begin);
            int k = (int)rng_below(&state, 3);
            switch (rng_below(&state, 4)) {
            case 0:
                lo[k][i] = bad_value(&state);
                break;
            case 1:
                hi[k][i] = bad_value(&state);
                break;
            case 2:
                if (lo[k][i] < hi[k][i]) {
                    float t = lo[k][i];
                    lo[k][i] = hi[k][i];
                    hi[k][i] = t;
                }
                break;
            default:
                c[k][i] = bad_value(&state);
                break;
            }
            switch (rng_below(&state, 3)) {
            case 0:
                r[i] = bad_value(&state);
                break;
            case 1:
                r[i] = -1.0f - (float)rng_below(&state, 5);
                break;
            default:
                break;
            }
            planted++;
        }
        size_t want_box = end, want_sphere = end;
        for (size_t i = end; i-- > begin;) {
            bool box_ok = true, sphere_ok = isfinite(r[i]) && r[i] >= 0.0f;
            for (int k = 0; k < dims; k++) {
                box_ok = box_ok && isfinite(lo[k][i]) && isfinite(hi[k][i]) && lo[k][i] <= hi[k][i];
                sphere_ok = sphere_ok && isfinite(c[k][i]);
            }
            if (!box_ok) want_box = i;
            if (!sphere_ok) want_sphere = i;
        }
        const float *const blo[3] = {lo[0], lo[1], lo[2]}, *const bhi[3] = {hi[0], hi[1], hi[2]};
        const float *const sc[3] = {c[0], c[1], c[2]};
        for (int v = 0; v < VARIANT_COUNT; v++) {
            const simd_kernels *kern = variant(v);
            if (!kern) continue;
            TEST_CONTEXT("seed %llu dims %d [%zu, %zu) variant %s", (unsigned long long)seed, dims,
                         begin, end, variant_names[v]);
            CHECK(kern->boxes_first_invalid(blo, bhi, begin, end, dims) == want_box);
            CHECK(kern->spheres_first_invalid(sc, r, begin, end, dims) == want_sphere);
        }
        for (int k = 0; k < 3; k++) {
            free(lo[k]);
            free(hi[k]);
            free(c[k]);
        }
        free(r);
        REQUIRE(test_failures == failures_before);
    }
    printf("first_invalid_random: %lld bad elements planted\n", planted);
    CHECK(planted > 200);
}

TEST(boxes_select_random) {
    int failures_before = test_failures;
    long long kept = 0, seen = 0;
    for (uint64_t seed = 1; seed <= 100; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 15485863 + (uint64_t)dims;
            int style = (int)(seed % STYLE_COUNT);
            size_t begin = rng_below(&state, 13), end = begin + rng_below(&state, 50);
            int axis = (int)rng_below(&state, (uint32_t)dims), side = (int)rng_below(&state, 2);
            TEST_CONTEXT("seed %llu dims %d [%zu, %zu) axis %d side %d", (unsigned long long)seed,
                         dims, begin, end, axis, side);
            box_set b;
            box_set_init(&b, end + SIMD_PAD, dims);
            fill_boxes(&b, end, &state, style, dims);
            uint32_t *ids = ids_new(end + SIMD_PAD);
            for (size_t i = 0; i < end + SIMD_PAD; i++) ids[i] = (uint32_t)scene_splitmix64(&state);
            /* A plane at some box's bound, so that ties (which neither side keeps) occur. */
            float plane =
                end > begin
                    ? (rng_below(&state, 2)
                           ? b.min
                           : b.max)[axis][begin + rng_below(&state, (uint32_t)(end - begin))]
                    : 0.0f;
            size_t at = rng_below(&state, 5), room = at + (end - begin) + SIMD_PAD;
            box_set expect, got;
            box_set_init(&expect, room, dims);
            box_set_init(&got, room, dims);
            uint32_t *expect_ids = ids_new(room), *got_ids = ids_new(room);
            size_t n = 0;
            for (size_t i = begin; i < end; i++) {
                float mn[3], mx[3];
                box_get(&b, i, dims, mn, mx);
                if (side == 0 ? mn[axis] < plane : mx[axis] > plane) {
                    box_set_put(&expect, at + n, mn, mx, dims);
                    expect_ids[at + n++] = ids[i];
                }
            }
            kept += (long long)n;
            seen += (long long)(end - begin);
            for (int v = 0; v < VARIANT_COUNT; v++) {
                const simd_kernels *k = variant(v);
                if (!k) continue;
                size_t count = k->boxes_select(&b.cols, ids, begin, end, dims, axis, plane, side,
                                               got.min, got.max, got_ids, at);
                int same = count == n && same_ids(got_ids + at, count, expect_ids + at, n);
                for (int d = 0; d < dims && same; d++)
                    same = memcmp(got.min[d] + at, expect.min[d] + at, n * sizeof(float)) == 0 &&
                           memcmp(got.max[d] + at, expect.max[d] + at, n * sizeof(float)) == 0;
                if (!same) {
                    CHECK(0);
                    fprintf(stderr, "  %s: kept %zu, expected %zu\n", variant_names[v], count, n);
                }
            }
            free(ids);
            free(expect_ids);
            free(got_ids);
            box_set_free(&expect);
            box_set_free(&got);
            box_set_free(&b);
            REQUIRE(test_failures == failures_before);
        }
    }
    printf("boxes_select_random: kept %lld of %lld\n", kept, seen);
    CHECK(kept > seen / 5);
    CHECK(kept < seen - seen / 5);
}

/* One box against one query, expected outcome given per dims. The box is placed at every lane
 * of a sentinel-filled array and at both ends of ranges, so each lane and the tail mask see it. */
static void check_box_case(const float qmin[3], const float qmax[3], const float mn[3],
                           const float mx[3], int expect2, int expect3) {
    for (int dims = 2; dims <= 3; dims++) {
        int expect = dims == 2 ? expect2 : expect3;
        CHECK_EQ_INT(simd_pair_box_box(qmin, qmax, mn, mx, dims), expect);
        CHECK_EQ_INT(simd_pair_box_box(mn, mx, qmin, qmax, dims), expect); /* symmetric */
        box_set b;
        box_set_init(&b, 24 + SIMD_PAD, dims);
        for (size_t at = 0; at < 24; at++) {
            for (size_t i = 0; i < b.n; i++) box_set_sentinel(&b, i, dims);
            box_set_put(&b, at, mn, mx, dims);
            check_box_range(qmin, qmax, &b, 0, 24, dims);
            check_box_range(qmin, qmax, &b, at, at + 1, dims);
            check_box_range(qmin, qmax, &b, at > 5 ? at - 5 : 0, at + 1, dims);
            if (at > 0) check_box_range(qmin, qmax, &b, at - 1, at, dims); /* must not see it */
        }
        box_set_free(&b);
    }
}

TEST(box_vs_boxes_edges) {
    const float unit_lo[3] = {0, 0, 0}, unit_hi[3] = {1, 1, 1};
    const float above1 = nextafterf(1.0f, 2.0f);
    TEST_CONTEXT("touching corner");
    check_box_case(unit_lo, unit_hi, (const float[3]){1, 1, 1}, (const float[3]){2, 2, 2}, 1, 1);
    TEST_CONTEXT("touching face, zero thickness");
    check_box_case(unit_lo, unit_hi, (const float[3]){-1, 0, 0.5f}, (const float[3]){0, 1, 0.5f}, 1,
                   1);
    TEST_CONTEXT("one ulp apart");
    check_box_case(unit_lo, unit_hi, (const float[3]){above1, 0, 0}, (const float[3]){2, 1, 1}, 0,
                   0);
    TEST_CONTEXT("point inside, point on corner");
    check_box_case(unit_lo, unit_hi, (const float[3]){0.5f, 0.5f, 0.5f},
                   (const float[3]){0.5f, 0.5f, 0.5f}, 1, 1);
    check_box_case(unit_lo, unit_hi, (const float[3]){1, 0, 1}, (const float[3]){1, 0, 1}, 1, 1);
    TEST_CONTEXT("zero-size query");
    check_box_case((const float[3]){1, 1, 1}, (const float[3]){1, 1, 1}, (const float[3]){1, 1, 1},
                   (const float[3]){2, 2, 2}, 1, 1);
    check_box_case((const float[3]){1, 1, 1}, (const float[3]){1, 1, 1},
                   (const float[3]){above1, 1, 1}, (const float[3]){2, 2, 2}, 0, 0);
    TEST_CONTEXT("z decides: 2D ignores it");
    check_box_case(unit_lo, unit_hi, (const float[3]){0, 0, 2}, (const float[3]){1, 1, 3}, 1, 0);
    TEST_CONTEXT("whole float range");
    check_box_case(unit_lo, unit_hi, (const float[3]){-FLT_MAX, -FLT_MAX, -FLT_MAX},
                   (const float[3]){FLT_MAX, FLT_MAX, FLT_MAX}, 1, 1);
    TEST_CONTEXT("sentinel box");
    check_box_case(unit_lo, unit_hi, (const float[3]){INFINITY, INFINITY, INFINITY},
                   (const float[3]){-INFINITY, -INFINITY, -INFINITY}, 0, 0);
    check_box_case((const float[3]){-FLT_MAX, -FLT_MAX, -FLT_MAX},
                   (const float[3]){FLT_MAX, FLT_MAX, FLT_MAX},
                   (const float[3]){INFINITY, INFINITY, INFINITY},
                   (const float[3]){-INFINITY, -INFINITY, -INFINITY}, 0, 0);
    TEST_CONTEXT("huge coordinates");
    const float h = 1e30f, h2 = 2e30f, h3 = 3e30f;
    check_box_case((const float[3]){h, h, h}, (const float[3]){h2, h2, h2},
                   (const float[3]){h2, h, h}, (const float[3]){h3, h2, h2}, 1, 1);
    check_box_case((const float[3]){h, h, h}, (const float[3]){h2, h2, h2},
                   (const float[3]){nextafterf(h2, INFINITY), h, h}, (const float[3]){h3, h2, h2},
                   0, 0);
    check_box_case(unit_lo, unit_hi, (const float[3]){h, 0, 0}, (const float[3]){h2, 1, 1}, 0, 0);
    TEST_CONTEXT("tiny coordinates");
    const float t = 1e-30f, t2 = 2e-30f, t3 = 3e-30f;
    check_box_case((const float[3]){t, t, t}, (const float[3]){t2, t2, t2},
                   (const float[3]){t2, t, t}, (const float[3]){t3, t2, t2}, 1, 1);
    check_box_case((const float[3]){t, t, t}, (const float[3]){t2, t2, t2},
                   (const float[3]){nextafterf(t2, 1.0f), t, t}, (const float[3]){t3, t2, t2}, 0,
                   0);
    check_box_case(unit_lo, unit_hi, (const float[3]){-t, -t, -t}, (const float[3]){t, t, t}, 1, 1);
    check_box_case(unit_lo, unit_hi, (const float[3]){-t2, 0, 0}, (const float[3]){-t, 1, 1}, 0, 0);
}

/* ---- exact tests: random ------------------------------------------------------------------- */

enum { EXACT_SPHERE_SPHERE, EXACT_SPHERE_BOX, EXACT_BOX_SPHERE, EXACT_COUNT };
static const char *const exact_names[EXACT_COUNT] = {"sphere_vs_spheres", "sphere_vs_boxes",
                                                     "box_vs_spheres"};

/* A query for the exact tests: a sphere (qc, qr) or a box (qmin, qmax). */
typedef struct exact_query {
    float qc[3], qr, qmin[3], qmax[3];
} exact_query;

static size_t run_exact(const simd_kernels *k, int test, const exact_query *q, const sphere_set *s,
                        const box_set *b, const uint32_t *ids, size_t count, int dims,
                        uint32_t *out) {
    switch (test) {
    case EXACT_SPHERE_SPHERE:
        return k->sphere_vs_spheres(q->qc, q->qr, &s->cols, ids, count, dims, out);
    case EXACT_SPHERE_BOX:
        return k->sphere_vs_boxes(q->qc, q->qr, &b->cols, ids, count, dims, out);
    default:
        return k->box_vs_spheres(q->qmin, q->qmax, &s->cols, ids, count, dims, out);
    }
}

static int naive_exact(int test, const exact_query *q, const sphere_set *s, const box_set *b,
                       uint32_t id, int dims) {
    float c[3], r, mn[3], mx[3];
    switch (test) {
    case EXACT_SPHERE_SPHERE:
        sphere_get(s, id, dims, c, &r);
        return simd_pair_sphere_sphere(q->qc, q->qr, c, r, dims);
    case EXACT_SPHERE_BOX:
        box_get(b, id, dims, mn, mx);
        return simd_pair_box_sphere(mn, mx, q->qc, q->qr, dims);
    default:
        sphere_get(s, id, dims, c, &r);
        return simd_pair_box_sphere(q->qmin, q->qmax, c, r, dims);
    }
}

/* Every variant against the naive predicate loop, into a separate buffer and in place (out ==
 * ids). Buffers are exactly `count` long, so nothing may be read or written past them. Returns
 * how many ids passed. */
static size_t check_exact(int test, const exact_query *q, const sphere_set *s, const box_set *b,
                          const uint32_t *ids, size_t count, int dims) {
    uint32_t *expect = ids_new(count), *out = ids_new(count), *ids_copy = ids_new(count);
    size_t expect_count = 0;
    for (size_t j = 0; j < count; j++)
        if (naive_exact(test, q, s, b, ids[j], dims)) expect[expect_count++] = ids[j];
    for (int v = 0; v < VARIANT_COUNT; v++) {
        const simd_kernels *k = variant(v);
        if (!k) continue;
        if (count) memcpy(ids_copy, ids, count * sizeof *ids);
        size_t n = run_exact(k, test, q, s, b, ids_copy, count, dims, out);
        size_t n_in_place = run_exact(k, test, q, s, b, ids_copy, count, dims, ids_copy);
        if (!same_ids(out, n, expect, expect_count) ||
            !same_ids(ids_copy, n_in_place, expect, expect_count)) {
            CHECK(same_ids(out, n, expect, expect_count));
            CHECK(same_ids(ids_copy, n_in_place, expect, expect_count));
            fprintf(stderr, "  %s %s: %zu ids, %zu / %zu (in place) passed, expected %zu\n",
                    variant_names[v], exact_names[test], count, n, n_in_place, expect_count);
        }
    }
    free(ids_copy);
    free(out);
    free(expect);
    return expect_count;
}

static void exact_random(int test) {
    int failures_before = test_failures;
    long long passed = 0, tested = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        for (int dims = 2; dims <= 3; dims++) {
            uint64_t state = seed * 104729 + (uint64_t)dims * 31 + (uint64_t)test;
            int style = (int)(seed % STYLE_COUNT);
            size_t pool = 1 + rng_below(&state, 70);
            sphere_set s;
            box_set b;
            sphere_set_init(&s, pool, dims);
            box_set_init(&b, pool, dims);
            for (size_t i = 0; i < pool; i++) {
                float c[3], mn[3], mx[3];
                for (int k = 0; k < 3; k++) c[k] = rng_coord(&state, style);
                sphere_set_put(&s, i, c, rng_length(&state, style), dims);
                rng_box(&state, style, mn, mx);
                if (rng_below(&state, 16) == 0)
                    box_set_sentinel(&b, i, dims);
                else
                    box_set_put(&b, i, mn, mx, dims);
            }
            for (size_t count = 0; count <= 40; count++) {
                TEST_CONTEXT("%s seed %llu dims %d style %d count %zu", exact_names[test],
                             (unsigned long long)seed, dims, style, count);
                exact_query q;
                for (int k = 0; k < 3; k++) q.qc[k] = rng_coord(&state, style);
                q.qr = rng_length(&state, style);
                rng_box(&state, style, q.qmin, q.qmax);
                uint32_t *ids = ids_new(count);
                for (size_t j = 0; j < count; j++) ids[j] = rng_below(&state, (uint32_t)pool);
                passed += (long long)check_exact(test, &q, &s, &b, ids, count, dims);
                tested += (long long)count;
                free(ids);
            }
            sphere_set_free(&s);
            box_set_free(&b);
            REQUIRE(test_failures == failures_before);
        }
    }
    printf("%s: %lld of %lld pass\n", exact_names[test], passed, tested);
    CHECK(passed > tested / 20);
    CHECK(passed < tested - tested / 20);
}

TEST(sphere_vs_spheres_random) {
    exact_random(EXACT_SPHERE_SPHERE);
}

TEST(sphere_vs_boxes_random) {
    exact_random(EXACT_SPHERE_BOX);
}

TEST(box_vs_spheres_random) {
    exact_random(EXACT_BOX_SPHERE);
}

/* Near the boundary: the geometry is built so that d2 and the bound agree to about 48 bits, and
 * one fine parameter steps a few ulps across the boundary, so that a kernel that rounds
 * differently from its scalar twin (another summation order, float squares) flips outcomes. */
static float step_ulps(float x, int steps) {
    for (; steps > 0; steps--) x = nextafterf(x, INFINITY);
    for (; steps < 0; steps++) x = nextafterf(x, -INFINITY);
    return x;
}

static void exact_near_boundary(int test) {
    int failures_before = test_failures;
    long long passed = 0, tested = 0;
    uint64_t state = 977 + (uint64_t)test;
    for (int trial = 0; trial < 3000; trial++) {
        int dims = 2 + trial % 2;
        exact_query q = {{0, 0, 0}, 0, {0, 0, 0}, {0, 0, 0}};
        float c[3] = {0, 0, 0}, mn[3] = {0, 0, 0}, mx[3] = {0, 0, 0}, r = 0;
        double t = 0;
        int fine = (int)rng_below(&state, (uint32_t)dims), flip_fine = (int)rng_below(&state, 2);
        if (test == EXACT_SPHERE_SPHERE) {
            for (int k = 0; k < 3; k++) {
                q.qc[k] = (float)(rng_unit(&state) * 4 - 2);
                c[k] = (float)(rng_unit(&state) * 4 - 2);
            }
            double d2 = 0;
            for (int k = 0; k < dims; k++) {
                double d = (double)q.qc[k] - (double)c[k];
                d2 = k == 0 ? d * d : d2 + d * d;
            }
            t = sqrt(d2);
            q.qr = (float)(t * (0.25 + 0.5 * rng_unit(&state)));
        } else {
            /* A sphere of radius r at distance ~r from a box: exact gaps g_k on the other axes,
             * and on the fine axis a centre near 1 minus a box face near 2^-24, whose difference
             * is exact in double and fine-grained. */
            r = (float)(0.5 + 1.5 * rng_unit(&state));
            double rest = 0;
            for (int k = 0; k < dims; k++) {
                if (k == fine) continue;
                float g = rng_below(&state, 4) ? (float)(rng_unit(&state) * 0.5 * r) : 0.0f;
                rest += (double)g * g;
                int flip = (int)rng_below(&state, 2);
                c[k] = 0;
                mn[k] = flip ? g : -g - 1.0f;
                mx[k] = flip ? g + 1.0f : -g;
            }
            t = sqrt((double)r * r - rest);
            c[fine] = (float)t;
        }
        for (int step = -3; step <= 3; step++) {
            TEST_CONTEXT("%s near boundary trial %d dims %d step %d", exact_names[test], trial,
                         dims, step);
            if (test == EXACT_SPHERE_SPHERE) {
                r = step_ulps((float)(t - (double)q.qr), step);
            } else {
                float face = step_ulps((float)((double)c[fine] - t), step);
                mn[fine] = face - 1.0f;
                mx[fine] = face;
            }
            float cc[3] = {c[0], c[1], c[2]}, bmn[3] = {mn[0], mn[1], mn[2]},
                  bmx[3] = {mx[0], mx[1], mx[2]};
            if (test != EXACT_SPHERE_SPHERE && flip_fine) {
                cc[fine] = -c[fine];
                bmn[fine] = -mx[fine];
                bmx[fine] = -mn[fine];
            }
            sphere_set sp;
            box_set bx;
            sphere_set_init(&sp, 1, dims);
            box_set_init(&bx, 1, dims);
            if (test == EXACT_SPHERE_BOX) {
                memcpy(q.qc, cc, sizeof cc);
                q.qr = r;
                box_set_put(&bx, 0, bmn, bmx, dims);
                sphere_set_put(&sp, 0, cc, r, dims);
            } else if (test == EXACT_BOX_SPHERE) {
                memcpy(q.qmin, bmn, sizeof bmn);
                memcpy(q.qmax, bmx, sizeof bmx);
                sphere_set_put(&sp, 0, cc, r, dims);
                box_set_put(&bx, 0, bmn, bmx, dims);
            } else {
                sphere_set_put(&sp, 0, cc, r, dims);
                box_set_put(&bx, 0, bmn, bmx, dims);
            }
            const uint32_t ids[9] = {0};
            passed += check_exact(test, &q, &sp, &bx, ids, 9, dims) != 0;
            tested++;
            sphere_set_free(&sp);
            box_set_free(&bx);
            REQUIRE(test_failures == failures_before);
        }
    }
    printf("%s near boundary: %lld of %lld pass\n", exact_names[test], passed, tested);
    CHECK(passed > tested / 5);
    CHECK(passed < tested - tested / 5);
}

TEST(sphere_vs_spheres_near_boundary) {
    exact_near_boundary(EXACT_SPHERE_SPHERE);
}

TEST(sphere_vs_boxes_near_boundary) {
    exact_near_boundary(EXACT_SPHERE_BOX);
}

TEST(box_vs_spheres_near_boundary) {
    exact_near_boundary(EXACT_BOX_SPHERE);
}

/* ---- exact tests: edge cases --------------------------------------------------------------- */

/* The filler for the other ids: a sentinel box (never near a sphere), and the first of these
 * spheres that misses the query. */
static const float sentinel_mn[3] = {INFINITY, INFINITY, INFINITY};
static const float sentinel_mx[3] = {-INFINITY, -INFINITY, -INFINITY};
static const float far_centres[4][3] = {
    {1e35f, 1e35f, 1e35f}, {-1e35f, -1e35f, -1e35f}, {3e38f, 3e38f, 3e38f}, {-3e38f, 3e38f, 0}};

/* Object 1 is the case, object 0 the filler; id lists put the case at every position of a
 * 12-long list (a full chunk and a tail) and in a list of just itself. */
static void check_exact_case(int test, const exact_query *q, const float c[3], float r,
                             const float mn[3], const float mx[3], int dims, int expect) {
    sphere_set s;
    box_set b;
    sphere_set_init(&s, 2, dims);
    box_set_init(&b, 2, dims);
    box_set_put(&b, 0, sentinel_mn, sentinel_mx, dims);
    for (int f = 0; f < 4; f++) {
        sphere_set_put(&s, 0, far_centres[f], 0.0f, dims);
        if (!naive_exact(test, q, &s, &b, 0, dims)) break;
    }
    sphere_set_put(&s, 1, c, r, dims);
    box_set_put(&b, 1, mn, mx, dims);
    CHECK(naive_exact(test, q, &s, &b, 0, dims) == 0);
    CHECK_EQ_INT(naive_exact(test, q, &s, &b, 1, dims), expect);
    uint32_t one = 1;
    CHECK_EQ_INT(check_exact(test, q, &s, &b, &one, 1, dims), expect);
    for (size_t at = 0; at < 12; at++) {
        uint32_t ids[12] = {0};
        ids[at] = 1;
        CHECK_EQ_INT(check_exact(test, q, &s, &b, ids, 12, dims), expect);
    }
    sphere_set_free(&s);
    box_set_free(&b);
}

static void sphere_sphere_case(const float ac[3], float ar, const float bc[3], float br,
                               int expect2, int expect3) {
    for (int dims = 2; dims <= 3; dims++) {
        int expect = dims == 2 ? expect2 : expect3;
        CHECK_EQ_INT(simd_pair_sphere_sphere(ac, ar, bc, br, dims), expect);
        CHECK_EQ_INT(simd_pair_sphere_sphere(bc, br, ac, ar, dims), expect);
        exact_query q = {{ac[0], ac[1], ac[2]}, ar, {0, 0, 0}, {0, 0, 0}};
        check_exact_case(EXACT_SPHERE_SPHERE, &q, bc, br, sentinel_mn, sentinel_mx, dims, expect);
    }
}

TEST(sphere_vs_spheres_edges) {
    const float o[3] = {0, 0, 0};
    TEST_CONTEXT("touching: centres 0 and 2, radii 1 and 1");
    sphere_sphere_case(o, 1.0f, (const float[3]){2, 0, 0}, 1.0f, 1, 1);
    sphere_sphere_case(o, 1.0f, (const float[3]){nextafterf(2.0f, 3.0f), 0, 0}, 1.0f, 0, 0);
    TEST_CONTEXT("diagonal: distance 3 in 3D, sqrt(8) in 2D");
    sphere_sphere_case(o, 1.0f, (const float[3]){2, 2, 1}, 2.0f, 1, 1);
    sphere_sphere_case(o, 1.0f, (const float[3]){2, 2, 1}, 1.9375f, 1, 0);
    TEST_CONTEXT("z decides: 2D ignores it");
    sphere_sphere_case((const float[3]){0, 0, 100}, 1.0f, (const float[3]){0, 0, -100}, 1.0f, 1, 0);
    TEST_CONTEXT("radius 0");
    sphere_sphere_case((const float[3]){5, 5, 5}, 0.0f, (const float[3]){5, 5, 5}, 0.0f, 1, 1);
    sphere_sphere_case((const float[3]){5, 5, 5}, 0.0f, (const float[3]){6, 5, 5}, 1.0f, 1, 1);
    sphere_sphere_case((const float[3]){5, 5, 5}, 0.0f, (const float[3]){6, 5, 5}, 0.5f, 0, 0);
    TEST_CONTEXT("tiny: squares underflow in float");
    const float t = 1e-30f;
    sphere_sphere_case((const float[3]){t, 0, 0}, 0.0f, (const float[3]){2.0f * t, 0, 0}, 0.0f, 0,
                       0);
    sphere_sphere_case((const float[3]){t, t, t}, 0.0f, (const float[3]){t, t, t}, 0.0f, 1, 1);
    sphere_sphere_case(o, t, (const float[3]){2.0f * t, 0, 0}, t, 1, 1);
    sphere_sphere_case(o, t, (const float[3]){3e-30f, 0, 0}, t, 0, 0);
    TEST_CONTEXT("huge: squares overflow in float");
    const float h = 1e30f;
    sphere_sphere_case(o, h, (const float[3]){3e30f, 0, 0}, h, 0, 0);
    sphere_sphere_case((const float[3]){-h, 0, 0}, h, (const float[3]){h, 0, 0}, h, 1, 1);
    sphere_sphere_case((const float[3]){-FLT_MAX, 0, 0}, FLT_MAX, (const float[3]){FLT_MAX, 0, 0},
                       FLT_MAX, 1, 1);
    sphere_sphere_case((const float[3]){-FLT_MAX, 0, 0}, FLT_MAX, (const float[3]){FLT_MAX, 0, 0},
                       nextafterf(FLT_MAX, 0.0f), 0, 0);
}

/* A sphere against a box, through both sphere_vs_boxes (sphere query) and box_vs_spheres (box
 * query): the same predicate with the roles swapped. */
static void sphere_box_case(const float mn[3], const float mx[3], const float c[3], float r,
                            int expect2, int expect3) {
    for (int dims = 2; dims <= 3; dims++) {
        int expect = dims == 2 ? expect2 : expect3;
        CHECK_EQ_INT(simd_pair_box_sphere(mn, mx, c, r, dims), expect);
        exact_query q = {{c[0], c[1], c[2]}, r, {0, 0, 0}, {0, 0, 0}};
        check_exact_case(EXACT_SPHERE_BOX, &q, far_centres[0], 0.0f, mn, mx, dims, expect);
        exact_query qb = {{0, 0, 0}, 0.0f, {mn[0], mn[1], mn[2]}, {mx[0], mx[1], mx[2]}};
        check_exact_case(EXACT_BOX_SPHERE, &qb, c, r, sentinel_mn, sentinel_mx, dims, expect);
    }
}

TEST(sphere_box_edges) {
    const float lo[3] = {0, 0, 0}, hi[3] = {2, 2, 2};
    TEST_CONTEXT("touching a face");
    sphere_box_case(lo, hi, (const float[3]){3, 1, 1}, 1.0f, 1, 1);
    sphere_box_case(lo, hi, (const float[3]){3, 1, 1}, nextafterf(1.0f, 0.0f), 0, 0);
    sphere_box_case(lo, hi, (const float[3]){-1, 1, 1}, 1.0f, 1, 1);
    TEST_CONTEXT("inside, radius 0");
    sphere_box_case(lo, hi, (const float[3]){1, 1, 1}, 0.0f, 1, 1);
    sphere_box_case(lo, hi, (const float[3]){2, 0, 2}, 0.0f, 1, 1);
    TEST_CONTEXT("corner: squared distance 3 in 3D, 2 in 2D");
    sphere_box_case(lo, hi, (const float[3]){3, 3, 3}, 1.75f, 1, 1);
    sphere_box_case(lo, hi, (const float[3]){3, 3, 3}, 1.6875f, 1, 0);
    sphere_box_case(lo, hi, (const float[3]){3, 3, 3}, 1.375f, 0, 0);
    TEST_CONTEXT("z decides: 2D ignores it");
    sphere_box_case(lo, hi, (const float[3]){1, 1, 10}, 1.0f, 1, 0);
    TEST_CONTEXT("zero-size box");
    sphere_box_case((const float[3]){1, 1, 1}, (const float[3]){1, 1, 1}, (const float[3]){1, 1, 1},
                    0.0f, 1, 1);
    sphere_box_case((const float[3]){1, 1, 1}, (const float[3]){1, 1, 1}, (const float[3]){2, 1, 1},
                    1.0f, 1, 1);
    sphere_box_case((const float[3]){1, 1, 1}, (const float[3]){1, 1, 1}, (const float[3]){2, 2, 1},
                    1.0f, 0, 0);
    TEST_CONTEXT("tiny: squares underflow in float");
    const float t = 1e-30f;
    const float tlo[3] = {0, 0, 0}, thi[3] = {t, t, t};
    sphere_box_case(tlo, thi, (const float[3]){2.0f * t, 0.5f * t, 0.5f * t}, 0.0f, 0, 0);
    sphere_box_case(tlo, thi, (const float[3]){2.0f * t, 0.5f * t, 0.5f * t}, t, 1, 1);
    sphere_box_case(tlo, thi, (const float[3]){3e-30f, 0.5f * t, 0.5f * t}, t, 0, 0);
    TEST_CONTEXT("huge: squares overflow in float");
    const float h = 1e30f;
    const float hlo[3] = {0, 0, 0}, hhi[3] = {h, h, h};
    sphere_box_case(hlo, hhi, (const float[3]){3e30f, 0, 0}, h, 0, 0);
    sphere_box_case(hlo, hhi, (const float[3]){2.0f * h, 0, 0}, h, 1, 1);
    sphere_box_case(hlo, hhi, (const float[3]){FLT_MAX, 0, h}, FLT_MAX, 1, 1);
    sphere_box_case(hlo, hhi, (const float[3]){FLT_MAX, FLT_MAX, 0}, FLT_MAX, 0, 0);
    sphere_box_case((const float[3]){-FLT_MAX, -FLT_MAX, -FLT_MAX},
                    (const float[3]){-FLT_MAX, -FLT_MAX, -FLT_MAX},
                    (const float[3]){FLT_MAX, FLT_MAX, FLT_MAX}, FLT_MAX, 0, 0);
}

TEST(sphere_box_sentinel) {
    /* A sentinel box (min = +inf, max = -inf) is infinitely far from every sphere. */
    for (int dims = 2; dims <= 3; dims++) {
        TEST_CONTEXT("sentinel dims %d", dims);
        CHECK_EQ_INT(simd_pair_box_sphere(sentinel_mn, sentinel_mx, (const float[3]){0, 0, 0},
                                          FLT_MAX, dims),
                     0);
        exact_query q = {{0, 0, 0}, FLT_MAX, {0, 0, 0}, {0, 0, 0}};
        check_exact_case(EXACT_SPHERE_BOX, &q, far_centres[0], 0.0f, sentinel_mn, sentinel_mx, dims,
                         0);
    }
}

/* ---- predicates ---------------------------------------------------------------------------- */

TEST(pair_predicates) {
    const float a0[3] = {0, 0, 0}, a1[3] = {1, 1, 1};
    CHECK_EQ_INT(simd_pair_box_box(a0, a1, (const float[3]){1, 1, 1}, (const float[3]){2, 2, 2}, 3),
                 1);
    CHECK_EQ_INT(
        simd_pair_box_box(a0, a1, (const float[3]){0.5f, 1.5f, 0}, (const float[3]){0.7f, 2, 1}, 3),
        0);
    CHECK_EQ_INT(simd_pair_box_box(a0, a1, (const float[3]){0.5f, 0.5f, 5},
                                   (const float[3]){0.7f, 0.7f, 6}, 2),
                 1);
    CHECK_EQ_INT(simd_pair_sphere_sphere(a0, 3.0f, (const float[3]){3, 4, 0}, 2.0f, 3), 1);
    CHECK_EQ_INT(simd_pair_sphere_sphere(a0, 3.0f, (const float[3]){3, 4, 0}, 1.5f, 3), 0);
    CHECK_EQ_INT(simd_pair_sphere_sphere(a0, 1.0f, (const float[3]){3, 4, 12}, 12.0f, 3), 1);
    CHECK_EQ_INT(simd_pair_sphere_sphere(a0, 1.0f, (const float[3]){3, 4, 12}, 11.5f, 3), 0);
    CHECK_EQ_INT(simd_pair_sphere_sphere(a0, 1.0f, (const float[3]){3, 4, 12}, 4.0f, 2), 1);
    CHECK_EQ_INT(simd_pair_box_sphere(a0, a1, (const float[3]){4, 5, 0.5f}, 5.0f, 3), 1);
    CHECK_EQ_INT(simd_pair_box_sphere(a0, a1, (const float[3]){4, 5, 0.5f}, 4.9f, 3), 0);
    CHECK_EQ_INT(simd_pair_box_sphere(a0, a1, (const float[3]){4, 5, 13}, 13.0f, 3), 1);
    CHECK_EQ_INT(simd_pair_box_sphere(a0, a1, (const float[3]){4, 5, 13}, 12.9f, 3), 0);
    CHECK_EQ_INT(simd_pair_box_sphere(a0, a1, (const float[3]){4, 5, 13}, 5.0f, 2), 1);

    /* Symmetry on random data: the pair tests do not depend on argument order. */
    int failures_before = test_failures;
    uint64_t state = 42;
    for (int trial = 0; trial < 20000; trial++) {
        int style = trial % STYLE_COUNT, dims = 2 + trial % 2;
        float amin[3], amax[3], bmin[3], bmax[3], ac[3], bc[3];
        rng_box(&state, style, amin, amax);
        rng_box(&state, style, bmin, bmax);
        for (int k = 0; k < 3; k++) {
            ac[k] = rng_coord(&state, style);
            bc[k] = rng_coord(&state, style);
        }
        float ar = rng_length(&state, style), br = rng_length(&state, style);
        TEST_CONTEXT("trial %d", trial);
        CHECK_EQ_INT(simd_pair_box_box(amin, amax, bmin, bmax, dims),
                     simd_pair_box_box(bmin, bmax, amin, amax, dims));
        CHECK_EQ_INT(simd_pair_sphere_sphere(ac, ar, bc, br, dims),
                     simd_pair_sphere_sphere(bc, br, ac, ar, dims));
        REQUIRE(test_failures == failures_before);
    }
}

TEST_MAIN()

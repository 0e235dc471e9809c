/* The scene run's check (check.h). */
#include "check.h"

#include "overlap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool pair_list_push(pair_list *l, uint32_t a, uint32_t b) {
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? l->capacity * 2 : 1024;
        broadphase_pair *p = realloc(l->data, cap * sizeof *p);
        if (!p) return false;
        l->data = p;
        l->capacity = cap;
    }
    l->data[l->count++] = (broadphase_pair){a < b ? a : b, a < b ? b : a};
    return true;
}

static int pair_order(broadphase_pair x, broadphase_pair y) {
    if (x.a != y.a) return x.a < y.a ? -1 : 1;
    if (x.b != y.b) return x.b < y.b ? -1 : 1;
    return 0;
}

static int cmp_pair(const void *a, const void *b) {
    return pair_order(*(const broadphase_pair *)a, *(const broadphase_pair *)b);
}

static void object_text(const checker *c, uint32_t id, char *out, size_t size) {
    if (id >= c->id_limit || c->index_of_id[id] == UINT32_MAX) {
        snprintf(out, size, "id %u (not an object of the scene)", id);
        return;
    }
    const scene *s = c->s;
    uint32_t i = c->index_of_id[id];
    if (s->is_sphere[i]) {
        snprintf(out, size, "id %u = object %u, sphere centre (%.9g, %.9g, %.9g) radius %.9g", id,
                 i, s->center[0][i], s->center[1][i], s->center[2][i], s->radius[i]);
    } else {
        snprintf(out, size, "id %u = object %u, box min (%.9g, %.9g, %.9g) max (%.9g, %.9g, %.9g)",
                 id, i, s->min[0][i], s->min[1][i], s->min[2][i], s->max[0][i], s->max[1][i],
                 s->max[2][i]);
    }
}

/* The exact predicate the engine promises, from simd/overlap.h. */
static int exact_overlap(const scene *s, size_t a, size_t b) {
    int d = s->dimensions;
    float amin[3], amax[3], bmin[3], bmax[3], ac[3], bc[3];
    for (int k = 0; k < 3; k++) {
        amin[k] = s->min[k][a], amax[k] = s->max[k][a], ac[k] = s->center[k][a];
        bmin[k] = s->min[k][b], bmax[k] = s->max[k][b], bc[k] = s->center[k][b];
    }
    bool sa = s->is_sphere[a], sb = s->is_sphere[b];
    if (!sa && !sb) return simd_pair_box_box(amin, amax, bmin, bmax, d);
    if (sa && sb) return simd_pair_sphere_sphere(ac, s->radius[a], bc, s->radius[b], d);
    if (sa) return simd_pair_box_sphere(bmin, bmax, ac, s->radius[a], d);
    return simd_pair_box_sphere(amin, amax, bc, s->radius[b], d);
}

static void describe_pair(checker *c, size_t frame, const char *what, broadphase_pair p,
                          const char *detail) {
    char ta[256], tb[256];
    object_text(c, p.a, ta, sizeof ta);
    object_text(c, p.b, tb, sizeof tb);
    int exact = -1;
    if (p.a < c->id_limit && p.b < c->id_limit && c->index_of_id[p.a] != UINT32_MAX &&
        c->index_of_id[p.b] != UINT32_MAX) {
        exact = exact_overlap(c->s, c->index_of_id[p.a], c->index_of_id[p.b]);
    }
    snprintf(c->message, sizeof c->message,
             "frame %zu: pair (%u, %u) %s%s\n  a: %s\n  b: %s\n  exact predicate: %s", frame, p.a,
             p.b, what, detail, ta, tb,
             exact < 0 ? "n/a"
             : exact   ? "they overlap"
                       : "they do not overlap");
}

/* The method's output must be sorted by (a, b), a < b, without repeats, whatever the check. */
bool check_order(checker *c, size_t frame, const broadphase_pairs *p) {
    for (size_t i = 0; i < p->count; i++) {
        broadphase_pair q = p->data[i];
        if (q.a >= q.b) {
            describe_pair(c, frame, "is not ordered a < b", q, "");
            return false;
        }
        if (i > 0 && pair_order(p->data[i - 1], q) >= 0) {
            describe_pair(c, frame,
                          pair_order(p->data[i - 1], q) == 0 ? "is repeated" : "is out of order", q,
                          "");
            return false;
        }
    }
    return true;
}

/* Both lists sorted; names the first pair present in only one of them. */
bool compare_lists(checker *c, size_t frame, const broadphase_pair *got, size_t got_count,
                   const broadphase_pair *want, size_t want_count, const char *oracle) {
    size_t i = 0, j = 0;
    while (i < got_count || j < want_count) {
        int order = i == got_count ? 1 : j == want_count ? -1 : pair_order(got[i], want[j]);
        if (order == 0) {
            i++, j++;
            continue;
        }
        char detail[200];
        snprintf(detail, sizeof detail, " (%s: %zu pairs, %s: %zu)",
                 broadphase_method_name(c->opt->method), got_count, oracle, want_count);
        if (order < 0) {
            describe_pair(c, frame, "is EXTRA: the method reports it, the oracle does not", got[i],
                          detail);
        } else {
            describe_pair(c, frame, "is MISSING: the oracle reports it, the method does not",
                          want[j], detail);
        }
        return false;
    }
    return true;
}

static uint32_t float_key(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* LSD radix sort of the small objects by min x: a qsort of a million objects every frame would
 * cost more than the step it checks. */
static void sort_by_min_x(checker *c) {
    const scene *s = c->s;
    double total = 0.0;
    for (size_t i = 0; i < s->count; i++) total += (double)s->max[0][i] - (double)s->min[0][i];
    double mean = s->count ? total / (double)s->count : 0.0;
    c->small_count = c->big_count = 0;
    c->max_small_extent = 0.0;
    for (size_t i = 0; i < s->count; i++) {
        double extent = (double)s->max[0][i] - (double)s->min[0][i];
        if (extent > 4.0 * mean) {
            c->big[c->big_count++] = (uint32_t)i;
        } else {
            c->order[c->small_count] = (uint32_t)i;
            c->keys[c->small_count++] = float_key(s->min[0][i]);
            if (extent > c->max_small_extent) c->max_small_extent = extent;
        }
    }
    size_t n = c->small_count;
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((c->keys[i] >> shift) & 255) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) {
            size_t at = count[(c->keys[i] >> shift) & 255]++;
            c->keys_tmp[at] = c->keys[i];
            c->order_tmp[at] = c->order[i];
        }
        uint32_t *t = c->keys;
        c->keys = c->keys_tmp, c->keys_tmp = t;
        t = c->order;
        c->order = c->order_tmp, c->order_tmp = t;
    }
    /* Sorted copies of the bounds keep the sweep's rejections in contiguous memory. */
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < n; i++) {
            c->sorted_min[k][i] = s->min[k][c->order[i]];
            c->sorted_max[k][i] = s->max[k][c->order[i]];
        }
    }
}

static bool bounds_overlap(const scene *s, size_t a, size_t b) {
    for (int k = 0; k < s->dimensions; k++) {
        if (s->min[k][a] > s->max[k][b] || s->min[k][b] > s->max[k][a]) return false;
    }
    return true;
}

static bool oracle_partner(checker *c, uint32_t q, uint32_t j) {
    if (j == q || !bounds_overlap(c->s, q, j) || !exact_overlap(c->s, q, j)) return true;
    return pair_list_push(&c->want, c->ids[q], c->ids[j]);
}

/* Every pair involving one of K random objects, from the exact predicates (sphere bounds in
 * the scene are rounded outwards, so the bounding-box prefilter never drops a true pair), against
 * the method's pairs that involve those objects. */
int check_sampled(checker *c, size_t frame, const broadphase_pairs *got) {
    const scene *s = c->s;
    size_t k_count = c->opt->check_sample < s->count ? c->opt->check_sample : s->count;
    uint64_t rng = c->opt->seed ^ (0xA5A5A5A5ull + frame * 0x9E3779B97F4A7C15ull);
    size_t taken = 0;
    while (taken < k_count) {
        uint32_t i = (uint32_t)(scene_splitmix64(&rng) % s->count);
        if (c->sampled[c->ids[i]]) continue;
        c->sampled[c->ids[i]] = 1;
        c->samples[taken++] = i;
    }
    sort_by_min_x(c);
    c->want.count = c->got.count = 0;
    bool ok = true;
    for (size_t t = 0; t < k_count && ok; t++) {
        uint32_t q = c->samples[t];
        double lo = (double)s->min[0][q] - c->max_small_extent * (1.0 + 1e-6);
        size_t first = 0, last = c->small_count;
        while (first < last) {
            size_t mid = first + (last - first) / 2;
            if ((double)c->sorted_min[0][mid] < lo) {
                first = mid + 1;
            } else {
                last = mid;
            }
        }
        float qmin[3], qmax[3];
        for (int k = 0; k < 3; k++) qmin[k] = s->min[k][q], qmax[k] = s->max[k][q];
        for (size_t k = first; k < c->small_count && ok; k++) {
            if (c->sorted_min[0][k] > qmax[0]) break;
            bool apart = c->sorted_max[0][k] < qmin[0];
            for (int d = 1; d < s->dimensions; d++) {
                apart |= c->sorted_min[d][k] > qmax[d] || c->sorted_max[d][k] < qmin[d];
            }
            if (!apart) ok = oracle_partner(c, q, c->order[k]);
        }
        for (size_t k = 0; k < c->big_count && ok; k++) ok = oracle_partner(c, q, c->big[k]);
    }
    for (size_t i = 0; i < got->count && ok; i++) {
        broadphase_pair p = got->data[i];
        bool mine =
            (p.a < c->id_limit && c->sampled[p.a]) || (p.b < c->id_limit && c->sampled[p.b]);
        if (mine) ok = pair_list_push(&c->got, p.a, p.b);
    }
    for (size_t t = 0; t < k_count; t++) c->sampled[c->ids[c->samples[t]]] = 0;
    if (!ok) {
        snprintf(c->message, sizeof c->message, "frame %zu: out of memory in the sampled check",
                 frame);
        return 0;
    }
    /* A pair of two sampled objects was found from both ends. */
    if (c->want.count) qsort(c->want.data, c->want.count, sizeof *c->want.data, cmp_pair);
    size_t unique = 0;
    for (size_t i = 0; i < c->want.count; i++) {
        if (unique == 0 || pair_order(c->want.data[unique - 1], c->want.data[i]) != 0) {
            c->want.data[unique++] = c->want.data[i];
        }
    }
    c->want.count = unique;
    return compare_lists(c, frame, c->got.data, c->got.count, c->want.data, c->want.count,
                         "exact predicates on sampled objects");
}

bool checker_init(checker *c, const options *o, const scene *s, const uint32_t *ids) {
    memset(c, 0, sizeof *c);
    c->opt = o;
    c->s = s;
    c->ids = ids;
    for (size_t i = 0; i < s->count; i++) {
        if ((size_t)ids[i] + 1 > c->id_limit) c->id_limit = (size_t)ids[i] + 1;
    }
    size_t n = s->count ? s->count : 1, ids_n = c->id_limit ? c->id_limit : 1;
    c->index_of_id = malloc(ids_n * sizeof *c->index_of_id);
    if (!c->index_of_id) return false;
    for (size_t i = 0; i < ids_n; i++) c->index_of_id[i] = UINT32_MAX;
    for (size_t i = 0; i < s->count; i++) c->index_of_id[ids[i]] = (uint32_t)i;
    if (s->count <= o->check_full_limit) return true;
    c->order = malloc(n * sizeof *c->order);
    c->order_tmp = malloc(n * sizeof *c->order_tmp);
    c->keys = malloc(n * sizeof *c->keys);
    c->keys_tmp = malloc(n * sizeof *c->keys_tmp);
    c->big = malloc(n * sizeof *c->big);
    bool ok = true;
    for (int k = 0; k < 3; k++) {
        ok &= (c->sorted_min[k] = malloc(n * sizeof(float))) != NULL;
        ok &= (c->sorted_max[k] = malloc(n * sizeof(float))) != NULL;
    }
    c->samples = malloc(n * sizeof *c->samples);
    c->sampled = calloc(ids_n, 1);
    return c->order && c->order_tmp && c->keys && c->keys_tmp && c->big && ok && c->samples &&
           c->sampled;
}

void checker_free(checker *c) {
    free(c->index_of_id);
    free(c->order);
    free(c->order_tmp);
    free(c->keys);
    free(c->keys_tmp);
    free(c->big);
    for (int k = 0; k < 3; k++) {
        free(c->sorted_min[k]);
        free(c->sorted_max[k]);
    }
    free(c->samples);
    free(c->sampled);
    free(c->want.data);
    free(c->got.data);
}

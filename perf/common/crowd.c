/* Crowds and their neighbourhoods (see crowd.h). */
#include "crowd.h"

#include "broadphase.h"
#include "parallel.h"
#include "scenes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    AGENT_GRAIN = 256, /* agents a worker takes at a time in the routes' own passes */
    SEED_LEAF = 10,    /* the seed's MAX_LEAF_SIZE */
};

/* ---- the crowd ------------------------------------------------------------------------------ */

bool crowd_make(crowd *c, int dims, size_t n, float distance, size_t k, float per_neighbourhood,
                float step, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->dims = dims;
    c->count = n;
    c->distance = distance;
    c->k = k;
    c->step = step;
    /* n agents at the density that puts per_neighbourhood of them within R of one */
    double ratio = (double)n / (double)per_neighbourhood;
    c->radius = (float)((double)distance * (dims == 3 ? cbrt(ratio) : sqrt(ratio)));
    for (int a = 0; a < 3; a++) {
        c->pos[a] = calloc(n ? n : 1, sizeof(float));
        c->goal[a] = calloc(n ? n : 1, sizeof(float));
        if (!c->pos[a] || !c->goal[a]) {
            crowd_free(c);
            return false;
        }
    }
    uint64_t rng = seed;
    for (size_t i = 0; i < n; i++) {
        double p[3], r2;
        do { /* uniform in the disc (ball): drawn in its square (cube) until inside */
            r2 = 0.0;
            for (int a = 0; a < dims; a++) {
                p[a] = (2.0 * (double)scene_uniform(&rng) - 1.0) * c->radius;
                r2 += p[a] * p[a];
            }
        } while (r2 > (double)c->radius * c->radius);
        for (int a = 0; a < dims; a++) {
            c->pos[a][i] = (float)p[a];
            c->goal[a][i] = -(float)p[a];
        }
    }
    return true;
}

void crowd_advance(crowd *c) {
    int dims = c->dims;
    for (size_t i = 0; i < c->count; i++) {
        double d[3] = {0, 0, 0}, len2 = 0.0;
        for (int a = 0; a < dims; a++) {
            d[a] = (double)c->goal[a][i] - c->pos[a][i];
            len2 += d[a] * d[a];
        }
        double len = sqrt(len2);
        if (len <= c->step) { /* there: turn back towards where it came from */
            for (int a = 0; a < dims; a++) {
                c->pos[a][i] = c->goal[a][i];
                c->goal[a][i] = -c->goal[a][i];
            }
            continue;
        }
        for (int a = 0; a < dims; a++) c->pos[a][i] = (float)(c->pos[a][i] + d[a] / len * c->step);
    }
}

void crowd_free(crowd *c) {
    for (int a = 0; a < 3; a++) {
        free(c->pos[a]);
        free(c->goal[a]);
    }
    memset(c, 0, sizeof *c);
}

/* ---- neighbourhoods ------------------------------------------------------------------------- */

bool crowd_sets_make(crowd_sets *s, size_t n, size_t k) {
    s->n = n;
    s->k = k;
    s->ids = malloc((n * k + 1) * sizeof *s->ids);
    s->d2 = malloc((n * k + 1) * sizeof *s->d2);
    s->count = calloc(n + 1, sizeof *s->count);
    return s->ids && s->d2 && s->count;
}

void crowd_sets_free(crowd_sets *s) {
    free(s->ids);
    free(s->d2);
    free(s->count);
    memset(s, 0, sizeof *s);
}

size_t crowd_sets_differ(const crowd_sets *a, const crowd_sets *b) {
    if (a->n != b->n || a->k != b->k) return 0;
    for (size_t i = 0; i < a->n; i++) {
        if (a->count[i] != b->count[i]) return i;
        for (size_t j = 0; j < a->count[i]; j++)
            if (a->ids[i * a->k + j] != b->ids[i * b->k + j] ||
                a->d2[i * a->k + j] != b->d2[i * b->k + j])
                return i;
    }
    return SIZE_MAX;
}

/* Squared centre distance, in double, axes in order (crowd.h). */
static inline double agent_d2(const crowd *c, size_t i, size_t j) {
    double s = 0.0;
    for (int a = 0; a < c->dims; a++) {
        double d = (double)c->pos[a][i] - (double)c->pos[a][j];
        s = s + d * d;
    }
    return s;
}

static inline double range2(const crowd *c) {
    return (double)c->distance * (double)c->distance; /* exact: a float squared */
}

/* Agent j at squared distance d2 offered to a neighbourhood kept sorted by (d2 as float, id) in
 * ids/d2s, *n of k slots used. */
static inline void keep_nearest(uint32_t *ids, float *d2s, uint32_t *n, size_t k, uint32_t j,
                                double d2) {
    float d = (float)d2;
    size_t at = *n;
    if (at == k) {
        if (k == 0 || d > d2s[k - 1] || (d == d2s[k - 1] && j > ids[k - 1])) return;
        at--;
    } else {
        (*n)++;
    }
    while (at > 0 && (d2s[at - 1] > d || (d2s[at - 1] == d && ids[at - 1] > j))) {
        ids[at] = ids[at - 1];
        d2s[at] = d2s[at - 1];
        at--;
    }
    ids[at] = j;
    d2s[at] = d;
}

void crowd_brute(const crowd *c, crowd_sets *out, size_t stride) {
    double r2 = range2(c);
    for (size_t i = 0; i < c->count; i++) out->count[i] = 0;
    for (size_t i = 0; i < c->count; i += stride ? stride : 1) {
        uint32_t *ids = out->ids + i * out->k;
        float *d2s = out->d2 + i * out->k;
        for (size_t j = 0; j < c->count; j++) {
            if (j == i) continue;
            double d2 = agent_d2(c, i, j);
            if (d2 <= r2) keep_nearest(ids, d2s, &out->count[i], out->k, (uint32_t)j, d2);
        }
    }
}

/* ---- the seed's array kd-tree ---------------------------------------------------------------- */

/* Nodes in one array of 2n - 1, each over a range of the reordered agents with their bounds;
 * split on the longest side at its middle, in place; leaves of at most SEED_LEAF agents; the left
 * child follows its parent, the right one comes 2 * (left's agents) later. */
typedef struct seed_node {
    uint32_t begin, end, left, right;
    float lo[3], hi[3];
} seed_node;

typedef struct seed_tree {
    seed_node *nodes;
    uint32_t *agents;
    size_t capacity;
} seed_tree;

static void seed_build(seed_tree *t, const crowd *c, uint32_t node, uint32_t begin, uint32_t end) {
    seed_node *nd = &t->nodes[node];
    nd->begin = begin;
    nd->end = end;
    for (int a = 0; a < 3; a++) {
        nd->lo[a] = nd->hi[a] = a < c->dims ? c->pos[a][t->agents[begin]] : 0.0f;
        for (uint32_t i = begin + 1; a < c->dims && i < end; i++) {
            float v = c->pos[a][t->agents[i]];
            nd->lo[a] = v < nd->lo[a] ? v : nd->lo[a];
            nd->hi[a] = v > nd->hi[a] ? v : nd->hi[a];
        }
    }
    if (end - begin <= SEED_LEAF) return;
    int axis = 0;
    for (int a = 1; a < c->dims; a++)
        if (nd->hi[a] - nd->lo[a] > nd->hi[axis] - nd->lo[axis]) axis = a;
    float split = 0.5f * (nd->lo[axis] + nd->hi[axis]);
    const float *p = c->pos[axis];
    uint32_t left = begin, right = end;
    while (left < right) {
        while (left < right && p[t->agents[left]] < split) left++;
        while (right > left && p[t->agents[right - 1]] >= split) right--;
        if (left < right) {
            uint32_t x = t->agents[left];
            t->agents[left] = t->agents[right - 1];
            t->agents[right - 1] = x;
            left++;
            right--;
        }
    }
    uint32_t left_size = left - begin;
    if (left_size == 0) left_size = 1; /* every agent on one side: one goes left */
    nd->left = node + 1;
    nd->right = node + 2 * left_size;
    seed_build(t, c, nd->left, begin, begin + left_size);
    seed_build(t, c, nd->right, begin + left_size, end);
}

/* Squared distance from agent i to a node's bounds, in double (no more than any of its agents'). */
static inline double seed_box_d2(const crowd *c, const seed_node *nd, size_t i) {
    double s = 0.0;
    for (int a = 0; a < c->dims; a++) {
        double p = c->pos[a][i], g = p < nd->lo[a]   ? nd->lo[a] - p
                                     : p > nd->hi[a] ? p - nd->hi[a]
                                                     : 0;
        s = s + g * g;
    }
    return s;
}

typedef struct seed_query {
    const crowd *c;
    const seed_tree *t;
    size_t agent;
    uint32_t *ids;
    float *d2s;
    uint32_t *n;
    double r2;
} seed_query;

/* Whether a node at squared distance box_d2 may still hold a neighbour (the range, then the
 * farthest kept once k are kept). */
static inline bool seed_may_hold(const seed_query *q, double box_d2) {
    if (box_d2 > q->r2) return false;
    return *q->n < q->c->k || (float)box_d2 <= q->d2s[q->c->k - 1];
}

static void seed_visit(const seed_query *q, uint32_t node) {
    const seed_node *nd = &q->t->nodes[node];
    if (nd->end - nd->begin <= SEED_LEAF) {
        for (uint32_t x = nd->begin; x < nd->end; x++) {
            uint32_t j = q->t->agents[x];
            if (j == q->agent) continue;
            double d2 = agent_d2(q->c, q->agent, j);
            if (d2 <= q->r2) keep_nearest(q->ids, q->d2s, q->n, q->c->k, j, d2);
        }
        return;
    }
    const seed_node *l = &q->t->nodes[nd->left], *r = &q->t->nodes[nd->right];
    double dl = seed_box_d2(q->c, l, q->agent), dr = seed_box_d2(q->c, r, q->agent);
    uint32_t first = nd->left, second = nd->right;
    double d_first = dl, d_second = dr;
    if (dr < dl) {
        first = nd->right;
        second = nd->left;
        d_first = dr;
        d_second = dl;
    }
    if (seed_may_hold(q, d_first)) seed_visit(q, first);
    if (seed_may_hold(q, d_second)) seed_visit(q, second);
}

typedef struct seed_pass {
    const crowd *c;
    const seed_tree *t;
    crowd_sets *out;
} seed_pass;

static void seed_agents(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const seed_pass *s = p;
    for (size_t i = begin; i < end; i++) {
        s->out->count[i] = 0;
        seed_query q = {s->c,
                        s->t,
                        i,
                        s->out->ids + i * s->out->k,
                        s->out->d2 + i * s->out->k,
                        &s->out->count[i],
                        range2(s->c)};
        if (s->c->count > 0) seed_visit(&q, 0);
    }
}

/* ---- the engine's routes -------------------------------------------------------------------- */

const char *crowd_route_name(crowd_route r) {
    static const char *const names[] = {"rows", "balls", "nearest", "neighbourhoods", "seed"};
    return (unsigned)r < CROWD_ROUTES ? names[r] : "unknown";
}

typedef struct pick_pass {
    const crowd *c;
    const crowd_runner *r;
    crowd_sets *out;
} pick_pass;

/* Rows and balls: each agent's candidates (its row: partners, or a ball's hits with itself),
 * tested and the k nearest kept. */
static void pick_from_rows(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const pick_pass *s = p;
    const crowd_runner *r = s->r;
    double r2 = range2(s->c);
    const size_t *off = r->route == CROWD_ROWS ? r->rows.offsets : r->offsets;
    const uint32_t *cand = r->route == CROWD_ROWS ? r->rows.ids : r->row_ids;
    for (size_t i = begin; i < end; i++) {
        uint32_t *ids = s->out->ids + i * s->out->k;
        float *d2s = s->out->d2 + i * s->out->k;
        s->out->count[i] = 0;
        for (size_t x = off[i]; x < off[i + 1]; x++) {
            uint32_t j = cand[x];
            if (j == i) continue;
            double d2 = agent_d2(s->c, i, j);
            if (d2 <= r2) keep_nearest(ids, d2s, &s->out->count[i], s->out->k, j, d2);
        }
    }
}

/* Nearest: the k + 1 nearest within R, itself among them: dropped. */
static void pick_nearest(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const pick_pass *s = p;
    const crowd_runner *r = s->r;
    size_t k = s->out->k;
    for (size_t i = begin; i < end; i++) {
        uint32_t n = 0;
        for (size_t x = 0; x < r->near_counts[i] && n < k; x++) {
            uint32_t j = r->near_ids[i * (k + 1) + x];
            if (j == i) continue;
            s->out->ids[i * k + n] = j;
            s->out->d2[i * k + n] = r->near_d2[i * (k + 1) + x];
            n++;
        }
        s->out->count[i] = n;
    }
}

int crowd_runner_make(crowd_runner *r, const crowd *c, crowd_route route, int threads) {
    memset(r, 0, sizeof *r);
    r->route = route;
    r->threads = threads;
    size_t n = c->count;
    r->agent_ids = malloc((n + 1) * sizeof *r->agent_ids);
    r->radius = malloc((n + 1) * sizeof *r->radius);
    if (!r->agent_ids || !r->radius) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (route == CROWD_SEED) {
        seed_tree *t = calloc(1, sizeof *t);
        r->seed = t;
        if (!t) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        t->capacity = 2 * n + 1;
        t->nodes = malloc(t->capacity * sizeof *t->nodes);
        t->agents = malloc((n + 1) * sizeof *t->agents);
        return t->nodes && t->agents ? BROADPHASE_OK : BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    broadphase_config cfg = broadphase_config_default(c->dims);
    cfg.threads = threads;
    cfg.initial_capacity = n;
    broadphase_status s = broadphase_create(&cfg, &r->world);
    if (s != BROADPHASE_OK) return s;
    /* the step route's balls of radius R/2 meet exactly when their centres are within R (the
     * tests are in double, and R/2 + R/2 is R); the query routes' agents are points */
    float half = 0.5f * c->distance;
    for (size_t i = 0; i < n; i++) r->radius[i] = route == CROWD_ROWS ? half : c->distance;
    if (route == CROWD_ROWS) {
        broadphase_spheres sp = {c->pos[0], c->pos[1], c->dims == 3 ? c->pos[2] : NULL, r->radius};
        s = broadphase_add_spheres(r->world, n, &sp, r->agent_ids);
    } else {
        const float *z = c->dims == 3 ? c->pos[2] : NULL;
        broadphase_boxes b = {c->pos[0], c->pos[1], z, c->pos[0], c->pos[1], z};
        s = broadphase_add_boxes(r->world, n, &b, r->agent_ids);
    }
    if (s != BROADPHASE_OK) return s;
    if (route == CROWD_BALLS) {
        r->offsets = malloc((n + 1) * sizeof *r->offsets);
        if (!r->offsets) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    if (route == CROWD_NEAREST) {
        size_t slots = n * (c->k + 1) + 1;
        r->near_ids = malloc(slots * sizeof *r->near_ids);
        r->near_d2 = malloc(slots * sizeof *r->near_d2);
        r->near_counts = malloc((n + 1) * sizeof *r->near_counts);
        if (!r->near_ids || !r->near_d2 || !r->near_counts) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    return BROADPHASE_OK;
}

/* Neighbourhoods: the world's rows copied into the sets (the same layout). */
static void copy_rows(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const pick_pass *s = p;
    const broadphase_neighbourhood_rows *h = &s->r->hoods;
    size_t k = s->out->k;
    memcpy(s->out->ids + begin * k, h->ids + begin * k, (end - begin) * k * sizeof *h->ids);
    memcpy(s->out->d2 + begin * k, h->dist2 + begin * k, (end - begin) * k * sizeof *h->dist2);
    memcpy(s->out->count + begin, h->counts + begin, (end - begin) * sizeof *h->counts);
}

/* The client's pick over the agents, timed apart (r->pick_ms). */
static void pick(crowd_runner *r, size_t n, void (*fn)(size_t, size_t, int, void *),
                 pick_pass *pass) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    threads_for_ranges(threads_resolve(r->threads), n, AGENT_GRAIN, fn, pass);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->pick_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
}

int crowd_runner_frame(crowd_runner *r, const crowd *c, crowd_sets *out) {
    r->pick_ms = 0.0;
    size_t n = c->count;
    int workers = threads_resolve(r->threads);
    pick_pass pass = {c, r, out};
    const float *z = c->dims == 3 ? c->pos[2] : NULL;
    broadphase_status s = BROADPHASE_OK;
    switch (r->route) {
    case CROWD_SEED: {
        seed_tree *t = r->seed;
        for (size_t i = 0; i < n; i++) t->agents[i] = (uint32_t)i;
        if (n > 0) seed_build(t, c, 0, 0, (uint32_t)n);
        seed_pass sp = {c, t, out};
        threads_for_ranges(workers, n, AGENT_GRAIN, seed_agents, &sp);
        return BROADPHASE_OK;
    }
    case CROWD_ROWS: {
        broadphase_spheres sp = {c->pos[0], c->pos[1], z, r->radius};
        s = broadphase_move_spheres(r->world, n, r->agent_ids, &sp);
        if (s == BROADPHASE_OK) s = broadphase_step(r->world, NULL);
        if (s == BROADPHASE_OK) s = broadphase_neighbours(r->world, &r->rows);
        if (s == BROADPHASE_OK) pick(r, n, pick_from_rows, &pass);
        return s;
    }
    case CROWD_HOODS: {
        broadphase_boxes b = {c->pos[0], c->pos[1], z, c->pos[0], c->pos[1], z};
        s = broadphase_move_boxes(r->world, n, r->agent_ids, &b);
        if (s == BROADPHASE_OK)
            s = broadphase_neighbourhoods(r->world, c->k, c->distance, &r->hoods);
        if (s == BROADPHASE_OK) pick(r, n, copy_rows, &pass);
        return s;
    }
    case CROWD_BALLS:
    case CROWD_NEAREST: {
        broadphase_boxes b = {c->pos[0], c->pos[1], z, c->pos[0], c->pos[1], z};
        s = broadphase_move_boxes(r->world, n, r->agent_ids, &b);
        if (s == BROADPHASE_OK) s = broadphase_update(r->world);
        if (s != BROADPHASE_OK) return s;
        broadphase_points pts = {c->pos[0], c->pos[1], z};
        if (r->route == CROWD_NEAREST) {
            size_t bad;
            s = broadphase_nearest_many_within(r->world, n, &pts, c->k + 1, c->distance,
                                               r->near_ids, r->near_d2, r->near_counts, &bad);
            if (s == BROADPHASE_OK) pick(r, n, pick_nearest, &pass);
            return s;
        }
        broadphase_spheres balls = {c->pos[0], c->pos[1], z, r->radius};
        for (;;) {
            broadphase_id_rows rows = {r->offsets, r->row_ids, r->row_capacity, 0, 0};
            s = broadphase_query_spheres(r->world, n, &balls, &rows);
            if (s != BROADPHASE_ERROR_BUFFER_TOO_SMALL) break;
            free(r->row_ids);
            r->row_capacity = rows.total + rows.total / 4 + 1;
            r->row_ids = malloc(r->row_capacity * sizeof *r->row_ids);
            if (!r->row_ids) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        }
        if (s == BROADPHASE_OK) pick(r, n, pick_from_rows, &pass);
        return s;
    }
    default:
        return BROADPHASE_ERROR_INVALID_ARGUMENT;
    }
}

void crowd_runner_free(crowd_runner *r) {
    broadphase_destroy(r->world);
    if (r->seed) {
        seed_tree *t = r->seed;
        free(t->nodes);
        free(t->agents);
        free(t);
    }
    free(r->agent_ids);
    free(r->offsets);
    free(r->row_ids);
    free(r->near_ids);
    free(r->near_d2);
    free(r->near_counts);
    free(r->radius);
    memset(r, 0, sizeof *r);
}

/* Scene generators shared by the tests, the runner and the benchmarks: every scene is a pure
 * function of (kind, count, seed) through splitmix64, plus the helpers that add a scene to a
 * world and move it there every frame without allocating. */
#include "scenes.h"

#include "broadphase.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Densities chosen so that a uniform scene has a few overlaps per object in both 2D and 3D. */
#define SCENE_DENSITY_3D 0.075
#define SCENE_DENSITY_2D 0.12
#define SCENE_CLUSTER_COUNT 64
#define SCENE_MAX_SPEED 0.05f

static const char *const scene_names[SCENE_KIND_COUNT] = {
    [SCENE_UNIFORM] = "uniform",
    [SCENE_CLUSTERED] = "clustered",
    [SCENE_MIXED] = "mixed",
    [SCENE_MOVING] = "moving",
    [SCENE_SPHERES] = "spheres",
    [SCENE_PLANE2D] = "plane2d",
    [SCENE_MOVING2D] = "moving2d",
    [SCENE_DENSE] = "dense",
    [SCENE_SHAPES] = "shapes",
    [SCENE_SHAPES2D] = "shapes2d",
    [SCENE_IDENTICAL] = "identical",
    [SCENE_FLAT] = "flat",
    [SCENE_HUGE] = "huge",
    [SCENE_TINY] = "tiny",
    [SCENE_FAR] = "far",
    [SCENE_EDGE] = "edge",
    [SCENE_EDGE2D] = "edge2d",
    [SCENE_STATIC_WORLD] = "static_world",
    [SCENE_SLEEPING] = "sleeping",
};

/* Gather buffers for scenes that mix boxes and spheres (the engine takes one kind per call) or
 * that move only some of their objects: each frame the objects to push are copied into
 * contiguous columns, by kind (allocated once, in scene_make). */
typedef struct scene_scratch {
    size_t box_count, sphere_count;
    size_t *box_index, *sphere_index; /* object indices of each kind, ascending */
    uint32_t *box_ids, *sphere_ids;
    float *box_min[3], *box_max[3];
    float *sphere_center[3], *sphere_radius;
} scene_scratch;

uint64_t scene_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float scene_uniform(uint64_t *state) {
    return (float)(scene_splitmix64(state) >> 40) * 0x1p-24f;
}

/* lo + (hi - lo) * u can round up to hi itself; clamping keeps every interval half-open. */
static float uniform_in(uint64_t *state, float lo, float hi) {
    float v = lo + (hi - lo) * scene_uniform(state);
    return v < hi ? v : nextafterf(hi, lo);
}

static double normal(uint64_t *state) {
    /* 1 - u lies in (0, 1], so the logarithm is finite. */
    double u1 = 1.0 - (double)scene_uniform(state);
    double u2 = (double)scene_uniform(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Sphere bounding boxes are rounded outwards so that they contain the exact (double) sphere. */
static float round_down(double v) {
    float f = (float)v;
    return (double)f > v ? nextafterf(f, -INFINITY) : f;
}

static float round_up(double v) {
    float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

const char *scene_name(scene_kind kind) {
    return (unsigned)kind < SCENE_KIND_COUNT ? scene_names[kind] : "unknown";
}

bool scene_parse(const char *name, scene_kind *kind_out) {
    if (!name) return false;
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        if (strcmp(name, scene_names[k]) == 0) {
            if (kind_out) *kind_out = (scene_kind)k;
            return true;
        }
    }
    return false;
}

bool scene_is_moving(scene_kind kind) {
    return kind == SCENE_MOVING || kind == SCENE_MOVING2D || kind == SCENE_STATIC_WORLD ||
           kind == SCENE_SLEEPING;
}

/* Whether object i of a scene of n objects moves. */
static bool scene_moves(scene_kind kind, size_t i, size_t n) {
    if (kind == SCENE_STATIC_WORLD) return i >= n - n / 101;
    if (kind == SCENE_SLEEPING) return i % 100 == 0;
    return scene_is_moving(kind);
}

static bool scene_moves_some(scene_kind kind) {
    return kind == SCENE_STATIC_WORLD || kind == SCENE_SLEEPING;
}

static int scene_dimensions(scene_kind kind) {
    return kind == SCENE_PLANE2D || kind == SCENE_MOVING2D || kind == SCENE_SHAPES2D ||
                   kind == SCENE_EDGE2D
               ? 2
               : 3;
}

static bool scene_has_spheres(scene_kind kind) {
    return kind == SCENE_SPHERES || kind == SCENE_SHAPES || kind == SCENE_SHAPES2D;
}

static bool scene_is_mixed_shapes(scene_kind kind) {
    return kind == SCENE_SHAPES || kind == SCENE_SHAPES2D || kind == SCENE_FAR ||
           kind == SCENE_EDGE || kind == SCENE_EDGE2D;
}

static float *alloc_floats(size_t count) {
    return calloc(count ? count : 1, sizeof(float));
}

static void scratch_free(scene_scratch *x) {
    if (!x) return;
    free(x->box_index);
    free(x->sphere_index);
    free(x->box_ids);
    free(x->sphere_ids);
    for (int k = 0; k < 3; k++) {
        free(x->box_min[k]);
        free(x->box_max[k]);
        free(x->sphere_center[k]);
    }
    free(x->sphere_radius);
    free(x);
}

void scene_free(scene *s) {
    if (!s) return;
    free(s->is_sphere);
    for (int k = 0; k < 3; k++) {
        free(s->min[k]);
        free(s->max[k]);
        free(s->center[k]);
        free(s->velocity[k]);
        free(s->half[k]);
    }
    free(s->radius);
    scratch_free(s->scratch);
    memset(s, 0, sizeof *s);
}

static bool scene_alloc(scene *s, size_t n) {
    bool ok = (s->is_sphere = calloc(n ? n : 1, 1)) != NULL;
    for (int k = 0; k < 3; k++) {
        ok &= (s->min[k] = alloc_floats(n)) != NULL;
        ok &= (s->max[k] = alloc_floats(n)) != NULL;
        ok &= (s->center[k] = alloc_floats(n)) != NULL;
        if (scene_is_moving(s->kind)) {
            ok &= (s->velocity[k] = alloc_floats(n)) != NULL;
            ok &= (s->half[k] = alloc_floats(n)) != NULL;
        }
    }
    ok &= (s->radius = alloc_floats(n)) != NULL;
    return ok;
}

static bool scratch_alloc(scene *s) {
    scene_scratch *x = calloc(1, sizeof *x);
    if (!x) return false;
    s->scratch = x;
    bool some = scene_moves_some(s->kind);
    for (size_t i = 0; i < s->count; i++) {
        if (some && !scene_moves(s->kind, i, s->count)) continue;
        s->is_sphere[i] ? x->sphere_count++ : x->box_count++;
    }
    size_t nb = x->box_count ? x->box_count : 1, ns = x->sphere_count ? x->sphere_count : 1;
    bool ok = (x->box_index = malloc(nb * sizeof(size_t))) != NULL;
    ok &= (x->sphere_index = malloc(ns * sizeof(size_t))) != NULL;
    ok &= (x->box_ids = malloc(nb * sizeof(uint32_t))) != NULL;
    ok &= (x->sphere_ids = malloc(ns * sizeof(uint32_t))) != NULL;
    for (int k = 0; k < 3; k++) {
        ok &= (x->box_min[k] = alloc_floats(nb)) != NULL;
        ok &= (x->box_max[k] = alloc_floats(nb)) != NULL;
        ok &= (x->sphere_center[k] = alloc_floats(ns)) != NULL;
    }
    ok &= (x->sphere_radius = alloc_floats(ns)) != NULL;
    if (!ok) return false;
    size_t b = 0, sp = 0;
    for (size_t i = 0; i < s->count; i++) {
        if (some && !scene_moves(s->kind, i, s->count)) continue;
        if (s->is_sphere[i]) {
            x->sphere_index[sp++] = i;
        } else {
            x->box_index[b++] = i;
        }
    }
    return true;
}

static void set_box(scene *s, size_t i, const float c[3], const float h[3]) {
    for (int k = 0; k < 3; k++) {
        s->center[k][i] = c[k];
        s->min[k][i] = c[k] - h[k];
        s->max[k][i] = c[k] + h[k];
    }
}

static void set_sphere(scene *s, size_t i, const float c[3], float r) {
    s->is_sphere[i] = 1;
    s->radius[i] = r;
    for (int k = 0; k < s->dimensions; k++) {
        s->center[k][i] = c[k];
        s->min[k][i] = round_down((double)c[k] - (double)r);
        s->max[k][i] = round_up((double)c[k] + (double)r);
    }
}

enum { FAR_OFFSET = 10000000 }; /* the far scene's shift: 1e7, where floats are 1 apart */

/* Mixed scene: every 100th object 20x larger, every 10 000th 200x (the latter wins). */
static float mixed_growth(size_t i) {
    return i % 10000 == 0 ? 200.0f : i % 100 == 0 ? 20.0f : 1.0f;
}

/* Objects with uniform centres in [0, side)^dims: boxes with half-extents in [0.5, 1), spheres
 * (all of them, or the odd ones for the shapes scenes) with radius in [0.5, 1). Each object's
 * centre is drawn before its extents, object by object, so scenes are reproducible from the
 * seed and a moving scene at frame 0 equals its static twin. */
static void fill_uniform(scene *s, uint64_t *rng, float side, int dims) {
    for (size_t i = 0; i < s->count; i++) {
        float c[3] = {0, 0, 0}, h[3] = {0, 0, 0};
        for (int k = 0; k < dims; k++) c[k] = uniform_in(rng, 0.0f, side);
        if (s->kind == SCENE_FAR)
            for (int k = 0; k < dims; k++) c[k] += FAR_OFFSET;
        bool sphere = s->kind == SCENE_SPHERES || (scene_is_mixed_shapes(s->kind) && (i & 1));
        if (sphere) {
            set_sphere(s, i, c, uniform_in(rng, 0.5f, 1.0f));
            continue;
        }
        for (int k = 0; k < dims; k++) h[k] = uniform_in(rng, 0.5f, 1.0f);
        if (s->kind == SCENE_MIXED) {
            float grow = mixed_growth(i);
            for (int k = 0; k < dims; k++) h[k] *= grow;
        }
        set_box(s, i, c, h);
        /* Kept rather than recomputed from min/max, which would drift frame after frame. */
        if (s->half[0]) {
            for (int k = 0; k < 3; k++) s->half[k][i] = h[k];
        }
    }
}

static void fill_clustered(scene *s, uint64_t *rng, float side) {
    float cluster[SCENE_CLUSTER_COUNT][3];
    for (int c = 0; c < SCENE_CLUSTER_COUNT; c++) {
        for (int k = 0; k < 3; k++) cluster[c][k] = uniform_in(rng, 0.0f, side);
    }
    double sigma = side / 16.0;
    for (size_t i = 0; i < s->count; i++) {
        /* The top bits of a splitmix64 output are uniform over the 64 clusters. */
        int pick = (int)(scene_splitmix64(rng) >> 58);
        float c[3], h[3];
        for (int k = 0; k < 3; k++) c[k] = (float)(cluster[pick][k] + sigma * normal(rng));
        for (int k = 0; k < 3; k++) h[k] = uniform_in(rng, 0.5f, 1.0f);
        set_box(s, i, c, h);
    }
}

/* Drawn after every position so that the positions match the static twin's. */
static void fill_velocity(scene *s, uint64_t *rng) {
    for (size_t i = 0; i < s->count; i++) {
        bool moves = scene_moves(s->kind, i, s->count);
        for (int k = 0; k < 3; k++) {
            float v = k < s->dimensions ? uniform_in(rng, -SCENE_MAX_SPEED, SCENE_MAX_SPEED) : 0.0f;
            s->velocity[k][i] = moves ? v : 0.0f;
        }
    }
}

static void scale_scene(scene *s, float factor) {
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < s->count; i++) {
            s->min[k][i] *= factor;
            s->max[k][i] *= factor;
            s->center[k][i] *= factor;
        }
    }
    s->world_size *= factor;
}

/* The edge scenes' half-range: centres in [-EDGE_RANGE, EDGE_RANGE). */
#define EDGE_RANGE 2.8e38

static float clip_to_floats(double v) {
    return v < -FLT_MAX ? -FLT_MAX : v > FLT_MAX ? FLT_MAX : (float)v;
}

/* Maps a shapes scene over [0, L) onto the float range's end (scenes.h: SCENE_EDGE), then makes
 * every 16th object from the 3rd (spheres) and from the 6th (boxes) longer than FLT_MAX. */
static void to_float_edge(scene *s) {
    double side = s->world_size > 0.0f ? s->world_size : 1.0, f = 2.0 * EDGE_RANGE / side;
    int dims = s->dimensions;
    for (size_t i = 0; i < s->count; i++) {
        double c[3] = {0, 0, 0}, r = (double)s->radius[i] * f;
        for (int k = 0; k < dims; k++) {
            s->center[k][i] = (float)((double)s->center[k][i] * f - EDGE_RANGE);
            c[k] = s->center[k][i];
            s->min[k][i] = clip_to_floats((double)s->min[k][i] * f - EDGE_RANGE);
            s->max[k][i] = clip_to_floats((double)s->max[k][i] * f - EDGE_RANGE);
        }
        size_t v = i / 16;
        if (s->is_sphere[i] && i % 16 == 3) {
            r = v % 3 == 0 ? FLT_MAX : v % 3 == 1 ? 0.7 * FLT_MAX : 0.5 * FLT_MAX;
        } else if (!s->is_sphere[i] && i % 16 == 6) {
            for (int k = 0; k < dims; k++) {
                int axis = (int)(v / 4 % (size_t)dims);
                if (v % 4 == 0 && k == axis) {
                    s->min[k][i] = -FLT_MAX;
                    s->max[k][i] = FLT_MAX;
                } else if (v % 4 == 1) {
                    s->min[k][i] = -1.71e38f;
                    s->max[k][i] = 1.71e38f;
                } else if (v % 4 == 2) {
                    s->min[k][i] = -FLT_MAX;
                    s->max[k][i] = s->center[k][i];
                } else if (v % 4 == 3) {
                    s->min[k][i] = s->center[k][i];
                    s->max[k][i] = FLT_MAX;
                }
            }
        }
        if (!s->is_sphere[i]) continue;
        s->radius[i] = (float)r; /* finite: r < f < FLT_MAX for every scene size (L > 2) */
        for (int k = 0; k < dims; k++) {
            s->min[k][i] = clip_to_floats(round_down(c[k] - (double)s->radius[i]));
            s->max[k][i] = clip_to_floats(round_up(c[k] + (double)s->radius[i]));
        }
    }
    s->world_size = (float)EDGE_RANGE;
}

bool scene_make(scene *s, scene_kind kind, size_t count, uint64_t seed) {
    memset(s, 0, sizeof *s);
    if ((unsigned)kind >= SCENE_KIND_COUNT) return false;
    s->kind = kind;
    s->dimensions = scene_dimensions(kind);
    s->count = count;
    if (!scene_alloc(s, count)) {
        scene_free(s);
        return false;
    }
    uint64_t rng = seed;
    double n = (double)count;
    float side3 = (float)cbrt(n / SCENE_DENSITY_3D), side2 = (float)sqrt(n / SCENE_DENSITY_2D);
    switch (kind) {
    case SCENE_CLUSTERED:
        s->world_size = side3;
        fill_clustered(s, &rng, side3);
        break;
    case SCENE_DENSE:
        s->world_size = 2.0f;
        fill_uniform(s, &rng, 2.0f, 3);
        break;
    case SCENE_IDENTICAL:
        s->world_size = 1.0f;
        for (size_t i = 0; i < count; i++) {
            const float c[3] = {0.5f, 0.5f, 0.5f}, h[3] = {0.5f, 0.5f, 0.5f};
            set_box(s, i, c, h);
        }
        break;
    case SCENE_PLANE2D:
    case SCENE_MOVING2D:
    case SCENE_SHAPES2D:
    case SCENE_EDGE2D:
    case SCENE_FLAT: /* 2D density: a flat scene is a plane in 3D */
        s->world_size = side2;
        fill_uniform(s, &rng, side2, 2);
        break;
    default:
        s->world_size = side3;
        fill_uniform(s, &rng, side3, 3);
        break;
    }
    if (scene_is_moving(kind)) fill_velocity(s, &rng);
    if (kind == SCENE_HUGE) {
        scale_scene(s, side3 > 0.0f ? 1e30f / side3 : 1e30f);
    } else if (kind == SCENE_TINY) {
        scale_scene(s, 1e-30f);
    } else if (kind == SCENE_EDGE || kind == SCENE_EDGE2D) {
        to_float_edge(s);
    }
    for (size_t i = 0; i < count; i++) s->mover_count += scene_moves(kind, i, count);
    if (kind == SCENE_STATIC_WORLD) s->static_count = count - count / 101;
    if ((scene_is_mixed_shapes(kind) || scene_moves_some(kind)) && !scratch_alloc(s)) {
        scene_free(s);
        return false;
    }
    s->frame = 0;
    return true;
}

void scene_advance(scene *s) {
    if (!scene_is_moving(s->kind)) return;
    float side = s->world_size;
    /* The largest float below L: a reflection that rounds onto the wall is pulled inside. */
    float inside = nextafterf(side, 0.0f);
    const scene_scratch *x = scene_moves_some(s->kind) ? s->scratch : NULL;
    size_t movers = x ? x->box_count : s->count;
    for (int k = 0; k < s->dimensions; k++) {
        float *c = s->center[k], *v = s->velocity[k], *h = s->half[k];
        float *lo = s->min[k], *hi = s->max[k];
        for (size_t j = 0; j < movers; j++) {
            size_t i = x ? x->box_index[j] : j;
            float p = c[i] + v[i];
            if (p < 0.0f) {
                p = -p;
                v[i] = -v[i];
            } else if (p >= side) {
                p = side - (p - side);
                v[i] = -v[i];
            }
            /* Only a velocity larger than L could still be outside; clamp rather than loop. */
            if (p >= side) p = inside;
            if (p < 0.0f) p = 0.0f;
            c[i] = p;
            lo[i] = p - h[i];
            hi[i] = p + h[i];
        }
    }
    s->frame++;
}

static broadphase_boxes box_columns(const scene *s, size_t first) {
    broadphase_boxes b = {s->min[0] + first, s->min[1] + first, s->min[2] + first,
                          s->max[0] + first, s->max[1] + first, s->max[2] + first};
    return b;
}

static broadphase_spheres sphere_columns(const scene *s, size_t first) {
    broadphase_spheres sp = {s->center[0] + first, s->center[1] + first, s->center[2] + first,
                             s->radius + first};
    return sp;
}

int scene_add_to_world(const scene *s, struct broadphase_world *w, uint32_t *ids_out) {
    /* Runs of consecutive objects of one kind go in one call each, so that in an empty world
     * object i gets id i. */
    size_t i = 0;
    while (i < s->count) {
        size_t end = i + 1;
        while (end < s->count && s->is_sphere[end] == s->is_sphere[i]) end++;
        broadphase_status st;
        if (s->is_sphere[i]) {
            broadphase_spheres sp = sphere_columns(s, i);
            st = broadphase_add_spheres(w, end - i, &sp, ids_out + i);
        } else {
            broadphase_boxes b = box_columns(s, i);
            st = broadphase_add_boxes(w, end - i, &b, ids_out + i);
        }
        if (st != BROADPHASE_OK) return (int)st;
        i = end;
    }
    return (int)BROADPHASE_OK;
}

int scene_move_in_world(const scene *s, struct broadphase_world *w, const uint32_t *ids) {
    if (s->count == 0) return (int)BROADPHASE_OK;
    scene_scratch *x = s->scratch;
    if (!x) {
        /* One kind only: the scene's own columns are already what the engine reads. */
        if (scene_has_spheres(s->kind)) {
            broadphase_spheres sp = sphere_columns(s, 0);
            return (int)broadphase_move_spheres(w, s->count, ids, &sp);
        }
        broadphase_boxes b = box_columns(s, 0);
        return (int)broadphase_move_boxes(w, s->count, ids, &b);
    }
    for (size_t j = 0; j < x->box_count; j++) {
        size_t i = x->box_index[j];
        x->box_ids[j] = ids[i];
        for (int k = 0; k < 3; k++) {
            x->box_min[k][j] = s->min[k][i];
            x->box_max[k][j] = s->max[k][i];
        }
    }
    for (size_t j = 0; j < x->sphere_count; j++) {
        size_t i = x->sphere_index[j];
        x->sphere_ids[j] = ids[i];
        for (int k = 0; k < 3; k++) x->sphere_center[k][j] = s->center[k][i];
        x->sphere_radius[j] = s->radius[i];
    }
    broadphase_status st = BROADPHASE_OK;
    if (x->box_count) {
        broadphase_boxes b = {x->box_min[0], x->box_min[1], x->box_min[2],
                              x->box_max[0], x->box_max[1], x->box_max[2]};
        st = broadphase_move_boxes(w, x->box_count, x->box_ids, &b);
    }
    if (st == BROADPHASE_OK && x->sphere_count) {
        broadphase_spheres sp = {x->sphere_center[0], x->sphere_center[1], x->sphere_center[2],
                                 x->sphere_radius};
        st = broadphase_move_spheres(w, x->sphere_count, x->sphere_ids, &sp);
    }
    return (int)st;
}

int scene_set_statics(const scene *s, struct broadphase_world *w, const uint32_t *ids) {
    return (int)broadphase_set_static(w, s->static_count, ids, true);
}

int scene_add_movers_to_world(const scene *s, struct broadphase_world *w, uint32_t *ids) {
    const scene_scratch *x = s->scratch;
    if (!x || !scene_moves_some(s->kind)) return scene_add_to_world(s, w, ids);
    /* The gather buffers hold the movers' boxes (these scenes have no spheres). */
    for (size_t j = 0; j < x->box_count; j++) {
        size_t i = x->box_index[j];
        for (int k = 0; k < 3; k++) {
            x->box_min[k][j] = s->min[k][i];
            x->box_max[k][j] = s->max[k][i];
        }
    }
    broadphase_boxes b = {x->box_min[0], x->box_min[1], x->box_min[2],
                          x->box_max[0], x->box_max[1], x->box_max[2]};
    broadphase_status st = broadphase_add_boxes(w, x->box_count, &b, x->box_ids);
    for (size_t j = 0; st == BROADPHASE_OK && j < x->box_count; j++)
        ids[x->box_index[j]] = x->box_ids[j];
    return (int)st;
}

/* broadphase-run: builds a named scene, steps it for some frames, prints per-phase timings and
 * pair counts, and on request checks every frame against the brute-force oracle (a second world
 * below 200 000 objects, exact predicates on sampled objects above). */
#include "broadphase.h"
#include "machine.h"
#include "series.h"
#include "scenes.h"
#include "load.h"
#include "crowd_run.h"
#include "soak.h"
#include "svg.h"
#include "../simd/overlap.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Above this many objects the brute-force world would take seconds per frame: sample instead. */
#define RUNNER_FULL_CHECK_LIMIT 200000
#define RUNNER_PER_FRAME_LINES_MAX 20

typedef struct options {
    scene_kind scene;
    size_t count;
    size_t frames;
    broadphase_method method;
    broadphase_update_policy update;
    int threads;
    uint64_t seed;
    int leaf_size;           /* 0: the library's default */
    int max_depth;           /* 0: the library's default */
    float rebuild_threshold; /* 0: the library's default */
    float looseness;         /* used only when looseness_set; the library validates it */
    bool looseness_set;
    bool check;
    size_t check_sample;
    size_t check_full_limit;
    bool quiet;
    bool events; /* config.pair_events, with counts of the pairs begun and ended */
    bool verbose;
    bool levels; /* the per-level table of the tree after the last step */
    /* --svg: a picture of the world after the run; --svg-box, --svg-ray, --svg-plane */
    const char *svg_path;
    svg_options svg;
    bool svg_plane_set;
    /* --soak: churn, sampled and full checks, memory held (perf/runner/soak.h) */
    bool soak;
    size_t soak_sample;
    const char *soak_csv;
    /* --crowd: neighbourhoods of a walking crowd (perf/runner/crowd_run.h) */
    bool crowd;
    int crowd_dims;
    size_t crowd_k;
    float crowd_distance, crowd_density;
    bool crowd_routes[CROWD_ROUTES];
    bool crowd_routes_set;
    bool fixed_threads; /* --fixed-threads: config.fixed_threads */
    int load;           /* --load: spinning processes beside the frames (perf/common/load.h) */
    bool gauge;         /* --gauge: the host gauge after every step (perf/common/machine.h) */
} options;

static const char *const method_names[] = {
    [BROADPHASE_METHOD_KDTREE] = "kdtree",
    [BROADPHASE_METHOD_OCTREE] = "octree",
    [BROADPHASE_METHOD_BRUTE_FORCE] = "brute",
};
static const char *const update_names[] = {
    [BROADPHASE_UPDATE_AUTO] = "auto",
    [BROADPHASE_UPDATE_REBUILD] = "rebuild",
    [BROADPHASE_UPDATE_REFIT] = "refit",
};

static void usage(FILE *out) {
    fprintf(out, "usage: broadphase-run [options]\n"
                 "  --scene NAME          scene to build (default moving):\n"
                 "                        ");
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        fprintf(out, "%s%s", scene_name((scene_kind)k), k + 1 < SCENE_KIND_COUNT ? " " : "\n");
    }
    fprintf(
        out,
        "  --n N                 objects (default 100000; 1e6 is accepted)\n"
        "  --frames F            frames to step (default 100)\n"
        "  --method M            kdtree | octree | brute (default kdtree)\n"
        "  --threads T           worker threads, 0 = all hardware threads (default 0)\n"
        "  --update U            auto | rebuild | refit (default auto)\n"
        "  --seed S              scene seed (default 1)\n"
        "  --leaf-size L         kd-tree leaf capacity; octree: a node splits above L objects\n"
        "                        (default: the library's)\n"
        "  --max-depth D         tree depth limit, root = 0 (default: the library's)\n"
        "  --rebuild-threshold X AUTO rebuild factor (default: the library's)\n"
        "  --looseness F         octree cell enlargement, 1 = strict (default: the library's,\n"
        "                        1.5); passed to the library as is, which accepts 1..4\n"
        "  --check               compare every frame with brute force; exit 1 on a difference\n"
        "  --check-full-limit N  up to N objects the check steps a second, brute-force world\n"
        "                        and compares everything (default %d); above, it samples\n"
        "  --check-sample K      objects per frame whose pairs the sampled check recomputes\n"
        "                        with the exact predicates (default 1000)\n"
        "  --quiet               no per-frame lines\n"
        "  --events              pair events on (config.pair_events; their merge is part of\n"
        "                        the step): counts of pairs begun and ended are printed\n"
        "  --verbose             per-frame lines even for more than %d frames, and --levels\n"
        "  --levels              after the summary, the tree level by level as of the last\n"
        "                        step: nodes, leaves and objects held at each depth\n"
        "  --svg FILE            after the run, an SVG picture of the world as the last\n"
        "                        step left it (with --frames 0, after one step): the tree's\n"
        "                        cells, the static and rest fields' node bounds, the objects\n"
        "                        (those in a pair outlined in red, joined centre to centre)\n"
        "                        and a caption; meant for up to a few thousand objects\n"
        "  --svg-box X0,Y0,X1,Y1 a box query in the picture: the box, its candidates (the\n"
        "                        objects of the nodes it reaches) and its hits. 3D: either\n"
        "                        X0,Y0,Z0,X1,Y1,Z1, or 4 numbers on the --svg-plane's axes,\n"
        "                        the box then spanning the objects along the third axis\n"
        "  --svg-ray OX,OY,DX,DY[,MAX_T]\n"
        "                        a ray in the picture: its hits, where it enters each, the\n"
        "                        first marked; endless without MAX_T. 3D: OX,OY,OZ,DX,DY,DZ\n"
        "                        [,MAX_T], or 4 or 5 numbers on the plane's axes, the origin\n"
        "                        then halfway through the objects along the third axis\n"
        "  --svg-plane P         xy | xz | yz: the plane a 3D world is projected onto, along\n"
        "                        the third axis (default xy; 2D scenes: xy only)\n"
        "  --soak                the soak (moving scene, 3D): every frame 1%% of the objects\n"
        "                        removed and added again, 0.1%% teleported, 0.05%% made static\n"
        "                        or not, 0.05%% given a new filter, events on; pairs checked\n"
        "                        against brute force for --soak-sample objects every frame and\n"
        "                        in full every 1000 frames, when memory (bytes in use, resident)\n"
        "                        is sampled: after frame 1000 it must stay within 5%%. Exit 1\n"
        "                        on a difference or a drift. Uses --n, --frames, --method,\n"
        "                        --update, --threads, --seed, --quiet\n"
        "  --crowd               a crowd instead of a scene: --n agents in a disc walking\n"
        "                        through its middle to the opposite side and back (0.5 a\n"
        "                        frame), each frame every agent's k nearest others within the\n"
        "                        neighbour distance found by each route (rows: step and\n"
        "                        broadphase_neighbours; balls: update and query_spheres;\n"
        "                        nearest: update and nearest_many_within; seed: the seed's\n"
        "                        array kd-tree), the routes compared with one another (and\n"
        "                        with brute force on 1000 agents with --check), their times\n"
        "                        summarised; --svg draws the last frame. Uses --n, --frames,\n"
        "                        --threads, --seed, --check, --svg, --quiet\n"
        "  --crowd-route R       rows | balls | nearest | neighbourhoods | seed; repeat for\n"
        "                        several (default all five)\n"
        "  --crowd-dims D        2 or 3 (default 2)\n"
        "  --crowd-k K           neighbours kept (default 10)\n"
        "  --crowd-distance R    neighbour distance (default 15)\n"
        "  --crowd-density P     agents within R of one, on average (default 20)\n"
        "  --fixed-threads       every step on all --threads, even while other work takes\n"
        "                        cores (config.fixed_threads; default: fewer then)\n"
        "  --load K              K processes spinning beside the run (other work taking the\n"
        "                        cores), from before the world is made to after the last\n"
        "                        frame (default 0)\n"
        "  --gauge               after every step, the host gauge (perf/common/machine.h): the same\n"
        "                        fixed work on --threads threads, timed; a column, and in\n"
        "                        the summary how steady the host kept it\n"
        "  --soak-sample K       objects checked per frame in the soak (default 16)\n"
        "  --soak-csv FILE       the soak's memory and step figures every 1000 frames, as CSV\n"
        "  --help                this text\n"
        "exit status: 0 on success; 1 on a failed --check (the first difference is named on\n"
        "stderr) or a library error; 2 on a bad option or a configuration the library\n"
        "refuses\n",
        RUNNER_FULL_CHECK_LIMIT, RUNNER_PER_FRAME_LINES_MAX);
}

static bool parse_count(const char *text, size_t max, size_t *out) {
    if (!text || !*text || *text == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0') {
        /* Scientific notation for counts ("1e6") when it names a whole number. */
        double d = strtod(text, &end);
        if (*end != '\0' || !(d >= 0.0) || d > (double)max || d != floor(d)) return false;
        v = (unsigned long long)d;
    }
    if (errno || v > max) return false;
    *out = (size_t)v;
    return true;
}

static bool parse_int(const char *text, int lo, int hi, int *out) {
    size_t v;
    if (!parse_count(text, (size_t)hi, &v) || (long long)v < lo) return false;
    *out = (int)v;
    return true;
}

static bool parse_name(const char *text, const char *const *names, int count, int *out) {
    for (int i = 0; i < count; i++) {
        if (text && strcmp(text, names[i]) == 0) {
            *out = i;
            return true;
        }
    }
    return false;
}

/* 0 on success, 1 to exit successfully (--help), 2 on a usage error (message printed). */
static int parse_options(int argc, char **argv, options *o) {
    *o = (options){.scene = SCENE_MOVING,
                   .count = 100000,
                   .frames = 100,
                   .method = BROADPHASE_METHOD_KDTREE,
                   .update = BROADPHASE_UPDATE_AUTO,
                   .seed = 1,
                   .check_sample = 1000,
                   .soak_sample = 16,
                   .crowd_dims = 2,
                   .crowd_k = 10,
                   .crowd_distance = 15.0f,
                   .crowd_density = 20.0f,
                   .check_full_limit = RUNNER_FULL_CHECK_LIMIT};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(arg, "--check") == 0) {
            o->check = true;
            continue;
        }
        if (strcmp(arg, "--quiet") == 0) {
            o->quiet = true;
            continue;
        }
        if (strcmp(arg, "--events") == 0) {
            o->events = true;
            continue;
        }
        if (strcmp(arg, "--verbose") == 0) {
            o->verbose = true;
            o->levels = true;
            continue;
        }
        if (strcmp(arg, "--gauge") == 0) {
            o->gauge = true;
            continue;
        }
        if (strcmp(arg, "--fixed-threads") == 0) {
            o->fixed_threads = true;
            continue;
        }
        if (strcmp(arg, "--crowd") == 0) {
            o->crowd = true;
            continue;
        }
        if (strcmp(arg, "--soak") == 0) {
            o->soak = true;
            continue;
        }
        if (strcmp(arg, "--levels") == 0) {
            o->levels = true;
            continue;
        }
        /* Every other option takes a value, as "--opt value" or "--opt=value". */
        char name[32];
        const char *value;
        const char *eq = strchr(arg, '=');
        if (eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
            value = i + 1 < argc ? argv[++i] : NULL;
        }
        bool ok;
        int choice = 0;
        size_t big = 0;
        if (strcmp(name, "--scene") == 0) {
            ok = scene_parse(value, &o->scene);
        } else if (strcmp(name, "--n") == 0) {
            ok = parse_count(value, UINT32_MAX - 1, &o->count);
        } else if (strcmp(name, "--frames") == 0) {
            ok = parse_count(value, SIZE_MAX / 64, &o->frames);
        } else if (strcmp(name, "--method") == 0) {
            ok = parse_name(value, method_names, 3, &choice) ||
                 (value && strcmp(value, "brute_force") == 0 &&
                  (choice = BROADPHASE_METHOD_BRUTE_FORCE, true));
            o->method = (broadphase_method)choice;
        } else if (strcmp(name, "--update") == 0) {
            ok = parse_name(value, update_names, 3, &choice);
            o->update = (broadphase_update_policy)choice;
        } else if (strcmp(name, "--threads") == 0) {
            ok = parse_int(value, 0, 1024, &o->threads);
        } else if (strcmp(name, "--seed") == 0) {
            ok = parse_count(value, SIZE_MAX, &big);
            o->seed = big;
        } else if (strcmp(name, "--leaf-size") == 0) {
            ok = parse_int(value, 1, 4096, &o->leaf_size);
        } else if (strcmp(name, "--max-depth") == 0) {
            ok = parse_int(value, 1, 64, &o->max_depth);
        } else if (strcmp(name, "--rebuild-threshold") == 0) {
            char *end = NULL;
            o->rebuild_threshold = value ? strtof(value, &end) : 0.0f;
            ok = value && *value && *end == '\0' && o->rebuild_threshold >= 1.0f &&
                 o->rebuild_threshold <= 1000.0f;
        } else if (strcmp(name, "--looseness") == 0) {
            /* Any number is passed on: the range is the library's to enforce (and report). */
            char *end = NULL;
            o->looseness = value ? strtof(value, &end) : 0.0f;
            o->looseness_set = ok = value && *value && *end == '\0';
        } else if (strcmp(name, "--check-full-limit") == 0) {
            ok = parse_count(value, SIZE_MAX, &o->check_full_limit);
        } else if (strcmp(name, "--svg") == 0) {
            o->svg_path = value;
            ok = value && *value;
        } else if (strcmp(name, "--svg-box") == 0) {
            ok = svg_parse_box(value, &o->svg);
        } else if (strcmp(name, "--svg-ray") == 0) {
            ok = svg_parse_ray(value, &o->svg);
        } else if (strcmp(name, "--svg-plane") == 0) {
            o->svg_plane_set = ok = svg_parse_plane(value, &o->svg.plane);
        } else if (strcmp(name, "--crowd-route") == 0) {
            const char *routes[CROWD_ROUTES];
            for (int q = 0; q < CROWD_ROUTES; q++) routes[q] = crowd_route_name((crowd_route)q);
            ok = parse_name(value, routes, CROWD_ROUTES, &choice);
            if (ok) o->crowd_routes[choice] = o->crowd_routes_set = true;
        } else if (strcmp(name, "--crowd-dims") == 0) {
            ok = parse_int(value, 2, 3, &o->crowd_dims);
        } else if (strcmp(name, "--crowd-k") == 0) {
            ok = parse_count(value, 1024, &o->crowd_k) && o->crowd_k > 0;
        } else if (strcmp(name, "--crowd-distance") == 0 || strcmp(name, "--crowd-density") == 0) {
            char *end = NULL;
            float v = value ? strtof(value, &end) : 0.0f;
            ok = value && *value && *end == '\0' && v > 0.0f && isfinite(v);
            *(strcmp(name, "--crowd-distance") == 0 ? &o->crowd_distance : &o->crowd_density) = v;
        } else if (strcmp(name, "--load") == 0) {
            ok = parse_int(value, 0, 64, &o->load);
        } else if (strcmp(name, "--soak-sample") == 0) {
            ok = parse_count(value, 1u << 20, &o->soak_sample);
        } else if (strcmp(name, "--soak-csv") == 0) {
            ok = value != NULL;
            o->soak_csv = value;
        } else if (strcmp(name, "--check-sample") == 0) {
            ok = parse_count(value, SIZE_MAX, &o->check_sample) && o->check_sample > 0;
        } else {
            fprintf(stderr, "broadphase-run: unknown option '%s' (see --help)\n", arg);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "broadphase-run: bad or missing value for %s%s%s (see --help)\n", name,
                    value ? ": " : "", value ? value : "");
            return 2;
        }
    }
    if (!o->svg_path && (o->svg.box_count || o->svg.ray_count || o->svg_plane_set)) {
        fprintf(stderr, "broadphase-run: --svg-box, --svg-ray and --svg-plane need --svg FILE\n");
        return 2;
    }
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The figures of a series (series.h), from a copy sorted in scratch. */
static series series_stats(const double *v, size_t n, double *scratch) {
    if (n > 0) memcpy(scratch, v, n * sizeof *v);
    return series_sorted(scratch, n);
}

static void api_error(broadphase_world *w, const char *call, size_t frame, broadphase_status st) {
    fprintf(stderr, "broadphase-run: %s failed", call);
    if (frame != SIZE_MAX) fprintf(stderr, " at frame %zu", frame);
    fprintf(stderr, ": %s", broadphase_status_string(st));
    size_t index = w ? broadphase_last_error_index(w) : SIZE_MAX;
    if (index != SIZE_MAX) fprintf(stderr, " (element %zu of the batch)", index);
    fprintf(stderr, "\n");
}

/* The fields of a configuration the library refused that lie outside the ranges broadphase.h
 * documents, named one per line; the whole configuration when none does. */
static void config_error(const char *which, const broadphase_config *c) {
    fprintf(stderr, "broadphase-run: the library refuses the %sconfiguration (%s)\n", which,
            broadphase_status_string(BROADPHASE_ERROR_INVALID_CONFIG));
    bool named = false;
#define RUNNER_RANGE_(bad, ...)                                                                    \
    if (bad) {                                                                                     \
        fprintf(stderr, "  " __VA_ARGS__);                                                         \
        named = true;                                                                              \
    }
    RUNNER_RANGE_(c->dimensions != 2 && c->dimensions != 3, "dimensions %d: must be 2 or 3\n",
                  c->dimensions)
    RUNNER_RANGE_(c->threads < 0 || c->threads > 1024, "threads %d: outside 0..1024\n", c->threads)
    RUNNER_RANGE_(c->leaf_size < 1 || c->leaf_size > 4096, "leaf size %d: outside 1..4096\n",
                  c->leaf_size)
    RUNNER_RANGE_(c->max_depth < 1 || c->max_depth > 64, "max depth %d: outside 1..64\n",
                  c->max_depth)
    RUNNER_RANGE_(!(c->rebuild_threshold >= 1.0f && c->rebuild_threshold <= 1000.0f),
                  "rebuild threshold %g: outside 1..1000\n", (double)c->rebuild_threshold)
    RUNNER_RANGE_(!(c->looseness >= 1.0f && c->looseness <= 4.0f),
                  "looseness %g: outside 1..4 (--looseness)\n", (double)c->looseness)
    RUNNER_RANGE_(c->initial_capacity > (size_t)UINT32_MAX - 1,
                  "initial capacity %zu: more objects than ids\n", c->initial_capacity)
#undef RUNNER_RANGE_
    if (!named) {
        fprintf(stderr,
                "  dimensions %d, method %d, update %d, threads %d, leaf size %d, max depth %d, "
                "rebuild threshold %g, looseness %g, initial capacity %zu\n",
                c->dimensions, (int)c->method, (int)c->update, c->threads, c->leaf_size,
                c->max_depth, (double)c->rebuild_threshold, (double)c->looseness,
                c->initial_capacity);
    }
}

/* ---- checking ------------------------------------------------------------------------------ */

typedef struct pair_list {
    broadphase_pair *data;
    size_t count, capacity;
} pair_list;

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

typedef struct checker {
    const options *opt;
    const scene *s;
    const uint32_t *ids;
    uint32_t *index_of_id; /* id -> object index, for messages and the sampled check */
    size_t id_limit;
    /* Sampled check: objects sorted by min x, and the few widest objects kept apart so that
     * they do not widen the sweep window for everybody. */
    uint32_t *order, *order_tmp, *big;
    uint32_t *keys, *keys_tmp;
    float *sorted_min[3], *sorted_max[3];
    size_t small_count, big_count;
    double max_small_extent;
    uint8_t *sampled; /* by id */
    uint32_t *samples;
    pair_list want, got;
    char message[1024];
} checker;

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
static bool check_order(checker *c, size_t frame, const broadphase_pairs *p) {
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
static bool compare_lists(checker *c, size_t frame, const broadphase_pair *got, size_t got_count,
                          const broadphase_pair *want, size_t want_count, const char *oracle) {
    size_t i = 0, j = 0;
    while (i < got_count || j < want_count) {
        int order = i == got_count ? 1 : j == want_count ? -1 : pair_order(got[i], want[j]);
        if (order == 0) {
            i++, j++;
            continue;
        }
        char detail[200];
        snprintf(detail, sizeof detail, " (%s: %zu pairs, %s: %zu)", method_names[c->opt->method],
                 got_count, oracle, want_count);
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
static int check_sampled(checker *c, size_t frame, const broadphase_pairs *got) {
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

static bool checker_init(checker *c, const options *o, const scene *s, const uint32_t *ids) {
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

static void checker_free(checker *c) {
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

/* ---- the run --------------------------------------------------------------------------------- */

typedef struct frame_times {
    double *step, *move, *frame, *update, *search, *output, *check, *scratch, *gauge;
    size_t *pairs;
    char *work; /* what the step did to the tree (frame_work) */
} frame_times;

/* What a step did to the tree, from the statistics before and after it: 'R' rebuilt it, 'L'
 * laid every object out anew (the octree's full and light relayouts), 'W' laid a pair of the
 * octree's windows out, '-' none of these (a refit alone, or no update). */
static char frame_work(const broadphase_stats *before, const broadphase_stats *after) {
    if (after->rebuilds != before->rebuilds) return 'R';
    if (after->relayouts != before->relayouts) return 'L';
    if (after->window_relayouts != before->window_relayouts) return 'W';
    return '-';
}

/* The frames (1 on) by what their step did to the tree: how many, and the median frame of each
 * kind against the median of the plain ones ('-'), the periodic work's own cost as a user
 * feels it; then the plain frames' p99 and worst, what is left when that work is set apart. */
static void print_work(const frame_times *ft, size_t n) {
    static const char kinds[] = "-WLR";
    static const char *const names[] = {"plain", "pair of windows", "relayout", "rebuild"};
    double *v = malloc(n * sizeof *v);
    if (!v) return;
    double plain = 0.0;
    printf("frames by the tree's work:");
    for (int k = 0; k < 4; k++) {
        size_t m = 0;
        for (size_t f = 1; f < n; f++)
            if (ft->work[f] == kinds[k]) v[m++] = ft->frame[f];
        if (m == 0) continue;
        series r = series_stats(v, m, ft->scratch);
        if (k == 0) {
            plain = r.median;
            printf(" plain %zu (median %.3f, p99 %.3f, worst %.3f ms)", m, r.median, r.p99,
                   r.worst);
        } else if (plain > 0.0) {
            printf("; %s %zu (median %.2fx the plain, worst %.2fx)", names[k], m, r.median / plain,
                   r.worst / plain);
        } else {
            printf("; %s %zu (median %.3f ms)", names[k], m, r.median);
        }
    }
    printf("\n");
    free(v);
}

static void progress(size_t done, size_t total, double elapsed_ms, bool final) {
    static double last_draw = -1e9;
    if (!final && elapsed_ms - last_draw < 100.0) return;
    last_draw = elapsed_ms;
    enum { width = 40 };
    char bar[width + 1];
    size_t filled = total ? done * width / total : width;
    for (size_t i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r[%s] %zu/%zu frames, %.1f s", bar, done, total, elapsed_ms * 1e-3);
    if (final) fprintf(stderr, "\n");
    fflush(stderr);
}

/* The tree level by level (broadphase_get_levels) after the last step: printed when `print`,
 * and checked against the totals of broadphase_get_stats when `check` (the levels must number
 * depth + 1, each must hold a node, and nodes, leaves and objects must add up to the totals).
 * 0 when fine, 1 when the check fails (the reason in message), -1 on a library error. */
static int tree_levels(broadphase_world *w, const broadphase_stats *stats, bool print, bool check,
                       char *message, size_t message_size) {
    size_t n = 0;
    broadphase_status st = broadphase_get_levels(w, NULL, 0, &n);
    if (st != BROADPHASE_OK && st != BROADPHASE_ERROR_BUFFER_TOO_SMALL) {
        api_error(w, "broadphase_get_levels", SIZE_MAX, st);
        return -1;
    }
    broadphase_level *levels = malloc((n ? n : 1) * sizeof *levels);
    if (!levels) {
        fprintf(stderr, "broadphase-run: out of memory for the tree levels\n");
        return -1;
    }
    size_t again = n;
    st = broadphase_get_levels(w, levels, n, &again);
    if (st != BROADPHASE_OK) {
        api_error(w, "broadphase_get_levels", SIZE_MAX, st);
        free(levels);
        return -1;
    }
    broadphase_level total = {0};
    for (size_t l = 0; l < n; l++) {
        total.nodes += levels[l].nodes;
        total.leaves += levels[l].leaves;
        total.objects += levels[l].objects;
    }
    if (print) {
        printf("levels after the last step: %zu\n", n);
        if (n) printf("  %5s %12s %12s %12s\n", "level", "nodes", "leaves", "objects");
        for (size_t l = 0; l < n; l++) {
            printf("  %5zu %12zu %12zu %12zu\n", l, levels[l].nodes, levels[l].leaves,
                   levels[l].objects);
        }
        if (n) {
            printf("  %5s %12zu %12zu %12zu\n", "all", total.nodes, total.leaves, total.objects);
        }
    }
    /* The first disagreement, if any; an empty tree (no nodes) may report no levels. */
    char why[200] = "";
    if (check && again != n) {
        snprintf(why, sizeof why, "it counts %zu levels, then %zu", n, again);
    } else if (check && n != stats->depth + 1 && !(n == 0 && stats->nodes == 0)) {
        snprintf(why, sizeof why, "%zu levels, but depth %zu", n, stats->depth);
    } else if (check && total.nodes != stats->nodes) {
        snprintf(why, sizeof why, "%zu nodes over all levels, %zu in the stats", total.nodes,
                 stats->nodes);
    } else if (check && total.leaves != stats->leaves) {
        snprintf(why, sizeof why, "%zu leaves over all levels, %zu in the stats", total.leaves,
                 stats->leaves);
    } else if (check &&
               total.objects != stats->objects - stats->static_objects - stats->resting_objects) {
        /* The tree holds the live objects that are neither static nor at rest. */
        snprintf(why, sizeof why,
                 "%zu objects over all levels, %zu live objects (%zu static, %zu at rest)",
                 total.objects, stats->objects, stats->static_objects, stats->resting_objects);
    }
    for (size_t l = 0; check && !why[0] && l < n; l++) {
        if (levels[l].nodes == 0) {
            snprintf(why, sizeof why, "no node at level %zu, above the deepest (%zu)", l, n - 1);
        } else if (levels[l].leaves > levels[l].nodes) {
            snprintf(why, sizeof why, "%zu leaves but %zu nodes at level %zu", levels[l].leaves,
                     levels[l].nodes, l);
        }
    }
    if (why[0]) {
        snprintf(message, message_size,
                 "levels: broadphase_get_levels disagrees with broadphase_get_stats: %s", why);
    }
    int result = why[0] ? 1 : 0;
    free(levels);
    return result;
}

/* --svg: the picture of the world as the last step left it, after one step when no frame ran.
 * false on a library or file error (reported). */
static bool write_picture(broadphase_world *w, const scene *s, const uint32_t *ids,
                          const options *o, size_t frames_done) {
    if (frames_done == 0) {
        broadphase_status st = broadphase_step(w, NULL);
        if (st != BROADPHASE_OK) {
            api_error(w, "broadphase_step (for --svg)", SIZE_MAX, st);
            return false;
        }
        printf("svg: no frame was run: stepped once for the picture\n");
    }
    char title[256], leaf[32] = "default leaf size";
    if (o->leaf_size) snprintf(leaf, sizeof leaf, "leaf size %d", o->leaf_size);
    snprintf(title, sizeof title, "%s, n %zu, seed %llu, after %zu frame%s: %s%s, %s",
             scene_name(o->scene), o->count, (unsigned long long)o->seed,
             frames_done ? frames_done : 1, frames_done > 1 ? "s" : "", method_names[o->method],
             o->method == BROADPHASE_METHOD_OCTREE && s->dimensions == 2 ? " (quadtree)" : "",
             o->method == BROADPHASE_METHOD_BRUTE_FORCE ? "no tree" : leaf);
    svg_options so = o->svg;
    so.title = title;
    FILE *f = fopen(o->svg_path, "w");
    if (!f) {
        fprintf(stderr, "broadphase-run: cannot write %s: %s\n", o->svg_path, strerror(errno));
        return false;
    }
    svg_summary sum;
    int st = svg_write(f, w, s, ids, &so, &sum);
    bool write_failed = ferror(f) != 0;
    write_failed |= fclose(f) != 0;
    if (st != (int)BROADPHASE_OK) {
        api_error(w, sum.failed_call, SIZE_MAX, (broadphase_status)st);
        return false;
    }
    if (write_failed) {
        fprintf(stderr, "broadphase-run: writing %s failed\n", o->svg_path);
        return false;
    }
    printf("svg: %s: %zu objects, %zu nodes, %zu pairs (%zu objects in a pair)", o->svg_path,
           sum.objects, sum.nodes, sum.pairs, sum.paired_objects);
    if (so.box_count) printf("; box: %zu candidates, %zu hits", sum.candidates, sum.hits);
    if (so.ray_count) {
        printf("; ray: %zu hits", sum.ray_hits);
        if (sum.closest != UINT32_MAX)
            printf(", the first %u at t %g", sum.closest, (double)sum.closest_t);
    }
    printf("\n");
    return true;
}

static void print_series(const char *name, const double *v, size_t n, double *scratch) {
    series r = series_stats(v, n, scratch);
    printf("  %-10s %12.3f %12.3f %12.3f %12.3f\n", name, r.median, r.p99, r.worst, r.min);
}

/* The host gauge's series (frames 1 on, as the frame's), how steady it was, and the frames with
 * a gauge past GAUGE_CALM times its median on either side (the one before the frame's move, the
 * one after its step): the host disturbed those, or the time around them. The frame's figures
 * over the other frames are printed for reading only: every frame counts in the frame's own. */
#define GAUGE_CALM 1.25
static void print_gauge(frame_times *ft, size_t n, int threads) {
    print_series("gauge", ft->gauge + 1, n - 1, ft->scratch);
    series g = series_stats(ft->gauge + 1, n - 1, ft->scratch);
    double *others = malloc(n * sizeof *others);
    if (!others) return;
    size_t calm = 0;
    for (size_t f = 1; f < n; f++)
        if (ft->gauge[f] <= GAUGE_CALM * g.median && ft->gauge[f - 1] <= GAUGE_CALM * g.median)
            others[calm++] = ft->frame[f];
    printf("host gauge: the same work on %d thread%s after every step, p99 %.2fx and worst %.2fx "
           "its median; %zu of %zu frames beside a gauge past %.2fx",
           threads, threads == 1 ? "" : "s", g.p99 / g.median, g.worst / g.median, n - 1 - calm,
           n - 1, GAUGE_CALM);
    if (calm > 0) {
        series c = series_stats(others, calm, ft->scratch);
        printf("; the frame over the others: median %.3f, p99 %.3f (%.2fx), worst %.3f (%.2fx) ms",
               c.median, c.p99, c.p99 / c.median, c.worst, c.worst / c.median);
    }
    printf("\n");
    free(others);
}

int main(int argc, char **argv) {
    options o;
    int parsed = parse_options(argc, argv, &o);
    if (parsed) return parsed == 1 ? 0 : 2;
    if (o.crowd) {
        crowd_run_options co = {.dims = o.crowd_dims,
                                .count = o.count,
                                .frames = o.frames,
                                .k = o.crowd_k,
                                .distance = o.crowd_distance,
                                .per_neighbourhood = o.crowd_density,
                                .step = 0.5f,
                                .threads = o.threads,
                                .seed = o.seed,
                                .check = o.check,
                                .svg_path = o.svg_path,
                                .quiet = o.quiet};
        for (int q = 0; q < CROWD_ROUTES; q++)
            co.routes[q] = o.crowd_routes_set ? o.crowd_routes[q] : true;
        return crowd_run(&co, stdout);
    }
    if (o.soak) {
        soak_options so = {.count = o.count,
                           .frames = o.frames,
                           .method = o.method,
                           .update = o.update,
                           .threads = o.threads,
                           .seed = o.seed,
                           .sample = o.soak_sample,
                           .full_every = 1000,
                           .warmup = 1000,
                           .memory_slack = 0.05,
                           .csv_path = o.soak_csv,
                           .quiet = o.quiet};
        return soak_run(&so, stdout);
    }

    double t0 = now_ms();
    scene s;
    if (!scene_make(&s, o.scene, o.count, o.seed)) {
        fprintf(stderr, "broadphase-run: out of memory building scene %s with %zu objects\n",
                scene_name(o.scene), o.count);
        return 1;
    }
    double scene_ms = now_ms() - t0;
    if (o.svg_path && s.dimensions == 2 && o.svg.plane != SVG_PLANE_XY) {
        fprintf(stderr, "broadphase-run: --svg-plane: scene %s is 2D, drawn on xy only\n",
                scene_name(o.scene));
        scene_free(&s);
        return 2;
    }

    broadphase_config cfg = broadphase_config_default(s.dimensions);
    cfg.method = o.method;
    cfg.update = o.update;
    cfg.threads = o.threads;
    if (o.leaf_size) cfg.leaf_size = o.leaf_size;
    if (o.max_depth) cfg.max_depth = o.max_depth;
    if (o.rebuild_threshold > 0.0f) cfg.rebuild_threshold = o.rebuild_threshold;
    if (o.looseness_set) cfg.looseness = o.looseness;
    cfg.initial_capacity = o.count;
    cfg.pair_events = o.events;
    cfg.fixed_threads = o.fixed_threads;

    bool full_check = o.check && o.count <= o.check_full_limit;
    bool sampled_check = o.check && !full_check;
    int threads_shown = o.threads ? o.threads : cpu_count();
    printf("broadphase-run: scene %s, n %zu, %dD, seed %llu, frames %zu\n", scene_name(o.scene),
           o.count, s.dimensions, (unsigned long long)o.seed, o.frames);
    printf("method %s%s, update %s, threads %d%s, leaf size %d", method_names[o.method],
           o.method == BROADPHASE_METHOD_OCTREE && s.dimensions == 2 ? " (quadtree)" : "",
           update_names[o.update], threads_shown, o.threads ? "" : " (all)", cfg.leaf_size);
    if (o.method == BROADPHASE_METHOD_OCTREE) printf(", looseness %g", (double)cfg.looseness);
    printf(", simd %s\n", broadphase_simd_level());
    if (full_check) {
        printf("check: every frame against a brute-force world\n");
    } else if (sampled_check) {
        printf("check: every frame, pairs of %zu random objects against exact predicates\n",
               o.check_sample < o.count ? o.check_sample : o.count);
    }

    /* Before the frames and after them (printed with the summary): see machine.h. */
    double round_trip_before = machine_round_trip_ns(MACHINE_ROUND_TRIPS);
    int exit_code = 1;
    broadphase_world *w = NULL, *oracle = NULL;
    uint32_t *ids = malloc((o.count ? o.count : 1) * sizeof *ids);
    uint32_t *oracle_ids = full_check ? malloc((o.count ? o.count : 1) * sizeof *ids) : NULL;
    /* The program's own id buffer, paged in before the timed add, as a program that keeps its
     * buffers has it: its first touch is the program's cost, not the library's (at 1e6 on the
     * 2-core VM, 10 of the add's 17 ms). */
    if (ids) memset(ids, 0, (o.count ? o.count : 1) * sizeof *ids);
    frame_times ft = {0};
    size_t nf = o.frames ? o.frames : 1;
    ft.step = malloc(nf * sizeof(double));
    ft.move = malloc(nf * sizeof(double));
    ft.frame = malloc(nf * sizeof(double));
    ft.update = malloc(nf * sizeof(double));
    ft.search = malloc(nf * sizeof(double));
    ft.output = malloc(nf * sizeof(double));
    ft.check = malloc(nf * sizeof(double));
    ft.scratch = malloc(nf * sizeof(double));
    ft.pairs = malloc(nf * sizeof(size_t));
    ft.gauge = o.gauge ? malloc(nf * sizeof(double)) : NULL;
    ft.work = malloc(nf);
    machine_gauge *gauge = o.gauge ? machine_gauge_start(threads_shown) : NULL;
    checker chk = {0};
    bool check_failed = false;
    size_t frames_done = 0;
    if (!ids || (full_check && !oracle_ids) || !ft.step || !ft.move || !ft.frame || !ft.update ||
        !ft.search || !ft.output || !ft.check || !ft.scratch || !ft.pairs || !ft.work ||
        (o.gauge && (!ft.gauge || !gauge))) {
        fprintf(stderr, "broadphase-run: out of memory\n");
        goto done;
    }

    if (o.load > 0) {
        if (!load_start(o.load)) {
            fprintf(stderr, "broadphase-run: could not start %d spinning processes\n", o.load);
            goto done;
        }
        printf("load: %d spinning process%s beside the run\n", o.load, o.load == 1 ? "" : "es");
    }
    broadphase_status st = broadphase_create(&cfg, &w);
    if (st == BROADPHASE_ERROR_INVALID_CONFIG) {
        config_error("", &cfg);
        exit_code = 2;
        goto done;
    }
    if (st != BROADPHASE_OK) {
        api_error(NULL, "broadphase_create", SIZE_MAX, st);
        goto done;
    }
    if (full_check) {
        broadphase_config ocfg = cfg;
        ocfg.method = BROADPHASE_METHOD_BRUTE_FORCE;
        st = broadphase_create(&ocfg, &oracle);
        if (st == BROADPHASE_ERROR_INVALID_CONFIG) {
            config_error("brute-force oracle's ", &ocfg);
            exit_code = 2;
            goto done;
        }
        if (st != BROADPHASE_OK) {
            api_error(NULL, "broadphase_create (brute-force oracle)", SIZE_MAX, st);
            goto done;
        }
    }
    t0 = now_ms();
    st = (broadphase_status)scene_add_to_world(&s, w, ids);
    double add_ms = now_ms() - t0;
    if (st != BROADPHASE_OK) {
        api_error(w, "adding the scene", SIZE_MAX, st);
        goto done;
    }
    if (full_check) {
        st = (broadphase_status)scene_add_to_world(&s, oracle, oracle_ids);
        if (st != BROADPHASE_OK) {
            api_error(oracle, "adding the scene to the oracle", SIZE_MAX, st);
            goto done;
        }
        if (memcmp(ids, oracle_ids, o.count * sizeof *ids) != 0) {
            fprintf(stderr, "broadphase-run: check FAILED: the two worlds handed out different "
                            "ids for the same objects\n");
            check_failed = true;
            goto done;
        }
    }
    if (o.check && !checker_init(&chk, &o, &s, ids)) {
        fprintf(stderr, "broadphase-run: out of memory for the check\n");
        goto done;
    }
    printf("setup: scene %.1f ms, add %.1f ms\n", scene_ms, add_ms);

    bool lines = !o.quiet && (o.frames <= RUNNER_PER_FRAME_LINES_MAX || o.verbose);
    bool bar = !lines && isatty(fileno(stderr));
    if (lines) {
        printf("%6s %12s %10s %10s %10s %10s %10s%s %4s\n", "frame", "pairs", "step ms",
               "update ms", "search ms", "output ms", "move ms", o.gauge ? "   gauge ms" : "",
               "work");
    }
    double run_start = now_ms();
    broadphase_stats last_stats = {0};
    size_t begun_total = 0, ended_total = 0;
    for (size_t f = 0; f < o.frames; f++) {
        double move_ms = 0.0;
        /* Frame 0 steps the positions just added; later frames push every position again so
         * that the update path runs even in static scenes. */
        if (f > 0) {
            scene_advance(&s);
            t0 = now_ms();
            st = (broadphase_status)scene_move_in_world(&s, w, ids);
            move_ms = now_ms() - t0;
            if (st != BROADPHASE_OK) {
                api_error(w, "moving the scene", f, st);
                goto done;
            }
        }
        broadphase_pairs pairs;
        t0 = now_ms();
        st = broadphase_step(w, &pairs);
        double step_ms = now_ms() - t0;
        if (st != BROADPHASE_OK) {
            api_error(w, "broadphase_step", f, st);
            goto done;
        }
        broadphase_stats stats;
        st = broadphase_get_stats(w, &stats);
        if (st != BROADPHASE_OK) {
            api_error(w, "broadphase_get_stats", f, st);
            goto done;
        }
        ft.step[f] = step_ms;
        ft.move[f] = move_ms;
        ft.update[f] = stats.update_ms;
        ft.search[f] = stats.search_ms;
        ft.output[f] = stats.output_ms;
        ft.pairs[f] = pairs.count;
        ft.work[f] = frame_work(&last_stats, &stats);
        last_stats = stats;
        if (gauge) ft.gauge[f] = machine_gauge_run(gauge);
        frames_done = f + 1;
        if (o.events) {
            broadphase_events ev;
            st = broadphase_pair_events(w, &ev);
            if (st != BROADPHASE_OK) {
                api_error(w, "broadphase_pair_events", f, st);
                goto done;
            }
            begun_total += ev.begun.count;
            ended_total += ev.ended.count;
        }
        if (lines) {
            printf("%6zu %12zu %10.3f %10.3f %10.3f %10.3f %10.3f", f, pairs.count, step_ms,
                   stats.update_ms, stats.search_ms, stats.output_ms, move_ms);
            if (gauge) printf(" %10.3f", ft.gauge[f]);
            printf(" %4c\n", ft.work[f]);
            fflush(stdout);
        }

        if (o.check) {
            double check_start = now_ms();
            bool ok = check_order(&chk, f, &pairs);
            if (ok && full_check) {
                if (f > 0) {
                    st = (broadphase_status)scene_move_in_world(&s, oracle, oracle_ids);
                    if (st != BROADPHASE_OK) {
                        api_error(oracle, "moving the scene in the oracle", f, st);
                        goto done;
                    }
                }
                broadphase_pairs want;
                st = broadphase_step(oracle, &want);
                if (st != BROADPHASE_OK) {
                    api_error(oracle, "broadphase_step (oracle)", f, st);
                    goto done;
                }
                /* Both outputs are sorted, so equal sets are equal bytes. */
                bool same = want.count == pairs.count &&
                            (pairs.count == 0 ||
                             memcmp(want.data, pairs.data, pairs.count * sizeof *pairs.data) == 0);
                if (!same) {
                    ok = false;
                    snprintf(chk.message, sizeof chk.message, "frame %zu: outputs differ", f);
                    compare_lists(&chk, f, pairs.data, pairs.count, want.data, want.count,
                                  "brute force");
                }
            } else if (ok) {
                ok = check_sampled(&chk, f, &pairs);
            }
            ft.check[f] = now_ms() - check_start;
            if (!ok) {
                if (bar) fprintf(stderr, "\n");
                fprintf(stderr, "broadphase-run: check FAILED at %s\n", chk.message);
                check_failed = true;
                break;
            }
        }
        if (bar) progress(f + 1, o.frames, now_ms() - run_start, f + 1 == o.frames);
    }

    broadphase_stats stats;
    st = broadphase_get_stats(w, &stats);
    if (st != BROADPHASE_OK) {
        api_error(w, "broadphase_get_stats", SIZE_MAX, st);
        goto done;
    }
    size_t n = frames_done;
    printf("summary over %zu frames (ms)     median          p99        worst          min\n", n);
    print_series("step", ft.step, n, ft.scratch);
    print_series("update", ft.update, n, ft.scratch);
    print_series("search", ft.search, n, ft.scratch);
    print_series("output", ft.output, n, ft.scratch);
    if (n > 1) print_series("move", ft.move + 1, n - 1, ft.scratch);
    /* What a user feels: moving the objects in plus the step, every frame after the first. */
    if (n > 1) {
        for (size_t f = 1; f < n; f++) ft.frame[f] = ft.move[f] + ft.step[f];
        print_series("frame", ft.frame + 1, n - 1, ft.scratch);
    }
    if (n > 1) print_work(&ft, n);
    if (gauge && n > 1) print_gauge(&ft, n, threads_shown);
    if (o.check && !check_failed) print_series("check", ft.check, n, ft.scratch);
    if (n > 0) {
        double median = series_stats(ft.step, n, ft.scratch).median;
        size_t first = ft.pairs[0], last = ft.pairs[n - 1];
        qsort(ft.pairs, n, sizeof(size_t), cmp_size);
        printf("first frame: add %.3f + step %.3f = %.3f ms\n", add_ms, ft.step[0],
               add_ms + ft.step[0]);
        printf("pairs: first %zu, last %zu, median %zu\n", first, last, ft.pairs[n / 2]);
        if (median > 0.0) {
            printf("throughput: %.3g objects/s at the median step\n",
                   (double)o.count / (median * 1e-3));
        }
    }
    if (o.events && n > 0)
        printf(
            "events: %zu pairs begun, %zu ended over %zu frames (the first frame's begun: all)\n",
            begun_total, ended_total, n);
    printf("machine: cross-core round trip %.0f ns before the frames, %.0f ns after\n",
           round_trip_before, machine_round_trip_ns(MACHINE_ROUND_TRIPS));
    printf("memory: %.2f MiB in use, %llu allocations\n", (double)stats.bytes_in_use / 1048576.0,
           (unsigned long long)stats.allocations);
    printf("structure: %llu steps, %llu rebuilds, %llu refits, %llu unchanged; %zu objects at "
           "rest (%llu rest builds), %zu static\n",
           (unsigned long long)stats.steps, (unsigned long long)stats.rebuilds,
           (unsigned long long)stats.refits, (unsigned long long)stats.unchanged_steps,
           stats.resting_objects, (unsigned long long)stats.rest_builds, stats.static_objects);
    printf("threads: the last step ran on %zu of %d; %llu of %llu steps had a thread preempted\n",
           stats.step_threads, threads_shown, (unsigned long long)stats.preempted_steps,
           (unsigned long long)stats.steps);
    bool tree = o.method != BROADPHASE_METHOD_BRUTE_FORCE;
    if (tree) {
        printf("tree: %zu nodes, %zu leaves, depth %zu, %zu objects in internal nodes, %zu spare "
               "nodes, %llu root growths, quality %.3g\n",
               stats.nodes, stats.leaves, stats.depth, stats.objects_in_internal_nodes,
               stats.spare_nodes, (unsigned long long)stats.root_growths, (double)stats.quality);
        if (o.method == BROADPHASE_METHOD_OCTREE)
            printf("search: %llu of %llu steps walked the leaf list, made %llu times; %llu "
                   "relayouts, %llu of one window\n",
                   (unsigned long long)stats.flat_searches, (unsigned long long)stats.steps,
                   (unsigned long long)stats.flat_builds, (unsigned long long)stats.relayouts,
                   (unsigned long long)stats.window_relayouts);
    }
    if (o.levels && !tree) printf("levels: none (brute force keeps no tree)\n");
    /* The level check needs a step, and is moot once a frame has already failed. */
    bool check_levels = o.check && !check_failed && tree && n > 0;
    if ((o.levels && tree) || check_levels) {
        int level_result =
            tree_levels(w, &stats, o.levels, check_levels, chk.message, sizeof chk.message);
        if (level_result < 0) goto done;
        if (level_result > 0) {
            fprintf(stderr, "broadphase-run: check FAILED at %s\n", chk.message);
            check_failed = true;
        }
    }
    if (o.svg_path && !write_picture(w, &s, ids, &o, n)) goto done;
    if (o.check) {
        if (check_failed) {
            printf("check: FAILED at %.*s (details on stderr)\n", (int)strcspn(chk.message, ":"),
                   chk.message);
        } else {
            printf("check: OK (%zu frames, %s)\n", n, full_check ? "full" : "sampled");
        }
    }
    exit_code = check_failed ? 1 : 0;

done:
    load_stop();
    if (check_failed && exit_code != 1) exit_code = 1;
    checker_free(&chk);
    broadphase_destroy(w);
    broadphase_destroy(oracle);
    free(ids);
    free(oracle_ids);
    free(ft.step);
    free(ft.move);
    free(ft.frame);
    free(ft.update);
    free(ft.search);
    free(ft.output);
    free(ft.check);
    free(ft.scratch);
    free(ft.pairs);
    free(ft.gauge);
    free(ft.work);
    machine_gauge_stop(gauge);
    scene_free(&s);
    return exit_code;
}

/* The C side of the benchmark suite: the table of cases (scene x size x method x update policy x
 * threads) and the calls that set a case up, step one frame, read its counters and tear it
 * down. bench_shim.cc registers one Google Benchmark per case and declares these functions. */
#include "bench.h"

#include "broadphase.h"
#include "scenes.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Brute force is quadratic: beyond this size one frame takes longer than a benchmark run. */
#define BENCH_BRUTE_FORCE_MAX 20000
#define BENCH_SEED 1

typedef struct bench_case {
    scene_kind scene;
    broadphase_method method;
    broadphase_update_policy update;
    size_t count;
    int threads; /* 0: all hardware threads */
    int threads_label;
    char name[96];
} bench_case;

typedef struct bench_run {
    const bench_case *c;
    scene s;
    broadphase_world *w;
    uint32_t *ids;
    /* Totals since the last bench_reset_totals, for per-frame averages. */
    size_t frames, last_pairs;
    double update_ms, search_ms, output_ms;
    uint64_t rebuilds_at_reset, rebuilds;
} bench_run;

static bench_case bench_cases[512];
static size_t bench_cases_count;

int bench_hardware_threads(void) {
    /* The affinity mask, like OpenMP's processor count, so that taskset is respected. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void add_case(scene_kind kind, broadphase_method method, broadphase_update_policy update,
                     size_t count, int threads) {
    static const char *const update_names[] = {"auto", "rebuild", "refit"};
    if (bench_cases_count == sizeof bench_cases / sizeof bench_cases[0]) return;
    bench_case *c = &bench_cases[bench_cases_count++];
    c->scene = kind;
    c->method = method;
    c->update = update;
    c->count = count;
    c->threads = threads;
    c->threads_label = threads ? threads : bench_hardware_threads();
    if (method == BROADPHASE_METHOD_BRUTE_FORCE) {
        snprintf(c->name, sizeof c->name, "step/%s/brute/n:%zu/threads:%d", scene_name(kind), count,
                 c->threads_label);
    } else {
        snprintf(c->name, sizeof c->name, "step/%s/%s/%s/n:%zu/threads:%d", scene_name(kind),
                 method == BROADPHASE_METHOD_KDTREE ? "kdtree" : "octree", update_names[update],
                 count, c->threads_label);
    }
}

/* Every tree method runs the same cases: scenes, sizes, update policies and thread counts, so
 * that step/<scene>/kdtree/... and step/<scene>/octree/... compare one to one. */
static void build_cases(void) {
    static const broadphase_method trees[] = {BROADPHASE_METHOD_KDTREE, BROADPHASE_METHOD_OCTREE};
    static const scene_kind scenes[] = {SCENE_UNIFORM, SCENE_MOVING, SCENE_SPHERES, SCENE_PLANE2D,
                                        SCENE_MOVING2D};
    static const size_t counts[] = {10000, 100000, 1000000};
    static const broadphase_update_policy updates[] = {
        BROADPHASE_UPDATE_REBUILD, BROADPHASE_UPDATE_REFIT, BROADPHASE_UPDATE_AUTO};
    /* One thread, then all of them (0, labelled with the count) unless that is also one. */
    int thread_options[2] = {1, 0}, thread_option_count = bench_hardware_threads() > 1 ? 2 : 1;
    for (size_t n = 0; n < sizeof counts / sizeof counts[0]; n++) {
        for (size_t sc = 0; sc < sizeof scenes / sizeof scenes[0]; sc++) {
            for (size_t m = 0; m < sizeof trees / sizeof trees[0]; m++) {
                for (size_t u = 0; u < sizeof updates / sizeof updates[0]; u++) {
                    for (int t = 0; t < thread_option_count; t++) {
                        add_case(scenes[sc], trees[m], updates[u], counts[n], thread_options[t]);
                    }
                }
            }
            if (counts[n] <= BENCH_BRUTE_FORCE_MAX) {
                for (int t = 0; t < thread_option_count; t++) {
                    add_case(scenes[sc], BROADPHASE_METHOD_BRUTE_FORCE, BROADPHASE_UPDATE_AUTO,
                             counts[n], thread_options[t]);
                }
            }
        }
    }
}

size_t bench_case_count(void) {
    if (bench_cases_count == 0) build_cases();
    return bench_cases_count;
}

const char *bench_case_name(size_t i) {
    return i < bench_case_count() ? bench_cases[i].name : "";
}

size_t bench_case_objects(size_t i) {
    return i < bench_case_count() ? bench_cases[i].count : 0;
}

int bench_case_threads(size_t i) {
    return i < bench_case_count() ? bench_cases[i].threads_label : 0;
}

const char *bench_status_string(int status) {
    return broadphase_status_string((broadphase_status)status);
}

bench_run *bench_setup(size_t i, char *error, size_t error_size) {
    if (i >= bench_case_count()) {
        snprintf(error, error_size, "no benchmark case %zu", i);
        return NULL;
    }
    bench_run *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    r->c = &bench_cases[i];
    if (!scene_make(&r->s, r->c->scene, r->c->count, BENCH_SEED) ||
        !(r->ids = malloc((r->c->count ? r->c->count : 1) * sizeof *r->ids))) {
        snprintf(error, error_size, "out of memory building the scene");
        bench_teardown(r);
        return NULL;
    }
    broadphase_config cfg = broadphase_config_default(r->s.dimensions);
    cfg.method = r->c->method;
    cfg.update = r->c->update;
    cfg.threads = r->c->threads;
    cfg.initial_capacity = r->c->count;
    broadphase_status st = broadphase_create(&cfg, &r->w);
    const char *stage = "broadphase_create";
    if (st == BROADPHASE_OK) {
        stage = "adding the scene";
        st = (broadphase_status)scene_add_to_world(&r->s, r->w, r->ids);
    }
    /* The warm-up step builds the structure and grows every buffer to its working size. */
    if (st == BROADPHASE_OK) {
        stage = "warm-up step";
        st = broadphase_step(r->w, NULL);
    }
    if (st != BROADPHASE_OK) {
        snprintf(error, error_size, "%s: %s", stage, broadphase_status_string(st));
        bench_teardown(r);
        return NULL;
    }
    bench_reset_totals(r);
    return r;
}

int bench_is_moving(const bench_run *r) {
    return scene_is_moving(r->s.kind);
}

void bench_advance(bench_run *r) {
    scene_advance(&r->s);
}

/* One frame as a user runs it: push every position (unchanged in static scenes, so the update
 * path still runs), then step. */
int bench_frame(bench_run *r) {
    broadphase_status st = (broadphase_status)scene_move_in_world(&r->s, r->w, r->ids);
    broadphase_pairs pairs = {0};
    if (st == BROADPHASE_OK) st = broadphase_step(r->w, &pairs);
    broadphase_stats stats;
    if (st == BROADPHASE_OK) st = broadphase_get_stats(r->w, &stats);
    if (st != BROADPHASE_OK) return (int)st;
    r->frames++;
    r->last_pairs = pairs.count;
    r->update_ms += stats.update_ms;
    r->search_ms += stats.search_ms;
    r->output_ms += stats.output_ms;
    r->rebuilds = stats.rebuilds;
    return (int)BROADPHASE_OK;
}

void bench_reset_totals(bench_run *r) {
    broadphase_stats stats = {0};
    r->frames = 0;
    r->update_ms = r->search_ms = r->output_ms = 0.0;
    r->rebuilds_at_reset = broadphase_get_stats(r->w, &stats) == BROADPHASE_OK ? stats.rebuilds : 0;
    r->rebuilds = r->rebuilds_at_reset;
    r->last_pairs = stats.pairs;
}

static double per_frame(const bench_run *r, double total) {
    return r->frames ? total / (double)r->frames : 0.0;
}

double bench_last_pairs(const bench_run *r) {
    return (double)r->last_pairs;
}

double bench_mean_update_ms(const bench_run *r) {
    return per_frame(r, r->update_ms);
}

double bench_mean_search_ms(const bench_run *r) {
    return per_frame(r, r->search_ms);
}

double bench_mean_output_ms(const bench_run *r) {
    return per_frame(r, r->output_ms);
}

double bench_rebuilds_per_frame(const bench_run *r) {
    return per_frame(r, (double)(r->rebuilds - r->rebuilds_at_reset));
}

void bench_teardown(bench_run *r) {
    if (!r) return;
    broadphase_destroy(r->w);
    free(r->ids);
    scene_free(&r->s);
    free(r);
}

/* broadphase-run: builds a named scene, steps it for some frames, prints per-phase timings and
 * pair counts, and on request checks every frame against the brute-force oracle (a second world
 * below RUNNER_FULL_CHECK_LIMIT objects, exact predicates on sampled objects above). Its modes,
 * each in a file of its own: the scene run (scene_run.c), the soak (--soak, soak.c) and the
 * crowd (--crowd, crowd_run.c); the options are read in options.c. */
#include "runner.h"

#include "crowd_run.h"
#include "soak.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

double runner_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int runner_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void runner_api_error(broadphase_world *w, const char *call, size_t frame, broadphase_status st) {
    fprintf(stderr, "broadphase-run: %s failed", call);
    if (frame != SIZE_MAX) fprintf(stderr, " at frame %zu", frame);
    fprintf(stderr, ": %s", broadphase_status_string(st));
    size_t index = w ? broadphase_last_error_index(w) : SIZE_MAX;
    if (index != SIZE_MAX) fprintf(stderr, " (element %zu of the batch)", index);
    fprintf(stderr, "\n");
}

void runner_config_error(const char *which, const broadphase_config *c) {
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

/* --crowd: the crowd's neighbourhoods by every route (crowd_run.h). */
static int crowd_mode(const options *o) {
    crowd_run_options co = {.dims = o->crowd_dims,
                            .count = o->count,
                            .frames = o->frames,
                            .k = o->crowd_k,
                            .distance = o->crowd_distance,
                            .per_neighbourhood = o->crowd_density,
                            .step = 0.5f,
                            .threads = o->threads,
                            .seed = o->seed,
                            .check = o->check,
                            .svg_path = o->svg_path,
                            .quiet = o->quiet};
    for (int q = 0; q < CROWD_ROUTES; q++)
        co.routes[q] = o->crowd_routes_set ? o->crowd_routes[q] : true;
    return crowd_run(&co, stdout);
}

/* --soak: churn for many frames, checked and its memory held (soak.h). */
static int soak_mode(const options *o) {
    soak_options so = {.count = o->count,
                       .frames = o->frames,
                       .method = o->method,
                       .update = o->update,
                       .threads = o->threads,
                       .seed = o->seed,
                       .sample = o->soak_sample,
                       .full_every = 1000,
                       .warmup = 1000,
                       .memory_slack = 0.05,
                       .csv_path = o->soak_csv,
                       .quiet = o->quiet};
    return soak_run(&so, stdout);
}

int main(int argc, char **argv) {
    options o;
    int parsed = runner_parse_options(argc, argv, &o);
    if (parsed) return parsed == 1 ? 0 : 2;
    if (o.crowd) return crowd_mode(&o);
    if (o.soak) return soak_mode(&o);
    return scene_run(&o);
}

/* What the runner's files share (broadphase-run): its options, as parsed from the command line
 * (options.c), and its messages and clock (runner.c). Each mode is a file of its own: the
 * scene run (scene_run.c, with its check against brute force, check.c), the soak (soak.c) and
 * the crowd (crowd_run.c). */
#pragma once

#include "broadphase.h"
#include "crowd.h"
#include "scenes.h"
#include "svg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* Reads the command line into *o: 0 on success, 1 to exit successfully (--help), 2 on a usage
 * error (message printed). */
int runner_parse_options(int argc, char **argv, options *o);
/* The name of an update policy as the options spell it ("auto", "rebuild", "refit"). */
const char *runner_update_name(broadphase_update_policy update);
/* The world's configuration for a scene of `dimensions` under these options. */
broadphase_config runner_config(const options *o, int dimensions);

/* A monotonic clock in milliseconds. */
double runner_now_ms(void);
/* The threads this process may run on (its affinity mask). */
int runner_cpu_count(void);
/* A library call that failed: which, at which frame (SIZE_MAX: none), the status, and the bad
 * element of the batch when the world names one. */
void runner_api_error(broadphase_world *w, const char *call, size_t frame, broadphase_status st);
/* The fields of a configuration the library refused that lie outside the ranges broadphase.h
 * documents, named one per line; the whole configuration when none does. */
void runner_config_error(const char *which, const broadphase_config *c);

/* The scene run (the default mode): a scene stepped for o->frames frames, timed, checked with
 * --check, summarised, drawn with --svg. The process's exit status. */
int scene_run(const options *o);

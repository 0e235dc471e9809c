/* The crowd run (broadphase-run --crowd): a crowd walked for some frames, every agent's
 * neighbourhood found each frame by each route (perf/common/crowd.h), the routes' answers compared
 * with one another (and, with check, with the brute-force reference on a sample), their times
 * summarised; an SVG picture of the last frame with one agent's neighbours marked. */
#pragma once

#include "crowd.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct crowd_run_options {
    int dims;
    size_t count, frames, k;
    float distance, per_neighbourhood, step;
    int threads;
    uint64_t seed;
    bool routes[CROWD_ROUTES]; /* which run */
    bool check;
    const char *svg_path;
    bool quiet;
} crowd_run_options;

/* 0 when every route gave the same neighbourhoods every frame (and the check passed), 1
 * otherwise or on a library error. */
int crowd_run(const crowd_run_options *o, FILE *out);

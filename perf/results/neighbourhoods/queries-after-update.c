/* Queries after broadphase_update against queries after a step, and after neither (issue 34:
 * "queries after the update-without-pairs call as fast as after a step"). A crowd of N agents as
 * points (zero-size boxes), walked a frame between measurements; each round moves them all, then
 * brings the world up to date one of three ways, then times one batch of ball queries (radius
 * 15, every agent) and one of bounded nearest searches (k 11 within 15). Rounds alternate the
 * three ways. Prints the median of each over the rounds.
 *
 * Build (from the repository root, after cmake --build build/release):
 *   cc -O2 -I engine/include -I build/release/include -I perf/common \
 *      perf/results/neighbourhoods/queries-after-update.c build/release/libbroadphase_scenes.a \
 *      build/release/libbroadphase_internal.a -fopenmp -lm -o /tmp/after_update
 *   /tmp/after_update 100000 1 15 */
#include "broadphase.h"
#include "crowd.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    int threads = argc > 2 ? atoi(argv[2]) : 1, rounds = argc > 3 ? atoi(argv[3]) : 15;
    crowd c;
    if (!crowd_make(&c, 2, n, 15.0f, 10, 20.0f, 0.5f, 1)) return 1;
    broadphase_config cfg = broadphase_config_default(2);
    cfg.threads = threads;
    broadphase_world *w;
    if (broadphase_create(&cfg, &w) != BROADPHASE_OK) return 1;
    uint32_t *ids = malloc(n * sizeof *ids);
    float *radius = malloc(n * sizeof *radius);
    for (size_t i = 0; i < n; i++) radius[i] = 15.0f;
    broadphase_boxes b = {c.pos[0], c.pos[1], NULL, c.pos[0], c.pos[1], NULL};
    broadphase_add_boxes(w, n, &b, ids);
    broadphase_step(w, NULL);
    size_t *offsets = malloc((n + 1) * sizeof *offsets), capacity = n * 40;
    uint32_t *rows = malloc(capacity * sizeof *rows), *near = malloc(n * 11 * sizeof *near);
    float *d2 = malloc(n * 11 * sizeof *d2);
    size_t *counts = malloc(n * sizeof *counts), bad;
    broadphase_spheres balls = {c.pos[0], c.pos[1], NULL, radius};
    broadphase_points pts = {c.pos[0], c.pos[1], NULL};
    double *ms[3][2];
    for (int m = 0; m < 3; m++)
        for (int q = 0; q < 2; q++) ms[m][q] = malloc(rounds * sizeof(double));
    static const char *const way[] = {"after a step", "after an update", "after neither"};
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < 3; m++) {
            for (int q = 0; q < 2; q++) {
                crowd_advance(&c);
                broadphase_move_boxes(w, n, ids, &b);
                if (m == 0) broadphase_step(w, NULL);
                if (m == 1) broadphase_update(w);
                double t0 = now_ms();
                broadphase_status s;
                if (q == 0) {
                    broadphase_id_rows out = {offsets, rows, capacity, 0, 0};
                    s = broadphase_query_spheres(w, n, &balls, &out);
                } else {
                    s = broadphase_nearest_many_within(w, n, &pts, 11, 15.0f, near, d2, counts,
                                                       &bad);
                }
                ms[m][q][r] = now_ms() - t0;
                if (s != BROADPHASE_OK) {
                    fprintf(stderr, "query failed: %s\n", broadphase_status_string(s));
                    return 1;
                }
            }
        }
    }
    printf("%zu agents, %d thread(s), %d rounds: median ms of one batch of %zu queries\n", n,
           threads, rounds, n);
    for (int m = 0; m < 3; m++) {
        qsort(ms[m][0], rounds, sizeof(double), cmp);
        qsort(ms[m][1], rounds, sizeof(double), cmp);
        printf("  %-16s balls %8.2f   nearest within %8.2f\n", way[m], ms[m][0][rounds / 2],
               ms[m][1][rounds / 2]);
    }
    broadphase_destroy(w);
    crowd_free(&c);
    return 0;
}

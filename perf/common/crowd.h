/* Crowds: agents that cross each other's paths, all moving, and each agent's neighbourhood as a
 * crowd simulator asks for it (up to k other agents within the neighbour distance, the nearest
 * first), found five ways: four routes through the engine and the seed's own array kd-tree
 * (../shared/design/SEEDS.md, system 3), written here from its description. Shared by the
 * runner (--crowd), the benchmarks (crowd_* cases) and the tests.
 *
 * The neighbourhood of agent i: the agents j != i whose centre distance d, computed in double
 * from the float positions ((double)x_i - (double)x_j squared, summed over the axes in order),
 * is at most the neighbour distance R, sorted by (d^2 rounded to float, j), the first k. Every
 * way below gives exactly that, so that their times compare like for like. */
#pragma once

#include "broadphase.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct crowd {
    int dims;
    size_t count;
    float distance; /* the neighbour distance R */
    size_t k;       /* the most neighbours kept */
    float *pos[3];  /* agent i at (pos[0][i], pos[1][i], pos[2][i]); z 0 in 2D */
    float *goal[3];
    float step;   /* distance walked a frame */
    float radius; /* the agents start in a disc (ball in 3D) of this radius around 0 */
} crowd;

/* n agents uniform in a disc (ball) sized so that `per_neighbourhood` agents fall within R of
 * one on average, each walking at `step` a frame towards the point opposite its start (through
 * the centre), and back: everyone crosses the middle, in every direction. False on out of
 * memory. */
bool crowd_make(crowd *c, int dims, size_t n, float distance, size_t k, float per_neighbourhood,
                float step, uint64_t seed);
void crowd_advance(crowd *c);
void crowd_free(crowd *c);

/* Neighbourhoods, k slots an agent: agent i's are ids[i * k .. i * k + count[i]), with their
 * squared distances (rounded to float) in d2. */
typedef struct crowd_sets {
    uint32_t *ids;
    float *d2;
    uint32_t *count;
    size_t n, k;
} crowd_sets;
bool crowd_sets_make(crowd_sets *s, size_t n, size_t k);
void crowd_sets_free(crowd_sets *s);
/* The index of the first agent whose neighbourhood differs, or SIZE_MAX. */
size_t crowd_sets_differ(const crowd_sets *a, const crowd_sets *b);

/* The reference: every pair tested, for agents [0, n) stepping by `stride` (1: all). */
void crowd_brute(const crowd *c, crowd_sets *out, size_t stride);

/* The engine's routes, each on its own world (made by crowd_world: the agents as balls of radius
 * R/2 for the step route, as points for the query routes, ids = agent indices), which they
 * move to the crowd's positions first. `threads` as config.threads; the routes' own work beside
 * the engine's calls (picking the k nearest from candidates) runs on as many. Each returns the
 * broadphase status as an int. */
typedef enum crowd_route {
    CROWD_ROWS,    /* step, then the pairs as neighbour rows (broadphase_neighbours) */
    CROWD_BALLS,   /* update, then a ball of radius R around every agent (query_spheres) */
    CROWD_NEAREST, /* update, then the k + 1 nearest within R of every agent (nearest_many_within)
                    */
    CROWD_HOODS,   /* every agent's k nearest within R at once (broadphase_neighbourhoods) */
    CROWD_SEED,    /* the seed's kd-tree, built anew each frame, one agent at a time */
    CROWD_ROUTES
} crowd_route;
const char *crowd_route_name(crowd_route r);

/* Working memory of a route between frames (the batches' rows, the seed tree). */
typedef struct crowd_runner {
    crowd_route route;
    int threads;
    broadphase_world *world; /* NULL for the seed */
    uint32_t *agent_ids;
    broadphase_neighbour_rows rows;      /* rows: the last frame's */
    broadphase_neighbourhood_rows hoods; /* neighbourhoods: the last frame's */
    /* balls: the rows */
    size_t *offsets;
    uint32_t *row_ids;
    size_t row_capacity;
    /* nearest: k + 1 an agent */
    uint32_t *near_ids;
    float *near_d2;
    size_t *near_counts;
    float *radius; /* the query balls' radii (balls), R/2 (rows) */
    /* the seed's tree */
    void *seed;
    /* The last frame's client-side part, in ms: each agent's k nearest picked from its row
     * (rows, balls), its own hit dropped (nearest) or the rows copied (neighbourhoods); 0 for
     * the seed, which is all its own. */
    double pick_ms;
} crowd_runner;
int crowd_runner_make(crowd_runner *r, const crowd *c, crowd_route route, int threads);
/* One frame: the world brought to the crowd's positions and every neighbourhood into out. */
int crowd_runner_frame(crowd_runner *r, const crowd *c, crowd_sets *out);
void crowd_runner_free(crowd_runner *r);

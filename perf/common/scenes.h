/* Scenes shared by the tests, the runner and the benchmarks, generated in C from a 64-bit seed
 * (splitmix64; a uniform float is (x >> 40) * 2^-24), so that every program sees the same
 * objects for the same (scene, n, seed). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum scene_kind {
    SCENE_UNIFORM,   /* 3D boxes, centres in [0,L)^3, L = cbrt(n/0.075), half-extents [0.5,1) */
    SCENE_CLUSTERED, /* 64 Gaussian clusters, centres uniform in the same cube, sigma L/16 */
    SCENE_MIXED,     /* uniform; every 100th object 20x larger, every 10 000th 200x larger */
    SCENE_MOVING,    /* uniform at frame 0, velocity [-0.05,0.05) per axis, reflecting walls */
    SCENE_SPHERES,   /* 3D spheres, centres as uniform, radius [0.5,1) */
    SCENE_PLANE2D,   /* 2D boxes, L = sqrt(n/0.12), half-extents [0.5,1) */
    SCENE_MOVING2D,  /* plane2d with the moving scene's motion */
    SCENE_DENSE,     /* centres uniform in a cube of side 2: almost every pair overlaps */
    /* Edge scenes for the tests (usable by the runner too). */
    SCENE_SHAPES,    /* 3D, uniform centres, alternating boxes and spheres */
    SCENE_SHAPES2D,  /* 2D, uniform centres, alternating boxes and circles */
    SCENE_IDENTICAL, /* every object the same unit box */
    SCENE_FLAT,      /* uniform in x and y, every box with min_z = max_z = 0 */
    SCENE_HUGE,      /* uniform scene scaled so coordinates are around 1e30 */
    SCENE_TINY,      /* uniform scene scaled so coordinates are around 1e-30 */
    SCENE_FAR, /* shapes (boxes and spheres alternating), centres moved 1e7 away from the origin
                * on every axis: sizes about 1 where floats are 1 apart (a large world) */
    /* Shapes at the float range's end: the shapes scene mapped onto centres in
     * [-2.8e38, 2.8e38) (sizes scaled alike, boxes clipped to [-FLT_MAX, FLT_MAX]), and every
     * 16th object from the 3rd and from the 6th longer than FLT_MAX on some axis: spheres of
     * radius FLT_MAX, 0.7 FLT_MAX or 0.5 FLT_MAX, boxes from -FLT_MAX to FLT_MAX on one axis,
     * [-1.71e38, 1.71e38] on every axis, or from either end of the range to their centre. */
    SCENE_EDGE,
    SCENE_EDGE2D, /* the same in 2D */
    /* Worlds where most objects stay put (the still-world benchmarks). Only the movers move, and
     * only they are pushed to the world each frame. */
    SCENE_STATIC_WORLD, /* uniform boxes; the last n/101 move as in moving, the others are a
                         * static field (n = 1 010 000: 1 000 000 statics, 10 000 movers) */
    SCENE_SLEEPING,     /* uniform boxes; every 100th moves as in moving, the others sleep */
    SCENE_KIND_COUNT
} scene_kind;

typedef struct scene {
    scene_kind kind;
    int dimensions;
    size_t count;
    float world_size;   /* L */
    uint8_t *is_sphere; /* per object: 1 sphere, 0 box */
    /* Boxes (valid where !is_sphere): min/max per axis. Spheres: centre in center[], radius. */
    float *min[3], *max[3];
    float *center[3], *radius;
    float *velocity[3]; /* per frame, moving scenes only (NULL otherwise) */
    uint64_t frame;
    float *half[3];      /* box half-extents per axis, moving scenes only (NULL otherwise) */
    size_t static_count; /* static_world: objects [0, static_count) are its static field */
    size_t mover_count;  /* objects that move (none in the scenes that do not) */
    void *scratch;       /* gather buffers for mixed-shape scenes, owned by scenes.c */
} scene;
/* Sphere objects also carry their bounding box in min/max, rounded outwards so that it contains
 * the exact sphere; in 2D scenes the z columns are all zero. */

const char *scene_name(scene_kind kind);
/* Name to kind ("uniform", "moving2d", ...); false when unknown. */
bool scene_parse(const char *name, scene_kind *kind_out);
/* Whether scene_advance changes anything for this kind. */
bool scene_is_moving(scene_kind kind);

/* Builds the scene; false on out of memory (scene left empty). */
bool scene_make(scene *s, scene_kind kind, size_t count, uint64_t seed);
/* Advances a moving scene by one frame (no-op for static ones). */
void scene_advance(scene *s);
void scene_free(scene *s);

/* Ids of objects added to a world come back in *_out; the helpers below add the whole scene in
 * order (boxes and spheres in separate batches when mixed) and move it. They return the
 * broadphase status as an int so that this header does not need broadphase.h. */
struct broadphase_world;
int scene_add_to_world(const scene *s, struct broadphase_world *w, uint32_t *ids_out);
int scene_move_in_world(const scene *s, struct broadphase_world *w, const uint32_t *ids);
/* Adds only the objects that move (static_world and sleeping; the whole scene otherwise): their
 * ids go to ids_out at their scene indices, the others' entries are left alone. */
int scene_add_movers_to_world(const scene *s, struct broadphase_world *w, uint32_t *ids_out);
/* Flags the scene's static field (static_world) static in the world. */
int scene_set_statics(const scene *s, struct broadphase_world *w, const uint32_t *ids);

/* splitmix64 and the uniform float in [0,1) from it. */
uint64_t scene_splitmix64(uint64_t *state);
float scene_uniform(uint64_t *state);

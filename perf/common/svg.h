/* SVG pictures of a world, for the runner's --svg: the structure's cells and fields, the objects,
 * the pairs of the last step, a box query's candidates and hits and a ray's hits, drawn as the
 * quadtree article's demo drew them; a 3D world is projected along one axis onto a plane. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct broadphase_world;
struct scene;

typedef enum svg_plane { SVG_PLANE_XY, SVG_PLANE_XZ, SVG_PLANE_YZ } svg_plane;

typedef struct svg_options {
    const char *title; /* the caption's first line (scene, n, method...); may be NULL */
    svg_plane plane;   /* 2D worlds: SVG_PLANE_XY only */
    /* Query box: 4 values (u0, v0, u1, v1 on the plane's axes; in 3D the box spans the objects
     * along the third axis) or 6 (x0, y0, z0, x1, y1, z1); 0: no box. */
    int box_count;
    float box[6];
    /* Ray: 4 values (ou, ov, du, dv on the plane's axes; in 3D the origin sits halfway through
     * the objects along the third axis, which the direction leaves at 0), 5 (the same and max_t),
     * 6 (ox, oy, oz, dx, dy, dz) or 7 (the same and max_t); max_t is infinite when not given.
     * 0: no ray. */
    int ray_count;
    float ray[7];
    double size_px; /* the longer side of the drawn area in pixels; 0: 800 */
} svg_options;

/* What the picture shows, for the caller to print. */
typedef struct svg_summary {
    size_t objects, nodes, pairs;
    size_t paired_objects; /* objects that take part in some pair */
    size_t candidates, hits;
    size_t ray_hits;
    uint32_t closest; /* the ray's first hit; UINT32_MAX when none */
    float closest_t;
    const char *failed_call; /* the library call that failed, when svg_write does not return 0 */
} svg_summary;

/* "xy", "xz" or "yz"; false otherwise. */
bool svg_parse_plane(const char *text, svg_plane *out);
/* A box as --svg-box takes it: 4 or 6 comma-separated numbers, finite, min <= max per axis. */
bool svg_parse_box(const char *text, svg_options *o);
/* A ray as --svg-ray takes it: 4 to 7 comma-separated finite numbers, a direction other than
 * zero, max_t >= 0. */
bool svg_parse_ray(const char *text, svg_options *o);

/* Writes the picture of world `w` whose objects are scene `s`'s, object i with id ids[i], as
 * the world's last step saw them (the world must have stepped since the scene last changed, or
 * the pairs and cells belong to other positions). Returns the broadphase status as an int (0 on
 * success; the failing call named in summary_out->failed_call); the caller checks `out` for
 * write errors. summary_out may be NULL. */
int svg_write(FILE *out, const struct broadphase_world *w, const struct scene *s,
              const uint32_t *ids, const svg_options *o, svg_summary *summary_out);

/* The exact tests of the spatial queries, one object (or one node's bounds) at a time: in double
 * precision from float inputs, with no FMA, so that the structure's tests, brute force and the
 * tests' reference all compute the same numbers. Each function of bounds is monotone in them (a
 * box inside another never scores better), which is what lets a node's bounds stand for every
 * object under it: a node the tests rule out holds no object they would accept. */
#pragma once

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* Distance from c to [lo, hi] on one axis (0 inside), without branches: for lo <= hi at most
 * one of lo - c and c - hi is positive. */
static inline double qm_gap(double c, double lo, double hi) {
    double a = lo - c, b = c - hi;
    double g = a > b ? a : b;
    return g > 0.0 ? g : 0.0;
}

/* Squared distance from point p to the box (0 inside). */
static inline double qm_box_dist2(const float p[3], const float lo[3], const float hi[3],
                                  int dims) {
    double s = 0.0;
    for (int k = 0; k < dims; k++) {
        double g = qm_gap(p[k], lo[k], hi[k]);
        s = s + g * g;
    }
    return s;
}

/* Squared distance from p to the box's farthest point. */
static inline double qm_box_far2(const float p[3], const float lo[3], const float hi[3], int dims) {
    double s = 0.0;
    for (int k = 0; k < dims; k++) {
        double a = (double)p[k] - (double)lo[k], b = (double)hi[k] - (double)p[k];
        double g = a > b ? a : b;
        s = s + g * g;
    }
    return s;
}

/* Squared distance from p to the ball (0 inside). */
static inline double qm_sphere_dist2(const float p[3], const float c[3], float r, int dims) {
    double s = 0.0;
    for (int k = 0; k < dims; k++) {
        double d = (double)p[k] - (double)c[k];
        s = s + d * d;
    }
    double g = sqrt(s) - (double)r;
    return g > 0.0 ? g * g : 0.0;
}

/* A ray: origin, direction, its reciprocal (infinite where the direction is zero). */
typedef struct qm_ray {
    double o[3], d[3], inv[3];
    double max_t;
} qm_ray;

static inline void qm_ray_init(qm_ray *r, const float o[3], const float d[3], double max_t,
                               int dims) {
    for (int k = 0; k < 3; k++) {
        r->o[k] = k < dims ? o[k] : 0.0;
        r->d[k] = k < dims ? d[k] : 0.0;
        r->inv[k] = r->d[k] != 0.0 ? 1.0 / r->d[k] : INFINITY;
    }
    r->max_t = max_t;
}

/* Slab test of the segment t in [0, limit] against the closed box: true when they meet, with
 * *t the entry (0 when the origin is inside). Infinite bounds are fine. */
static inline bool qm_ray_box(const qm_ray *r, const float lo[3], const float hi[3], int dims,
                              double limit, double *t) {
    double t0 = 0.0, t1 = limit;
    for (int k = 0; k < dims; k++) {
        if (!(lo[k] <= hi[k])) return false; /* empty (a sentinel) */
        if (r->d[k] == 0.0) {
            if (r->o[k] < lo[k] || r->o[k] > hi[k]) return false;
            continue;
        }
        double a = ((double)lo[k] - r->o[k]) * r->inv[k];
        double b = ((double)hi[k] - r->o[k]) * r->inv[k];
        if (a > b) {
            double s = a;
            a = b;
            b = s;
        }
        t0 = a > t0 ? a : t0;
        t1 = b < t1 ? b : t1;
        if (!(t0 <= t1)) return false;
    }
    *t = t0;
    return true;
}

/* The segment t in [0, limit] against the closed ball: entry t (0 when the origin is inside). */
static inline bool qm_ray_sphere(const qm_ray *r, const float c[3], float radius, int dims,
                                 double limit, double *t) {
    double m[3] = {0.0, 0.0, 0.0}, b = 0.0, m2 = 0.0, a = 0.0;
    for (int k = 0; k < dims; k++) {
        m[k] = r->o[k] - (double)c[k];
        b = b + m[k] * r->d[k];
        m2 = m2 + m[k] * m[k];
        a = a + r->d[k] * r->d[k];
    }
    double r2 = (double)radius * (double)radius;
    double cc = m2 - r2;
    if (cc <= 0.0) {
        *t = 0.0;
        return true;
    }
    if (b > 0.0) return false; /* outside, heading away */
    /* The squared distance from the centre to the ray's line, |m x d|^2 / |d|^2: each cross
     * term is a 2x2 determinant, accurate to a few ulps whatever the sizes, where the textbook
     * discriminant b^2 - a*cc cancels catastrophically once the origin or the direction is
     * large next to the radius (a ray from z = -1e37 along z past spheres of radius 10 "hit"
     * them all; found by the fuzzer, tests/fuzz/regressions). */
    const double *d = r->d;
    double x0 = m[1] * d[2] - m[2] * d[1], x1 = m[2] * d[0] - m[0] * d[2],
           x2 = m[0] * d[1] - m[1] * d[0];
    double off2 = (x0 * x0 + x1 * x1 + x2 * x2) / a;
    if (off2 > r2) return false;
    /* The nearer root as cc / q, q = -b + sqrt(b^2 - a*cc) (b <= 0: no cancellation). */
    double q = -b + sqrt(a * (r2 - off2));
    double t0 = q > 0.0 ? cc / q : 0.0;
    if (t0 > limit) return false;
    *t = t0 > 0.0 ? t0 : 0.0;
    return true;
}

/* Plane value at the box's corner farthest along the normal (best = true) or least far. Terms
 * with a zero normal component are skipped, so infinite bounds give no NaN. */
static inline double qm_plane_box(const float pl[4], const float lo[3], const float hi[3], int dims,
                                  bool best) {
    double s = pl[3];
    for (int k = 0; k < dims; k++) {
        if (pl[k] == 0.0f) continue;
        bool up = (pl[k] > 0.0f) == best;
        s = s + (double)pl[k] * (double)(up ? hi[k] : lo[k]);
    }
    return s;
}

/* Some point of the box is inside every plane (the culling test). */
static inline bool qm_planes_box(const float (*pl)[4], size_t n, const float lo[3],
                                 const float hi[3], int dims) {
    for (size_t i = 0; i < n; i++)
        if (qm_plane_box(pl[i], lo, hi, dims, true) < 0.0) return false;
    return true;
}

/* Every point of the box is inside every plane. */
static inline bool qm_planes_box_inside(const float (*pl)[4], size_t n, const float lo[3],
                                        const float hi[3], int dims) {
    for (size_t i = 0; i < n; i++)
        if (qm_plane_box(pl[i], lo, hi, dims, false) < 0.0) return false;
    return true;
}

/* Some point of the ball is inside every plane. */
static inline bool qm_planes_sphere(const float (*pl)[4], size_t n, const float c[3], float r,
                                    int dims) {
    for (size_t i = 0; i < n; i++) {
        double s = pl[i][3], n2 = 0.0;
        for (int k = 0; k < dims; k++) {
            s = s + (double)pl[i][k] * (double)c[k];
            n2 = n2 + (double)pl[i][k] * (double)pl[i][k];
        }
        if (s < -(double)r * sqrt(n2)) return false;
    }
    return true;
}

/* The crowd run (see crowd_run.h). */
#include "crowd_run.h"

#include "machine.h"
#include "series.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Median, 99th percentile (nearest rank), worst of v[0..n), sorted in place (series.h). */
static void figures(double *v, size_t n, double out[3]) {
    series f = series_sorted(v, n);
    out[0] = f.median;
    out[1] = f.p99;
    out[2] = f.worst;
}

/* The last frame around agent `who`: the agents within 5 neighbour distances of it as dots,
 * the circle of its neighbour distance, its neighbours joined to it (a 3D crowd seen along z). */
static bool picture(const crowd *c, const crowd_sets *s, size_t who, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    double half = 5.0 * c->distance, size = 800.0, scale = size / (2.0 * half);
    double ox = (double)c->pos[0][who] - half, oy = (double)c->pos[1][who] - half;
#define X(v) (((double)(v)-ox) * scale)
#define Y(v) (size - ((double)(v)-oy) * scale)
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            size, size + 40, size, size + 40);
    double dot = 0.08 * c->distance * scale;
    for (size_t i = 0; i < c->count; i++) {
        double x = X(c->pos[0][i]), y = Y(c->pos[1][i]);
        if (x < -dot || x > size + dot || y < -dot || y > size + dot) continue;
        fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"#9ab\"/>\n", x, y, dot);
    }
    double wx = X(c->pos[0][who]), wy = Y(c->pos[1][who]);
    fprintf(f,
            "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"none\" stroke=\"#c33\" "
            "stroke-width=\"1.5\"/>\n",
            wx, wy, c->distance * scale);
    for (size_t j = 0; j < s->count[who]; j++) {
        uint32_t n = s->ids[who * s->k + j];
        double nx = X(c->pos[0][n]), ny = Y(c->pos[1][n]);
        fprintf(f,
                "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#c33\" "
                "stroke-width=\"1.5\"/>\n<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" "
                "fill=\"#c33\"/>\n",
                wx, wy, nx, ny, nx, ny, dot);
    }
    fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"#000\"/>\n", wx, wy, dot);
    fprintf(f,
            "<text x=\"10\" y=\"%.0f\" font-family=\"sans-serif\" font-size=\"14\">%zu "
            "agents walking through the middle (the part around agent %zu, black): its %u "
            "nearest within %.3g (red circle), joined</text>\n</svg>\n",
            size + 25, c->count, who, s->count[who], c->distance);
#undef X
#undef Y
    return fclose(f) == 0;
}

int crowd_run(const crowd_run_options *o, FILE *out) {
    crowd c;
    if (!crowd_make(&c, o->dims, o->count, o->distance, o->k, o->per_neighbourhood, o->step,
                    o->seed)) {
        fprintf(stderr, "broadphase-run: out of memory making the crowd\n");
        return 1;
    }
    crowd_runner r[CROWD_ROUTES];
    crowd_sets sets[CROWD_ROUTES], want;
    double *ms[CROWD_ROUTES], *calls[CROWD_ROUTES]; /* calls: without the client's pick */
    memset(r, 0, sizeof r);
    memset(sets, 0, sizeof sets);
    memset(&want, 0, sizeof want);
    int status = 0, first = -1;
    for (int q = 0; q < CROWD_ROUTES; q++) {
        ms[q] = calloc(o->frames + 1, sizeof(double));
        calls[q] = calloc(o->frames + 1, sizeof(double));
        if (!o->routes[q]) continue;
        if (first < 0) first = q;
        int s = crowd_runner_make(&r[q], &c, (crowd_route)q, o->threads);
        if (s != 0 || !crowd_sets_make(&sets[q], c.count, c.k) || !ms[q] || !calls[q]) {
            fprintf(stderr, "broadphase-run: crowd route %s: %s\n", crowd_route_name(q),
                    broadphase_status_string(s));
            status = 1;
        }
    }
    /* the check: one agent in `stride`, about 1000 of them */
    size_t stride = c.count / 1000 > 0 ? c.count / 1000 : 1;
    if (o->check && !crowd_sets_make(&want, c.count, c.k)) status = 1;
    fprintf(out,
            "crowd: %zu agents, %dD, neighbour distance %g, k %zu, %g within it on average, step "
            "%g, threads %d, frames %zu\n",
            c.count, c.dims, c.distance, c.k, o->per_neighbourhood, c.step, o->threads, o->frames);
    size_t checked = 0, neighbours = 0;
    /* Two threads' figures at 1e4 agents move with it (NOTES row 284). */
    double round_trip_before = machine_round_trip_ns(MACHINE_ROUND_TRIPS);
    for (size_t f = 0; status == 0 && f < o->frames; f++) {
        for (int q = 0; q < CROWD_ROUTES && status == 0; q++) {
            if (!o->routes[q]) continue;
            double t0 = clock_ms();
            int s = crowd_runner_frame(&r[q], &c, &sets[q]);
            ms[q][f] = clock_ms() - t0;
            calls[q][f] = ms[q][f] - r[q].pick_ms;
            if (s != 0) {
                fprintf(stderr, "broadphase-run: crowd route %s, frame %zu: %s\n",
                        crowd_route_name(q), f, broadphase_status_string(s));
                status = 1;
            } else if (q != first) {
                size_t bad = crowd_sets_differ(&sets[first], &sets[q]);
                if (bad != SIZE_MAX) {
                    fprintf(stderr,
                            "broadphase-run: crowd frame %zu: routes %s and %s differ at agent "
                            "%zu\n",
                            f, crowd_route_name(first), crowd_route_name(q), bad);
                    status = 1;
                }
            }
        }
        if (status == 0 && o->check) {
            crowd_brute(&c, &want, stride);
            for (size_t i = 0; i < c.count && status == 0; i += stride, checked++) {
                const crowd_sets *g = &sets[first];
                bool same = g->count[i] == want.count[i];
                for (size_t j = 0; same && j < want.count[i]; j++)
                    same = g->ids[i * c.k + j] == want.ids[i * c.k + j];
                if (!same) {
                    fprintf(stderr,
                            "broadphase-run: crowd frame %zu: agent %zu differs from brute force\n",
                            f, i);
                    status = 1;
                }
            }
        }
        if (first >= 0)
            for (size_t i = 0; i < c.count; i++) neighbours += sets[first].count[i];
        /* every frame of a short run, every (frames / 20)-th of a long one */
        if (!o->quiet && status == 0 && (o->frames <= 20 || f % (o->frames / 20) == 0)) {
            fprintf(out, "frame %3zu:", f);
            for (int q = 0; q < CROWD_ROUTES; q++)
                if (o->routes[q]) fprintf(out, "  %s %.3f ms", crowd_route_name(q), ms[q][f]);
            fprintf(out, "\n");
        }
        if (f + 1 < o->frames) crowd_advance(&c);
    }
    if (status == 0 && o->frames > 0) {
        double seed_median = 0.0;
        double fig[CROWD_ROUTES][3], call_fig[CROWD_ROUTES][3];
        for (int q = 0; q < CROWD_ROUTES; q++) {
            if (!o->routes[q]) continue;
            /* the first frame builds every structure from nothing: the figures leave it out */
            size_t from = o->frames > 1 ? 1 : 0;
            figures(ms[q] + from, o->frames - from, fig[q]);
            figures(calls[q] + from, o->frames - from, call_fig[q]);
            if (q == CROWD_SEED) seed_median = fig[q][0];
        }
        fprintf(out,
                "summary over frames 1..%zu (ms)  median          p99        worst  vs seed  "
                "(the library's calls alone: median, vs seed)\n",
                o->frames - 1);
        for (int q = 0; q < CROWD_ROUTES; q++) {
            if (!o->routes[q]) continue;
            fprintf(out, "  %-14s %14.3f %12.3f %12.3f", crowd_route_name(q), fig[q][0], fig[q][1],
                    fig[q][2]);
            if (seed_median > 0.0) fprintf(out, "  %7.3fx", fig[q][0] / seed_median);
            if (q != CROWD_SEED) {
                fprintf(out, "  %10.3f", call_fig[q][0]);
                if (seed_median > 0.0) fprintf(out, "  %7.3fx", call_fig[q][0] / seed_median);
            }
            fprintf(out, "\n");
        }
        fprintf(out, "machine: cross-core round trip %.0f ns before the frames, %.0f ns after\n",
                round_trip_before, machine_round_trip_ns(MACHINE_ROUND_TRIPS));
        fprintf(out, "neighbours: %.2f an agent on average; every route gave the same sets%s\n",
                (double)neighbours / ((double)c.count * (double)o->frames + 1e-300),
                o->check ? "" : " (no --check)");
        if (o->check)
            fprintf(out, "check: %zu sets (one agent in %zu, every frame) equal to brute force\n",
                    checked, stride);
    }
    if (status == 0 && o->svg_path && first >= 0) {
        size_t who = 0;
        double best = INFINITY; /* the agent nearest the middle */
        for (size_t i = 0; i < c.count; i++) {
            double d = (double)c.pos[0][i] * c.pos[0][i] + (double)c.pos[1][i] * c.pos[1][i];
            if (d < best) {
                best = d;
                who = i;
            }
        }
        if (!picture(&c, &sets[first], who, o->svg_path)) {
            fprintf(stderr, "broadphase-run: cannot write %s\n", o->svg_path);
            status = 1;
        }
    }
    for (int q = 0; q < CROWD_ROUTES; q++) {
        crowd_runner_free(&r[q]);
        crowd_sets_free(&sets[q]);
        free(ms[q]);
        free(calls[q]);
    }
    crowd_sets_free(&want);
    crowd_free(&c);
    return status;
}

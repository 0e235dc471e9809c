/* The soak: see soak.h. Every frame, on a `moving` scene of boxes:
 *   - the moving objects advance (scene_advance) and are pushed with one move call;
 *   - churn: 1% of the objects are removed and added again elsewhere (their ids go back to the
 *     free list and are handed out again), 0.1% teleport across the world, 0.05% have their
 *     static flag toggled (a static object stops moving) and 0.05% get a new filter;
 *   - a step, with pair events on;
 *   - the sampled check: for `sample` random objects, their partners in the step's pairs
 *     against brute force over every object (filters and statics applied);
 *   - every `full_every` frames, the full check (every pair, by a sweep over x) and a memory
 *     sample: the heap's bytes in use (broadphase_stats) and the resident set (/proc/self/statm).
 * After the warm-up frame, every memory sample must stay within `memory_slack` of that frame's. */
#include "soak.h"

#include "scenes.h"
#include "overlap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZED 1
#endif
#endif
#ifndef SOAK_SANITIZED
#define SOAK_SANITIZED 0
#endif

/* A changed static flag makes the next step build the trees and the static field anew (a
 * whole rebuild: broadphase.h), so the flags change every STATIC_EVERY frames, not every frame. */
#define STATIC_EVERY 50

typedef struct soak {
    const soak_options *o;
    scene s;
    broadphase_world *w;
    uint32_t *id_of;    /* scene index -> id */
    uint32_t *index_of; /* id -> scene index (UINT32_MAX when free) */
    size_t id_cap;
    uint8_t *is_static;        /* by scene index */
    broadphase_filter *filter; /* by scene index */
    uint64_t rng;
    /* per frame scratch */
    uint32_t *ids, *order;
    float *col[6];
    uint8_t *sampled; /* by id */
    uint32_t *sample, *got, *want;
    size_t got_cap;
    broadphase_pair *full;
    size_t full_cap;
    /* figures */
    double *step_ms;
    size_t sampled_objects, sampled_partners, full_checks, full_pairs, churned, toggled;
    uint64_t begun, ended;
} soak;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static size_t resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t pick(soak *k, size_t n) {
    return (size_t)(scene_uniform(&k->rng) * (float)n) % n;
}

static void box_of(const soak *k, size_t i, float lo[3], float hi[3]) {
    for (int d = 0; d < 3; d++) {
        lo[d] = k->s.min[d][i];
        hi[d] = k->s.max[d][i];
    }
}

/* The pair rule of the engine: filters, then no static-static pair, then the closed test. */
static bool may_pair(const soak *k, size_t a, size_t b) {
    if (k->is_static[a] && k->is_static[b]) return false;
    const broadphase_filter *fa = &k->filter[a], *fb = &k->filter[b];
    if (!(fa->category & fb->mask) || !(fb->category & fa->mask)) return false;
    return !(fa->group != 0 && fa->group == fb->group);
}

static bool overlap(const soak *k, size_t a, size_t b) {
    float alo[3], ahi[3], blo[3], bhi[3];
    box_of(k, a, alo, ahi);
    box_of(k, b, blo, bhi);
    return simd_pair_box_box(alo, ahi, blo, bhi, 3) != 0;
}

static bool id_map_reserve(soak *k, size_t need) {
    if (need <= k->id_cap) return true;
    size_t cap = need * 2;
    uint32_t *m = realloc(k->index_of, cap * sizeof *m);
    uint8_t *f = realloc(k->sampled, cap);
    if (!m || !f) {
        free(m ? m : k->index_of);
        free(f ? f : k->sampled);
        k->index_of = NULL;
        k->sampled = NULL;
        return false;
    }
    for (size_t i = k->id_cap; i < cap; i++) m[i] = UINT32_MAX, f[i] = 0;
    k->index_of = m;
    k->sampled = f;
    k->id_cap = cap;
    return true;
}

/* Adds scene objects idx[0..n) to the world and records their ids. */
static bool add_objects(soak *k, const uint32_t *idx, size_t n) {
    for (int d = 0; d < 6; d++)
        for (size_t j = 0; j < n; j++)
            k->col[d][j] = d < 3 ? k->s.min[d][idx[j]] : k->s.max[d - 3][idx[j]];
    broadphase_boxes b = {k->col[0], k->col[1], k->col[2], k->col[3], k->col[4], k->col[5]};
    if (broadphase_add_boxes(k->w, n, &b, k->ids) != BROADPHASE_OK) return false;
    for (size_t j = 0; j < n; j++) {
        if (!id_map_reserve(k, (size_t)k->ids[j] + 1)) return false;
        k->id_of[idx[j]] = k->ids[j];
        k->index_of[k->ids[j]] = idx[j];
        k->is_static[idx[j]] = 0;
        k->filter[idx[j]] = (broadphase_filter){1u, 0xFFFFFFFFu, 0u};
    }
    return true;
}

/* Puts scene object i at a random place (its velocity kept). */
static void teleport(soak *k, size_t i) {
    float side = k->s.world_size;
    for (int d = 0; d < 3; d++) {
        float c = scene_uniform(&k->rng) * side * 0.999f, h = k->s.half[d][i];
        k->s.center[d][i] = c;
        k->s.min[d][i] = c - h;
        k->s.max[d][i] = c + h;
    }
}

/* One frame's churn, before the move: removed-and-added objects and teleports. */
static bool churn(soak *k) {
    size_t n = k->s.count, m = n / 100 ? n / 100 : 1;
    for (size_t j = 0; j < m; j++) k->order[j] = (uint32_t)pick(k, n);
    /* distinct: drop repeats (marked in `sampled`, by id, cleared again below) */
    size_t u = 0;
    for (size_t j = 0; j < m; j++) {
        uint32_t id = k->id_of[k->order[j]];
        if (!k->sampled[id]) k->order[u++] = k->order[j];
        k->sampled[id] = 1;
    }
    for (size_t j = 0; j < u; j++) k->sampled[k->id_of[k->order[j]]] = 0;
    for (size_t j = 0; j < u; j++) {
        uint32_t i = k->order[j];
        k->ids[j] = k->id_of[i];
        k->index_of[k->id_of[i]] = UINT32_MAX;
    }
    if (broadphase_remove(k->w, u, k->ids) != BROADPHASE_OK) return false;
    for (size_t j = 0; j < u; j++) {
        teleport(k, k->order[j]);
        if (k->is_static[k->order[j]]) /* it comes back moving */
            for (int d = 0; d < 3; d++)
                k->s.velocity[d][k->order[j]] = (scene_uniform(&k->rng) - 0.5f) * 0.1f;
    }
    if (!add_objects(k, k->order, u)) return false;
    k->churned += u;
    for (size_t j = 0, t = n / 1000 ? n / 1000 : 1; j < t; j++) {
        size_t i = pick(k, n);
        if (!k->is_static[i]) teleport(k, i); /* statics are not pushed: they stay put */
    }
    return true;
}

/* Static flags (every STATIC_EVERY frames) and filters (every frame) changed on a few objects. */
static bool toggle(soak *k, size_t frame) {
    size_t n = k->s.count, m = n / 2000 ? n / 2000 : 1;
    for (int pass = frame % STATIC_EVERY == 0 ? 0 : 1; pass < 2; pass++) {
        for (size_t j = 0; j < m; j++) {
            size_t i = pick(k, n);
            uint32_t id = k->id_of[i];
            if (pass == 0) {
                bool to = !k->is_static[i];
                if (broadphase_set_static(k->w, 1, &id, to) != BROADPHASE_OK) return false;
                k->is_static[i] = to;
                if (to)
                    for (int d = 0; d < 3; d++) k->s.velocity[d][i] = 0.0f;
                else
                    for (int d = 0; d < 3; d++)
                        k->s.velocity[d][i] = (scene_uniform(&k->rng) - 0.5f) * 0.1f;
            } else {
                uint32_t r = (uint32_t)(scene_uniform(&k->rng) * 64.0f);
                broadphase_filter f = {1u << (r & 3), r & 4 ? 0xFFFFFFFFu : 0x5u, (r >> 3) & 3};
                if (broadphase_set_filters(k->w, 1, &id, &f) != BROADPHASE_OK) return false;
                k->filter[i] = f;
            }
            k->toggled++;
        }
    }
    return true;
}

/* The moving (non-static) objects pushed with one call. */
static bool push(soak *k) {
    size_t n = 0;
    for (size_t i = 0; i < k->s.count; i++) {
        if (k->is_static[i]) continue;
        k->ids[n] = k->id_of[i];
        for (int d = 0; d < 3; d++) {
            k->col[d][n] = k->s.min[d][i];
            k->col[3 + d][n] = k->s.max[d][i];
        }
        n++;
    }
    broadphase_boxes b = {k->col[0], k->col[1], k->col[2], k->col[3], k->col[4], k->col[5]};
    return broadphase_move_boxes(k->w, n, k->ids, &b) == BROADPHASE_OK;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The sampled check: each sampled object's partners in the pairs against brute force. */
static bool check_sample(soak *k, const broadphase_pairs *p, size_t frame, FILE *out) {
    size_t n = k->s.count, m = k->o->sample < n ? k->o->sample : n;
    for (size_t j = 0; j < m; j++) {
        k->sample[j] = (uint32_t)pick(k, n);
        k->sampled[k->id_of[k->sample[j]]] = 1;
    }
    /* partners from the pairs: one pass, kept as (sampled id, partner id) in got */
    size_t ngot = 0;
    for (size_t q = 0; q < p->count; q++) {
        uint32_t a = p->data[q].a, b = p->data[q].b;
        if (ngot + 4 > k->got_cap) break; /* (then the comparison below fails) */
        if (k->sampled[a]) k->got[ngot++] = a, k->got[ngot++] = b;
        if (k->sampled[b]) k->got[ngot++] = b, k->got[ngot++] = a;
    }
    bool ok = true;
    for (size_t j = 0; j < m && ok; j++) {
        size_t i = k->sample[j];
        uint32_t id = k->id_of[i];
        size_t nw = 0, ng = 0;
        /* The closed box test over the columns (vectorised), then the exact predicate and the
         * pair rule on the few that pass it. */
        float lo[3], hi[3];
        box_of(k, i, lo, hi);
        const float *x0 = k->s.min[0], *x1 = k->s.max[0], *y0 = k->s.min[1], *y1 = k->s.max[1],
                    *z0 = k->s.min[2], *z1 = k->s.max[2];
        for (size_t o = 0; o < n; o++) {
            bool near = (x0[o] <= hi[0]) & (lo[0] <= x1[o]) & (y0[o] <= hi[1]) & (lo[1] <= y1[o]) &
                        (z0[o] <= hi[2]) & (lo[2] <= z1[o]);
            if (near && o != i && may_pair(k, i, o) && overlap(k, i, o))
                k->want[nw++] = k->id_of[o];
        }
        for (size_t q = 0; q < ngot; q += 2)
            if (k->got[q] == id) k->order[ng++] = k->got[q + 1];
        qsort(k->want, nw, sizeof *k->want, cmp_u32);
        qsort(k->order, ng, sizeof *k->order, cmp_u32);
        if (nw != ng || memcmp(k->want, k->order, nw * sizeof *k->want) != 0) {
            fprintf(out, "soak: frame %zu: object %u has %zu partners, brute force %zu\n", frame,
                    id, ng, nw);
            ok = false;
        }
        k->sampled_partners += nw;
    }
    for (size_t j = 0; j < m; j++) k->sampled[k->id_of[k->sample[j]]] = 0;
    k->sampled_objects += m;
    return ok;
}

static int cmp_min_x(const void *a, const void *b, void *s) {
    const float *x = s;
    float p = x[*(const uint32_t *)a], q = x[*(const uint32_t *)b];
    return (p > q) - (p < q);
}

static int cmp_pair(const void *a, const void *b) {
    const broadphase_pair *p = a, *q = b;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* The full check: every pair, by a sweep over the objects sorted by min x. */
static bool check_full(soak *k, const broadphase_pairs *p, size_t frame, FILE *out) {
    size_t n = k->s.count, count = 0;
    for (size_t i = 0; i < n; i++) k->order[i] = (uint32_t)i;
    qsort_r(k->order, n, sizeof *k->order, cmp_min_x, k->s.min[0]);
    for (size_t j = 0; j < n; j++) {
        size_t a = k->order[j];
        for (size_t q = j + 1; q < n && k->s.min[0][k->order[q]] <= k->s.max[0][a]; q++) {
            size_t b = k->order[q];
            if (!may_pair(k, a, b) || !overlap(k, a, b)) continue;
            if (count == k->full_cap) {
                size_t cap = k->full_cap ? 2 * k->full_cap : 1 << 16;
                broadphase_pair *f = realloc(k->full, cap * sizeof *f);
                if (!f) return false;
                k->full = f;
                k->full_cap = cap;
            }
            uint32_t x = k->id_of[a], y = k->id_of[b];
            k->full[count++] = (broadphase_pair){x < y ? x : y, x < y ? y : x};
        }
    }
    qsort(k->full, count, sizeof *k->full, cmp_pair);
    k->full_checks++;
    k->full_pairs += count;
    if (count != p->count || memcmp(k->full, p->data, count * sizeof *k->full) != 0) {
        fprintf(out, "soak: frame %zu: the full check finds %zu pairs, the step %zu\n", frame,
                count, p->count);
        return false;
    }
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void soak_free(soak *k) {
    broadphase_destroy(k->w);
    scene_free(&k->s);
    free(k->id_of);
    free(k->index_of);
    free(k->is_static);
    free(k->filter);
    free(k->ids);
    free(k->order);
    for (int d = 0; d < 6; d++) free(k->col[d]);
    free(k->sampled);
    free(k->sample);
    free(k->got);
    free(k->want);
    free(k->full);
    free(k->step_ms);
}

int soak_run(const soak_options *o, FILE *out) {
    soak k;
    memset(&k, 0, sizeof k);
    k.o = o;
    k.rng = o->seed * 0x9E3779B97F4A7C15ull + 1;
    size_t n = o->count;
    if (n < 2 || o->frames == 0 || o->full_every == 0) {
        fprintf(out, "soak: needs at least 2 objects and 1 frame\n");
        return 2;
    }
    broadphase_config c = broadphase_config_default(3);
    c.method = o->method;
    c.update = o->update;
    c.threads = o->threads;
    c.pair_events = true;
    bool ok =
        scene_make(&k.s, SCENE_MOVING, n, o->seed) && broadphase_create(&c, &k.w) == BROADPHASE_OK;
    k.id_of = malloc(n * sizeof *k.id_of);
    k.is_static = calloc(n, 1);
    k.filter = malloc(n * sizeof *k.filter);
    k.ids = malloc(n * sizeof *k.ids);
    k.order = malloc(n * sizeof *k.order);
    for (int d = 0; d < 6; d++) k.col[d] = malloc(n * sizeof(float));
    k.sample = malloc((o->sample + 1) * sizeof *k.sample);
    k.got_cap = (o->sample + 1) * 4096;
    k.got = malloc(k.got_cap * sizeof *k.got);
    k.want = malloc(n * sizeof *k.want);
    k.step_ms = malloc(o->frames * sizeof *k.step_ms);
    ok = ok && k.id_of && k.is_static && k.filter && k.ids && k.order && k.col[5] && k.sample &&
         k.got && k.want && k.step_ms && id_map_reserve(&k, n);
    /* Every buffer of the harness touched now, so that its pages are resident from the start
     * and the resident set measures the world (the step times alone, 8 bytes a frame, would
     * otherwise grow it by 0.8 MB over 100,000 frames). */
    if (ok) {
        memset(k.step_ms, 0, o->frames * sizeof *k.step_ms);
        memset(k.got, 0, k.got_cap * sizeof *k.got);
        memset(k.want, 0, n * sizeof *k.want);
        memset(k.sample, 0, (o->sample + 1) * sizeof *k.sample);
    }
    for (size_t i = 0; ok && i < n; i++) k.order[i] = (uint32_t)i;
    uint32_t *all = ok ? malloc(n * sizeof *all) : NULL;
    if (all) memcpy(all, k.order, n * sizeof *all);
    ok = ok && all && add_objects(&k, all, n);
    free(all);
    if (!ok) {
        fprintf(out, "soak: setup failed (out of memory?)\n");
        soak_free(&k);
        return 2;
    }
    size_t base_bytes = 0, base_rss = 0, max_bytes = 0, min_bytes = SIZE_MAX, max_rss = 0,
           min_rss = SIZE_MAX;
    uint64_t base_allocations = 0;
    broadphase_stats st;
    FILE *csv = o->csv_path ? fopen(o->csv_path, "w") : NULL;
    if (csv) fprintf(csv, "frame,bytes_in_use,resident_bytes,allocations,pairs,step_ms_median\n");
    bool checks = true;
    double start = now_ms();
    size_t window_start = 0;
    size_t frame = 0;
    for (; frame < o->frames && checks; frame++) {
        /* Flags first: an object made static stops before the scene advances. */
        bool mutated = toggle(&k, frame);
        scene_advance(&k.s);
        if (!mutated || !churn(&k) || !push(&k)) {
            fprintf(out, "soak: frame %zu: a mutating call failed\n", frame);
            checks = false;
            break;
        }
        broadphase_pairs p;
        double t0 = now_ms();
        broadphase_status s = broadphase_step(k.w, &p);
        k.step_ms[frame] = now_ms() - t0;
        broadphase_events ev;
        if (s != BROADPHASE_OK || broadphase_pair_events(k.w, &ev) != BROADPHASE_OK) {
            fprintf(out, "soak: frame %zu: step: %s\n", frame, broadphase_status_string(s));
            checks = false;
            break;
        }
        k.begun += ev.begun.count;
        k.ended += ev.ended.count;
        checks = check_sample(&k, &p, frame, out);
        bool sample_frame = (frame + 1) % o->full_every == 0 || frame + 1 == o->frames;
        if (!checks || !sample_frame) continue;
        checks = check_full(&k, &p, frame, out);
        broadphase_get_stats(k.w, &st);
        size_t rss = resident_bytes();
        if (frame + 1 == o->warmup) {
            base_bytes = st.bytes_in_use;
            base_rss = rss;
            base_allocations = st.allocations;
        }
        if (frame + 1 >= o->warmup) {
            max_bytes = st.bytes_in_use > max_bytes ? st.bytes_in_use : max_bytes;
            min_bytes = st.bytes_in_use < min_bytes ? st.bytes_in_use : min_bytes;
            max_rss = rss > max_rss ? rss : max_rss;
            min_rss = rss < min_rss ? rss : min_rss;
        }
        size_t first = window_start, len = frame + 1 - first;
        double *w = malloc(len * sizeof *w), median = 0;
        if (w) {
            memcpy(w, k.step_ms + first, len * sizeof *w);
            qsort(w, len, sizeof *w, cmp_double);
            median = w[len / 2];
            free(w);
        }
        window_start = frame + 1;
        if (csv) {
            fprintf(csv, "%zu,%zu,%zu,%llu,%zu,%.4f\n", frame + 1, st.bytes_in_use, rss,
                    (unsigned long long)st.allocations, p.count, median);
            fflush(csv);
        }
        if (!o->quiet)
            fprintf(
                out,
                "frame %7zu: %zu pairs, %.1f MB in use, %.1f MB resident, step median %.3f ms\n",
                frame + 1, p.count, st.bytes_in_use / 1e6, rss / 1e6, median);
    }
    if (csv) fclose(csv);
    double total_s = (now_ms() - start) / 1e3;
    size_t frames_run = frame;
    qsort(k.step_ms, frames_run, sizeof *k.step_ms, cmp_double);
    broadphase_get_stats(k.w, &st);
    double drift_bytes = 0, drift_rss = 0;
    bool measured = base_bytes > 0 && frames_run >= o->warmup;
    if (measured) {
        drift_bytes =
            fmax((double)max_bytes / base_bytes - 1.0, 1.0 - (double)min_bytes / base_bytes);
        drift_rss = fmax((double)max_rss / base_rss - 1.0, 1.0 - (double)min_rss / base_rss);
    }
    bool memory_ok = !measured || (drift_bytes <= o->memory_slack &&
                                   (SOAK_SANITIZED || drift_rss <= o->memory_slack));
    fprintf(out,
            "soak: %s, %zu objects, %d threads, %zu frames in %.1f s: %zu churned, %zu toggles, "
            "%llu pairs begun, %llu ended\n",
            broadphase_method_name(o->method), n, c.threads, frames_run, total_s, k.churned,
            k.toggled, (unsigned long long)k.begun, (unsigned long long)k.ended);
    fprintf(out,
            "soak: %llu rebuilds, %llu refits, %llu static builds, %llu rest builds, %zu nodes\n",
            (unsigned long long)st.rebuilds, (unsigned long long)st.refits,
            (unsigned long long)st.static_builds, (unsigned long long)st.rest_builds, st.nodes);
    fprintf(out, "soak: step median %.3f ms, 99th percentile %.3f ms, worst %.3f ms\n",
            frames_run ? k.step_ms[frames_run / 2] : 0.0,
            frames_run ? k.step_ms[(size_t)((double)(frames_run - 1) * 0.99)] : 0.0,
            frames_run ? k.step_ms[frames_run - 1] : 0.0);
    fprintf(
        out,
        "soak: checked %zu sampled objects (%zu partners) and %zu full frames (%zu pairs): %s\n",
        k.sampled_objects, k.sampled_partners, k.full_checks, k.full_pairs,
        checks ? "all equal brute force" : "MISMATCH");
    if (measured)
        fprintf(
            out,
            "soak: memory after frame %zu: bytes in use %.2f MB (drift %.2f%%), resident %.2f MB "
            "(drift %.2f%%%s), %llu allocations since: %s\n",
            o->warmup, base_bytes / 1e6, 100.0 * drift_bytes, base_rss / 1e6, 100.0 * drift_rss,
            SOAK_SANITIZED ? ", not held: sanitizer build" : "",
            (unsigned long long)(st.allocations - base_allocations),
            memory_ok ? "flat" : "DRIFTED");
    else
        fprintf(out, "soak: fewer frames than the warm-up (%zu): memory not held\n", o->warmup);
    soak_free(&k);
    return checks && memory_ok ? 0 : 1;
}

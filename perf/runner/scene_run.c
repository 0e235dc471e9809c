/* The scene run, broadphase-run's default mode (runner.h): a seeded scene added to a world and
 * stepped for some frames, each frame's phases timed and (--check) its pairs checked against
 * brute force (check.h); then the summary: each phase's median, p99, worst and minimum, the
 * frames by the tree's work, the host gauge (--gauge), pairs, memory, threads and the tree's
 * figures, its levels (--levels) and a picture (--svg). */
#include "runner.h"

#include "check.h"
#include "load.h"
#include "machine.h"
#include "method.h"
#include "series.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The figures of a series (series.h), from a copy sorted in scratch. */
static series series_stats(const double *v, size_t n, double *scratch) {
    if (n > 0) memcpy(scratch, v, n * sizeof *v);
    return series_sorted(scratch, n);
}

typedef struct frame_times {
    double *step, *move, *frame, *update, *search, *output, *check, *scratch, *gauge;
    size_t *pairs;
    char *work; /* what the step did to the tree (frame_work) */
} frame_times;

/* What a step did to the tree, from the statistics before and after it: 'R' rebuilt it, 'L'
 * laid every object out anew (the octree's full and light relayouts), 'W' laid a pair of the
 * octree's windows out, '-' none of these (a refit alone, or no update). */
static char frame_work(const broadphase_stats *before, const broadphase_stats *after) {
    if (after->rebuilds != before->rebuilds) return 'R';
    if (after->relayouts != before->relayouts) return 'L';
    if (after->window_relayouts != before->window_relayouts) return 'W';
    return '-';
}

/* The frames (1 on) by what their step did to the tree: how many, and the median frame of each
 * kind against the median of the plain ones ('-'), the periodic work's own cost as a user
 * feels it; then the plain frames' p99 and worst, what is left when that work is set apart. */
static void print_work(const frame_times *ft, size_t n) {
    static const char kinds[] = "-WLR";
    static const char *const names[] = {"plain", "pair of windows", "relayout", "rebuild"};
    double *v = malloc(n * sizeof *v);
    if (!v) return;
    double plain = 0.0;
    printf("frames by the tree's work:");
    for (int k = 0; k < 4; k++) {
        size_t m = 0;
        for (size_t f = 1; f < n; f++)
            if (ft->work[f] == kinds[k]) v[m++] = ft->frame[f];
        if (m == 0) continue;
        series r = series_stats(v, m, ft->scratch);
        if (k == 0) {
            plain = r.median;
            printf(" plain %zu (median %.3f, p99 %.3f, worst %.3f ms)", m, r.median, r.p99,
                   r.worst);
        } else if (plain > 0.0) {
            printf("; %s %zu (median %.2fx the plain, worst %.2fx)", names[k], m, r.median / plain,
                   r.worst / plain);
        } else {
            printf("; %s %zu (median %.3f ms)", names[k], m, r.median);
        }
    }
    printf("\n");
    free(v);
}

static void progress(size_t done, size_t total, double elapsed_ms, bool final) {
    static double last_draw = -1e9;
    if (!final && elapsed_ms - last_draw < 100.0) return;
    last_draw = elapsed_ms;
    enum { width = 40 };
    char bar[width + 1];
    size_t filled = total ? done * width / total : width;
    for (size_t i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r[%s] %zu/%zu frames, %.1f s", bar, done, total, elapsed_ms * 1e-3);
    if (final) fprintf(stderr, "\n");
    fflush(stderr);
}

/* The tree level by level (broadphase_get_levels) after the last step: printed when `print`,
 * and checked against the totals of broadphase_get_stats when `check` (the levels must number
 * depth + 1, each must hold a node, and nodes, leaves and objects must add up to the totals).
 * 0 when fine, 1 when the check fails (the reason in message), -1 on a library error. */
static int tree_levels(broadphase_world *w, const broadphase_stats *stats, bool print, bool check,
                       char *message, size_t message_size) {
    size_t n = 0;
    broadphase_status st = broadphase_get_levels(w, NULL, 0, &n);
    if (st != BROADPHASE_OK && st != BROADPHASE_ERROR_BUFFER_TOO_SMALL) {
        runner_api_error(w, "broadphase_get_levels", SIZE_MAX, st);
        return -1;
    }
    broadphase_level *levels = malloc((n ? n : 1) * sizeof *levels);
    if (!levels) {
        fprintf(stderr, "broadphase-run: out of memory for the tree levels\n");
        return -1;
    }
    size_t again = n;
    st = broadphase_get_levels(w, levels, n, &again);
    if (st != BROADPHASE_OK) {
        runner_api_error(w, "broadphase_get_levels", SIZE_MAX, st);
        free(levels);
        return -1;
    }
    broadphase_level total = {0};
    for (size_t l = 0; l < n; l++) {
        total.nodes += levels[l].nodes;
        total.leaves += levels[l].leaves;
        total.objects += levels[l].objects;
    }
    if (print) {
        printf("levels after the last step: %zu\n", n);
        if (n) printf("  %5s %12s %12s %12s\n", "level", "nodes", "leaves", "objects");
        for (size_t l = 0; l < n; l++) {
            printf("  %5zu %12zu %12zu %12zu\n", l, levels[l].nodes, levels[l].leaves,
                   levels[l].objects);
        }
        if (n) {
            printf("  %5s %12zu %12zu %12zu\n", "all", total.nodes, total.leaves, total.objects);
        }
    }
    /* The first disagreement, if any; an empty tree (no nodes) may report no levels. */
    char why[200] = "";
    if (check && again != n) {
        snprintf(why, sizeof why, "it counts %zu levels, then %zu", n, again);
    } else if (check && n != stats->depth + 1 && !(n == 0 && stats->nodes == 0)) {
        snprintf(why, sizeof why, "%zu levels, but depth %zu", n, stats->depth);
    } else if (check && total.nodes != stats->nodes) {
        snprintf(why, sizeof why, "%zu nodes over all levels, %zu in the stats", total.nodes,
                 stats->nodes);
    } else if (check && total.leaves != stats->leaves) {
        snprintf(why, sizeof why, "%zu leaves over all levels, %zu in the stats", total.leaves,
                 stats->leaves);
    } else if (check &&
               total.objects != stats->objects - stats->static_objects - stats->resting_objects) {
        /* The tree holds the live objects that are neither static nor at rest. */
        snprintf(why, sizeof why,
                 "%zu objects over all levels, %zu live objects (%zu static, %zu at rest)",
                 total.objects, stats->objects, stats->static_objects, stats->resting_objects);
    }
    for (size_t l = 0; check && !why[0] && l < n; l++) {
        if (levels[l].nodes == 0) {
            snprintf(why, sizeof why, "no node at level %zu, above the deepest (%zu)", l, n - 1);
        } else if (levels[l].leaves > levels[l].nodes) {
            snprintf(why, sizeof why, "%zu leaves but %zu nodes at level %zu", levels[l].leaves,
                     levels[l].nodes, l);
        }
    }
    if (why[0]) {
        snprintf(message, message_size,
                 "levels: broadphase_get_levels disagrees with broadphase_get_stats: %s", why);
    }
    int result = why[0] ? 1 : 0;
    free(levels);
    return result;
}

/* --svg: the picture of the world as the last step left it, after one step when no frame ran.
 * false on a library or file error (reported). */
static bool write_picture(broadphase_world *w, const scene *s, const uint32_t *ids,
                          const options *o, size_t frames_done) {
    if (frames_done == 0) {
        broadphase_status st = broadphase_step(w, NULL);
        if (st != BROADPHASE_OK) {
            runner_api_error(w, "broadphase_step (for --svg)", SIZE_MAX, st);
            return false;
        }
        printf("svg: no frame was run: stepped once for the picture\n");
    }
    char title[256], leaf[32] = "default leaf size";
    if (o->leaf_size) snprintf(leaf, sizeof leaf, "leaf size %d", o->leaf_size);
    snprintf(title, sizeof title, "%s, n %zu, seed %llu, after %zu frame%s: %s%s, %s",
             scene_name(o->scene), o->count, (unsigned long long)o->seed,
             frames_done ? frames_done : 1, frames_done > 1 ? "s" : "",
             broadphase_method_name(o->method),
             o->method == BROADPHASE_METHOD_OCTREE && s->dimensions == 2 ? " (quadtree)" : "",
             method_has_tree(o->method) ? leaf : "no tree");
    svg_options so = o->svg;
    so.title = title;
    FILE *f = fopen(o->svg_path, "w");
    if (!f) {
        fprintf(stderr, "broadphase-run: cannot write %s: %s\n", o->svg_path, strerror(errno));
        return false;
    }
    svg_summary sum;
    int st = svg_write(f, w, s, ids, &so, &sum);
    bool write_failed = ferror(f) != 0;
    write_failed |= fclose(f) != 0;
    if (st != (int)BROADPHASE_OK) {
        runner_api_error(w, sum.failed_call, SIZE_MAX, (broadphase_status)st);
        return false;
    }
    if (write_failed) {
        fprintf(stderr, "broadphase-run: writing %s failed\n", o->svg_path);
        return false;
    }
    printf("svg: %s: %zu objects, %zu nodes, %zu pairs (%zu objects in a pair)", o->svg_path,
           sum.objects, sum.nodes, sum.pairs, sum.paired_objects);
    if (so.box_count) printf("; box: %zu candidates, %zu hits", sum.candidates, sum.hits);
    if (so.ray_count) {
        printf("; ray: %zu hits", sum.ray_hits);
        if (sum.closest != UINT32_MAX)
            printf(", the first %u at t %g", sum.closest, (double)sum.closest_t);
    }
    printf("\n");
    return true;
}

static void print_series(const char *name, const double *v, size_t n, double *scratch) {
    series r = series_stats(v, n, scratch);
    printf("  %-10s %12.3f %12.3f %12.3f %12.3f\n", name, r.median, r.p99, r.worst, r.min);
}

/* The host gauge's series (frames 1 on, as the frame's), how steady it was, and the frames with
 * a gauge past GAUGE_CALM times its median on either side (the one before the frame's move, the
 * one after its step): the host disturbed those, or the time around them. The frame's figures
 * over the other frames are printed for reading only: every frame counts in the frame's own. */
#define GAUGE_CALM 1.25
static void print_gauge(frame_times *ft, size_t n, int threads) {
    print_series("gauge", ft->gauge + 1, n - 1, ft->scratch);
    series g = series_stats(ft->gauge + 1, n - 1, ft->scratch);
    double *others = malloc(n * sizeof *others);
    if (!others) return;
    size_t calm = 0;
    for (size_t f = 1; f < n; f++)
        if (ft->gauge[f] <= GAUGE_CALM * g.median && ft->gauge[f - 1] <= GAUGE_CALM * g.median)
            others[calm++] = ft->frame[f];
    printf("host gauge: the same work on %d thread%s after every step, p99 %.2fx and worst %.2fx "
           "its median; %zu of %zu frames beside a gauge past %.2fx",
           threads, threads == 1 ? "" : "s", g.p99 / g.median, g.worst / g.median, n - 1 - calm,
           n - 1, GAUGE_CALM);
    if (calm > 0) {
        series c = series_stats(others, calm, ft->scratch);
        printf("; the frame over the others: median %.3f, p99 %.3f (%.2fx), worst %.3f (%.2fx) ms",
               c.median, c.p99, c.p99 / c.median, c.worst, c.worst / c.median);
    }
    printf("\n");
    free(others);
}

/* Everything a scene run holds, so that each stage below reads on its own. */
typedef struct scene_run_state {
    const options *o;
    scene s;
    broadphase_config cfg;
    bool full_check, sampled_check;
    int threads_shown;
    double scene_ms, add_ms, round_trip_before;
    broadphase_world *w, *oracle;
    uint32_t *ids, *oracle_ids;
    frame_times ft;
    machine_gauge *gauge;
    checker chk;
    bool check_failed;
    size_t frames_done;
    size_t begun_total, ended_total;
} scene_run_state;

/* The frame series and the id buffers: false when out of memory (reported). */
static bool allocate(scene_run_state *r) {
    const options *o = r->o;
    size_t n = o->count ? o->count : 1;
    r->ids = malloc(n * sizeof *r->ids);
    r->oracle_ids = r->full_check ? malloc(n * sizeof *r->ids) : NULL;
    /* The program's own id buffer, paged in before the timed add, as a program that keeps its
     * buffers has it: its first touch is the program's cost, not the library's (at 1e6 on the
     * 2-core VM, 10 of the add's 17 ms). */
    if (r->ids) memset(r->ids, 0, n * sizeof *r->ids);
    frame_times *ft = &r->ft;
    size_t nf = o->frames ? o->frames : 1;
    ft->step = malloc(nf * sizeof(double));
    ft->move = malloc(nf * sizeof(double));
    ft->frame = malloc(nf * sizeof(double));
    ft->update = malloc(nf * sizeof(double));
    ft->search = malloc(nf * sizeof(double));
    ft->output = malloc(nf * sizeof(double));
    ft->check = malloc(nf * sizeof(double));
    ft->scratch = malloc(nf * sizeof(double));
    ft->pairs = malloc(nf * sizeof(size_t));
    ft->gauge = o->gauge ? malloc(nf * sizeof(double)) : NULL;
    ft->work = malloc(nf);
    r->gauge = o->gauge ? machine_gauge_start(r->threads_shown) : NULL;
    if (!r->ids || (r->full_check && !r->oracle_ids) || !ft->step || !ft->move || !ft->frame ||
        !ft->update || !ft->search || !ft->output || !ft->check || !ft->scratch || !ft->pairs ||
        !ft->work || (o->gauge && (!ft->gauge || !r->gauge))) {
        fprintf(stderr, "broadphase-run: out of memory\n");
        return false;
    }
    return true;
}

/* The run's first lines: the scene, the method and its settings, the check. */
static void print_header(const scene_run_state *r) {
    const options *o = r->o;
    printf("broadphase-run: scene %s, n %zu, %dD, seed %llu, frames %zu\n", scene_name(o->scene),
           o->count, r->s.dimensions, (unsigned long long)o->seed, o->frames);
    printf("method %s%s, update %s, threads %d%s, ", broadphase_method_name(o->method),
           o->method == BROADPHASE_METHOD_OCTREE && r->s.dimensions == 2 ? " (quadtree)" : "",
           runner_update_name(o->update), r->threads_shown, o->threads ? "" : " (all)");
    if (r->cfg.leaf_size)
        printf("leaf size %d", r->cfg.leaf_size);
    else
        printf("each method's own leaf size");
    if (o->method == BROADPHASE_METHOD_OCTREE) printf(", looseness %g", (double)r->cfg.looseness);
    printf(", simd %s\n", broadphase_simd_level());
    if (r->full_check) {
        printf("check: every frame against a brute-force world\n");
    } else if (r->sampled_check) {
        printf("check: every frame, pairs of %zu random objects against exact predicates\n",
               o->check_sample < o->count ? o->check_sample : o->count);
    }
}

/* The worlds (ours, and the brute-force oracle for the full check) with the scene added, and
 * the checker. The exit status when it fails (reported), else 0. */
static int make_worlds(scene_run_state *r) {
    const options *o = r->o;
    broadphase_status st = broadphase_create(&r->cfg, &r->w);
    if (st == BROADPHASE_ERROR_INVALID_CONFIG) {
        runner_config_error("", &r->cfg);
        return 2;
    }
    if (st != BROADPHASE_OK) {
        runner_api_error(NULL, "broadphase_create", SIZE_MAX, st);
        return 1;
    }
    if (r->full_check) {
        broadphase_config ocfg = r->cfg;
        ocfg.method = BROADPHASE_METHOD_BRUTE_FORCE;
        st = broadphase_create(&ocfg, &r->oracle);
        if (st == BROADPHASE_ERROR_INVALID_CONFIG) {
            runner_config_error("brute-force oracle's ", &ocfg);
            return 2;
        }
        if (st != BROADPHASE_OK) {
            runner_api_error(NULL, "broadphase_create (brute-force oracle)", SIZE_MAX, st);
            return 1;
        }
    }
    double t0 = runner_now_ms();
    st = (broadphase_status)scene_add_to_world(&r->s, r->w, r->ids);
    r->add_ms = runner_now_ms() - t0;
    if (st != BROADPHASE_OK) {
        runner_api_error(r->w, "adding the scene", SIZE_MAX, st);
        return 1;
    }
    if (r->full_check) {
        st = (broadphase_status)scene_add_to_world(&r->s, r->oracle, r->oracle_ids);
        if (st != BROADPHASE_OK) {
            runner_api_error(r->oracle, "adding the scene to the oracle", SIZE_MAX, st);
            return 1;
        }
        if (memcmp(r->ids, r->oracle_ids, o->count * sizeof *r->ids) != 0) {
            fprintf(stderr, "broadphase-run: check FAILED: the two worlds handed out different "
                            "ids for the same objects\n");
            r->check_failed = true;
            return 1;
        }
    }
    if (o->check && !checker_init(&r->chk, o, &r->s, r->ids)) {
        fprintf(stderr, "broadphase-run: out of memory for the check\n");
        return 1;
    }
    printf("setup: scene %.1f ms, add %.1f ms\n", r->scene_ms, r->add_ms);
    return 0;
}

/* Frame f's pairs against the oracle world (full) or the exact predicates (sampled): false
 * with the reason in chk.message when they differ; -1 on a library error (reported). */
static int check_frame(scene_run_state *r, size_t f, const broadphase_pairs *pairs) {
    bool ok = check_order(&r->chk, f, pairs);
    if (ok && r->full_check) {
        broadphase_status st;
        if (f > 0) {
            st = (broadphase_status)scene_move_in_world(&r->s, r->oracle, r->oracle_ids);
            if (st != BROADPHASE_OK) {
                runner_api_error(r->oracle, "moving the scene in the oracle", f, st);
                return -1;
            }
        }
        broadphase_pairs want;
        st = broadphase_step(r->oracle, &want);
        if (st != BROADPHASE_OK) {
            runner_api_error(r->oracle, "broadphase_step (oracle)", f, st);
            return -1;
        }
        /* Both outputs are sorted, so equal sets are equal bytes. */
        bool same = want.count == pairs->count &&
                    (pairs->count == 0 ||
                     memcmp(want.data, pairs->data, pairs->count * sizeof *pairs->data) == 0);
        if (!same) {
            ok = false;
            snprintf(r->chk.message, sizeof r->chk.message, "frame %zu: outputs differ", f);
            compare_lists(&r->chk, f, pairs->data, pairs->count, want.data, want.count,
                          "brute force");
        }
    } else if (ok) {
        ok = check_sampled(&r->chk, f, pairs);
    }
    return ok ? 1 : 0;
}

/* The frames: push the scene's new positions, step, record the phases, check. False on a
 * library error (reported); a failed check stops the frames and sets check_failed. */
static bool run_frames(scene_run_state *r) {
    const options *o = r->o;
    frame_times *ft = &r->ft;
    bool lines = !o->quiet && (o->frames <= RUNNER_PER_FRAME_LINES_MAX || o->verbose);
    bool bar = !lines && isatty(fileno(stderr));
    if (lines) {
        printf("%6s %12s %10s %10s %10s %10s %10s%s %4s\n", "frame", "pairs", "step ms",
               "update ms", "search ms", "output ms", "move ms", o->gauge ? "   gauge ms" : "",
               "work");
    }
    double run_start = runner_now_ms();
    broadphase_stats last_stats = {0};
    broadphase_status st;
    for (size_t f = 0; f < o->frames; f++) {
        double move_ms = 0.0, t0;
        /* Frame 0 steps the positions just added; later frames push every position again so
         * that the update path runs even in static scenes. */
        if (f > 0) {
            scene_advance(&r->s);
            t0 = runner_now_ms();
            st = (broadphase_status)scene_move_in_world(&r->s, r->w, r->ids);
            move_ms = runner_now_ms() - t0;
            if (st != BROADPHASE_OK) {
                runner_api_error(r->w, "moving the scene", f, st);
                return false;
            }
        }
        broadphase_pairs pairs;
        t0 = runner_now_ms();
        st = broadphase_step(r->w, &pairs);
        double step_ms = runner_now_ms() - t0;
        if (st != BROADPHASE_OK) {
            runner_api_error(r->w, "broadphase_step", f, st);
            return false;
        }
        broadphase_stats stats;
        st = broadphase_get_stats(r->w, &stats);
        if (st != BROADPHASE_OK) {
            runner_api_error(r->w, "broadphase_get_stats", f, st);
            return false;
        }
        ft->step[f] = step_ms;
        ft->move[f] = move_ms;
        ft->update[f] = stats.update_ms;
        ft->search[f] = stats.search_ms;
        ft->output[f] = stats.output_ms;
        ft->pairs[f] = pairs.count;
        ft->work[f] = frame_work(&last_stats, &stats);
        last_stats = stats;
        if (r->gauge) ft->gauge[f] = machine_gauge_run(r->gauge);
        r->frames_done = f + 1;
        if (o->events) {
            broadphase_events ev;
            st = broadphase_pair_events(r->w, &ev);
            if (st != BROADPHASE_OK) {
                runner_api_error(r->w, "broadphase_pair_events", f, st);
                return false;
            }
            r->begun_total += ev.begun.count;
            r->ended_total += ev.ended.count;
        }
        if (lines) {
            printf("%6zu %12zu %10.3f %10.3f %10.3f %10.3f %10.3f", f, pairs.count, step_ms,
                   stats.update_ms, stats.search_ms, stats.output_ms, move_ms);
            if (r->gauge) printf(" %10.3f", ft->gauge[f]);
            printf(" %4c\n", ft->work[f]);
            fflush(stdout);
        }
        if (o->check) {
            double check_start = runner_now_ms();
            int ok = check_frame(r, f, &pairs);
            if (ok < 0) return false;
            ft->check[f] = runner_now_ms() - check_start;
            if (!ok) {
                if (bar) fprintf(stderr, "\n");
                fprintf(stderr, "broadphase-run: check FAILED at %s\n", r->chk.message);
                r->check_failed = true;
                break;
            }
        }
        if (bar) progress(f + 1, o->frames, runner_now_ms() - run_start, f + 1 == o->frames);
    }
    return true;
}

/* The summary of the frames: each phase's series, the frame as a user feels it, the frames by
 * the tree's work, the gauge, the first frame, pairs, throughput and events. */
static void print_frames_summary(scene_run_state *r) {
    const options *o = r->o;
    frame_times *ft = &r->ft;
    size_t n = r->frames_done;
    printf("summary over %zu frames (ms)     median          p99        worst          min\n", n);
    print_series("step", ft->step, n, ft->scratch);
    print_series("update", ft->update, n, ft->scratch);
    print_series("search", ft->search, n, ft->scratch);
    print_series("output", ft->output, n, ft->scratch);
    if (n > 1) print_series("move", ft->move + 1, n - 1, ft->scratch);
    /* What a user feels: moving the objects in plus the step, every frame after the first. */
    if (n > 1) {
        for (size_t f = 1; f < n; f++) ft->frame[f] = ft->move[f] + ft->step[f];
        print_series("frame", ft->frame + 1, n - 1, ft->scratch);
    }
    if (n > 1) print_work(ft, n);
    if (r->gauge && n > 1) print_gauge(ft, n, r->threads_shown);
    if (o->check && !r->check_failed) print_series("check", ft->check, n, ft->scratch);
    if (n > 0) {
        double median = series_stats(ft->step, n, ft->scratch).median;
        size_t first = ft->pairs[0], last = ft->pairs[n - 1];
        qsort(ft->pairs, n, sizeof(size_t), cmp_size);
        printf("first frame: add %.3f + step %.3f = %.3f ms\n", r->add_ms, ft->step[0],
               r->add_ms + ft->step[0]);
        printf("pairs: first %zu, last %zu, median %zu\n", first, last, ft->pairs[n / 2]);
        if (median > 0.0) {
            printf("throughput: %.3g objects/s at the median step\n",
                   (double)o->count / (median * 1e-3));
        }
    }
    if (o->events && n > 0)
        printf(
            "events: %zu pairs begun, %zu ended over %zu frames (the first frame's begun: all)\n",
            r->begun_total, r->ended_total, n);
}

/* The world after the frames: the machine, memory, the structure, the threads and the tree;
 * the levels (--levels, and checked with --check). False on a library error (reported). */
static bool print_world_summary(scene_run_state *r) {
    const options *o = r->o;
    broadphase_stats stats;
    broadphase_status st = broadphase_get_stats(r->w, &stats);
    if (st != BROADPHASE_OK) {
        runner_api_error(r->w, "broadphase_get_stats", SIZE_MAX, st);
        return false;
    }
    printf("machine: cross-core round trip %.0f ns before the frames, %.0f ns after\n",
           r->round_trip_before, machine_round_trip_ns(MACHINE_ROUND_TRIPS));
    printf("memory: %.2f MiB in use, %llu allocations\n", (double)stats.bytes_in_use / 1048576.0,
           (unsigned long long)stats.allocations);
    printf("structure: %llu steps, %llu rebuilds, %llu refits, %llu unchanged; %zu objects at "
           "rest (%llu rest builds), %zu static\n",
           (unsigned long long)stats.steps, (unsigned long long)stats.rebuilds,
           (unsigned long long)stats.refits, (unsigned long long)stats.unchanged_steps,
           stats.resting_objects, (unsigned long long)stats.rest_builds, stats.static_objects);
    printf("threads: the last step ran on %zu of %d; %llu of %llu steps had a thread preempted\n",
           stats.step_threads, r->threads_shown, (unsigned long long)stats.preempted_steps,
           (unsigned long long)stats.steps);
    if (o->method == BROADPHASE_METHOD_AUTO)
        printf("auto: the last step ran on %s; %llu steps on trial, %llu switches kept\n",
               broadphase_method_name(stats.method), (unsigned long long)stats.method_trials,
               (unsigned long long)stats.method_switches);
    bool tree = method_has_tree(o->method);
    if (tree) {
        printf("tree: %zu nodes, %zu leaves, depth %zu, %zu objects in internal nodes, %zu spare "
               "nodes, %llu root growths, quality %.3g\n",
               stats.nodes, stats.leaves, stats.depth, stats.objects_in_internal_nodes,
               stats.spare_nodes, (unsigned long long)stats.root_growths, (double)stats.quality);
        if (stats.method == BROADPHASE_METHOD_OCTREE)
            printf("search: %llu of %llu steps walked the leaf list, made %llu times; %llu "
                   "relayouts, %llu of one window\n",
                   (unsigned long long)stats.flat_searches, (unsigned long long)stats.steps,
                   (unsigned long long)stats.flat_builds, (unsigned long long)stats.relayouts,
                   (unsigned long long)stats.window_relayouts);
    }
    if (o->levels && !tree)
        printf("levels: none (%s keeps no tree)\n", broadphase_method_name(o->method));
    /* The level check needs a step, and is moot once a frame has already failed. */
    bool check_levels = o->check && !r->check_failed && tree && r->frames_done > 0;
    if ((o->levels && tree) || check_levels) {
        int level_result = tree_levels(r->w, &stats, o->levels, check_levels, r->chk.message,
                                       sizeof r->chk.message);
        if (level_result < 0) return false;
        if (level_result > 0) {
            fprintf(stderr, "broadphase-run: check FAILED at %s\n", r->chk.message);
            r->check_failed = true;
        }
    }
    return true;
}

static void release(scene_run_state *r) {
    load_stop();
    checker_free(&r->chk);
    broadphase_destroy(r->w);
    broadphase_destroy(r->oracle);
    free(r->ids);
    free(r->oracle_ids);
    frame_times *ft = &r->ft;
    free(ft->step);
    free(ft->move);
    free(ft->frame);
    free(ft->update);
    free(ft->search);
    free(ft->output);
    free(ft->check);
    free(ft->scratch);
    free(ft->pairs);
    free(ft->gauge);
    free(ft->work);
    machine_gauge_stop(r->gauge);
    scene_free(&r->s);
}

/* Everything after the scene is made: the exit status. */
static int run(scene_run_state *r) {
    const options *o = r->o;
    print_header(r);
    /* Before the frames and after them (printed with the summary): see machine.h. */
    r->round_trip_before = machine_round_trip_ns(MACHINE_ROUND_TRIPS);
    if (!allocate(r)) return 1;
    if (o->load > 0) {
        if (!load_start(o->load)) {
            fprintf(stderr, "broadphase-run: could not start %d spinning processes\n", o->load);
            return 1;
        }
        printf("load: %d spinning process%s beside the run\n", o->load, o->load == 1 ? "" : "es");
    }
    int status = make_worlds(r);
    if (status != 0) return status;
    if (!run_frames(r)) return 1;
    print_frames_summary(r);
    if (!print_world_summary(r)) return 1;
    if (o->svg_path && !write_picture(r->w, &r->s, r->ids, o, r->frames_done)) return 1;
    if (o->check) {
        if (r->check_failed) {
            printf("check: FAILED at %.*s (details on stderr)\n", (int)strcspn(r->chk.message, ":"),
                   r->chk.message);
        } else {
            printf("check: OK (%zu frames, %s)\n", r->frames_done,
                   r->full_check ? "full" : "sampled");
        }
    }
    return r->check_failed ? 1 : 0;
}

int scene_run(const options *o) {
    scene_run_state r = {.o = o};
    double t0 = runner_now_ms();
    if (!scene_make(&r.s, o->scene, o->count, o->seed)) {
        fprintf(stderr, "broadphase-run: out of memory building scene %s with %zu objects\n",
                scene_name(o->scene), o->count);
        return 1;
    }
    r.scene_ms = runner_now_ms() - t0;
    if (o->svg_path && r.s.dimensions == 2 && o->svg.plane != SVG_PLANE_XY) {
        fprintf(stderr, "broadphase-run: --svg-plane: scene %s is 2D, drawn on xy only\n",
                scene_name(o->scene));
        scene_free(&r.s);
        return 2;
    }
    r.cfg = runner_config(o, r.s.dimensions);
    r.full_check = o->check && o->count <= o->check_full_limit;
    r.sampled_check = o->check && !r.full_check;
    r.threads_shown = o->threads ? o->threads : runner_cpu_count();
    int status = run(&r);
    if (r.check_failed && status != 1) status = 1;
    release(&r);
    return status;
}

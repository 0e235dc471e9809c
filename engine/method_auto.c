/* BROADPHASE_METHOD_AUTO: a method table that runs one method of the list at a time and
 * chooses it by timing the steps.
 *
 * The candidates are the list's methods that keep a structure beside the static and resting
 * fields (method_has_tree: the kd-tree, the octree, the sweep); the world starts on the octree,
 * the fastest of them on most scenes and sizes measured (perf/NOTES.md, NOTES row 323). Each
 * step's cost is its method's update (timed here, so that a step after broadphase_update counts
 * it too) and its search (stats.search_ms), read at the next update; the first AUTO_SKIP steps
 * after a change of method (its build) are not counted, nor the steps that found nothing changed
 * (no update, no search). "Steps" below are such measured steps.
 *
 * A round of trials: with AUTO_WINDOW steps measured on the method in place, the next candidate
 * runs up to AUTO_WINDOW measured steps; if their median is under AUTO_MARGIN times the
 * incumbent's, it is kept (the incumbent's state freed) and the round goes on against it; if the
 * median of its first AUTO_EARLY steps is over AUTO_CLEARLY_SLOWER times the incumbent's, or of
 * all of them over AUTO_MARGIN times, its state is freed and the incumbent, whose state waited, is
 * built anew from the store (the view's `stale`). A round ends when every candidate was tried.
 * The first round starts after AUTO_FIRST_ROUND measured steps (a world that lives fewer steps
 * would not repay a trial); the next AUTO_SECOND_WAIT steps after it, each wait twice the last up
 * to AUTO_LONGEST_WAIT, and at once when the members counted at the last round's end doubled or
 * halved, or the median step grew AUTO_SLOWER times. A candidate whose build runs out of memory is
 * passed over (its partial state freed) and the incumbent updates as if no trial had begun. The
 * choice depends on the host's timing; the pairs do not: every method's are exact and sorted. */
#include "clock.h"
#include "method.h"

#include <string.h>

_Static_assert(BROADPHASE_METHOD_COUNT <= 32, "the tried candidates are bits of a uint32_t");

enum {
    AUTO_WINDOW = 8,          /* measured steps a method runs before it is compared */
    AUTO_EARLY = 3,           /* measured steps after which a clearly slower trial stops */
    AUTO_SKIP = 2,            /* steps not measured after a change of method */
    AUTO_FIRST_ROUND = 64,    /* measured steps before the first round */
    AUTO_SECOND_WAIT = 256,   /* steps between the first round and the second */
    AUTO_LONGEST_WAIT = 16384 /* the longest wait between rounds */
};
#define AUTO_MARGIN 0.9f         /* a candidate is kept below this times the incumbent's median */
#define AUTO_CLEARLY_SLOWER 1.3f /* ... and stopped early above this */
#define AUTO_SLOWER 2.0f         /* the steps this much slower than at a round's end: a round now */

typedef struct auto_state {
    method_world view; /* what the method in place sees: the world's, with its own config */
    broadphase_config config[BROADPHASE_METHOD_COUNT]; /* leaf size resolved per method */
    void *inner[BROADPHASE_METHOD_COUNT];              /* each method's state; NULL when none */
    int current;                                       /* the method that updates and searches */
    int incumbent; /* during a trial, the method it is measured against; else current */
    float costs[AUTO_WINDOW];
    uint64_t measured;     /* steps measured on current (costs: a ring of the last ones) */
    int skip;              /* steps still not to measure */
    float incumbent_cost;  /* the incumbent's median when the trial began */
    uint32_t tried;        /* candidates tried in this round, a bit per method */
    bool in_round;         /* a round of trials is under way */
    bool rounds_done;      /* a round has ended: members_then and cost_then hold */
    bool restart;          /* the incumbent's state missed steps: build it anew */
    uint64_t last_steps;   /* stats->steps after the update before the step to measure */
    double update_ms;      /* that update's time: a step after broadphase_update reports none */
    bool step_pending;     /* an update ran and its step may be measured */
    uint64_t wait, waited; /* measured steps before the next round, and since the last */
    size_t members_then;   /* members at the last round's end */
    float cost_then;       /* the median then */
} auto_state;

static bool candidate(int m) {
    return method_has_tree((broadphase_method)m);
}

static float median_of(const float *v, int n) {
    float s[AUTO_WINDOW];
    memcpy(s, v, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++) /* insertion sort: n <= 8 */
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            float t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    return n % 2 ? s[n / 2] : 0.5f * (s[n / 2 - 1] + s[n / 2]);
}

static void begin_measuring(auto_state *s) {
    s->measured = 0;
    s->skip = AUTO_SKIP;
}

/* The view method m sees: the world's, with m's config. */
static const method_world *view_for(auto_state *s, const method_world *w, int m, bool stale) {
    s->view = *w;
    s->view.config = &s->config[m];
    s->view.stale = w->stale || stale;
    return &s->view;
}

static const method_world *inner_view(auto_state *s, const method_world *w, bool stale) {
    return view_for(s, w, s->current, stale);
}

static void release(auto_state *s, const method_world *w, int m) {
    if (!s->inner[m]) return;
    method_for((broadphase_method)m)->destroy(view_for(s, w, m, false), s->inner[m]);
    s->inner[m] = NULL;
}

/* The last step's cost, when a step followed the last update and searched. */
static void measure(auto_state *s, const method_world *w) {
    const broadphase_stats *st = w->stats;
    bool stepped = s->step_pending && st->steps == s->last_steps + 1;
    s->step_pending = false;
    double ms = s->update_ms + st->search_ms;
    if (!stepped || !(ms > 0.0)) return;
    if (s->skip > 0) {
        s->skip--;
        return;
    }
    s->costs[s->measured % AUTO_WINDOW] = (float)ms;
    s->measured++;
    s->waited++;
}

/* The next candidate of the round, or -1. */
static int next_candidate(const auto_state *s) {
    for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++)
        if (candidate(m) && m != s->current && !(s->tried & (1u << m))) return m;
    return -1;
}

static void end_round(auto_state *s, const method_world *w) {
    s->in_round = false;
    s->waited = 0;
    s->wait = s->rounds_done ? 2 * s->wait : AUTO_SECOND_WAIT;
    if (s->wait > AUTO_LONGEST_WAIT) s->wait = AUTO_LONGEST_WAIT;
    s->rounds_done = true;
    s->members_then = w->member_count;
    s->cost_then = median_of(s->costs, AUTO_WINDOW);
}

/* A trial lost: its state freed, the incumbent built anew from the store. */
static void trial_lost(auto_state *s, const method_world *w) {
    release(s, w, s->current);
    s->current = s->incumbent;
    s->restart = true;
    begin_measuring(s);
}

/* Before the update: the decisions that the measured steps allow. */
static void decide(auto_state *s, const method_world *w) {
    bool trial = s->current != s->incumbent;
    if (trial && s->measured == AUTO_EARLY &&
        median_of(s->costs, AUTO_EARLY) > AUTO_CLEARLY_SLOWER * s->incumbent_cost) {
        trial_lost(s, w);
        return;
    }
    if (s->measured < AUTO_WINDOW) return;
    float now = median_of(s->costs, AUTO_WINDOW);
    if (trial) {
        if (!(now < AUTO_MARGIN * s->incumbent_cost)) {
            trial_lost(s, w);
            return;
        }
        release(s, w, s->incumbent);
        s->incumbent = s->current;
        w->stats->method_switches++;
    }
    if (!s->in_round) {
        size_t n = w->member_count, then = s->members_then;
        bool changed =
            s->rounds_done && (n > 2 * then || 2 * n < then || now > AUTO_SLOWER * s->cost_then);
        if (s->waited < s->wait && !changed) return;
        s->in_round = true;
        s->tried = 1u << s->current; /* the method in place is not a candidate against itself */
    }
    int next = next_candidate(s);
    if (next < 0) {
        end_round(s, w);
        return;
    }
    s->tried |= 1u << next;
    s->incumbent_cost = now;
    s->current = next;
    begin_measuring(s);
}

static broadphase_status update(const method_world *w, void **state) {
    if (!*state) {
        auto_state *s = heap_alloc(w->heap, sizeof(auto_state));
        if (!s) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        memset(s, 0, sizeof *s);
        for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++) {
            s->config[m] = *w->config;
            if (s->config[m].leaf_size == 0)
                s->config[m].leaf_size = (int)method_for((broadphase_method)m)->leaf_size;
        }
        s->current = s->incumbent = BROADPHASE_METHOD_OCTREE;
        s->wait = AUTO_FIRST_ROUND;
        begin_measuring(s);
        *state = s;
    }
    auto_state *s = *state;
    measure(s, w);
    int before = s->current;
    decide(s, w);
    bool trial_begins = s->current != before && s->current != s->incumbent;
    const method_table *m = method_for((broadphase_method)s->current);
    double t0 = clock_now_ms();
    broadphase_status st = m->update(inner_view(s, w, s->restart), &s->inner[s->current]);
    if (st != BROADPHASE_OK && trial_begins) {
        /* The candidate could not be built: passed over; the incumbent goes on. */
        release(s, w, s->current);
        s->current = s->incumbent;
        begin_measuring(s);
        m = method_for((broadphase_method)s->current);
        st = m->update(inner_view(s, w, s->restart), &s->inner[s->current]);
    }
    if (st != BROADPHASE_OK) return st;
    s->update_ms = clock_now_ms() - t0;
    s->restart = false;
    s->step_pending = true;
    s->last_steps = w->stats->steps;
    w->stats->method_trials += s->current != s->incumbent;
    return BROADPHASE_OK;
}

static broadphase_status plan_search(const method_world *w, void *state, method_search *out) {
    auto_state *s = state;
    return method_for((broadphase_method)s->current)
        ->plan_search(inner_view(s, w, false), s->inner[s->current], out);
}

static void fill_stats(const void *state, broadphase_stats *stats) {
    const auto_state *s = state;
    const method_table *m = method_for((broadphase_method)s->current);
    stats->method = (broadphase_method)s->current;
    if (m->fill_stats && s->inner[s->current]) m->fill_stats(s->inner[s->current], stats);
}

static size_t fill_levels(const void *state, broadphase_level *levels, size_t capacity) {
    const auto_state *s = state;
    const method_table *m = method_for((broadphase_method)s->current);
    return m->fill_levels && s->inner[s->current]
               ? m->fill_levels(s->inner[s->current], levels, capacity)
               : 0;
}

static bool query_view_of(const void *state, query_view *out) {
    const auto_state *s = state;
    const method_table *m = method_for((broadphase_method)s->current);
    return m->query_view && s->inner[s->current] && m->query_view(s->inner[s->current], out);
}

static void destroy(const method_world *w, void *state) {
    auto_state *s = state;
    if (!s) return;
    for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++) release(s, w, m);
    heap_free(w->heap, s, sizeof *s);
}

const method_table auto_method = {
    .id = BROADPHASE_METHOD_AUTO,
    .name = "auto",
    .leaf_size = 0, /* each method's own (auto_state.config) */
    .uses_fields = true,
    .update = update,
    .plan_search = plan_search,
    .fill_stats = fill_stats,
    .fill_levels = fill_levels,
    .query_view = query_view_of,
    .destroy = destroy,
};

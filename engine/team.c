/* The threads a step runs on (team.h). */
#include "team.h"

#include "clock.h"
#include "parallel.h"

enum {
    /* Quiet steps before the first try at one thread more, and the most it waits after a try
     * that was held up again (doubling in between). */
    TEAM_PATIENCE_FIRST = 16,
    TEAM_PATIENCE_MOST = 4096,
    /* A try counts as failed when the team shrinks again within this many steps of it. */
    TEAM_PROBATION = 64,
};

/* A step counts as held up (stats.preempted_steps) when its threads were off their cores this
 * long and for this share of the step. */
#define TEAM_STALL_MS 0.25
#define TEAM_STALL_SHARE 0.05
/* The team shrinks when the share of the recent steps' time spent held up passes this; each
 * step's share enters that average with this weight. On an idle machine a kernel thread now and
 * then takes a core for a few milliseconds (1 step in 30 at 1e5 objects on the 2-core VM, 0.2
 * of a step each): that stays below. Another process taking a core holds up most steps, or
 * some steps for most of their time (a time slice is milliseconds): that passes at once. */
#define TEAM_SHARE_TO_SHRINK 0.15
#define TEAM_SHARE_WEIGHT 0.25
/* A step held up for this share of its time, right after another held-up step, shrinks the team
 * at once (a time slice taken from a short step); on the idle 2-core VM about 1 step in 300 at
 * 1e5 objects passes 0.3. */
#define TEAM_SHARE_AT_ONCE 0.5
/* A call between steps that changes the world (a move, an add) shrinks the team when it was held
 * up this long, for TEAM_SHARE_AT_ONCE of its time or more: under another process a move of
 * 1e5 objects, 0.5 ms alone, took 3-4 ms on two threads in each of the steps before the
 * team had shrunk (NOTES row 215). Less is left to the steps: such calls are short, and a
 * kernel thread's tick would pass a smaller bar. */
#define TEAM_CALL_STALL_MS 1.0
/* The idle time is read at most this often (the kernel counts it in clock ticks, 1-10 ms). */
#define TEAM_IDLE_SPAN_MS 100.0
/* The idle cores over that span for a try at one thread more. */
#define TEAM_IDLE_FOR_TRY 0.75
/* idle_cores before a span has been read, and where the system does not say. */
#define TEAM_IDLE_NOT_YET (-2.0)
#define TEAM_IDLE_UNKNOWN (-1.0)

void team_init(team *t, int workers, bool fixed) {
    *t = (team){.workers = workers,
                .size = workers,
                .fixed = fixed,
                .patience = TEAM_PATIENCE_FIRST,
                .idle_cores = TEAM_IDLE_NOT_YET};
}

bool team_needs_reading(const team *t, double now_ms) {
    if (t->fixed || t->size >= t->workers) return false;
    return t->idle_mark_at <= 0.0 || now_ms - t->idle_mark_at >= TEAM_IDLE_SPAN_MS;
}

void team_take_reading(team *t, double now_ms, double idle_core_ms) {
    if (idle_core_ms < 0.0) {
        t->idle_cores = TEAM_IDLE_UNKNOWN;
    } else if (t->idle_mark_at > 0.0 && t->idle_mark_ms >= 0.0 && now_ms > t->idle_mark_at) {
        t->idle_cores = (idle_core_ms - t->idle_mark_ms) / (now_ms - t->idle_mark_at);
    }
    t->idle_mark_ms = idle_core_ms;
    t->idle_mark_at = now_ms;
}

int team_choose(team *t) {
    if (t->fixed) return t->workers;
    if (t->size < t->workers) {
        /* Where the system does not say, the patience alone paces the tries. */
        bool room = t->idle_cores == TEAM_IDLE_UNKNOWN || t->idle_cores >= TEAM_IDLE_FOR_TRY;
        if (++t->quiet >= t->patience && room) {
            t->size++;
            t->probation = TEAM_PROBATION;
            t->quiet = 0;
        }
    }
    return t->size;
}

/* One thread fewer (a quarter of a large team: 16 threads under 8 other processes would
 * otherwise take 8 held-up steps to halve); a try still on probation failed. */
static void team_shrink(team *t) {
    t->stall_share = 0.0;
    t->size -= t->size >= 8 ? t->size / 4 : 1;
    t->quiet = 0;
    t->idle_mark_at = 0.0; /* the next reading starts a fresh span */
    t->idle_cores = TEAM_IDLE_NOT_YET;
    if (t->probation > 0)
        t->patience = t->patience * 2 > TEAM_PATIENCE_MOST ? TEAM_PATIENCE_MOST : t->patience * 2;
    t->probation = 0;
}

void team_observe(team *t, double stalled_ms, double step_ms) {
    bool held_up = stalled_ms >= TEAM_STALL_MS && stalled_ms >= TEAM_STALL_SHARE * step_ms;
    if (held_up) t->preempted_steps++;
    if (t->fixed) return;
    double share = step_ms > 0.0 ? stalled_ms / step_ms : 0.0;
    if (share > 1.0) share = 1.0;
    t->stall_share += TEAM_SHARE_WEIGHT * (share - t->stall_share);
    /* Never on one held-up step alone: the one before it (or a call between them) must have
     * been held up too (an idle virtual machine's passing stalls, NOTES row 223). */
    bool again = held_up && t->held_last;
    t->held_last = held_up;
    if (again && (t->stall_share > TEAM_SHARE_TO_SHRINK || share >= TEAM_SHARE_AT_ONCE) &&
        t->size > 1)
        team_shrink(t);
    else if (t->probation > 0 && --t->probation == 0)
        t->patience = TEAM_PATIENCE_FIRST;
}

void team_observe_call(team *t, double stalled_ms, double call_ms) {
    if (t->fixed) return;
    bool held_up = stalled_ms >= TEAM_CALL_STALL_MS && stalled_ms >= TEAM_SHARE_AT_ONCE * call_ms;
    bool again = held_up && t->held_last;
    t->held_last = held_up || t->held_last; /* a quiet call says nothing of the steps */
    if (again && t->size > 1) team_shrink(t);
}

int team_begin(team *t) {
    (void)threads_take_stalled_ms(); /* what calls outside the step saw is not the step's */
    double now = clock_now_ms();
    if (team_needs_reading(t, now)) team_take_reading(t, now, threads_idle_core_ms());
    int size = team_choose(t);
    threads_set_team_limit(t->fixed ? 0 : size);
    return size;
}

void team_apply(const team *t) {
    threads_set_team_limit(t->fixed ? 0 : t->size);
}

void team_release(void) {
    threads_set_team_limit(0);
}

double team_enter(const team *t) {
    (void)threads_take_stalled_ms(); /* what calls before saw is not this call's */
    team_apply(t);
    return clock_now_ms();
}

void team_leave(team *t, double entered_ms) {
    team_observe_call(t, threads_take_stalled_ms(), clock_now_ms() - entered_ms);
    threads_set_team_limit(0);
}

void team_end(team *t, double step_ms) {
    int limit = threads_team_limit_now(), before = t->size;
    team_observe(t, threads_take_stalled_ms(), step_ms);
    /* A step that lowered its own limit (a second held-up call) met other work twice: the next
     * steps start where it ended. Under load, a first step that shrank itself that way left
     * the stall share of its whole below the bar, and the move after it, on two threads, took
     * 11-19 ms at 1e5 objects (NOTES row 224). */
    if (!t->fixed && t->size == before && limit > 0 && limit < before) team_shrink(t);
    threads_set_team_limit(0);
}

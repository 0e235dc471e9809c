/* The threads a step runs on. A world has config.threads workers; while other work takes cores
 * (other processes, the host's own threads), a worker the scheduler takes off its core holds up
 * the parallel call it is in until it runs again: a step that costs a millisecond can take ten.
 * So the team follows what the machine gives. When the recent steps spent a noticeable share of
 * their time held up that way (threads_take_stalled_ms), the next steps run on fewer threads (a
 * quarter fewer from 8 on, else one); never for one held-up step alone, which an idle virtual
 * machine's passing stalls give now and then: the step before it, or a call that changed the
 * world since, must have been held up too.
 * While the team is short, the machine's idle time is read every so often (threads_idle_core_ms);
 * after a quiet spell, if a core stood idle, the steps try one thread more, and if the team has to
 * shrink again soon after, the next try waits twice as long. The work is cut the same way for any
 * team, so the pairs never change. config.fixed_threads keeps every step on all the workers. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct team {
    int workers;              /* the configured count: the most a step uses */
    int size;                 /* the threads the next step runs on */
    bool fixed;               /* config.fixed_threads */
    uint32_t probation;       /* steps left in which a shrink makes the last try a failure */
    uint32_t quiet;           /* steps since the team last changed */
    uint32_t patience;        /* quiet steps before the next try */
    double stall_share;       /* recent steps' share of time held up (a moving average) */
    double idle_cores;        /* cores idle over the last span read; -2 none read yet, -1 unknown */
    double idle_mark_ms;      /* the idle time at the last reading (threads_idle_core_ms) */
    double idle_mark_at;      /* when it was read (clock_now_ms), 0 before the first */
    uint64_t preempted_steps; /* steps held up by a thread taken off its core */
    bool held_last;           /* the last step (or a call since) was held up */
} team;

void team_init(team *t, int workers, bool fixed);

/* The decisions alone, fed the clock and the system's figures (the tests drive them):
 * - team_needs_reading: whether the idle time should be read before this step;
 * - team_take_reading: the machine's idle time (threads_idle_core_ms; < 0: unknown) at now_ms;
 * - team_choose: the size of the step about to run (a try at one thread more when due);
 * - team_observe: the step ran step_ms and was held up stalled_ms. */
bool team_needs_reading(const team *t, double now_ms);
void team_take_reading(team *t, double now_ms, double idle_core_ms);
int team_choose(team *t);
void team_observe(team *t, double stalled_ms, double step_ms);
/* A call between steps that changes the world ran call_ms and was held up stalled_ms: held up
 * for most of it, and the last step (or a call since) held up too, the team shrinks at once, as
 * after such a step; held up, it counts as the last one held up for the next. */
void team_observe_call(team *t, double stalled_ms, double call_ms);

/* The step's calls, with the clock and the system: */
/* Sets the calling thread's limit for the step's parallel calls; returns the team's size. */
int team_begin(team *t);
/* For a world call other than a step (moves, batched queries): its parallel calls from the
 * calling thread run on the team as the last step left it, so that they do not wake the workers
 * the step has just given up; team_release lifts the limit again. */
void team_apply(const team *t);
void team_release(void);
/* The same for a call that changes the world (it holds the world alone): team_enter applies the
 * team and returns the time; team_leave, given it, lifts the limit, and shrinks the team when
 * the call's parallel work was held up for most of its time (team_observe_call). */
double team_enter(const team *t);
void team_leave(team *t, double entered_ms);
/* After a step that took step_ms: how long its parallel calls were held up sizes the next
 * team; a step that lowered its own limit mid-way (threads_call_done) shrinks it too. */
void team_end(team *t, double step_ms);

#include "machine.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

enum { BLOCKS = 9 }; /* timed blocks of exchanges; the median block is the figure */

/* Threads that have just left an OpenMP region spin a while before they sleep; one spinning on
 * the partner's core would be timed instead of the line (3,400 ns against 440 seen here). */
#define QUIET_NS 5000000L

/* The counter, alone on its line: the partner turns each odd value into the next even one. */
typedef struct relay {
    alignas(64) atomic_long turn;
    long exchanges;
} relay;

static void *partner(void *p) {
    relay *r = p;
    for (long i = 0; i < r->exchanges; i++) {
        while (atomic_load_explicit(&r->turn, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&r->turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double machine_round_trip_ns(int rounds) {
    long per_block = rounds / BLOCKS;
    if (per_block < 1) return 0.0;
    struct timespec quiet = {0, QUIET_NS};
    nanosleep(&quiet, NULL);
    /* Exchange 0 is outside the timing: the partner is running and the line is shared. */
    relay r = {.exchanges = 1 + BLOCKS * per_block};
    atomic_init(&r.turn, -1);
    pthread_t t;
    if (pthread_create(&t, NULL, partner, &r) != 0) return 0.0;
    atomic_store_explicit(&r.turn, 1, memory_order_release);
    while (atomic_load_explicit(&r.turn, memory_order_acquire) != 2) {
    }
    double block_ns[BLOCKS];
    long i = 1;
    for (int b = 0; b < BLOCKS; b++) {
        double t0 = now_ns();
        for (long end = i + per_block; i < end; i++) {
            atomic_store_explicit(&r.turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&r.turn, memory_order_acquire) != 2 * i + 2) {
            }
        }
        block_ns[b] = (now_ns() - t0) / (double)per_block;
    }
    pthread_join(t, NULL);
    qsort(block_ns, BLOCKS, sizeof block_ns[0], by_value);
    return block_ns[BLOCKS / 2];
}

/* ---- the host gauge ---------------------------------------------------------------------- */

enum {
    GAUGE_FLOATS = 16384, /* 64 KiB a thread: in its core's caches */
    GAUGE_PASSES = 8,     /* about 0.2 ms a round on the development VM */
    GAUGE_MOST = 64       /* threads at most */
};

struct machine_gauge {
    int threads, helpers; /* helpers: threads started besides the caller's */
    pthread_mutex_t lock;
    pthread_cond_t go, back;
    long round;   /* rounds begun */
    int finished; /* helpers done with the round */
    bool stopping;
    pthread_t helper[GAUGE_MOST];
    float *data[GAUGE_MOST];
    volatile float sink[GAUGE_MOST * 16]; /* a line a thread: the sums are kept */
};

typedef struct gauge_arg {
    machine_gauge *g;
    int index;
} gauge_arg;

/* Thread `index`'s fixed work: every pass sums its array and scales it a little. */
static void gauge_work(machine_gauge *g, int index) {
    float *x = g->data[index], sum = 0.0f;
    for (int pass = 0; pass < GAUGE_PASSES; pass++)
        for (int i = 0; i < GAUGE_FLOATS; i++) {
            sum += x[i];
            x[i] = x[i] * 0.999f + 0.001f;
        }
    g->sink[index * 16] = sum;
}

static void *gauge_helper(void *p) {
    gauge_arg a = *(gauge_arg *)p;
    free(p);
    machine_gauge *g = a.g;
    long seen = 0;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        while (g->round == seen && !g->stopping) pthread_cond_wait(&g->go, &g->lock);
        if (g->stopping) break;
        seen = g->round;
        pthread_mutex_unlock(&g->lock);
        gauge_work(g, a.index);
        pthread_mutex_lock(&g->lock);
        if (++g->finished == g->helpers) pthread_cond_signal(&g->back);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

machine_gauge *machine_gauge_start(int threads) {
    if (threads < 1) threads = 1;
    if (threads > GAUGE_MOST) threads = GAUGE_MOST;
    machine_gauge *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->threads = threads;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->go, NULL);
    pthread_cond_init(&g->back, NULL);
    bool ok = true;
    for (int i = 0; i < threads && ok; i++) {
        g->data[i] = malloc(GAUGE_FLOATS * sizeof(float));
        ok = g->data[i] != NULL;
        for (int k = 0; ok && k < GAUGE_FLOATS; k++) g->data[i][k] = (float)(k % 7);
    }
    for (int i = 1; i < threads && ok; i++) {
        gauge_arg *a = malloc(sizeof *a);
        ok = a != NULL;
        if (ok) *a = (gauge_arg){g, i};
        if (ok && pthread_create(&g->helper[i], NULL, gauge_helper, a) != 0) {
            free(a);
            ok = false;
        }
        if (ok) g->helpers++;
    }
    if (!ok) {
        machine_gauge_stop(g);
        return NULL;
    }
    return g;
}

double machine_gauge_run(machine_gauge *g) {
    double t0 = now_ns();
    pthread_mutex_lock(&g->lock);
    g->finished = 0;
    g->round++;
    pthread_cond_broadcast(&g->go);
    pthread_mutex_unlock(&g->lock);
    gauge_work(g, 0);
    pthread_mutex_lock(&g->lock);
    while (g->finished < g->helpers) pthread_cond_wait(&g->back, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return (now_ns() - t0) * 1e-6;
}

void machine_gauge_stop(machine_gauge *g) {
    if (!g) return;
    pthread_mutex_lock(&g->lock);
    g->stopping = true;
    pthread_cond_broadcast(&g->go);
    pthread_mutex_unlock(&g->lock);
    for (int i = 1; i <= g->helpers; i++) pthread_join(g->helper[i], NULL);
    pthread_cond_destroy(&g->go);
    pthread_cond_destroy(&g->back);
    pthread_mutex_destroy(&g->lock);
    for (int i = 0; i < g->threads; i++) free(g->data[i]);
    free(g);
}

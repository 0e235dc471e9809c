/* Parallel loops, task groups, per-worker scratch, prefix sums and the LSD radix sort, on
 * OpenMP when THREADS_HAVE_OPENMP is set and serially on worker 0 otherwise. Work is always cut
 * into pieces that do not depend on the worker count, so every result is the same for any count.
 */
#include "parallel.h"

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if THREADS_HAVE_OPENMP
#include <omp.h>
#endif
#include <unistd.h>
#if defined(__linux__)
#include <fcntl.h>
#include <sys/resource.h>
#define THREADS_LINUX 1
#endif

enum {
    THREADS_MAX_WORKERS = 1024,
    THREADS_CACHE_LINE = 64,
    /* Below this many values a scan is memory-bound on one core; a fork/join does not pay. */
    THREADS_SCAN_PARALLEL_MIN = 1 << 16,
    /* Fixed so that the split (and thus the work each block does) ignores the worker count. */
    THREADS_SCAN_BLOCKS = 64,
    /* Digits wider than 11 bits make the per-block histograms outgrow L1/L2. */
    THREADS_RADIX_MAX_DIGIT_BITS = 11,
    THREADS_RADIX_MAX_BUCKETS = 1 << THREADS_RADIX_MAX_DIGIT_BITS,
    THREADS_RADIX_MAX_BLOCKS = 64,
    /* Blocks smaller than this scatter into runs too short to fill cache lines. */
    THREADS_RADIX_MIN_BLOCK_KEYS = 1 << 14,
    /* Insertion sort beats clearing and scanning a histogram for a handful of keys. */
    THREADS_RADIX_INSERTION_MAX = 32,
    /* From this many keys on, one parallel pass on the top digit splits the keys into
     * buckets that are each sorted on the remaining bits by one worker, in cache. */
    THREADS_RADIX_MSD_MIN = 1 << 16,
    THREADS_RADIX_MSD_BITS = 8,
};

static int threads_clamp_workers(int workers) {
    if (workers < 1) return 1;
    if (workers > THREADS_MAX_WORKERS) return THREADS_MAX_WORKERS;
    return workers;
}

int threads_hardware_count(void) {
#if THREADS_HAVE_OPENMP
    return threads_clamp_workers(omp_get_num_procs());
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return threads_clamp_workers(n > THREADS_MAX_WORKERS ? THREADS_MAX_WORKERS : (int)n);
#endif
}

int threads_resolve(int requested) {
    if (requested == 0) return threads_hardware_count();
    return threads_clamp_workers(requested);
}

int threads_worker_index(void) {
#if THREADS_HAVE_OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ---- sharing the machine ----------------------------------------------------------------------
 */

static _Thread_local int threads_team_limit;
static _Thread_local double threads_stalled_ms;
static _Thread_local int threads_shrink_countdown; /* threads_shrink_after_calls */
static _Thread_local int threads_held_calls;       /* held-up calls since the limit was set */

void threads_shrink_after_calls(int calls) {
    threads_shrink_countdown = calls > 0 ? calls : 0;
}

int threads_shrink_pending(void) {
    return threads_shrink_countdown;
}

/* A call that ran on the calling thread alone counts towards the countdown too (it has no team
 * to shrink). */
static void threads_count_inline_call(void) {
    if (threads_shrink_countdown > 0) threads_shrink_countdown--;
}

int threads_team_limit_now(void) {
    return threads_team_limit;
}

void threads_set_team_limit(int limit) {
    threads_team_limit = limit > 0 ? limit : 0;
    threads_held_calls = 0;
}

double threads_take_stalled_ms(void) {
    double ms = threads_stalled_ms;
    threads_stalled_ms = 0.0;
    return ms;
}

#if THREADS_HAVE_OPENMP
/* The threads a call starts: its workers, no more than it has pieces, within the caller's limit. */
static int threads_team(int workers, size_t pieces) {
    int team = pieces < (size_t)workers ? (int)pieces : workers;
    if (threads_team_limit > 0 && team > threads_team_limit) team = threads_team_limit;
    return team;
}

/* Where a thread stands: wall and own CPU time, and its involuntary context switches. */
typedef struct threads_mark {
    double wall_ms, cpu_ms;
    long preemptions;
} threads_mark;

static double threads_clock_ms(clockid_t clock) {
    struct timespec t;
    if (clock_gettime(clock, &t) != 0) return 0.0;
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static threads_mark threads_mark_now(void) {
    threads_mark m = {threads_clock_ms(CLOCK_MONOTONIC), 0.0, 0};
#if THREADS_LINUX
    struct rusage u;
    if (getrusage(RUSAGE_THREAD, &u) == 0) m.preemptions = u.ru_nivcsw;
    m.cpu_ms = threads_clock_ms(CLOCK_THREAD_CPUTIME_ID);
#endif
    return m;
}

/* A thread that enters a parallel call this long after the caller opened it was not woken in
 * time but waited for a core (waking from sleep takes tens of microseconds). */
#define THREADS_LATE_MS 0.5

/* How long a thread held its call up: its late start (when it waited for a core), and the time
 * it spent off its core since `before` because the scheduler took the core (it was preempted;
 * time spent asleep waiting for tasks is not a stall). */
static double threads_stall_since(double opened_ms, threads_mark before) {
    threads_mark now = threads_mark_now();
    double late = before.wall_ms - opened_ms;
    double stall = late > THREADS_LATE_MS ? late : 0.0;
    if (now.preemptions == before.preemptions) return stall;
    double off = (now.wall_ms - before.wall_ms) - (now.cpu_ms - before.cpu_ms);
    return off > 0.0 ? stall + off : stall;
}

/* The longest of the first `count` threads' stalls (cells of threads the runtime did not give
 * stay at the 0 they were set to). */
static double threads_most(double *stalls, int count) {
    double most = 0.0;
    for (int i = 0; i < count; i++) most = stalls[i] > most ? stalls[i] : most;
    return most;
}

/* A call held up at least this long, for at least half its time, is held up; from the second
 * such call since the caller's limit was set, each shrinks the limit at once
 * (threads_shrink_after_calls forces it). A thread that waits for a core waits a time slice. One
 * held-up call alone does not: on an idle virtual machine a vCPU is taken now and then for a
 * millisecond or more (3-14 steps in 120-300 of `moving`), and the rest of such a step ran on one
 * thread, half as fast, where another process taking a core holds up call after call (NOTES
 * row 223). */
#define THREADS_SHRINK_MS 1.0

/* A call on `team` threads, opened at opened_ms, is over: its stall counted, and the caller's
 * limit lowered when it was held up. */
static void threads_call_done(double *stalls, int team, double opened_ms) {
    double most = threads_most(stalls, team);
    threads_stalled_ms += most;
    bool forced = threads_shrink_countdown > 0 && --threads_shrink_countdown == 0;
    if (threads_team_limit <= 1 || team <= 1) return;
    double wall = threads_clock_ms(CLOCK_MONOTONIC) - opened_ms;
    bool held = most >= THREADS_SHRINK_MS && most >= 0.5 * wall;
    if (forced || (held && ++threads_held_calls >= 2)) {
        int t = team < threads_team_limit ? team : threads_team_limit;
        t -= t >= 8 ? t / 4 : 1;
        threads_team_limit = t > 1 ? t : 1;
    }
}
#endif

double threads_idle_core_ms(void) {
#if THREADS_LINUX
    /* The first line of /proc/stat: "cpu  user nice system idle ..." in clock ticks, summed over
     * the machine's cores. */
    int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1.0;
    char text[256];
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0) return -1.0;
    text[got] = '\0';
    const char *p = text;
    if (strncmp(p, "cpu ", 4) != 0) return -1.0;
    p += 4;
    unsigned long long field = 0;
    for (int i = 0; i < 4; i++) {
        while (*p == ' ') p++;
        if (*p < '0' || *p > '9') return -1.0;
        field = 0;
        while (*p >= '0' && *p <= '9') field = field * 10 + (unsigned long long)(*p++ - '0');
    }
    long ticks = sysconf(_SC_CLK_TCK);
    return ticks > 0 ? (double)field * 1e3 / (double)ticks : -1.0;
#else
    return -1.0;
#endif
}

/* True when a call should run on the calling thread: one worker or one chunk is not worth a
 * fork/join, and inside a running region a nested team would oversubscribe the cores, so nested
 * calls run serially and report the caller's own worker index, which keeps per-worker scratch
 * private to the thread that owns it. */
static bool threads_run_inline(int workers, size_t chunk_count) {
    if (workers <= 1 || chunk_count <= 1 || threads_team_limit == 1) return true;
#if THREADS_HAVE_OPENMP
    return omp_in_parallel() != 0;
#else
    return true;
#endif
}

/* Chunks claimed one at a time (dynamic: they vary in cost, as tree jobs and clustered scenes
 * do), or, for chunks of equal cost, each worker's contiguous share (static: the same at every
 * call). */
static void for_chunks(int workers, size_t chunk_count, threads_chunk_fn *fn, void *ctx,
                       bool dynamic) {
    workers = threads_clamp_workers(workers);
    if (threads_run_inline(workers, chunk_count)) {
        int worker = threads_worker_index();
        for (size_t chunk = 0; chunk < chunk_count; chunk++) fn(chunk, worker, ctx);
        threads_count_inline_call();
        return;
    }
#if THREADS_HAVE_OPENMP
    int team = threads_team(workers, chunk_count);
    /* Each thread's stall in its own cell (no reduction clause: clang's OpenMP makes that a
     * global lock symbol, which the library would export). */
    double stalls[THREADS_MAX_WORKERS];
    for (int i = 0; i < team; i++) stalls[i] = 0.0; /* the runtime may give fewer threads */
    double opened = threads_clock_ms(CLOCK_MONOTONIC);
#pragma omp parallel num_threads(team)
    {
        threads_mark before = threads_mark_now();
        int worker = omp_get_thread_num();
        if (dynamic) {
#pragma omp for schedule(dynamic, 1) nowait
            for (size_t chunk = 0; chunk < chunk_count; chunk++) fn(chunk, worker, ctx);
        } else {
#pragma omp for schedule(static) nowait
            for (size_t chunk = 0; chunk < chunk_count; chunk++) fn(chunk, worker, ctx);
        }
        stalls[omp_get_thread_num()] = threads_stall_since(opened, before);
    }
    threads_call_done(stalls, team, opened);
#else
    (void)dynamic;
#endif
}

void threads_for_chunks(int workers, size_t chunk_count, threads_chunk_fn *fn, void *ctx) {
    for_chunks(workers, chunk_count, fn, ctx, true);
}

void threads_for_chunks_static(int workers, size_t chunk_count, threads_chunk_fn *fn, void *ctx) {
    for_chunks(workers, chunk_count, fn, ctx, false);
}

typedef struct threads_ranges {
    size_t count;
    size_t grain;
    threads_range_fn *fn;
    void *ctx;
} threads_ranges;

static void threads_range_chunk(size_t chunk, int worker, void *ctx) {
    const threads_ranges *r = ctx;
    size_t begin = chunk * r->grain;
    /* Written as a difference so that begin + grain cannot overflow near SIZE_MAX. */
    size_t end = r->count - begin < r->grain ? r->count : begin + r->grain;
    r->fn(begin, end, worker, r->ctx);
}

void threads_for_ranges(int workers, size_t count, size_t grain, threads_range_fn *fn, void *ctx) {
    if (count == 0) return;
    if (grain == 0) grain = 1;
    threads_ranges r = {count, grain, fn, ctx};
    threads_for_chunks(workers, threads_chunk_count(count, grain), threads_range_chunk, &r);
}

size_t threads_chunk_size(size_t count, int workers, size_t smallest, size_t largest) {
    smallest = (smallest + 63) & ~(size_t)63;
    if (smallest == 0) smallest = 64;
    largest = (largest + 63) & ~(size_t)63;
    if (largest < smallest) largest = smallest;
    size_t want = (size_t)threads_clamp_workers(workers) * THREADS_CHUNKS_PER_WORKER;
    size_t even = count / want + (count % want != 0);
    even = (even + 63) & ~(size_t)63;
    if (even < smallest) even = smallest;
    return even < largest ? even : largest;
}

size_t threads_chunk_count(size_t count, size_t size) {
    if (size == 0) size = 1;
    return count / size + (count % size != 0);
}

void threads_run_tasks(int workers, threads_task_fn *root, void *ctx) {
    workers = threads_clamp_workers(workers);
    if (threads_run_inline(workers, 2)) {
        /* Spawned tasks then run at once (serially) or join the enclosing team's task pool. */
        root(ctx, threads_worker_index());
        threads_count_inline_call();
        return;
    }
#if THREADS_HAVE_OPENMP
    double stalls[THREADS_MAX_WORKERS];
    int team = threads_team(workers, (size_t)workers);
    for (int i = 0; i < team; i++) stalls[i] = 0.0; /* the runtime may give fewer threads */
    double opened = threads_clock_ms(CLOCK_MONOTONIC);
#pragma omp parallel num_threads(team)
    {
        threads_mark before = threads_mark_now();
        /* The single's closing barrier is where the other threads run the spawned tasks. */
#pragma omp single
        root(ctx, omp_get_thread_num());
        stalls[omp_get_thread_num()] = threads_stall_since(opened, before);
    }
    threads_call_done(stalls, team, opened);
#endif
}

#if defined(__SANITIZE_THREAD__)
#define THREADS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define THREADS_TSAN 1
#endif
#endif

#if THREADS_HAVE_OPENMP
#ifdef THREADS_TSAN
/* A task's firstprivate copies of fn and ctx live in the task's descriptor, which libomp
 * allocates from the spawning thread's pool. Once the task ends, the worker that ran it hands the
 * descriptor back to that pool with an atomic exchange inside libomp, which ThreadSanitizer does
 * not see (libomp is not instrumented), and the LLVM 14 runtime's AnnotateNewMemory is a no-op.
 * So when the spawner later writes a new task's copies into the same bytes, ThreadSanitizer
 * reports a race with the old task's read: a false report, made deterministic by spawning a few
 * thousand tasks from one thread while another runs them (NOTES row 120). Reading the two
 * copies here, uninstrumented, removes only those reads; everything fn does through ctx is checked,
 * and Archer's task-start edge still orders it after the spawn. */
#define THREADS_TAKE_TASK __attribute__((no_sanitize("thread"), noinline))
#else
#define THREADS_TAKE_TASK inline
#endif
static THREADS_TAKE_TASK void threads_take_task(threads_task_fn *const *fn, void *const *ctx,
                                                threads_task_fn **fn_out, void **ctx_out) {
    *fn_out = *fn;
    *ctx_out = *ctx;
}
#endif

void threads_spawn(threads_task_fn *fn, void *ctx) {
#if THREADS_HAVE_OPENMP
    /* The worker index is read when the task runs: any idle worker may steal it. */
#pragma omp task firstprivate(fn, ctx)
    {
        threads_task_fn *task_fn;
        void *task_ctx;
        threads_take_task(&fn, &ctx, &task_fn, &task_ctx);
        task_fn(task_ctx, omp_get_thread_num());
    }
#else
    fn(ctx, 0);
#endif
}

void threads_wait_children(void) {
#if THREADS_HAVE_OPENMP
#pragma omp taskwait
#endif
}

/* ---- per-worker scratch ------------------------------------------------------------------ */

/* The alignment pads each slot to a whole cache line: a worker bumping its own counter must not
 * invalidate the line that holds a neighbour's pointer. */
struct threads_scratch_slot {
    alignas(THREADS_CACHE_LINE) unsigned char *data;
    size_t capacity;
    /* Kept per slot so that concurrent growth by different workers never writes shared data. */
    uint64_t allocations;
};

static void *scratch_alloc(const threads_scratch *s, size_t bytes) {
    if (s->allocator.alloc) return s->allocator.alloc(s->allocator.ctx, bytes);
    return aligned_alloc(THREADS_CACHE_LINE, bytes);
}

static void scratch_free(const threads_scratch *s, void *p, size_t bytes) {
    if (s->allocator.free)
        s->allocator.free(s->allocator.ctx, p, bytes);
    else
        free(p);
}

static size_t threads_round_up_line(size_t bytes) {
    if (bytes > SIZE_MAX - (THREADS_CACHE_LINE - 1)) return 0;
    return (bytes + THREADS_CACHE_LINE - 1) & ~(size_t)(THREADS_CACHE_LINE - 1);
}

bool threads_scratch_reserve(threads_scratch *s, int workers) {
    workers = threads_clamp_workers(workers);
    if (workers <= s->count) return true;
    struct threads_scratch_slot *slot = scratch_alloc(s, (size_t)workers * sizeof *slot);
    if (!slot) return false;
    memset(slot, 0, (size_t)workers * sizeof *slot);
    if (s->count > 0) memcpy(slot, s->slot, (size_t)s->count * sizeof *slot);
    scratch_free(s, s->slot, (size_t)s->count * sizeof *slot);
    s->slot = slot;
    s->count = workers;
    /* The slot array counts as an allocation too, so steady-state checks see every malloc; it is
     * charged to slot 0 because this runs outside parallel regions. */
    slot[0].allocations++;
    return true;
}

void *threads_scratch_get(threads_scratch *s, int worker, size_t bytes) {
    assert(worker >= 0 && worker < s->count && "threads_scratch_reserve was not called");
    if (worker < 0 || worker >= s->count) return NULL;
    struct threads_scratch_slot *slot = &s->slot[worker];
    if (bytes <= slot->capacity && slot->data) return slot->data;
    size_t need = threads_round_up_line(bytes > 0 ? bytes : 1);
    if (need == 0) return NULL;
    /* Grow by 1.5x so that a slowly rising demand costs O(log n) allocations, not one a frame. */
    size_t grown = slot->capacity + slot->capacity / 2;
    size_t capacity = grown > need ? threads_round_up_line(grown) : need;
    if (capacity == 0) capacity = need;
    unsigned char *data = scratch_alloc(s, capacity);
    if (!data) return NULL;
    if (slot->data) {
        memcpy(data, slot->data, slot->capacity);
        scratch_free(s, slot->data, slot->capacity);
    }
    slot->data = data;
    slot->capacity = capacity;
    slot->allocations++;
    return data;
}

void threads_scratch_free(threads_scratch *s) {
    for (int i = 0; i < s->count; i++) scratch_free(s, s->slot[i].data, s->slot[i].capacity);
    scratch_free(s, s->slot, (size_t)s->count * sizeof *s->slot);
    s->slot = NULL;
    s->count = 0;
}

uint64_t threads_scratch_allocations(const threads_scratch *s) {
    uint64_t total = 0;
    for (int i = 0; i < s->count; i++) total += s->slot[i].allocations;
    return total;
}

size_t threads_scratch_bytes(const threads_scratch *s) {
    size_t total = 0;
    for (int i = 0; i < s->count; i++) total += s->slot[i].capacity;
    return total;
}

/* ---- exclusive scan ---------------------------------------------------------------------- */

typedef struct threads_scan {
    size_t *values;
    size_t count;
    size_t sums[THREADS_SCAN_BLOCKS];
} threads_scan;

static void threads_scan_block_range(const threads_scan *scan, size_t block, size_t *begin,
                                     size_t *end) {
    /* Computed in two parts so that block * count cannot overflow for huge arrays. */
    size_t base = scan->count / THREADS_SCAN_BLOCKS, extra = scan->count % THREADS_SCAN_BLOCKS;
    *begin = block * base + (block < extra ? block : extra);
    *end = *begin + base + (block < extra);
}

static void threads_scan_sum(size_t block, int worker, void *ctx) {
    (void)worker;
    threads_scan *scan = ctx;
    size_t begin, end, sum = 0;
    threads_scan_block_range(scan, block, &begin, &end);
    for (size_t i = begin; i < end; i++) sum += scan->values[i];
    scan->sums[block] = sum;
}

static void threads_scan_apply(size_t block, int worker, void *ctx) {
    (void)worker;
    threads_scan *scan = ctx;
    size_t begin, end, sum = scan->sums[block];
    threads_scan_block_range(scan, block, &begin, &end);
    for (size_t i = begin; i < end; i++) {
        size_t v = scan->values[i];
        scan->values[i] = sum;
        sum += v;
    }
}

size_t threads_exclusive_scan(int workers, size_t *values, size_t count) {
    workers = threads_clamp_workers(workers);
    if (count < THREADS_SCAN_PARALLEL_MIN || threads_run_inline(workers, THREADS_SCAN_BLOCKS)) {
        size_t sum = 0;
        for (size_t i = 0; i < count; i++) {
            size_t v = values[i];
            values[i] = sum;
            sum += v;
        }
        return sum;
    }
    threads_scan scan = {.values = values, .count = count};
    threads_for_chunks(workers, THREADS_SCAN_BLOCKS, threads_scan_sum, &scan);
    size_t total = 0;
    for (size_t b = 0; b < THREADS_SCAN_BLOCKS; b++) {
        size_t v = scan.sums[b];
        scan.sums[b] = total;
        total += v;
    }
    threads_for_chunks(workers, THREADS_SCAN_BLOCKS, threads_scan_apply, &scan);
    return total;
}

/* ---- radix sort -------------------------------------------------------------------------- */

/* One implementation sorts keys alone and keys with 32-bit values: the hot loops are written once
 * with a `with_values` flag, always inlined, and every caller passes a constant, so each loop is
 * compiled twice and the keys-only copy carries no trace of the values. The flag is read once per
 * group of blocks, per bucket or per call, never per key. */
#if defined(__GNUC__)
#define THREADS_INLINE static inline __attribute__((always_inline))
#else
#define THREADS_INLINE static inline
#endif

/* One pass of the sort: the keys are cut into `blocks` equal blocks; each block counts its
 * digits into its own histogram row, the rows are turned into scatter offsets in (digit, block)
 * order, and each block then scatters its keys in order, which keeps the sort stable. */
typedef struct threads_radix_pass {
    uint64_t *src;
    uint64_t *dst;
    uint32_t *src_values; /* move with the keys; both NULL for a keys-only sort */
    uint32_t *dst_values;
    size_t count;
    size_t blocks;
    size_t groups;     /* runs of consecutive blocks, one per worker */
    size_t *hist;      /* blocks + 1 rows of row_stride counters */
    size_t row_stride; /* buckets rounded up to a cache line of counters */
    unsigned shift;
    uint64_t mask; /* this pass's digit; the last may be narrower than the others */
} threads_radix_pass;

static void threads_radix_block_range(const threads_radix_pass *p, size_t block, size_t *begin,
                                      size_t *end) {
    size_t base = p->count / p->blocks, extra = p->count % p->blocks;
    *begin = block * base + (block < extra ? block : extra);
    *end = *begin + base + (block < extra);
}

static void threads_radix_count_block(const threads_radix_pass *p, size_t block) {
    size_t *row = p->hist + block * p->row_stride;
    memset(row, 0, (size_t)(p->mask + 1) * sizeof *row);
    size_t begin, end;
    threads_radix_block_range(p, block, &begin, &end);
    const uint64_t *src = p->src;
    unsigned shift = p->shift;
    uint64_t mask = p->mask;
    for (size_t i = begin; i < end; i++) row[(src[i] >> shift) & mask]++;
}

THREADS_INLINE void threads_radix_scatter_block(const threads_radix_pass *p, size_t block,
                                                bool with_values) {
    size_t *offset = p->hist + block * p->row_stride;
    size_t begin, end;
    threads_radix_block_range(p, block, &begin, &end);
    const uint64_t *src = p->src;
    uint64_t *dst = p->dst;
    const uint32_t *src_values = p->src_values;
    uint32_t *dst_values = p->dst_values;
    unsigned shift = p->shift;
    uint64_t mask = p->mask;
    for (size_t i = begin; i < end; i++) {
        uint64_t key = src[i];
        size_t at = offset[(key >> shift) & mask]++;
        dst[at] = key;
        if (with_values) dst_values[at] = src_values[i];
    }
}

/* Blocks next to each other write next to each other in every bucket; run concurrently they
 * would share the cache lines at the seams of every bucket, so each worker takes a run of
 * consecutive blocks instead. Only the schedule depends on the worker count, not the blocks. */
static void threads_radix_group_range(const threads_radix_pass *p, size_t group, size_t *first,
                                      size_t *last) {
    *first = group * p->blocks / p->groups;
    *last = (group + 1) * p->blocks / p->groups;
}

static void threads_radix_count(size_t group, int worker, void *ctx) {
    (void)worker;
    const threads_radix_pass *p = ctx;
    size_t first, last;
    threads_radix_group_range(p, group, &first, &last);
    for (size_t block = first; block < last; block++) threads_radix_count_block(p, block);
}

static void threads_radix_scatter(size_t group, int worker, void *ctx) {
    (void)worker;
    const threads_radix_pass *p = ctx;
    size_t first, last;
    threads_radix_group_range(p, group, &first, &last);
    if (p->src_values) {
        for (size_t block = first; block < last; block++)
            threads_radix_scatter_block(p, block, true);
    } else {
        for (size_t block = first; block < last; block++)
            threads_radix_scatter_block(p, block, false);
    }
}

/* Turns the per-block counts into exclusive offsets, digit-major then block, so that block b's
 * keys of a digit land after those of blocks < b. Both sweeps walk the rows in memory order: a
 * column walk strides by a whole row per step and cost more than the scatter itself. Returns
 * false when every key has the same digit: the pass would copy the keys unchanged and is
 * skipped. */
static bool threads_radix_offsets(threads_radix_pass *p) {
    size_t buckets = (size_t)p->mask + 1;
    size_t *next = p->hist + p->blocks * p->row_stride; /* the spare row after the blocks' */
    memset(next, 0, buckets * sizeof *next);
    for (size_t b = 0; b < p->blocks; b++) {
        const size_t *row = p->hist + b * p->row_stride;
        for (size_t d = 0; d < buckets; d++) next[d] += row[d];
    }
    size_t sum = 0;
    for (size_t d = 0; d < buckets; d++) {
        size_t total = next[d];
        if (total == p->count) return false;
        next[d] = sum;
        sum += total;
    }
    for (size_t b = 0; b < p->blocks; b++) {
        size_t *row = p->hist + b * p->row_stride;
        for (size_t d = 0; d < buckets; d++) {
            size_t c = row[d];
            row[d] = next[d];
            next[d] += c;
        }
    }
    return true;
}

/* The digit plan: as few passes as possible of at most 11 bits, the bits spread evenly so that
 * no pass pays for a histogram much larger than its share (40 bits: 4 passes of 10). */
static unsigned threads_radix_digit_bits(int key_bits) {
    unsigned bits = (unsigned)key_bits;
    unsigned passes = (bits + THREADS_RADIX_MAX_DIGIT_BITS - 1) / THREADS_RADIX_MAX_DIGIT_BITS;
    return (bits + passes - 1) / passes;
}

static size_t threads_radix_blocks(size_t count) {
    size_t blocks = count / THREADS_RADIX_MIN_BLOCK_KEYS;
    if (blocks < 1) return 1;
    return blocks > THREADS_RADIX_MAX_BLOCKS ? THREADS_RADIX_MAX_BLOCKS : blocks;
}

size_t threads_radix_scratch_size(int workers) {
    /* The block count depends only on the key count, so workers does not change the size; the
     * values need no counters of their own, so pairs fit in the same scratch. */
    (void)workers;
    /* One row per block plus a spare row for the running offsets. */
    return (size_t)(THREADS_RADIX_MAX_BLOCKS + 1) * THREADS_RADIX_MAX_BUCKETS * sizeof(size_t);
}

THREADS_INLINE void threads_insertion_sort(uint64_t *keys, uint32_t *values, size_t count,
                                           uint64_t key_mask, bool with_values) {
    for (size_t i = 1; i < count; i++) {
        uint64_t key = keys[i];
        uint32_t value = with_values ? values[i] : 0;
        size_t j = i;
        /* Strictly greater keeps equal keys in their order, as the radix passes do. */
        while (j > 0 && (keys[j - 1] & key_mask) > (key & key_mask)) {
            keys[j] = keys[j - 1];
            if (with_values) values[j] = values[j - 1];
            j--;
        }
        keys[j] = key;
        if (with_values) values[j] = value;
    }
}

typedef struct threads_copy {
    uint64_t *dst;
    const uint64_t *src;
    uint32_t *dst_values; /* NULL for keys only */
    const uint32_t *src_values;
} threads_copy;

static void threads_copy_range(size_t begin, size_t end, int worker, void *ctx) {
    (void)worker;
    const threads_copy *c = ctx;
    memcpy(c->dst + begin, c->src + begin, (end - begin) * sizeof *c->dst);
    if (c->dst_values)
        memcpy(c->dst_values + begin, c->src_values + begin, (end - begin) * sizeof *c->dst_values);
}

/* The buckets left by the top-digit pass: keys [start[d], start[d + 1]) of tmp share digit d
 * and are sorted on their low `bits` bits into the same range of keys (values likewise from
 * tmp_values into values, when there are values). */
typedef struct threads_radix_buckets {
    uint64_t *keys, *tmp;
    uint32_t *values, *tmp_values; /* NULL for keys only */
    size_t start[(1 << THREADS_RADIX_MSD_BITS) + 1];
    unsigned bits;
} threads_radix_buckets;

THREADS_INLINE void threads_radix_sort_bucket_range(const threads_radix_buckets *b, size_t bucket,
                                                    bool with_values) {
    size_t begin = b->start[bucket], n = b->start[bucket + 1] - begin;
    uint64_t *src = b->tmp + begin, *dst = b->keys + begin;
    uint32_t *src_values = with_values ? b->tmp_values + begin : NULL;
    uint32_t *dst_values = with_values ? b->values + begin : NULL;
    uint64_t low = b->bits == 64 ? ~(uint64_t)0 : ((uint64_t)1 << b->bits) - 1;
    if (n <= THREADS_RADIX_INSERTION_MAX) {
        memcpy(dst, src, n * sizeof *dst);
        if (with_values) memcpy(dst_values, src_values, n * sizeof *dst_values);
        threads_insertion_sort(dst, dst_values, n, low, with_values);
        return;
    }
    unsigned digit_bits = threads_radix_digit_bits((int)b->bits);
    size_t hist[THREADS_RADIX_MAX_BUCKETS];
    for (unsigned shift = 0; shift < b->bits; shift += digit_bits) {
        unsigned bits = b->bits - shift < digit_bits ? b->bits - shift : digit_bits;
        size_t buckets = (size_t)1 << bits;
        uint64_t mask = buckets - 1;
        memset(hist, 0, buckets * sizeof *hist);
        for (size_t i = 0; i < n; i++) hist[(src[i] >> shift) & mask]++;
        if (hist[(src[0] >> shift) & mask] == n) continue; /* one digit: nothing to move */
        size_t sum = 0;
        for (size_t d = 0; d < buckets; d++) {
            size_t c = hist[d];
            hist[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            size_t at = hist[(src[i] >> shift) & mask]++;
            dst[at] = src[i];
            if (with_values) dst_values[at] = src_values[i];
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
        if (with_values) {
            uint32_t *tv = src_values;
            src_values = dst_values;
            dst_values = tv;
        }
    }
    if (src != b->keys + begin) {
        memcpy(b->keys + begin, src, n * sizeof *src);
        if (with_values) memcpy(b->values + begin, src_values, n * sizeof *src_values);
    }
}

static void threads_radix_sort_bucket(size_t bucket, int worker, void *ctx) {
    (void)worker;
    const threads_radix_buckets *b = ctx;
    if (b->values)
        threads_radix_sort_bucket_range(b, bucket, true);
    else
        threads_radix_sort_bucket_range(b, bucket, false);
}

/* The sort behind both entry points; values and tmp_values are NULL for keys only. */
static void threads_radix_sort(int workers, uint64_t *keys, uint32_t *values, uint64_t *tmp,
                               uint32_t *tmp_values, size_t count, int key_bits,
                               void *hist_scratch) {
    if (count <= 1 || key_bits <= 0) return;
    if (key_bits > 64) key_bits = 64;
    uint64_t key_mask = key_bits == 64 ? ~(uint64_t)0 : ((uint64_t)1 << key_bits) - 1;
    if (count <= THREADS_RADIX_INSERTION_MAX) {
        if (values)
            threads_insertion_sort(keys, values, count, key_mask, true);
        else
            threads_insertion_sort(keys, NULL, count, key_mask, false);
        return;
    }
    assert(tmp && hist_scratch && (!values || tmp_values));
    workers = threads_clamp_workers(workers);
    size_t blocks = threads_radix_blocks(count);
    unsigned digit_bits = threads_radix_digit_bits(key_bits);
    size_t buckets = (size_t)1 << digit_bits;
    threads_radix_pass p = {
        .src = keys,
        .dst = tmp,
        .src_values = values,
        .dst_values = values ? tmp_values : NULL,
        .count = count,
        .blocks = blocks,
        .groups = (size_t)workers < blocks ? (size_t)workers : blocks,
        .hist = hist_scratch,
        /* Whole cache lines per row (given line-aligned scratch), so that neighbouring blocks
         * never share a counter line. */
        .row_stride = (buckets + 7) & ~(size_t)7,
    };
    if (count >= THREADS_RADIX_MSD_MIN && key_bits > 2 * THREADS_RADIX_MSD_BITS) {
        /* Top digit first, in parallel over blocks (stable), then each bucket on its own. */
        static_assert(THREADS_RADIX_MSD_BITS <= THREADS_RADIX_MAX_DIGIT_BITS, "digit too wide");
        threads_radix_buckets b = {
            .keys = keys, .tmp = tmp, .values = p.src_values, .tmp_values = p.dst_values};
        b.bits = (unsigned)key_bits - THREADS_RADIX_MSD_BITS;
        p.shift = b.bits;
        p.mask = ((uint64_t)1 << THREADS_RADIX_MSD_BITS) - 1;
        p.row_stride = ((size_t)(p.mask + 1) + 7) & ~(size_t)7;
        threads_for_chunks(workers, p.groups, threads_radix_count, &p);
        if (threads_radix_offsets(&p)) {
            /* Block 0's offsets are where each digit's run begins. */
            memcpy(b.start, p.hist, (size_t)(p.mask + 1) * sizeof(size_t));
            b.start[p.mask + 1] = count;
            threads_for_chunks(workers, p.groups, threads_radix_scatter, &p);
            threads_for_chunks(workers, (size_t)p.mask + 1, threads_radix_sort_bucket, &b);
            return;
        }
        /* Every key has the same top digit: the plain passes below skip it anyway. */
        p.row_stride = (buckets + 7) & ~(size_t)7;
    }
    for (unsigned shift = 0; shift < (unsigned)key_bits; shift += digit_bits) {
        unsigned bits =
            (unsigned)key_bits - shift < digit_bits ? (unsigned)key_bits - shift : digit_bits;
        p.shift = shift;
        p.mask = ((uint64_t)1 << bits) - 1;
        threads_for_chunks(workers, p.groups, threads_radix_count, &p);
        if (!threads_radix_offsets(&p)) continue;
        threads_for_chunks(workers, p.groups, threads_radix_scatter, &p);
        uint64_t *sorted = p.dst;
        p.dst = p.src;
        p.src = sorted;
        uint32_t *sorted_values = p.dst_values;
        p.dst_values = p.src_values;
        p.src_values = sorted_values;
    }
    if (p.src != keys) {
        /* An odd number of passes moved the keys: bring them home in parallel, since the copy
         * is as much memory traffic as a pass. */
        threads_copy c = {keys, tmp, values, tmp_values};
        threads_for_ranges(workers, count, (count + p.blocks - 1) / p.blocks, threads_copy_range,
                           &c);
    }
}

void threads_radix_sort_u64(int workers, uint64_t *keys, uint64_t *tmp, size_t count, int key_bits,
                            void *hist_scratch) {
    threads_radix_sort(workers, keys, NULL, tmp, NULL, count, key_bits, hist_scratch);
}

void threads_radix_sort_pairs(int workers, uint64_t *keys, uint32_t *values, uint64_t *tmp_keys,
                              uint32_t *tmp_values, size_t count, int key_bits,
                              void *hist_scratch) {
    assert(count <= 1 || values);
    threads_radix_sort(workers, keys, values, tmp_keys, tmp_values, count, key_bits, hist_scratch);
}

/* ---- mutex ------------------------------------------------------------------------------- */

_Static_assert(sizeof(pthread_mutex_t) <= sizeof(((threads_mutex *)0)->opaque),
               "threads_mutex has room for a pthread mutex");

void threads_mutex_init(threads_mutex *m) {
    pthread_mutex_init((pthread_mutex_t *)(void *)m->opaque, NULL);
}

void threads_mutex_destroy(threads_mutex *m) {
    pthread_mutex_destroy((pthread_mutex_t *)(void *)m->opaque);
}

void threads_mutex_lock(threads_mutex *m) {
    pthread_mutex_lock((pthread_mutex_t *)(void *)m->opaque);
}

void threads_mutex_unlock(threads_mutex *m) {
    pthread_mutex_unlock((pthread_mutex_t *)(void *)m->opaque);
}

/* Tests for threads/: parallel loops cover their work exactly once with worker indices in range,
 * task trees add up, per-worker scratch stays private and stops allocating, and the scan and the
 * radix sorts (keys alone, keys with values) match serial references and give identical results
 * for every worker count. */
#include "parallel.h"
#include "test.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>

static const int worker_counts[] = {1, 2, 3, 8};
enum { WORKER_COUNTS = sizeof worker_counts / sizeof worker_counts[0] };

/* splitmix64: a seeded generator so that a failing case can be replayed from its context. */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* ---- threads_for_chunks / threads_for_ranges --------------------------------------------- */

typedef struct chunk_record {
    int *visits;
    int *worker;
    int workers;
} chunk_record;

static void record_chunk(size_t chunk, int worker, void *ctx) {
    chunk_record *r = ctx;
    /* Each chunk owns its cell; a chunk handed out twice at once would show up under TSan too. */
    r->visits[chunk]++;
    r->worker[chunk] = worker;
}

TEST(for_chunks_visits_each_chunk_once) {
    static const size_t chunk_counts[] = {0, 1, 2, 7, 64, 1000};
    for (int w = 0; w < WORKER_COUNTS; w++) {
        for (size_t c = 0; c < sizeof chunk_counts / sizeof chunk_counts[0]; c++) {
            size_t n = chunk_counts[c];
            TEST_CONTEXT("workers=%d chunks=%zu", worker_counts[w], n);
            int *visits = calloc(n + 1, sizeof *visits);
            int *worker = calloc(n + 1, sizeof *worker);
            REQUIRE(visits && worker);
            chunk_record r = {visits, worker, worker_counts[w]};
            threads_for_chunks(worker_counts[w], n, record_chunk, &r);
            for (size_t i = 0; i < n; i++) {
                CHECK_EQ_INT(visits[i], 1);
                CHECK(worker[i] >= 0 && worker[i] < worker_counts[w]);
            }
            /* The static schedule: each chunk once, and a worker's share contiguous and the same
             * from call to call. */
            int *first = calloc(n + 1, sizeof *first);
            REQUIRE(first);
            for (int call = 0; call < 2; call++) {
                memset(visits, 0, (n + 1) * sizeof *visits);
                threads_for_chunks_static(worker_counts[w], n, record_chunk, &r);
                for (size_t i = 0; i < n; i++) {
                    CHECK_EQ_INT(visits[i], 1);
                    CHECK(worker[i] >= 0 && worker[i] < worker_counts[w]);
                    if (i > 0) CHECK(worker[i] >= worker[i - 1]);
                    if (call == 0) first[i] = worker[i];
                    if (call == 1) CHECK_EQ_INT(worker[i], first[i]);
                }
            }
            free(first);
            free(visits);
            free(worker);
        }
    }
}

typedef struct range_record {
    int *visits;
    size_t grain;
    int workers;
    atomic_int bad_range;
} range_record;

static void record_range(size_t begin, size_t end, int worker, void *ctx) {
    range_record *r = ctx;
    if (begin >= end || end - begin > r->grain || begin % r->grain != 0 || worker < 0 ||
        worker >= r->workers || worker != threads_worker_index())
        atomic_fetch_add(&r->bad_range, 1);
    for (size_t i = begin; i < end; i++) r->visits[i]++;
}

TEST(for_ranges_covers_range_exactly) {
    static const size_t cases[][2] = {
        /* count, grain */
        {0, 16}, {1, 16}, {5, 16}, {16, 16}, {17, 16}, {100, 7}, {1000, 1}, {4096, 256}, {10, 0},
    };
    for (int w = 0; w < WORKER_COUNTS; w++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            size_t count = cases[c][0], grain = cases[c][1];
            TEST_CONTEXT("workers=%d count=%zu grain=%zu", worker_counts[w], count, grain);
            int *visits = calloc(count + 1, sizeof *visits);
            REQUIRE(visits);
            /* grain 0 is documented to behave as 1. */
            range_record r = {visits, grain ? grain : 1, worker_counts[w], 0};
            threads_for_ranges(worker_counts[w], count, grain, record_range, &r);
            CHECK_EQ_INT(atomic_load(&r.bad_range), 0);
            for (size_t i = 0; i < count; i++) CHECK_EQ_INT(visits[i], 1);
            free(visits);
        }
    }
}

/* Chunk sizes: whole multiples of 64 within [smallest, largest], cut so that every worker has
 * about THREADS_CHUNKS_PER_WORKER chunks where the bounds allow (rounding to 64 may take a few
 * away), and covering the count. */
TEST(chunk_size_gives_each_worker_chunks) {
    /* The figures the trees' refits meet (engine: 4,096 to 16,384 slots per chunk). */
    CHECK_EQ_INT(threads_chunk_size(100000, 16, 4096, 16384), 4096);  /* 25 chunks, not 7 */
    CHECK_EQ_INT(threads_chunk_size(100000, 2, 4096, 16384), 12544);  /* 8 chunks */
    CHECK_EQ_INT(threads_chunk_size(1000000, 2, 4096, 16384), 16384); /* 62 chunks */
    CHECK_EQ_INT(threads_chunk_size(1000000, 64, 4096, 16384), 4096); /* 245 chunks */
    CHECK_EQ_INT(threads_chunk_size(10000, 2, 4096, 16384), 4096);
    CHECK_EQ_INT(threads_chunk_size(0, 4, 4096, 16384), 4096);
    CHECK_EQ_INT(threads_chunk_size(500, 1, 0, 1000), 128); /* 125 rounded up to 64s */
    CHECK_EQ_INT(threads_chunk_size(500, 1, 0, 0), 64);     /* bounds rounded up to 64s */
    CHECK_EQ_INT(threads_chunk_count(100000, 12544), 8);
    CHECK_EQ_INT(threads_chunk_count(0, 64), 0);
    CHECK_EQ_INT(threads_chunk_count(1, 0), 1);
    uint64_t state = 11;
    for (int i = 0; i < 2000; i++) {
        size_t count = (size_t)(next_random(&state) % 3000000);
        int workers = 1 + (int)(next_random(&state) % 64);
        size_t smallest = (size_t)(next_random(&state) % 9000);
        size_t largest = smallest + (size_t)(next_random(&state) % 40000);
        TEST_CONTEXT("count=%zu workers=%d smallest=%zu largest=%zu", count, workers, smallest,
                     largest);
        size_t size = threads_chunk_size(count, workers, smallest, largest);
        size_t low = smallest < 64 ? 64 : (smallest + 63) / 64 * 64;
        size_t high = (largest + 63) / 64 * 64;
        if (high < low) high = low;
        CHECK(size % 64 == 0);
        CHECK(size >= low && size <= high);
        size_t chunks = threads_chunk_count(count, size);
        CHECK(chunks * size >= count && (chunks == 0 || (chunks - 1) * size < count));
        /* Neither bound binding, the chunks come within a factor 2 of the count asked for. */
        size_t want = (size_t)workers * THREADS_CHUNKS_PER_WORKER;
        if (size > low && size < high && count >= 64 * want) {
            CHECK(chunks <= want);
            CHECK(2 * chunks >= want);
        }
    }
}

typedef struct nested_record {
    int inner_visits[16][8];
    int inner_worker_mismatch[16];
    int outer_workers;
} nested_record;

typedef struct nested_inner {
    nested_record *r;
    size_t outer;
    int outer_worker;
    bool outer_parallel;
} nested_inner;

static void nested_inner_chunk(size_t chunk, int worker, void *ctx) {
    nested_inner *in = ctx;
    in->r->inner_visits[in->outer][chunk]++;
    /* Nested inside a parallel loop, the inner loop must stay on the calling worker so that its
     * per-worker scratch stays private; a serial outer loop leaves the inner one free to fork. */
    bool ok = in->outer_parallel ? worker == in->outer_worker : worker >= 0 && worker < 4;
    if (!ok) in->r->inner_worker_mismatch[in->outer]++;
}

static void nested_outer_chunk(size_t chunk, int worker, void *ctx) {
    nested_record *r = ctx;
    nested_inner in = {r, chunk, worker, r->outer_workers > 1};
    threads_for_chunks(4, 8, nested_inner_chunk, &in);
}

TEST(for_chunks_nested_runs_on_caller) {
    for (int w = 0; w < WORKER_COUNTS; w++) {
        TEST_CONTEXT("workers=%d", worker_counts[w]);
        nested_record r = {.outer_workers = worker_counts[w]};
        threads_for_chunks(worker_counts[w], 16, nested_outer_chunk, &r);
        for (int i = 0; i < 16; i++) {
            CHECK_EQ_INT(r.inner_worker_mismatch[i], 0);
            for (int j = 0; j < 8; j++) CHECK_EQ_INT(r.inner_visits[i][j], 1);
        }
    }
}

TEST(worker_index_and_resolve) {
    CHECK_EQ_INT(threads_worker_index(), 0);
    int hw = threads_hardware_count();
    CHECK(hw >= 1 && hw <= 1024);
    CHECK_EQ_INT(threads_resolve(0), hw);
    CHECK_EQ_INT(threads_resolve(3), 3);
    CHECK_EQ_INT(threads_resolve(-5), 1);
    CHECK_EQ_INT(threads_resolve(1 << 20), 1024);
}

/* ---- sharing the machine --------------------------------------------------------------------- */

typedef struct team_record {
    atomic_int most_worker; /* the highest worker index seen */
    atomic_int visits;
} team_record;

static void team_chunk(size_t chunk, int worker, void *ctx) {
    (void)chunk;
    team_record *r = ctx;
    int seen = atomic_load(&r->most_worker);
    while (worker > seen && !atomic_compare_exchange_weak(&r->most_worker, &seen, worker)) {
    }
    atomic_fetch_add(&r->visits, 1);
}

#if THREADS_TEST_OPENMP
static void team_slow_chunk(size_t chunk, int worker, void *ctx) {
    volatile unsigned spin = 0;
    for (unsigned i = 0; i < 20000; i++) spin = spin + i;
    team_chunk(chunk, worker, ctx);
}
#endif

static void team_task(void *ctx, int worker) {
    team_chunk(0, worker, ctx);
}

/* The calling thread's limit caps every parallel call's threads (worker indices below it), the
 * chunks are all still visited, and lifting it gives the calls their workers back. */
TEST(team_limit_caps_the_threads) {
    for (int limit = 1; limit <= 3; limit++) {
        TEST_CONTEXT("limit %d", limit);
        threads_set_team_limit(limit);
        team_record r = {0};
        threads_for_chunks(4, 64, team_chunk, &r);
        CHECK(atomic_load(&r.most_worker) < limit);
        CHECK_EQ_INT(atomic_load(&r.visits), 64);
        team_record t = {0};
        threads_run_tasks(4, team_task, &t);
        CHECK(atomic_load(&t.most_worker) < limit);
        CHECK_EQ_INT(atomic_load(&t.visits), 1);
    }
    threads_set_team_limit(0);
    (void)threads_take_stalled_ms();
    CHECK(threads_take_stalled_ms() == 0.0); /* a take resets the count */
#if THREADS_TEST_OPENMP
    /* Without a limit, a call with many chunks uses more than one thread: chunks that each take
     * a while are spread, so the most worker index seen passes 0 (tried until it does: 20 tries
     * once all went to one thread under ctest -j2, the other core busy with another test). */
    bool spread = false;
    for (int attempt = 0; attempt < 200 && !spread; attempt++) {
        team_record r = {0};
        threads_for_chunks(2, 256, team_slow_chunk, &r);
        spread = atomic_load(&r.most_worker) > 0;
    }
    CHECK(spread);
#endif
}

/* The machine's idle time reads on Linux and never goes back. */
TEST(idle_core_time_reads) {
    double a = threads_idle_core_ms();
#if defined(__linux__)
    CHECK(a >= 0.0);
    double b = threads_idle_core_ms();
    CHECK(b >= a);
#else
    CHECK(a == -1.0);
#endif
}

/* ---- tasks --------------------------------------------------------------------------------- */

typedef struct sum_task {
    const uint64_t *values;
    size_t count;
    uint64_t sum;
    int workers;
    atomic_int *bad_worker;
} sum_task;

static void sum_task_run(void *ctx, int worker) {
    sum_task *t = ctx;
    if (worker < 0 || worker >= t->workers || worker != threads_worker_index())
        atomic_fetch_add(t->bad_worker, 1);
    if (t->count <= 64) {
        uint64_t sum = 0;
        for (size_t i = 0; i < t->count; i++) sum += t->values[i];
        t->sum = sum;
        return;
    }
    /* Uneven halves so that the tree is not perfectly balanced and stealing matters. */
    size_t left = t->count / 3 + 1;
    sum_task child[2] = {
        {t->values, left, 0, t->workers, t->bad_worker},
        {t->values + left, t->count - left, 0, t->workers, t->bad_worker},
    };
    threads_spawn(sum_task_run, &child[0]);
    threads_spawn(sum_task_run, &child[1]);
    threads_wait_children();
    t->sum = child[0].sum + child[1].sum;
}

TEST(tasks_recursive_sum_matches_serial) {
    enum { N = 100000 };
    uint64_t *values = malloc(N * sizeof *values);
    REQUIRE(values);
    uint64_t state = 42, expect = 0;
    for (size_t i = 0; i < N; i++) expect += values[i] = next_random(&state) >> 20;
    for (int w = 0; w < WORKER_COUNTS; w++) {
        TEST_CONTEXT("workers=%d seed=42", worker_counts[w]);
        atomic_int bad_worker = 0;
        sum_task root = {values, N, 0, worker_counts[w], &bad_worker};
        threads_run_tasks(worker_counts[w], sum_task_run, &root);
        CHECK(root.sum == expect);
        CHECK_EQ_INT(atomic_load(&bad_worker), 0);
    }
    /* Outside threads_run_tasks, spawn runs the task before returning (or at the wait). */
    atomic_int bad_worker = 0;
    sum_task alone = {values, 1000, 0, 1, &bad_worker};
    uint64_t expect_alone = 0;
    for (size_t i = 0; i < 1000; i++) expect_alone += values[i];
    threads_spawn(sum_task_run, &alone);
    threads_wait_children();
    CHECK(alone.sum == expect_alone);
    free(values);
}

/* One thread spawns thousands of small tasks while the others run them. libomp then recycles a
 * task's descriptor, freed by the worker that ran it, into the spawner's next task: under
 * ThreadSanitizer that reported a race on every run until threads_spawn read its copies
 * uninstrumented (NOTES row 120). Each task owns one slot, to be filled once. */
typedef struct {
    uint32_t *slots;
    uint32_t index;
} bulk_task;

static void bulk_task_run(void *ctx, int worker) {
    (void)worker;
    bulk_task *t = ctx;
    t->slots[t->index] += t->index + 1;
}

typedef struct {
    bulk_task *tasks;
    uint32_t count;
} bulk_root;

static void bulk_root_run(void *ctx, int worker) {
    (void)worker;
    bulk_root *r = ctx;
    for (uint32_t i = 0; i < r->count; i++) {
        threads_spawn(bulk_task_run, &r->tasks[i]);
        if (i % 64 == 63) threads_wait_children();
    }
    threads_wait_children();
}

TEST(tasks_spawned_in_bulk_from_one_thread) {
    enum { N = 20000 };
    uint32_t *slots = malloc(N * sizeof *slots);
    bulk_task *tasks = malloc(N * sizeof *tasks);
    REQUIRE(slots && tasks);
    for (int w = 0; w < WORKER_COUNTS; w++) {
        TEST_CONTEXT("workers=%d", worker_counts[w]);
        memset(slots, 0, N * sizeof *slots);
        for (uint32_t i = 0; i < N; i++) tasks[i] = (bulk_task){slots, i};
        bulk_root root = {tasks, N};
        threads_run_tasks(worker_counts[w], bulk_root_run, &root);
        uint32_t wrong = 0;
        for (uint32_t i = 0; i < N; i++) wrong += slots[i] != i + 1;
        CHECK_EQ_INT((int)wrong, 0);
    }
    free(tasks);
    free(slots);
}

/* ---- scratch ------------------------------------------------------------------------------- */

TEST(scratch_slots_distinct_aligned_and_kept_on_growth) {
    threads_scratch s = {0};
    REQUIRE(threads_scratch_reserve(&s, 4));
    CHECK_EQ_INT(s.count, 4);
    unsigned char *p[4];
    for (int w = 0; w < 4; w++) {
        p[w] = threads_scratch_get(&s, w, 100 + (size_t)w);
        REQUIRE(p[w]);
        CHECK_EQ_INT((uintptr_t)p[w] % 64, 0);
        memset(p[w], 0x10 + w, 100 + (size_t)w);
    }
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++) CHECK(p[a] != p[b]);
    /* Growing more slots keeps the old ones, and growing a buffer keeps its contents. */
    REQUIRE(threads_scratch_reserve(&s, 6));
    CHECK_EQ_INT(s.count, 6);
    for (int w = 0; w < 4; w++) {
        unsigned char *q = threads_scratch_get(&s, w, 100000);
        REQUIRE(q);
        CHECK_EQ_INT((uintptr_t)q % 64, 0);
        for (size_t i = 0; i < 100 + (size_t)w; i++) CHECK_EQ_INT(q[i], 0x10 + w);
    }
    CHECK(threads_scratch_bytes(&s) >= 4 * (size_t)100000);
    /* A smaller request reuses the grown buffer. */
    unsigned char *again = threads_scratch_get(&s, 1, 10);
    CHECK(again == threads_scratch_get(&s, 1, 100000));
    CHECK(threads_scratch_get(&s, 5, 0) != NULL);
    threads_scratch_free(&s);
    CHECK_EQ_INT(s.count, 0);
    CHECK(s.slot == NULL);
}

enum { SCRATCH_PEAK_BYTES = 1000 + 20 * 997 + 4 * 311 };

typedef struct scratch_frame {
    threads_scratch *s;
    size_t frame;
    atomic_int failures;
} scratch_frame;

static void scratch_frame_chunk(size_t chunk, int worker, void *ctx) {
    scratch_frame *f = ctx;
    /* Demand rises over the first frames and then levels off, as a simulation's does. */
    size_t level = f->frame < 20 ? f->frame : 20;
    size_t bytes = 1000 + level * 997 + (chunk % 5) * 311;
    assert(bytes <= SCRATCH_PEAK_BYTES);
    unsigned char *p = threads_scratch_get(f->s, worker, bytes);
    if (!p || (uintptr_t)p % 64 != 0) {
        atomic_fetch_add(&f->failures, 1);
        return;
    }
    memset(p, (int)chunk, bytes);
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != (unsigned char)chunk) {
            atomic_fetch_add(&f->failures, 1);
            return;
        }
}

TEST(scratch_stops_allocating_in_steady_state) {
    for (int w = 0; w < WORKER_COUNTS; w++) {
        int workers = worker_counts[w];
        TEST_CONTEXT("workers=%d", workers);
        threads_scratch s = {0};
        REQUIRE(threads_scratch_reserve(&s, workers));
        scratch_frame f = {&s, 0, 0};
        uint64_t allocations_at_20 = 0;
        for (f.frame = 0; f.frame < 40; f.frame++) {
            REQUIRE(threads_scratch_reserve(&s, workers));
            threads_for_chunks(workers, 50, scratch_frame_chunk, &f);
            if (f.frame == 20) {
                /* Chunks are claimed dynamically, so a worker may not have met the peak demand
                 * yet; presizing every slot, as the engine does, makes the steady state exact. */
                for (int i = 0; i < workers; i++)
                    REQUIRE(threads_scratch_get(&s, i, SCRATCH_PEAK_BYTES));
                allocations_at_20 = threads_scratch_allocations(&s);
            }
        }
        CHECK_EQ_INT(atomic_load(&f.failures), 0);
        CHECK(threads_scratch_allocations(&s) == allocations_at_20);
        /* Geometric growth: a few allocations per slot, not one per frame of rising demand. */
        CHECK(threads_scratch_allocations(&s) <= 1 + 12 * (uint64_t)workers);
        threads_scratch_free(&s);
    }
}

/* ---- exclusive scan ------------------------------------------------------------------------ */

TEST(exclusive_scan_matches_serial) {
    static const size_t sizes[] = {0, 1, 1000, 65535, 65536, 200000};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        size_t n = sizes[c];
        size_t *input = malloc((n + 1) * sizeof *input);
        size_t *expect = malloc((n + 1) * sizeof *expect);
        size_t *values = malloc((n + 1) * sizeof *values);
        REQUIRE(input && expect && values);
        uint64_t state = 7 + n;
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            input[i] = (size_t)(next_random(&state) % 1000);
            expect[i] = total;
            total += input[i];
        }
        for (int workers = 1; workers <= 8; workers++) {
            TEST_CONTEXT("n=%zu workers=%d seed=%zu", n, workers, 7 + n);
            memcpy(values, input, n * sizeof *values);
            values[n] = 12345; /* guard: the scan must not write past count */
            CHECK(threads_exclusive_scan(workers, values, n) == total);
            CHECK(memcmp(values, expect, n * sizeof *values) == 0);
            CHECK(values[n] == 12345);
        }
        free(input);
        free(expect);
        free(values);
    }
}

/* ---- radix sort ---------------------------------------------------------------------------- */

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

enum key_pattern { KEYS_RANDOM, KEYS_FEW_DISTINCT, KEYS_SORTED, KEYS_REVERSED, KEYS_ONE_DIGIT };
static const char *const pattern_names[] = {"random", "few_distinct", "sorted", "reversed",
                                            "one_digit"};

static uint64_t key_mask(int key_bits) {
    return key_bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << key_bits) - 1;
}

static void make_keys(uint64_t *keys, size_t n, int key_bits, enum key_pattern pattern,
                      uint64_t seed) {
    uint64_t state = seed, mask = key_mask(key_bits);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(&state);
        switch (pattern) {
        case KEYS_RANDOM:
            keys[i] = r & mask;
            break;
        case KEYS_FEW_DISTINCT:
            keys[i] = (r % 5) * (mask / 4) & mask;
            break;
        case KEYS_SORTED:
            keys[i] = (uint64_t)i & mask;
            break;
        case KEYS_REVERSED:
            keys[i] = (uint64_t)(n - i) & mask;
            break;
        /* Only the top digit varies: the lower passes are skipped, which can leave an odd
         * number of moving passes and the keys in tmp before the copy back. */
        case KEYS_ONE_DIGIT:
            keys[i] = (r << (key_bits > 6 ? key_bits - 6 : 0)) & mask;
            break;
        }
    }
}

/* Sorts a copy of keys with the given workers and compares it with `expect`; the histogram
 * scratch and tmp carry guard words past their ends, which must stay untouched. */
static void check_radix_sort(const uint64_t *keys, const uint64_t *expect, size_t n, int key_bits,
                             int workers) {
    size_t scratch_words = threads_radix_scratch_size(workers) / sizeof(uint64_t);
    uint64_t *scratch = malloc((scratch_words + 4) * sizeof *scratch);
    uint64_t *work = malloc((n + 4) * sizeof *work);
    uint64_t *tmp = malloc((n + 4) * sizeof *tmp);
    if (scratch && work && tmp) {
        const uint64_t guard = 0xdeadbeefcafef00du;
        for (int g = 0; g < 4; g++) scratch[scratch_words + g] = work[n + g] = tmp[n + g] = guard;
        memcpy(work, keys, n * sizeof *work);
        threads_radix_sort_u64(workers, work, tmp, n, key_bits, scratch);
        CHECK(memcmp(work, expect, n * sizeof *work) == 0);
        for (int g = 0; g < 4; g++) {
            CHECK(scratch[scratch_words + g] == guard);
            CHECK(work[n + g] == guard);
            CHECK(tmp[n + g] == guard);
        }
    } else {
        CHECK(!"out of memory");
    }
    free(scratch);
    free(work);
    free(tmp);
}

TEST(radix_sort_matches_qsort) {
    static const int key_bits[] = {1, 8, 11, 12, 20, 33, 40, 63, 64};
    static const size_t counts[] = {0, 1, 2, 31, 33, 2047, 2048, 300000};
    for (size_t k = 0; k < sizeof key_bits / sizeof key_bits[0]; k++) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t n = counts[c];
            uint64_t *keys = malloc((n + 1) * sizeof *keys);
            uint64_t *expect = malloc((n + 1) * sizeof *expect);
            REQUIRE(keys && expect);
            for (int pattern = KEYS_RANDOM; pattern <= KEYS_ONE_DIGIT; pattern++) {
                uint64_t seed = 1000 * k + 10 * c + (uint64_t)pattern;
                make_keys(keys, n, key_bits[k], pattern, seed);
                memcpy(expect, keys, n * sizeof *expect);
                qsort(expect, n, sizeof *expect, compare_u64);
                /* The big case is slow under TSan: one worker count besides serial suffices. */
                for (int workers = 1; workers <= 3; workers += n > 10000 ? 2 : 1) {
                    TEST_CONTEXT("key_bits=%d n=%zu pattern=%s workers=%d seed=%llu", key_bits[k],
                                 n, pattern_names[pattern], workers, (unsigned long long)seed);
                    check_radix_sort(keys, expect, n, key_bits[k], workers);
                }
            }
            free(keys);
            free(expect);
        }
    }
}

/* The sort's output is fully determined by its input, so matching qsort for every worker count
 * already implies identical results; this runs the full sweep of counts on larger inputs, up to
 * one that reaches the cap on the block count. */
TEST(radix_sort_identical_across_workers) {
    static const struct {
        size_t n;
        int key_bits;
        int worker_step;
    } cases[] = {{300000, 20, 1}, {300000, 40, 1}, {300000, 64, 1}, {1100000, 40, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = cases[c].n;
        uint64_t *keys = malloc(n * sizeof *keys);
        uint64_t *expect = malloc(n * sizeof *expect);
        REQUIRE(keys && expect);
        make_keys(keys, n, cases[c].key_bits, KEYS_RANDOM, 99 + c);
        memcpy(expect, keys, n * sizeof *expect);
        qsort(expect, n, sizeof *expect, compare_u64);
        for (int workers = 1; workers <= 8; workers += cases[c].worker_step) {
            TEST_CONTEXT("key_bits=%d n=%zu workers=%d seed=%zu", cases[c].key_bits, n, workers,
                         99 + c);
            check_radix_sort(keys, expect, n, cases[c].key_bits, workers);
        }
        free(keys);
        free(expect);
    }
}

/* ---- radix sort of pairs ------------------------------------------------------------------- */

typedef struct key_index {
    uint64_t key;
    uint32_t index;
} key_index;

/* The reference for a stable sort: by key, then by input position. */
static int compare_key_index(const void *a, const void *b) {
    const key_index *x = a, *y = b;
    if (x->key != y->key) return (x->key > y->key) - (x->key < y->key);
    return (x->index > y->index) - (x->index < y->index);
}

enum pair_pattern { PAIRS_RANDOM, PAIRS_ONE_BUCKET, PAIRS_MOSTLY_ONE_BUCKET };
static const char *const pair_pattern_names[] = {"random", "one_bucket", "mostly_one_bucket"};

/* Keys drawn from a pool of about n / 4 distinct keys, so that most keys repeat and stability
 * shows; one_bucket gives every key the same top 8 bits (the top-digit pass finds nothing to
 * split), mostly_one_bucket sends 1 key in 64 to another bucket, leaving many tiny buckets. */
static void make_pair_keys(uint64_t *keys, size_t n, int key_bits, enum pair_pattern pattern,
                           uint64_t seed) {
    uint64_t state = seed, mask = key_mask(key_bits);
    uint64_t pool = n / 4 + 1;
    int low_bits = key_bits > 8 ? key_bits - 8 : 0;
    uint64_t top = (uint64_t)0x5a & key_mask(key_bits - low_bits);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(&state);
        uint64_t pick = 0x51ed270b0e23b5a1u * (r % pool + seed);
        uint64_t key = next_random(&pick) & mask;
        bool other = pattern == PAIRS_MOSTLY_ONE_BUCKET && (r >> 58) == 0;
        if (pattern != PAIRS_RANDOM && !other) key = (top << low_bits) | (key & key_mask(low_bits));
        keys[i] = key;
    }
}

/* Sorts copies of keys and their indices with the given workers and compares them with the
 * stable reference; every buffer carries guard words past its end, which must stay untouched. */
static void check_radix_sort_pairs(const uint64_t *keys, const key_index *expect, size_t n,
                                   int key_bits, int workers) {
    size_t scratch_words = threads_radix_scratch_size(workers) / sizeof(uint64_t);
    uint64_t *scratch = malloc((scratch_words + 4) * sizeof *scratch);
    uint64_t *work = malloc((n + 4) * sizeof *work);
    uint64_t *tmp = malloc((n + 4) * sizeof *tmp);
    uint32_t *values = malloc((n + 4) * sizeof *values);
    uint32_t *tmp_values = malloc((n + 4) * sizeof *tmp_values);
    if (scratch && work && tmp && values && tmp_values) {
        const uint64_t guard = 0xdeadbeefcafef00du;
        const uint32_t guard_value = 0xfeedf00du;
        for (int g = 0; g < 4; g++) {
            scratch[scratch_words + g] = work[n + g] = tmp[n + g] = guard;
            values[n + g] = tmp_values[n + g] = guard_value;
        }
        memcpy(work, keys, n * sizeof *work);
        for (size_t i = 0; i < n; i++) values[i] = (uint32_t)i;
        threads_radix_sort_pairs(workers, work, values, tmp, tmp_values, n, key_bits, scratch);
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (work[i] != expect[i].key || values[i] != expect[i].index) bad = i;
        CHECK(bad == n);
        if (bad != n)
            fprintf(stderr, "  first mismatch at %zu: got (%llu, %u) expected (%llu, %u)\n", bad,
                    (unsigned long long)work[bad], values[bad], (unsigned long long)expect[bad].key,
                    expect[bad].index);
        for (int g = 0; g < 4; g++) {
            CHECK(scratch[scratch_words + g] == guard);
            CHECK(work[n + g] == guard);
            CHECK(tmp[n + g] == guard);
            CHECK(values[n + g] == guard_value);
            CHECK(tmp_values[n + g] == guard_value);
        }
    } else {
        CHECK(!"out of memory");
    }
    free(scratch);
    free(work);
    free(tmp);
    free(values);
    free(tmp_values);
}

/* Builds the keys and the reference for one case and checks every worker count against it. */
static void check_radix_sort_pairs_case(size_t n, int key_bits, enum pair_pattern pattern,
                                        uint64_t seed) {
    uint64_t *keys = malloc((n + 1) * sizeof *keys);
    key_index *expect = malloc((n + 1) * sizeof *expect);
    if (!keys || !expect) {
        CHECK(!"out of memory");
        free(keys);
        free(expect);
        return;
    }
    make_pair_keys(keys, n, key_bits, pattern, seed);
    for (size_t i = 0; i < n; i++) expect[i] = (key_index){keys[i], (uint32_t)i};
    qsort(expect, n, sizeof *expect, compare_key_index);
    for (int w = 0; w < WORKER_COUNTS; w++) {
        TEST_CONTEXT("key_bits=%d n=%zu pattern=%s workers=%d seed=%llu", key_bits, n,
                     pair_pattern_names[pattern], worker_counts[w], (unsigned long long)seed);
        check_radix_sort_pairs(keys, expect, n, key_bits, worker_counts[w]);
    }
    free(keys);
    free(expect);
}

TEST(radix_sort_pairs_stable_matches_reference) {
    static const int key_bits[] = {10, 40, 64};
    static const size_t counts[] = {0, 1, 2, 31, 33, 100, 2048, 70000};
    for (size_t k = 0; k < sizeof key_bits / sizeof key_bits[0]; k++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (int pattern = PAIRS_RANDOM; pattern <= PAIRS_MOSTLY_ONE_BUCKET; pattern++)
                check_radix_sort_pairs_case(counts[c], key_bits[k], pattern,
                                            2000 + 100 * k + 10 * c + (uint64_t)pattern);
}

/* Large inputs: a million keys (the block count at its cap) and 300000 keys that all share the
 * top digit, so that the parallel passes do the work instead of the per-bucket sorts. */
TEST(radix_sort_pairs_large) {
    static const int key_bits[] = {10, 40, 64};
    for (size_t k = 0; k < sizeof key_bits / sizeof key_bits[0]; k++) {
        check_radix_sort_pairs_case((size_t)1 << 20, key_bits[k], PAIRS_RANDOM, 3000 + k);
        check_radix_sort_pairs_case(300000, key_bits[k], PAIRS_ONE_BUCKET, 3100 + k);
    }
}

TEST_MAIN()

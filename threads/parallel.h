/* The only code that uses OpenMP: parallel loops over fixed chunks with a worker index, task
 * groups for recursive work, per-worker scratch, prefix sums and a parallel radix sort. Built
 * without OpenMP, every call runs serially on worker 0 with the same results. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Hardware threads available to this process (>= 1). */
int threads_hardware_count(void);
/* The worker count a config value asks for: 0 means all hardware threads; clamps to >= 1. */
int threads_resolve(int requested);

/* Calls fn(chunk, worker, ctx) once for every chunk in [0, chunk_count), spread over at most
 * `workers` threads, chunks claimed dynamically. worker is in [0, workers). Chunks are the unit
 * of determinism: the caller cuts work into chunks that do not depend on the worker count and
 * writes each chunk's results to a place owned by that chunk. */
typedef void threads_chunk_fn(size_t chunk, int worker, void *ctx);
void threads_for_chunks(int workers, size_t chunk_count, threads_chunk_fn *fn, void *ctx);
/* The same for chunks of equal cost: worker w takes the w-th contiguous share of them, the same
 * share at every call, so that passes over the same data keep it in the same core's cache. */
void threads_for_chunks_static(int workers, size_t chunk_count, threads_chunk_fn *fn, void *ctx);

/* Calls fn(begin, end, worker, ctx) over [0, count) cut into ranges of `grain` items (the last
 * may be shorter), claimed dynamically. */
typedef void threads_range_fn(size_t begin, size_t end, int worker, void *ctx);
void threads_for_ranges(int workers, size_t count, size_t grain, threads_range_fn *fn, void *ctx);

/* Items per chunk for a pass over `count` items on `workers` threads: `largest`, cut so that
 * every worker has THREADS_CHUNKS_PER_WORKER chunks to balance, but never below `smallest`
 * (a chunk must stay worth claiming). Both bounds and the result are rounded up to whole
 * multiples of 64 items, so that chunks of 4-byte and 8-byte columns begin on cache lines. A pass
 * cut this way must give the same result for any chunk size: the thread count may change the time,
 * never the answer. */
enum { THREADS_CHUNKS_PER_WORKER = 4 };
size_t threads_chunk_size(size_t count, int workers, size_t smallest, size_t largest);
/* The chunks of `size` items that cover `count` items (0 for none). */
size_t threads_chunk_count(size_t count, size_t size);

/* Task groups for recursive work. threads_run_tasks starts `workers` threads and runs
 * root(ctx, worker) once on one of them; inside it (and inside tasks) threads_spawn queues
 * fn(ctx, worker) to run on any worker and threads_wait_children waits for the tasks spawned so
 * far by the current task. ctx must stay valid until the wait. */
typedef void threads_task_fn(void *ctx, int worker);
void threads_run_tasks(int workers, threads_task_fn *root, void *ctx);
void threads_spawn(threads_task_fn *fn, void *ctx);
void threads_wait_children(void);
/* The calling worker's index inside threads_for_* / threads_run_tasks; 0 outside. */
int threads_worker_index(void);

/* ---- sharing the machine ---------------------------------------------------------------------
 * Other work may take cores from the workers (other processes, the host's threads). A worker
 * that the scheduler takes off its core in the middle of a parallel call holds up the whole call
 * until it runs again, however little work it had left. These calls let a caller see that and
 * run its next calls on fewer threads; the chunks stay the same, so the results do too. */

/* At most `limit` threads (0: no limit) for the parallel calls made from the calling thread,
 * whatever `workers` they are given; worker indices stay below both. */
void threads_set_team_limit(int limit);
/* The calling thread's limit now (0: none): what the last threads_set_team_limit set, or lower
 * where a held-up call lowered it since (threads_shrink_after_calls). */
int threads_team_limit_now(void);
/* The time the parallel calls made from the calling thread were held up by a thread that the
 * scheduler had taken off its core while it worked, or that started the call more than half a
 * millisecond late because it waited for a core (for each call, the longest such time of its
 * threads; a thread asleep waiting for work is not held up), since the last take, in
 * milliseconds; the count starts again at 0. Only the late starts where the system does not say
 * more (outside Linux); 0 without OpenMP. */
double threads_take_stalled_ms(void);
/* Within a limit set above one (a step's team), each call from the second since the limit was set
 * that is held up for a millisecond or more and for half its time or more lowers the limit at
 * once for the calls after it (one thread fewer, a quarter fewer from 8 on): a step that meets
 * other work mid-way runs its remaining calls on the threads it gets, rather than waiting at each
 * for a thread taken off its core (time slices are milliseconds); one such call alone is taken for
 * a passing stall. The caller sets the limit again for its next step. For tests: the calling
 * thread's `calls`-th parallel call from now lowers the limit so (0: none). */
void threads_shrink_after_calls(int calls);
/* The calls still to come before that one, counting those that ran on the calling thread alone
 * (0: it came, or none was asked for). */
int threads_shrink_pending(void);
/* The time the machine's cores have spent idle since boot, summed over the cores, in
 * milliseconds (to the scheduler's clock tick), or -1 where the system does not say. Two
 * readings apart say how many cores stood idle in between. */
double threads_idle_core_ms(void);

/* Where memory comes from: alloc(ctx, bytes) gives `bytes` bytes 64-byte aligned, or NULL on out
 * of memory, and may be called from several workers at once; free(ctx, p, bytes) gives back what
 * alloc gave (p may be NULL). All NULL: the C library's aligned_alloc and free. */
typedef struct threads_allocator {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p, size_t bytes);
    void *ctx;
} threads_allocator;

/* Per-worker scratch memory, each slot 64-byte aligned on its own cache lines, grown on demand
 * and kept, so that steady-state work allocates nothing. */
typedef struct threads_scratch {
    struct threads_scratch_slot *slot; /* one per worker, each on its own cache lines */
    int count;
    threads_allocator allocator; /* set before first use, or left zero */
} threads_scratch;               /* zero-initialise before first use */

/* Makes room for `workers` slots (existing slots are kept). Not thread-safe: call outside
 * parallel regions. Returns false on out of memory. */
bool threads_scratch_reserve(threads_scratch *s, int workers);
/* Returns worker's slot with at least `bytes` bytes (contents kept when it grows), or NULL on
 * out of memory. Safe to call from the worker that owns the slot, in parallel with others. */
void *threads_scratch_get(threads_scratch *s, int worker, size_t bytes);
void threads_scratch_free(threads_scratch *s);
/* Heap allocations made and bytes held by all slots so far (call outside parallel regions). */
uint64_t threads_scratch_allocations(const threads_scratch *s);
size_t threads_scratch_bytes(const threads_scratch *s);

/* Exclusive prefix sum in place: values[i] becomes the sum of the old values[0..i); returns the
 * total. Parallel above a size cutoff; the result does not depend on `workers`. */
size_t threads_exclusive_scan(int workers, size_t *values, size_t count);

/* Stable LSD radix sort of 64-bit keys, ascending, using the low `key_bits` bits (bits above are
 * zero). tmp has room for count keys. The sorted keys end in keys. Parallel over `workers`
 * threads, result identical for every worker count. hist_scratch must have room for
 * threads_radix_scratch_size(workers) bytes. */
size_t threads_radix_scratch_size(int workers);
void threads_radix_sort_u64(int workers, uint64_t *keys, uint64_t *tmp, size_t count, int key_bits,
                            void *hist_scratch);
/* As threads_radix_sort_u64, and values[i] travels with keys[i] (stable: equal keys keep their
 * input order). tmp_values has room for count values. The same hist_scratch size serves. */
void threads_radix_sort_pairs(int workers, uint64_t *keys, uint32_t *values, uint64_t *tmp_keys,
                              uint32_t *tmp_values, size_t count, int key_bits, void *hist_scratch);

/* A mutex for the rare serial section that several callers' threads may reach at once (the
 * queries' lazy catch-up), with storage inside the owner so that it allocates nothing. Any
 * thread may lock it, OpenMP worker or not. */
typedef struct threads_mutex {
    _Alignas(16) unsigned char opaque[64];
} threads_mutex;
void threads_mutex_init(threads_mutex *m);
void threads_mutex_destroy(threads_mutex *m);
void threads_mutex_lock(threads_mutex *m);
void threads_mutex_unlock(threads_mutex *m);

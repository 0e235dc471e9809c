/* Counted, aligned heap memory: every allocation a world makes goes through its heap, which
 * knows the bytes it holds and the allocations it made (broadphase_stats). Modules that only
 * need memory take a heap, not the world. Safe to call from several threads at once (the
 * counters are atomic): the workers' scratch and the queries, which may run side by side,
 * allocate through it too. */
#pragma once

#include "broadphase.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct heap {
    size_t bytes;                   /* held now */
    uint64_t allocations;           /* made so far */
    broadphase_allocator allocator; /* the user's (broadphase_config.allocator), or all NULL */
} heap;

/* At least `bytes` bytes, 64-byte aligned (2 MiB aligned and rounded up, with transparent huge
 * pages asked for, from 1 MiB up; faulted in whole when made from 64 KiB up to 2 MiB); NULL on
 * out of memory. */
void *heap_alloc(heap *h, size_t bytes);
/* Gives back p (NULL is fine), allocated with `bytes` bytes. */
void heap_free(heap *h, void *p, size_t bytes);
/* The figures, read atomically. */
typedef struct heap_figures {
    size_t bytes;
    uint64_t allocations;
} heap_figures;
heap_figures heap_read(const heap *h);

/* heap_alloc and heap_free with the heap as a void pointer, for allocator hooks
 * (threads_allocator). */
void *heap_alloc_for(void *h, size_t bytes);
void heap_free_for(void *h, void *p, size_t bytes);

/* Grows *p (holding *capacity elements of `size` bytes, of which `keep` are live) to at least
 * `need` elements, geometrically; contents up to `keep` preserved. False on out of memory, with
 * *p and *capacity unchanged. */
bool heap_grow(heap *h, void **p, size_t *capacity, size_t need, size_t size, size_t keep);

/* Arrays that share one capacity (count of them, at most 8; sizes[i] the bytes of an element of
 * *arrays[i]): all grown as heap_grow grows one, their first `keep` elements kept, or none
 * touched (false on out of memory), so that *capacity stays the size of every one of them (their
 * frees pass it). */
bool heap_grow_together(heap *h, void **const *arrays, const size_t *sizes, size_t count,
                        size_t *capacity, size_t need, size_t keep);

/* A typed growable array: `HEAP_ARRAY(float) xs;` then heap_array_reserve(h, &xs, n, keep)
 * and heap_array_release(h, &xs). The capacity travels with the pointer, so that two buffers
 * never share one capacity field. */
#define HEAP_ARRAY(T)                                                                              \
    struct {                                                                                       \
        T *data;                                                                                   \
        size_t capacity;                                                                           \
    }
#define heap_array_reserve(h, a, need, keep)                                                       \
    heap_grow((h), (void **)&(a)->data, &(a)->capacity, (need), sizeof *(a)->data, (keep))
#define heap_array_release(h, a)                                                                   \
    (heap_free((h), (a)->data, (a)->capacity * sizeof *(a)->data), (a)->data = NULL,               \
     (a)->capacity = 0)

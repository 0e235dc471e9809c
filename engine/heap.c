/* The heap: aligned allocation counted in bytes and calls (see heap.h). */
#include "heap.h"

#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* Large blocks are read in random order (boxes by id, in tree order): on 2 MB pages their
 * accesses miss the TLB far less (gathering 1M boxes: 7.1 ms on 4 KB pages, 5.4 ms on 2 MB
 * pages) (NOTES row 2), so they are aligned for it and the kernel is asked for them.
 * From 2 MB up: a block's first touch then costs one fault per 2 MB instead of one per 4 KB,
 * which on a virtual machine is most of what a first touch costs (a 1e6 world's arrays of 4
 * bytes an object, just under 4 MiB, were on 4 KB pages: its add 28-30 -> 18-25 ms; the first
 * step of 1e5 objects 24-26 -> 18-23 ms; NOTES row 201). The rounding costs at most 2 MB a
 * block, of address space; resident memory grew 2-12% (1e6 and 1e5 moving objects). */
/* Blocks from 1 MiB up take them too, rounded up to 2 MB: one such block on 4 KB pages met 256
 * or more faults at 2.7-12 us each on the VM, against one fault and the zeroing of 2 MB (about
 * 0.13 ms) on a huge page. The first list of the octree's flat search, and the first frame of
 * 1e6 objects with it, were held up by their 1-2 MB blocks (NOTES row 214); resident memory grew
 * 1-3 MB (moving, 1e5 and 1e6 objects, both trees). */
enum { HUGE_PAGE = 2u << 20, HUGE_FROM = 1u << 20 };

/* The alignment a block of `bytes` gets, and the size asked of the allocator. */
static size_t block_align(size_t bytes) {
    return bytes >= (size_t)HUGE_FROM ? HUGE_PAGE : 64;
}

static size_t block_size(size_t bytes) {
    return round_up(bytes ? bytes : 1, block_align(bytes ? bytes : 1));
}

/* Blocks from this size up to one huge page are faulted in whole when made
 * (MADV_POPULATE_WRITE, Linux 5.14 on; elsewhere the call fails and nothing changes): the
 * pass that first writes them is often the first refit or search after a build, and a first
 * touch costs far more than the page's zeroing on a virtual machine (about 12 us a 4 KB page on
 * the 2-core VM, where the first step after the first met some 300 of them: a 3 ms spike on a
 * 3 ms frame at 1e5 objects; the kd-tree's refit arrays of 1-2 MB, left to their first touch on
 * huge pages, cost its second step at 1e6 some 12 ms: NOTES row 222). Larger blocks are left to
 * their first touch, which the workers share. */
enum { POPULATE_FROM = 64u << 10 };

#ifdef MADV_POPULATE_WRITE
static void populate(void *p, size_t bytes) {
    uintptr_t page = 4096, a = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(page - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}
#endif

void *heap_alloc(heap *h, size_t bytes) {
    if (bytes == 0) bytes = 1;
    size_t align = block_align(bytes);
    if (bytes > SIZE_MAX - align) return NULL;
    void *p;
    if (h->allocator.alloc) {
        p = h->allocator.alloc(block_size(bytes), align, h->allocator.user);
    } else {
        p = aligned_alloc(align, block_size(bytes));
#ifdef MADV_HUGEPAGE
        if (p && align == HUGE_PAGE) madvise(p, block_size(bytes), MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
        if (p && bytes >= POPULATE_FROM && bytes <= (size_t)HUGE_PAGE) populate(p, bytes);
#endif
    }
    if (p) {
        __atomic_fetch_add(&h->allocations, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&h->bytes, bytes, __ATOMIC_RELAXED);
    }
    return p;
}

void heap_free(heap *h, void *p, size_t bytes) {
    if (!p) return;
    if (h->allocator.free)
        h->allocator.free(p, block_size(bytes), h->allocator.user);
    else
        free(p);
    __atomic_fetch_sub(&h->bytes, bytes ? bytes : 1, __ATOMIC_RELAXED);
}

bool heap_grow_together(heap *h, void **const *arrays, const size_t *sizes, size_t count,
                        size_t *capacity, size_t need, size_t keep) {
    if (need <= *capacity) return true;
    if (count > 8) return false;
    size_t cap = *capacity + *capacity / 2;
    if (cap < need) cap = need;
    if (cap < 16) cap = 16;
    void *fresh[8];
    for (size_t i = 0; i < count; i++) {
        fresh[i] = cap > SIZE_MAX / sizes[i] ? NULL : heap_alloc(h, cap * sizes[i]);
        if (!fresh[i]) {
            while (i-- > 0) heap_free(h, fresh[i], cap * sizes[i]);
            return false;
        }
    }
    for (size_t i = 0; i < count; i++) {
        if (*arrays[i] && keep) memcpy(fresh[i], *arrays[i], keep * sizes[i]);
        heap_free(h, *arrays[i], *capacity * sizes[i]);
        *arrays[i] = fresh[i];
    }
    *capacity = cap;
    return true;
}

heap_figures heap_read(const heap *h) {
    return (heap_figures){__atomic_load_n(&h->bytes, __ATOMIC_RELAXED),
                          __atomic_load_n(&h->allocations, __ATOMIC_RELAXED)};
}

void *heap_alloc_for(void *h, size_t bytes) {
    return heap_alloc(h, bytes);
}

void heap_free_for(void *h, void *p, size_t bytes) {
    heap_free(h, p, bytes);
}

bool heap_grow(heap *h, void **p, size_t *capacity, size_t need, size_t size, size_t keep) {
    if (need <= *capacity && *p) return true;
    size_t cap = *capacity + *capacity / 2;
    if (cap < need) cap = need;
    if (cap < 16) cap = 16;
    if (cap > SIZE_MAX / size) return false;
    void *q = heap_alloc(h, cap * size);
    if (!q) return false;
    if (*p && keep) memcpy(q, *p, keep * size);
    heap_free(h, *p, *capacity * size);
    *p = q;
    *capacity = cap;
    return true;
}

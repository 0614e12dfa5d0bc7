/*
 * arena.c -- libkgym_arena.so: the allocator a KernelBench-format
 * executor's forward allocates from on a GPU.
 *
 * The judge gives each executor an arena: device memory of the judge's own,
 * exported as a file descriptor and mapped by the executor (kgym_common.
 * CudaDriver).  The executor runs its forward in a torch MemPool whose
 * allocator is this library (torch.cuda.memory.CUDAPluggableAllocator),
 * so that the tensors the forward returns already lie in the judge's
 * memory: the executor tells the judge where (offsets in the control
 * page) and the judge copies them out itself, on its clock.  There is no
 * copy of the executor's between the forward and DONE -- a copy that code
 * in the candidate's process could skip while the judge subtracted it
 * (ARCHITECTURE.md, "What it does not guarantee yet", before 2026-11-29).
 *
 * First fit over a sorted table of free ranges, merged on free.  What does
 * not fit comes from cuMemAlloc: the forward still runs, and an output
 * that lies outside the arena is copied by the executor, on the clock and
 * not subtracted (the candidate pays for it; kgym_arena_spilled counts).
 * kgym_arena_set starts a job's arena afresh (a reference executor kept
 * by a judge server gets one per job).
 * torch's caching allocator sits above this and keeps its segments for
 * the pool's life, so this is called a few times per job, not per call.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define ARENA_EXPORT	__attribute__((visibility("default")))
#define ARENA_ALIGN	512		/* what torch's segments are aligned to */
#define ARENA_RANGES	4096		/* free ranges: fragments of a job's segments */

/* The interface, C for ctypes and torch (no header: nothing else links it). */
int kgym_arena_set(uint64_t base, uint64_t size) ARENA_EXPORT;
uint64_t kgym_arena_spilled(void) ARENA_EXPORT;
void *kgym_arena_alloc(ssize_t size, int device, void *stream) ARENA_EXPORT;
void kgym_arena_free(void *ptr, ssize_t size, int device, void *stream) ARENA_EXPORT;

struct range {
	uint64_t start;
	uint64_t size;
};

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t arena_base, arena_size;
static struct range arena_free[ARENA_RANGES];
static size_t arena_nfree;
static uint64_t arena_spilled;
/*
 * What this job's arena handed out, and what came from the driver: only
 * those go back, each where it came from.  A pointer of an earlier job's
 * arena (a segment torch lets go of late, at an address a later arena may
 * reuse) is in neither table and is ignored -- unless it has a live
 * allocation's address and size too, which the executor rules out by
 * keeping every pool it made alive (torch frees a pool's segments only
 * once the pool is gone).
 */
static struct range live[ARENA_RANGES];
static size_t live_count;
static uint64_t spill_ptr[ARENA_RANGES];
static size_t spill_count;

/* The driver's allocation for what does not fit (CUresult, CUdeviceptr). */
typedef int (*mem_alloc_fn)(uint64_t *, size_t);
typedef int (*mem_free_fn)(uint64_t);
static mem_alloc_fn cu_mem_alloc;
static mem_free_fn cu_mem_free;

static int
driver_open(void)
{
	void *h;

	if (cu_mem_alloc != NULL)
		return 0;
	/* The process has libcuda mapped already (torch): no file is opened. */
	if ((h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) == NULL &&
	    (h = dlopen("libcuda.so.1", RTLD_NOW)) == NULL)
		return -1;
	cu_mem_free = (mem_free_fn)dlsym(h, "cuMemFree_v2");
	cu_mem_alloc = (mem_alloc_fn)dlsym(h, "cuMemAlloc_v2");
	return cu_mem_alloc != NULL && cu_mem_free != NULL ? 0 : -1;
}

/* The arena for this job: [base, base + size) of device memory. */
int
kgym_arena_set(uint64_t base, uint64_t size)
{
	uint64_t start = (base + ARENA_ALIGN - 1) & ~(uint64_t)(ARENA_ALIGN - 1);

	if (size < start - base + ARENA_ALIGN)
		return -1;
	pthread_mutex_lock(&arena_lock);
	arena_base = base;
	arena_size = size;
	arena_free[0].start = start;
	arena_free[0].size = (size - (start - base)) & ~(uint64_t)(ARENA_ALIGN - 1);
	arena_nfree = 1;
	arena_spilled = 0;
	live_count = 0;
	pthread_mutex_unlock(&arena_lock);
	return 0;
}

/* Allocations that did not fit and came from the driver. */
uint64_t
kgym_arena_spilled(void)
{
	return arena_spilled;
}

static uint64_t
arena_take(uint64_t size)
{
	size_t i;
	uint64_t p;

	for (i = 0; i < arena_nfree; i++) {
		if (arena_free[i].size < size)
			continue;
		p = arena_free[i].start;
		arena_free[i].start += size;
		arena_free[i].size -= size;
		if (arena_free[i].size == 0) {
			memmove(&arena_free[i], &arena_free[i + 1],
			    (arena_nfree - i - 1) * sizeof arena_free[0]);
			arena_nfree--;
		}
		return p;
	}
	return 0;
}

/* Give [p, p + size) back, merged with its neighbours; 0, or -1 when the
 * table is full (the range is then lost to this job: never a double use). */
static int
arena_give(uint64_t p, uint64_t size)
{
	size_t i = 0;

	while (i < arena_nfree && arena_free[i].start < p)
		i++;
	if (i > 0 && arena_free[i - 1].start + arena_free[i - 1].size == p) {
		arena_free[i - 1].size += size;
		if (i < arena_nfree && p + size == arena_free[i].start) {
			arena_free[i - 1].size += arena_free[i].size;
			memmove(&arena_free[i], &arena_free[i + 1],
			    (arena_nfree - i - 1) * sizeof arena_free[0]);
			arena_nfree--;
		}
		return 0;
	}
	if (i < arena_nfree && p + size == arena_free[i].start) {
		arena_free[i].start = p;
		arena_free[i].size += size;
		return 0;
	}
	if (arena_nfree == ARENA_RANGES)
		return -1;
	memmove(&arena_free[i + 1], &arena_free[i], (arena_nfree - i) * sizeof arena_free[0]);
	arena_free[i].start = p;
	arena_free[i].size = size;
	arena_nfree++;
	return 0;
}

static uint64_t
rounded(ssize_t size)
{
	return ((uint64_t)(size > 0 ? size : 1) + ARENA_ALIGN - 1) & ~(uint64_t)(ARENA_ALIGN - 1);
}

/* CUDAPluggableAllocator's alloc: (size, device, stream). */
void *
kgym_arena_alloc(ssize_t size, int device, void *stream)
{
	uint64_t p;

	(void)device;
	(void)stream;
	pthread_mutex_lock(&arena_lock);
	p = arena_size != 0 && live_count < ARENA_RANGES ? arena_take(rounded(size)) : 0;
	if (p != 0) {
		live[live_count].start = p;
		live[live_count++].size = rounded(size);
	} else if (spill_count < ARENA_RANGES && driver_open() == 0) {
		if (cu_mem_alloc(&p, (size_t)rounded(size)) == 0) {
			spill_ptr[spill_count++] = p;
			arena_spilled++;
		} else
			p = 0;
	}
	pthread_mutex_unlock(&arena_lock);
	return (void *)(uintptr_t)p;
}

/* CUDAPluggableAllocator's free: (pointer, size, device, stream). */
void
kgym_arena_free(void *ptr, ssize_t size, int device, void *stream)
{
	uint64_t p = (uint64_t)(uintptr_t)ptr;
	size_t i;

	(void)device;
	(void)stream;
	pthread_mutex_lock(&arena_lock);
	for (i = 0; i < live_count && (live[i].start != p || live[i].size != rounded(size)); i++)
		;
	if (i < live_count) {
		(void)arena_give(p, live[i].size);
		live[i] = live[--live_count];
	} else {
		for (i = 0; i < spill_count && spill_ptr[i] != p; i++)
			;
		if (i < spill_count) {
			spill_ptr[i] = spill_ptr[--spill_count];
			(void)cu_mem_free(p);
		}
	}
	pthread_mutex_unlock(&arena_lock);
}

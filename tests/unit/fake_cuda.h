/*
 * fake_cuda.h -- what the fake CUDA driver (fake_cuda.c) lets a test see:
 * counters of what the backend asked of it, and a reset of its sticky
 * error.  The driver functions themselves are <cuda.h>'s.
 */
#ifndef KGYM_TESTS_FAKE_CUDA_H
#define KGYM_TESTS_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

struct fake_stats {
	long inits, poisons, compares, flushes, scrubs, l2_resets;
	long candidate_launches;	/* kernels with a cost: references and candidates */
	long modules;			/* loaded, not unloaded */
	long live_allocs, live_handles;	/* reservations/cuMemAlloc, physical handles */
	long leaks;			/* reference outputs found when a candidate started */
	long vadd_last_n;		/* the size argument of the latest "vadd" call */
	long module_loads;		/* cuModuleLoadData calls */
	long hashes;			/* kg_hash launches (input hashes) */
	long lazy_calls;		/* vadd_sneaky calls that computed nothing */
	long syncs;			/* host waits: cuStreamSynchronize,
					 * cuEventSynchronize, cuCtxSynchronize */
	long htod, dtoh;		/* cuMemcpyHtoDAsync, cuMemcpyDtoHAsync calls */
	long exclusive_locks;		/* fake_gpu_lock(KGYM_GPU_EXCLUSIVE) calls */
};

/*
 * Per candidate launch of the timing phase (from the first event record
 * after fake_seq_begin()): a hash of everything the device saw since the
 * previous candidate launch.  Equal hashes: calls that look alike.
 */
#define FAKE_MAX_SEQ	4096
extern uint64_t fake_seq[FAKE_MAX_SEQ];
extern size_t fake_nseq;
/*
 * For the same stretches (the work since the previous candidate launch):
 * the host's waits, its copies each way and its module loads -- what one
 * call of the timing phase costs the host, beside what the device sees.
 */
struct fake_host_seq {
	long syncs, htod, dtoh, loads;
};
extern struct fake_host_seq fake_host_seq[FAKE_MAX_SEQ];
void	fake_seq_begin(void);

extern struct fake_stats fake_stats;

/*
 * The worker's GPU lock as a backend sees it (host->gpu_lock): counts the
 * exclusive grants, so that a test sees timing take the lock.  fake_host
 * offers it (and nothing else); a test sets nvrtc_host to it.
 */
struct kgym_host;
int	fake_gpu_lock(int mode);
extern struct kgym_host fake_host;
/* fake_host.toolkit: the compare rules (plugins/compare/rules.c), linked in. */
const struct kgym_toolkit_api *fake_toolkit(const char *name, uint32_t min_version,
	    char **ret_cause);

/* Forget a sticky error, as a fresh worker would start without one. */
void	fake_reset(void);

#endif /* KGYM_TESTS_FAKE_CUDA_H */

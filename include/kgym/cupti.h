/*
 * kgym/cupti.h -- the "cupti" toolkit API: CUPTI's kernel, memcpy and
 * memset activity, and the correlation of each kernel launch with the
 * function launched, handed to the caller as plain records.
 *
 * The toolkit owns everything that speaks to libcupti: loading it (with
 * dlopen, so nothing needs it to load), the subscription, the buffers,
 * the activity kinds (CONCURRENT_KERNEL, which does not serialise kernels,
 * MEMCPY, MEMSET) and the cuLaunchKernel callback, and turns CUPTI's
 * records (whose layouts change with CUDA versions) into the structs
 * below.  What the records mean -- whose kernel, which call, what to
 * report -- is the caller's: the nvrtc backend keeps its accounting
 * (plugins/nvrtc/profdata.c) and feeds it from here.  One process has one
 * CUPTI subscriber, so one caller per process (one backend per worker uses
 * it at a time).
 *
 * Threads: the sink's functions are called on the caller's own thread
 * (launches, and records during flush()) or on CUPTI's worker thread
 * (full buffers), always between the sink's lock() and unlock(), which
 * the toolkit calls around each launch callback and each buffer.  The
 * caller must not hold its lock while calling into this API.
 *
 * Use (kgym-plugin(3), TOOLKITS): in prepare(), with the GPU context
 * current and before the sandbox: host->toolkit(KGYM_CUPTI_API,
 * KGYM_CUPTI_VERSION, &cause), then start(), ids(), collect(1).  Every
 * system call CUPTI needs beyond the GPU sandbox happens in start() and
 * the first collect() switches.  Ownership: the sink is borrowed from
 * start() until stop(); record strings are valid during the call only.
 *
 * Versions: 1  start, ids, collect, flush, timestamp, stop.
 */
#ifndef KGYM_CUPTI_H
#define KGYM_CUPTI_H

#include <stddef.h>
#include <stdint.h>

#include "kgym/toolkit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KGYM_CUPTI_API		"cupti"
#define KGYM_CUPTI_VERSION	1

/* A kernel's activity record. */
struct kgym_cupti_kernel {
	uint32_t correlation;		/* the launch's, as launch() saw it */
	uint32_t context, stream;	/* CUPTI's numbering (ids()) */
	uint64_t start, end;		/* ns, CUPTI's clock; both 0: not timed */
	int32_t grid[3], block[3];
	int32_t static_shared, dynamic_shared;
	uint32_t registers;		/* per thread */
	const char *name;		/* NULL: unknown */
};

/* A memcpy or memset record. */
struct kgym_cupti_copy {
	int memset;			/* 1: a memset; 0: a memcpy */
	uint32_t context, stream;
	uint64_t start, end, bytes;
};

/* Where the records go: the caller's.  Set struct_size to sizeof. */
struct kgym_cupti_sink {
	uint32_t struct_size;
	void *arg;			/* handed to every function below */
	/* Around every call of the functions below; may not be NULL. */
	void (*lock)(void *arg);
	void (*unlock)(void *arg);
	/* Inside a cuLaunchKernel (on its thread): its correlation id and the
	 * CUfunction it was given; launch_failed after, when it failed. */
	void (*launch)(void *arg, uint32_t correlation, const void *function);
	void (*launch_failed)(void *arg, uint32_t correlation);
	void (*kernel)(void *arg, const struct kgym_cupti_kernel *k);
	void (*copy)(void *arg, const struct kgym_cupti_copy *c);
	/* CUPTI dropped n records (no buffer for them). */
	void (*dropped)(void *arg, uint64_t n);
};

struct kgym_cupti_api {
	struct kgym_toolkit_api head;	/* KGYM_CUPTI_VERSION, sizeof */

	/*
	 * Load libcupti (`library`, or NULL for libcupti.so.<CUDA major> of
	 * this build, then libcupti.so), check its API version against the
	 * build's, subscribe and register the buffer callbacks; records go to
	 * `sink` from then on.  Once per process.  0, or -errno with
	 * *ret_cause: -ENOENT no library, -ENOSYS a function missing,
	 * -ENOTSUP another CUPTI major, -EBUSY another CUPTI client holds the
	 * process, -EIO a CUPTI error, -EALREADY started before.
	 */
	int (*start)(const char *library, const struct kgym_cupti_sink *sink,
	    char **ret_cause);
	/* CUPTI's numbers for a CUcontext and a CUstream.  0 or -EIO. */
	int (*ids)(void *cu_context, void *cu_stream, uint32_t *ret_context,
	    uint32_t *ret_stream, char **ret_cause);
	/* Collection (the activity kinds and the launch callback) on or off.
	 * 0 or -EIO (ret_cause may be NULL). */
	int (*collect)(int on, char **ret_cause);
	/* Hand every completed buffer to the sink now; forced: also the
	 * buffers still being filled. */
	void (*flush)(int forced);
	/* CUPTI's clock, ns; 0 when unavailable. */
	uint64_t (*timestamp)(void);
	/* No call into the sink after this returns (the caller may go away);
	 * CUPTI itself stays loaded, its callbacks find nothing to feed. */
	void (*stop)(void);
};

#ifdef __cplusplus
}
#endif

#endif /* KGYM_CUPTI_H */

/*
 * kprobe.c -- libkgym_kprobe.so: which kernels a KernelBench candidate's
 * calls ran on the GPU, and for how long, from CUPTI's kernel activity.
 *
 * The python backend's harness (kgym_harness.py) loads this library with
 * ctypes into a GPU candidate's process before that process enters its
 * sandbox, and after the timed calls brackets a few more calls of the
 * candidate with kgym_kprobe_start() and kgym_kprobe_stop().  The trusted
 * supervisor then classifies the kernels by name against the kernels the
 * candidate's source defines (its @triton.jit functions, its __global__
 * functions): no custom kernel ran is a decoy; custom kernels with a small
 * share of the GPU time is a PyTorch fallback; more kernel time per call
 * than the timed median is work hidden from the timer (or a forged time).
 *
 * Only the activity API is used -- no subscriber -- so the CUPTI that
 * torch's profiler would use is left free, and libcupti is looked up by
 * its soname first, so that a copy torch already mapped is the one we talk
 * to (two copies in a process would fight over the device's counters).
 * Collection is off outside the bracket: it slows launches, and the timed
 * calls run without it.
 *
 * The interface is C for ctypes: every function returns 0 (or a byte
 * count) or a negative errno, with a human reason in the caller's buffer.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cupti.h>

#define KPROBE_EXPORT		__attribute__((visibility("default")))
#define KPROBE_BUFFER_BYTES	(1u << 20)
#define KPROBE_BUFFER_ALIGN	8
#define KPROBE_MAX_KERNELS	128
#define KPROBE_STR2(x)		#x
#define KPROBE_STR(x)		KPROBE_STR2(x)

int kgym_kprobe_open(const char *cupti_path, char *err, size_t errlen) KPROBE_EXPORT;
int kgym_kprobe_start(char *err, size_t errlen) KPROBE_EXPORT;
long kgym_kprobe_stop(char *out, size_t cap, char *err, size_t errlen) KPROBE_EXPORT;

#define KPROBE_CUPTI_FUNCTIONS(X)					\
	X(cuptiGetVersion) X(cuptiGetResultString)			\
	X(cuptiActivityRegisterCallbacks) X(cuptiActivityEnable)	\
	X(cuptiActivityDisable) X(cuptiActivityFlushAll)		\
	X(cuptiActivityGetNextRecord) X(cuptiActivityGetNumDroppedRecords)

static struct {
#define KPROBE_DECLARE(f) __typeof__(f) *f;
	KPROBE_CUPTI_FUNCTIONS(KPROBE_DECLARE)
#undef KPROBE_DECLARE
} cupti;

/* One kernel name's tally; the launch shape is its first record's. */
struct kprobe_kernel {
	char		*name;
	uint64_t	 calls;
	uint64_t	 total_ns;
	uint32_t	 grid[3];
	uint32_t	 block[3];
	uint32_t	 registers;
	uint32_t	 shared_bytes;
};

static pthread_mutex_t kprobe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kprobe_kernel kprobe_kernels[KPROBE_MAX_KERNELS];
static size_t kprobe_nkernels;
static uint64_t kprobe_more_calls, kprobe_more_ns;	/* past the table */
static size_t kprobe_dropped;
static bool kprobe_opened, kprobe_collecting;

static int
kprobe_fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

static const char *
kprobe_cupti_error(CUptiResult rc)
{
	const char *s = NULL;

	if (cupti.cuptiGetResultString == NULL || cupti.cuptiGetResultString(rc, &s) !=
	    CUPTI_SUCCESS || s == NULL)
		return "unknown CUPTI error";
	return s;
}

/* Called with kprobe_lock held. */
static void
kprobe_record(const CUpti_Activity *rec)
{
	const CUpti_ActivityKernel10 *k;
	struct kprobe_kernel *t;
	uint64_t ns;
	size_t i;

	if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
	    rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
		return;
	k = (const CUpti_ActivityKernel10 *)(const void *)rec;
	ns = k->end > k->start ? k->end - k->start : 0;
	for (i = 0; i < kprobe_nkernels; i++)
		if (strcmp(kprobe_kernels[i].name, k->name != NULL ? k->name : "") == 0)
			break;
	if (i == kprobe_nkernels) {
		if (i == KPROBE_MAX_KERNELS ||
		    (kprobe_kernels[i].name = strdup(k->name != NULL ? k->name : "")) == NULL) {
			kprobe_more_calls++;
			kprobe_more_ns += ns;
			return;
		}
		t = &kprobe_kernels[kprobe_nkernels++];
		t->grid[0] = (uint32_t)k->gridX;
		t->grid[1] = (uint32_t)k->gridY;
		t->grid[2] = (uint32_t)k->gridZ;
		t->block[0] = (uint32_t)k->blockX;
		t->block[1] = (uint32_t)k->blockY;
		t->block[2] = (uint32_t)k->blockZ;
		t->registers = k->registersPerThread;
		t->shared_bytes = (uint32_t)k->staticSharedMemory + k->dynamicSharedMemory;
	}
	kprobe_kernels[i].calls++;
	kprobe_kernels[i].total_ns += ns;
}

static void CUPTIAPI
kprobe_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	/* NULL makes CUPTI drop records, which it counts for us. */
	*buffer = aligned_alloc(KPROBE_BUFFER_ALIGN, KPROBE_BUFFER_BYTES);
	*size = *buffer != NULL ? KPROBE_BUFFER_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI
kprobe_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
    size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;

	(void)size;
	if (cupti.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) != CUPTI_SUCCESS)
		dropped = 0;
	pthread_mutex_lock(&kprobe_lock);
	while (kprobe_collecting && buffer != NULL &&
	    cupti.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
		kprobe_record(rec);
	if (kprobe_collecting)
		kprobe_dropped += dropped;
	pthread_mutex_unlock(&kprobe_lock);
	free(buffer);
}

static void
kprobe_reset(void)
{
	size_t i;

	for (i = 0; i < kprobe_nkernels; i++)
		free(kprobe_kernels[i].name);
	memset(kprobe_kernels, 0, sizeof kprobe_kernels);
	kprobe_nkernels = 0;
	kprobe_more_calls = kprobe_more_ns = 0;
	kprobe_dropped = 0;
}

/*
 * Loads libcupti: cupti_path if given, else by soname -- torch's copy if it
 * is mapped already, else the toolkit's through our run path.
 */
int
kgym_kprobe_open(const char *cupti_path, char *err, size_t errlen)
{
	char soname[64];
	uint32_t version = 0;
	CUptiResult rc;
	Dl_info self;
	void *lib;

	if (kprobe_opened)
		return 0;
	snprintf(soname, sizeof soname, "libcupti.so.%d", CUDA_VERSION / 1000);
	if (cupti_path != NULL && cupti_path[0] != '\0')
		lib = dlopen(cupti_path, RTLD_NOW | RTLD_LOCAL);
	else if ((lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) == NULL)
		lib = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		return kprobe_fail(err, errlen, -ENOENT, "no libcupti: %s", dlerror());
#define KPROBE_LOAD(f)							\
	if ((cupti.f = (__typeof__(cupti.f))dlsym(lib, KPROBE_STR(f))) == NULL)	\
		return kprobe_fail(err, errlen, -ENOSYS, "libcupti has no %s", KPROBE_STR(f));
	KPROBE_CUPTI_FUNCTIONS(KPROBE_LOAD)
#undef KPROBE_LOAD
	/* Records are read with this build's layouts (Kernel10), which hold
	 * within a CUDA major version. */
	if (cupti.cuptiGetVersion(&version) != CUPTI_SUCCESS ||
	    version / 10000 != CUPTI_API_VERSION / 10000)
		return kprobe_fail(err, errlen, -ENOTSUP, "libcupti API version %u, built for %u",
		    version, (unsigned int)CUPTI_API_VERSION);
	/* CUPTI keeps our callbacks until the process ends. */
	if (dladdr((const void *)kgym_kprobe_open, &self) == 0 || self.dli_fname == NULL ||
	    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == NULL)
		return kprobe_fail(err, errlen, -ENOENT, "cannot pin libkgym_kprobe in memory");
	if ((rc = cupti.cuptiActivityRegisterCallbacks(kprobe_buffer_requested,
	    kprobe_buffer_completed)) != CUPTI_SUCCESS)
		return kprobe_fail(err, errlen, -EIO, "cuptiActivityRegisterCallbacks: %s",
		    kprobe_cupti_error(rc));
	kprobe_opened = true;
	return 0;
}

int
kgym_kprobe_start(char *err, size_t errlen)
{
	CUptiResult rc;

	if (!kprobe_opened)
		return kprobe_fail(err, errlen, -EINVAL, "kgym_kprobe_open was not called");
	if (kprobe_collecting)
		return kprobe_fail(err, errlen, -EALREADY, "already collecting");
	pthread_mutex_lock(&kprobe_lock);
	kprobe_reset();
	kprobe_collecting = true;
	pthread_mutex_unlock(&kprobe_lock);
	if ((rc = cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) !=
	    CUPTI_SUCCESS) {
		kprobe_collecting = false;
		return kprobe_fail(err, errlen, -EIO, "cuptiActivityEnable: %s",
		    kprobe_cupti_error(rc));
	}
	return 0;
}

/*
 * Ends collection (the caller has synchronised the device) and writes the
 * tally into out, a line per kernel name:
 *	name \t calls \t total_ns \t gx,gy,gz \t bx,by,bz \t registers \t shared
 * then "#more\tcalls\tns" for kernels past the table and "#dropped\tN".
 * Kernel names (mangled C++ or Triton's identifiers) hold no tab or newline.
 */
long
kgym_kprobe_stop(char *out, size_t cap, char *err, size_t errlen)
{
	struct kprobe_kernel *t;
	CUptiResult rc;
	size_t used = 0, i;
	int n;

	if (!kprobe_collecting)
		return kprobe_fail(err, errlen, -EINVAL, "not collecting");
	rc = cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	pthread_mutex_lock(&kprobe_lock);
	kprobe_collecting = false;
	if (rc != CUPTI_SUCCESS) {
		pthread_mutex_unlock(&kprobe_lock);
		return kprobe_fail(err, errlen, -EIO, "cuptiActivityFlushAll: %s",
		    kprobe_cupti_error(rc));
	}
	for (i = 0; i <= kprobe_nkernels + 1; i++) {
		t = &kprobe_kernels[i < kprobe_nkernels ? i : 0];
		if (i < kprobe_nkernels)
			n = snprintf(out + used, cap - used,
			    "%s\t%llu\t%llu\t%u,%u,%u\t%u,%u,%u\t%u\t%u\n", t->name,
			    (unsigned long long)t->calls, (unsigned long long)t->total_ns,
			    t->grid[0], t->grid[1], t->grid[2], t->block[0], t->block[1],
			    t->block[2], t->registers, t->shared_bytes);
		else if (i == kprobe_nkernels)
			n = snprintf(out + used, cap - used, "#more\t%llu\t%llu\n",
			    (unsigned long long)kprobe_more_calls,
			    (unsigned long long)kprobe_more_ns);
		else
			n = snprintf(out + used, cap - used, "#dropped\t%zu\n", kprobe_dropped);
		if (n < 0 || (size_t)n >= cap - used) {
			pthread_mutex_unlock(&kprobe_lock);
			return kprobe_fail(err, errlen, -ENOSPC, "the tally needs more than %zu bytes",
			    cap);
		}
		used += (size_t)n;
	}
	pthread_mutex_unlock(&kprobe_lock);
	return (long)used;
}

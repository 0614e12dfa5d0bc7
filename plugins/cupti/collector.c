/*
 * collector.c -- the cupti toolkit's CUPTI glue: libcupti loaded, one
 * subscription, the activity buffers and the launch callback, each record
 * turned into a struct of kgym/cupti.h and handed to the caller's sink.
 *
 * Identity, not names, is what the caller builds on: CUPTI's callback API
 * tells us, on the launching thread and inside each cuLaunchKernel, the
 * correlation id of the launch and the CUfunction passed; the kernel's
 * activity record carries the same correlation id.  This file only
 * carries both to the sink; the caller ties them together.
 *
 * libcupti is dlopen()ed, not linked, so the toolkit loads where it is
 * absent (start() then says why).  Records are read with this build's
 * struct layouts (CUpti_ActivityKernel10, ...), which hold within a CUDA
 * major version: start() refuses a libcupti of another major.
 *
 * Locks: collector_lock guards the sink pointer, so that stop() can return
 * knowing no callback is inside the caller's code; the sink's own lock is
 * taken inside it, around each buffer and each launch, as the caller's
 * state needs.  Neither is held while calling into CUPTI, except that a
 * buffer is walked (cuptiActivityGetNextRecord, which only reads it) under
 * both: a CUPTI call that takes CUPTI's own locks must not wait while the
 * launching thread, inside a launch callback, waits for ours.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "collector.h"

#define COLLECTOR_STR2(x)	#x
#define COLLECTOR_STR(x)	COLLECTOR_STR2(x)

/* One activity buffer (CUPTI asks for more as it fills them). */
#define COLLECTOR_BUFFER_BYTES	((size_t)4 << 20)
#define COLLECTOR_BUFFER_ALIGN	8

/* The CUPTI functions we call, resolved by name from the dlopen()ed library. */
#define COLLECTOR_CUPTI_FUNCTIONS(X)					\
	X(cuptiGetVersion) X(cuptiGetResultString) X(cuptiSubscribe_v2)	\
	X(cuptiEnableCallback) X(cuptiActivityRegisterCallbacks)	\
	X(cuptiActivityEnable) X(cuptiActivityDisable)			\
	X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord)		\
	X(cuptiActivityGetNumDroppedRecords) X(cuptiGetContextId)	\
	X(cuptiGetStreamIdEx) X(cuptiGetTimestamp)

static struct {
#define COLLECTOR_MEMBER(f)	__typeof__(f) *f;
	COLLECTOR_CUPTI_FUNCTIONS(COLLECTOR_MEMBER)
#undef COLLECTOR_MEMBER
} collector_lib;

/* What we collect: kernels on every stream without serialising them. */
static const CUpti_ActivityKind collector_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET,
};

static pthread_mutex_t collector_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct kgym_cupti_sink *collector_sink;	/* under collector_lock */
static CUpti_SubscriberHandle collector_sub;
static bool collector_started;

/* ------------------------------------------------------------ helpers */

static int collector_fail(char **ret_cause, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* *ret_cause (when not NULL) = a malloc'd message; returns error. */
static int
collector_fail(char **ret_cause, int error, const char *fmt, ...)
{
	va_list ap;

	if (ret_cause == NULL)
		return error;
	va_start(ap, fmt);
	if (vasprintf(ret_cause, fmt, ap) < 0)
		*ret_cause = NULL;
	va_end(ap);
	return error;
}

static const char *
collector_cupti_error(CUptiResult rc)
{
	const char *s = NULL;

	if (collector_lib.cuptiGetResultString == NULL ||
	    collector_lib.cuptiGetResultString(rc, &s) != CUPTI_SUCCESS || s == NULL)
		return "unknown CUPTI error";
	return s;
}

/* *ret_cause = "<what>: CUPTI_ERROR_... (n)", returns -EIO. */
static int
collector_cupti_fail(CUptiResult rc, char **ret_cause, const char *what)
{
	return collector_fail(ret_cause, -EIO, "%s: %s (%d)", what, collector_cupti_error(rc),
	    (int)rc);
}

/* ---------------------------------------------------------- callbacks */

static void
collector_record(const struct kgym_cupti_sink *sink, const CUpti_Activity *rec)
{
	const CUpti_ActivityKernel10 *k;
	const CUpti_ActivityMemcpy6 *m;
	const CUpti_ActivityMemset4 *s;
	struct kgym_cupti_kernel pk;
	struct kgym_cupti_copy pc;

	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		k = (const CUpti_ActivityKernel10 *)(const void *)rec;
		memset(&pk, 0, sizeof pk);
		pk.correlation = k->correlationId;
		pk.context = k->contextId;
		pk.stream = k->streamId;
		pk.start = k->start;
		pk.end = k->end;
		pk.grid[0] = k->gridX;
		pk.grid[1] = k->gridY;
		pk.grid[2] = k->gridZ;
		pk.block[0] = k->blockX;
		pk.block[1] = k->blockY;
		pk.block[2] = k->blockZ;
		pk.static_shared = k->staticSharedMemory;
		pk.dynamic_shared = k->dynamicSharedMemory;
		pk.registers = k->registersPerThread;
		pk.name = k->name;
		sink->kernel(sink->arg, &pk);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		m = (const CUpti_ActivityMemcpy6 *)(const void *)rec;
		memset(&pc, 0, sizeof pc);
		pc.context = m->contextId;
		pc.stream = m->streamId;
		pc.start = m->start;
		pc.end = m->end;
		pc.bytes = m->bytes;
		sink->copy(sink->arg, &pc);
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		s = (const CUpti_ActivityMemset4 *)(const void *)rec;
		memset(&pc, 0, sizeof pc);
		pc.memset = 1;
		pc.context = s->contextId;
		pc.stream = s->streamId;
		pc.start = s->start;
		pc.end = s->end;
		pc.bytes = s->bytes;
		sink->copy(sink->arg, &pc);
		break;
	default:
		break;
	}
}

static void CUPTIAPI
collector_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	/* NULL makes CUPTI drop records, which it counts for us. */
	*buffer = aligned_alloc(COLLECTOR_BUFFER_ALIGN, COLLECTOR_BUFFER_BYTES);
	*size = *buffer != NULL ? COLLECTOR_BUFFER_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI
collector_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
    size_t valid)
{
	const struct kgym_cupti_sink *sink;
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;

	/* Before any lock (see the top of the file). */
	if (collector_lib.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) != CUPTI_SUCCESS)
		dropped = 0;
	pthread_mutex_lock(&collector_lock);
	if ((sink = collector_sink) != NULL) {
		sink->lock(sink->arg);
		while (buffer != NULL &&
		    collector_lib.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
			collector_record(sink, rec);
		if (dropped > 0)
			sink->dropped(sink->arg, dropped);
		sink->unlock(sink->arg);
	}
	pthread_mutex_unlock(&collector_lock);
	free(buffer);
}

/* Inside every cuLaunchKernel of the process, on its thread. */
static void CUPTIAPI
collector_on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
    const void *data)
{
	const CUpti_CallbackData *cb = data;
	const struct kgym_cupti_sink *sink;
	const cuLaunchKernel_params *p;

	if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
		return;
	pthread_mutex_lock(&collector_lock);
	if ((sink = collector_sink) != NULL) {
		sink->lock(sink->arg);
		if (cb->callbackSite == CUPTI_API_ENTER) {
			p = cb->functionParams;
			sink->launch(sink->arg, cb->correlationId, (const void *)p->f);
		} else if (cb->functionReturnValue != NULL &&
		    *(const CUresult *)cb->functionReturnValue != CUDA_SUCCESS) {
			/* No record will come for a launch that failed. */
			sink->launch_failed(sink->arg, cb->correlationId);
		}
		sink->unlock(sink->arg);
	}
	pthread_mutex_unlock(&collector_lock);
}

/* ------------------------------------------------------------ the API */

static int
collector_load(const char *path, char **ret_cause)
{
	char name[64];
	uint32_t version = 0;
	Dl_info self;
	void *lib;

	snprintf(name, sizeof name, "libcupti.so.%d", CUDA_VERSION / 1000);
	/* The plugin's run path has the toolkit's library directory. */
	if ((lib = dlopen(path != NULL ? path : name, RTLD_NOW | RTLD_LOCAL)) == NULL &&
	    (path != NULL || (lib = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL)) == NULL))
		return collector_fail(ret_cause, -ENOENT, "no libcupti (%s)", dlerror());
#define COLLECTOR_LOAD(f)						\
	collector_lib.f = (__typeof__(collector_lib.f))dlsym(lib, COLLECTOR_STR(f));	\
	if (collector_lib.f == NULL)					\
		return collector_fail(ret_cause, -ENOSYS, "libcupti has no %s",	\
		    COLLECTOR_STR(f));
	COLLECTOR_CUPTI_FUNCTIONS(COLLECTOR_LOAD)
#undef COLLECTOR_LOAD
	if (collector_lib.cuptiGetVersion(&version) != CUPTI_SUCCESS ||
	    version / 10000 != CUPTI_API_VERSION / 10000)
		return collector_fail(ret_cause, -ENOTSUP, "libcupti API version %u, kgymd was "
		    "built for %u", version, (unsigned int)CUPTI_API_VERSION);
	/* CUPTI keeps our callbacks for the life of the process (its exit
	 * handler flushes): this toolkit must stay mapped as long. */
	if (dladdr((const void *)collector_load, &self) == 0 || self.dli_fname == NULL ||
	    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == NULL)
		return collector_fail(ret_cause, -ENOENT, "cannot pin the plugin in memory for "
		    "CUPTI's callbacks");
	return 0;
}

static int
collector_start(const char *library, const struct kgym_cupti_sink *sink, char **ret_cause)
{
	CUpti_SubscriberParams params;
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
	CUptiResult rc;
	int error;

	if (collector_started)
		return collector_fail(ret_cause, -EALREADY, "CUPTI was started before in this "
		    "process");
	if (sink == NULL || sink->struct_size < sizeof *sink || sink->lock == NULL ||
	    sink->unlock == NULL || sink->launch == NULL || sink->launch_failed == NULL ||
	    sink->kernel == NULL || sink->copy == NULL || sink->dropped == NULL)
		return collector_fail(ret_cause, -EINVAL, "the CUPTI sink lacks a function");
	if ((error = collector_load(library, ret_cause)) < 0)
		return error;
	memset(&params, 0, sizeof params);
	params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
	params.subscriberName = "kgymd";
	params.oldSubscriberName = other;
	params.oldSubscriberSize = sizeof other - 1;
	rc = collector_lib.cuptiSubscribe_v2(&collector_sub, collector_on_api, NULL, &params);
	if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
		return collector_fail(ret_cause, -EBUSY, "another CUPTI client holds this "
		    "process (%s: a profiler or debugger attached?)", other[0] ? other : "unnamed");
	if (rc != CUPTI_SUCCESS)
		return collector_cupti_fail(rc, ret_cause, "cuptiSubscribe");
	collector_started = true;
	pthread_mutex_lock(&collector_lock);
	collector_sink = sink;
	pthread_mutex_unlock(&collector_lock);
	if ((rc = collector_lib.cuptiActivityRegisterCallbacks(collector_buffer_requested,
	    collector_buffer_completed)) != CUPTI_SUCCESS)
		return collector_cupti_fail(rc, ret_cause, "cuptiActivityRegisterCallbacks");
	return 0;
}

static int
collector_ids(void *cu_context, void *cu_stream, uint32_t *ret_context, uint32_t *ret_stream,
    char **ret_cause)
{
	uint32_t c, s;
	CUptiResult rc;

	if (!collector_started)
		return collector_fail(ret_cause, -EIO, "CUPTI is not started");
	if ((rc = collector_lib.cuptiGetContextId((CUcontext)cu_context, &c)) != CUPTI_SUCCESS)
		return collector_cupti_fail(rc, ret_cause, "cuptiGetContextId");
	if ((rc = collector_lib.cuptiGetStreamIdEx((CUcontext)cu_context, (CUstream)cu_stream,
	    0, &s)) != CUPTI_SUCCESS)
		return collector_cupti_fail(rc, ret_cause, "cuptiGetStreamIdEx");
	*ret_context = c;
	*ret_stream = s;
	return 0;
}

static int
collector_collect(int on, char **ret_cause)
{
	CUptiResult rc;
	size_t i;

	if (!collector_started)
		return collector_fail(ret_cause, -EIO, "CUPTI is not started");
	if ((rc = collector_lib.cuptiEnableCallback(on, collector_sub, CUPTI_CB_DOMAIN_DRIVER_API,
	    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)) != CUPTI_SUCCESS)
		return collector_cupti_fail(rc, ret_cause, "cuptiEnableCallback(cuLaunchKernel)");
	for (i = 0; i < sizeof collector_kinds / sizeof collector_kinds[0]; i++) {
		rc = on ? collector_lib.cuptiActivityEnable(collector_kinds[i]) :
		    collector_lib.cuptiActivityDisable(collector_kinds[i]);
		if (rc != CUPTI_SUCCESS)
			return collector_cupti_fail(rc, ret_cause, on ? "cuptiActivityEnable" :
			    "cuptiActivityDisable");
	}
	return 0;
}

static void
collector_flush(int forced)
{
	if (collector_started)
		collector_lib.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

static uint64_t
collector_timestamp(void)
{
	uint64_t ts = 0;

	if (!collector_started || collector_lib.cuptiGetTimestamp(&ts) != CUPTI_SUCCESS)
		ts = 0;
	return ts;
}

static void
collector_stop(void)
{
	pthread_mutex_lock(&collector_lock);
	collector_sink = NULL;
	pthread_mutex_unlock(&collector_lock);
}

const struct kgym_cupti_api collector_api = {
	.head = {
		.version = KGYM_CUPTI_VERSION,
		.struct_size = sizeof(struct kgym_cupti_api),
	},
	.start = collector_start,
	.ids = collector_ids,
	.collect = collector_collect,
	.flush = collector_flush,
	.timestamp = collector_timestamp,
	.stop = collector_stop,
};

/*
 * profile.c -- CUPTI in the GPU worker: every kernel, memcpy and memset of
 * the job's context, recorded per timed call (kgymd-protocol(7), RESULTS: profile).
 *
 * A native candidate is device code only, but the reward is computed from
 * the times we measure, so we want to see every piece of work the GPU did
 * during each measured call and whose it was.  CUDA events bracket our
 * stream; CUPTI's activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
 * which does not serialise kernels, MEMCPY and MEMSET) cover every stream
 * of the context, with each kernel's name, start, end, grid, block,
 * registers and shared memory.  CUPTI itself is the cupti toolkit's
 * (plugins/cupti, kgym/cupti.h), which hands us plain records through a
 * sink; profdata.c does the accounting; this file is the glue between
 * them and the hooks timing.c calls.
 *
 * Identity, not names: CUPTI's callback API tells us, on our own thread
 * and inside each cuLaunchKernel, the correlation id of the launch and the
 * CUfunction we passed; the kernel's activity record carries the same
 * correlation id.  Each job registers its CUfunctions by module (ours, the
 * reference's, the solution's) before timing, so a record is attributed
 * without looking at its name.
 *
 * Life cycle:
 *   prepare()  before the sandbox: find the cupti toolkit, which loads
 *              libcupti (dlopen()ed, so everything loads where it is
 *              absent), subscribes and registers its buffer callbacks with
 *              our sink; enable the activity kinds (CUPTI starts its
 *              worker thread here), switch collection off and on once
 *              and run a self-test: a probe kernel from a module loaded
 *              after CUPTI, plus a memset, must come back attributed to
 *              its module, timed and on our stream.  Anything failing
 *              leaves profiling "unavailable: <why>" and CUPTI switched off;
 *              the job is then timed with events alone, never failed.
 *   jobs       profile_job_begin() at the start of timing registers the
 *              functions and starts feeding profdata; each measured call is
 *              bracketed by profile_call_begin and profile_call_queued (its
 *              launches queued); once the round's results are read back
 *              (its end events complete), profile_call_done gives each its
 *              times and profile_round_flush flushes CUPTI's buffers
 *              (cuptiActivityFlushAll, forced only when a call still misses
 *              a record), so the calls' numbers are in before the next.
 *   fini       the toolkit stops calling our sink; then our own memory.
 *              CUPTI may still call the toolkit's buffer callback from its
 *              exit handler, which finds no sink to feed.
 *
 * Whether CUPTI collects during the timed calls ([plugin.nvrtc]
 * profile_during_timing, default yes) is a trade: collecting adds a
 * constant per kernel (CUPTI writes a timestamp before and after each
 * kernel) that matters only for plans of many very short kernels, and in
 * return the profile and the detectors' per-call data describe exactly the
 * calls whose times are reported -- a candidate cannot behave one way in
 * separate profiling calls and another in the timed ones.  Every result
 * carries the measured cost (metadata.cupti_overhead: the same candidate
 * call, alternately with and without CUPTI), so the default can be
 * revisited with numbers; "no" times without CUPTI and profiles
 * profile_calls more calls afterwards.
 *
 * System calls: everything that needs more than the GPU sandbox allows
 * (dlopen of libcupti, CUPTI's worker thread, its first device buffers, the
 * first toggling of collection) happens in prepare().  Inside the sandbox
 * CUPTI is expected to need only what the driver already does (ioctl and
 * mmap on the NVIDIA device nodes, futex, clock_nanosleep for its worker
 * thread, mmap/munmap for our record buffers); to be confirmed with
 * tests/gpu/learn-syscalls, and any addition goes into nvrtc.c's
 * `syscalls` list with the reason.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <kgym/cupti.h>

#include "nvrtc_internal.h"

#define PROFILE_EXTRA_CALLS	10
#define PROFILE_MAX_EXTRA_CALLS	1000

/* The probe of the self-test: a kernel that does (almost) nothing. */
#define PROFILE_PROBE_NAME	"kg_profile_probe"
static const char profile_probe_source[] =
    "extern \"C\" __global__ void " PROFILE_PROBE_NAME "(int *p)\n"
    "{\n"
    "\tif (p != 0 && threadIdx.x == 0)\n"
    "\t\tp[blockIdx.x] = 1;\n"
    "}\n";

/* The cupti toolkit's API, found in profile_prepare(); NULL: none. */
static const struct kgym_cupti_api *profile_cupti;

/* The job thread's state. */
static struct {
	char *status;			/* metadata.profiling (malloc'd) */
	bool available;			/* prepared and self-tested */
	bool active;			/* activity kinds and the launch callback on */
	bool during_timing;
	unsigned int extra_calls;
	uint32_t context, stream;	/* ours, in CUPTI's numbering */
	enum profile_purpose purpose;
	bool job;			/* between profile_job_begin and _end */
	bool in_call;
	struct timespec call_t0;
	struct timespec queued_t0[PROFILE_UNKNOWN];	/* per program: its call's begin */
	char *job_broken;		/* why this job's profile is void (malloc'd) */
} prof;

/*
 * Shared with the sink, which the cupti toolkit calls on our thread
 * (launches, and buffers during a flush) or on CUPTI's worker thread
 * (full buffers), taking this lock around each.  Never held while calling
 * into the toolkit, CUPTI or the driver.
 */
static pthread_mutex_t profile_lock = PTHREAD_MUTEX_INITIALIZER;
static struct profdata *profile_pd;	/* the job's (or the self-test's) */
static bool profile_feeding;		/* records and launches go into profile_pd */

/* ------------------------------------------------------------ helpers */

static void
profile_set_status(const char *fmt, const char *detail)
{
	char *s;

	if (asprintf(&s, fmt, detail != NULL ? detail : "unknown reason") < 0)
		return;
	free(prof.status);
	prof.status = s;
}

static double
profile_elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static uint64_t
profile_timestamp(void)
{
	return profile_cupti != NULL ? profile_cupti->timestamp() : 0;
}

/* A yes/no or unsigned key of [plugin.nvrtc]; `dflt` when unset or bad. */
static const char *
profile_config(const char *key)
{
	if (nvrtc_host == NULL || nvrtc_host->config_get == NULL)
		return NULL;
	return nvrtc_host->config_get(nvrtc_self, key);
}

static bool
profile_config_bool(const char *key, bool dflt)
{
	const char *v = profile_config(key);

	if (v == NULL)
		return dflt;
	if (strcasecmp(v, "yes") == 0 || strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
		return true;
	if (strcasecmp(v, "no") == 0 || strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
		return false;
	nvrtc_log(KGYM_LOG_WARN, "[plugin.nvrtc] %s = %s: not yes or no; using %s", key, v,
	    dflt ? "yes" : "no");
	return dflt;
}

static unsigned int
profile_config_uint(const char *key, unsigned int dflt, unsigned int max)
{
	const char *v = profile_config(key);
	unsigned long x;
	char *end;

	if (v == NULL)
		return dflt;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || *v == '-' || x > max) {
		nvrtc_log(KGYM_LOG_WARN, "[plugin.nvrtc] %s = %s: not a number from 0 to %u; "
		    "using %u", key, v, max, dflt);
		return dflt;
	}
	return (unsigned int)x;
}

/* --------------------------------------------------------------- sink */

/*
 * What the cupti toolkit hands over goes into the profdata being fed, if
 * any; the toolkit holds our lock (profile_sink_lock) around each call.
 */
static void
profile_sink_lock(void *arg)
{
	pthread_mutex_lock(&profile_lock);
}

static void
profile_sink_unlock(void *arg)
{
	pthread_mutex_unlock(&profile_lock);
}

static void
profile_sink_launch(void *arg, uint32_t correlation, const void *fn)
{
	if (profile_feeding)
		profdata_launch(profile_pd, correlation, fn);
}

static void
profile_sink_launch_failed(void *arg, uint32_t correlation)
{
	/* No record will come for a launch that failed. */
	if (profile_feeding)
		profdata_launch_failed(profile_pd, correlation);
}

static void
profile_sink_kernel(void *arg, const struct kgym_cupti_kernel *k)
{
	struct profdata_kernel pk;

	if (!profile_feeding)
		return;
	memset(&pk, 0, sizeof pk);
	pk.correlation = k->correlation;
	pk.context = k->context;
	pk.stream = k->stream;
	pk.start = k->start;
	pk.end = k->end;
	memcpy(pk.grid, k->grid, sizeof pk.grid);
	memcpy(pk.block, k->block, sizeof pk.block);
	pk.static_shared = k->static_shared;
	pk.dynamic_shared = k->dynamic_shared;
	pk.registers = k->registers;
	pk.name = k->name;
	profdata_kernel(profile_pd, &pk);
}

static void
profile_sink_copy(void *arg, const struct kgym_cupti_copy *c)
{
	struct profdata_copy pc;

	if (!profile_feeding)
		return;
	memset(&pc, 0, sizeof pc);
	pc.memset = c->memset != 0;
	pc.context = c->context;
	pc.stream = c->stream;
	pc.start = c->start;
	pc.end = c->end;
	pc.bytes = c->bytes;
	profdata_copy(profile_pd, &pc);
}

static void
profile_sink_dropped(void *arg, uint64_t n)
{
	if (profile_feeding)
		profdata_dropped(profile_pd, n);
}

static const struct kgym_cupti_sink profile_sink = {
	.struct_size = sizeof(struct kgym_cupti_sink),
	.lock = profile_sink_lock,
	.unlock = profile_sink_unlock,
	.launch = profile_sink_launch,
	.launch_failed = profile_sink_launch_failed,
	.kernel = profile_sink_kernel,
	.copy = profile_sink_copy,
	.dropped = profile_sink_dropped,
};

/* ------------------------------------------------------------ CUPTI */

/* Collection on or off: the activity kinds and the launch callback. */
static int
profile_switch(bool on, char **ret_cause)
{
	int error;

	if ((error = profile_cupti->collect(on, ret_cause)) < 0)
		return error;
	prof.active = on;
	return 0;
}

/* Everything CUPTI has completed, delivered to our sink. */
static void
profile_flush(bool forced)
{
	if (profile_cupti != NULL)
		profile_cupti->flush(forced);
}

/*
 * The cupti toolkit, started with our sink, and our context and stream in
 * its numbering; then collection on.
 */
static int
profile_start(char **ret_cause)
{
	char *cause = NULL;
	int error;

	if (nvrtc_host == NULL || nvrtc_host->toolkit == NULL ||
	    (profile_cupti = (const struct kgym_cupti_api *)(const void *)nvrtc_host->toolkit(
	    KGYM_CUPTI_API, KGYM_CUPTI_VERSION, &cause)) == NULL) {
		error = nvrtc_fail(ret_cause, -ENOENT, "no '%s' toolkit: %s", KGYM_CUPTI_API,
		    cause != NULL ? cause : "this kgymd hands out no toolkits");
		free(cause);
		return error;
	}
	if ((error = profile_cupti->start(profile_config("cupti_library"), &profile_sink,
	    ret_cause)) < 0 ||
	    (error = profile_cupti->ids(nvdev.ctx, nvdev.stream, &prof.context, &prof.stream,
	    ret_cause)) < 0)
		return error;
	return profile_switch(true, ret_cause);
}

/* Start feeding `pd` (the job's or the self-test's); NULL stops. */
static struct profdata *
profile_feed(struct profdata *pd)
{
	struct profdata *old;

	pthread_mutex_lock(&profile_lock);
	old = profile_pd;
	profile_pd = pd;
	profile_feeding = pd != NULL;
	pthread_mutex_unlock(&profile_lock);
	return old;
}

/*
 * Does attribution work here?  A probe kernel from a module loaded after
 * CUPTI (as the jobs' are) and a memset, on our stream, in one call: the
 * call must be complete, counted and timed, the kernel attributed to its
 * module under its name, the memset seen.
 */
static int
profile_self_test(char **ret_cause)
{
	struct compile_input in = {
		.name = "kgymd profile probe", .source = profile_probe_source,
		.arch = nvdev.arch,
	};
	struct compile_output out;
	const struct profile_call_summary *s;
	struct profdata *pd = NULL;
	CUmodule mod = NULL;
	CUfunction fn;
	CUdeviceptr buf = 0;
	CUresult rc;
	json_t *r = NULL, *first;
	void *null = NULL, *args[] = { &null };
	const char *what = NULL;
	size_t n;
	int error;

	memset(&out, 0, sizeof out);
	if ((error = compile_source(&in, &out, ret_cause)) < 0)
		return error;
	if (!out.ok) {
		error = nvrtc_fail(ret_cause, -EIO, "the probe kernel does not compile: %s",
		    out.log != NULL ? out.log : "");
		goto clear_output;
	}
	if ((rc = nvcu.cuModuleLoadData(&mod, out.cubin)) != CUDA_SUCCESS) {
		error = device_fail(rc, ret_cause, "loading the probe kernel");
		goto clear_output;
	}
	if ((rc = nvcu.cuModuleGetFunction(&fn, mod, PROFILE_PROBE_NAME)) != CUDA_SUCCESS ||
	    (rc = nvcu.cuMemAlloc(&buf, 4096)) != CUDA_SUCCESS) {
		error = device_fail(rc, ret_cause, "the probe kernel");
		goto unload;
	}
	if ((pd = profdata_new(prof.context, prof.stream)) == NULL ||
	    profdata_add_function(pd, fn, PROFILE_SOLUTION) < 0) {
		error = nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
		goto unload;
	}
	profile_feed(pd);
	pthread_mutex_lock(&profile_lock);
	profdata_call_begin(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_PROFILE, true,
	    profile_timestamp());
	pthread_mutex_unlock(&profile_lock);
	if ((rc = nvcu.cuMemsetD8Async(buf, 0, 4096, nvdev.stream)) != CUDA_SUCCESS ||
	    (rc = nvcu.cuLaunchKernel(fn, 2, 1, 1, 32, 1, 1, 0, nvdev.stream, args, NULL)) !=
	    CUDA_SUCCESS || (rc = nvcu.cuStreamSynchronize(nvdev.stream)) != CUDA_SUCCESS) {
		profile_feed(NULL);
		error = device_fail(rc, ret_cause, "running the probe kernel");
		goto unload;
	}
	pthread_mutex_lock(&profile_lock);
	profdata_call_end(pd, 0.0, 0.0, profile_timestamp());
	pthread_mutex_unlock(&profile_lock);
	profile_flush(false);
	profile_flush(true);
	profile_feed(NULL);
	profdata_settle(pd, true);

	s = profdata_calls(pd, &n);
	error = -EIO;
	if ((r = json_object()) == NULL || profdata_result(pd, r) < 0)
		what = "out of memory";
	else if (n != 1 || s->launches != 1)
		what = "the launch was not seen by the callback API";
	else if (s->kernels != 1)
		what = "no activity record for the kernel (or none attributed to it)";
	else if (!s->complete || !s->counted || !(s->kernel_us > 0.0))
		what = "the kernel's record has no time";
	else if (s->foreign_stream_kernels != 0)
		what = "the kernel's record is not on our stream";
	else if ((first = json_array_get(json_object_get(r, "profile"), 0)) == NULL ||
	    json_string_value(json_object_get(first, "name")) == NULL ||
	    strcmp(json_string_value(json_object_get(first, "name")), PROFILE_PROBE_NAME) != 0)
		what = "the kernel's record does not carry its name";
	else if (json_integer_value(json_object_get(json_object_get(json_object_get(
	    json_object_get(r, "metadata"), "cupti"), "memset"), "count")) < 1)
		what = "no activity record for a memset";
	else
		error = 0;
	if (error < 0)
		nvrtc_fail(ret_cause, error, "CUPTI self-test: %s", what);
unload:
	json_decref(r);
	profdata_free(pd);
	if (buf != 0)
		nvcu.cuMemFree(buf);
	if (mod != NULL)
		nvcu.cuModuleUnload(mod);
clear_output:
	compile_output_clear(&out);
	return error;
}

/* ------------------------------------------------------------- prepare */

void
profile_prepare(void)
{
	char *cause = NULL;
	int error;

	prof.during_timing = profile_config_bool("profile_during_timing", true);
	prof.extra_calls = profile_config_uint("profile_calls", PROFILE_EXTRA_CALLS,
	    PROFILE_MAX_EXTRA_CALLS);
	if (!profile_config_bool("profile", true)) {
		profile_set_status("off: %s", "[plugin.nvrtc] profile = no");
		return;
	}
	if (!nvdev.ready) {
		profile_set_status("unavailable: %s", "no GPU in this worker");
		return;
	}
	/* Off and on once, so whatever toggling first sets up is set up now,
	 * before the sandbox; then the self-test with collection on. */
	if ((error = profile_start(&cause)) < 0 ||
	    (error = profile_switch(false, &cause)) < 0 ||
	    (error = profile_switch(true, &cause)) < 0 ||
	    (error = profile_self_test(&cause)) < 0) {
		profile_set_status("unavailable: %s", cause);
		nvrtc_log(KGYM_LOG_WARN, "CUPTI profiling is unavailable, timing with events "
		    "alone: %s", cause != NULL ? cause : "unknown reason");
		free(cause);
		/* Nothing of CUPTI's may perturb the timing it does not serve. */
		if (prof.active)
			profile_switch(false, NULL);
		/* Nor may records reach a profile that will never be read. */
		if (profile_cupti != NULL)
			profile_cupti->stop();
		return;
	}
	prof.available = true;
	profile_set_status("%s", "cupti");
	nvrtc_log(KGYM_LOG_INFO, "CUPTI profiling on (context %u, stream %u; %s timing, "
	    "%u extra calls)", prof.context, prof.stream, prof.during_timing ? "during" :
	    "after", prof.extra_calls);
}

void
profile_fini(void)
{
	/* The toolkit stays (toolkits are unloaded last), CUPTI until exit:
	 * neither may call into this plugin once it is gone. */
	if (profile_cupti != NULL)
		profile_cupti->stop();
	profile_cupti = NULL;
	profdata_free(profile_feed(NULL));
	free(prof.status);
	free(prof.job_broken);
	memset(&prof, 0, sizeof prof);
}

const char *
profile_status(void)
{
	return prof.status != NULL ? prof.status : "off: CUPTI was not set up in this worker";
}

bool
profile_available(void)
{
	return prof.available;
}

bool
profile_during_timing(void)
{
	return prof.during_timing;
}

unsigned int
profile_extra_calls(void)
{
	return prof.available ? prof.extra_calls : 0;
}

/* ---------------------------------------------------------------- jobs */

/* The job's profile is void (and, when CUPTI itself failed, so is every
 * later job's): said in metadata.profiling, never a failure of the job. */
static void
profile_break(char *cause, bool for_good)
{
	nvrtc_log(KGYM_LOG_WARN, "CUPTI profiling %s: %s", for_good ? "is off from now on" :
	    "is void for this job", cause != NULL ? cause : "unknown reason");
	profdata_free(profile_feed(NULL));
	prof.job = false;
	free(prof.job_broken);
	prof.job_broken = cause;
	if (for_good) {
		prof.available = false;
		profile_set_status("unavailable: %s", cause);
	}
}

void
profile_job_reset(void)
{
	profdata_free(profile_feed(NULL));
	free(prof.job_broken);
	prof.job_broken = NULL;
	prof.job = false;
	prof.in_call = false;
}

void
profile_job_begin(const struct evaluate *ev)
{
	const CUfunction helpers[] = { nvdev.k_init, nvdev.k_poison, nvdev.k_compare,
	    nvdev.k_hash, nvdev.k_flush, nvdev.k_scrub, nvdev.k_empty };
	const struct evaluate_prog *progs[2] = { &ev->ref, &ev->sol };
	const enum profile_owner owners[2] = { PROFILE_REFERENCE, PROFILE_SOLUTION };
	struct profdata *pd;
	char *cause = NULL;
	size_t i, k;
	int error = 0;

	profile_job_reset();
	if (!prof.available)
		return;
	/* What the correctness trials left in CUPTI's buffers is not ours to
	 * count: delivered now, while nothing is fed. */
	profile_flush(false);
	if ((pd = profdata_new(prof.context, prof.stream)) == NULL) {
		profile_break(strdup("out of memory"), false);
		return;
	}
	for (i = 0; i < sizeof helpers / sizeof helpers[0] && error == 0; i++)
		error = profdata_add_function(pd, helpers[i], PROFILE_OURS);
	for (k = 0; k < 2 && error == 0; k++)
		for (i = 0; progs[k]->fn != NULL && progs[k]->plan != NULL &&
		    i < progs[k]->plan->nsteps && error == 0; i++)
			error = profdata_add_function(pd, progs[k]->fn[i], owners[k]);
	if (error < 0) {
		profdata_free(pd);
		profile_break(strdup("out of memory"), false);
		return;
	}
	profile_feed(pd);
	prof.job = true;
	prof.purpose = PROFILE_PURPOSE_OTHER;
	/* Collection is on between jobs; "not during timing" turns it off. */
	if (prof.active != prof.during_timing && profile_switch(prof.during_timing, &cause) < 0)
		profile_break(cause, true);
}

void
profile_reloaded(const struct evaluate_prog *p, const CUfunction *old_fn)
{
	size_t i;
	int error = 0;

	if (!prof.available || !prof.job)
		return;
	pthread_mutex_lock(&profile_lock);
	for (i = 0; profile_pd != NULL && p->fn != NULL && i < p->plan->nsteps && error == 0; i++)
		error = profdata_add_alias(profile_pd, p->fn[i], old_fn[i]);
	pthread_mutex_unlock(&profile_lock);
	if (error < 0)
		profile_break(strdup("out of memory"), false);
}

void
profile_job_end(void)
{
	if (!prof.job)
		return;
	/* Whether or not collection is on now, what it collected is due. */
	profile_flush(true);
	pthread_mutex_lock(&profile_lock);
	profile_feeding = false;
	if (profile_pd != NULL)
		profdata_settle(profile_pd, true);
	pthread_mutex_unlock(&profile_lock);
	prof.job = false;
	prof.in_call = false;
}

void
profile_set_purpose(enum profile_purpose purpose)
{
	prof.purpose = purpose;
}

void
profile_call_begin(enum profile_owner program)
{
	uint64_t ts;
	int error;

	if (!prof.job)
		return;
	ts = profile_timestamp();
	clock_gettime(CLOCK_MONOTONIC, &prof.call_t0);
	if (program < PROFILE_UNKNOWN)
		prof.queued_t0[program] = prof.call_t0;
	pthread_mutex_lock(&profile_lock);
	error = profdata_call_begin(profile_pd, program, prof.purpose, prof.active, ts);
	pthread_mutex_unlock(&profile_lock);
	prof.in_call = error == 0;
}

void
profile_call_queued(void)
{
	uint64_t ts;

	if (!prof.job || !prof.in_call)
		return;
	prof.in_call = false;
	ts = profile_timestamp();
	pthread_mutex_lock(&profile_lock);
	profdata_call_end(profile_pd, NAN, NAN, ts);
	pthread_mutex_unlock(&profile_lock);
}

void
profile_call_done(enum profile_owner program, double events_ms, double less_ms)
{
	uint64_t ts;
	double host_ms;

	if (!prof.job || program >= PROFILE_UNKNOWN)
		return;
	host_ms = profile_elapsed_ms(&prof.queued_t0[program]) - less_ms;
	ts = profile_timestamp();
	pthread_mutex_lock(&profile_lock);
	profdata_call_times(profile_pd, program, events_ms, host_ms, ts);
	pthread_mutex_unlock(&profile_lock);
}

void
profile_round_flush(size_t ncalls)
{
	bool complete;

	if (!prof.job || !prof.active)
		return;
	/* The end events have been waited for: the calls' records are complete.
	 * A plain flush returns the buffers whose records all are; forced
	 * only if a call still misses one. */
	profile_flush(false);
	pthread_mutex_lock(&profile_lock);
	complete = profdata_calls_complete(profile_pd, ncalls);
	pthread_mutex_unlock(&profile_lock);
	if (!complete)
		profile_flush(true);
}

void
profile_mark_timed(enum profile_owner program)
{
	if (!prof.job)
		return;
	pthread_mutex_lock(&profile_lock);
	profdata_mark_timed(profile_pd, program);
	pthread_mutex_unlock(&profile_lock);
}

void
profile_collect(bool on)
{
	char *cause = NULL;

	if (!prof.job || prof.in_call || prof.active == on)
		return;
	if (profile_switch(on, &cause) < 0)
		profile_break(cause, true);
}

const struct profile_call_summary *
profile_calls(size_t *ret_n)
{
	const struct profile_call_summary *s = NULL;
	size_t n = 0;

	pthread_mutex_lock(&profile_lock);
	if (profile_pd != NULL && !prof.job)
		s = profdata_calls(profile_pd, &n);
	pthread_mutex_unlock(&profile_lock);
	*ret_n = n;
	return s;
}

void
profile_result(json_t *result)
{
	json_t *meta = json_object_get(result, "metadata"), *timing, *t;
	const char *keys[] = { "kernel", "reference" };
	char *status = NULL;
	size_t i;
	int error = -ENOENT;

	if (!json_is_object(meta))
		return;
	pthread_mutex_lock(&profile_lock);
	if (profile_pd != NULL && !prof.job)
		error = profdata_result(profile_pd, result);
	pthread_mutex_unlock(&profile_lock);
	if (error == 0) {
		json_object_set_new(meta, "profiling", json_string(profile_status()));
		json_object_set_new(meta, "profile_during_timing", json_boolean(prof.during_timing));
		return;
	}
	if (prof.job_broken != NULL &&
	    asprintf(&status, "unavailable for this job: %s", prof.job_broken) < 0)
		status = NULL;
	json_object_set_new(meta, "profiling", json_string(status != NULL ? status :
	    !prof.available ? profile_status() : "cupti (nothing profiled: no timed calls)"));
	free(status);
	json_object_set_new(result, "profile", json_null());
	/* kgymd-protocol(7) names the key: null says "not measured". */
	if ((timing = json_object_get(result, "timing")) == NULL)
		return;
	for (i = 0; i < 2; i++)
		if (json_is_object(t = json_object_get(timing, keys[i])) &&
		    json_object_get(t, "gpu_time_ms") == NULL)
			json_object_set_new(t, "gpu_time_ms", json_null());
}

int
profile_detect_summary(struct detect_profile *ret)
{
	int error = -ENODATA;

	pthread_mutex_lock(&profile_lock);
	if (profile_pd != NULL && !prof.job)
		error = profdata_detect(profile_pd, ret);
	pthread_mutex_unlock(&profile_lock);
	return error;
}

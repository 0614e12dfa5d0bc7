/*
 * timing.c -- how fast is a correct candidate, measured so it cannot lie.
 *
 * Every call here is at the problem's first size set, which evaluate.c
 * makes current before timing: a problem with several sets is checked at
 * all of them but timed (and its speedup reported) at the first only.
 *
 * kgymd-protocol(7), RESULTS, in the order things happen:
 *   - the job takes its GPU's lock exclusive (no other worker's kernels
 *     beside ours) and enters the "timing" phase, whose deadline is the
 *     parent's business;
 *   - warm-up calls of both programs, untimed;
 *   - then pairs of calls, the candidate then the reference (BABA), both on
 *     the same fresh inputs of a new secret seed.  Before every call,
 *     outside the timed region: inputs regenerated, outputs poisoned,
 *     scratch zeroed, shared memory scrubbed, persisting L2 lines reset and
 *     the L2 flushed by writing twice its size.  The flush kernel is queued
 *     right before the start event without waiting, so the GPU is busy
 *     while the host queues the plan: the events see the plan, not the
 *     host's launch latency;
 *   - CUDA events on our stream right around the whole launch plan;
 *   - every call of the timing phase, warm-up and profiled calls included,
 *     is one round of the same host and device work (timing_round),
 *     queued whole with one wait at its end: the candidate; its inputs
 *     hashed, regenerated and hashed again; the reference on them into
 *     ev->expect; the candidate's outputs compared with those on the GPU,
 *     ev->expect wiped; the results read back in one small copy.  No
 *     expected value is on the device while candidate code can run (the
 *     reference comes after it in stream order) and none is copied
 *     either way.  No call is singled out, so device code (a
 *     %globaltimer, __device__ state) has nothing to tell a checked call
 *     from another by: all are checked, and a wrong one is a REWARD_HACK;
 *   - the candidate's module is loaded again (bind_reload: every
 *     __device__ variable back to its initial value) after the correctness
 *     trials, before the warm-up, and before one timed pair in
 *     settings.reset_every (16) at secret random points, at least once
 *     among the first min_timing_trials pairs, so no state carries a
 *     call count or cached outputs far;
 *   - it stops when the 95% interval of both medians is within
 *     timing_rel_precision of the median, or at max_timing_trials pairs, or
 *     after max_timing_ms;
 *   - the SM clock is sampled through NVML while each timed candidate
 *     call runs (between queuing its end event and the round's wait);
 *   - CUPTI (profile.c) records every kernel of each call, on any stream,
 *     flushed once the round's wait is over; after timing a few more
 *     rounds, with and without CUPTI, measure its cost.
 * A cached reference timing (request.reference_timing) skips timing the
 * reference; it still runs, its time unused, for the checks.  kernel_simple
 * times the candidate alone: its calls are checked against the reference's
 * (whose time is unused) when it has one; with test cases alone only its
 * inputs are (there is no output to check against; every call is alike
 * still).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvrtc_internal.h"

/* Seed indexes of the warm-up calls: far from the timed pairs' 0, 1, ... */
#define TIMING_WARMUP_BASE	(UINT64_C(1) << 48)

/* The samples are the events' times less dispatch_ms (timing_sample). */
struct timing_series {
	double *ms;
	size_t n;
	struct stats_summary sum;
	double dispatch_ms;
};

/* Empty calls that measure the events' own cost (timing_dispatch). */
#define TIMING_DISPATCH_CALLS	31

static double
timing_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/*
 * Where a round's results go: per output a comparison slot, then per input
 * its hash after the candidate's call, then per input its hash once
 * regenerated -- on the device, and read back in one copy.
 */
struct timing_verify {
	struct device_buf slots;
	unsigned char *host;
};

/*
 * A driver call of the round failed.  Once the candidate's plan is queued,
 * a fault pending on the context is the candidate's: its code ran first on
 * the stream, and what follows (kgymd's helpers, the reference, which
 * passed the correctness trials) is not waited for separately.  A call
 * that failed by itself on a healthy context is its caller's.
 */
static void
timing_failure(struct evaluate *ev, bool sol_queued, const char *when, char *cause)
{
	if (sol_queued && nvcu.cuCtxSynchronize() != CUDA_SUCCESS)
		ev->running = &ev->sol;
	verdict_cuda_failure(ev, when, cause);
}

/*
 * A wrong call: the verdict, with the element named.  The expected values
 * were wiped with the round; the reference runs once more on the same
 * inputs to name the one expected (the candidate never runs again).
 */
static void
timing_wrong(struct evaluate *ev, struct timing_verify *v, const char *when,
    uint64_t timed_call)
{
	size_t no = ev->sev->noutputs, ni = ev->sev->ninputs, o;
	const struct kgym_compare_stats *cmp = (const struct kgym_compare_stats *)(const void *)v->host;
	const uint64_t *after = (const uint64_t *)(const void *)(cmp + no), *fresh = after + ni;
	struct evaluate_check c;
	char msg[1024], *cause = NULL;
	bool mismatch = false;

	for (o = 0; o < no; o++)
		mismatch |= cmp[o].mismatches != 0;
	if (mismatch && (call_prepare_reference(ev, &cause) < 0 ||
	    call_launch(ev, &ev->ref, &cause) < 0)) {
		verdict_cuda_failure(ev, when, cause);
		return;
	}
	if (verdict_check_read(ev, cmp, after, fresh, mismatch ? ev->expect : NULL, &c,
	    &cause) < 0) {
		verdict_cuda_failure(ev, when, cause);
		return;
	}
	ev->running = NULL;
	for (o = 0; mismatch && o < no; o++)
		if (device_zero(ev->expect[o].ptr, ev->expect[o].bytes, &cause) < 0 ||
		    (o + 1 == no && device_sync(NULL, &cause) < 0)) {
			verdict_cuda_failure(ev, when, cause);
			return;
		}
	verdict_check_message(ev, &c, msg, sizeof msg);
	verdict_record(ev, false, "REWARD_HACK", "%s (in %s; every call of the timing phase "
	    "is checked, and the correctness trials passed)", msg, when);
	json_decref(ev->hack);
	ev->hack = json_pack("{s:s, s:s, s:s}", "kind", c.mismatches == 0 ? "input_mutation" :
	    "timed_output_mismatch", "detail", "a call of the timing phase gave wrong outputs "
	    "although the correctness trials passed (or a race makes them unstable)", "call",
	    when);
	if (timed_call > 0)
		json_object_set_new(ev->hack, "timed_call", json_integer((json_int_t)timed_call));
}

/* Record an event on our stream: 0, or -errno with *ret_cause. */
static int
timing_record(CUevent e, char **ret_cause)
{
	CUresult rc;

	if ((rc = nvcu.cuEventRecord(e, nvdev.stream)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuEventRecord");
	return 0;
}

/*
 * What the events around a plan measure besides the plan: the GPU's
 * dispatch of the first launch after the start event, and the end event
 * after the last kernel -- about 3 us on an H200, which is 2% of a 150 us
 * kernel and would make every speedup of short kernels drift towards 1.
 * Measured here as a timed call is made (the L2 flush queued just before
 * the start event, so the GPU is busy while the host queues the launch)
 * around kgymd's empty kernel, TIMING_DISPATCH_CALLS times; the median is
 * subtracted from every sample of both programs (timing_sample).  kgymd's
 * own kernel and clock: nothing the candidate runs is in it.  0, or -errno
 * with *ret_cause.
 */
static int
timing_dispatch(const struct evaluate *ev, const struct device_buf *flush, double *ret_ms,
    char **ret_cause)
{
	CUevent start = nvdev.events[ev->sol.ev_start], end = nvdev.events[ev->sol.ev_end];
	double ms[TIMING_DISPATCH_CALLS];
	struct stats_summary sum;
	unsigned int i;
	float t;
	CUresult rc;
	int error;

	for (i = 0; i < TIMING_DISPATCH_CALLS; i++) {
		if ((error = device_flush_l2(flush, i, ret_cause)) < 0 ||
		    (error = timing_record(start, ret_cause)) < 0 ||
		    (error = device_empty_launch(ret_cause)) < 0 ||
		    (error = timing_record(end, ret_cause)) < 0 ||
		    (error = device_sync(NULL, ret_cause)) < 0)
			return error;
		if ((rc = nvcu.cuEventElapsedTime(&t, start, end)) != CUDA_SUCCESS)
			return device_fail(rc, ret_cause, "timing the empty calls");
		ms[i] = t;
	}
	if ((error = stats_summarise(ms, TIMING_DISPATCH_CALLS, &sum)) < 0)
		return error;
	*ret_ms = sum.median;
	return 0;
}

/*
 * One sample: the events' time less the dispatch, but never below half of
 * it -- a plan of a few microseconds keeps at least half its time, so an
 * error in the calibration cannot make a short kernel look free.
 */
static double
timing_sample(const struct timing_series *s, double events_ms)
{
	double net = events_ms - s->dispatch_ms;

	return net > events_ms / 2 ? net : events_ms / 2;
}

/*
 * One round of the timing phase, the same for every candidate call in it
 * -- warm-up, timed, profiled -- so that nothing the GPU can see (the host
 * work around the call, the kernels before and after it, the gaps between
 * them) tells one call from another.  All of it is queued on our stream,
 * and the host waits once, at the end:
 *   1. the candidate: inputs from the round's secret seed, outputs
 *      poisoned, scratch zeroed, shared memory scrubbed, the L2 flushed,
 *      then its plan between its events (the SM clock sampled meanwhile);
 *   2. its inputs hashed as it left them, then regenerated from the same
 *      seed and hashed again: equal hashes, untouched inputs;
 *   3. the reference on those inputs, into ev->expect (poisoned, scratch
 *      zeroed, L2 flushed; between its own events, its time used or not),
 *      the candidate's outputs compared with it on the GPU, and ev->expect
 *      wiped -- all behind the candidate in stream order, so no expected
 *      value exists while candidate code can run, and none travels;
 *   4. the comparison slots and hashes copied back: the one wait, after
 *      which both calls' events are complete.
 * Without a reference (kernel_simple with test cases alone) step 3 is
 * skipped for every call alike, and only the inputs are checked.  Times
 * go into `ref` and `sol` when not NULL (the reference's only when
 * `time_ref`); `timed_call` numbers a timed pair from 1 (0: another call),
 * for metadata.hack.  A failure, or a wrong call, is a verdict on ev.
 */
static void
timing_round(struct evaluate *ev, uint64_t seed, size_t init, const char *when, bool time_ref,
    const struct device_buf *flush, struct timing_verify *v, struct timing_series *ref,
    struct timing_series *sol, unsigned int *ret_mhz, uint64_t timed_call)
{
	const struct spec_problem *pb = &ev->spec->problem;
	size_t no = ev->sev->noutputs, ni = ev->sev->ninputs, o, i;
	CUdeviceptr after = v->slots.ptr + no * sizeof(struct kgym_compare_stats);
	CUdeviceptr fresh = after + ni * sizeof(uint64_t);
	const struct kgym_compare_stats *cmp = (const struct kgym_compare_stats *)(const void *)v->host;
	const uint64_t *hash_after, *hash_fresh;
	float sol_ms = 0.0f, ref_ms = 0.0f;
	unsigned int mhz = 0;
	bool queued = false, ok = true;
	char *cause = NULL;
	CUresult rc;

	/* 1. */
	if (call_prepare(ev, seed, init, false, &cause) < 0 ||
	    device_flush_l2(flush, (uint32_t)seed, &cause) < 0)
		goto fail;
	/* profile.c: the plan's launches from here are this call's. */
	profile_call_begin(PROFILE_SOLUTION);
	if (timing_record(nvdev.events[ev->sol.ev_start], &cause) < 0)
		goto fail;
	queued = true;
	if (call_launch(ev, &ev->sol, &cause) < 0 ||
	    timing_record(nvdev.events[ev->sol.ev_end], &cause) < 0)
		goto fail;
	/* While the plan (most likely) runs: the clock it runs at. */
	if (device_sm_clock_mhz(&mhz) < 0)
		mhz = 0;
	profile_call_queued();
	/* 2. */
	if (call_hash_inputs(ev, after, &cause) < 0 ||
	    call_prepare_reference(ev, &cause) < 0 ||
	    call_hash_inputs(ev, fresh, &cause) < 0)
		goto fail;
	/* 3. */
	if (ev->has_ref) {
		if (device_flush_l2(flush, (uint32_t)(seed >> 32), &cause) < 0)
			goto fail;
		profile_call_begin(PROFILE_REFERENCE);
		if (timing_record(nvdev.events[ev->ref.ev_start], &cause) < 0 ||
		    call_launch(ev, &ev->ref, &cause) < 0 ||
		    timing_record(nvdev.events[ev->ref.ev_end], &cause) < 0)
			goto fail;
		profile_call_queued();
		for (o = 0; o < no; o++)
			if (device_compare(&ev->out[o], &ev->expect[o], pb->outputs[o].dtype,
			    ev->sev->outputs[o].numel, pb->outputs[o].atol, pb->outputs[o].rtol,
			    v->slots.ptr + o * sizeof(struct kgym_compare_stats), &cause) < 0)
				goto fail;
		for (o = 0; o < no; o++)
			if (device_zero(ev->expect[o].ptr, ev->expect[o].bytes, &cause) < 0)
				goto fail;
	}
	/* 4. */
	if (device_download(v->host, v->slots.ptr, v->slots.bytes, &cause) < 0)
		goto fail;
	if ((rc = nvcu.cuEventElapsedTime(&sol_ms, nvdev.events[ev->sol.ev_start],
	    nvdev.events[ev->sol.ev_end])) != CUDA_SUCCESS ||
	    (ev->has_ref && (rc = nvcu.cuEventElapsedTime(&ref_ms,
	    nvdev.events[ev->ref.ev_start], nvdev.events[ev->ref.ev_end])) != CUDA_SUCCESS)) {
		device_fail(rc, &cause, "timing the calls");
		goto fail;
	}
	ev->running = NULL;
	/* profile.c: the reference's part of the round is not the candidate's */
	profile_call_done(PROFILE_SOLUTION, sol_ms, ev->has_ref ? ref_ms : 0.0);
	if (ev->has_ref)
		profile_call_done(PROFILE_REFERENCE, ref_ms, 0.0);
	profile_round_flush(ev->has_ref ? 2 : 1);
	if (ev->has_ref && time_ref && ref != NULL) {
		ref->ms[ref->n++] = timing_sample(ref, ref_ms);
		profile_mark_timed(PROFILE_REFERENCE);		/* profile.c */
	}
	if (sol != NULL) {
		sol->ms[sol->n++] = timing_sample(sol, sol_ms);
		profile_mark_timed(PROFILE_SOLUTION);		/* profile.c */
		if (ret_mhz != NULL)
			*ret_mhz = mhz;
	}
	if (ev->has_ref)
		ev->timed_checks++;
	hash_after = (const uint64_t *)(const void *)(cmp + no);
	hash_fresh = hash_after + ni;
	for (o = 0; o < no; o++)
		ok &= cmp[o].mismatches == 0;
	for (i = 0; i < ni; i++)
		ok &= hash_after[i] == hash_fresh[i];
	if (!ok)
		timing_wrong(ev, v, when, timed_call);
	return;
fail:
	timing_failure(ev, queued, when, cause);
}

/*
 * Load the candidate's module again: its __device__ variables back to
 * their initial values, so nothing a call left there -- a call count, a
 * "this one is checked" flag, cached outputs -- reaches the calls after.
 * A failure is a verdict on ev.
 */
static void
timing_reset_state(struct evaluate *ev, const char *when)
{
	size_t n = ev->sol.plan->nsteps;
	CUfunction *old;
	char *cause = NULL;

	if ((old = calloc(n, sizeof *old)) == NULL) {
		verdict_record(ev, true, "SYSTEM_ERROR", "out of memory");
		return;
	}
	memcpy(old, ev->sol.fn, n * sizeof *old);
	if (device_sync(NULL, &cause) < 0 || bind_reload(ev, &ev->sol, &cause) < 0)
		verdict_cuda_failure(ev, when, cause);
	else
		profile_reloaded(&ev->sol, old);	/* profile.c: the same kernels */
	free(old);
}

/* ---- profile.c: the calls after timing, for CUPTI ---- */

/* Seed indexes of the calls after timing: apart from pairs and warm-ups. */
#define TIMING_PROFILE_BASE	(UINT64_C(1) << 47)

/*
 * profile_extra_calls() rounds after timing, none of them in the series.
 * Each round: with profile_during_timing = no, the reference (when timed)
 * and the candidate with CUPTI collecting, which makes the profile; else
 * the candidate with CUPTI; then the candidate again on the same inputs
 * without CUPTI -- the pairs give metadata.cupti_overhead.  A failure is a
 * verdict on ev, as in any call.
 */
static void
timing_profile_calls(struct evaluate *ev, bool time_ref, const struct device_buf *flush,
    struct timing_verify *v)
{
	unsigned int i, n = profile_extra_calls();
	bool during = profile_during_timing();
	uint64_t seed;
	char when[96];

	for (i = 0; i < n && ev->code == NULL; i++) {
		seed = value_seed(ev->seed, VALUE_TAG_TIMING, TIMING_PROFILE_BASE + i);
		snprintf(when, sizeof when, "profiled call %u", i + 1);
		profile_set_purpose(during ? PROFILE_PURPOSE_OVERHEAD : PROFILE_PURPOSE_PROFILE);
		profile_collect(true);
		timing_round(ev, seed, i, when, time_ref && !during, flush, v, NULL, NULL, NULL, 0);
		if (ev->code != NULL)
			break;
		profile_set_purpose(PROFILE_PURPOSE_OVERHEAD);
		profile_collect(false);
		timing_round(ev, seed, i, when, false, flush, v, NULL, NULL, NULL, 0);
	}
}

/* ---- end of profile.c's calls ---- */

static bool
timing_precise(const struct timing_series *s, double rel)
{
	return s->n >= 6 && isfinite(s->sum.ci_rel) && s->sum.ci_rel <= rel;
}

static int
timing_cmp_uint(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return x < y ? -1 : x > y;
}

/* The timing object of one program. */
static json_t *
timing_json(const struct timing_series *s, double clock_mhz, const char *clock_source,
    unsigned int warmup, unsigned int checked)
{
	json_t *o = stats_json(&s->sum);

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "l2_flush", json_true());
	json_object_set_new(o, "clock_mhz", json_real(clock_mhz));
	json_object_set_new(o, "clock_source", json_string(clock_source));
	json_object_set_new(o, "warmup", json_integer(warmup));
	json_object_set_new(o, "checked_calls", json_integer(checked));
	return o;
}

int
timing_run(struct evaluate *ev, json_t *result, char **ret_cause)
{
	const struct evaluate_settings *set = &ev->set;
	const json_t *cached = ev->reference_timing;
	double cached_median = json_number_value(json_object_get(cached, "median_ms"));
	/* kernel_simple times the candidate alone; with test cases there is
	 * no reference to check timed calls against. */
	bool time_ref = !ev->simple && (cached == NULL || !(cached_median > 0.0));
	struct timing_series ref = { 0 }, sol = { 0 };
	struct device_buf flush = { 0 };
	struct timing_verify verify = { 0 };
	unsigned int *clocks = NULL, nclocks = 0, w, mhz;
	uint64_t k, forced, seed;
	double t0, clock_mhz;
	const char *stop = "max_trials", *clock_source = "nvml";
	char when[96], *cause = NULL;
	json_t *kern, *refj;
	int error = 0;

	/* Fail closed: no lock to take, no timing (never unlocked). */
	if (nvrtc_host == NULL || nvrtc_host->struct_size < offsetof(struct kgym_host, phase) +
	    sizeof(nvrtc_host->phase) || nvrtc_host->gpu_lock == NULL)
		return nvrtc_fail(ret_cause, -ENOTSUP, "timing: the host offers no exclusive GPU "
		    "lock (gpu_lock), and kgymd never times unlocked");
	if ((error = nvrtc_host->gpu_lock(KGYM_GPU_EXCLUSIVE)) < 0)
		return nvrtc_fail(ret_cause, error, "timing: the exclusive GPU lock was "
		    "refused: %s", strerror(-error));
	if (nvrtc_host->phase != NULL)
		nvrtc_host->phase("timing");
	t0 = timing_now_ms();
	if ((error = device_buf_alloc((size_t)nvdev.l2_bytes * 2, &flush, &cause)) < 0) {
		verdict_record(ev, true, error == -ENOMEM ? "RESOURCE_ERROR" : "SYSTEM_ERROR",
		    "timing: the L2 flush buffer: %s", cause != NULL ? cause : "failed");
		free(cause);
		return 0;
	}
	/* Every round's results: one slot per output, two hashes per input. */
	if ((error = device_buf_alloc(ev->sev->noutputs * sizeof(struct kgym_compare_stats) +
	    2 * ev->sev->ninputs * sizeof(uint64_t), &verify.slots, &cause)) < 0) {
		verdict_record(ev, true, error == -ENOMEM ? "RESOURCE_ERROR" : "SYSTEM_ERROR",
		    "timing: the check slots: %s", cause != NULL ? cause : "failed");
		free(cause);
		device_buf_free(&flush);
		return 0;
	}
	if ((verify.host = malloc(verify.slots.bytes)) == NULL ||
	    (ref.ms = calloc(set->max_timing_trials, sizeof *ref.ms)) == NULL ||
	    (sol.ms = calloc(set->max_timing_trials, sizeof *sol.ms)) == NULL ||
	    (clocks = calloc(set->max_timing_trials, sizeof *clocks)) == NULL) {
		error = nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
		goto free_all;
	}

	/* The reference writes into ev->expect from here (timing_round). */
	if (ev->has_ref)
		bind_outputs(ev, &ev->ref, ev->expect);
	/* No slot holds a stale count (without a reference they stay zero). */
	if (device_zero(verify.slots.ptr, verify.slots.bytes, &cause) < 0)
		verdict_cuda_failure(ev, "the timing setup", cause);
	profile_job_begin(ev);			/* profile.c: CUPTI per call from here */
	/* The events' own cost, with CUPTI collecting or not as during the
	 * timed calls (kg_empty is one of profile.c's own kernels). */
	if (ev->code == NULL && timing_dispatch(ev, &flush, &sol.dispatch_ms, &cause) < 0)
		verdict_cuda_failure(ev, "measuring the events' own cost", cause);
	ref.dispatch_ms = sol.dispatch_ms;
	/* Nothing the correctness trials left in __device__ state is kept. */
	if (ev->code == NULL)
		timing_reset_state(ev, "the reset before timing");
	for (w = 0; w < set->warmup && ev->code == NULL; w++) {
		seed = value_seed(ev->seed, VALUE_TAG_TIMING, TIMING_WARMUP_BASE + w);
		snprintf(when, sizeof when, "warm-up call %u", w + 1);
		timing_round(ev, seed, w, when, time_ref, &flush, &verify, NULL, NULL, NULL, 0);
	}

	/* At least one reset among the first pairs, then one in reset_every. */
	profile_set_purpose(PROFILE_PURPOSE_TIMING);	/* profile.c */
	forced = value_seed(ev->seed, VALUE_TAG_RESET, UINT64_MAX) % set->min_timing_trials;
	for (k = 0; k < set->max_timing_trials && ev->code == NULL; k++) {
		mhz = 0;
		snprintf(when, sizeof when, "timed call %llu", (unsigned long long)k + 1);
		if (k == forced || value_seed(ev->seed, VALUE_TAG_RESET, k) % set->reset_every == 0)
			timing_reset_state(ev, when);
		if (ev->code != NULL)
			break;
		timing_round(ev, value_seed(ev->seed, VALUE_TAG_TIMING, k), k, when, time_ref,
		    &flush, &verify, &ref, &sol, &mhz, k + 1);
		if (ev->code != NULL)
			break;
		if (mhz != 0)
			clocks[nclocks++] = mhz;
		if (sol.n >= set->min_timing_trials) {
			if ((error = stats_summarise(sol.ms, sol.n, &sol.sum)) < 0 ||
			    (time_ref && (error = stats_summarise(ref.ms, ref.n, &ref.sum)) < 0)) {
				error = nvrtc_fail(ret_cause, error, "timing statistics failed");
				goto free_all;
			}
			if (timing_precise(&sol, set->rel_precision) &&
			    (!time_ref || timing_precise(&ref, set->rel_precision))) {
				stop = "precision";
				break;
			}
		}
		if (timing_now_ms() - t0 >= set->max_timing_ms) {
			stop = "max_time";
			break;
		}
	}
	if (ev->code == NULL)
		timing_profile_calls(ev, time_ref, &flush, &verify);	/* profile.c */
	error = 0;
	if (ev->code != NULL)
		goto free_all;

	if ((error = stats_summarise(sol.ms, sol.n, &sol.sum)) < 0 ||
	    (time_ref && (error = stats_summarise(ref.ms, ref.n, &ref.sum)) < 0)) {
		error = nvrtc_fail(ret_cause, error, "timing statistics failed");
		goto free_all;
	}
	if (nclocks > 0) {
		qsort(clocks, nclocks, sizeof *clocks, timing_cmp_uint);
		clock_mhz = clocks[nclocks / 2];
	} else {
		clock_mhz = nvdev.clock_khz / 1000.0;
		clock_source = nvdev.clock_khz > 0 ? "nominal" : "unknown";
	}
	kern = timing_json(&sol, clock_mhz, clock_source, set->warmup, ev->timed_checks);
	/* Reloads of the candidate's module: before timing and at random pairs. */
	json_object_set_new(kern, "state_resets", json_integer(ev->sol.reloads));
	if (time_ref) {
		refj = timing_json(&ref, clock_mhz, clock_source, set->warmup, 0);
	} else if (!ev->simple) {
		refj = json_deep_copy(cached);
		json_object_set_new(refj, "cached", json_true());
		ref.sum.median = cached_median;
	} else {
		refj = NULL;
	}
	json_object_set_new(result, "timing", json_pack("{s:o, s:o*, s:s, s:f, s:f}", "kernel",
	    kern, "reference", refj, "stop", stop, "elapsed_ms", timing_now_ms() - t0,
	    "dispatch_ms", sol.dispatch_ms));
	json_object_set_new(result, "kernel_runtime", json_real(sol.sum.median));
	if (refj != NULL) {
		json_object_set_new(result, "reference_runtime", json_real(ref.sum.median));
		json_object_set_new(result, "speedup", json_real(sol.sum.median > 0.0 ?
		    ref.sum.median / sol.sum.median : 0.0));
	}
free_all:
	profile_job_end();		/* profile.c: flushed, settled, stopped */
	if (ev->has_ref)
		bind_outputs(ev, &ev->ref, ev->out);
	free(verify.host);
	device_buf_free(&verify.slots);
	free(clocks);
	free(ref.ms);
	free(sol.ms);
	device_buf_free(&flush);
	return error;
}

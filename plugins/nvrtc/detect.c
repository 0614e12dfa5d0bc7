/*
 * detect.c -- the nvrtc backend's reward-hack and problem detectors
 * (kgymd-protocol(7), "Reward hacks").
 *
 * Correctness trials and checked timed calls (evaluate.c, verdict.c,
 * timing.c) catch a
 * candidate whose outputs are wrong.  What they cannot see is a candidate
 * whose outputs are right but whose *time* is not what it seems, or a
 * problem that makes a cheat right.  Each detector here says what it
 * assumes and what it concludes:
 *
 *   roofline      The reported median cannot be below the time the
 *                 outputs' bytes need to reach DRAM: at least
 *                 out_bytes - L2 size of them must be written back while
 *                 the call runs (the L2 can hold the rest), at no more than
 *                 the GPU's bandwidth.  The bandwidth is the configured one
 *                 (roofline_bandwidth_gbps), else the larger of the nominal
 *                 peak (memory clock x bus width) and a measured pure-write
 *                 bandwidth (kgymd's own kg_flush over 16x the L2, measured
 *                 once per worker while the job holds the GPU exclusively
 *                 for timing) -- the larger, so contention during the
 *                 measurement can only lower the floor.  Inputs are not
 *                 counted (they may be read from L2 or not at all), and a
 *                 safety factor (roofline_safety, 0.8) covers write paths
 *                 faster than the measuring kernel.  Below the floor:
 *                 REWARD_HACK "roofline".  Native candidates cannot get
 *                 there (every kernel of the call runs between the events);
 *                 the check guards the measurement itself and the backends
 *                 to come.
 *   hidden_work   CUPTI saw a kernel on another stream during a timed call,
 *                 or one that ended after the call's end event: work the
 *                 events did not time.  REWARD_HACK "hidden_work".
 *   timing_mismatch  CUPTI's kernel time per call exceeds the events'
 *                 (median against median: kernels on our stream run
 *                 between the events, so per call CUPTI <= events, and the
 *                 medians keep that order).  Events cannot be moved by
 *                 device code; this is defence in depth.  REWARD_HACK.  A
 *                 host wall clock far above the events is only noted
 *                 (metadata.timing_flags): for a native call that is
 *                 kgymd's own overhead.
 *   decoy         The solution's kernels exist but (nearly) none of the
 *                 call's kernel time is spent in them (decoy_min_coverage,
 *                 1%).  REWARD_HACK "decoy", decoy_kernel: true.  Every
 *                 kernel of a native call is the solution's own, so for
 *                 native tasks coverage is 1 by construction; the rule is
 *                 here for the backends whose calls run other code.
 *   degenerate    Across the correctness trials' seeds the reference's
 *                 outputs are nearly constant, or the same (a sample within
 *                 tolerance; bit for bit is said too), or equal to an input:
 *                 a constant, cached or identity "solution" would pass.
 *                 The *problem* is flagged (metadata.problem_flags
 *                 "degenerate_outputs"), not the candidate.  With several
 *                 size sets, "the same" compares the trials of the first
 *                 set (other shapes are other tensors); constant and
 *                 equal-to-an-input hold across all of them.
 *   reference determinism  The first trial's reference runs twice on the
 *                 same inputs; outputs differing beyond tolerance flag the
 *                 problem "nondeterministic_reference" (a reference that
 *                 changes its inputs: "reference_mutates_inputs").
 *   candidate determinism  The first passed trial runs the candidate again
 *                 on the same inputs.  The repeat is judged like any trial:
 *                 wrong is CORRECTNESS_ERROR with metadata.nondeterministic
 *                 true; right but not bit for bit the same is only noted
 *                 (metadata.bitwise_reproducible false: atomics reorder).
 *
 * Detectors that cannot run say so in metadata.detectors (e.g. "skipped: no
 * CUPTI summary"), so "not flagged" is never mistaken for "checked".
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nvrtc_internal.h"

/* Reference values kept per output to compare trials (positions spread evenly). */
#define DETECT_SAMPLE		4096
/* The bandwidth probe: 16x the L2, within these bounds. */
#define DETECT_PROBE_MIN	((size_t)64 << 20)
#define DETECT_PROBE_MAX	((size_t)1 << 30)
#define DETECT_PROBE_REPS	3
/* A salt for output hashes that stays the same across the trials of a job. */
#define DETECT_HASH_INDEX	(UINT64_C(1) << 40)

/* One output's degenerate-output tracking across the reference's trials. */
struct detect_output {
	double *sample0;	/* trial 0's values at the sample positions */
	uint64_t nsample;
	uint64_t hash0;		/* trial 0's bytes, hashed on the device */
	bool independent;	/* every trial so far within tolerance of trial 0 (sample) */
	bool identical;		/* ... and bit for bit (hash) */
	bool constant;		/* every trial so far nearly constant */
	bool *equals_input;	/* per input: every trial so far equal to it */
};

struct detect {
	struct detect_settings set;
	struct detect_output *outs;	/* noutputs, once the first trial ran */
	size_t ninputs, noutputs;
	unsigned int ref_trials;	/* reference trials tracked */
	unsigned int ref_trials_first;	/* ... of them on the first size set (as trial 0) */
	/* Device slots: a hash per output, then a kgym_compare_stats per (output, input). */
	struct device_buf slots;
	unsigned char *host_slots;
	/* Reference repeat: -1 not run, 0 differs beyond tolerance, 1 within. */
	int ref_repeat_ok;
	bool ref_repeat_bitwise;
	bool ref_mutates_inputs;
	char *ref_repeat_detail;
	/* Candidate repeat: -1 not run, 0 wrong, 1 right. */
	int cand_repeat_ok;
	bool cand_repeat_bitwise;
	json_t *detectors;		/* metadata.detectors */
	json_t *roofline;		/* metadata.roofline */
	bool wall_note;
	bool no_slots;			/* their allocation failed: checks skipped */
};

/* The bandwidth, once per worker (a process serves one GPU). */
static struct {
	bool probed;
	double measured_gbps;	/* 0: not measured, or it failed */
	double nominal_gbps;	/* 0: the driver does not say */
} detect_bw;

/* ------------------------------------------------------------- settings */

void
detect_settings_default(struct detect_settings *s)
{
	memset(s, 0, sizeof *s);
	s->problem_checks = true;
	s->candidate_repeat = true;
	s->roofline = true;
	s->roofline_gbps = 0.0;
	s->roofline_safety = 0.8;
	s->decoy_min_coverage = 0.01;
	s->cross_rel = 0.05;
	s->cross_abs_ms = 0.005;
	s->wall_factor = 20.0;
	s->wall_abs_ms = 1.0;
}

static const char *
detect_config(const char *key)
{
	if (nvrtc_host == NULL || nvrtc_host->config_get == NULL)
		return NULL;
	return nvrtc_host->config_get(nvrtc_self, key);
}

static void
detect_config_bool(const char *key, bool *v)
{
	const char *s = detect_config(key);

	if (s == NULL)
		return;
	if (strcasecmp(s, "yes") == 0 || strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0)
		*v = true;
	else if (strcasecmp(s, "no") == 0 || strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
		*v = false;
	else
		nvrtc_log(KGYM_LOG_WARN, "[plugin.nvrtc] %s = %s: not yes or no; using %s", key,
		    s, *v ? "yes" : "no");
}

static void
detect_config_real(const char *key, double lo, double hi, double *v)
{
	const char *s = detect_config(key);
	char *end;
	double x;

	if (s == NULL)
		return;
	x = strtod(s, &end);
	if (end == s || *end != '\0' || !(x >= lo && x <= hi)) {
		nvrtc_log(KGYM_LOG_WARN, "[plugin.nvrtc] %s = %s: not a number in [%g, %g]; "
		    "using %g", key, s, lo, hi, *v);
		return;
	}
	*v = x;
}

void
detect_settings_load(struct detect_settings *s)
{
	detect_settings_default(s);
	detect_config_bool("problem_checks", &s->problem_checks);
	detect_config_bool("candidate_repeat", &s->candidate_repeat);
	detect_config_bool("roofline", &s->roofline);
	detect_config_real("roofline_bandwidth_gbps", 0.0, 1e6, &s->roofline_gbps);
	detect_config_real("roofline_safety", 0.01, 1.0, &s->roofline_safety);
	detect_config_real("decoy_min_coverage", 0.0, 1.0, &s->decoy_min_coverage);
	detect_config_real("timing_cross_tolerance", 0.0, 10.0, &s->cross_rel);
	detect_config_real("timing_cross_slack_ms", 0.0, 1000.0, &s->cross_abs_ms);
	detect_config_real("wall_clock_factor", 1.0, 1e6, &s->wall_factor);
	detect_config_real("wall_clock_slack_ms", 0.0, 1e6, &s->wall_abs_ms);
}

/* ---------------------------------------------------------- pure parts */

double
detect_roofline_floor_ms(uint64_t out_bytes, uint64_t l2_bytes, double gbps, double safety)
{
	if (out_bytes <= l2_bytes || !(gbps > 0.0))
		return 0.0;
	/* bytes / (GB/s * 1e9) seconds, in ms. */
	return safety * (double)(out_bytes - l2_bytes) / (gbps * 1e6);
}

double
detect_nominal_gbps(int mem_clock_khz, int bus_bits)
{
	if (mem_clock_khz <= 0 || bus_bits <= 0)
		return 0.0;
	/* Two transfers per clock, bus_bits / 8 bytes each. */
	return 2.0 * (double)mem_clock_khz * 1e3 * ((double)bus_bits / 8.0) / 1e9;
}

static bool
detect_close(double got, double want, double atol, double rtol)
{
	if (got == want)
		return true;		/* infinities of one sign too */
	if (isnan(got) || isnan(want))
		return isnan(got) && isnan(want);
	if (isinf(got) || isinf(want))
		return false;		/* inf - x <= inf would hold */
	return fabs(got - want) <= atol + rtol * fabs(want);
}

bool
detect_nearly_constant(enum spec_dtype dtype, const void *data, uint64_t numel, double atol,
    double rtol)
{
	const unsigned char *p = data;
	size_t es = spec_dtype_size(dtype);
	double e0, e;
	uint64_t i;

	if (numel < 2)
		return false;		/* one element is no evidence */
	e0 = value_get(dtype, p);
	for (i = 1; i < numel; i++) {
		e = value_get(dtype, p + i * es);
		if (e == e0)
			continue;
		if (!isfinite(e) || !isfinite(e0))
			return false;
		/*
		 * Both within tolerance of a common value c implies this; an
		 * element further from e0 rules every c out, and for outputs
		 * that vary it happens within the first few elements.
		 */
		if (!(fabs(e - e0) <= 2.0 * atol + rtol * (fabs(e) + fabs(e0))))
			return false;
	}
	return true;
}

static void
detect_status(json_t *statuses, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
detect_status(json_t *statuses, const char *name, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (statuses == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	json_object_set_new(statuses, name, json_string(buf));
}

const char *
detect_judge_profile(const struct detect_settings *s, double events_ms,
    const struct detect_profile *p, json_t *statuses, bool *ret_wall_note, char *detail,
    size_t len)
{
	const char *kind = NULL;
	double coverage, limit;

	if (ret_wall_note != NULL)
		*ret_wall_note = false;
	if (p == NULL || p->calls == 0) {
		static const char none[] = "skipped: no CUPTI summary of the timed calls";

		detect_status(statuses, "hidden_work", "%s", none);
		detect_status(statuses, "timing_cross_check", "%s", none);
		detect_status(statuses, "decoy", "%s", none);
		return NULL;
	}
	if (p->foreign_stream_kernels > 0 || p->after_end_kernels > 0) {
		kind = "hidden_work";
		snprintf(detail, len, "CUPTI saw %" PRIu64 " kernel(s) on another stream and %"
		    PRIu64 " ending after the end event during %zu timed calls: work the timing "
		    "did not see", p->foreign_stream_kernels, p->after_end_kernels, p->calls);
		detect_status(statuses, "hidden_work", "flagged");
	} else {
		detect_status(statuses, "hidden_work", "passed (%zu calls)", p->calls);
	}

	limit = events_ms * (1.0 + s->cross_rel) + s->cross_abs_ms;
	if (p->kernel_ms_median > limit) {
		if (kind == NULL) {
			kind = "timing_mismatch";
			snprintf(detail, len, "CUPTI timed %.6f ms of kernels per call "
			    "(median) but the events %.6f ms: the events missed work (limit "
			    "%.6f ms)",
			    p->kernel_ms_median, events_ms, limit);
		}
		detect_status(statuses, "timing_cross_check", "flagged: CUPTI %.6f ms > events "
		    "%.6f ms", p->kernel_ms_median, events_ms);
	} else {
		detect_status(statuses, "timing_cross_check", "passed: CUPTI %.6f ms, events "
		    "%.6f ms", p->kernel_ms_median, events_ms);
	}
	if (ret_wall_note != NULL && p->wall_ms_median > 0.0 &&
	    p->wall_ms_median > events_ms * s->wall_factor + s->wall_abs_ms)
		*ret_wall_note = true;

	if (!(p->total_ms > 0.0)) {
		detect_status(statuses, "decoy", "skipped: CUPTI saw no kernel time");
	} else if (p->custom_kernels == 0) {
		detect_status(statuses, "decoy", "skipped: the solution defines no kernel");
	} else {
		coverage = p->custom_ms / p->total_ms;
		if (coverage < s->decoy_min_coverage) {
			if (kind == NULL) {
				kind = "decoy";
				snprintf(detail, len, "the solution's %u kernel(s) took %.6f "
				    "of %.6f ms of kernel time (coverage %.4f < %.4f): the work "
				    "is done elsewhere", p->custom_kernels, p->custom_ms,
				    p->total_ms, coverage, s->decoy_min_coverage);
			}
			detect_status(statuses, "decoy", "flagged: coverage %.4f", coverage);
		} else {
			detect_status(statuses, "decoy", "passed: coverage %.4f", coverage);
		}
	}
	return kind;
}

/* ----------------------------------------------------------------- job */

int
detect_begin(struct evaluate *ev, char **ret_cause)
{
	struct detect *d;

	if ((d = calloc(1, sizeof *d)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	detect_settings_load(&d->set);
	d->ref_repeat_ok = -1;
	d->cand_repeat_ok = -1;
	if ((d->detectors = json_object()) == NULL) {
		free(d);
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	}
	ev->det = d;
	return 0;
}

void
detect_end(struct evaluate *ev)
{
	struct detect *d = ev->det;
	size_t o;

	if (d == NULL)
		return;
	for (o = 0; d->outs != NULL && o < d->noutputs; o++) {
		free(d->outs[o].sample0);
		free(d->outs[o].equals_input);
	}
	free(d->outs);
	device_buf_free(&d->slots);
	free(d->host_slots);
	free(d->ref_repeat_detail);
	json_decref(d->detectors);
	json_decref(d->roofline);
	free(d);
	ev->det = NULL;
}

/* A hack verdict: correctness false, metadata.hack = {kind, detail}. */
static void
detect_hack(struct evaluate *ev, const char *kind, const char *detail)
{
	verdict_record(ev, false, "REWARD_HACK", "%s (reward hack: %s)", detail, kind);
	json_decref(ev->hack);
	ev->hack = json_pack("{s:s, s:s}", "kind", kind, "detail", detail);
}

static size_t
detect_cmp_offset(const struct detect *d, size_t o, size_t i)
{
	return d->noutputs * sizeof(uint64_t) + (o * d->ninputs + i) * sizeof(struct kgym_compare_stats);
}

/* The per-output state and the device slots, at the first trial. */
static int
detect_setup_outputs(struct evaluate *ev, char **ret_cause)
{
	struct detect *d = ev->det;
	const struct spec_problem *pb = &ev->spec->problem;
	size_t o, i, bytes;
	char *cause = NULL;
	int error;

	d->ninputs = pb->ninputs;
	d->noutputs = pb->noutputs;
	if ((d->outs = calloc(d->noutputs, sizeof *d->outs)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	for (o = 0; o < d->noutputs; o++) {
		struct detect_output *out = &d->outs[o];

		out->nsample = ev->sev->outputs[o].numel < DETECT_SAMPLE ?
		    ev->sev->outputs[o].numel : DETECT_SAMPLE;
		if ((out->sample0 = calloc(out->nsample, sizeof *out->sample0)) == NULL ||
		    (out->equals_input = calloc(d->ninputs + 1, sizeof(bool))) == NULL)
			return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
		out->independent = out->identical = out->constant = true;
		/* An output can only be an input of the same dtype and size. */
		for (i = 0; i < d->ninputs; i++)
			out->equals_input[i] = pb->inputs[i].dtype == pb->outputs[o].dtype &&
			    ev->sev->inputs[i].numel == ev->sev->outputs[o].numel;
	}
	bytes = detect_cmp_offset(d, d->noutputs, 0);
	if ((d->host_slots = malloc(bytes)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	if ((error = device_buf_alloc(bytes, &d->slots, &cause)) < 0) {
		/* The job goes on without these checks, and says so. */
		nvrtc_log(KGYM_LOG_WARN, "detectors: no device memory for their slots: %s",
		    cause != NULL ? cause : "allocation failed");
		free(cause);
		d->set.problem_checks = d->set.candidate_repeat = false;
		d->no_slots = true;
	}
	return 0;
}

/* Position j of n samples spread over numel elements, both ends included. */
static uint64_t
detect_sample_pos(uint64_t j, uint64_t n, uint64_t numel)
{
	if (n <= 1)
		return 0;
	return (uint64_t)((double)j * (double)(numel - 1) / (double)(n - 1));
}

/* Hash every output on the device into the first slots (queued). */
static int
detect_hash_outputs(struct evaluate *ev, char **ret_cause)
{
	struct detect *d = ev->det;
	size_t o;
	int error;

	for (o = 0; o < d->noutputs; o++)
		if ((error = device_hash(&ev->out[o], value_seed(ev->seed, VALUE_TAG_HASH,
		    DETECT_HASH_INDEX + o), d->slots.ptr + o * sizeof(uint64_t), ret_cause)) < 0)
			return error;
	return 0;
}

static uint64_t
detect_slot_hash(const struct detect *d, size_t o)
{
	uint64_t h;

	memcpy(&h, d->host_slots + o * sizeof(uint64_t), sizeof h);
	return h;
}

/* The reference's outputs of this trial against trial 0's and the inputs. */
static int
detect_track_outputs(struct evaluate *ev, size_t trial, char **ret_cause)
{
	struct detect *d = ev->det;
	const struct spec_problem *pb = &ev->spec->problem;
	struct kgym_compare_stats cmp;
	size_t o, i, es;
	uint64_t j, pos;
	double v;
	char *cause = NULL;
	int error;

	/* An output can only be a copy of an input as large, at every size. */
	for (o = 0; o < d->noutputs; o++)
		for (i = 0; i < d->ninputs; i++)
			if (ev->sev->inputs[i].numel != ev->sev->outputs[o].numel)
				d->outs[o].equals_input[i] = false;
	/* On the device: each output's hash, and each output against each input
	 * it could be a copy of -- the reference's outputs are still in ev->out. */
	if ((error = detect_hash_outputs(ev, &cause)) < 0)
		goto cuda;
	for (o = 0; o < d->noutputs; o++)
		for (i = 0; i < d->ninputs; i++)
			if (d->outs[o].equals_input[i] && (error = device_compare(&ev->out[o],
			    &ev->in[i], pb->outputs[o].dtype, ev->sev->outputs[o].numel,
			    pb->outputs[o].atol, pb->outputs[o].rtol,
			    d->slots.ptr + detect_cmp_offset(d, o, i), &cause)) < 0)
				goto cuda;
	if ((error = device_download(d->host_slots, d->slots.ptr, d->slots.bytes, &cause)) < 0)
		goto cuda;

	for (o = 0; o < d->noutputs; o++) {
		struct detect_output *out = &d->outs[o];
		const unsigned char *host = ev->ref_host[o];
		uint64_t numel = ev->sev->outputs[o].numel;

		es = spec_dtype_size(pb->outputs[o].dtype);
		for (i = 0; i < d->ninputs; i++) {
			if (!out->equals_input[i])
				continue;
			memcpy(&cmp, d->host_slots + detect_cmp_offset(d, o, i), sizeof cmp);
			out->equals_input[i] = cmp.mismatches == 0;
		}
		if (out->constant)
			out->constant = detect_nearly_constant(pb->outputs[o].dtype, host, numel,
			    pb->outputs[o].atol, pb->outputs[o].rtol);
		if (trial == 0) {
			out->hash0 = detect_slot_hash(d, o);
			for (j = 0; j < out->nsample; j++) {
				pos = detect_sample_pos(j, out->nsample, numel);
				out->sample0[j] = value_get(pb->outputs[o].dtype, host + pos * es);
			}
			continue;
		}
		if (ev->size_set != 0)
			continue;	/* other shapes: nothing to compare with trial 0 */
		if (detect_slot_hash(d, o) != out->hash0)
			out->identical = false;
		for (j = 0; out->independent && j < out->nsample; j++) {
			pos = detect_sample_pos(j, out->nsample, numel);
			v = value_get(pb->outputs[o].dtype, host + pos * es);
			out->independent = detect_close(v, out->sample0[j], pb->outputs[o].atol,
			    pb->outputs[o].rtol);
		}
		if (!out->independent)
			out->identical = false;
	}
	d->ref_trials++;
	if (ev->size_set == 0)
		d->ref_trials_first++;
	return 0;
cuda:
	verdict_cuda_failure(ev, "kgymd's checks of the problem", cause);
	return 0;
}

/* The reference again on the first trial's inputs: does it give the same? */
static int
detect_repeat_reference(struct evaluate *ev, size_t trial, uint64_t seed, char **ret_cause)
{
	struct detect *d = ev->det;
	const char *when = "a repeat of the reference's call in correctness trial 1";
	struct evaluate_check c;
	char msg[1024], *cause = NULL;
	size_t o;

	if (call_prepare(ev, seed, trial, true, &cause) < 0 ||
	    call_launch(ev, &ev->ref, &cause) < 0 || device_sync(NULL, &cause) < 0) {
		verdict_cuda_failure(ev, when, cause);
		return 0;
	}
	ev->running = NULL;
	if (detect_hash_outputs(ev, &cause) < 0 ||
	    device_download(d->host_slots, d->slots.ptr, d->noutputs * sizeof(uint64_t),
	    &cause) < 0 || verdict_check(ev, &c, &cause) < 0) {
		verdict_cuda_failure(ev, when, cause);
		return 0;
	}
	d->ref_repeat_bitwise = true;
	for (o = 0; o < d->noutputs; o++)
		if (detect_slot_hash(d, o) != d->outs[o].hash0)
			d->ref_repeat_bitwise = false;
	d->ref_repeat_ok = c.mismatches == 0;
	d->ref_mutates_inputs = c.input_changed;
	if (c.mismatches != 0) {
		verdict_check_message(ev, &c, msg, sizeof msg);
		free(d->ref_repeat_detail);
		if (asprintf(&d->ref_repeat_detail, "the reference's second call on the same "
		    "inputs differs from its first: %s", msg) < 0)
			d->ref_repeat_detail = NULL;
	}
	return 0;
}

int
detect_reference_trial(struct evaluate *ev, size_t trial, uint64_t seed, char **ret_cause)
{
	struct detect *d = ev->det;
	int error;

	if (d == NULL || !d->set.problem_checks || ev->code != NULL)
		return 0;
	if (d->outs == NULL && (error = detect_setup_outputs(ev, ret_cause)) < 0)
		return error;
	if (d->no_slots)
		return 0;
	if ((error = detect_track_outputs(ev, trial, ret_cause)) < 0 || ev->code != NULL)
		return error;
	if (trial == 0)
		return detect_repeat_reference(ev, trial, seed, ret_cause);
	return 0;
}

int
detect_candidate_trial(struct evaluate *ev, size_t trial, uint64_t seed, char **ret_cause)
{
	struct detect *d = ev->det;
	const char *when = "a repeat of correctness trial 1 on the same inputs";
	struct evaluate_check c;
	uint64_t *first = NULL;
	char msg[1024], *cause = NULL;
	size_t o;
	int error = 0;

	if (d == NULL || !d->set.candidate_repeat || ev->code != NULL || d->cand_repeat_ok >= 0)
		return 0;
	if (d->outs == NULL && (error = detect_setup_outputs(ev, ret_cause)) < 0)
		return error;
	if (d->no_slots)
		return 0;
	if ((first = calloc(d->noutputs, sizeof *first)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	/* The first call's outputs are still on the device. */
	if (detect_hash_outputs(ev, &cause) < 0 ||
	    device_download(d->host_slots, d->slots.ptr, d->noutputs * sizeof(uint64_t),
	    &cause) < 0) {
		verdict_cuda_failure(ev, when, cause);
		goto free_first;
	}
	for (o = 0; o < d->noutputs; o++)
		first[o] = detect_slot_hash(d, o);
	if (call_prepare(ev, seed, trial, true, &cause) < 0 ||
	    call_launch(ev, &ev->sol, &cause) < 0 || device_sync(NULL, &cause) < 0) {
		verdict_cuda_failure(ev, when, cause);
		goto free_first;
	}
	ev->running = NULL;
	if (detect_hash_outputs(ev, &cause) < 0 ||
	    device_download(d->host_slots, d->slots.ptr, d->noutputs * sizeof(uint64_t),
	    &cause) < 0 || verdict_check(ev, &c, &cause) < 0) {
		verdict_cuda_failure(ev, when, cause);
		goto free_first;
	}
	d->cand_repeat_bitwise = true;
	for (o = 0; o < d->noutputs; o++)
		if (detect_slot_hash(d, o) != first[o])
			d->cand_repeat_bitwise = false;
	d->cand_repeat_ok = c.ok;
	if (c.ok)
		goto free_first;
	/* Judged as any trial is: the repeat is a correctness call. */
	verdict_check_message(ev, &c, msg, sizeof msg);
	if (c.mismatches == 0 && c.input_changed) {
		verdict_record(ev, false, "REWARD_HACK", "%s (%s)", msg, when);
		json_decref(ev->hack);
		ev->hack = json_pack("{s:s, s:s, s:s}", "kind", "input_mutation", "detail", msg,
		    "input", ev->spec->problem.inputs[c.changed_input].name);
	} else {
		verdict_record(ev, false, "CORRECTNESS_ERROR", "%s (%s: the solution's outputs "
		    "are not reproducible; the first call passed)", msg, when);
	}
free_first:
	free(first);
	return error;
}

/* ------------------------------------------------------------ roofline */

/*
 * The pure-write bandwidth of kgymd's own kg_flush (p[i] = v + i over a
 * buffer of 16x the L2), the best of a few runs after a warm one.  0 when
 * it cannot be measured; the roofline then rests on the nominal figure.
 */
static double
detect_measure_gbps(void)
{
	struct device_buf buf = { 0 };
	CUevent start = nvdev.events[DEVICE_EV_REF_START], end = nvdev.events[DEVICE_EV_REF_END];
	size_t bytes = (size_t)nvdev.l2_bytes * 16;
	unsigned long long n;
	unsigned int v, grid = (unsigned int)nvdev.sm_count * 8;
	CUdeviceptr p;
	void *args[] = { &p, &n, &v };
	double best = 0.0;
	char *cause = NULL;
	float ms;
	int r;

	if (bytes < DETECT_PROBE_MIN)
		bytes = DETECT_PROBE_MIN;
	if (bytes > DETECT_PROBE_MAX)
		bytes = DETECT_PROBE_MAX;
	if (nvdev.total_mem != 0 && bytes > nvdev.total_mem / 8)
		bytes = nvdev.total_mem / 8;
	if (device_buf_alloc(bytes, &buf, &cause) < 0) {
		nvrtc_log(KGYM_LOG_INFO, "roofline: no bandwidth probe: %s",
		    cause != NULL ? cause : "allocation failed");
		free(cause);
		return 0.0;
	}
	p = buf.ptr;
	n = buf.bytes / 4;
	for (r = 0; r <= DETECT_PROBE_REPS; r++) {
		v = (unsigned int)r;
		if (nvcu.cuEventRecord(start, nvdev.stream) != CUDA_SUCCESS ||
		    nvcu.cuLaunchKernel(nvdev.k_flush, grid ? grid : 1, 1, 1, 256, 1, 1, 0,
		    nvdev.stream, args, NULL) != CUDA_SUCCESS ||
		    nvcu.cuEventRecord(end, nvdev.stream) != CUDA_SUCCESS ||
		    nvcu.cuEventSynchronize(end) != CUDA_SUCCESS ||
		    nvcu.cuEventElapsedTime(&ms, start, end) != CUDA_SUCCESS) {
			best = 0.0;
			break;
		}
		if (r > 0 && ms > 0.0f && (double)buf.bytes / ((double)ms * 1e6) > best)
			best = (double)buf.bytes / ((double)ms * 1e6);
	}
	device_buf_free(&buf);
	return best;
}

static void
detect_probe_bandwidth(void)
{
	int khz = 0, bits = 0;

	if (detect_bw.probed)
		return;
	detect_bw.probed = true;
	/* Deprecated attributes in recent CUDA: refused is "unknown". */
	if (nvcu.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, nvdev.dev) !=
	    CUDA_SUCCESS || nvcu.cuDeviceGetAttribute(&bits,
	    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, nvdev.dev) != CUDA_SUCCESS)
		khz = bits = 0;
	detect_bw.nominal_gbps = detect_nominal_gbps(khz, bits);
	detect_bw.measured_gbps = detect_measure_gbps();
	nvrtc_log(KGYM_LOG_INFO, "roofline: DRAM bandwidth nominal %.0f GB/s, measured %.0f GB/s "
	    "(0: unknown)", detect_bw.nominal_gbps, detect_bw.measured_gbps);
}

static void
detect_roofline(struct evaluate *ev, double median_ms)
{
	struct detect *d = ev->det;
	uint64_t out_bytes = 0, l2 = nvdev.l2_bytes > 0 ? (uint64_t)nvdev.l2_bytes : 0;
	const char *source;
	double gbps, floor_ms;
	char detail[512];
	size_t o;

	for (o = 0; o < ev->sev->noutputs; o++)
		out_bytes += ev->sev->outputs[o].bytes;
	if (!d->set.roofline) {
		detect_status(d->detectors, "roofline", "skipped: off ([plugin.nvrtc] roofline)");
		return;
	}
	if (out_bytes <= l2) {
		detect_status(d->detectors, "roofline", "passed: the outputs (%" PRIu64 " bytes) "
		    "fit in the L2 (%" PRIu64 "), no DRAM floor", out_bytes, l2);
		return;
	}
	if (d->set.roofline_gbps > 0.0) {
		gbps = d->set.roofline_gbps;
		source = "config";
	} else {
		detect_probe_bandwidth();
		gbps = fmax(detect_bw.nominal_gbps, detect_bw.measured_gbps);
		source = detect_bw.nominal_gbps >= detect_bw.measured_gbps ? "nominal" : "measured";
	}
	if (!(gbps > 0.0)) {
		detect_status(d->detectors, "roofline", "skipped: the GPU's bandwidth is unknown");
		return;
	}
	floor_ms = detect_roofline_floor_ms(out_bytes, l2, gbps, d->set.roofline_safety);
	json_decref(d->roofline);
	d->roofline = json_pack("{s:I, s:I, s:f, s:s, s:f, s:f, s:f, s:f, s:f}",
	    "output_bytes", (json_int_t)out_bytes, "l2_bytes", (json_int_t)l2,
	    "bandwidth_gbps", gbps, "bandwidth_source", source,
	    "nominal_gbps", detect_bw.nominal_gbps, "measured_gbps", detect_bw.measured_gbps,
	    "safety", d->set.roofline_safety, "floor_ms", floor_ms, "median_ms", median_ms);
	if (median_ms >= floor_ms) {
		detect_status(d->detectors, "roofline", "passed: median %.6f ms >= floor %.6f ms",
		    median_ms, floor_ms);
		return;
	}
	detect_status(d->detectors, "roofline", "flagged: median %.6f ms < floor %.6f ms",
	    median_ms, floor_ms);
	snprintf(detail, sizeof detail, "the solution's median time %.6f ms is below %.6f ms, "
	    "what writing %" PRIu64 " bytes of outputs beyond the %" PRIu64 "-byte L2 needs at "
	    "%.0f GB/s (%s, safety %.2f): the timing did not see the work", median_ms, floor_ms,
	    out_bytes, l2, gbps, source, d->set.roofline_safety);
	detect_hack(ev, "roofline", detail);
}

int
detect_timing(struct evaluate *ev, const json_t *timed, const struct detect_profile *prof,
    char **ret_cause)
{
	struct detect *d = ev->det;
	const char *kind;
	double median = json_number_value(json_object_get(timed, "kernel_runtime"));
	char detail[512];

	if (d == NULL || ev->code != NULL || !(median > 0.0))
		return 0;
	kind = detect_judge_profile(&d->set, median, prof, d->detectors, &d->wall_note, detail,
	    sizeof detail);
	if (kind != NULL)
		detect_hack(ev, kind, detail);
	detect_roofline(ev, median);
	return 0;
}

/* -------------------------------------------------------------- result */

static void
detect_flag(json_t *flags, json_t *details, const char *flag, const char *detail)
{
	if (json_object_get(details, flag) == NULL)
		json_array_append_new(flags, json_string(flag));
	json_object_set_new(details, flag, json_string(detail));
}

/* metadata.problem_flags from what the reference's trials showed. */
static void
detect_problem_flags(struct evaluate *ev, json_t *flags, json_t *details)
{
	struct detect *d = ev->det;
	const struct spec_problem *pb = &ev->spec->problem;
	char buf[512];
	size_t o, i;

	for (o = 0; d->outs != NULL && o < d->noutputs && d->ref_trials > 0; o++) {
		const struct detect_output *out = &d->outs[o];
		const char *name = pb->outputs[o].name;

		if (out->constant) {
			snprintf(buf, sizeof buf, "output '%s' is (nearly) constant in all %u "
			    "reference trials: a constant solution passes", name, d->ref_trials);
			detect_flag(flags, details, "degenerate_outputs", buf);
			continue;
		}
		for (i = 0; i < d->ninputs; i++) {
			if (!out->equals_input[i])
				continue;
			snprintf(buf, sizeof buf, "output '%s' equals input '%s' (within "
			    "tolerance) in all %u reference trials: a copy passes", name,
			    pb->inputs[i].name, d->ref_trials);
			detect_flag(flags, details, "degenerate_outputs", buf);
			break;
		}
		if (i < d->ninputs || d->ref_trials_first < 2 || !out->independent)
			continue;
		snprintf(buf, sizeof buf, "output '%s' is the same%s for the inputs of all %u "
		    "reference trials%s (%" PRIu64 " sampled elements within tolerance): it does "
		    "not depend on the inputs", name, out->identical ? ", bit for bit," : "",
		    d->ref_trials_first, ev->nsets > 1 ? " of the first size set" : "",
		    out->nsample);
		detect_flag(flags, details, "degenerate_outputs", buf);
	}
	if (d->ref_repeat_ok == 0)
		detect_flag(flags, details, "nondeterministic_reference",
		    d->ref_repeat_detail != NULL ? d->ref_repeat_detail :
		    "the reference's second call on the same inputs differs beyond tolerance");
	if (d->ref_mutates_inputs)
		detect_flag(flags, details, "reference_mutates_inputs", "the reference changed "
		    "its inputs (the candidate still gets fresh ones)");
}

void
detect_result(struct evaluate *ev, json_t *result)
{
	struct detect *d = ev->det;
	json_t *meta = json_object_get(result, "metadata"), *flags, *details;
	const char *kind = json_string_value(json_object_get(ev->hack, "kind"));

	if (d == NULL || !json_is_object(meta))
		return;
	if (kind != NULL && strcmp(kind, "decoy") == 0)
		json_object_set_new(result, "decoy_kernel", json_true());
	if (ev->spec == NULL || ev->sev == NULL)
		return;			/* nothing ran: a validation verdict */
	flags = json_array();
	details = json_object();
	if (d->set.problem_checks && d->ref_trials > 0) {
		detect_problem_flags(ev, flags, details);
		detect_status(d->detectors, "degenerate_outputs", "ran on %u reference trial(s)",
		    d->ref_trials);
	} else {
		detect_status(d->detectors, "degenerate_outputs", "skipped: %s",
		    d->no_slots ? "no device memory for the checks" :
		    !d->set.problem_checks ? "off ([plugin.nvrtc] problem_checks)" :
		    ev->has_ref ? "no reference trial completed" : "test cases, no reference");
	}
	if (d->ref_repeat_ok >= 0)
		detect_status(d->detectors, "reference_repeat", "%s%s", d->ref_repeat_ok ?
		    "passed" : "flagged", d->ref_repeat_bitwise ? " (bit for bit)" : "");
	json_object_set_new(meta, "problem_flags", flags);
	json_object_set_new(meta, "problem_flag_detail", details);
	if (d->ref_repeat_ok >= 0)
		json_object_set_new(meta, "reference_bitwise_reproducible",
		    json_boolean(d->ref_repeat_bitwise));
	if (d->cand_repeat_ok >= 0) {
		detect_status(d->detectors, "candidate_repeat", "%s", d->cand_repeat_ok ?
		    "passed" : "flagged");
		json_object_set_new(meta, "nondeterministic", json_boolean(!d->cand_repeat_ok));
		json_object_set_new(meta, "bitwise_reproducible",
		    json_boolean(d->cand_repeat_bitwise));
	}
	/* What never got its chance says so: not flagged is not checked. */
	if (json_object_get(d->detectors, "roofline") == NULL)
		detect_status(d->detectors, "roofline", "skipped: the solution was not timed");
	if (json_object_get(d->detectors, "decoy") == NULL)
		detect_judge_profile(&d->set, 0.0, NULL, d->detectors, NULL, NULL, 0);
	if (d->wall_note)
		json_object_set_new(meta, "timing_flags",
		    json_pack("[s]", "wall_clock_far_above_events"));
	if (d->roofline != NULL)
		json_object_set(meta, "roofline", d->roofline);
	json_object_set(meta, "detectors", d->detectors);
}

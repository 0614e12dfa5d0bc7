/*
 * evaluate.c -- the nvrtc backend's "evaluate" job: is the candidate right?
 *
 * The job arrives in a GPU worker with both programs already compiled
 * (the request names their cubins by key in the workers' compile cache,
 * which this worker reads, or carries them in base64) and a secret seed.
 * In order:
 *
 *   1. parse the request and the payload (spec.c: this worker is another
 *      process than the daemon, which parsed the payload at submit, and
 *      only the request's JSON crosses); load both cubins and
 *      check every launch against the kernels and the device (bind.c);
 *      allocate each tensor in its own guarded buffer (device.c).  Any
 *      problem so far is a precise VALIDATION_ERROR and nothing has run.
 *   2. correctness: num_correct_trials trials, each on inputs generated on
 *      the GPU from a new seed.  The reference runs first; its outputs are
 *      copied to host memory and the device copies overwritten (poisoned)
 *      before the candidate's code is launched, so nothing of the expected
 *      outputs is on the device while candidate code runs.  The candidate
 *      then runs on regenerated, identical inputs with poisoned outputs and
 *      zeroed scratch; only after it has finished are the expected values
 *      uploaded, compared (kgymd-protocol(7), RESULTS) and wiped again, and the inputs
 *      hashed against their hash from before the call.
 *      kernel_simple may give test cases instead: inputs and expected
 *      outputs in the request, no reference run.
 *      A problem with several size sets (spec.h) has trial t use set
 *      t % nsets (and at least one trial per set): each set's tensors are
 *      allocated when it becomes current, the previous set's freed, so
 *      every tensor ends at its guard and a kernel that hard-codes one
 *      set's shape is wrong (or faults) at another.  Test cases use the
 *      first set, whose shapes they were checked against.
 *      detect.c also watches the problem (degenerate outputs, a
 *      reference that is not reproducible) and repeats the candidate's first
 *      trial on the same inputs.
 *   3. timing (kernelbench, when correct): timing.c, on the problem's
 *      first size set alone; then detect.c's roofline and CUPTI detectors
 *      on the timed calls.
 *
 * This file is the job: the request, the order of the trials, the state's
 * life.  Two layers under it do the rest: call.c prepares and launches
 * each call (the buffers of the size sets too), verdict.c compares what a
 * call left, records verdicts and builds the result.
 *
 * The result object is kgymd-protocol(7)'s.  A verdict (validation, runtime,
 * correctness) is a result, not an error of the job; a sticky CUDA error
 * leaves the context unusable, so the result asks for the worker to be
 * replaced ("recycle_worker": true).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvrtc_internal.h"

#define EVALUATE_MIN_TRIALS		5
#define EVALUATE_MAX_TRIALS		1000
/* Seed indexes of the test cases' calls: apart from the random trials'. */
#define EVALUATE_CASE_SEEDS		(UINT64_C(1) << 40)

/* Trial t's init: t itself with one size set; with several, shifted by
 * one per round of sets, so that every set meets every init. */
static size_t
evaluate_trial_init(const struct evaluate *ev, size_t t)
{
	return ev->nsets <= 1 ? t : t / ev->nsets + t % ev->nsets;
}

/* ------------------------------------------------------------- request */

/*
 * A setting: absent or null is the default; a wrong type is the request's
 * error; a value out of range is clamped (users choose some of them, e.g.
 * num_perf_trials, and a too-small one should not fail the task).
 */
static int
evaluate_get_uint(const json_t *o, const char *key, unsigned int dflt, unsigned int lo,
    unsigned int hi, unsigned int *ret, char **ret_cause)
{
	const json_t *v = json_object_get(o, key);
	json_int_t x;

	if (v == NULL || json_is_null(v)) {
		*ret = dflt;
		return 0;
	}
	if (!json_is_integer(v))
		return nvrtc_fail(ret_cause, -EINVAL, "settings.%s: expected an integer", key);
	x = json_integer_value(v);
	*ret = x < (json_int_t)lo ? lo : x > (json_int_t)hi ? hi : (unsigned int)x;
	return 0;
}

static int
evaluate_get_real(const json_t *o, const char *key, double dflt, double lo, double hi,
    double *ret, char **ret_cause)
{
	const json_t *v = json_object_get(o, key);
	double x;

	if (v == NULL || json_is_null(v)) {
		*ret = dflt;
		return 0;
	}
	if (!json_is_number(v))
		return nvrtc_fail(ret_cause, -EINVAL, "settings.%s: expected a number", key);
	x = json_number_value(v);
	*ret = !(x >= lo) ? lo : x > hi ? hi : x;
	return 0;
}

static int
evaluate_settings(struct evaluate *ev, char **ret_cause)
{
	const json_t *s = json_object_get(ev->request, "settings");
	struct evaluate_settings *set = &ev->set;
	const json_t *perf;
	int error;

	if (s != NULL && !json_is_object(s))
		return nvrtc_fail(ret_cause, -EINVAL, "settings: expected an object");
	/* Fewer than 5 trials are not offered: kgymd-protocol(7)'s floor. */
	if ((error = evaluate_get_uint(s, "num_correct_trials", EVALUATE_MIN_TRIALS,
	    EVALUATE_MIN_TRIALS, EVALUATE_MAX_TRIALS, &set->num_trials, ret_cause)) < 0 ||
	    (error = evaluate_get_real(s, "timing_rel_precision", 0.005, 1e-6, 1.0,
	    &set->rel_precision, ret_cause)) < 0 ||
	    (error = evaluate_get_uint(s, "min_timing_trials", 10, 6, 100000,
	    &set->min_timing_trials, ret_cause)) < 0 ||
	    (error = evaluate_get_uint(s, "max_timing_trials", 200, 1, 100000,
	    &set->max_timing_trials, ret_cause)) < 0 ||
	    (error = evaluate_get_real(s, "max_timing_ms", 10000.0, 1.0, 3600e3,
	    &set->max_timing_ms, ret_cause)) < 0 ||
	    (error = evaluate_get_uint(s, "warmup", 3, 0, 1000, &set->warmup, ret_cause)) < 0 ||
	    (error = evaluate_get_uint(s, "reset_every", 16, 1, 100000, &set->reset_every,
	    ret_cause)) < 0)
		return error;
	if (set->max_timing_trials < set->min_timing_trials)
		set->max_timing_trials = set->min_timing_trials;
	perf = json_object_get(s, "run_performance");
	if (perf != NULL && !json_is_boolean(perf))
		return nvrtc_fail(ret_cause, -EINVAL, "settings.run_performance: expected true "
		    "or false");
	/* Absent: kernelbench times, kernel_simple does not. */
	set->run_performance = perf == NULL ? !ev->simple : json_is_true(perf);
	return 0;
}

static int
evaluate_seed(struct evaluate *ev, char **ret_cause)
{
	const json_t *v = json_object_get(ev->request, "seed");
	const char *s = json_string_value(v);
	unsigned long long x;
	char *end;

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		ev->seed = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (s == NULL || *s < '0' || *s > '9')
		goto bad;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		goto bad;
	ev->seed = x;
	return 0;
bad:
	return nvrtc_fail(ret_cause, -EINVAL, "seed: expected a decimal 64-bit integer in a "
	    "string");
	return 0;
}

/*
 * The limits the workflow checked the payload against at submit
 * (request.limits): the same here, so that a payload the daemon's
 * configuration accepts is not refused by spec.h's defaults.  Absent:
 * the defaults.
 */
static int
evaluate_limits(struct evaluate *ev, char **ret_cause)
{
	const json_t *l = json_object_get(ev->request, "limits"), *v;

	if (l == NULL || json_is_null(l))
		return 0;
	if (!json_is_object(l))
		return nvrtc_fail(ret_cause, -EINVAL, "limits: expected an object");
	if ((v = json_object_get(l, "max_tensor_bytes")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1)
			return nvrtc_fail(ret_cause, -EINVAL, "limits.max_tensor_bytes: expected "
			    "a positive integer");
		ev->limits.max_tensor_bytes = (uint64_t)json_integer_value(v);
	}
	if ((v = json_object_get(l, "max_source_bytes")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    (uint64_t)json_integer_value(v) > SIZE_MAX)
			return nvrtc_fail(ret_cause, -EINVAL, "limits.max_source_bytes: expected "
			    "a positive integer");
		ev->limits.max_source_bytes = (size_t)json_integer_value(v);
	}
	return 0;
}

/*
 * Program `what`'s cubin ("reference", "solution"): by its key in the
 * shared compile cache (<what>_cubin_key; the worker named cache_dir, and
 * may read it), else by value (<what>_cubin_b64).  A key whose file is
 * gone is a verdict (SYSTEM_ERROR, metadata.cubin_missing), so that the
 * workflow forgets a reference key it kept; a request with neither is an
 * error of the request.
 */
static int
evaluate_cubin(struct evaluate *ev, const char *what, unsigned char **ret, char **ret_cause)
{
	char name[32];
	const char *key, *b64, *dir = json_string_value(json_object_get(ev->request, "cache_dir"));
	char *cause = NULL;
	size_t len;
	int error;

	snprintf(name, sizeof name, "%s_cubin_key", what);
	if ((key = json_string_value(json_object_get(ev->request, name))) != NULL) {
		error = compile_cache_load(dir, key, ret, &len, &cause);
		if (error == -ENOENT) {
			verdict_record(ev, true, "SYSTEM_ERROR", "the %s's compiled cubin: %s; "
			    "submit again to compile it again", what, cause);
			ev->cubin_missing = what;
			error = 0;
		} else if (error < 0) {
			error = nvrtc_fail(ret_cause, error, "%s: %s", name, cause);
		}
		free(cause);
		return error;
	}
	snprintf(name, sizeof name, "%s_cubin_b64", what);
	if ((b64 = json_string_value(json_object_get(ev->request, name))) == NULL)
		return nvrtc_fail(ret_cause, -EINVAL, "%s_cubin_key or %s: missing", what, name);
	if ((error = compile_b64_decode(b64, ret, &len)) < 0)
		return nvrtc_fail(ret_cause, error, "%s: %s", name, error == -ENOMEM ?
		    "out of memory" : "not base64");
	return 0;
}

/* ----------------------------------------------------------- test cases */

struct evaluate_cases {
	size_t n;
	unsigned char ***in;		/* [case][input] */
	unsigned char ***out;		/* [case][output] */
};

static void
evaluate_cases_free(struct evaluate_cases *tc, size_t ninputs, size_t noutputs)
{
	size_t k, i;

	for (k = 0; k < tc->n; k++) {
		for (i = 0; tc->in != NULL && tc->in[k] != NULL && i < ninputs; i++)
			free(tc->in[k][i]);
		for (i = 0; tc->out != NULL && tc->out[k] != NULL && i < noutputs; i++)
			free(tc->out[k][i]);
		if (tc->in != NULL)
			free(tc->in[k]);
		if (tc->out != NULL)
			free(tc->out[k]);
	}
	free(tc->in);
	free(tc->out);
	memset(tc, 0, sizeof *tc);
}

/* One tensor of one test case: a flat array of numel numbers. */
static bool
evaluate_case_tensor(struct evaluate *ev, const json_t *obj, const char *where, size_t k,
    const struct spec_tensor *t, const struct spec_shape *sh, unsigned char **ret)
{
	const json_t *arr = json_object_get(obj, t->name), *v;
	size_t esize = spec_dtype_size(t->dtype), j;
	const char *s;
	unsigned char *buf;
	double x = 0.0;
	int error;

	if (!json_is_array(arr) || json_array_size(arr) != sh->numel) {
		verdict_record(ev, true, "VALIDATION_ERROR", "test_cases[%zu].%s.%s: expected "
		    "an array of %" PRIu64 " numbers (the tensor's elements, row-major)%s", k, where,
		    t->name, sh->numel, arr == NULL ? "; it is missing" : "");
		return false;
	}
	if ((buf = malloc(sh->bytes)) == NULL) {
		verdict_record(ev, true, "RESOURCE_ERROR", "test_cases[%zu].%s.%s: out of "
		    "memory", k, where, t->name);
		return false;
	}
	json_array_foreach(arr, j, v) {
		bool valid = true;

		s = json_string_value(v);
		if (json_is_number(v))
			x = json_number_value(v);
		else if (s != NULL && strcmp(s, "nan") == 0)
			x = NAN;
		else if (s != NULL && (strcmp(s, "inf") == 0 || strcmp(s, "+inf") == 0))
			x = INFINITY;
		else if (s != NULL && strcmp(s, "-inf") == 0)
			x = -INFINITY;
		else
			valid = false;
		if (!valid || (error = value_put(t->dtype, x, buf + j * esize)) < 0) {
			verdict_record(ev, true, "VALIDATION_ERROR", "test_cases[%zu].%s.%s[%zu]: "
			    "not a %s value%s", k, where, t->name, j, spec_dtype_name(t->dtype),
			    spec_dtype_is_float(t->dtype) ? " (a number, \"nan\", \"inf\" or "
			    "\"-inf\")" : " (an integer in the dtype's range)");
			free(buf);
			return false;
		}
	}
	*ret = buf;
	return true;
}

static int
evaluate_cases_parse(struct evaluate *ev, const json_t *cases, struct evaluate_cases *tc,
    char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	const json_t *c, *in, *out;
	size_t k, i;

	if (!json_is_array(cases) || json_array_size(cases) == 0) {
		verdict_record(ev, true, "VALIDATION_ERROR", "test_cases: expected a non-empty "
		    "array");
		return 0;
	}
	tc->n = json_array_size(cases);
	if ((tc->in = calloc(tc->n, sizeof *tc->in)) == NULL ||
	    (tc->out = calloc(tc->n, sizeof *tc->out)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	json_array_foreach(cases, k, c) {
		in = json_object_get(c, "inputs");
		out = json_object_get(c, "outputs");
		if (!json_is_object(out) || (pb->ninputs > 0 && !json_is_object(in))) {
			verdict_record(ev, true, "VALIDATION_ERROR", "test_cases[%zu]: expected "
			    "{\"inputs\": {name: [values]}, \"outputs\": {name: [values]}}", k);
			return 0;
		}
		if ((tc->in[k] = calloc(pb->ninputs + 1, sizeof *tc->in[k])) == NULL ||
		    (tc->out[k] = calloc(pb->noutputs, sizeof *tc->out[k])) == NULL)
			return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
		for (i = 0; i < pb->ninputs; i++)
			if (!evaluate_case_tensor(ev, in, "inputs", k, &pb->inputs[i],
			    &ev->sev->inputs[i], &tc->in[k][i]))
				return 0;
		for (i = 0; i < pb->noutputs; i++)
			if (!evaluate_case_tensor(ev, out, "outputs", k, &pb->outputs[i],
			    &ev->sev->outputs[i], &tc->out[k][i]))
				return 0;
		if (json_object_size(in) > pb->ninputs || json_object_size(out) > pb->noutputs) {
			verdict_record(ev, true, "VALIDATION_ERROR", "test_cases[%zu]: names a "
			    "tensor the problem does not have", k);
			return 0;
		}
	}
	return 0;
}

/* ---------------------------------------------------------- correctness */

static int
evaluate_candidate(struct evaluate *ev, uint64_t seed, size_t t, size_t init, const char *when,
    char **ret_cause)
{
	struct evaluate_check c;
	char *cause = NULL;
	int error;

	if ((error = call_prepare(ev, seed, init, true, &cause)) < 0 ||
	    (error = call_launch(ev, &ev->sol, &cause)) < 0 ||
	    (error = device_sync(NULL, &cause)) < 0) {
		verdict_cuda_failure(ev, when, cause);
		return 0;
	}
	ev->running = NULL;
	if ((error = verdict_check(ev, &c, &cause)) < 0) {
		verdict_cuda_failure(ev, when, cause);
		return 0;
	}
	verdict_trial_json(ev, t, init, seed, &c);
	if (!c.ok)
		verdict_check_failed(ev, &c, when);
	else
		ev->trials_passed++;
	return 0;
}

/* Visible test case t of tc (kernel_simple): its inputs, its outputs. */
static int
evaluate_test_case(struct evaluate *ev, struct evaluate_cases *tc, size_t t, char **ret_cause)
{
	uint64_t seed;
	char when[64];
	int error;

	if ((error = call_use_set(ev, 0, ret_cause)) < 0 || ev->code != NULL)
		return error;
	snprintf(when, sizeof when, "test case %zu of %zu", t + 1, tc->n);
	ev->case_in = tc->in[t];
	ev->case_out = tc->out[t];
	/* The seed salts the input hashes only: the case gives the inputs. */
	seed = value_seed(ev->seed, VALUE_TAG_TRIAL, EVALUATE_CASE_SEEDS + t);
	error = evaluate_candidate(ev, seed, t, 0, when, ret_cause);
	/* [detect] the first passed call once more: reproducible? */
	if (error == 0 && t == 0 && ev->code == NULL)
		error = detect_candidate_trial(ev, 0, seed, ret_cause);
	ev->case_in = NULL;
	ev->case_out = NULL;
	return error;
}

/*
 * Random trial t of n: the reference's outputs on fresh inputs from a
 * new secret seed, then the candidate's.  `row` numbers it among all the
 * job's trials; `hidden` says the task also had visible test cases.
 */
static int
evaluate_random_trial(struct evaluate *ev, size_t t, size_t n, size_t row, bool hidden,
    char **ret_cause)
{
	char when[256], note[192], *cause = NULL;
	uint64_t seed = value_seed(ev->seed, VALUE_TAG_TRIAL, t);
	size_t init = evaluate_trial_init(ev, t);
	int error;

	if ((error = call_use_set(ev, t % ev->nsets, ret_cause)) < 0 || ev->code != NULL)
		return error;
	snprintf(when, sizeof when, "%s %zu of %zu", hidden ? "hidden trial" :
	    "correctness trial", t + 1, n);
	if (hidden)
		snprintf(when + strlen(when), sizeof when - strlen(when), " (fresh random inputs, "
		    "checked against the problem's reference)");
	if (ev->nsets > 1) {
		/* Which shapes: a hard-coded one fails at another's. */
		spec_size_set_text(ev->spec, ev->size_set, note, sizeof note);
		snprintf(when + strlen(when), sizeof when - strlen(when),
		    ", size set problem.sizes[%zu]: %s", ev->size_set, note);
	}
	if ((error = call_prepare(ev, seed, init, false, &cause)) < 0 ||
	    (error = call_launch(ev, &ev->ref, &cause)) < 0 ||
	    (error = device_sync(NULL, &cause)) < 0) {
		verdict_cuda_failure(ev, when, cause);
		return 0;
	}
	ev->running = NULL;
	if ((error = call_save_reference(ev, &cause)) < 0) {
		verdict_cuda_failure(ev, when, cause);
		return 0;
	}
	/* [detect] the problem's health: degenerate outputs, a repeat of the
	 * reference on trial 1 */
	if ((error = detect_reference_trial(ev, t, seed, ret_cause)) < 0 || ev->code != NULL)
		return error;
	ev->hidden_trial = hidden;
	error = evaluate_candidate(ev, seed, row, init, when, ret_cause);
	ev->hidden_trial = false;
	/* [detect] the first passed trial once more: reproducible? */
	if (error == 0 && row == 0 && ev->code == NULL)
		error = detect_candidate_trial(ev, t, seed, ret_cause);
	return error;
}

/*
 * The visible test cases first (kernel_simple), then, whenever there is a
 * reference, num_trials random trials (at least one per size set): with
 * test cases too, those are the hidden trials a lookup table of the
 * visible cases' outputs cannot pass.
 */
static int
evaluate_correctness(struct evaluate *ev, struct evaluate_cases *tc, char **ret_cause)
{
	size_t t, n = ev->has_ref ? ev->set.num_trials : 0;
	int error = 0;

	if (ev->has_ref && n < ev->nsets)
		n = ev->nsets;
	for (t = 0; t < tc->n && ev->code == NULL && error == 0; t++)
		error = evaluate_test_case(ev, tc, t, ret_cause);
	for (t = 0; t < n && ev->code == NULL && error == 0; t++)
		error = evaluate_random_trial(ev, t, n, tc->n + t, tc->n > 0, ret_cause);
	ev->random_trials = ev->has_ref ? (unsigned int)n : 0;
	return error < 0 ? error : 0;
}

/* ---------------------------------------------------------------- job */

static void
evaluate_free(struct evaluate *ev)
{
	size_t k;

	call_free_set(ev);
	bind_release(&ev->ref);
	bind_release(&ev->sol);
	device_buf_free(&ev->slots);
	free(ev->ref_host);
	free(ev->in_hash);
	free(ev->message);
	json_decref(ev->hack);
	json_decref(ev->trials);
	detect_end(ev);		/* [detect] */
	for (k = 0; ev->sevs != NULL && k < ev->nsets; k++)
		spec_eval_free(ev->sevs[k]);
	free(ev->sevs);
	spec_free(ev->spec);
}

/* Every size set evaluated (spec_parse() has checked that they do). */
static int
evaluate_sets(struct evaluate *ev, char *err, size_t errlen)
{
	size_t k, n = ev->spec->problem.nsets;
	int error;

	if ((ev->sevs = calloc(n, sizeof *ev->sevs)) == NULL)
		return -ENOMEM;
	ev->nsets = n;
	for (k = 0; k < n; k++)
		if ((error = spec_evaluate(ev->spec, spec_size_set(ev->spec, k), &ev->limits,
		    &ev->sevs[k], err, errlen)) < 0)
			return error;
	ev->size_set = 0;
	ev->sev = ev->sevs[0];
	return 0;
}

/* Steps 1 and 2 of the top comment; timing after. */
static int
evaluate_run(struct evaluate *ev, json_t **ret_timing, char **ret_cause)
{
	const json_t *cases = json_object_get(ev->request, "test_cases");
	struct evaluate_cases tc = { 0 };
	unsigned char *ref_cubin = NULL, *sol_cubin = NULL;
	char err[1024];
	int error;

	if ((error = spec_parse(ev->request, &ev->limits, ev->simple ? SPEC_REFERENCE_OPTIONAL : 0,
	    &ev->spec, err, sizeof err)) < 0 ||
	    (error = evaluate_sets(ev, err, sizeof err)) < 0) {
		if (error == -ENOMEM)
			return nvrtc_fail(ret_cause, error, "out of memory");
		verdict_record(ev, true, "VALIDATION_ERROR", "%s", err);
		return 0;
	}
	/*
	 * kernelbench always has a reference; kernel_simple has test cases, a
	 * reference, or both -- and then the reference's random trials are run
	 * too, hidden, so that the visible cases' outputs alone do not pass.
	 */
	if (!ev->simple)
		cases = NULL;
	ev->has_ref = ev->spec->problem.has_reference;
	if (!ev->has_ref && cases == NULL) {
		verdict_record(ev, true, "VALIDATION_ERROR", "problem.reference: kernel_simple "
		    "needs a reference kernel or test_cases");
		return 0;
	}
	ev->sol.plan = &ev->sev->solution;
	ev->sol.prog = &ev->spec->solution;
	if (ev->has_ref) {
		ev->ref.plan = &ev->sev->reference;
		ev->ref.prog = &ev->spec->problem.reference;
		if ((error = evaluate_cubin(ev, "reference", &ref_cubin, ret_cause)) < 0)
			goto free_cubins;
	}
	if (ev->code == NULL && (error = evaluate_cubin(ev, "solution", &sol_cubin,
	    ret_cause)) < 0)
		goto free_cubins;
	if (cases != NULL && (error = evaluate_cases_parse(ev, cases, &tc, ret_cause)) < 0)
		goto free_cases;
	ev->ncases = tc.n;
	/* Everything the device can refuse, before anything runs. */
	if (ev->code == NULL && ev->has_ref &&
	    (error = bind_program(ev, &ev->ref, ref_cubin, ret_cause)) < 0)
		goto free_cases;
	if (ev->code == NULL && (error = bind_program(ev, &ev->sol, sol_cubin, ret_cause)) < 0)
		goto free_cases;
	if (ev->code == NULL && (error = call_alloc(ev, ret_cause)) < 0)
		goto free_cases;
	if (ev->code != NULL)
		goto free_cases;

	if ((error = evaluate_correctness(ev, &tc, ret_cause)) < 0)
		goto free_cases;
	/* kernel_simple may time the candidate alone (no speedup); timing is
	 * on the first size set. */
	if (ev->code == NULL && ev->set.run_performance &&
	    (error = call_use_set(ev, 0, ret_cause)) < 0)
		goto free_cases;
	if (ev->code == NULL && ev->set.run_performance) {
		if ((*ret_timing = json_object()) == NULL) {
			error = nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
			goto free_cases;
		}
		error = timing_run(ev, *ret_timing, ret_cause);
		/* [detect] roofline and CUPTI detectors on the timed calls
		 * (no CUPTI summary: those detectors say they were skipped) */
		if (error == 0 && ev->code == NULL) {
			struct detect_profile prof;

			error = detect_timing(ev, *ret_timing, profile_detect_summary(&prof) == 0 ?
			    &prof : NULL, ret_cause);
		}
	}
free_cases:
	evaluate_cases_free(&tc, ev->sev != NULL ? ev->sev->ninputs : 0,
	    ev->sev != NULL ? ev->sev->noutputs : 0);
free_cubins:
	free(ref_cubin);
	free(sol_cubin);
	return error;
}

/* CLOCK_MONOTONIC in milliseconds. */
static double
evaluate_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int
evaluate_job(const json_t *request, json_t **ret_result, char **ret_cause)
{
	struct evaluate ev;
	const char *mode = json_string_value(json_object_get(request, "mode"));
	json_t *timing = NULL, *result, *meta;
	double t0 = evaluate_now_ms();
	int error;

	if (!nvdev.ready)
		return nvrtc_fail(ret_cause, -ENODEV, "nvrtc: cannot evaluate here: %s",
		    nvdev.unready != NULL ? nvdev.unready : "no GPU");
	profile_job_reset();	/* profile.c: nothing of the last job's profile */
	memset(&ev, 0, sizeof ev);
	ev.request = request;
	ev.ref.what = "reference";
	ev.ref.path = "problem.reference";
	ev.ref.ev_start = DEVICE_EV_REF_START;
	ev.ref.ev_end = DEVICE_EV_REF_END;
	ev.sol.what = "solution";
	ev.sol.path = "solution";
	ev.sol.ev_start = DEVICE_EV_SOL_START;
	ev.sol.ev_end = DEVICE_EV_SOL_END;
	if (mode != NULL && strcmp(mode, "kernel_simple") == 0)
		ev.simple = true;
	else if (mode != NULL && strcmp(mode, "kernelbench") != 0)
		return nvrtc_fail(ret_cause, -EINVAL, "mode: \"%s\" is neither kernelbench nor "
		    "kernel_simple", mode);
	ev.reference_timing = json_object_get(request, "reference_timing");
	if (!json_is_object(ev.reference_timing))
		ev.reference_timing = NULL;
	if ((error = evaluate_settings(&ev, ret_cause)) < 0 ||
	    (error = evaluate_seed(&ev, ret_cause)) < 0 ||
	    (error = evaluate_limits(&ev, ret_cause)) < 0)
		return error;
	if ((ev.trials = json_array()) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	if ((error = detect_begin(&ev, ret_cause)) < 0) {	/* [detect] */
		json_decref(ev.trials);
		return error;
	}

	if ((error = evaluate_run(&ev, &timing, ret_cause)) < 0) {
		json_decref(timing);
		evaluate_free(&ev);
		return error;
	}
	result = verdict_result(&ev, timing);
	if (result != NULL)
		detect_result(&ev, result);	/* [detect] flags into metadata */
	/* The job's own time in the GPU worker, from the request to the
	 * verdict: what the GPU slot was busy with (the daemon's
	 * evaluate_job_ms also holds the wait for a free slot). */
	if (result != NULL && json_is_object(meta = json_object_get(result, "metadata")))
		json_object_set_new(meta, "gpu_job_ms", json_real(evaluate_now_ms() - t0));
	json_decref(timing);
	evaluate_free(&ev);
	if (result == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	*ret_result = result;
	return 0;
}

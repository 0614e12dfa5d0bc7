/*
 * evaluate.c -- the nvrtc backend's "evaluate" job: is the candidate right?
 *
 * The job arrives in a GPU worker with both programs already compiled
 * (the request carries their cubins) and a secret seed.  In order:
 *
 *   1. parse the request and the payload (spec.c); load both cubins and
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
 * The result object is kgymd-protocol(7)'s.  A verdict (validation, runtime,
 * correctness) is a result, not an error of the job; a sticky CUDA error
 * leaves the context unusable, so the result asks for the worker to be
 * replaced ("recycle_worker": true).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_internal.h"

#define EVALUATE_MIN_TRIALS		5
#define EVALUATE_MAX_TRIALS		1000
/* Seed indexes of the test cases' calls: apart from the random trials'. */
#define EVALUATE_CASE_SEEDS		(UINT64_C(1) << 40)

/* ------------------------------------------------------------ verdicts */

void
evaluate_verdict(struct evaluate *ev, bool failed, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (ev->code != NULL)
		return;			/* the first verdict is the one that counts */
	ev->code = code;
	ev->failed = failed;
	va_start(ap, fmt);
	if (vasprintf(&ev->message, fmt, ap) < 0)
		ev->message = NULL;
	va_end(ap);
}

void
evaluate_cuda_failure(struct evaluate *ev, const char *during, char *cause)
{
	const char *why = cause != NULL ? cause : "unknown CUDA failure";
	CUresult rc;

	/* A fault in a kernel shows up in whatever call comes next; the
	 * context's state tells whether it is lost for good. */
	rc = nvcu.cuCtxSynchronize();
	if (rc != CUDA_SUCCESS && device_error_sticky(rc))
		ev->recycle = true;
	if (ev->running == &ev->sol)
		evaluate_verdict(ev, false, "RUNTIME_ERROR", "the solution failed during %s: %s%s",
		    during, why, ev->recycle ? " (the CUDA context is lost; the worker is "
		    "replaced)" : "");
	else if (ev->running == &ev->ref)
		evaluate_verdict(ev, true, "RUNTIME_ERROR", "the problem's reference failed "
		    "during %s: %s", during, why);
	else
		evaluate_verdict(ev, true, "SYSTEM_ERROR", "kgymd's own GPU work failed during "
		    "%s: %s", during, why);
	free(cause);
}

/* ----------------------------------------------------------- size sets */

const struct spec_plan *
evaluate_plan(const struct evaluate *ev, const struct evaluate_prog *p, size_t k)
{
	return p == &ev->ref ? &ev->sevs[k]->reference : &ev->sevs[k]->solution;
}

void
evaluate_set_note(const struct evaluate *ev, size_t k, char *buf, size_t len)
{
	char sizes[128];

	if (len == 0)
		return;
	buf[0] = '\0';
	if (ev->nsets <= 1)
		return;
	spec_size_set_text(ev->spec, k, sizes, sizeof sizes);
	snprintf(buf, len, " (size set problem.sizes[%zu]: %s)", k, sizes);
}

/* Trial t's init: t itself with one size set; with several, shifted by
 * one per round of sets, so that every set meets every init. */
static size_t
evaluate_trial_init(const struct evaluate *ev, size_t t)
{
	return ev->nsets <= 1 ? t : t / ev->nsets + t % ev->nsets;
}

/* --------------------------------------------------------------- calls */

/*
 * Inputs from `seed` (init number `init_index`), the outputs `outs`
 * poisoned from `poison`, both programs' scratch zeroed, shared memory
 * scrubbed: everything one call needs, queued.
 */
static int
evaluate_prepare(struct evaluate *ev, uint64_t seed, size_t init_index,
    const struct device_buf *outs, uint64_t poison, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	const struct spec_tensor *t;
	struct evaluate_prog *progs[2] = { &ev->ref, &ev->sol };
	size_t i, k;
	int error;

	for (i = 0; i < pb->ninputs; i++) {
		t = &pb->inputs[i];
		if (ev->case_in != NULL)
			error = device_upload(ev->in[i].ptr, ev->case_in[i], ev->in[i].bytes,
			    ret_cause);
		else
			error = device_fill(&ev->in[i], t->dtype, ev->sev->inputs[i].numel,
			    &t->init[init_index % t->ninit], value_seed(seed, VALUE_TAG_INPUT, i),
			    ret_cause);
		if (error < 0)
			return error;
	}
	for (i = 0; i < pb->noutputs; i++)
		if ((error = device_poison(&outs[i], pb->outputs[i].dtype,
		    ev->sev->outputs[i].numel, value_seed(poison, VALUE_TAG_POISON, i),
		    ret_cause)) < 0)
			return error;
	/* Both programs' scratch: the other's may hold its intermediate results. */
	for (k = 0; k < 2; k++)
		for (i = 0; progs[k]->scratch != NULL && i < progs[k]->plan->nscratch; i++)
			if ((error = device_zero(progs[k]->scratch[i].ptr,
			    progs[k]->scratch[i].bytes, ret_cause)) < 0)
				return error;
	return device_scrub_shared(ret_cause);
}

int
evaluate_prepare_call(struct evaluate *ev, uint64_t seed, size_t init_index, bool hash,
    char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	CUdeviceptr hslot = ev->slots.ptr + ev->sev->noutputs * sizeof(struct helpers_cmp);
	size_t i;
	int error;

	ev->calls++;
	ev->call_seed = seed;
	ev->call_init = init_index;
	ev->poison_seed = value_seed(ev->seed, VALUE_TAG_POISON, ev->calls);
	if ((error = evaluate_prepare(ev, seed, init_index, ev->out, ev->poison_seed,
	    ret_cause)) < 0)
		return error;
	if (!hash)
		return 0;
	for (i = 0; i < pb->ninputs; i++)
		if ((error = device_hash(&ev->in[i], value_seed(seed, VALUE_TAG_HASH, i),
		    hslot + i * sizeof(uint64_t), ret_cause)) < 0)
			return error;
	/* On the host before the candidate runs: it cannot rewrite them. */
	return pb->ninputs == 0 ? 0 : device_download(ev->in_hash, hslot,
	    pb->ninputs * sizeof(uint64_t), ret_cause);
}

int
evaluate_prepare_reference(struct evaluate *ev, char **ret_cause)
{
	/* The candidate's poison seed stays: a check names unwritten elements. */
	return evaluate_prepare(ev, ev->call_seed, ev->call_init, ev->expect,
	    value_seed(ev->poison_seed, VALUE_TAG_POISON, UINT64_MAX), ret_cause);
}

int
evaluate_hash_inputs(struct evaluate *ev, CUdeviceptr slots, char **ret_cause)
{
	size_t i;
	int error;

	for (i = 0; i < ev->sev->ninputs; i++)
		if ((error = device_hash(&ev->in[i], value_seed(ev->call_seed, VALUE_TAG_HASH, i),
		    slots + i * sizeof(uint64_t), ret_cause)) < 0)
			return error;
	return 0;
}

int
evaluate_launch(struct evaluate *ev, struct evaluate_prog *p, char **ret_cause)
{
	const struct spec_launch *l;
	CUresult rc;
	size_t s;

	ev->running = p;
	for (s = 0; s < p->plan->nsteps; s++) {
		l = &p->plan->steps[s];
		if ((rc = nvcu.cuLaunchKernel(p->fn[s], l->grid[0], l->grid[1], l->grid[2],
		    l->block[0], l->block[1], l->block[2], l->shared_bytes, nvdev.stream,
		    p->params[s], NULL)) != CUDA_SUCCESS)
			return device_fail(rc, ret_cause, "%s.launch[%zu] (kernel '%s')", p->path,
			    s, l->kernel);
	}
	return 0;
}

/* Output o's expected values: this test case's, else the reference's. */
static const unsigned char *
evaluate_expected(const struct evaluate *ev, size_t o)
{
	return ev->case_out != NULL ? ev->case_out[o] : ev->ref_host[o];
}

int
evaluate_save_reference(struct evaluate *ev, char **ret_cause)
{
	size_t o;
	int error;

	for (o = 0; o < ev->sev->noutputs; o++)
		if ((error = device_download(ev->ref_host[o], ev->out[o].ptr, ev->out[o].bytes,
		    ret_cause)) < 0)
			return error;
	return 0;
}

/* The poison kg_poison wrote at element i (helpers.c, bit for bit). */
static bool
evaluate_is_poison(enum spec_dtype dt, uint64_t seed, uint64_t i, const void *elem)
{
	uint64_t key = value_mix64(seed ^ UINT64_C(0x706f69736f6e6564));
	uint64_t r = value_mix64(key + (i + 1) * UINT64_C(0x9e3779b97f4a7c15));
	unsigned char want[8];
	uint32_t u32;
	uint16_t u16;

	switch (dt) {
	case SPEC_FLOAT64:
		r = UINT64_C(0x7ff8000000000000) | (r & UINT64_C(0x8007ffffffffffff));
		memcpy(want, &r, 8);
		break;
	case SPEC_FLOAT32:
		u32 = 0x7fc00000u | ((uint32_t)r & 0x803fffffu);
		memcpy(want, &u32, 4);
		break;
	case SPEC_FLOAT16:
		u16 = (uint16_t)(0x7e00u | ((uint32_t)r & 0x81ffu));
		memcpy(want, &u16, 2);
		break;
	case SPEC_BFLOAT16:
		u16 = (uint16_t)(0x7fc0u | ((uint32_t)r & 0x803fu));
		memcpy(want, &u16, 2);
		break;
	case SPEC_BOOL:
		want[0] = (unsigned char)(2 + r % 254);
		break;
	default:
		memcpy(want, &r, 8);	/* little-endian: the low bytes, as the casts */
		break;
	}
	return memcmp(want, elem, spec_dtype_size(dt)) == 0;
}

int
evaluate_check_read(struct evaluate *ev, const struct helpers_cmp *cmp, const uint64_t *hash,
    const uint64_t *hash_before, const struct device_buf *expected, struct evaluate_check *ret,
    char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	size_t no = ev->sev->noutputs, ni = ev->sev->ninputs, o, i, esize;
	struct evaluate_check c;
	unsigned char got[8], want[8];
	double d;
	int error;

	memset(&c, 0, sizeof c);
	c.ok = true;
	for (o = 0; o < no; o++) {
		c.mismatches += cmp[o].mismatches;
		memcpy(&d, &cmp[o].max_abs_bits, sizeof d);
		c.max_abs = fmax(c.max_abs, d);
		memcpy(&d, &cmp[o].max_rel_bits, sizeof d);
		c.max_rel = fmax(c.max_rel, d);
		if (cmp[o].mismatches == 0 || !c.ok)
			continue;
		c.ok = false;
		c.bad_output = o;
		c.first_bad = ~cmp[o].first_bad_inv;
		esize = spec_dtype_size(pb->outputs[o].dtype);
		if ((error = device_download(got, ev->out[o].ptr + c.first_bad * esize, esize,
		    ret_cause)) < 0)
			return error;
		if (expected != NULL) {
			if ((error = device_download(want, expected[o].ptr + c.first_bad * esize,
			    esize, ret_cause)) < 0)
				return error;
		} else {
			memcpy(want, evaluate_expected(ev, o) + c.first_bad * esize, esize);
		}
		value_format(pb->outputs[o].dtype, got, c.got, sizeof c.got);
		value_format(pb->outputs[o].dtype, want, c.expected, sizeof c.expected);
		c.never_written = evaluate_is_poison(pb->outputs[o].dtype,
		    value_seed(ev->poison_seed, VALUE_TAG_POISON, o), c.first_bad, got);
	}
	for (i = 0; i < ni; i++) {
		if (hash[i] == hash_before[i])
			continue;
		c.ok = false;
		c.input_changed = true;
		c.changed_input = i;
		break;
	}
	*ret = c;
	return 0;
}

int
evaluate_check(struct evaluate *ev, struct evaluate_check *ret, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	size_t no = ev->sev->noutputs, o;
	struct helpers_cmp *cmp = NULL;
	int error;

	for (o = 0; o < no; o++) {
		if ((error = device_upload(ev->expect[o].ptr, evaluate_expected(ev, o),
		    ev->expect[o].bytes,
		    ret_cause)) < 0 ||
		    (error = device_compare(&ev->out[o], &ev->expect[o], pb->outputs[o].dtype,
		    ev->sev->outputs[o].numel, pb->outputs[o].atol, pb->outputs[o].rtol,
		    ev->slots.ptr + o * sizeof(struct helpers_cmp), ret_cause)) < 0)
			return error;
	}
	if ((error = evaluate_hash_inputs(ev, ev->slots.ptr + no * sizeof(struct helpers_cmp),
	    ret_cause)) < 0)
		return error;
	/* Wiped in stream order, before anything launched later can run. */
	for (o = 0; o < no; o++)
		if ((error = device_zero(ev->expect[o].ptr, ev->expect[o].bytes, ret_cause)) < 0)
			return error;
	if ((cmp = malloc(ev->slots.bytes)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	if ((error = device_download(cmp, ev->slots.ptr, ev->slots.bytes, ret_cause)) == 0)
		error = evaluate_check_read(ev, cmp, (const uint64_t *)(const void *)(cmp + no),
		    ev->in_hash, NULL, ret, ret_cause);
	free(cmp);
	return error;
}

void
evaluate_check_message(struct evaluate *ev, const struct evaluate_check *c, char *buf,
    size_t len)
{
	const struct spec_tensor *t;
	const struct spec_shape *sh;
	char coords[256] = "";
	uint64_t rest;
	size_t d, n = 0;

	if (c->mismatches == 0 && c->input_changed) {
		snprintf(buf, len, "input '%s' was changed by the solution; inputs must be left "
		    "as they are", ev->spec->problem.inputs[c->changed_input].name);
		return;
	}
	t = &ev->spec->problem.outputs[c->bad_output];
	sh = &ev->sev->outputs[c->bad_output];
	if (sh->ndim > 1) {
		/* Row-major coordinates, as the model thinks of the tensor. */
		uint64_t idx[SPEC_MAX_DIMS];

		rest = c->first_bad;
		for (d = sh->ndim; d-- > 0;) {
			idx[d] = rest % (uint64_t)sh->dims[d];
			rest /= (uint64_t)sh->dims[d];
		}
		n += (size_t)snprintf(coords, sizeof coords, " [");
		for (d = 0; d < sh->ndim && n < sizeof coords; d++)
			n += (size_t)snprintf(coords + n, sizeof coords - n, "%s%" PRIu64,
			    d ? ", " : "", idx[d]);
		if (n < sizeof coords)
			snprintf(coords + n, sizeof coords - n, "]");
	}
	snprintf(buf, len, "output '%s' is wrong at index %" PRIu64 "%s: expected %s, got %s%s; "
	    "%" PRIu64 " of %" PRIu64 " elements differ (atol %g, rtol %g; max abs error %g, "
	    "max rel error %g)%s", t->name, c->first_bad, coords, c->expected, c->got,
	    c->never_written ? " (never written: the poison kgymd put there before the call)" :
	    "", c->mismatches, sh->numel, t->atol, t->rtol, c->max_abs, c->max_rel,
	    c->input_changed ? "; an input was changed too" : "");
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

/* Decode a base64 cubin member; a missing one is an error of the request. */
static int
evaluate_cubin(const json_t *request, const char *key, unsigned char **ret, char **ret_cause)
{
	const char *b64 = json_string_value(json_object_get(request, key));
	size_t len;
	int error;

	if (b64 == NULL)
		return nvrtc_fail(ret_cause, -EINVAL, "%s: missing", key);
	if ((error = compile_b64_decode(b64, ret, &len)) < 0)
		return nvrtc_fail(ret_cause, error, "%s: %s", key, error == -ENOMEM ?
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
		evaluate_verdict(ev, true, "VALIDATION_ERROR", "test_cases[%zu].%s.%s: expected "
		    "an array of %" PRIu64 " numbers (the tensor's elements, row-major)%s", k, where,
		    t->name, sh->numel, arr == NULL ? "; it is missing" : "");
		return false;
	}
	if ((buf = malloc(sh->bytes)) == NULL) {
		evaluate_verdict(ev, true, "RESOURCE_ERROR", "test_cases[%zu].%s.%s: out of "
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
			evaluate_verdict(ev, true, "VALIDATION_ERROR", "test_cases[%zu].%s.%s[%zu]: "
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
		evaluate_verdict(ev, true, "VALIDATION_ERROR", "test_cases: expected a non-empty "
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
			evaluate_verdict(ev, true, "VALIDATION_ERROR", "test_cases[%zu]: expected "
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
			evaluate_verdict(ev, true, "VALIDATION_ERROR", "test_cases[%zu]: names a "
			    "tensor the problem does not have", k);
			return 0;
		}
	}
	return 0;
}

/* ---------------------------------------------------------- allocation */

static int
evaluate_alloc_list(struct evaluate *ev, const char *role, const struct spec_tensor *t,
    const struct spec_shape *sh, size_t n, struct device_buf **ret, char **ret_cause)
{
	struct device_buf *b;
	char *cause = NULL;
	size_t i;
	int error;

	if ((b = calloc(n ? n : 1, sizeof *b)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	*ret = b;		/* freed by the caller, allocated or not */
	for (i = 0; i < n; i++) {
		if ((error = device_buf_alloc(sh[i].bytes, &b[i], &cause)) == 0)
			continue;
		if (error == -ENOMEM) {
			evaluate_verdict(ev, true, "RESOURCE_ERROR", "out of GPU memory for %s '%s' "
			    "(%" PRIu64 " bytes): %s", role, t[i].name, sh[i].bytes, cause);
			free(cause);
			return 0;
		}
		*ret_cause = cause;
		return error;
	}
	return 0;
}

static void
evaluate_free_list(struct device_buf *b, size_t n)
{
	size_t i;

	for (i = 0; b != NULL && i < n; i++)
		device_buf_free(&b[i]);
	free(b);
}

/* What does not depend on the size set: comparison slots, hashes, pointers. */
static int
evaluate_alloc(struct evaluate *ev, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	char *cause = NULL;
	size_t slots;
	int error;

	slots = pb->noutputs * sizeof(struct helpers_cmp) + (pb->ninputs + 1) * sizeof(uint64_t);
	if ((error = device_buf_alloc(slots, &ev->slots, &cause)) < 0) {
		*ret_cause = cause;
		return error;
	}
	if ((ev->in_hash = calloc(pb->ninputs + 1, sizeof *ev->in_hash)) == NULL ||
	    (ev->ref_host = calloc(pb->noutputs, sizeof *ev->ref_host)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	return 0;
}

/* The current size set's tensors (ev->sev), each in its own guarded buffer. */
static int
evaluate_alloc_set(struct evaluate *ev, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	struct evaluate_prog *progs[2] = { &ev->ref, &ev->sol };
	size_t o, k;
	int error;

	if ((error = evaluate_alloc_list(ev, "input", pb->inputs, ev->sev->inputs, pb->ninputs,
	    &ev->in, ret_cause)) < 0 || ev->code != NULL ||
	    (error = evaluate_alloc_list(ev, "output", pb->outputs, ev->sev->outputs,
	    pb->noutputs, &ev->out, ret_cause)) < 0 || ev->code != NULL ||
	    (error = evaluate_alloc_list(ev, "expected output", pb->outputs, ev->sev->outputs,
	    pb->noutputs, &ev->expect, ret_cause)) < 0 || ev->code != NULL)
		return error;
	for (k = 0; k < 2; k++) {
		if (progs[k]->plan == NULL || progs[k]->prog == NULL)
			continue;
		if ((error = evaluate_alloc_list(ev, "scratch", progs[k]->prog->scratch,
		    progs[k]->plan->scratch, progs[k]->plan->nscratch, &progs[k]->scratch,
		    ret_cause)) < 0 || ev->code != NULL)
			return error;
	}
	if (!ev->has_ref)
		return 0;	/* test cases lend theirs */
	for (o = 0; o < pb->noutputs; o++) {
		if ((ev->ref_host[o] = malloc(ev->sev->outputs[o].bytes)) == NULL) {
			evaluate_verdict(ev, true, "RESOURCE_ERROR", "out of host memory for the "
			    "expected values of output '%s' (%" PRIu64 " bytes)", pb->outputs[o].name,
			    ev->sev->outputs[o].bytes);
			return 0;
		}
	}
	return 0;
}

/* Undo evaluate_alloc_set() (also what a failed one made). */
static void
evaluate_free_set(struct evaluate *ev)
{
	struct evaluate_prog *progs[2] = { &ev->ref, &ev->sol };
	size_t no = ev->sev != NULL ? ev->sev->noutputs : 0, ni = ev->sev != NULL ?
	    ev->sev->ninputs : 0, o, k;

	for (k = 0; k < 2; k++) {
		evaluate_free_list(progs[k]->scratch, progs[k]->plan != NULL ?
		    progs[k]->plan->nscratch : 0);
		progs[k]->scratch = NULL;
	}
	evaluate_free_list(ev->in, ni);
	evaluate_free_list(ev->out, no);
	evaluate_free_list(ev->expect, no);
	ev->in = ev->out = ev->expect = NULL;
	/* With test cases these are theirs. */
	for (o = 0; ev->has_ref && ev->ref_host != NULL && o < no; o++) {
		free(ev->ref_host[o]);
		ev->ref_host[o] = NULL;
	}
	ev->set_ready = false;
}

int
evaluate_use_set(struct evaluate *ev, size_t k, char **ret_cause)
{
	char *cause = NULL;
	int error;

	if (ev->set_ready && ev->size_set == k)
		return 0;
	/* Nothing queued may still use the buffers about to go. */
	if (ev->set_ready && device_sync(NULL, &cause) < 0) {
		evaluate_cuda_failure(ev, "changing the size set", cause);
		return 0;
	}
	evaluate_free_set(ev);
	ev->size_set = k;
	ev->sev = ev->sevs[k];
	ev->sol.plan = evaluate_plan(ev, &ev->sol, k);
	if (ev->has_ref)
		ev->ref.plan = evaluate_plan(ev, &ev->ref, k);
	if ((error = evaluate_alloc_set(ev, ret_cause)) < 0 || ev->code != NULL)
		return error;
	if (ev->has_ref)
		bind_tensors(ev, &ev->ref);
	bind_tensors(ev, &ev->sol);
	ev->set_ready = true;
	return 0;
}

/* ---------------------------------------------------------- correctness */

static json_t *
evaluate_init_json(const struct evaluate *ev, size_t init)
{
	const struct spec_problem *pb = &ev->spec->problem;
	const struct spec_init *in;
	json_t *o = json_object();
	char buf[128];
	size_t i;

	for (i = 0; i < pb->ninputs; i++) {
		in = &pb->inputs[i].init[init % pb->inputs[i].ninit];
		if (in->kind == SPEC_INIT_NORMAL)
			snprintf(buf, sizeof buf, "normal(%g, %g)", in->mean, in->std);
		else
			snprintf(buf, sizeof buf, "%s[%g, %g)", in->kind == SPEC_INIT_UNIFORM ?
			    "uniform" : "randint", in->low, in->high);
		json_object_set_new(o, pb->inputs[i].name, json_string(buf));
	}
	return o;
}

/* The current size set: {"N": 1048573, ...}. */
static json_t *
evaluate_sizes_json(const struct evaluate *ev)
{
	const struct spec_problem *pb = &ev->spec->problem;
	const int64_t *v = spec_size_set(ev->spec, ev->size_set);
	json_t *o = json_object();
	size_t i;

	for (i = 0; v != NULL && i < pb->nsizes; i++)
		json_object_set_new(o, pb->size_names[i], json_integer((json_int_t)v[i]));
	return o;
}

static void
evaluate_trial_json(struct evaluate *ev, size_t t, size_t init, uint64_t seed,
    const struct evaluate_check *c)
{
	char sbuf[32];
	json_t *j;

	snprintf(sbuf, sizeof sbuf, "%" PRIu64, seed);
	j = json_pack("{s:I, s:b, s:f, s:f, s:I, s:o}", "trial", (json_int_t)t, "passed", c->ok,
	    "max_abs_err", c->max_abs, "max_rel_err", c->max_rel,
	    "mismatches", (json_int_t)c->mismatches,
	    "first_bad_index", c->mismatches != 0 ? json_integer((json_int_t)c->first_bad) :
	    json_null());
	if (j == NULL)
		return;
	if (ev->case_in != NULL) {
		json_object_set_new(j, "test_case", json_integer((json_int_t)t));
	} else {
		if (ev->hidden_trial)
			json_object_set_new(j, "hidden", json_true());
		json_object_set_new(j, "seed", json_string(sbuf));
		json_object_set_new(j, "init", evaluate_init_json(ev, init));
	}
	json_object_set_new(j, "size_set", json_integer((json_int_t)ev->size_set));
	json_object_set_new(j, "sizes", evaluate_sizes_json(ev));
	if (c->mismatches != 0)
		json_object_set_new(j, "output",
		    json_string(ev->spec->problem.outputs[c->bad_output].name));
	if (c->input_changed)
		json_object_set_new(j, "changed_input",
		    json_string(ev->spec->problem.inputs[c->changed_input].name));
	json_array_append_new(ev->trials, j);
}

/* A failed check becomes the verdict. */
static void
evaluate_check_verdict(struct evaluate *ev, const struct evaluate_check *c, const char *when)
{
	char msg[1024];

	evaluate_check_message(ev, c, msg, sizeof msg);
	if (c->mismatches == 0 && c->input_changed) {
		evaluate_verdict(ev, false, "REWARD_HACK", "%s (%s)", msg, when);
		json_decref(ev->hack);
		/* [detect] every hack carries {kind, detail} (kgymd-protocol(7), "Reward hacks") */
		ev->hack = json_pack("{s:s, s:s, s:s}", "kind", "input_mutation", "detail", msg,
		    "input", ev->spec->problem.inputs[c->changed_input].name);
	} else {
		evaluate_verdict(ev, false, "CORRECTNESS_ERROR", "%s (%s)", msg, when);
	}
}

/* One call of the candidate on prepared inputs, then the check. */
static int
evaluate_candidate(struct evaluate *ev, uint64_t seed, size_t t, size_t init, const char *when,
    char **ret_cause)
{
	struct evaluate_check c;
	char *cause = NULL;
	int error;

	if ((error = evaluate_prepare_call(ev, seed, init, true, &cause)) < 0 ||
	    (error = evaluate_launch(ev, &ev->sol, &cause)) < 0 ||
	    (error = device_sync(NULL, &cause)) < 0) {
		evaluate_cuda_failure(ev, when, cause);
		return 0;
	}
	ev->running = NULL;
	if ((error = evaluate_check(ev, &c, &cause)) < 0) {
		evaluate_cuda_failure(ev, when, cause);
		return 0;
	}
	evaluate_trial_json(ev, t, init, seed, &c);
	if (!c.ok)
		evaluate_check_verdict(ev, &c, when);
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

	if ((error = evaluate_use_set(ev, 0, ret_cause)) < 0 || ev->code != NULL)
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

	if ((error = evaluate_use_set(ev, t % ev->nsets, ret_cause)) < 0 || ev->code != NULL)
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
	if ((error = evaluate_prepare_call(ev, seed, init, false, &cause)) < 0 ||
	    (error = evaluate_launch(ev, &ev->ref, &cause)) < 0 ||
	    (error = device_sync(NULL, &cause)) < 0) {
		evaluate_cuda_failure(ev, when, cause);
		return 0;
	}
	ev->running = NULL;
	if ((error = evaluate_save_reference(ev, &cause)) < 0) {
		evaluate_cuda_failure(ev, when, cause);
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

/* -------------------------------------------------------------- result */

static json_t *
evaluate_result(struct evaluate *ev, json_t *timing)
{
	size_t s, s2, distinct = 0;
	const struct spec_plan *plan = ev->sev != NULL ? &ev->sev->solution : NULL;
	json_t *r, *meta;
	char frac[64];
	bool correct = ev->code == NULL;

	meta = json_pack("{s:s, s:s, s:s, s:o}", "mode", ev->simple ? "kernel_simple" :
	    "kernelbench", "gpu", nvdev.name, "hardware", nvdev.name, "device_info",
	    device_json());
	if (plan != NULL) {
		for (s = 0; s < plan->nsteps; s++) {
			for (s2 = 0; s2 < s; s2++)
				if (strcmp(plan->steps[s].kernel, plan->steps[s2].kernel) == 0)
					break;
			distinct += s2 == s;
		}
		json_object_set_new(meta, "num_custom_kernels", json_integer((json_int_t)distinct));
		json_object_set_new(meta, "num_total_kernels",
		    json_integer((json_int_t)plan->nsteps));
	}
	snprintf(frac, sizeof frac, "(%u / %zu)", ev->trials_passed, json_array_size(ev->trials));
	json_object_set_new(meta, "correctness_trials", json_string(frac));
	/*
	 * kernel_simple: how many visible test cases and how many hidden random
	 * trials (on fresh inputs, against the reference) the verdict rests
	 * on.  hidden_trials 0: test cases alone, which a lookup table of their
	 * outputs can pass.
	 */
	if (ev->simple) {
		json_object_set_new(meta, "test_cases", json_integer((json_int_t)ev->ncases));
		json_object_set_new(meta, "hidden_trials", json_integer((json_int_t)ev->random_trials));
	}
	/* Several size sets: how many; timing used the first. */
	if (ev->nsets > 1)
		json_object_set_new(meta, "size_sets", json_integer((json_int_t)ev->nsets));
	if (ev->sol.kernels != NULL)
		json_object_set(meta, "kernels", ev->sol.kernels);
	if (ev->hack != NULL)
		json_object_set(meta, "hack", ev->hack);

	r = json_pack("{s:s, s:b, s:b, s:b, s:f, s:f, s:f, s:O, s:o}",
	    "status", ev->failed ? "failed" : "completed",
	    "compiled", ev->code == NULL || strcmp(ev->code, "COMPILATION_ERROR") != 0,
	    "correctness", correct, "decoy_kernel", 0,
	    "kernel_runtime", -1.0, "reference_runtime", -1.0, "speedup", -1.0,
	    "correctness_trials", ev->trials, "metadata", meta);
	if (r == NULL)
		return NULL;
	if (timing != NULL)
		json_object_update(r, timing);
	profile_result(r);	/* profile.c: "profile", gpu_time_ms, CUPTI's metadata */
	if (ev->code != NULL) {
		json_object_set_new(r, "error_code", json_string(ev->code));
		json_object_set_new(r, "error_message", json_string(ev->message != NULL ?
		    ev->message : ev->code));
	}
	if (ev->recycle)
		json_object_set_new(r, "recycle_worker", json_true());
	return r;
}

/* ---------------------------------------------------------------- job */

static void
evaluate_free(struct evaluate *ev)
{
	size_t k;

	evaluate_free_set(ev);
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
		if ((error = spec_evaluate(ev->spec, spec_size_set(ev->spec, k), NULL,
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

	if ((error = spec_parse(ev->request, NULL, ev->simple ? SPEC_REFERENCE_OPTIONAL : 0,
	    &ev->spec, err, sizeof err)) < 0 ||
	    (error = evaluate_sets(ev, err, sizeof err)) < 0) {
		if (error == -ENOMEM)
			return nvrtc_fail(ret_cause, error, "out of memory");
		evaluate_verdict(ev, true, "VALIDATION_ERROR", "%s", err);
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
		evaluate_verdict(ev, true, "VALIDATION_ERROR", "problem.reference: kernel_simple "
		    "needs a reference kernel or test_cases");
		return 0;
	}
	ev->sol.plan = &ev->sev->solution;
	ev->sol.prog = &ev->spec->solution;
	if (ev->has_ref) {
		ev->ref.plan = &ev->sev->reference;
		ev->ref.prog = &ev->spec->problem.reference;
		if ((error = evaluate_cubin(ev->request, "reference_cubin_b64", &ref_cubin,
		    ret_cause)) < 0)
			goto free_cubins;
	}
	if ((error = evaluate_cubin(ev->request, "solution_cubin_b64", &sol_cubin,
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
	if (ev->code == NULL && (error = evaluate_alloc(ev, ret_cause)) < 0)
		goto free_cases;
	if (ev->code != NULL)
		goto free_cases;

	if ((error = evaluate_correctness(ev, &tc, ret_cause)) < 0)
		goto free_cases;
	/* kernel_simple may time the candidate alone (no speedup); timing is
	 * on the first size set. */
	if (ev->code == NULL && ev->set.run_performance &&
	    (error = evaluate_use_set(ev, 0, ret_cause)) < 0)
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

int
evaluate_job(const json_t *request, json_t **ret_result, char **ret_cause)
{
	struct evaluate ev;
	const char *mode = json_string_value(json_object_get(request, "mode"));
	json_t *timing = NULL, *result;
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
	    (error = evaluate_seed(&ev, ret_cause)) < 0)
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
	result = evaluate_result(&ev, timing);
	if (result != NULL)
		detect_result(&ev, result);	/* [detect] flags into metadata */
	json_decref(timing);
	evaluate_free(&ev);
	if (result == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	*ret_result = result;
	return 0;
}

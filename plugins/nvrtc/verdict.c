/*
 * verdict.c -- the nvrtc backend's verdict layer: was a call right, and
 * what does the job's result say?
 *
 * The call layer (call.c) runs the kernels and leaves their outputs on the
 * device; this file judges them.  The expected values go up to the device
 * only after the candidate's call has finished, are compared there
 * (helpers.c: tolerances, NaN rules, the first bad element) and wiped at
 * once; the inputs' hashes are compared with those taken before the call.
 * A failed check becomes a verdict -- the first verdict is the one that
 * counts -- and the result object (kgymd-protocol(7)) is built here from
 * the verdict, the trials and the timing.  Nothing here launches candidate
 * code.
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

/* ------------------------------------------------------------ verdicts */

void
verdict_record(struct evaluate *ev, bool failed, const char *code, const char *fmt, ...)
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
verdict_cuda_failure(struct evaluate *ev, const char *during, char *cause)
{
	const char *why = cause != NULL ? cause : "unknown CUDA failure";
	CUresult rc;

	/* A fault in a kernel shows up in whatever call comes next; the
	 * context's state tells whether it is lost for good. */
	rc = nvcu.cuCtxSynchronize();
	if (rc != CUDA_SUCCESS && device_error_sticky(rc))
		ev->recycle = true;
	if (ev->running == &ev->sol)
		verdict_record(ev, false, "RUNTIME_ERROR", "the solution failed during %s: %s%s",
		    during, why, ev->recycle ? " (the CUDA context is lost; the worker is "
		    "replaced)" : "");
	else if (ev->running == &ev->ref)
		verdict_record(ev, true, "RUNTIME_ERROR", "the problem's reference failed "
		    "during %s: %s", during, why);
	else
		verdict_record(ev, true, "SYSTEM_ERROR", "kgymd's own GPU work failed during "
		    "%s: %s", during, why);
	free(cause);
}

/* Output o's expected values: this test case's, else the reference's. */
static const unsigned char *
verdict_expected(const struct evaluate *ev, size_t o)
{
	return ev->case_out != NULL ? ev->case_out[o] : ev->ref_host[o];
}

/* The poison kg_poison wrote at element i (helpers.c, bit for bit). */
static bool
verdict_is_poison(enum spec_dtype dt, uint64_t seed, uint64_t i, const void *elem)
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
verdict_check_read(struct evaluate *ev, const struct kgym_compare_stats *cmp, const uint64_t *hash,
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
			memcpy(want, verdict_expected(ev, o) + c.first_bad * esize, esize);
		}
		nvrtc_compare->format_value((enum kgym_dtype)pb->outputs[o].dtype, got, c.got,
		    sizeof c.got);
		nvrtc_compare->format_value((enum kgym_dtype)pb->outputs[o].dtype, want,
		    c.expected, sizeof c.expected);
		c.never_written = verdict_is_poison(pb->outputs[o].dtype,
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
verdict_check(struct evaluate *ev, struct evaluate_check *ret, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	size_t no = ev->sev->noutputs, o;
	struct kgym_compare_stats *cmp = NULL;
	int error;

	for (o = 0; o < no; o++) {
		if ((error = device_upload(ev->expect[o].ptr, verdict_expected(ev, o),
		    ev->expect[o].bytes,
		    ret_cause)) < 0 ||
		    (error = device_compare(&ev->out[o], &ev->expect[o], pb->outputs[o].dtype,
		    ev->sev->outputs[o].numel, pb->outputs[o].atol, pb->outputs[o].rtol,
		    ev->slots.ptr + o * sizeof(struct kgym_compare_stats), ret_cause)) < 0)
			return error;
	}
	if ((error = call_hash_inputs(ev, ev->slots.ptr + no * sizeof(struct kgym_compare_stats),
	    ret_cause)) < 0)
		return error;
	/* Wiped in stream order, before anything launched later can run. */
	for (o = 0; o < no; o++)
		if ((error = device_zero(ev->expect[o].ptr, ev->expect[o].bytes, ret_cause)) < 0)
			return error;
	if ((cmp = malloc(ev->slots.bytes)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	if ((error = device_download(cmp, ev->slots.ptr, ev->slots.bytes, ret_cause)) == 0)
		error = verdict_check_read(ev, cmp, (const uint64_t *)(const void *)(cmp + no),
		    ev->in_hash, NULL, ret, ret_cause);
	free(cmp);
	return error;
}

/* The words are the compare toolkit's, so every backend's report reads alike. */
void
verdict_check_message(struct evaluate *ev, const struct evaluate_check *c, char *buf,
    size_t len)
{
	const struct spec_problem *pb = &ev->spec->problem;
	const struct spec_tensor *t;
	const struct spec_shape *sh;
	struct kgym_compare_report r = {
		.struct_size = sizeof r,
		.expected = c->expected,
		.got = c->got,
		.never_written = c->never_written,
		.mismatches = c->mismatches,
		.max_abs = c->max_abs,
		.max_rel = c->max_rel,
		.changed_input = c->input_changed ? pb->inputs[c->changed_input].name : NULL,
	};

	/* bad_output means something only when an output failed. */
	if (c->mismatches != 0 || !c->input_changed) {
		t = &pb->outputs[c->bad_output];
		sh = &ev->sev->outputs[c->bad_output];
		r.output = t->name;
		r.index = c->first_bad;
		r.dims = sh->dims;
		r.ndim = sh->ndim;
		r.numel = sh->numel;
		r.atol = t->atol;
		r.rtol = t->rtol;
	}
	nvrtc_compare->report(&r, buf, len);
}

/* ----------------------------------------------------------- trial report */

static json_t *
verdict_init_json(const struct evaluate *ev, size_t init)
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
verdict_sizes_json(const struct evaluate *ev)
{
	const struct spec_problem *pb = &ev->spec->problem;
	const int64_t *v = spec_size_set(ev->spec, ev->size_set);
	json_t *o = json_object();
	size_t i;

	for (i = 0; v != NULL && i < pb->nsizes; i++)
		json_object_set_new(o, pb->size_names[i], json_integer((json_int_t)v[i]));
	return o;
}

void
verdict_trial_json(struct evaluate *ev, size_t t, size_t init, uint64_t seed,
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
		json_object_set_new(j, "init", verdict_init_json(ev, init));
	}
	json_object_set_new(j, "size_set", json_integer((json_int_t)ev->size_set));
	json_object_set_new(j, "sizes", verdict_sizes_json(ev));
	if (c->mismatches != 0)
		json_object_set_new(j, "output",
		    json_string(ev->spec->problem.outputs[c->bad_output].name));
	if (c->input_changed)
		json_object_set_new(j, "changed_input",
		    json_string(ev->spec->problem.inputs[c->changed_input].name));
	json_array_append_new(ev->trials, j);
}

/* A failed check becomes the verdict. */
void
verdict_check_failed(struct evaluate *ev, const struct evaluate_check *c, const char *when)
{
	char msg[1024];

	verdict_check_message(ev, c, msg, sizeof msg);
	if (c->mismatches == 0 && c->input_changed) {
		verdict_record(ev, false, "REWARD_HACK", "%s (%s)", msg, when);
		json_decref(ev->hack);
		/* [detect] every hack carries {kind, detail} (kgymd-protocol(7), "Reward hacks") */
		ev->hack = json_pack("{s:s, s:s, s:s}", "kind", "input_mutation", "detail", msg,
		    "input", ev->spec->problem.inputs[c->changed_input].name);
	} else {
		verdict_record(ev, false, "CORRECTNESS_ERROR", "%s (%s)", msg, when);
	}
}

/* One call of the candidate on prepared inputs, then the check. */
/* -------------------------------------------------------------- result */

json_t *
verdict_result(struct evaluate *ev, json_t *timing)
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
	if (ev->cubin_missing != NULL)
		json_object_set_new(meta, "cubin_missing", json_string(ev->cubin_missing));

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

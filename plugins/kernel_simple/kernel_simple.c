/*
 * kernel_simple.c -- the workflow plugin `kernel_simple` (runs in the daemon).
 *
 * Is the candidate kernel right?  It is judged against test cases the task
 * carries -- inputs and the outputs they must give -- and against the
 * problem's reference kernel on fresh secret inputs, whichever the task
 * has; with both, the reference's random trials (at least 5) run after the
 * visible cases as hidden trials, so a lookup table of the visible cases'
 * outputs fails.  With test cases alone such a table passes: the result
 * says so (metadata.hidden_trials: 0).  No speedup: the result's speedup is always null (the candidate
 * alone may still be timed with run_performance).  Payload: the native
 * problem and solution of kgymd-protocol(7)'s "Native tasks" (backend "nvrtc"; problem.reference
 * optional) plus
 *	"test_cases": [{"inputs":  {"<input name>":  [numbers...]},
 *	                "outputs": {"<output name>": [numbers...]}}, ...]
 * where every array is a tensor's elements flattened in row-major order,
 * as many as its shape (evaluated with problem.sizes) holds.  They are
 * checked here, at submit, so a malformed case never reaches a GPU; the
 * flow is plugins/common/native_workflow.c.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <kgym/plugin.h>

#include "native_workflow.h"

/* Test cases in one task; their size is bounded by the request size. */
#define KS_MAX_CASES	64

static int
ks_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
ks_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* The inclusive range an integer dtype holds. */
static void
ks_int_range(enum spec_dtype d, double *ret_lo, double *ret_hi)
{
	switch (d) {
	case SPEC_INT64: *ret_lo = -9223372036854775808.0; *ret_hi = 9223372036854775807.0; break;
	case SPEC_INT32: *ret_lo = -2147483648.0; *ret_hi = 2147483647.0; break;
	case SPEC_INT16: *ret_lo = -32768.0; *ret_hi = 32767.0; break;
	case SPEC_INT8: *ret_lo = -128.0; *ret_hi = 127.0; break;
	case SPEC_UINT8: *ret_lo = 0.0; *ret_hi = 255.0; break;
	default: *ret_lo = 0.0; *ret_hi = 1.0; break;	/* bool */
	}
}

/* One element: a number the tensor's dtype can hold exactly (integers). */
static int
ks_check_value(const json_t *v, enum spec_dtype d, const char *path, size_t i, char *err,
    size_t errlen)
{
	double x, lo, hi;

	if (d == SPEC_BOOL && json_is_boolean(v))
		return 0;
	if (!json_is_number(v))
		return ks_err(err, errlen, "%s[%zu]: expected a number", path, i);
	if (spec_dtype_is_float(d) || (json_is_integer(v) && d == SPEC_INT64))
		return 0;
	x = json_number_value(v);
	ks_int_range(d, &lo, &hi);
	if (x != floor(x) || x < lo || x > hi)
		return ks_err(err, errlen, "%s[%zu]: %g is not a %s value (integers from "
		    "%.0f to %.0f)", path, i, x, spec_dtype_name(d), lo, hi);
	return 0;
}

static void
ks_shape_text(const struct spec_shape *s, char *buf, size_t len)
{
	size_t i, off;

	off = (size_t)snprintf(buf, len, "[");
	for (i = 0; i < s->ndim && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%lld", i > 0 ? ", " : "",
		    (long long)s->dims[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
}

/*
 * One case's "inputs" or "outputs": exactly the problem's tensors of that
 * list, each a flat array of numel numbers.
 */
static int
ks_check_tensors(const json_t *obj, const struct spec_tensor *tensors,
    const struct spec_shape *shapes, size_t n, const char *path, const char *what,
    char *err, size_t errlen)
{
	char sub[160], shape[160];
	const json_t *arr, *v;
	const char *key;
	size_t i, j;
	int r;

	if (!json_is_object(obj))
		return ks_err(err, errlen, "%s: expected an object mapping each %s's name to "
		    "its values", path, what);
	json_object_foreach((json_t *)obj, key, arr) {
		for (i = 0; i < n; i++)
			if (strcmp(tensors[i].name, key) == 0)
				break;
		if (i == n)
			return ks_err(err, errlen, "%s: unknown %s '%s'", path, what, key);
	}
	for (i = 0; i < n; i++) {
		snprintf(sub, sizeof sub, "%s.%s", path, tensors[i].name);
		ks_shape_text(&shapes[i], shape, sizeof shape);
		if ((arr = json_object_get(obj, tensors[i].name)) == NULL)
			return ks_err(err, errlen, "%s: missing (the %s's %llu values, shape %s)",
			    sub, what, (unsigned long long)shapes[i].numel, shape);
		if (!json_is_array(arr))
			return ks_err(err, errlen, "%s: expected a flat array of %llu numbers "
			    "(shape %s)", sub, (unsigned long long)shapes[i].numel, shape);
		if (json_array_size(arr) != shapes[i].numel)
			return ks_err(err, errlen, "%s: expected %llu values (shape %s), got %zu",
			    sub, (unsigned long long)shapes[i].numel, shape, json_array_size(arr));
		json_array_foreach(arr, j, v)
			if ((r = ks_check_value(v, tensors[i].dtype, sub, j, err, errlen)) < 0)
				return r;
	}
	return 0;
}

static int
ks_validate(const json_t *payload, const struct spec *spec, const struct spec_eval *ev,
    char *err, size_t errlen)
{
	const json_t *cases = json_object_get(payload, "test_cases"), *c;
	const char *key;
	const json_t *v;
	char path[64];
	size_t i;
	int r;

	if (cases == NULL || json_is_null(cases)) {
		if (!spec->problem.has_reference)
			return ks_err(err, errlen, "test_cases: required when problem.reference "
			    "is absent (kernel_simple compares the candidate with given test "
			    "cases or with a reference kernel)");
		return 0;
	}
	if (!json_is_array(cases) || json_array_size(cases) < 1 ||
	    json_array_size(cases) > KS_MAX_CASES)
		return ks_err(err, errlen, "test_cases: expected an array of 1 to %d test cases",
		    KS_MAX_CASES);
	json_array_foreach(cases, i, c) {
		snprintf(path, sizeof path, "test_cases[%zu]", i);
		if (!json_is_object(c))
			return ks_err(err, errlen, "%s: expected an object with \"inputs\" and "
			    "\"outputs\"", path);
		json_object_foreach((json_t *)c, key, v)
			if (strcmp(key, "inputs") != 0 && strcmp(key, "outputs") != 0 &&
			    strcmp(key, "name") != 0)
				return ks_err(err, errlen, "%s: unknown member '%s' (expected "
				    "inputs, outputs, name)", path, key);
		if ((v = json_object_get(c, "name")) != NULL && !json_is_string(v))
			return ks_err(err, errlen, "%s.name: expected a string", path);
		snprintf(path, sizeof path, "test_cases[%zu].inputs", i);
		if ((r = ks_check_tensors(json_object_get(c, "inputs"), spec->problem.inputs,
		    ev->inputs, spec->problem.ninputs, path, "input", err, errlen)) < 0)
			return r;
		snprintf(path, sizeof path, "test_cases[%zu].outputs", i);
		if ((r = ks_check_tensors(json_object_get(c, "outputs"), spec->problem.outputs,
		    ev->outputs, spec->problem.noutputs, path, "output", err, errlen)) < 0)
			return r;
	}
	return 0;
}

static void
ks_request(const json_t *payload, json_t *request)
{
	const json_t *cases = json_object_get(payload, "test_cases");

	if (json_is_array(cases))
		json_object_set(request, "test_cases", (json_t *)cases);
}

static const struct nw_kind kernel_simple_kind = {
	.name = "kernel_simple",
	.mode = "kernel_simple",
	.spec_flags = SPEC_REFERENCE_OPTIONAL,
	.run_performance = false,
	.speedup = false,
	.validate = ks_validate,
	.request = ks_request,
};

static int
kernel_simple_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
    char **ret_cause)
{
	return nw_init(&kernel_simple_kind, host, self, ret_cause);
}

static const char *const kernel_simple_serves[] = { "kernel_simple", NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "kernel_simple",
	.kind = KGYM_PLUGIN_WORKFLOW,
	.version = "0.1.0",
	.serves = kernel_simple_serves,
	.init = kernel_simple_init,
	.fini = nw_fini,
	.validate = nw_validate,
	.start = nw_start,
	.cancel = nw_cancel,
};

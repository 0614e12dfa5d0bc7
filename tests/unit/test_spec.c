/*
 * test_spec.c -- unit tests of the native payload's parser and evaluator
 * (plugins/common/spec.c): kgymd-protocol(7)'s native example parses into the right
 * structures and numbers; every validation error names its field path;
 * several size sets ("sizes": [...]) are each validated and evaluated.
 *
 * Bad payloads are made from the good one by replacing one field (set()
 * takes a path in the same notation as the messages), so each case shows
 * exactly what it breaks.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "spec.h"

/* kgymd-protocol(7)'s native example, with a reference program. */
static const char base_payload[] =
    "{\"backend\": \"nvrtc\","
    " \"problem\": {"
    "   \"name\": \"vector_add\","
    "   \"sizes\": {\"N\": 16777216},"
    "   \"inputs\":  [{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [\"N\"],"
    "                \"init\": {\"dist\": \"normal\"}},"
    "               {\"name\": \"y\", \"dtype\": \"float32\", \"shape\": [\"N\"]}],"
    "   \"outputs\": [{\"name\": \"out\", \"dtype\": \"float32\", \"shape\": [\"N\"]}],"
    "   \"reference\": {\"source\": \"extern \\\"C\\\" __global__ void ref(const float *x,"
    "       const float *y, float *o, int n) { }\","
    "     \"launch\": [{\"kernel\": \"ref\", \"grid\": [\"cdiv(N,256)\", 1, 1],"
    "       \"block\": [256, 1, 1], \"args\": [\"x\", \"y\", \"out\", \"N\"]}]},"
    "   \"atol\": 1e-5, \"rtol\": 1e-5},"
    " \"solution\": {"
    "   \"source\": \"extern \\\"C\\\" __global__ void add(const float *x, const float *y,"
    "       float *o, int n) { }\","
    "   \"launch\": [{\"kernel\": \"add\", \"grid\": [\"cdiv(N,256)\", 1, 1],"
    "               \"block\": [256, 1, 1], \"shared_bytes\": 0,"
    "               \"args\": [\"x\", \"y\", \"out\", \"N\"]}],"
    "   \"scratch\": [{\"name\": \"tmp\", \"dtype\": \"float32\", \"shape\": [\"N\"]}]}}";

static json_t *
base(void)
{
	json_error_t jerr;
	json_t *j = json_loads(base_payload, 0, &jerr);

	if (j == NULL)
		fail_msg("base payload: %s at %d", jerr.text, jerr.position);
	return j;
}

/*
 * Replace (or, with value NULL, delete) the member at `path` ("a.b[2].c").
 * An index one past an array's end appends.  `value` is JSON text.
 */
static void
set(json_t *root, const char *path, const char *value)
{
	char key[128];
	json_t *cur = root, *v = NULL, *next;
	const char *p = path;
	size_t n, idx = 0;
	bool is_index;
	json_error_t jerr;

	if (value != NULL && (v = json_loads(value, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr)) == NULL)
		fail_msg("set %s: bad value (%s) %.200s", path, jerr.text, value);
	for (;;) {
		is_index = *p == '[';
		if (is_index) {
			idx = strtoul(p + 1, (char **)&p, 10);
			p++;	/* ']' */
		} else {
			n = strcspn(p, ".[");
			memcpy(key, p, n);
			key[n] = '\0';
			p += n;
		}
		if (*p == '.')
			p++;
		if (*p == '\0')
			break;
		next = is_index ? json_array_get(cur, idx) : json_object_get(cur, key);
		if (next == NULL)
			fail_msg("set %s: no such path", path);
		cur = next;
	}
	if (is_index) {
		if (v == NULL)
			json_array_remove(cur, idx);
		else if (idx == json_array_size(cur))
			json_array_append_new(cur, v);
		else
			json_array_set_new(cur, idx, v);
	} else if (v == NULL)
		json_object_del(cur, key);
	else
		json_object_set_new(cur, key, v);
}

static int
parse(json_t *j, const struct spec_limits *limits, unsigned int flags, struct spec **ret,
    char *err, size_t errlen)
{
	return spec_parse(j, limits, flags, ret, err, errlen);
}

/* Parse `j` (consumed), asserting -EINVAL with exactly `message`. */
static void
expect_error_limits(json_t *j, const struct spec_limits *limits, unsigned int flags,
    const char *message)
{
	struct spec *s = (struct spec *)0x1;
	char err[1024] = "";
	int r;

	r = parse(j, limits, flags, &s, err, sizeof(err));
	json_decref(j);
	if (r != -EINVAL)
		fail_msg("expected -EINVAL (%s), got %d", message, r);
	assert_ptr_equal(s, (struct spec *)0x1);	/* untouched on failure */
	assert_string_equal(err, message);
}

static void
expect_error(json_t *j, const char *message)
{
	expect_error_limits(j, NULL, 0, message);
}

/* One field of the base payload replaced; the parse must fail with `message`. */
static void
bad(const char *path, const char *value, const char *message)
{
	json_t *j = base();

	set(j, path, value);
	expect_error(j, message);
}

/* One field of the base payload replaced; the parse must succeed. */
static struct spec *
good(const char *path, const char *value)
{
	struct spec *s = NULL;
	char err[1024] = "";
	json_t *j = base();

	if (path != NULL)
		set(j, path, value);
	if (parse(j, NULL, 0, &s, err, sizeof(err)) != 0)
		fail_msg("%s = %s: %s", path, value, err);
	json_decref(j);
	return s;
}

static void
test_design_example(void **state)
{
	struct spec_eval *ev = NULL;
	const struct spec_step *st;
	struct spec *s;
	char err[256];

	(void)state;
	s = good(NULL, NULL);
	assert_string_equal(s->problem.name, "vector_add");
	assert_int_equal(s->problem.nsizes, 1);
	assert_string_equal(s->problem.size_names[0], "N");
	assert_int_equal(s->problem.size_values[0], 16777216);

	assert_int_equal(s->problem.ninputs, 2);
	assert_string_equal(s->problem.inputs[0].name, "x");
	assert_int_equal(s->problem.inputs[0].dtype, SPEC_FLOAT32);
	assert_int_equal(s->problem.inputs[0].ndim, 1);
	assert_string_equal(expr_text(s->problem.inputs[0].shape[0]), "N");
	assert_int_equal(s->problem.inputs[0].ninit, 1);
	assert_int_equal(s->problem.inputs[0].init[0].kind, SPEC_INIT_NORMAL);
	assert_true(s->problem.inputs[0].init[0].mean == 0);
	assert_true(s->problem.inputs[0].init[0].std == 1);
	/* No init: normal(0, 1) for a float. */
	assert_int_equal(s->problem.inputs[1].ninit, 1);
	assert_int_equal(s->problem.inputs[1].init[0].kind, SPEC_INIT_NORMAL);
	assert_true(s->problem.inputs[1].init[0].std == 1);

	assert_int_equal(s->problem.noutputs, 1);
	assert_int_equal(s->problem.outputs[0].ninit, 0);
	assert_true(s->problem.has_atol && s->problem.has_rtol);
	assert_true(s->problem.outputs[0].atol == 1e-5);
	assert_true(s->problem.outputs[0].rtol == 1e-5);

	assert_true(s->problem.has_reference);
	assert_int_equal(s->problem.reference.nsteps, 1);
	assert_string_equal(s->problem.reference.steps[0].kernel, "ref");
	assert_int_equal(s->problem.reference.nscratch, 0);
	assert_int_equal(s->problem.reference.noptions, 0);

	assert_int_equal(s->solution.nsteps, 1);
	assert_int_equal(s->solution.source_len, strlen(s->solution.source));
	assert_non_null(strstr(s->solution.source, "void add("));
	st = &s->solution.steps[0];
	assert_string_equal(st->kernel, "add");
	assert_string_equal(expr_text(st->grid[0]), "cdiv(N,256)");
	assert_string_equal(expr_text(st->grid[1]), "1");
	assert_string_equal(expr_text(st->block[0]), "256");
	assert_string_equal(expr_text(st->shared_bytes), "0");
	assert_int_equal(st->nargs, 4);
	assert_int_equal(st->args[0].kind, SPEC_ARG_TENSOR);
	assert_int_equal(st->args[0].role, SPEC_ROLE_INPUT);
	assert_int_equal(st->args[0].index, 0);
	assert_int_equal(st->args[1].role, SPEC_ROLE_INPUT);
	assert_int_equal(st->args[1].index, 1);
	assert_int_equal(st->args[2].kind, SPEC_ARG_TENSOR);
	assert_int_equal(st->args[2].role, SPEC_ROLE_OUTPUT);
	assert_int_equal(st->args[2].index, 0);
	assert_int_equal(st->args[3].kind, SPEC_ARG_INT);
	assert_string_equal(expr_text(st->args[3].expr), "N");
	assert_int_equal(s->solution.nscratch, 1);
	assert_string_equal(s->solution.scratch[0].name, "tmp");
	assert_ptr_equal(spec_tensor_of(s, &s->solution, SPEC_ROLE_SCRATCH, 0),
	    &s->solution.scratch[0]);
	assert_ptr_equal(spec_tensor_of(s, &s->solution, SPEC_ROLE_OUTPUT, 0),
	    &s->problem.outputs[0]);
	assert_null(spec_tensor_of(s, &s->solution, SPEC_ROLE_INPUT, 2));
	assert_null(spec_tensor_of(s, &s->problem.reference, SPEC_ROLE_SCRATCH, 0));

	/* Evaluated with the problem's sizes. */
	assert_int_equal(spec_evaluate(s, NULL, NULL, &ev, err, sizeof(err)), 0);
	assert_int_equal(ev->ninputs, 2);
	assert_int_equal(ev->inputs[0].ndim, 1);
	assert_int_equal(ev->inputs[0].dims[0], 16777216);
	assert_int_equal(ev->inputs[0].numel, 16777216);
	assert_int_equal(ev->inputs[0].bytes, 64 << 20);
	assert_int_equal(ev->solution.nsteps, 1);
	assert_string_equal(ev->solution.steps[0].kernel, "add");
	assert_int_equal(ev->solution.steps[0].grid[0], 65536);
	assert_int_equal(ev->solution.steps[0].grid[1], 1);
	assert_int_equal(ev->solution.steps[0].grid[2], 1);
	assert_int_equal(ev->solution.steps[0].block[0], 256);
	assert_int_equal(ev->solution.steps[0].shared_bytes, 0);
	assert_int_equal(ev->solution.steps[0].nargs, 4);
	assert_int_equal(ev->solution.steps[0].args[2].kind, SPEC_ARG_TENSOR);
	assert_int_equal(ev->solution.steps[0].args[2].role, SPEC_ROLE_OUTPUT);
	assert_int_equal(ev->solution.steps[0].args[3].kind, SPEC_ARG_INT);
	assert_int_equal(ev->solution.steps[0].args[3].i, 16777216);
	assert_int_equal(ev->reference.nsteps, 1);
	assert_int_equal(ev->reference.steps[0].grid[0], 65536);
	assert_int_equal(ev->solution.nscratch, 1);
	assert_int_equal(ev->solution.scratch[0].bytes, 64 << 20);
	/* 2 inputs + the output twice + the scratch, each 64 MiB. */
	assert_int_equal(ev->device_bytes, UINT64_C(5) * (64 << 20));
	spec_eval_free(ev);
	spec_free(s);
	spec_free(NULL);
	spec_eval_free(NULL);
}

static void
test_evaluate_other_sizes(void **state)
{
	struct spec_eval *ev = NULL;
	int64_t sizes[1] = { 1000 };
	char err[256];
	struct spec *s;

	(void)state;
	s = good(NULL, NULL);
	assert_int_equal(spec_evaluate(s, sizes, NULL, &ev, err, sizeof(err)), 0);
	assert_int_equal(ev->inputs[1].bytes, 4000);
	assert_int_equal(ev->solution.steps[0].grid[0], 4);
	assert_int_equal(ev->solution.steps[0].args[3].i, 1000);
	/* Five allocations, each rounded up to 2 MiB. */
	assert_int_equal(ev->device_bytes, 5 * SPEC_ALLOC_GRANULARITY);
	spec_eval_free(ev);

	/* A size that makes a shape 0 fails with the path, and leaves ret alone. */
	sizes[0] = 0;
	ev = (struct spec_eval *)0x1;
	assert_int_equal(spec_evaluate(s, sizes, NULL, &ev, err, sizeof(err)), -EINVAL);
	assert_ptr_equal(ev, (struct spec_eval *)0x1);
	assert_string_equal(err, "problem.inputs[0].shape[0]: 'N' is 0, must be >= 1");

	/* A tighter limit on tensors applies to evaluation too. */
	{
		struct spec_limits lim = { .max_tensor_bytes = 1 << 20 };

		sizes[0] = 1 << 20;
		assert_int_equal(spec_evaluate(s, sizes, &lim, &ev, err, sizeof(err)), -EINVAL);
		assert_string_equal(err, "problem.inputs[0]: 'x' (1048576 elements of float32) is "
		    "larger than the limit of 1048576 bytes");
	}
	spec_free(s);
}

static void
test_top_level(void **state)
{
	json_t *j;

	(void)state;
	expect_error(json_array(), "payload: expected an object");
	j = base();
	set(j, "problem", NULL);
	expect_error(j, "problem: missing");
	j = base();
	set(j, "solution", NULL);
	expect_error(j, "solution: missing");
	bad("problem", "[]", "problem: expected an object, not an array");
	bad("solution", "\"add\"", "solution: expected an object, not a string");
	bad("problem.shape", "[1]", "problem.shape: unknown member (known: name, sizes, inputs, "
	    "outputs, reference, atol, rtol)");
	bad("solution.launch[0].shared_byte", "0", "solution.launch[0].shared_byte: unknown "
	    "member (known: kernel, grid, block, shared_bytes, args)");
	bad("solution.sources", "\"\"", "solution.sources: unknown member (known: source, launch, "
	    "options, scratch)");
	/* Members beside problem and solution are the workflow's. */
	spec_free(good("tests", "[{\"anything\": 1}]"));
	spec_free(good("problem.name", NULL));
}

static void
test_reference_optional(void **state)
{
	struct spec *s = NULL;
	char err[256];
	json_t *j;

	(void)state;
	j = base();
	set(j, "problem.reference", NULL);
	assert_int_equal(parse(j, NULL, SPEC_REFERENCE_OPTIONAL, &s, err, sizeof(err)), 0);
	assert_false(s->problem.has_reference);
	assert_int_equal(s->problem.reference.nsteps, 0);
	spec_free(s);
	expect_error(j, "problem.reference: missing");
}

static void
test_problem_fields(void **state)
{
	struct spec *s;

	(void)state;
	bad("problem.name", "\"\"", "problem.name: expected 1 to 64 bytes");
	bad("problem.name", "7", "problem.name: expected a string, not an integer");
	bad("problem.atol", "\"small\"", "problem.atol: expected a number, not a string");
	bad("problem.rtol", "-1", "problem.rtol: must be >= 0");
	bad("problem.outputs", "[]", "problem.outputs: expected 1 to 64 elements, not 0");
	bad("problem.inputs", "{}", "problem.inputs: expected an array, not an object");
	/* A problem may have no inputs. */
	{
		char err[256];
		json_t *j = base();

		set(j, "problem.inputs", "[]");
		set(j, "problem.reference.launch[0].args", "[\"out\", \"N\"]");
		set(j, "solution.launch[0].args", "[\"out\", \"N\"]");
		assert_int_equal(parse(j, NULL, 0, &s, err, sizeof(err)), 0);
		assert_int_equal(s->problem.ninputs, 0);
		spec_free(s);
		json_decref(j);
	}
	/* Integer tolerances are numbers too. */
	s = good("problem.atol", "0");
	assert_true(s->problem.outputs[0].atol == 0);
	spec_free(s);
}

static void
test_sizes(void **state)
{
	struct spec *s;

	(void)state;
	bad("problem.sizes.N", "1.5", "problem.sizes.N: expected an integer, not a real number");
	bad("problem.sizes.N", "\"16\"", "problem.sizes.N: expected an integer, not a string");
	bad("problem.sizes.9N", "1", "problem.sizes.9N: not a size name ([A-Za-z_][A-Za-z0-9_]*, "
	    "at most 64 bytes, not cdiv, min or max)");
	bad("problem.sizes.min", "1", "problem.sizes.min: not a size name "
	    "([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes, not cdiv, min or max)");
	bad("problem.sizes", "7", "problem.sizes: expected an object of name: integer, or an "
	    "array of 1 to 8 such size sets, not an integer");
	bad("problem.sizes", "[1]", "problem.sizes[0]: expected an object of name: integer, "
	    "not an integer");
	/* Unused sizes are fine; so are negative ones that no shape uses. */
	s = good("problem.sizes.M", "-3");
	assert_int_equal(s->problem.nsizes, 2);
	spec_free(s);
}

/* "sizes": [{...}, ...]: several size sets, each validated and evaluated. */
static void
test_size_sets(void **state)
{
	struct spec_eval *ev = NULL;
	struct spec_limits lim = { .max_tensor_bytes = 1 << 20 };
	uint64_t bytes = 0;
	char err[256], text[64];
	struct spec *s;
	json_t *j;

	(void)state;
	s = good("problem.sizes", "[{\"N\": 16777216}, {\"N\": 1000}]");
	assert_int_equal(s->problem.nsets, 2);
	assert_true(s->problem.sizes_listed);
	assert_int_equal(s->problem.nsizes, 1);
	assert_int_equal(spec_size_set(s, 0)[0], 16777216);
	assert_int_equal(spec_size_set(s, 1)[0], 1000);
	assert_null(spec_size_set(s, 2));
	spec_size_set_text(s, 1, text, sizeof(text));
	assert_string_equal(text, "N=1000");
	/* NULL is the first set; each set evaluates to its own numbers. */
	assert_int_equal(spec_evaluate(s, NULL, NULL, &ev, err, sizeof(err)), 0);
	assert_int_equal(ev->solution.steps[0].grid[0], 65536);
	spec_eval_free(ev);
	assert_int_equal(spec_evaluate(s, spec_size_set(s, 1), NULL, &ev, err, sizeof(err)), 0);
	assert_int_equal(ev->solution.steps[0].grid[0], 4);
	assert_int_equal(ev->inputs[0].bytes, 4000);
	spec_eval_free(ev);
	/* Admission: the largest set, wherever it is in the list. */
	assert_int_equal(spec_device_bytes(s, NULL, &bytes, err, sizeof(err)), 0);
	assert_int_equal(bytes, UINT64_C(5) * (64 << 20));
	spec_free(s);
	s = good("problem.sizes", "[{\"N\": 1000}, {\"N\": 16777216}]");
	assert_int_equal(spec_evaluate(s, NULL, NULL, &ev, err, sizeof(err)), 0);
	assert_int_equal(ev->device_bytes, 5 * SPEC_ALLOC_GRANULARITY);
	spec_eval_free(ev);
	assert_int_equal(spec_device_bytes(s, NULL, &bytes, err, sizeof(err)), 0);
	assert_int_equal(bytes, UINT64_C(5) * (64 << 20));
	/* A limit the second set breaks is an error of that set. */
	assert_int_equal(spec_device_bytes(s, &lim, &bytes, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "problem.inputs[0]: 'x' (16777216 elements of float32) is "
	    "larger than the limit of 1048576 bytes");
	spec_free(s);
	/* A single-size problem: one set, as before. */
	s = good(NULL, NULL);
	assert_int_equal(s->problem.nsets, 1);
	assert_false(s->problem.sizes_listed);
	assert_int_equal(spec_device_bytes(s, NULL, &bytes, err, sizeof(err)), 0);
	assert_int_equal(bytes, UINT64_C(5) * (64 << 20));
	spec_free(s);
	/* The same names in any order; the first set's order is the problem's. */
	s = good("problem.sizes", "[{\"N\": 16, \"M\": 2}, {\"M\": 3, \"N\": 40}, "
	    "{\"N\": 8, \"M\": -1}]");
	assert_int_equal(s->problem.nsets, 3);
	assert_string_equal(s->problem.size_names[0], "N");
	assert_int_equal(spec_size_set(s, 1)[0], 40);
	assert_int_equal(spec_size_set(s, 1)[1], 3);
	spec_size_set_text(s, 2, text, sizeof(text));
	assert_string_equal(text, "N=8, M=-1");
	spec_size_set_text(s, 2, text, 5);
	assert_string_equal(text, "N=8,");
	spec_free(s);
	/* Eight sets at most; one is fine (no prefix on its messages). */
	spec_free(good("problem.sizes", "[{\"N\": 1}, {\"N\": 2}, {\"N\": 3}, {\"N\": 4}, "
	    "{\"N\": 5}, {\"N\": 6}, {\"N\": 7}, {\"N\": 8}]"));
	spec_free(good("problem.sizes", "[{\"N\": 1}]"));

	bad("problem.sizes", "[]", "problem.sizes: expected 1 to 8 size sets, not 0");
	bad("problem.sizes", "[{\"N\": 1}, {\"N\": 2}, {\"N\": 3}, {\"N\": 4}, {\"N\": 5}, "
	    "{\"N\": 6}, {\"N\": 7}, {\"N\": 8}, {\"N\": 9}]",
	    "problem.sizes: expected 1 to 8 size sets, not 9");
	bad("problem.sizes", "[{\"N\": 16}, 3]",
	    "problem.sizes[1]: expected an object of name: integer, not an integer");
	bad("problem.sizes", "[{\"N\": 16}, {\"M\": 16}]", "problem.sizes[1].M: not a size of "
	    "problem.sizes[0] (every size set names the same sizes)");
	bad("problem.sizes", "[{\"N\": 16}, {\"N\": 8, \"M\": 16}]", "problem.sizes[1].M: not "
	    "a size of problem.sizes[0] (every size set names the same sizes)");
	bad("problem.sizes", "[{\"N\": 16, \"M\": 1}, {\"N\": 8}]", "problem.sizes[1]: lacks "
	    "'M' (every size set names the same sizes as problem.sizes[0])");
	bad("problem.sizes", "[{\"N\": 16}, {\"N\": \"8\"}]",
	    "problem.sizes[1].N: expected an integer, not a string");
	bad("problem.sizes", "[{\"9N\": 16}]", "problem.sizes[0].9N: not a size name "
	    "([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes, not cdiv, min or max)");
	bad("problem.sizes", "[{\"N\": 16}, {\"N\": 8}, {\"N\": 16}]",
	    "problem.sizes[2]: the same sizes as problem.sizes[0]");
	bad("problem.sizes", "[{}, {}]", "problem.sizes[1]: the same sizes as problem.sizes[0]");
	/* Every set is evaluated with all of its checks, and named when it fails. */
	bad("problem.sizes", "[{\"N\": 16}, {\"N\": 0}]",
	    "problem.sizes[1]: problem.inputs[0].shape[0]: 'N' is 0, must be >= 1");
	bad("problem.sizes", "[{\"N\": 0}, {\"N\": 16}]",
	    "problem.sizes[0]: problem.inputs[0].shape[0]: 'N' is 0, must be >= 1");
	bad("problem.sizes", "[{\"N\": 0}]", "problem.inputs[0].shape[0]: 'N' is 0, must be >= 1");
	j = base();
	set(j, "problem.sizes", "[{\"N\": 1024}, {\"N\": 1048576}]");
	expect_error_limits(j, &lim, 0, "problem.sizes[1]: problem.inputs[0]: 'x' (1048576 "
	    "elements of float32) is larger than the limit of 1048576 bytes");
	/* Names clash with the listed form's path. */
	j = base();
	set(j, "problem.sizes", "[{\"N\": 16}, {\"N\": 8}]");
	set(j, "problem.outputs[0].name", "\"N\"");
	expect_error(j, "problem.outputs[0].name: 'N' is already the name of problem.sizes[0].N");
}

static void
test_tensors(void **state)
{
	struct spec *s;

	(void)state;
	bad("problem.inputs[1].name", "\"x\"",
	    "problem.inputs[1].name: 'x' is already the name of problem.inputs[0]");
	bad("problem.outputs[0].name", "\"y\"",
	    "problem.outputs[0].name: 'y' is already the name of problem.inputs[1]");
	bad("problem.outputs[0].name", "\"N\"",
	    "problem.outputs[0].name: 'N' is already the name of problem.sizes.N");
	bad("solution.scratch[0].name", "\"out\"",
	    "solution.scratch[0].name: 'out' is already the name of problem.outputs[0]");
	bad("solution.scratch[1]", "{\"name\": \"tmp\", \"dtype\": \"int8\", \"shape\": []}",
	    "solution.scratch[1].name: 'tmp' is already the name of solution.scratch[0]");
	bad("problem.inputs[0].name", "\"x-1\"", "problem.inputs[0].name: 'x-1' is not a name "
	    "([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes)");
	bad("problem.inputs[0].name", NULL, "problem.inputs[0].name: missing");
	bad("problem.inputs[0]", "\"x\"", "problem.inputs[0]: expected a tensor object, "
	    "not a string");
	bad("problem.inputs[0].dtype", "\"float\"", "problem.inputs[0].dtype: unknown dtype "
	    "'float' (float64, float32, float16, bfloat16, int64, int32, int16, int8, uint8, bool)");
	bad("problem.inputs[0].shape", "\"N\"",
	    "problem.inputs[0].shape: expected an array, not a string");
	bad("problem.inputs[0].shape", "[1,1,1,1,1,1,1,1,1]",
	    "problem.inputs[0].shape: expected 0 to 8 elements, not 9");
	bad("problem.outputs[0].init", "{\"dist\": \"normal\"}", "problem.outputs[0].init: "
	    "unknown member (known: name, dtype, shape)");
	/* Scratch of the reference and of the solution are separate scopes. */
	s = good("problem.reference.scratch", "[{\"name\": \"tmp\", \"dtype\": \"float32\", "
	    "\"shape\": [\"N\", 2]}]");
	assert_int_equal(s->problem.reference.nscratch, 1);
	assert_int_equal(s->problem.reference.scratch[0].ndim, 2);
	spec_free(s);
	/* A scalar: shape []. */
	s = good("problem.outputs[0].shape", "[]");
	assert_int_equal(s->problem.outputs[0].ndim, 0);
	spec_free(s);
}

static void
test_dtypes(void **state)
{
	static const char *const names[] = { "float64", "float32", "float16", "bfloat16",
		"int64", "int32", "int16", "int8", "uint8", "bool" };
	static const size_t sizes[] = { 8, 4, 2, 2, 8, 4, 2, 1, 1, 1 };
	static const double tols[] = { 1e-8, 1e-4, 1e-2, 1e-2, 0, 0, 0, 0, 0, 0 };
	struct spec_eval *ev;
	enum spec_dtype d;
	char value[64], err[256];
	struct spec *s;
	json_t *j;
	size_t i;

	(void)state;
	for (i = 0; i < SPEC_NDTYPES; i++) {
		assert_int_equal(spec_dtype_parse(names[i], &d), 0);
		assert_int_equal(d, i);
		assert_string_equal(spec_dtype_name(d), names[i]);
		assert_int_equal(spec_dtype_size(d), sizes[i]);
		assert_int_equal(spec_dtype_is_float(d), i < 4);

		/* Output tolerances default per dtype when the problem sets none. */
		j = base();
		set(j, "problem.atol", NULL);
		set(j, "problem.rtol", NULL);
		snprintf(value, sizeof(value), "\"%s\"", names[i]);
		set(j, "problem.outputs[0].dtype", value);
		set(j, "problem.inputs[1].dtype", value);
		assert_int_equal(parse(j, NULL, 0, &s, err, sizeof(err)), 0);
		json_decref(j);
		assert_false(s->problem.has_atol);
		assert_true(s->problem.outputs[0].atol == tols[i]);
		assert_true(s->problem.outputs[0].rtol == tols[i]);
		assert_int_equal(s->problem.inputs[1].init[0].kind,
		    i < 4 ? SPEC_INIT_NORMAL : SPEC_INIT_RANDINT);
		assert_int_equal(spec_evaluate(s, NULL, NULL, &ev, err, sizeof(err)), 0);
		assert_int_equal(ev->outputs[0].bytes, 16777216 * sizes[i]);
		spec_eval_free(ev);
		spec_free(s);
	}
	assert_int_equal(spec_dtype_parse("Float32", &d), -EINVAL);
	assert_string_equal(spec_dtype_name((enum spec_dtype)99), "?");
	assert_int_equal(spec_dtype_size((enum spec_dtype)99), 0);
	assert_string_equal(spec_role_name(SPEC_ROLE_SCRATCH), "scratch");
}

static void
test_inits(void **state)
{
	const struct spec_init *in;
	struct spec *s;

	(void)state;
	/* Several inits: trials cycle them. */
	s = good("problem.inputs[0].init", "[{\"dist\": \"normal\", \"mean\": 2, \"std\": 0.5},"
	    " {\"dist\": \"uniform\", \"low\": -1, \"high\": 3}, {\"dist\": \"randint\", "
	    "\"low\": 0, \"high\": 5}, {\"dist\": \"uniform\"}]");
	in = s->problem.inputs[0].init;
	assert_int_equal(s->problem.inputs[0].ninit, 4);
	assert_int_equal(in[0].kind, SPEC_INIT_NORMAL);
	assert_true(in[0].mean == 2 && in[0].std == 0.5);
	assert_int_equal(in[1].kind, SPEC_INIT_UNIFORM);
	assert_true(in[1].low == -1 && in[1].high == 3);
	assert_int_equal(in[2].kind, SPEC_INIT_RANDINT);
	assert_true(in[2].low == 0 && in[2].high == 5);
	assert_true(in[3].low == 0 && in[3].high == 1);
	spec_free(s);

	/* Integer dtypes default to small randint ranges. */
	s = good("problem.inputs[1].dtype", "\"uint8\"");
	in = s->problem.inputs[1].init;
	assert_true(in[0].kind == SPEC_INIT_RANDINT && in[0].low == 0 && in[0].high == 16);
	spec_free(s);
	s = good("problem.inputs[1].dtype", "\"bool\"");
	in = s->problem.inputs[1].init;
	assert_true(in[0].low == 0 && in[0].high == 2);
	spec_free(s);

	bad("problem.inputs[0].init", "{\"dist\": \"gauss\"}", "problem.inputs[0].init.dist: "
	    "unknown distribution 'gauss' (normal, uniform, randint)");
	bad("problem.inputs[0].init", "{\"mean\": 1}", "problem.inputs[0].init.dist: missing");
	bad("problem.inputs[0].init", "[]",
	    "problem.inputs[0].init: expected 1 to 16 elements, not 0");
	bad("problem.inputs[0].init", "[{\"dist\": \"normal\"}, 3]",
	    "problem.inputs[0].init[1]: expected an object such as {\"dist\": \"normal\"}, "
	    "not an integer");
	bad("problem.inputs[0].init", "{\"dist\": \"normal\", \"std\": 0}",
	    "problem.inputs[0].init.std: must be > 0, is 0");
	bad("problem.inputs[0].init", "{\"dist\": \"normal\", \"low\": 0}",
	    "problem.inputs[0].init.low: unknown member (known: dist, mean, std)");
	bad("problem.inputs[0].init", "{\"dist\": \"uniform\", \"low\": 2, \"high\": 2}",
	    "problem.inputs[0].init: low (2) must be below high (2)");
	bad("problem.inputs[0].init", "{\"dist\": \"uniform\", \"high\": \"3\"}",
	    "problem.inputs[0].init.high: expected a number, not a string");
	bad("problem.inputs[0].init", "{\"dist\": \"randint\", \"high\": 2.5}",
	    "problem.inputs[0].init.high: expected an integer, not a real number");
	bad("problem.inputs[1]", "{\"name\": \"y\", \"dtype\": \"int32\", \"shape\": [4],"
	    " \"init\": {\"dist\": \"normal\"}}", "problem.inputs[1].init.dist: 'normal' needs a "
	    "floating-point dtype; int32 takes 'randint'");
	bad("problem.inputs[1]", "{\"name\": \"y\", \"dtype\": \"int8\", \"shape\": [4],"
	    " \"init\": {\"dist\": \"randint\", \"low\": 0, \"high\": 200}}",
	    "problem.inputs[1].init: randint [0, 200) does not fit int8 ([-128, 127])");
	bad("problem.inputs[1]", "{\"name\": \"y\", \"dtype\": \"int64\", \"shape\": [4],"
	    " \"init\": {\"dist\": \"randint\", \"high\": 9007199254740993}}",
	    "problem.inputs[1].init.high: beyond +-2^53");
}

static void
test_expressions(void **state)
{
	struct spec_limits lim = { .max_tensor_bytes = 1000 };
	char err[256];
	struct spec *s;
	json_t *j;

	(void)state;
	bad("problem.inputs[0].shape[0]", "\"N*\"", "problem.inputs[0].shape[0]: 'N*': expected "
	    "a number, a name or '(' at column 3");
	bad("problem.inputs[0].shape[0]", "\"N*K\"",
	    "problem.inputs[0].shape[0]: 'N*K': unknown size 'K' at column 3");
	bad("problem.inputs[0].shape[0]", "\"N-N\"",
	    "problem.inputs[0].shape[0]: 'N-N' is 0, must be >= 1");
	bad("problem.inputs[0].shape[0]", "-4",
	    "problem.inputs[0].shape[0]: '-4' is -4, must be >= 1");
	bad("problem.inputs[0].shape[0]", "1.5", "problem.inputs[0].shape[0]: expected an "
	    "integer or an expression string, not a real number");
	bad("problem.inputs[0].shape[0]", "\"N*N*N*N*N\"", "problem.inputs[0].shape[0]: "
	    "'N*N*N*N*N': 64-bit integer overflow in '*' (281474976710656 and 16777216) "
	    "at column 4");
	bad("problem.inputs[0].shape", "[\"N\", \"N\", \"N\"]",
	    "problem.inputs[0]: 'x' has more than 2^64 elements");
	bad("problem.inputs[0].shape", "[\"N\", \"N\"]",
	    "problem.inputs[0]: 'x' (281474976710656 elements of float32) is larger than the "
	    "limit of 68719476736 bytes");
	/* The limit is the caller's: 250 floats are exactly 1000 bytes. */
	j = base();
	set(j, "problem.sizes.N", "251");
	expect_error_limits(j, &lim, 0, "problem.inputs[0]: 'x' (251 elements of float32) is "
	    "larger than the limit of 1000 bytes");
	j = base();
	set(j, "problem.sizes.N", "250");
	assert_int_equal(parse(j, &lim, 0, &s, err, sizeof(err)), 0);
	spec_free(s);
	set(j, "solution.scratch[0].shape", "[\"N\", 2]");
	expect_error_limits(j, &lim, 0, "solution.scratch[0]: 'tmp' (500 elements of float32) "
	    "is larger than the limit of 1000 bytes");

	/* Grid, block and shared memory. */
	bad("solution.launch[0].grid[0]", "\"cdiv(N, 0)\"", "solution.launch[0].grid[0]: "
	    "'cdiv(N, 0)': division (cdiv) by zero at column 1");
	bad("solution.launch[0].grid[1]", "0",
	    "solution.launch[0].grid[1]: '0' is 0, must be 1..2147483647");
	bad("solution.launch[0].block[2]", "\"1-2\"",
	    "solution.launch[0].block[2]: '1-2' is -1, must be 1..2147483647");
	bad("solution.launch[0].grid[0]", "\"N*N\"", "solution.launch[0].grid[0]: 'N*N' is "
	    "281474976710656, must be 1..2147483647");
	bad("problem.reference.launch[0].block", "[1, 2, 3, 4]",
	    "problem.reference.launch[0].block: expected 1 to 3 dimensions, not 4");
	bad("problem.reference.launch[0].block", "[]",
	    "problem.reference.launch[0].block: expected 1 to 3 dimensions, not 0");
	bad("solution.launch[0].grid", NULL, "solution.launch[0].grid: missing");
	bad("solution.launch[0].grid", "null", "solution.launch[0].grid: expected an integer or "
	    "an expression string, not null");
	bad("solution.launch[0].shared_bytes", "-1",
	    "solution.launch[0].shared_bytes: '-1' is -1, must be 0..4294967295");
	bad("solution.launch[0].shared_bytes", "\"4294967296\"", "solution.launch[0]."
	    "shared_bytes: '4294967296' is 4294967296, must be 0..4294967295");
	bad("solution.launch[0].shared_bytes", "\"S\"",
	    "solution.launch[0].shared_bytes: 'S': unknown size 'S' at column 1");

	/* One expression for grid or block: [x, 1, 1]; short arrays are padded. */
	s = good("solution.launch[0].grid", "\"cdiv(N, 1024)\"");
	assert_string_equal(expr_text(s->solution.steps[0].grid[0]), "cdiv(N, 1024)");
	assert_string_equal(expr_text(s->solution.steps[0].grid[1]), "1");
	assert_string_equal(expr_text(s->solution.steps[0].grid[2]), "1");
	spec_free(s);
	s = good("solution.launch[0].block", "[32, \"8\"]");
	assert_string_equal(expr_text(s->solution.steps[0].block[1]), "8");
	assert_string_equal(expr_text(s->solution.steps[0].block[2]), "1");
	spec_free(s);
	s = good("solution.launch[0].shared_bytes", "\"min(N, 49152) * 1\"");
	spec_free(s);
}

static void
test_args(void **state)
{
	const struct spec_arg *a;
	struct spec_eval *ev;
	struct spec *s;
	char err[256];
	json_t *j;

	(void)state;
	s = good("solution.launch[0].args", "[\"tmp\", \"x\", \"N*2\", 7, {\"f32\": 0.1}, "
	    "{\"f64\": 0.1}, {\"i32\": -5}, {\"i64\": 9007199254740993}, {\"f32\": 3}]");
	a = s->solution.steps[0].args;
	assert_int_equal(s->solution.steps[0].nargs, 9);
	assert_int_equal(a[0].kind, SPEC_ARG_TENSOR);
	assert_int_equal(a[0].role, SPEC_ROLE_SCRATCH);
	assert_int_equal(a[0].index, 0);
	assert_int_equal(a[1].role, SPEC_ROLE_INPUT);
	assert_int_equal(a[2].kind, SPEC_ARG_INT);
	assert_int_equal(a[3].kind, SPEC_ARG_INT);
	assert_string_equal(expr_text(a[3].expr), "7");
	assert_int_equal(a[4].kind, SPEC_ARG_F32);
	assert_true(a[4].f == (double)0.1f);	/* rounded to float */
	assert_int_equal(a[5].kind, SPEC_ARG_F64);
	assert_true(a[5].f == 0.1);
	assert_int_equal(a[6].kind, SPEC_ARG_I32);
	assert_int_equal(a[6].i, -5);
	assert_int_equal(a[7].kind, SPEC_ARG_I64);
	assert_int_equal(a[7].i, INT64_C(9007199254740993));
	assert_true(a[8].f == 3.0);
	assert_int_equal(spec_evaluate(s, NULL, NULL, &ev, err, sizeof(err)), 0);
	assert_int_equal(ev->solution.steps[0].args[2].i, 2 * 16777216);
	assert_int_equal(ev->solution.steps[0].args[3].i, 7);
	assert_int_equal(ev->solution.steps[0].args[6].i, -5);
	assert_true(ev->solution.steps[0].args[5].f == 0.1);
	assert_int_equal(ev->solution.steps[0].args[0].role, SPEC_ROLE_SCRATCH);
	spec_eval_free(ev);
	spec_free(s);

	bad("solution.launch[0].args[2]", "\"tmp2\"",
	    "solution.launch[0].args[2]: unknown tensor or size 'tmp2'");
	bad("solution.launch[0].args[3]", "\"N+K\"",
	    "solution.launch[0].args[3]: 'N+K': unknown size 'K' at column 3");
	bad("solution.launch[0].args[3]", "\"N/(N-N)\"",
	    "solution.launch[0].args[3]: 'N/(N-N)': division by zero at column 2");
	bad("solution.launch[0].args[3]", "\"x[0]\"", "solution.launch[0].args[3]: 'x[0]': "
	    "expected an operator or the end, not '[' at column 2");
	/* The reference's scratch is not the solution's. */
	j = base();
	set(j, "problem.reference.scratch", "[{\"name\": \"rtmp\", \"dtype\": \"float32\", "
	    "\"shape\": [1]}]");
	set(j, "solution.launch[0].args[0]", "\"rtmp\"");
	expect_error(j, "solution.launch[0].args[0]: unknown tensor or size 'rtmp'");
	bad("problem.reference.launch[0].args[0]", "\"tmp\"",
	    "problem.reference.launch[0].args[0]: unknown tensor or size 'tmp'");
	bad("solution.launch[0].args[3]", "true", "solution.launch[0].args[3]: expected a tensor "
	    "name, an integer expression or a typed literal such as {\"f32\": 0.5}, not a boolean");
	bad("solution.launch[0].args[3]", "2.5", "solution.launch[0].args[3]: expected a tensor "
	    "name, an integer expression or a typed literal such as {\"f32\": 0.5}, "
	    "not a real number");
	bad("solution.launch[0].args[3]", "{\"i32\": 2147483648}",
	    "solution.launch[0].args[3].i32: 2147483648 does not fit in 32 bits");
	bad("solution.launch[0].args[3]", "{\"i64\": 1.0}",
	    "solution.launch[0].args[3].i64: expected an integer, not a real number");
	bad("solution.launch[0].args[3]", "{\"f32\": 1e39}",
	    "solution.launch[0].args[3].f32: 1e+39 is beyond the range of float");
	bad("solution.launch[0].args[3]", "{\"f64\": \"1\"}",
	    "solution.launch[0].args[3].f64: expected a number, not a string");
	bad("solution.launch[0].args[3]", "{\"u32\": 1}",
	    "solution.launch[0].args[3].u32: unknown literal type (f32, f64, i32, i64)");
	bad("solution.launch[0].args[3]", "{\"i32\": 1, \"i64\": 1}",
	    "solution.launch[0].args[3]: a typed literal has exactly one member "
	    "(f32, f64, i32 or i64), not 2");
	bad("solution.launch[0].args", NULL, "solution.launch[0].args: missing");
	/* No arguments at all is fine; 65 are too many. */
	spec_free(good("solution.launch[0].args", "[]"));
	{
		char many[65 * 4 + 8];
		size_t i, n = 0;

		many[n++] = '[';
		for (i = 0; i < 65; i++)
			n += (size_t)sprintf(many + n, "%s\"N\"", i ? "," : "");
		strcpy(many + n, "]");
		bad("solution.launch[0].args", many,
		    "solution.launch[0].args: expected 0 to 64 elements, not 65");
		many[n - 4] = ']';	/* drop the last: 64 */
		many[n - 3] = '\0';
		spec_free(good("solution.launch[0].args", many));
	}
}

static void
test_launch_and_source(void **state)
{
	struct spec_limits lim = { .max_source_bytes = 80 };
	char *big, *steps;
	size_t i, n;
	json_t *j;

	(void)state;
	bad("solution.launch", "[]", "solution.launch: expected 1 to 64 elements, not 0");
	bad("solution.launch", NULL, "solution.launch: missing");
	bad("solution.launch[0]", "\"add\"", "solution.launch[0]: expected a launch step object, "
	    "not a string");
	bad("solution.launch[0].kernel", "\"add kernel\"", "solution.launch[0].kernel: "
	    "'add kernel' is not a C identifier (an extern \"C\" kernel's name, at most 256 "
	    "bytes)");
	bad("solution.launch[0].kernel", "\"2add\"", "solution.launch[0].kernel: '2add' is not "
	    "a C identifier (an extern \"C\" kernel's name, at most 256 bytes)");
	bad("solution.launch[0].kernel", NULL, "solution.launch[0].kernel: missing");
	bad("solution.launch[1]", "{\"kernel\": \"k2\", \"grid\": 1, \"block\": 1, "
	    "\"args\": [\"nope\"]}", "solution.launch[1].args[0]: unknown tensor or size 'nope'");

	/* 64 steps parse, 65 do not. */
	steps = malloc(65 * 64 + 8);
	assert_non_null(steps);
	for (n = 65; n >= 64; n--) {
		strcpy(steps, "[");
		for (i = 0; i < n; i++)
			strcat(strcat(steps, i ? "," : ""), "{\"kernel\":\"k\",\"grid\":1,"
			    "\"block\":1,\"args\":[]}");
		strcat(steps, "]");
		if (n == 65)
			bad("solution.launch", steps,
			    "solution.launch: expected 1 to 64 elements, not 65");
		else
			spec_free(good("solution.launch", steps));
	}
	free(steps);

	bad("solution.source", "\"\"", "solution.source: empty");
	bad("solution.source", NULL, "solution.source: missing");
	bad("problem.reference.source", "42",
	    "problem.reference.source: expected a string, not an integer");
	bad("solution.source", "\"a\\u0000b\"", "solution.source: contains a NUL character");
	/* The size limit is the caller's; 1 MiB by default. */
	j = base();
	expect_error_limits(j, &lim, 0, "problem.reference.source: 89 bytes, more than the "
	    "limit of 80");
	big = malloc(SPEC_DEFAULT_MAX_SOURCE_BYTES + 4);
	assert_non_null(big);
	memset(big, ' ', SPEC_DEFAULT_MAX_SOURCE_BYTES + 3);
	big[0] = '"';
	big[SPEC_DEFAULT_MAX_SOURCE_BYTES + 2] = '"';
	big[SPEC_DEFAULT_MAX_SOURCE_BYTES + 3] = '\0';
	bad("solution.source", big, "solution.source: 1048577 bytes, more than the limit of "
	    "1048576");
	big[SPEC_DEFAULT_MAX_SOURCE_BYTES + 1] = '"';
	big[SPEC_DEFAULT_MAX_SOURCE_BYTES + 2] = '\0';
	spec_free(good("solution.source", big));
	free(big);
}

static void
test_options(void **state)
{
	static const char *const allowed[] = { "--use_fast_math", "-use_fast_math",
		"--maxrregcount=16", "--maxrregcount=64", "--maxrregcount=255",
		"--extra-device-vectorization", "-lineinfo", "--ftz=true", "--ftz=false",
		"--prec-div=true", "--prec-div=false", "--prec-sqrt=true", "--prec-sqrt=false",
		"--fmad=true", "--fmad=false" };
	static const char *const refused[] = { "", "-I/etc", "--include-path=/", "-DX=1",
		"--gpu-architecture=sm_80", "-arch=sm_90", "--maxrregcount=15",
		"--maxrregcount=256", "--maxrregcount=0255", "--maxrregcount=", "--maxrregcount=+32",
		"--maxrregcount=32 ", "--maxrregcount=1000", "--ftz=1", "--use_fast_math ",
		"--pre-include=/etc/passwd", "-rdc=true", "--fmad", "-G" };
	struct spec *s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!spec_option_allowed(allowed[i]))
			fail_msg("'%s' should be allowed", allowed[i]);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (spec_option_allowed(refused[i]))
			fail_msg("'%s' should be refused", refused[i]);

	s = good("solution.options", "[\"--use_fast_math\", \"--maxrregcount=32\"]");
	assert_int_equal(s->solution.noptions, 2);
	assert_string_equal(s->solution.options[0], "--use_fast_math");
	assert_string_equal(s->solution.options[1], "--maxrregcount=32");
	spec_free(s);
	s = good("problem.reference.options", "[\"-lineinfo\"]");
	assert_int_equal(s->problem.reference.noptions, 1);
	spec_free(s);
	bad("solution.options", "[\"--use_fast_math\", \"-I/etc\"]", "solution.options[1]: "
	    "'-I/etc' is not an allowed option (allowed: --use_fast_math, "
	    "--maxrregcount=16..255, --extra-device-vectorization, -lineinfo, --ftz=, "
	    "--prec-div=, --prec-sqrt=, --fmad= true|false)");
	bad("problem.reference.options", "[\"--maxrregcount=8\"]",
	    "problem.reference.options[0]: '--maxrregcount=8' is not an allowed option "
	    "(allowed: --use_fast_math, --maxrregcount=16..255, --extra-device-vectorization, "
	    "-lineinfo, --ftz=, --prec-div=, --prec-sqrt=, --fmad= true|false)");
	bad("solution.options", "[1]", "solution.options[0]: expected a string, not an integer");
	bad("solution.options", "\"--use_fast_math\"",
	    "solution.options: expected an array, not a string");
}

static void
test_error_buffer(void **state)
{
	struct spec *s = NULL;
	char err[16];
	json_t *j;

	(void)state;
	j = base();
	set(j, "solution.launch[0].args[2]", "\"tmp2\"");
	assert_int_equal(parse(j, NULL, 0, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "solution.launch");
	assert_int_equal(parse(j, NULL, 0, &s, NULL, 0), -EINVAL);
	assert_null(s);
	json_decref(j);
	/* A message cut inside a UTF-8 character stays valid UTF-8. */
	j = base();
	set(j, "problem.inputs[0].name", "\"\\u00e9\\u00e9\"");
	{
		char longer[64];

		/* "problem.inputs[0].name: '" is 25 bytes; 27 cuts the first é. */
		assert_int_equal(parse(j, NULL, 0, &s, longer, 27), -EINVAL);
		assert_string_equal(longer, "problem.inputs[0].name: '");
		assert_int_equal(parse(j, NULL, 0, &s, longer, 28), -EINVAL);
		assert_string_equal(longer, "problem.inputs[0].name: '\xc3\xa9");
	}
	json_decref(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_design_example),
		cmocka_unit_test(test_evaluate_other_sizes),
		cmocka_unit_test(test_top_level),
		cmocka_unit_test(test_reference_optional),
		cmocka_unit_test(test_problem_fields),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_size_sets),
		cmocka_unit_test(test_tensors),
		cmocka_unit_test(test_dtypes),
		cmocka_unit_test(test_inits),
		cmocka_unit_test(test_expressions),
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_launch_and_source),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_error_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

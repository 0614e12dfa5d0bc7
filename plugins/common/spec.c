/*
 * spec.c -- parse, validate and evaluate the native payload (kgymd-protocol(7), "Native tasks");
 * the model is in spec.h.
 *
 * Parsing is one pass over the JSON that builds the structs and refuses the
 * first thing wrong, naming its field path; a final spec_evaluate() with the
 * problem's own sizes catches what only values show (a shape of 0, a tensor
 * over the size limit, a grid of 0, an overflow).  The same evaluation
 * serves the backend, which needs the numbers, and the workflows, which need
 * the device memory a task asks for before they admit it.
 *
 * Messages are written once, by fail(), as "<path>: <reason>", so that every
 * error a user sees says where in their payload it is.
 */
#include "config.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

#define PATH_MAX_LEN	256

struct ctx {
	char *err;
	size_t errlen;
	struct spec_limits limits;
	struct spec *spec;
};

static const char *const dtype_names[SPEC_NDTYPES] = {
	[SPEC_FLOAT64] = "float64",
	[SPEC_FLOAT32] = "float32",
	[SPEC_FLOAT16] = "float16",
	[SPEC_BFLOAT16] = "bfloat16",
	[SPEC_INT64] = "int64",
	[SPEC_INT32] = "int32",
	[SPEC_INT16] = "int16",
	[SPEC_INT8] = "int8",
	[SPEC_UINT8] = "uint8",
	[SPEC_BOOL] = "bool",
};

static const size_t dtype_sizes[SPEC_NDTYPES] = {
	[SPEC_FLOAT64] = 8, [SPEC_FLOAT32] = 4, [SPEC_FLOAT16] = 2, [SPEC_BFLOAT16] = 2,
	[SPEC_INT64] = 8, [SPEC_INT32] = 4, [SPEC_INT16] = 2, [SPEC_INT8] = 1,
	[SPEC_UINT8] = 1, [SPEC_BOOL] = 1,
};

/* randint bounds beyond this would not survive the trip through a double. */
#define RANDINT_MAX_ABS_INT	(INT64_C(1) << 53)
#define RANDINT_MAX_ABS		9007199254740992.0	/* 2^53 */

/* Write "<path>: <reason>" into the caller's buffer; returns -EINVAL. */
static int __attribute__((format(printf, 4, 5)))
fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (err == NULL || errlen == 0)
		return -EINVAL;
	n = snprintf(err, errlen, "%s: ", path);
	if (n >= 0 && (size_t)n < errlen) {
		va_start(ap, fmt);
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	expr_trim_partial_utf8(err);
	return -EINVAL;
}

#define FAIL(c, path, ...)	fail((c)->err, (c)->errlen, (path), __VA_ARGS__)

/* Build a child path: "<parent>.<name>" or "<parent>[<i>]". */
static void __attribute__((format(printf, 3, 4)))
subpath(char *buf, const char *parent, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(buf, PATH_MAX_LEN, "%s", parent);
	if (n < 0 || n >= PATH_MAX_LEN)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, PATH_MAX_LEN - (size_t)n, fmt, ap);
	va_end(ap);
}

/* --- small things --- */

const char *
spec_dtype_name(enum spec_dtype dtype)
{
	if ((unsigned int)dtype >= SPEC_NDTYPES)
		return "?";
	return dtype_names[dtype];
}

size_t
spec_dtype_size(enum spec_dtype dtype)
{
	if ((unsigned int)dtype >= SPEC_NDTYPES)
		return 0;
	return dtype_sizes[dtype];
}

bool
spec_dtype_is_float(enum spec_dtype dtype)
{
	return dtype == SPEC_FLOAT64 || dtype == SPEC_FLOAT32 || dtype == SPEC_FLOAT16 ||
	    dtype == SPEC_BFLOAT16;
}

int
spec_dtype_parse(const char *name, enum spec_dtype *ret_dtype)
{
	unsigned int i;

	for (i = 0; i < SPEC_NDTYPES; i++)
		if (strcmp(name, dtype_names[i]) == 0) {
			*ret_dtype = (enum spec_dtype)i;
			return 0;
		}
	return -EINVAL;
}

void
spec_default_tolerance(enum spec_dtype dtype, double *ret_atol, double *ret_rtol)
{
	double t;

	switch (dtype) {
	case SPEC_FLOAT64: t = 1e-8; break;
	case SPEC_FLOAT32: t = 1e-4; break;
	case SPEC_FLOAT16:
	case SPEC_BFLOAT16: t = 1e-2; break;
	default: t = 0; break;
	}
	*ret_atol = t;
	*ret_rtol = t;
}

const char *
spec_role_name(enum spec_role role)
{
	switch (role) {
	case SPEC_ROLE_INPUT: return "input";
	case SPEC_ROLE_OUTPUT: return "output";
	case SPEC_ROLE_SCRATCH: return "scratch";
	}
	return "?";
}

const struct spec_tensor *
spec_tensor_of(const struct spec *spec, const struct spec_program *program,
    enum spec_role role, size_t index)
{
	switch (role) {
	case SPEC_ROLE_INPUT:
		return index < spec->problem.ninputs ? &spec->problem.inputs[index] : NULL;
	case SPEC_ROLE_OUTPUT:
		return index < spec->problem.noutputs ? &spec->problem.outputs[index] : NULL;
	case SPEC_ROLE_SCRATCH:
		return index < program->nscratch ? &program->scratch[index] : NULL;
	}
	return NULL;
}

/* The range of integers a dtype holds, for randint bounds. */
static void
dtype_int_range(enum spec_dtype dtype, double *lo, double *hi)
{
	switch (dtype) {
	case SPEC_INT32: *lo = INT32_MIN; *hi = INT32_MAX; break;
	case SPEC_INT16: *lo = INT16_MIN; *hi = INT16_MAX; break;
	case SPEC_INT8: *lo = INT8_MIN; *hi = INT8_MAX; break;
	case SPEC_UINT8: *lo = 0; *hi = UINT8_MAX; break;
	case SPEC_BOOL: *lo = 0; *hi = 1; break;
	case SPEC_FLOAT16: *lo = -2048; *hi = 2048; break;	/* exact in half */
	case SPEC_BFLOAT16: *lo = -256; *hi = 256; break;	/* exact in bfloat16 */
	case SPEC_FLOAT32: *lo = -16777216.0; *hi = 16777216.0; break;
	default: *lo = -RANDINT_MAX_ABS; *hi = RANDINT_MAX_ABS; break;
	}
}

/* The init a tensor of `dtype` gets when it names none (see spec.h). */
static void
default_init(enum spec_dtype dtype, struct spec_init *init)
{
	memset(init, 0, sizeof(*init));
	if (spec_dtype_is_float(dtype)) {
		init->kind = SPEC_INIT_NORMAL;
		init->mean = 0;
		init->std = 1;
		return;
	}
	init->kind = SPEC_INIT_RANDINT;
	switch (dtype) {
	case SPEC_UINT8: init->low = 0; init->high = 16; break;
	case SPEC_BOOL: init->low = 0; init->high = 2; break;
	default: init->low = -8; init->high = 8; break;
	}
}

/* --- freeing --- */

static void
tensor_clear(struct spec_tensor *t)
{
	size_t i;

	free(t->name);
	for (i = 0; i < t->ndim; i++)
		expr_free(t->shape[i]);
	free(t->init);
}

static void
tensors_free(struct spec_tensor *t, size_t n)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < n; i++)
		tensor_clear(&t[i]);
	free(t);
}

static void
step_clear(struct spec_step *st)
{
	size_t i;

	free(st->kernel);
	for (i = 0; i < 3; i++) {
		expr_free(st->grid[i]);
		expr_free(st->block[i]);
	}
	expr_free(st->shared_bytes);
	if (st->args != NULL)
		for (i = 0; i < st->nargs; i++)
			expr_free(st->args[i].expr);
	free(st->args);
}

static void
program_clear(struct spec_program *p)
{
	size_t i;

	free(p->source);
	if (p->options != NULL)
		for (i = 0; i < p->noptions; i++)
			free(p->options[i]);
	free(p->options);
	if (p->steps != NULL)
		for (i = 0; i < p->nsteps; i++)
			step_clear(&p->steps[i]);
	free(p->steps);
	tensors_free(p->scratch, p->nscratch);
}

void
spec_free(struct spec *spec)
{
	size_t i;

	if (spec == NULL)
		return;
	free(spec->problem.name);
	if (spec->problem.size_names != NULL)
		for (i = 0; i < spec->problem.nsizes; i++)
			free(spec->problem.size_names[i]);
	free(spec->problem.size_names);
	free(spec->problem.size_values);
	tensors_free(spec->problem.inputs, spec->problem.ninputs);
	tensors_free(spec->problem.outputs, spec->problem.noutputs);
	program_clear(&spec->problem.reference);
	program_clear(&spec->solution);
	free(spec);
}

/* --- JSON helpers --- */

static const char *
json_kind(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "?";
}

/* Refuse members of `obj` not in `known` (NULL-terminated). */
static int
check_members(struct ctx *c, const char *path, const json_t *obj, const char *const *known)
{
	char list[256] = "", child[PATH_MAX_LEN];
	const char *key;
	json_t *value;
	size_t i, n;

	json_object_foreach((json_t *)obj, key, value) {
		for (i = 0; known[i] != NULL; i++)
			if (strcmp(key, known[i]) == 0)
				break;
		if (known[i] != NULL)
			continue;
		for (i = 0, n = 0; known[i] != NULL && n < sizeof(list); i++)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "",
			    known[i]);
		subpath(child, path, ".%.64s", key);
		return FAIL(c, child, "unknown member (known: %s)", list);
	}
	return 0;
}

/* A string member: required or optional (absent: *ret NULL, 0). */
static int
get_string(struct ctx *c, const char *path, const json_t *obj, const char *key, bool required,
    const char **ret, size_t *ret_len)
{
	char child[PATH_MAX_LEN];
	json_t *j = json_object_get(obj, key);

	subpath(child, path, ".%s", key);
	if (j == NULL) {
		if (required)
			return FAIL(c, child, "missing");
		*ret = NULL;
		return 0;
	}
	if (!json_is_string(j))
		return FAIL(c, child, "expected a string, not %s", json_kind(j));
	if (strlen(json_string_value(j)) != json_string_length(j))
		return FAIL(c, child, "contains a NUL character");
	*ret = json_string_value(j);
	if (ret_len != NULL)
		*ret_len = json_string_length(j);
	return 0;
}

/* A finite number (integer or real) member, or absent (*ret_set false). */
static int
get_number(struct ctx *c, const char *path, const json_t *obj, const char *key, double *ret,
    bool *ret_set)
{
	char child[PATH_MAX_LEN];
	json_t *j = json_object_get(obj, key);

	subpath(child, path, ".%s", key);
	if (j == NULL) {
		*ret_set = false;
		return 0;
	}
	if (!json_is_number(j))
		return FAIL(c, child, "expected a number, not %s", json_kind(j));
	*ret = json_number_value(j);
	if (!isfinite(*ret))
		return FAIL(c, child, "must be finite");
	*ret_set = true;
	return 0;
}

/*
 * An array member with min..max elements.  An absent optional one is an
 * empty array (*ret NULL).
 */
static int
get_array(struct ctx *c, const char *path, const json_t *obj, const char *key, bool required,
    size_t min, size_t max, const json_t **ret)
{
	char child[PATH_MAX_LEN];
	json_t *j = json_object_get(obj, key);
	size_t n;

	subpath(child, path, ".%s", key);
	if (j == NULL) {
		if (required)
			return FAIL(c, child, "missing");
		*ret = NULL;
		return 0;
	}
	if (!json_is_array(j))
		return FAIL(c, child, "expected an array, not %s", json_kind(j));
	n = json_array_size(j);
	if (n < min || n > max) {
		if (min == max)
			return FAIL(c, child, "expected %zu elements, not %zu", min, n);
		return FAIL(c, child, "expected %zu to %zu elements, not %zu", min, max, n);
	}
	*ret = j;
	return 0;
}

static int
dup_string(const char *s, char **ret)
{
	if ((*ret = strdup(s)) == NULL)
		return -ENOMEM;
	return 0;
}

/* --- expressions --- */

static struct expr_env
size_env(const struct spec *spec, const int64_t *values)
{
	struct expr_env env;

	env.names = (const char *const *)spec->problem.size_names;
	env.values = values != NULL ? values : spec->problem.size_values;
	env.n = spec->problem.nsizes;
	return env;
}

/* An expression from JSON (an integer or a string) whose names are sizes. */
static int
parse_expr_json(struct ctx *c, const char *path, const json_t *j, struct expr **ret)
{
	struct expr_env env = size_env(c->spec, NULL);
	char text[32], msg[512];
	const char *src;
	struct expr *e;
	int r;

	if (json_is_integer(j)) {
		snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(j));
		src = text;
	} else if (json_is_string(j)) {
		if (strlen(json_string_value(j)) != json_string_length(j))
			return FAIL(c, path, "contains a NUL character");
		src = json_string_value(j);
	} else
		return FAIL(c, path, "expected an integer or an expression string, not %s",
		    json_kind(j));
	if ((r = expr_parse(src, &e, msg, sizeof(msg))) < 0) {
		if (r == -EINVAL)
			return FAIL(c, path, "%s", msg);
		return r;
	}
	if (expr_check(e, &env, msg, sizeof(msg)) < 0) {
		expr_free(e);
		return FAIL(c, path, "%s", msg);
	}
	*ret = e;
	return 0;
}

static int
const_expr(const char *text, struct expr **ret)
{
	char msg[64];

	return expr_parse(text, ret, msg, sizeof(msg)) == 0 ? 0 : -ENOMEM;
}

/* --- names --- */

/*
 * Where `name` is already used among the sizes, the problem's tensors and
 * `program`'s scratch (NULL: none), as a path in `buf`; false if nowhere.
 */
static bool
name_taken(const struct spec *spec, const struct spec_program *program,
    const char *program_path, const char *name, char *buf)
{
	const struct spec_problem *pb = &spec->problem;
	size_t i;

	for (i = 0; i < pb->nsizes; i++)
		if (pb->size_names[i] != NULL && strcmp(pb->size_names[i], name) == 0) {
			snprintf(buf, PATH_MAX_LEN, "problem.sizes%s.%s",
			    pb->sizes_listed ? "[0]" : "", name);
			return true;
		}
	for (i = 0; i < pb->ninputs; i++)
		if (pb->inputs[i].name != NULL && strcmp(pb->inputs[i].name, name) == 0) {
			snprintf(buf, PATH_MAX_LEN, "problem.inputs[%zu]", i);
			return true;
		}
	for (i = 0; i < pb->noutputs; i++)
		if (pb->outputs[i].name != NULL && strcmp(pb->outputs[i].name, name) == 0) {
			snprintf(buf, PATH_MAX_LEN, "problem.outputs[%zu]", i);
			return true;
		}
	if (program != NULL)
		for (i = 0; i < program->nscratch; i++)
			if (program->scratch[i].name != NULL &&
			    strcmp(program->scratch[i].name, name) == 0) {
				snprintf(buf, PATH_MAX_LEN, "%s.scratch[%zu]", program_path, i);
				return true;
			}
	return false;
}

/* A tensor argument's target: true with role and index when `name` is one. */
static bool
find_tensor(const struct spec *spec, const struct spec_program *program, const char *name,
    enum spec_role *ret_role, size_t *ret_index)
{
	const struct spec_problem *pb = &spec->problem;
	size_t i;

	for (i = 0; i < pb->ninputs; i++)
		if (strcmp(pb->inputs[i].name, name) == 0) {
			*ret_role = SPEC_ROLE_INPUT;
			*ret_index = i;
			return true;
		}
	for (i = 0; i < pb->noutputs; i++)
		if (strcmp(pb->outputs[i].name, name) == 0) {
			*ret_role = SPEC_ROLE_OUTPUT;
			*ret_index = i;
			return true;
		}
	for (i = 0; i < program->nscratch; i++)
		if (strcmp(program->scratch[i].name, name) == 0) {
			*ret_role = SPEC_ROLE_SCRATCH;
			*ret_index = i;
			return true;
		}
	return false;
}

static bool
is_identifier(const char *s, size_t max)
{
	size_t i;

	if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	for (i = 1; s[i] != '\0'; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return i <= max;
}

/* --- tensors --- */

static int
parse_init(struct ctx *c, const char *path, const json_t *j, enum spec_dtype dtype,
    struct spec_init *init)
{
	static const char *const normal_keys[] = { "dist", "mean", "std", NULL };
	static const char *const uniform_keys[] = { "dist", "low", "high", NULL };
	char child[PATH_MAX_LEN];
	const char *dist;
	double lo, hi;
	bool set;
	int r;

	if (!json_is_object(j))
		return FAIL(c, path, "expected an object such as {\"dist\": \"normal\"}, not %s",
		    json_kind(j));
	if ((r = get_string(c, path, j, "dist", true, &dist, NULL)) < 0)
		return r;
	default_init(dtype, init);
	subpath(child, path, ".dist");
	if (strcmp(dist, "normal") == 0 || strcmp(dist, "uniform") == 0) {
		if (!spec_dtype_is_float(dtype))
			return FAIL(c, child, "'%s' needs a floating-point dtype; %s takes 'randint'",
			    dist, spec_dtype_name(dtype));
		if (dist[0] == 'n') {
			if ((r = check_members(c, path, j, normal_keys)) < 0)
				return r;
			init->kind = SPEC_INIT_NORMAL;
			init->mean = 0;
			init->std = 1;
			if ((r = get_number(c, path, j, "mean", &init->mean, &set)) < 0 ||
			    (r = get_number(c, path, j, "std", &init->std, &set)) < 0)
				return r;
			if (!(init->std > 0)) {
				subpath(child, path, ".std");
				return FAIL(c, child, "must be > 0, is %g", init->std);
			}
			return 0;
		}
		if ((r = check_members(c, path, j, uniform_keys)) < 0)
			return r;
		init->kind = SPEC_INIT_UNIFORM;
		init->low = 0;
		init->high = 1;
		if ((r = get_number(c, path, j, "low", &init->low, &set)) < 0 ||
		    (r = get_number(c, path, j, "high", &init->high, &set)) < 0)
			return r;
		if (!(init->low < init->high))
			return FAIL(c, path, "low (%g) must be below high (%g)", init->low,
			    init->high);
		return 0;
	}
	if (strcmp(dist, "randint") == 0) {
		const char *keys[] = { "low", "high" };
		double *vals[] = { &init->low, &init->high };
		int i;
		json_t *v;

		if ((r = check_members(c, path, j, uniform_keys)) < 0)
			return r;
		if (init->kind != SPEC_INIT_RANDINT)	/* floats default to [-8, 8) */
			default_init(SPEC_INT32, init);
		for (i = 0; i < 2; i++) {
			if ((v = json_object_get(j, keys[i])) == NULL)
				continue;
			subpath(child, path, ".%s", keys[i]);
			if (!json_is_integer(v))
				return FAIL(c, child, "expected an integer, not %s", json_kind(v));
			if (json_integer_value(v) > RANDINT_MAX_ABS_INT ||
			    json_integer_value(v) < -RANDINT_MAX_ABS_INT)
				return FAIL(c, child, "beyond +-2^53");
			*vals[i] = (double)json_integer_value(v);
		}
		if (!(init->low < init->high))
			return FAIL(c, path, "low (%.0f) must be below high (%.0f)", init->low,
			    init->high);
		dtype_int_range(dtype, &lo, &hi);
		if (init->low < lo || init->high - 1 > hi)
			return FAIL(c, path, "randint [%.0f, %.0f) does not fit %s ([%.0f, %.0f])",
			    init->low, init->high, spec_dtype_name(dtype), lo, hi);
		return 0;
	}
	return FAIL(c, child, "unknown distribution '%.32s' (normal, uniform, randint)", dist);
}

/*
 * One tensor at `path`.  `program`/`program_path` name the scope for
 * duplicate names (scratch); inits only for inputs.
 */
static int
parse_tensor(struct ctx *c, const char *path, const json_t *j, enum spec_role role,
    const struct spec_program *program, const char *program_path, struct spec_tensor *t)
{
	static const char *const input_keys[] = { "name", "dtype", "shape", "init", NULL };
	static const char *const other_keys[] = { "name", "dtype", "shape", NULL };
	char child[PATH_MAX_LEN], where[PATH_MAX_LEN];
	const json_t *shape, *init;
	const char *name, *dtype;
	size_t i;
	int r;

	if (!json_is_object(j))
		return FAIL(c, path, "expected a tensor object, not %s", json_kind(j));
	if ((r = check_members(c, path, j, role == SPEC_ROLE_INPUT ? input_keys :
	    other_keys)) < 0)
		return r;
	if ((r = get_string(c, path, j, "name", true, &name, NULL)) < 0)
		return r;
	subpath(child, path, ".name");
	if (!is_identifier(name, SPEC_MAX_NAME))
		return FAIL(c, child, "'%.80s' is not a name ([A-Za-z_][A-Za-z0-9_]*, at most %d "
		    "bytes)", name, SPEC_MAX_NAME);
	if (name_taken(c->spec, program, program_path, name, where))
		return FAIL(c, child, "'%s' is already the name of %s", name, where);

	if ((r = get_string(c, path, j, "dtype", true, &dtype, NULL)) < 0)
		return r;
	if (spec_dtype_parse(dtype, &t->dtype) < 0) {
		subpath(child, path, ".dtype");
		return FAIL(c, child, "unknown dtype '%.32s' (float64, float32, float16, bfloat16, "
		    "int64, int32, int16, int8, uint8, bool)", dtype);
	}

	if ((r = get_array(c, path, j, "shape", true, 0, SPEC_MAX_DIMS, &shape)) < 0)
		return r;
	for (i = 0; i < json_array_size(shape); i++) {
		subpath(child, path, ".shape[%zu]", i);
		if ((r = parse_expr_json(c, child, json_array_get(shape, i), &t->shape[i])) < 0)
			return r;
		t->ndim = i + 1;
	}

	if (role == SPEC_ROLE_INPUT) {
		init = json_object_get(j, "init");
		subpath(child, path, ".init");
		if (init == NULL || json_is_object(init)) {
			if ((t->init = calloc(1, sizeof(*t->init))) == NULL)
				return -ENOMEM;
			t->ninit = 1;
			if (init == NULL)
				default_init(t->dtype, &t->init[0]);
			else if ((r = parse_init(c, child, init, t->dtype, &t->init[0])) < 0)
				return r;
		} else {
			if ((r = get_array(c, path, j, "init", true, 1, SPEC_MAX_INITS,
			    &init)) < 0)
				return r;
			if ((t->init = calloc(json_array_size(init), sizeof(*t->init))) == NULL)
				return -ENOMEM;
			t->ninit = json_array_size(init);
			for (i = 0; i < t->ninit; i++) {
				subpath(child, path, ".init[%zu]", i);
				if ((r = parse_init(c, child, json_array_get(init, i), t->dtype,
				    &t->init[i])) < 0)
					return r;
			}
		}
	}
	/* The name last: name_taken() skips tensors whose name is still NULL. */
	return dup_string(name, &t->name);
}

/* A list of tensors; its count is set first so spec_free() covers it. */
static int
parse_tensors(struct ctx *c, const char *path, const json_t *arr, enum spec_role role,
    const struct spec_program *program, const char *program_path,
    struct spec_tensor **ret_tensors, size_t *ret_n)
{
	char child[PATH_MAX_LEN];
	size_t i, n = json_array_size(arr);
	int r;

	if (n == 0)
		return 0;
	if ((*ret_tensors = calloc(n, sizeof(**ret_tensors))) == NULL)
		return -ENOMEM;
	*ret_n = n;
	for (i = 0; i < n; i++) {
		subpath(child, path, "[%zu]", i);
		if ((r = parse_tensor(c, child, json_array_get(arr, i), role, program,
		    program_path, &(*ret_tensors)[i])) < 0)
			return r;
	}
	return 0;
}

/* --- programs --- */

/* grid or block: one expression, or an array of 1..3; missing ones are 1. */
static int
parse_dims(struct ctx *c, const char *path, const json_t *step, const char *key,
    struct expr *dims[3])
{
	char child[PATH_MAX_LEN], elem[PATH_MAX_LEN];
	const json_t *j = json_object_get(step, key);
	size_t i, n;
	int r;

	subpath(child, path, ".%s", key);
	if (j == NULL)
		return FAIL(c, child, "missing");
	if (!json_is_array(j)) {
		if ((r = parse_expr_json(c, child, j, &dims[0])) < 0)
			return r;
		n = 1;
	} else {
		n = json_array_size(j);
		if (n < 1 || n > 3)
			return FAIL(c, child, "expected 1 to 3 dimensions, not %zu", n);
		for (i = 0; i < n; i++) {
			subpath(elem, child, "[%zu]", i);
			if ((r = parse_expr_json(c, elem, json_array_get(j, i), &dims[i])) < 0)
				return r;
		}
	}
	for (i = n; i < 3; i++)
		if ((r = const_expr("1", &dims[i])) < 0)
			return r;
	return 0;
}

static int
parse_literal(struct ctx *c, const char *path, const json_t *j, struct spec_arg *a)
{
	static const struct {
		const char *key;
		enum spec_arg_kind kind;
	} kinds[] = {
		{ "f32", SPEC_ARG_F32 }, { "f64", SPEC_ARG_F64 },
		{ "i32", SPEC_ARG_I32 }, { "i64", SPEC_ARG_I64 },
	};
	char child[PATH_MAX_LEN];
	const char *key;
	json_t *v;
	size_t i;

	if (json_object_size(j) != 1)
		return FAIL(c, path, "a typed literal has exactly one member "
		    "(f32, f64, i32 or i64), not %zu", json_object_size(j));
	key = json_object_iter_key(json_object_iter((json_t *)j));
	v = json_object_iter_value(json_object_iter((json_t *)j));
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(key, kinds[i].key) == 0)
			break;
	subpath(child, path, ".%.32s", key);
	if (i == sizeof(kinds) / sizeof(kinds[0]))
		return FAIL(c, child, "unknown literal type (f32, f64, i32, i64)");
	a->kind = kinds[i].kind;
	switch (a->kind) {
	case SPEC_ARG_I32:
	case SPEC_ARG_I64:
		if (!json_is_integer(v))
			return FAIL(c, child, "expected an integer, not %s", json_kind(v));
		a->i = json_integer_value(v);
		if (a->kind == SPEC_ARG_I32 && (a->i < INT32_MIN || a->i > INT32_MAX))
			return FAIL(c, child, "%lld does not fit in 32 bits", (long long)a->i);
		return 0;
	default:
		if (!json_is_number(v))
			return FAIL(c, child, "expected a number, not %s", json_kind(v));
		a->f = json_number_value(v);
		if (a->kind == SPEC_ARG_F32) {
			if (fabs(a->f) > FLT_MAX)
				return FAIL(c, child, "%g is beyond the range of float", a->f);
			a->f = (float)a->f;
		}
		return 0;
	}
}

static int
parse_arg(struct ctx *c, const char *path, const json_t *j, const struct spec_program *program,
    struct spec_arg *a)
{
	char where[PATH_MAX_LEN];
	const char *s;

	if (json_is_object(j))
		return parse_literal(c, path, j, a);
	if (json_is_string(j)) {
		s = json_string_value(j);
		if (find_tensor(c->spec, program, s, &a->role, &a->index)) {
			a->kind = SPEC_ARG_TENSOR;
			return 0;
		}
		/* A bare name that is no size was most likely meant as a tensor. */
		if (is_identifier(s, SPEC_MAX_KERNEL_NAME) &&
		    !name_taken(c->spec, NULL, NULL, s, where))
			return FAIL(c, path, "unknown tensor or size '%s'", s);
	} else if (!json_is_integer(j))
		return FAIL(c, path, "expected a tensor name, an integer expression or a typed "
		    "literal such as {\"f32\": 0.5}, not %s", json_kind(j));
	a->kind = SPEC_ARG_INT;
	return parse_expr_json(c, path, j, &a->expr);
}

static int
parse_step(struct ctx *c, const char *path, const json_t *j, const struct spec_program *program,
    struct spec_step *st)
{
	static const char *const keys[] = { "kernel", "grid", "block", "shared_bytes", "args",
		NULL };
	char child[PATH_MAX_LEN];
	const json_t *args, *shared;
	const char *kernel;
	size_t i;
	int r;

	if (!json_is_object(j))
		return FAIL(c, path, "expected a launch step object, not %s", json_kind(j));
	if ((r = check_members(c, path, j, keys)) < 0)
		return r;
	if ((r = get_string(c, path, j, "kernel", true, &kernel, NULL)) < 0)
		return r;
	if (!is_identifier(kernel, SPEC_MAX_KERNEL_NAME)) {
		subpath(child, path, ".kernel");
		return FAIL(c, child, "'%.80s' is not a C identifier (an extern \"C\" kernel's "
		    "name, at most %d bytes)", kernel, SPEC_MAX_KERNEL_NAME);
	}
	if ((r = dup_string(kernel, &st->kernel)) < 0)
		return r;
	if ((r = parse_dims(c, path, j, "grid", st->grid)) < 0 ||
	    (r = parse_dims(c, path, j, "block", st->block)) < 0)
		return r;
	subpath(child, path, ".shared_bytes");
	if ((shared = json_object_get(j, "shared_bytes")) == NULL)
		r = const_expr("0", &st->shared_bytes);
	else
		r = parse_expr_json(c, child, shared, &st->shared_bytes);
	if (r < 0)
		return r;
	if ((r = get_array(c, path, j, "args", true, 0, SPEC_MAX_ARGS, &args)) < 0)
		return r;
	if (json_array_size(args) == 0)
		return 0;
	if ((st->args = calloc(json_array_size(args), sizeof(*st->args))) == NULL)
		return -ENOMEM;
	st->nargs = json_array_size(args);
	for (i = 0; i < st->nargs; i++) {
		subpath(child, path, ".args[%zu]", i);
		if ((r = parse_arg(c, child, json_array_get(args, i), program, &st->args[i])) < 0)
			return r;
	}
	return 0;
}

static int
parse_program(struct ctx *c, const char *path, const json_t *j, struct spec_program *p)
{
	static const char *const keys[] = { "source", "launch", "options", "scratch", NULL };
	char child[PATH_MAX_LEN];
	const json_t *options, *scratch, *launch, *o;
	const char *source;
	size_t i, len;
	int r;

	if (!json_is_object(j))
		return FAIL(c, path, "expected an object, not %s", json_kind(j));
	if ((r = check_members(c, path, j, keys)) < 0)
		return r;
	if ((r = get_string(c, path, j, "source", true, &source, &len)) < 0)
		return r;
	subpath(child, path, ".source");
	if (len == 0)
		return FAIL(c, child, "empty");
	if (len > c->limits.max_source_bytes)
		return FAIL(c, child, "%zu bytes, more than the limit of %zu", len,
		    c->limits.max_source_bytes);
	if ((r = dup_string(source, &p->source)) < 0)
		return r;
	p->source_len = len;

	if ((r = get_array(c, path, j, "options", false, 0, SPEC_MAX_OPTIONS, &options)) < 0)
		return r;
	if (options != NULL && json_array_size(options) > 0) {
		if ((p->options = calloc(json_array_size(options), sizeof(*p->options))) == NULL)
			return -ENOMEM;
		p->noptions = json_array_size(options);
		for (i = 0; i < p->noptions; i++) {
			o = json_array_get(options, i);
			subpath(child, path, ".options[%zu]", i);
			if (!json_is_string(o))
				return FAIL(c, child, "expected a string, not %s", json_kind(o));
			if (!spec_option_allowed(json_string_value(o)))
				return FAIL(c, child, "'%.64s' is not an allowed option (allowed: "
				    "--use_fast_math, --maxrregcount=16..255, "
				    "--extra-device-vectorization, -lineinfo, --ftz=, --prec-div=, "
				    "--prec-sqrt=, --fmad= true|false)", json_string_value(o));
			if ((r = dup_string(json_string_value(o), &p->options[i])) < 0)
				return r;
		}
	}

	if ((r = get_array(c, path, j, "scratch", false, 0, SPEC_MAX_TENSORS, &scratch)) < 0)
		return r;
	subpath(child, path, ".scratch");
	if (scratch != NULL && (r = parse_tensors(c, child, scratch, SPEC_ROLE_SCRATCH, p, path,
	    &p->scratch, &p->nscratch)) < 0)
		return r;

	if ((r = get_array(c, path, j, "launch", true, 1, SPEC_MAX_STEPS, &launch)) < 0)
		return r;
	if ((p->steps = calloc(json_array_size(launch), sizeof(*p->steps))) == NULL)
		return -ENOMEM;
	p->nsteps = json_array_size(launch);
	for (i = 0; i < p->nsteps; i++) {
		subpath(child, path, ".launch[%zu]", i);
		if ((r = parse_step(c, child, json_array_get(launch, i), p, &p->steps[i])) < 0)
			return r;
	}
	return 0;
}

/* --- the problem --- */

/*
 * Size set k at `path`, an object of name: integer.  Set 0 fixes the names
 * (in its order) and allocates room for all problem.nsets sets; a later set
 * must name exactly the same sizes, in any order.
 */
static int
parse_size_set(struct ctx *c, const char *path, const json_t *set, size_t k)
{
	struct spec_problem *pb = &c->spec->problem;
	char child[PATH_MAX_LEN];
	const char *key;
	json_t *value;
	size_t i, n;

	if (!json_is_object(set))
		return FAIL(c, path, "expected an object of name: integer, not %s",
		    json_kind(set));
	n = json_object_size(set);
	if (k == 0) {
		if (n > SPEC_MAX_SIZES)
			return FAIL(c, path, "%zu sizes, more than %d", n, SPEC_MAX_SIZES);
		if (n == 0)
			return 0;
		pb->size_names = calloc(n, sizeof(*pb->size_names));
		pb->size_values = calloc(n * pb->nsets, sizeof(*pb->size_values));
		if (pb->size_names == NULL || pb->size_values == NULL)
			return -ENOMEM;
		pb->nsizes = n;
	}
	i = 0;
	json_object_foreach((json_t *)set, key, value) {
		snprintf(child, sizeof(child), "%s.%.64s", path, key);
		if (k == 0) {
			if (!expr_name_valid(key))
				return FAIL(c, child, "not a size name ([A-Za-z_][A-Za-z0-9_]*, at "
				    "most %d bytes, not cdiv, min or max)", EXPR_MAX_NAME);
			if (dup_string(key, &pb->size_names[i]) < 0)
				return -ENOMEM;
		} else {
			for (i = 0; i < pb->nsizes; i++)
				if (strcmp(pb->size_names[i], key) == 0)
					break;
			if (i == pb->nsizes)
				return FAIL(c, child, "not a size of problem.sizes[0] (every size "
				    "set names the same sizes)");
		}
		if (!json_is_integer(value))
			return FAIL(c, child, "expected an integer, not %s", json_kind(value));
		pb->size_values[k * pb->nsizes + i++] = json_integer_value(value);
	}
	/* Names are unique within an object: fewer of them means one is missing. */
	for (i = 0; k > 0 && n < pb->nsizes && i < pb->nsizes; i++)
		if (json_object_get(set, pb->size_names[i]) == NULL)
			return FAIL(c, path, "lacks '%s' (every size set names the same sizes as "
			    "problem.sizes[0])", pb->size_names[i]);
	return 0;
}

/* "sizes": one set (an object) or an array of 1..SPEC_MAX_SIZE_SETS sets. */
static int
parse_sizes(struct ctx *c, const json_t *problem)
{
	struct spec_problem *pb = &c->spec->problem;
	char path[PATH_MAX_LEN];
	const json_t *sizes = json_object_get(problem, "sizes");
	size_t k, j;
	int r;

	pb->nsets = 1;
	if (sizes == NULL)
		return 0;
	if (json_is_object(sizes))
		return parse_size_set(c, "problem.sizes", sizes, 0);
	if (!json_is_array(sizes))
		return FAIL(c, "problem.sizes", "expected an object of name: integer, or an array "
		    "of 1 to %d such size sets, not %s", SPEC_MAX_SIZE_SETS, json_kind(sizes));
	if (json_array_size(sizes) < 1 || json_array_size(sizes) > SPEC_MAX_SIZE_SETS)
		return FAIL(c, "problem.sizes", "expected 1 to %d size sets, not %zu",
		    SPEC_MAX_SIZE_SETS, json_array_size(sizes));
	pb->sizes_listed = true;
	pb->nsets = json_array_size(sizes);
	for (k = 0; k < pb->nsets; k++) {
		snprintf(path, sizeof(path), "problem.sizes[%zu]", k);
		if ((r = parse_size_set(c, path, json_array_get(sizes, k), k)) < 0)
			return r;
		/* A repeated set tests nothing more and takes a trial from the others. */
		for (j = 0; j < k; j++)
			if (pb->nsizes == 0 || memcmp(spec_size_set(c->spec, j),
			    spec_size_set(c->spec, k), pb->nsizes * sizeof(int64_t)) == 0)
				return FAIL(c, path, "the same sizes as problem.sizes[%zu]", j);
	}
	return 0;
}

static int
parse_problem(struct ctx *c, const json_t *j, unsigned int flags)
{
	static const char *const keys[] = { "name", "sizes", "inputs", "outputs", "reference",
		"atol", "rtol", NULL };
	struct spec_problem *pb = &c->spec->problem;
	const json_t *inputs, *outputs, *ref;
	const char *name;
	size_t i;
	int r;

	if (!json_is_object(j))
		return FAIL(c, "problem", "expected an object, not %s", json_kind(j));
	if ((r = check_members(c, "problem", j, keys)) < 0)
		return r;
	if ((r = get_string(c, "problem", j, "name", false, &name, NULL)) < 0)
		return r;
	if (name != NULL && (name[0] == '\0' || strlen(name) > SPEC_MAX_NAME))
		return FAIL(c, "problem.name", "expected 1 to %d bytes", SPEC_MAX_NAME);
	if ((r = dup_string(name != NULL ? name : "problem", &pb->name)) < 0)
		return r;
	if ((r = parse_sizes(c, j)) < 0)
		return r;
	if ((r = get_number(c, "problem", j, "atol", &pb->atol, &pb->has_atol)) < 0 ||
	    (r = get_number(c, "problem", j, "rtol", &pb->rtol, &pb->has_rtol)) < 0)
		return r;
	if (pb->has_atol && pb->atol < 0)
		return FAIL(c, "problem.atol", "must be >= 0");
	if (pb->has_rtol && pb->rtol < 0)
		return FAIL(c, "problem.rtol", "must be >= 0");

	if ((r = get_array(c, "problem", j, "inputs", false, 0, SPEC_MAX_TENSORS, &inputs)) < 0 ||
	    (r = get_array(c, "problem", j, "outputs", true, 1, SPEC_MAX_TENSORS, &outputs)) < 0)
		return r;
	if (inputs != NULL && (r = parse_tensors(c, "problem.inputs", inputs, SPEC_ROLE_INPUT,
	    NULL, NULL, &pb->inputs, &pb->ninputs)) < 0)
		return r;
	if ((r = parse_tensors(c, "problem.outputs", outputs, SPEC_ROLE_OUTPUT, NULL, NULL,
	    &pb->outputs, &pb->noutputs)) < 0)
		return r;
	for (i = 0; i < pb->noutputs; i++) {
		struct spec_tensor *t = &pb->outputs[i];

		spec_default_tolerance(t->dtype, &t->atol, &t->rtol);
		if (pb->has_atol)
			t->atol = pb->atol;
		if (pb->has_rtol)
			t->rtol = pb->rtol;
	}

	if ((ref = json_object_get(j, "reference")) == NULL) {
		if (!(flags & SPEC_REFERENCE_OPTIONAL))
			return FAIL(c, "problem.reference", "missing");
		return 0;
	}
	pb->has_reference = true;
	return parse_program(c, "problem.reference", ref, &pb->reference);
}

/*
 * Evaluate each size set once: a spec that parses evaluates.  With several
 * sets the message starts with the one at fault.
 */
static int
check_size_sets(struct ctx *c)
{
	const struct spec_problem *pb = &c->spec->problem;
	struct spec_eval *ev = NULL;
	char msg[1024] = "", path[PATH_MAX_LEN];
	size_t k;
	int r;

	if (pb->nsets <= 1) {
		r = spec_evaluate(c->spec, NULL, &c->limits, &ev, c->err, c->errlen);
		spec_eval_free(ev);
		return r;
	}
	for (k = 0; k < pb->nsets; k++) {
		r = spec_evaluate(c->spec, spec_size_set(c->spec, k), &c->limits, &ev, msg,
		    sizeof(msg));
		snprintf(path, sizeof(path), "problem.sizes[%zu]", k);
		if (r == -EINVAL)
			return FAIL(c, path, "%s", msg);
		if (r < 0)
			return r;
		spec_eval_free(ev);
		ev = NULL;
	}
	return 0;
}

int
spec_parse(const json_t *payload, const struct spec_limits *limits, unsigned int flags,
    struct spec **ret_spec, char *err, size_t errlen)
{
	const json_t *problem, *solution;
	struct ctx c;
	int r;

	memset(&c, 0, sizeof(c));
	c.err = err;
	c.errlen = errlen;
	if (limits != NULL)
		c.limits = *limits;
	if (c.limits.max_tensor_bytes == 0)
		c.limits.max_tensor_bytes = SPEC_DEFAULT_MAX_TENSOR_BYTES;
	if (c.limits.max_source_bytes == 0)
		c.limits.max_source_bytes = SPEC_DEFAULT_MAX_SOURCE_BYTES;

	if (!json_is_object(payload))
		return fail(err, errlen, "payload", "expected an object");
	if ((problem = json_object_get(payload, "problem")) == NULL)
		return fail(err, errlen, "problem", "missing");
	if ((solution = json_object_get(payload, "solution")) == NULL)
		return fail(err, errlen, "solution", "missing");
	if ((c.spec = calloc(1, sizeof(*c.spec))) == NULL)
		return -ENOMEM;
	if ((r = parse_problem(&c, problem, flags)) < 0 ||
	    (r = parse_program(&c, "solution", solution, &c.spec->solution)) < 0 ||
	    (r = check_size_sets(&c)) < 0)
		goto fail_free;
	*ret_spec = c.spec;
	return 0;

fail_free:
	if (r == -ENOMEM && err != NULL && errlen > 0)
		snprintf(err, errlen, "out of memory");
	spec_free(c.spec);
	return r;
}

/* --- evaluation --- */

struct evalctx {
	const struct spec *spec;
	struct expr_env env;
	uint64_t max_tensor_bytes;
	char *err;
	size_t errlen;
};

/* Evaluate `e` and check lo <= value <= hi. */
static int
eval_range(struct evalctx *x, const char *path, const struct expr *e, int64_t lo, int64_t hi,
    int64_t *ret)
{
	char msg[512];
	int64_t v;

	if (expr_eval(e, &x->env, &v, msg, sizeof(msg)) < 0)
		return fail(x->err, x->errlen, path, "%s", msg);
	if (v < lo || v > hi) {
		if (hi == INT64_MAX)
			return fail(x->err, x->errlen, path, "'%s' is %lld, must be >= %lld",
			    expr_text(e), (long long)v, (long long)lo);
		return fail(x->err, x->errlen, path, "'%s' is %lld, must be %lld..%lld",
		    expr_text(e), (long long)v, (long long)lo, (long long)hi);
	}
	*ret = v;
	return 0;
}

static int
eval_shape(struct evalctx *x, const char *path, const struct spec_tensor *t,
    struct spec_shape *sh)
{
	char child[PATH_MAX_LEN];
	size_t i;
	int r;

	memset(sh, 0, sizeof(*sh));
	sh->ndim = t->ndim;
	sh->numel = 1;
	for (i = 0; i < t->ndim; i++) {
		subpath(child, path, ".shape[%zu]", i);
		if ((r = eval_range(x, child, t->shape[i], 1, INT64_MAX, &sh->dims[i])) < 0)
			return r;
		if (__builtin_mul_overflow(sh->numel, (uint64_t)sh->dims[i], &sh->numel))
			return fail(x->err, x->errlen, path, "'%s' has more than 2^64 elements",
			    t->name);
	}
	if (__builtin_mul_overflow(sh->numel, (uint64_t)spec_dtype_size(t->dtype), &sh->bytes) ||
	    sh->bytes > x->max_tensor_bytes)
		return fail(x->err, x->errlen, path, "'%s' (%llu elements of %s) is larger than "
		    "the limit of %llu bytes", t->name, (unsigned long long)sh->numel,
		    spec_dtype_name(t->dtype), (unsigned long long)x->max_tensor_bytes);
	return 0;
}

static int
eval_step(struct evalctx *x, const char *path, const struct spec_step *st,
    struct spec_launch *l)
{
	char child[PATH_MAX_LEN];
	int64_t v;
	size_t i;
	int r;

	l->kernel = st->kernel;
	for (i = 0; i < 3; i++) {
		subpath(child, path, ".grid[%zu]", i);
		if ((r = eval_range(x, child, st->grid[i], 1, SPEC_MAX_GRID, &v)) < 0)
			return r;
		l->grid[i] = (uint32_t)v;
		subpath(child, path, ".block[%zu]", i);
		if ((r = eval_range(x, child, st->block[i], 1, SPEC_MAX_GRID, &v)) < 0)
			return r;
		l->block[i] = (uint32_t)v;
	}
	subpath(child, path, ".shared_bytes");
	if ((r = eval_range(x, child, st->shared_bytes, 0, UINT32_MAX, &v)) < 0)
		return r;
	l->shared_bytes = (uint32_t)v;
	if (st->nargs == 0)
		return 0;
	if ((l->args = calloc(st->nargs, sizeof(*l->args))) == NULL)
		return -ENOMEM;
	l->nargs = st->nargs;
	for (i = 0; i < st->nargs; i++) {
		const struct spec_arg *a = &st->args[i];
		struct spec_launch_arg *la = &l->args[i];

		la->kind = a->kind;
		la->role = a->role;
		la->index = a->index;
		la->i = a->i;
		la->f = a->f;
		if (a->kind == SPEC_ARG_INT) {
			subpath(child, path, ".args[%zu]", i);
			if ((r = eval_range(x, child, a->expr, INT64_MIN, INT64_MAX, &la->i)) < 0)
				return r;
		}
	}
	return 0;
}

/*
 * Add one allocation of `bytes` (times `copies`) to *total, rounded up to the
 * allocation granularity; saturates, since a huge max_tensor_bytes could
 * make the sum wrap and a wrapped need would pass admission.
 */
static void
add_allocation(uint64_t *total, uint64_t bytes, uint64_t copies)
{
	uint64_t r;

	r = bytes / SPEC_ALLOC_GRANULARITY * SPEC_ALLOC_GRANULARITY;
	if (r < bytes && __builtin_add_overflow(r, SPEC_ALLOC_GRANULARITY, &r))
		r = UINT64_MAX;
	if (__builtin_mul_overflow(r, copies, &r) || __builtin_add_overflow(*total, r, total))
		*total = UINT64_MAX;
}

static int
eval_plan(struct evalctx *x, const char *path, const struct spec_program *p,
    struct spec_plan *plan, uint64_t *total)
{
	char child[PATH_MAX_LEN];
	size_t i;
	int r;

	if (p->nscratch > 0) {
		if ((plan->scratch = calloc(p->nscratch, sizeof(*plan->scratch))) == NULL)
			return -ENOMEM;
		plan->nscratch = p->nscratch;
	}
	for (i = 0; i < p->nscratch; i++) {
		subpath(child, path, ".scratch[%zu]", i);
		if ((r = eval_shape(x, child, &p->scratch[i], &plan->scratch[i])) < 0)
			return r;
		add_allocation(total, plan->scratch[i].bytes, 1);
	}
	if (p->nsteps > 0) {
		if ((plan->steps = calloc(p->nsteps, sizeof(*plan->steps))) == NULL)
			return -ENOMEM;
		plan->nsteps = p->nsteps;
	}
	for (i = 0; i < p->nsteps; i++) {
		subpath(child, path, ".launch[%zu]", i);
		if ((r = eval_step(x, child, &p->steps[i], &plan->steps[i])) < 0)
			return r;
	}
	return 0;
}

static void
plan_clear(struct spec_plan *plan)
{
	size_t i;

	free(plan->scratch);
	if (plan->steps != NULL)
		for (i = 0; i < plan->nsteps; i++)
			free(plan->steps[i].args);
	free(plan->steps);
}

void
spec_eval_free(struct spec_eval *ev)
{
	if (ev == NULL)
		return;
	free(ev->inputs);
	free(ev->outputs);
	plan_clear(&ev->reference);
	plan_clear(&ev->solution);
	free(ev);
}

int
spec_evaluate(const struct spec *spec, const int64_t *size_values,
    const struct spec_limits *limits, struct spec_eval **ret_eval, char *err, size_t errlen)
{
	const struct spec_problem *pb = &spec->problem;
	struct spec_eval *ev;
	struct evalctx x;
	uint64_t total = 0;
	char path[PATH_MAX_LEN];
	size_t i;
	int r;

	x.spec = spec;
	x.env = size_env(spec, size_values);
	x.max_tensor_bytes = limits != NULL && limits->max_tensor_bytes != 0 ?
	    limits->max_tensor_bytes : SPEC_DEFAULT_MAX_TENSOR_BYTES;
	x.err = err;
	x.errlen = errlen;

	if ((ev = calloc(1, sizeof(*ev))) == NULL)
		return -ENOMEM;
	if ((pb->ninputs > 0 && (ev->inputs = calloc(pb->ninputs, sizeof(*ev->inputs))) == NULL) ||
	    (pb->noutputs > 0 &&
	    (ev->outputs = calloc(pb->noutputs, sizeof(*ev->outputs))) == NULL)) {
		r = -ENOMEM;
		goto fail_free;
	}
	ev->ninputs = pb->ninputs;
	ev->noutputs = pb->noutputs;
	for (i = 0; i < pb->ninputs; i++) {
		snprintf(path, sizeof(path), "problem.inputs[%zu]", i);
		if ((r = eval_shape(&x, path, &pb->inputs[i], &ev->inputs[i])) < 0)
			goto fail_free;
		add_allocation(&total, ev->inputs[i].bytes, 1);
	}
	for (i = 0; i < pb->noutputs; i++) {
		snprintf(path, sizeof(path), "problem.outputs[%zu]", i);
		if ((r = eval_shape(&x, path, &pb->outputs[i], &ev->outputs[i])) < 0)
			goto fail_free;
		/* The candidate's outputs and the reference's, kept for comparison. */
		add_allocation(&total, ev->outputs[i].bytes, 2);
	}
	if (pb->has_reference &&
	    (r = eval_plan(&x, "problem.reference", &pb->reference, &ev->reference, &total)) < 0)
		goto fail_free;
	if ((r = eval_plan(&x, "solution", &spec->solution, &ev->solution, &total)) < 0)
		goto fail_free;
	ev->device_bytes = total;
	*ret_eval = ev;
	return 0;

fail_free:
	if (r == -ENOMEM && err != NULL && errlen > 0)
		snprintf(err, errlen, "out of memory");
	spec_eval_free(ev);
	return r;
}

const int64_t *
spec_size_set(const struct spec *spec, size_t k)
{
	const struct spec_problem *pb = &spec->problem;

	if (pb->nsizes == 0 || pb->size_values == NULL || k >= pb->nsets)
		return NULL;
	return pb->size_values + k * pb->nsizes;
}

void
spec_size_set_text(const struct spec *spec, size_t k, char *buf, size_t len)
{
	const struct spec_problem *pb = &spec->problem;
	const int64_t *v = spec_size_set(spec, k);
	size_t i, off = 0;
	int n;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (i = 0; v != NULL && i < pb->nsizes && off < len; i++) {
		n = snprintf(buf + off, len - off, "%s%s=%lld", i > 0 ? ", " : "",
		    pb->size_names[i], (long long)v[i]);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

int
spec_device_bytes(const struct spec *spec, const struct spec_limits *limits,
    uint64_t *ret_bytes, char *err, size_t errlen)
{
	struct spec_eval *ev;
	uint64_t most = 0;
	size_t k;
	int r;

	for (k = 0; k < spec->problem.nsets; k++) {
		if ((r = spec_evaluate(spec, spec_size_set(spec, k), limits, &ev, err,
		    errlen)) < 0)
			return r;
		if (ev->device_bytes > most)
			most = ev->device_bytes;
		spec_eval_free(ev);
	}
	*ret_bytes = most;
	return 0;
}

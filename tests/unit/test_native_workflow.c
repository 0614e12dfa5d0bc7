/*
 * test_native_workflow.c -- the native workflows' task flow
 * (plugins/common/native_workflow.c) against a fake host: a payload is
 * parsed once in the daemon when the task keeps the object its submit
 * validated (parse_memo.c), and again only when it must be (a payload
 * read back from the store, the memo turned off); the memo lets go of
 * payloads nobody holds; the route (route.c) is one rule, decided at
 * start and handed on with the task; cubins go from the compile job to
 * the evaluate job by their cache key.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "native_workflow.h"
#include "parse_memo.h"
#include "route.h"

/* ------------------------------------------------------- the fake host */

struct kgym_task {
	const json_t *payload;
	void *data;
	json_t *result;			/* task_finish's */
	json_t *job;			/* the latest job_run's request */
	enum kgym_job_where where;
	void (*done)(struct kgym_task *, const struct kgym_job_outcome *);
};

static const char *config_key, *config_value;

static void
fake_log(const struct kgym_plugin_handle *self, enum kgym_log_level level, const char *fmt, ...)
{
	(void)self;
	(void)level;
	(void)fmt;
}

static const char *
fake_config_get(const struct kgym_plugin_handle *self, const char *key)
{
	(void)self;
	return config_key != NULL && strcmp(key, config_key) == 0 ? config_value : NULL;
}

static const char *
fake_task_id(const struct kgym_task *t)
{
	(void)t;
	return "t";
}

static const json_t *
fake_task_payload(const struct kgym_task *t)
{
	return t->payload;
}

static void
fake_set_data(struct kgym_task *t, void *data)
{
	t->data = data;
}

static void *
fake_get_data(const struct kgym_task *t)
{
	return t->data;
}

static int
fake_finish(struct kgym_task *t, json_t *result)
{
	json_decref(t->result);
	t->result = result;
	return 0;
}

static int
fake_job_run(struct kgym_task *t, const struct kgym_job_spec *spec,
    void (*done)(struct kgym_task *, const struct kgym_job_outcome *), char **ret_cause)
{
	(void)ret_cause;
	json_decref(t->job);
	t->job = json_deep_copy(spec->request);
	t->where = spec->where;
	t->done = done;
	return 0;
}

static const char *
fake_gpu_arch(void)
{
	return "sm_90";
}

static const struct kgym_host host = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_host),
	.log = fake_log,
	.alloc = malloc,
	.free = free,
	.config_get = fake_config_get,
	.task_id = fake_task_id,
	.task_payload = fake_task_payload,
	.task_set_data = fake_set_data,
	.task_get_data = fake_get_data,
	.task_finish = fake_finish,
	.job_run = fake_job_run,
	.gpu_arch = fake_gpu_arch,
};

static const struct nw_kind kind = {
	.name = "kernelbench",
	.mode = "kernelbench",
	.run_performance = true,
	.speedup = true,
};

/* ------------------------------------------------------------- payloads */

static const char payload_text[] =
    "{\"backend\": \"nvrtc\", \"problem\": {\"name\": \"add\", \"sizes\": {\"N\": 1024},"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [\"N\"]}],"
    " \"outputs\": [{\"name\": \"out\", \"dtype\": \"float32\", \"shape\": [\"N\"]}],"
    " \"reference\": {\"source\": \"extern \\\"C\\\" __global__ void k(const float *x,"
    " float *o, int n) { int i = threadIdx.x; if (i < n) o[i] = x[i]; }\","
    " \"launch\": [{\"kernel\": \"k\", \"grid\": [\"cdiv(N, 256)\", 1, 1],"
    " \"block\": [256, 1, 1], \"args\": [\"x\", \"out\", \"N\"]}]}},"
    " \"solution\": {\"source\": \"extern \\\"C\\\" __global__ void s(const float *x,"
    " float *o, int n) { int i = threadIdx.x; if (i < n) o[i] = x[i]; }\","
    " \"launch\": [{\"kernel\": \"s\", \"grid\": [\"cdiv(N, 256)\", 1, 1],"
    " \"block\": [256, 1, 1], \"args\": [\"x\", \"out\", \"N\"]}]}}";

static json_t *
payload_new(void)
{
	json_error_t jerr;
	json_t *p = json_loads(payload_text, 0, &jerr);

	if (p == NULL)
		fail_msg("payload: %s", jerr.text);
	return p;
}

static void
init_with(const char *key, const char *value)
{
	char *cause = NULL;

	config_key = key;
	config_value = value;
	if (nw_init(&kind, &host, NULL, &cause) != 0)
		fail_msg("nw_init: %s", cause != NULL ? cause : "?");
}

/* Start a task on `payload`; its compile job must have been asked for. */
static void
start(struct kgym_task *t, const json_t *payload)
{
	char *cause = NULL;

	memset(t, 0, sizeof *t);
	t->payload = payload;
	if (nw_start(t, &cause) != 0)
		fail_msg("nw_start: %s", cause != NULL ? cause : "?");
	assert_null(t->result);
	assert_non_null(t->job);
	assert_string_equal(json_string_value(json_object_get(t->job, "op")), "compile");
	assert_int_equal(json_array_size(json_object_get(t->job, "units")), 2);
}

static void
task_end(struct kgym_task *t)
{
	nw_cancel(t);
	json_decref(t->job);
	json_decref(t->result);
	memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------- tests */

/* The task keeps the object its submit validated: no second parse. */
static void
test_parsed_once(void **state)
{
	struct kgym_task t;
	json_t *p = payload_new();
	char *cause = NULL;
	unsigned long before;

	(void)state;
	init_with(NULL, NULL);
	before = nw_parse_count();
	assert_int_equal(nw_validate(p, &cause), 0);
	assert_int_equal(nw_parse_count(), before + 1);
	start(&t, p);
	assert_int_equal(nw_parse_count(), before + 1);
	task_end(&t);
	json_decref(p);
	nw_fini();
}

/* A payload read back from the store is another object: parsed again. */
static void
test_store_copy_parsed_again(void **state)
{
	struct kgym_task t;
	json_t *p = payload_new(), *copy;
	char *cause = NULL;
	unsigned long before;

	(void)state;
	init_with(NULL, NULL);
	before = nw_parse_count();
	assert_int_equal(nw_validate(p, &cause), 0);
	copy = json_deep_copy(p);
	start(&t, copy);
	assert_int_equal(nw_parse_count(), before + 2);
	task_end(&t);
	json_decref(copy);
	json_decref(p);
	nw_fini();
}

/* parsed_payload_bytes = 0: nothing kept, start parses again. */
static void
test_memo_off(void **state)
{
	struct kgym_task t;
	json_t *p = payload_new();
	char *cause = NULL;
	unsigned long before;

	(void)state;
	init_with("parsed_payload_bytes", "0");
	before = nw_parse_count();
	assert_int_equal(nw_validate(p, &cause), 0);
	start(&t, p);
	assert_int_equal(nw_parse_count(), before + 2);
	task_end(&t);
	json_decref(p);
	nw_fini();
	config_key = NULL;
}

/* A payload that does not validate is not kept (and says why). */
static void
test_invalid_not_kept(void **state)
{
	json_t *p = payload_new();
	char *cause = NULL;

	(void)state;
	init_with(NULL, NULL);
	json_object_set_new(p, "backend", json_string("cuda"));
	assert_int_equal(nw_validate(p, &cause), -EINVAL);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "backend"));
	free(cause);
	json_decref(p);
	nw_fini();
}

static int nfreed;

static void
count_free(void *v)
{
	nfreed++;
	free(v);
}

/* Bounded by bytes; entries whose payload only the memo holds are swept
 * when it is full; take() gives the value of that very object only. */
static void
test_memo_bounds_and_sweep(void **state)
{
	struct parse_memo *m = parse_memo_new(count_free);
	json_t *a = json_object(), *b = json_object(), *c = json_object(), *a2;

	(void)state;
	nfreed = 0;
	parse_memo_put(m, a, malloc(1), 60, 100);
	parse_memo_put(m, b, malloc(1), 60, 100);	/* does not fit: freed */
	assert_int_equal(parse_memo_count(m), 1);
	assert_int_equal(nfreed, 1);
	a2 = json_deep_copy(a);
	assert_null(parse_memo_take(m, a2));		/* equal is not the same */
	json_decref(a2);
	json_decref(a);			/* the memo holds the last reference */
	parse_memo_put(m, c, malloc(1), 60, 100);	/* a's entry swept */
	assert_int_equal(nfreed, 2);
	assert_int_equal(parse_memo_count(m), 1);
	free(parse_memo_take(m, c));
	assert_int_equal(parse_memo_count(m), 0);
	assert_null(parse_memo_take(m, c));
	parse_memo_free(m);
	json_decref(b);
	json_decref(c);
}

/* One rule: payload.backend to a flow and a backend, or a message. */
static void
test_route_decide(void **state)
{
	struct route r;
	char err[256];
	json_t *p = json_object();

	(void)state;
	json_object_set_new(p, "backend", json_string("triton"));
	assert_int_equal(route_decide(p, ROUTE_NATIVE | ROUTE_PYTHON, "kernelbench", &r, err,
	    sizeof err), 0);
	assert_int_equal(r.flow, ROUTE_PYTHON);
	assert_string_equal(r.backend, "triton");
	/* kernel_simple serves the native flow alone */
	assert_int_equal(route_decide(p, ROUTE_NATIVE, "kernel_simple", &r, err, sizeof err),
	    -EINVAL);
	assert_string_equal(err, "backend 'triton' is not available in this build "
	    "(kernel_simple serves: nvrtc)");
	json_object_set_new(p, "backend", json_string("nvrtc"));
	assert_int_equal(route_decide(p, ROUTE_NATIVE, "kernel_simple", &r, err, sizeof err), 0);
	assert_int_equal(r.flow, ROUTE_NATIVE);
	assert_string_equal(r.backend, "nvrtc");
	json_object_set_new(p, "backend", json_integer(1));
	assert_int_equal(route_decide(p, ROUTE_NATIVE, "kernel_simple", &r, err, sizeof err),
	    -EINVAL);
	assert_non_null(strstr(err, "backend: expected a string"));
	json_object_del(p, "backend");
	assert_int_equal(route_decide(p, ROUTE_NATIVE | ROUTE_PYTHON, "kernelbench", &r, err,
	    sizeof err), -EINVAL);
	assert_non_null(strstr(err, "backend: required (kernelbench serves: nvrtc, torch, "
	    "triton, cuda"));
	json_decref(p);
}

/* The route decided at start is the task's: its jobs and cancel use it. */
static void
test_route_handed_on(void **state)
{
	struct kgym_task t;
	const struct route *r;
	json_t *p = payload_new();

	(void)state;
	init_with(NULL, NULL);
	start(&t, p);
	assert_non_null(r = route_of_task(&host, &t));
	assert_int_equal(r->flow, ROUTE_NATIVE);
	assert_string_equal(r->backend, "nvrtc");
	assert_int_equal(t.where, KGYM_JOB_CPU);
	task_end(&t);
	assert_null(route_of_task(&host, &t));
	json_decref(p);
	nw_fini();
}

/* The compile job's answer, each unit's cubin under `field`. */
static void
compile_done(struct kgym_task *t, const char *field, const char *ref, const char *sol)
{
	struct kgym_job_outcome o = { .ok = 1, .worker = "cpu0" };
	json_t *units = json_array(), *res;

	if (ref != NULL)
		json_array_append_new(units, json_pack("{s:s, s:b, s:s, s:f, s:b}", "name",
		    "reference", "ok", 1, field, ref, "compile_ms", 1.0, "cache_hit", 0));
	json_array_append_new(units, json_pack("{s:s, s:b, s:s, s:f, s:b}", "name", "solution",
	    "ok", 1, field, sol, "compile_ms", 1.0, "cache_hit", 0));
	res = json_pack("{s:s, s:o}", "status", "completed", "units", units);
	o.result = res;
	t->done(t, &o);
	json_decref(res);
	assert_null(t->result);
	assert_int_equal(t->where, KGYM_JOB_GPU);
	assert_string_equal(json_string_value(json_object_get(t->job, "op")), "evaluate");
}

static void
evaluate_done(struct kgym_task *t, const char *missing)
{
	struct kgym_job_outcome o = { .ok = 1, .worker = "gpu0.0" };
	json_t *res = json_pack("{s:s, s:b, s:{}}", "status", missing ? "failed" : "completed",
	    "correctness", missing == NULL, "metadata");

	if (missing != NULL)
		json_object_set_new(json_object_get(res, "metadata"), "cubin_missing",
		    json_string(missing));
	o.result = res;
	t->done(t, &o);
	json_decref(res);
	assert_non_null(t->result);
}

static const char *
job_str(const struct kgym_task *t, const char *key)
{
	return json_string_value(json_object_get(t->job, key));
}

/*
 * Cubins travel by their key in the workers' compile cache: the evaluate
 * request carries the keys the compile job gave (a reference's key kept in
 * memory too), never the bytes; base64 only when the compile job had no
 * cache.  A reference key whose file is gone is forgotten.
 */
static void
test_cubins_by_key(void **state)
{
	static const char k1[] = "1111111111111111111111111111111111111111111111111111111111111111";
	static const char k2[] = "2222222222222222222222222222222222222222222222222222222222222222";
	struct kgym_task t;
	json_t *p;

	(void)state;
	init_with(NULL, NULL);
	/* A: both compiled; the keys go on. */
	p = payload_new();
	start(&t, p);
	compile_done(&t, "cubin_key", k1, k2);
	assert_string_equal(job_str(&t, "reference_cubin_key"), k1);
	assert_string_equal(job_str(&t, "solution_cubin_key"), k2);
	assert_null(json_object_get(t.job, "reference_cubin_b64"));
	assert_null(json_object_get(t.job, "solution_cubin_b64"));
	evaluate_done(&t, NULL);
	task_end(&t);
	json_decref(p);
	/* B: the reference's key from memory; its file turns out gone. */
	p = payload_new();
	memset(&t, 0, sizeof t);
	t.payload = p;
	assert_int_equal(nw_start(&t, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(t.job, "units")), 1);
	compile_done(&t, "cubin_key", NULL, k2);
	assert_string_equal(job_str(&t, "reference_cubin_key"), k1);
	evaluate_done(&t, "reference");
	task_end(&t);
	json_decref(p);
	/* C: forgotten, so compiled again; by value when there is no cache. */
	p = payload_new();
	start(&t, p);
	compile_done(&t, "cubin_b64", "UkVG", "U09M");
	assert_string_equal(job_str(&t, "reference_cubin_b64"), "UkVG");
	assert_string_equal(job_str(&t, "solution_cubin_b64"), "U09M");
	assert_null(json_object_get(t.job, "solution_cubin_key"));
	evaluate_done(&t, NULL);
	task_end(&t);
	json_decref(p);
	nw_fini();
}

/* The evaluate job gets the limits the payload was accepted with. */
static void
test_limits_handed_on(void **state)
{
	struct kgym_task t;
	json_t *p = payload_new(), *l;

	(void)state;
	init_with("max_source_bytes", "2M");
	start(&t, p);
	compile_done(&t, "cubin_key", "aa", "bb");
	l = json_object_get(t.job, "limits");
	assert_int_equal(json_integer_value(json_object_get(l, "max_source_bytes")), 2 << 20);
	assert_int_equal(json_integer_value(json_object_get(l, "max_tensor_bytes")),
	    (json_int_t)SPEC_DEFAULT_MAX_TENSOR_BYTES);
	task_end(&t);
	json_decref(p);
	nw_fini();
	config_key = NULL;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parsed_once),
		cmocka_unit_test(test_store_copy_parsed_again),
		cmocka_unit_test(test_memo_off),
		cmocka_unit_test(test_invalid_not_kept),
		cmocka_unit_test(test_memo_bounds_and_sweep),
		cmocka_unit_test(test_route_decide),
		cmocka_unit_test(test_route_handed_on),
		cmocka_unit_test(test_cubins_by_key),
		cmocka_unit_test(test_limits_handed_on),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

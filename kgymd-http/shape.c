/*
 * shape.c -- KernelGYM's request and response shapes, to and from kgymd's.
 *
 * An EvaluationRequest's fields are the kgymd task's payload by the same
 * names (kgymd-protocol(7), PAYLOADS): the gateway lifts out only what is
 * the task's own (task_id, priority, timeout, workflow, resources), checks
 * the fields KernelGYM requires, and leaves every other field to the
 * workflow plugin, which rejects wrong types naming the field.  A field
 * sent as null means "the server's default" in KernelGYM and is dropped.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gateway.h"

#define SHAPE_TIMEOUT_MAX 86400

static json_t *shape_fail(struct shape_error *err, const char *prefix,
    const char *field, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static json_t *
shape_fail(struct shape_error *err, const char *prefix, const char *field,
    const char *fmt, ...)
{
	char why[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	snprintf(err->field, sizeof err->field, "%s%s", prefix, field);
	snprintf(err->message, sizeof err->message, "field '%s': %s", err->field, why);
	return NULL;
}

bool
shape_task_id_ok(const char *id)
{
	size_t len = strlen(id);

	return len >= 1 && len <= GW_TASK_ID_MAX &&
	    strspn(id,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") ==
	    len;
}

static const char *
shape_type(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

/* An optional string field: absent or null gives `def`; false after *err. */
static bool
shape_string(const json_t *body, const char *key, const char *def, const char **ret,
    const char *prefix, struct shape_error *err)
{
	const json_t *v = json_object_get(body, key);

	if (v == NULL || json_is_null(v)) {
		*ret = def;
		return true;
	}
	if (!json_is_string(v)) {
		shape_fail(
		    err, prefix, key, "expected a string, got %s", shape_type(v));
		return false;
	}
	*ret = json_string_value(v);
	return true;
}

static bool
shape_one_of(const char *value, const char *const *allowed)
{
	for (; *allowed != NULL; allowed++)
		if (strcmp(value, *allowed) == 0)
			return true;
	return false;
}

/* The task's own fields, common to both forms. */
static json_t *
shape_task_common(
    const json_t *body, json_t *task, const char *prefix, struct shape_error *err)
{
	static const char *const prios[] = { "high", "normal", "low", NULL };
	const json_t *timeout = json_object_get(body, "timeout");
	const json_t *res = json_object_get(body, "resources"), *mem;
	const char *prio;

	if (!shape_string(body, "priority", "normal", &prio, prefix, err))
		return NULL;
	if (!shape_one_of(prio, prios))
		return shape_fail(err, prefix, "priority",
		    "expected high, normal or low, got '%.32s'", prio);
	json_object_set_new(task, "priority", json_string(prio));
	if (timeout != NULL && !json_is_null(timeout)) {
		if (!json_is_number(timeout))
			return shape_fail(err, prefix, "timeout",
			    "expected a number of seconds, got %s",
			    shape_type(timeout));
		if (json_number_value(timeout) < 1 ||
		    json_number_value(timeout) > SHAPE_TIMEOUT_MAX)
			return shape_fail(err, prefix, "timeout",
			    "expected 1 to %d seconds", SHAPE_TIMEOUT_MAX);
		json_object_set_new(
		    task, "timeout_s", json_real(json_number_value(timeout)));
	}
	if (res != NULL && !json_is_null(res)) {
		if (!json_is_object(res))
			return shape_fail(err, prefix, "resources",
			    "expected an object, got %s", shape_type(res));
		/* KernelGYM's {"gpus": N} has no meaning here; device memory does. */
		if ((mem = json_object_get(res, "gpu_memory_bytes")) != NULL)
			json_object_set_new(task, "resources",
			    json_pack("{s:O}", "gpu_memory_bytes", mem));
	}
	return task;
}

/* The request's fields minus the task's own, and minus nulls. */
static json_t *
shape_payload(const json_t *body)
{
	static const char *const own[] = { "task_id", "priority", "timeout", "workflow",
		"resources", NULL };
	json_t *payload = json_object(), *v;
	const char *key;

	json_object_foreach((json_t *)body, key, v) {
		if (json_is_null(v) || shape_one_of(key, own))
			continue;
		json_object_set(payload, key, v);
	}
	return payload;
}

static json_t *
shape_evaluation_task(
    const json_t *body, json_t *task, const char *prefix, struct shape_error *err)
{
	static const char *const backends[] = { "triton", "cuda", "torch", "nvrtc",
		NULL };
	const char *id, *workflow, *backend, *code;
	json_t *payload;

	if (!shape_string(body, "task_id", NULL, &id, prefix, err))
		return NULL;
	if (id == NULL)
		return shape_fail(err, prefix, "task_id", "missing: expected a string");
	if (!shape_task_id_ok(id))
		return shape_fail(err, prefix, "task_id",
		    "expected 1 to %d characters of A-Z, a-z, "
		    "0-9, '.', '_', ':' and '-'",
		    GW_TASK_ID_MAX);
	if (!shape_string(body, "workflow", "kernelbench", &workflow, prefix, err) ||
	    !shape_string(body, "backend", NULL, &backend, prefix, err))
		return NULL;
	json_object_set_new(task, "task_id", json_string(id));
	json_object_set_new(task, "workflow", json_string(workflow));
	payload = shape_payload(body);
	json_object_set_new(task, "payload", payload);
	if (strcmp(workflow, "kernelbench") == 0) {
		if (backend != NULL && !shape_one_of(backend, backends))
			return shape_fail(err, prefix, "backend",
			    "expected triton, cuda, torch or nvrtc, got '%.32s'",
			    backend);
		/* KernelGYM's default backend. */
		if (backend == NULL)
			json_object_set_new(
			    payload, "backend", json_string(backend = "triton"));
		if (strcmp(backend, "nvrtc") != 0) {
			if (!shape_string(
				body, "kernel_code", NULL, &code, prefix, err))
				return NULL;
			if (code == NULL)
				return shape_fail(err, prefix, "kernel_code",
				    "missing: expected a string");
			if (!shape_string(
				body, "reference_code", NULL, &code, prefix, err))
				return NULL;
			if (code == NULL)
				return shape_fail(err, prefix, "reference_code",
				    "missing: expected a string (required for the kernelbench workflow)");
		}
	}
	return shape_task_common(body, task, prefix, err);
}

static json_t *
shape_workflow_task(
    const json_t *body, json_t *task, const char *prefix, struct shape_error *err)
{
	const json_t *payload = json_object_get(body, "payload"), *force;
	const char *id, *workflow;
	json_t *copy;

	if (!shape_string(body, "task_id", NULL, &id, prefix, err) ||
	    !shape_string(body, "workflow", "kernelbench", &workflow, prefix, err))
		return NULL;
	if (id != NULL && !shape_task_id_ok(id))
		return shape_fail(err, prefix, "task_id",
		    "expected 1 to %d characters of A-Z, a-z, "
		    "0-9, '.', '_', ':' and '-'",
		    GW_TASK_ID_MAX);
	if (payload != NULL && !json_is_null(payload) && !json_is_object(payload))
		return shape_fail(err, prefix, "payload", "expected an object, got %s",
		    shape_type(payload));
	force = json_object_get(body, "force_refresh");
	if (force != NULL && !json_is_null(force) && !json_is_boolean(force))
		return shape_fail(err, prefix, "force_refresh",
		    "expected a boolean, got %s", shape_type(force));
	if (id != NULL)
		json_object_set_new(task, "task_id", json_string(id));
	json_object_set_new(task, "workflow", json_string(workflow));
	copy = json_is_object(payload) ? json_deep_copy(payload) : json_object();
	if (json_is_true(force))
		json_object_set_new(copy, "force_refresh", json_true());
	json_object_set_new(task, "payload", copy);
	return shape_task_common(body, task, prefix, err);
}

json_t *
shape_task(
    const json_t *body, bool workflow_form, const char *prefix, struct shape_error *err)
{
	json_t *task = json_object(), *ok;
	char item[64];

	if (!json_is_object(body)) {
		json_decref(task);
		if (prefix[0] == '\0')
			return shape_fail(err, "", "body", "expected an object, got %s",
			    shape_type(body));
		/* The item itself: "tasks[3]", not "tasks[3].". */
		snprintf(item, sizeof item, "%.*s", (int)strcspn(prefix, "."), prefix);
		return shape_fail(
		    err, "", item, "expected an object, got %s", shape_type(body));
	}
	ok = workflow_form ? shape_workflow_task(body, task, prefix, err) :
			     shape_evaluation_task(body, task, prefix, err);
	if (ok == NULL) {
		json_decref(task);
		return NULL;
	}
	return task;
}

const char *
shape_status(const char *state)
{
	if (state == NULL)
		return "failed";
	if (strcmp(state, "queued") == 0)
		return "pending";
	if (strcmp(state, "running") == 0)
		return "processing";
	return state; /* completed, failed, cancelled */
}

int64_t
shape_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

json_t *
shape_time(int64_t ms)
{
	char buf[96];
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	if (ms <= 0 || gmtime_r(&s, &tm) == NULL)
		return json_null();
	snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	    tm.tm_sec, (int)(ms % 1000));
	return json_string(buf);
}

json_t *
shape_evaluation(const char *task_id, const char *state, const json_t *result,
    int64_t submitted_ms, int64_t completed_ms)
{
	json_t *out = json_is_object(result) ? json_deep_copy(result) : json_object();

	json_object_set_new(out, "task_id", json_string(task_id));
	if (!json_is_string(json_object_get(out, "status")))
		json_object_set_new(out, "status", json_string(shape_status(state)));
	json_object_set_new(out, "submitted_at", shape_time(submitted_ms));
	json_object_set_new(out, "completed_at", shape_time(completed_ms));
	json_object_set_new(out, "processing_time",
	    submitted_ms > 0 && completed_ms >= submitted_ms ?
		json_real((double)(completed_ms - submitted_ms) / 1000.0) :
		json_null());
	return out;
}

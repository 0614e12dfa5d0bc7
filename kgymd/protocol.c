/*
 * protocol.c -- control protocol v1: requests and tasks in, replies out.
 *
 * Everything a client sends passes through here before any op sees it, so
 * this is where a malformed line becomes bad_json, a missing or wrong-typed
 * field becomes bad_request naming the field, and a wrong "v" becomes
 * unsupported_version.  No I/O and no daemon state: control.c feeds it
 * lines, ops.c reads the checked values, and the fuzz harness calls it
 * directly.  kgymd-protocol(7) documents the same rules.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"

static const char *const proto_op_names[OP__COUNT] = {
	[OP_HELLO] = "hello",
	[OP_SUBMIT] = "submit",
	[OP_STATUS] = "status",
	[OP_RESULT] = "result",
	[OP_WAIT] = "wait",
	[OP_CANCEL] = "cancel",
	[OP_LIST] = "list",
	[OP_WORKERS] = "workers",
	[OP_HEALTH] = "health",
	[OP_PLUGINS] = "plugins",
	[OP_STATS] = "stats",
	[OP_DRAIN] = "drain",
	[OP_SHUTDOWN] = "shutdown",
};

static const char *const proto_prio_names[PRIO__COUNT] = {
	[PRIO_HIGH] = "high",
	[PRIO_NORMAL] = "normal",
	[PRIO_LOW] = "low",
};

static const char *const proto_state_names[TASK__STATE_COUNT] = {
	[TASK_QUEUED] = "queued",
	[TASK_RUNNING] = "running",
	[TASK_COMPLETED] = "completed",
	[TASK_FAILED] = "failed",
	[TASK_CANCELLED] = "cancelled",
};

/*
 * Length of the valid UTF-8 sequence at s (1 to 4), or 0 when it is not
 * one: jansson refuses to build a string from invalid UTF-8.
 */
static size_t
proto_utf8_len(const unsigned char *s)
{
	size_t n, i;
	unsigned int c;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		c = s[0] & 0x07;
	} else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && c < 0x10000) || c > 0x10ffff ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n;
}

/*
 * Messages quote client text cut with "%.Ns", which can split a multi-byte
 * character; an invalid byte would make the error reply lose its message,
 * so each byte of a broken sequence becomes '?'.
 */
static void
proto_utf8_scrub(char *s)
{
	unsigned char *p = (unsigned char *)s;
	size_t n;

	while (*p != '\0') {
		if ((n = proto_utf8_len(p)) == 0) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

void
proto_error_set(struct proto_error *err, const char *code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	proto_utf8_scrub(err->message);
}

static const char *
proto_json_type_name(const json_t *v)
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
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

int
proto_parse_request(const char *line, size_t len, struct request *ret_req,
    json_t **ret_id, struct proto_error *err)
{
	json_error_t jerr;
	json_t *root, *v, *op, *id;
	int i;

	/* DECODE_ANY: a bare scalar is valid JSON, just not a request. */
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (root == NULL) {
		/* jansson names its own flag for this one; say what it means. */
		if (strstr(jerr.text, "JSON_ALLOW_NUL") != NULL)
			proto_error_set(err, "bad_json", "invalid JSON at column %d: "
			    "\\u0000 (a NUL character) is not allowed in strings", jerr.column);
		else
			proto_error_set(err, "bad_json", "invalid JSON at column %d: %s",
			    jerr.column, jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		proto_error_set(err, "bad_request", "a request must be a JSON object, got %s",
		    proto_json_type_name(root));
		json_decref(root);
		return -EINVAL;
	}
	id = json_object_get(root, "id");
	if (id != NULL && !json_is_null(id) && !json_is_string(id) &&
	    !json_is_number(id) && !json_is_boolean(id)) {
		proto_error_set(err, "bad_request",
		    "field 'id': expected a string, number, boolean or null, got %s",
		    proto_json_type_name(id));
		json_decref(root);
		return -EINVAL;
	}
	if (id != NULL && ret_id != NULL)
		*ret_id = json_incref(id);

	v = json_object_get(root, "v");
	if (v == NULL) {
		proto_error_set(err, "bad_request", "field 'v' is missing: expected the protocol version 1");
		goto fail;
	}
	if (!json_is_integer(v)) {
		proto_error_set(err, "bad_request", "field 'v': expected an integer, got %s",
		    proto_json_type_name(v));
		goto fail;
	}
	if (json_integer_value(v) != KGYM_PROTOCOL_VERSION) {
		proto_error_set(err, "unsupported_version",
		    "protocol version %lld is not supported; this daemon speaks version %d",
		    (long long)json_integer_value(v), KGYM_PROTOCOL_VERSION);
		goto fail;
	}
	op = json_object_get(root, "op");
	if (op == NULL) {
		proto_error_set(err, "bad_request", "field 'op' is missing");
		goto fail;
	}
	if (!json_is_string(op)) {
		proto_error_set(err, "bad_request", "field 'op': expected a string, got %s",
		    proto_json_type_name(op));
		goto fail;
	}
	for (i = 0; i < OP__COUNT; i++) {
		if (strcmp(json_string_value(op), proto_op_names[i]) == 0) {
			ret_req->root = root;
			ret_req->id = id;
			ret_req->op = (enum proto_op)i;
			return 0;
		}
	}
	proto_error_set(err, "unknown_op", "unknown op '%.64s'", json_string_value(op));
fail:
	json_decref(root);
	return -EINVAL;
}

void
proto_request_clear(struct request *req)
{
	json_decref(req->root);
	req->root = NULL;
	req->id = NULL;
}

int
proto_get_string(json_t *obj, const char *field, bool required, const char **ret,
    struct proto_error *err)
{
	json_t *v = json_object_get(obj, field);

	if (v == NULL) {
		if (!required)
			return 0;
		proto_error_set(err, "bad_request", "field '%s' is missing: expected a string", field);
		return -EINVAL;
	}
	if (!json_is_string(v)) {
		proto_error_set(err, "bad_request", "field '%s': expected a string, got %s",
		    field, proto_json_type_name(v));
		return -EINVAL;
	}
	*ret = json_string_value(v);
	return 0;
}

int
proto_get_int(json_t *obj, const char *field, bool required, int64_t min, int64_t max,
    int64_t *ret, struct proto_error *err)
{
	json_t *v = json_object_get(obj, field);
	json_int_t n;

	if (v == NULL) {
		if (!required)
			return 0;
		proto_error_set(err, "bad_request", "field '%s' is missing: expected an integer",
		    field);
		return -EINVAL;
	}
	if (!json_is_integer(v)) {
		proto_error_set(err, "bad_request", "field '%s': expected an integer, got %s",
		    field, proto_json_type_name(v));
		return -EINVAL;
	}
	n = json_integer_value(v);
	if (n < min || n > max) {
		proto_error_set(err, "bad_request",
		    "field '%s': expected an integer from %lld to %lld, got %lld", field,
		    (long long)min, (long long)max, (long long)n);
		return -EINVAL;
	}
	*ret = n;
	return 0;
}

int
proto_get_bool(json_t *obj, const char *field, bool required, bool *ret,
    struct proto_error *err)
{
	json_t *v = json_object_get(obj, field);

	if (v == NULL) {
		if (!required)
			return 0;
		proto_error_set(err, "bad_request", "field '%s' is missing: expected a boolean",
		    field);
		return -EINVAL;
	}
	if (!json_is_boolean(v)) {
		proto_error_set(err, "bad_request", "field '%s': expected a boolean, got %s",
		    field, proto_json_type_name(v));
		return -EINVAL;
	}
	*ret = json_is_true(v);
	return 0;
}

int
proto_get_array(json_t *obj, const char *field, bool required, json_t **ret,
    struct proto_error *err)
{
	json_t *v = json_object_get(obj, field);

	if (v == NULL) {
		if (!required)
			return 0;
		proto_error_set(err, "bad_request", "field '%s' is missing: expected an array",
		    field);
		return -EINVAL;
	}
	if (!json_is_array(v)) {
		proto_error_set(err, "bad_request", "field '%s': expected an array, got %s",
		    field, proto_json_type_name(v));
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

bool
proto_task_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > KGYM_TASK_ID_MAX)
		return false;
	return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789._:-") == n;
}

static bool
proto_name_valid(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n <= KGYM_NAME_MAX &&
	    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

int
proto_parse_task(json_t *task, double max_timeout_s, struct task_spec *ret_spec,
    struct proto_error *err)
{
	struct task_spec spec = { .prio = PRIO_NORMAL };
	const char *prio = NULL;
	json_t *v;
	int p;

	if (!json_is_object(task)) {
		proto_error_set(err, "bad_request", "a task must be an object, got %s",
		    proto_json_type_name(task));
		return -EINVAL;
	}
	if (proto_get_string(task, "task_id", false, &spec.id, err) < 0)
		return -EINVAL;
	if (spec.id != NULL && !proto_task_id_valid(spec.id)) {
		proto_error_set(err, "bad_request",
		    "field 'task_id': expected 1 to %d characters of [A-Za-z0-9._:-]",
		    KGYM_TASK_ID_MAX);
		return -EINVAL;
	}
	if (proto_get_string(task, "workflow", true, &spec.workflow, err) < 0)
		return -EINVAL;
	if (!proto_name_valid(spec.workflow)) {
		proto_error_set(err, "bad_request",
		    "field 'workflow': expected a name of [a-z0-9_], got '%.64s'", spec.workflow);
		return -EINVAL;
	}
	if (proto_get_string(task, "priority", false, &prio, err) < 0)
		return -EINVAL;
	if (prio != NULL) {
		if ((p = proto_prio_parse(prio)) < 0) {
			proto_error_set(err, "bad_request",
			    "field 'priority': expected \"high\", \"normal\" or \"low\", got '%.32s'",
			    prio);
			return -EINVAL;
		}
		spec.prio = (enum task_prio)p;
	}
	if ((v = json_object_get(task, "timeout_s")) != NULL) {
		if (!json_is_number(v)) {
			proto_error_set(err, "bad_request", "field 'timeout_s': expected a number, got %s",
			    proto_json_type_name(v));
			return -EINVAL;
		}
		spec.timeout_s = json_number_value(v);
		/* A denormal or a nanosecond is no timeout a task can meet: 1 ms at least. */
		if (!(spec.timeout_s >= PROTO_TIMEOUT_MIN_S) || spec.timeout_s > max_timeout_s) {
			proto_error_set(err, "bad_request",
			    "field 'timeout_s': expected a number from %g to %g (max_timeout), got %g",
			    PROTO_TIMEOUT_MIN_S, max_timeout_s, spec.timeout_s);
			return -EINVAL;
		}
	}
	if ((v = json_object_get(task, "resources")) != NULL) {
		json_t *mem;

		if (!json_is_object(v)) {
			proto_error_set(err, "bad_request", "field 'resources': expected an object, got %s",
			    proto_json_type_name(v));
			return -EINVAL;
		}
		mem = json_object_get(v, "gpu_memory_bytes");
		if (mem != NULL && (!json_is_integer(mem) || json_integer_value(mem) < 0 ||
		    json_integer_value(mem) > (INT64_C(1) << 50))) {
			proto_error_set(err, "bad_request", "field 'resources.gpu_memory_bytes': "
			    "expected an integer from 0 to 2^50");
			return -EINVAL;
		}
		spec.gpu_memory_bytes = mem != NULL ? json_integer_value(mem) : 0;
	}
	v = json_object_get(task, "payload");
	if (v == NULL) {
		proto_error_set(err, "bad_request", "field 'payload' is missing: expected an object");
		return -EINVAL;
	}
	if (!json_is_object(v)) {
		proto_error_set(err, "bad_request", "field 'payload': expected an object, got %s",
		    proto_json_type_name(v));
		return -EINVAL;
	}
	spec.payload = v;
	*ret_spec = spec;
	return 0;
}

const char *
proto_op_name(enum proto_op op)
{
	return (unsigned)op < OP__COUNT ? proto_op_names[op] : "unknown";
}

const char *
proto_prio_name(enum task_prio prio)
{
	return (unsigned)prio < PRIO__COUNT ? proto_prio_names[prio] : "unknown";
}

int
proto_prio_parse(const char *name)
{
	int i;

	for (i = 0; i < PRIO__COUNT; i++)
		if (strcmp(name, proto_prio_names[i]) == 0)
			return i;
	return -EINVAL;
}

const char *
proto_state_name(enum task_state state)
{
	return (unsigned)state < TASK__STATE_COUNT ? proto_state_names[state] : "unknown";
}

int
proto_state_parse(const char *name)
{
	int i;

	for (i = 0; i < TASK__STATE_COUNT; i++)
		if (strcmp(name, proto_state_names[i]) == 0)
			return i;
	return -EINVAL;
}

bool
proto_state_terminal(enum task_state state)
{
	return state == TASK_COMPLETED || state == TASK_FAILED || state == TASK_CANCELLED;
}

static json_t *
proto_reply_base(json_t *id)
{
	json_t *r = json_object();

	if (r == NULL)
		return NULL;
	json_object_set_new(r, "v", json_integer(KGYM_PROTOCOL_VERSION));
	json_object_set(r, "id", id != NULL ? id : json_null());
	return r;
}

json_t *
proto_reply_ok(json_t *id)
{
	json_t *r = proto_reply_base(id);

	if (r != NULL)
		json_object_set_new(r, "ok", json_true());
	return r;
}

json_t *
proto_reply_error(json_t *id, const char *code, const char *message)
{
	json_t *r = proto_reply_base(id), *msg;
	char *copy;

	if (r == NULL)
		return NULL;
	json_object_set_new(r, "ok", json_false());
	if ((msg = json_string(message)) == NULL && (copy = strdup(message)) != NULL) {
		/* ops.c quotes client text too; never lose the error for it. */
		proto_utf8_scrub(copy);
		msg = json_string(copy);
		free(copy);
	}
	json_object_set_new(r, "error", json_pack("{s:s, s:o*}", "code", code,
	    "message", msg));
	if (strcmp(code, "unsupported_version") == 0)
		json_object_set_new(json_object_get(r, "error"), "supported",
		    json_pack("[i]", KGYM_PROTOCOL_VERSION));
	return r;
}

json_t *
proto_event_result(json_t *id, const char *task_id, enum task_state state, json_t *result)
{
	json_t *r = proto_reply_base(id);

	if (r == NULL)
		return NULL;
	json_object_set_new(r, "event", json_string("result"));
	json_object_set_new(r, "task_id", json_string(task_id));
	json_object_set_new(r, "state", json_string(proto_state_name(state)));
	json_object_set(r, "result", result != NULL ? result : json_null());
	return r;
}

char *
proto_encode(const json_t *reply, size_t *ret_len)
{
	char *s, *line;
	size_t n;

	s = json_dumps(reply, JSON_COMPACT);
	if (s == NULL)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (line == NULL) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	*ret_len = n + 1;
	return line;
}

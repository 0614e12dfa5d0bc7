/*
 * test_protocol.c -- unit tests of the control protocol (kgymd/protocol.c).
 *
 * protocol.c is the only gate between a client's bytes and the ops, so
 * these tests hold it to kgymd-protocol(7): which error code each kind of
 * bad line gets, that the message names the offending field, that the
 * request id comes back whatever went wrong, and that replies have exactly
 * the documented shape and encode to one compact line.  Every message the
 * daemon may put in a reply must be valid UTF-8, or jansson drops it.
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

#include "kgymd.h"

#define MAX_TIMEOUT	3600.0

/* Parse a NUL-terminated line. */
static int
parse(const char *line, struct request *req, json_t **id, struct proto_error *err)
{
	*id = NULL;
	memset(req, 0, sizeof *req);
	memset(err, 0, sizeof *err);
	return proto_parse_request(line, strlen(line), req, id, err);
}

/* The line must fail with `code`, and the message must hold each word. */
static void
expect_failure(const char *line, const char *code, const char *word)
{
	struct request req;
	struct proto_error err;
	json_t *id;
	int rc;

	rc = parse(line, &req, &id, &err);
	if (rc != -EINVAL)
		fail_msg("line %s: expected -EINVAL, got %d", line, rc);
	assert_null(req.root);
	assert_non_null(err.code);
	if (strcmp(err.code, code) != 0)
		fail_msg("line %s: expected %s, got %s (%s)", line, code, err.code,
		    err.message);
	if (word != NULL && strstr(err.message, word) == NULL)
		fail_msg("line %s: message '%s' lacks '%s'", line, err.message, word);
	json_decref(id);
}

static bool
utf8_valid(const char *s)
{
	json_t *j = json_string(s);	/* jansson checks UTF-8 */

	json_decref(j);
	return j != NULL;
}

/* --- requests */

static void
test_request_every_op(void **state)
{
	struct request req;
	struct proto_error err;
	char line[128];
	json_t *id;
	int op;

	(void)state;
	for (op = 0; op < OP__COUNT; op++) {
		snprintf(line, sizeof line, "{\"v\":1,\"id\":%d,\"op\":\"%s\"}", op,
		    proto_op_name((enum proto_op)op));
		assert_int_equal(parse(line, &req, &id, &err), 0);
		assert_int_equal(req.op, op);
		assert_non_null(req.root);
		assert_true(json_is_object(req.root));
		/* id is borrowed from the root */
		assert_ptr_equal(req.id, json_object_get(req.root, "id"));
		assert_int_equal(json_integer_value(req.id), op);
		json_decref(id);
		proto_request_clear(&req);
		assert_null(req.root);
		assert_null(req.id);
	}
}

static void
test_request_op_names(void **state)
{
	static const char *const names[] = {
		"hello", "submit", "status", "result", "wait", "cancel", "list",
		"workers", "health", "plugins", "stats", "drain", "shutdown",
	};
	size_t i;

	(void)state;
	assert_int_equal(sizeof names / sizeof names[0], OP__COUNT);
	for (i = 0; i < OP__COUNT; i++)
		assert_string_equal(proto_op_name((enum proto_op)i), names[i]);
	assert_string_equal(proto_op_name(OP__COUNT), "unknown");
}

static void
test_request_args_kept(void **state)
{
	struct request req;
	struct proto_error err;
	json_t *id, *task;

	(void)state;
	assert_int_equal(parse("{\"op\":\"submit\",\"v\":1,\"task\":{\"workflow\":\"selftest\","
	    "\"payload\":{}},\"wait\":true}", &req, &id, &err), 0);
	assert_int_equal(req.op, OP_SUBMIT);
	assert_null(req.id);		/* no id: NULL, replies say null */
	assert_null(id);
	task = json_object_get(req.root, "task");
	assert_true(json_is_object(task));
	assert_true(json_is_true(json_object_get(req.root, "wait")));
	proto_request_clear(&req);
}

static void
test_request_len_bounds_input(void **state)
{
	const char *line = "{\"v\":1,\"op\":\"hello\"}{\"garbage\"";
	struct request req = { 0 };
	struct proto_error err = { 0 };
	json_t *id = NULL;

	(void)state;
	/* Only len bytes are read: the control socket hands out lines in place. */
	assert_int_equal(proto_parse_request(line, 20, &req, &id, &err), 0);
	assert_int_equal(req.op, OP_HELLO);
	proto_request_clear(&req);
	assert_int_equal(proto_parse_request(line, strlen(line), &req, &id, &err), -EINVAL);
	assert_string_equal(err.code, "bad_json");
	/* Whitespace and the line's own newline or CR are fine. */
	assert_int_equal(parse("  {\"v\":1,\"op\":\"health\"} \r\n", &req, &id, &err), 0);
	assert_int_equal(req.op, OP_HEALTH);
	proto_request_clear(&req);
}

static void
test_request_bad_json(void **state)
{
	(void)state;
	expect_failure("", "bad_json", NULL);
	expect_failure("   ", "bad_json", NULL);
	expect_failure("not json at all", "bad_json", NULL);
	expect_failure("{\"v\":1,\"op\":\"hello\"", "bad_json", NULL);	/* truncated */
	expect_failure("{\"v\":1,\"op\":\"hel", "bad_json", NULL);
	expect_failure("{\"v\":1,\"op\":\"hello\",}", "bad_json", NULL);
	expect_failure("{\"v\":1,\"op\":\"hello\"} x", "bad_json", NULL);	/* trailing */
	expect_failure("{\"v\":1,\"op\":\"hello\"}{}", "bad_json", NULL);
	expect_failure("{'v':1}", "bad_json", NULL);
	expect_failure("{\"v\":1,\"op\":\"hello\",\"x\":\"\xff\"}", "bad_json", NULL);
	/* Said in the protocol's words, not as jansson's flag. */
	expect_failure("{\"v\":1,\"op\":\"h\\u0000\"}", "bad_json", "NUL character");
	/* Duplicate keys would let two readers see two different requests. */
	expect_failure("{\"v\":1,\"id\":7,\"op\":\"hello\",\"op\":\"health\"}", "bad_json", NULL);
	expect_failure("{\"v\":1,\"v\":1,\"op\":\"hello\"}", "bad_json", NULL);
	expect_failure("{\"v\":1,\"op\":\"submit\",\"task\":{\"a\":1,\"a\":2}}", "bad_json",
	    NULL);
}

static void
test_request_bad_json_no_id(void **state)
{
	struct request req;
	struct proto_error err;
	json_t *id;

	(void)state;
	/* Nothing was parsed, so there is no id to echo. */
	assert_int_equal(parse("{\"v\":1,\"id\":3,\"op\":\"hello\"", &req, &id, &err), -EINVAL);
	assert_null(id);
	assert_string_equal(err.code, "bad_json");
	assert_true(err.message[0] != '\0');
}

static void
test_request_bad_json_message_utf8(void **state)
{
	static const char *const lines[] = {
		"{\"op\":\"ct\\ud8\xcd\x9b\"}",
		"{\"v\":1,\"op\":\"\\u\xc3\xa9\"}",
		"{\"v\":1,\"op\":\"\\ud8\xcd\"}",
		"{\"v\":1,\"op\":\"hello\"}\xe2\x82",
	};
	struct request req;
	struct proto_error err;
	json_t *id, *reply;
	size_t i;

	(void)state;
	/*
	 * jansson quotes the bad token in its error text, and the token can end
	 * inside a character; the message goes into the reply, so it must be
	 * valid UTF-8.  (Found by the fuzzer.)
	 */
	for (i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		assert_int_equal(parse(lines[i], &req, &id, &err), -EINVAL);
		assert_string_equal(err.code, "bad_json");
		if (!utf8_valid(err.message))
			fail_msg("line %zu: message is not valid UTF-8: %s", i, err.message);
		reply = proto_reply_error(id, err.code, err.message);
		assert_non_null(json_object_get(json_object_get(reply, "error"), "message"));
		json_decref(reply);
		json_decref(id);
	}
}

static void
test_request_not_object(void **state)
{
	(void)state;
	expect_failure("[1,2,3]", "bad_request", "object");
	expect_failure("[]", "bad_request", "object");
	/* A bare scalar is valid JSON, so not bad_json. */
	expect_failure("42", "bad_request", "object");
	expect_failure("\"hello\"", "bad_request", "object");
	expect_failure("null", "bad_request", "object");
	expect_failure("true", "bad_request", "object");
}

static void
test_request_version(void **state)
{
	(void)state;
	expect_failure("{\"id\":1,\"op\":\"hello\"}", "bad_request", "'v'");
	expect_failure("{\"v\":\"1\",\"op\":\"hello\"}", "bad_request", "'v'");
	expect_failure("{\"v\":\"1\",\"op\":\"hello\"}", "bad_request", "integer");
	expect_failure("{\"v\":1.0,\"op\":\"hello\"}", "bad_request", "'v'");
	expect_failure("{\"v\":null,\"op\":\"hello\"}", "bad_request", "'v'");
	expect_failure("{\"v\":true,\"op\":\"hello\"}", "bad_request", "'v'");
	expect_failure("{\"v\":[1],\"op\":\"hello\"}", "bad_request", "'v'");
	expect_failure("{\"v\":2,\"op\":\"hello\"}", "unsupported_version", "2");
	expect_failure("{\"v\":0,\"op\":\"hello\"}", "unsupported_version", NULL);
	expect_failure("{\"v\":-1,\"op\":\"hello\"}", "unsupported_version", NULL);
	expect_failure("{\"v\":9223372036854775807,\"op\":\"hello\"}", "unsupported_version",
	    NULL);
	/* The version is checked before the op: a v2 client learns that first. */
	expect_failure("{\"v\":2,\"op\":\"frobnicate\"}", "unsupported_version", NULL);
	expect_failure("{\"v\":2}", "unsupported_version", NULL);
}

static void
test_request_op(void **state)
{
	(void)state;
	expect_failure("{\"v\":1,\"id\":5}", "bad_request", "'op'");
	expect_failure("{\"v\":1}", "bad_request", "missing");
	expect_failure("{\"v\":1,\"op\":5}", "bad_request", "'op'");
	expect_failure("{\"v\":1,\"op\":5}", "bad_request", "string");
	expect_failure("{\"v\":1,\"op\":null}", "bad_request", "'op'");
	expect_failure("{\"v\":1,\"op\":[\"hello\"]}", "bad_request", "'op'");
	expect_failure("{\"v\":1,\"op\":\"frobnicate\"}", "unknown_op", "frobnicate");
	expect_failure("{\"v\":1,\"op\":\"HELLO\"}", "unknown_op", "HELLO");
	expect_failure("{\"v\":1,\"op\":\"hello \"}", "unknown_op", NULL);
	expect_failure("{\"v\":1,\"op\":\"\"}", "unknown_op", NULL);
	expect_failure("{\"v\":1,\"op\":\"unknown\"}", "unknown_op", NULL);
}

static void
test_request_long_op_utf8(void **state)
{
	struct request req;
	struct proto_error err;
	char line[1024], op[600];
	json_t *id, *reply, *e;
	size_t i;

	(void)state;
	/*
	 * An unknown op is quoted in the message, cut to a bounded length; the
	 * cut must not split a character, or the reply loses its error.
	 */
	op[0] = 'a';
	for (i = 1; i + 2 < sizeof op - 1; i += 2)
		memcpy(op + i, "\xc3\xa9", 2);
	op[i] = '\0';
	snprintf(line, sizeof line, "{\"v\":1,\"id\":\"x\",\"op\":\"%s\"}", op);
	assert_int_equal(parse(line, &req, &id, &err), -EINVAL);
	assert_string_equal(err.code, "unknown_op");
	assert_true(strlen(err.message) < sizeof err.message);
	assert_true(utf8_valid(err.message));
	assert_non_null(strstr(err.message, "a\xc3\xa9\xc3\xa9"));
	reply = proto_reply_error(id, err.code, err.message);
	e = json_object_get(reply, "error");
	assert_non_null(e);
	assert_string_equal(json_string_value(json_object_get(e, "code")), "unknown_op");
	assert_string_equal(json_string_value(json_object_get(e, "message")), err.message);
	json_decref(reply);
	json_decref(id);
}

static void
test_request_id_echo(void **state)
{
	static const char *const ids[] = {
		"\"abc\"", "\"\"", "7", "-3", "1.5", "1e300", "null", "true", "false",
		"9223372036854775807",
	};
	struct request req;
	struct proto_error err;
	char line[256];
	json_t *id, *want;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		want = json_loads(ids[i], JSON_DECODE_ANY, NULL);
		assert_non_null(want);

		/* success: the id is in the request */
		snprintf(line, sizeof line, "{\"v\":1,\"id\":%s,\"op\":\"hello\"}", ids[i]);
		assert_int_equal(parse(line, &req, &id, &err), 0);
		assert_non_null(req.id);
		assert_true(json_equal(req.id, want));
		json_decref(id);
		proto_request_clear(&req);

		/* each kind of failure after the object parsed echoes it */
		snprintf(line, sizeof line, "{\"v\":1,\"id\":%s,\"op\":\"nope\"}", ids[i]);
		assert_int_equal(parse(line, &req, &id, &err), -EINVAL);
		assert_string_equal(err.code, "unknown_op");
		assert_non_null(id);
		assert_true(json_equal(id, want));
		json_decref(id);

		snprintf(line, sizeof line, "{\"id\":%s,\"op\":\"hello\"}", ids[i]);
		assert_int_equal(parse(line, &req, &id, &err), -EINVAL);
		assert_non_null(id);
		assert_true(json_equal(id, want));
		json_decref(id);

		snprintf(line, sizeof line, "{\"v\":3,\"id\":%s,\"op\":\"hello\"}", ids[i]);
		assert_int_equal(parse(line, &req, &id, &err), -EINVAL);
		assert_string_equal(err.code, "unsupported_version");
		assert_true(json_equal(id, want));
		json_decref(id);

		snprintf(line, sizeof line, "{\"v\":1,\"id\":%s}", ids[i]);
		assert_int_equal(parse(line, &req, &id, &err), -EINVAL);
		assert_true(json_equal(id, want));
		json_decref(id);
		json_decref(want);
	}
}

static void
test_request_id_outlives_line(void **state)
{
	struct request req;
	struct proto_error err;
	json_t *id;

	(void)state;
	/* The error path frees the parsed object; the id must survive it. */
	assert_int_equal(parse("{\"v\":1,\"id\":\"keep-me\",\"op\":\"nope\"}", &req, &id, &err),
	    -EINVAL);
	assert_non_null(id);
	assert_int_equal(id->refcount, 1);
	assert_string_equal(json_string_value(id), "keep-me");
	json_decref(id);
}

static void
test_request_id_not_scalar(void **state)
{
	struct request req;
	struct proto_error err;
	json_t *id;

	(void)state;
	expect_failure("{\"v\":1,\"id\":{\"x\":1},\"op\":\"hello\"}", "bad_request", "'id'");
	expect_failure("{\"v\":1,\"id\":[1],\"op\":\"hello\"}", "bad_request", "'id'");
	/* The id is checked first, whatever else is wrong. */
	expect_failure("{\"v\":2,\"id\":{},\"op\":\"nope\"}", "bad_request", "'id'");
	/* A refused id is not echoed (the reply says null). */
	assert_int_equal(parse("{\"v\":1,\"id\":{\"x\":1},\"op\":\"hello\"}", &req, &id, &err),
	    -EINVAL);
	assert_null(id);
}

static void
test_request_ret_id_optional(void **state)
{
	struct request req = { 0 };
	struct proto_error err = { 0 };
	const char *line = "{\"v\":1,\"id\":1,\"op\":\"nope\"}";

	(void)state;
	assert_int_equal(proto_parse_request(line, strlen(line), &req, NULL, &err), -EINVAL);
	assert_string_equal(err.code, "unknown_op");
	line = "{\"v\":1,\"id\":1,\"op\":\"stats\"}";
	assert_int_equal(proto_parse_request(line, strlen(line), &req, NULL, &err), 0);
	assert_int_equal(req.op, OP_STATS);
	proto_request_clear(&req);
}

/* --- tasks */

static json_t *
load(const char *text)
{
	json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);

	if (j == NULL)
		fail_msg("test input does not parse: %s", text);
	return j;
}

/* The task must be refused, naming `field`, and leave the spec untouched. */
static void
expect_task_refused(const char *text, const char *field)
{
	struct task_spec spec, before;
	struct proto_error err = { 0 };
	json_t *task = load(text);
	int rc;

	memset(&spec, 0xa5, sizeof spec);
	before = spec;
	rc = proto_parse_task(task, MAX_TIMEOUT, &spec, &err);
	if (rc != -EINVAL)
		fail_msg("task %s: expected -EINVAL, got %d", text, rc);
	assert_string_equal(err.code, "bad_request");
	if (field != NULL && strstr(err.message, field) == NULL)
		fail_msg("task %s: message '%s' does not name '%s'", text, err.message, field);
	assert_true(utf8_valid(err.message));
	assert_memory_equal(&spec, &before, sizeof spec);
	json_decref(task);
}

static void
expect_task_ok(const char *text, struct task_spec *ret_spec, json_t **ret_task)
{
	struct proto_error err = { 0 };
	json_t *task = load(text);

	if (proto_parse_task(task, MAX_TIMEOUT, ret_spec, &err) != 0)
		fail_msg("task %s refused: %s", text, err.message);
	*ret_task = task;
}

static void
test_task_minimal(void **state)
{
	struct task_spec spec;
	json_t *task;

	(void)state;
	expect_task_ok("{\"workflow\":\"selftest\",\"payload\":{}}", &spec, &task);
	assert_null(spec.id);
	assert_string_equal(spec.workflow, "selftest");
	assert_int_equal(spec.prio, PRIO_NORMAL);
	assert_true(spec.timeout_s == 0);
	/* borrowed from the task */
	assert_ptr_equal(spec.payload, json_object_get(task, "payload"));
	assert_ptr_equal(spec.workflow, json_string_value(json_object_get(task, "workflow")));
	json_decref(task);
}

static void
test_task_full(void **state)
{
	struct task_spec spec;
	json_t *task;

	(void)state;
	expect_task_ok("{\"task_id\":\"run-7.a:B_9\",\"workflow\":\"kernel_simple2\","
	    "\"priority\":\"high\",\"timeout_s\":12.5,\"payload\":{\"x\":[1,2]},"
	    "\"ignored\":true}", &spec, &task);
	assert_string_equal(spec.id, "run-7.a:B_9");
	assert_string_equal(spec.workflow, "kernel_simple2");
	assert_int_equal(spec.prio, PRIO_HIGH);
	assert_true(spec.timeout_s == 12.5);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(spec.payload, "x"),
	    1)), 2);
	json_decref(task);

	expect_task_ok("{\"workflow\":\"w\",\"priority\":\"low\",\"timeout_s\":3,"
	    "\"payload\":{}}", &spec, &task);
	assert_int_equal(spec.prio, PRIO_LOW);
	assert_true(spec.timeout_s == 3.0);
	json_decref(task);

	expect_task_ok("{\"workflow\":\"w\",\"priority\":\"normal\",\"payload\":{}}", &spec,
	    &task);
	assert_int_equal(spec.prio, PRIO_NORMAL);
	json_decref(task);
}

static void
test_task_not_object(void **state)
{
	(void)state;
	expect_task_refused("[]", "object");
	expect_task_refused("\"selftest\"", "object");
	expect_task_refused("null", "object");
	expect_task_refused("5", "object");
}

static void
test_task_id(void **state)
{
	struct task_spec spec;
	char text[512], id[KGYM_TASK_ID_MAX + 2];
	json_t *task;

	(void)state;
	expect_task_refused("{\"task_id\":5,\"workflow\":\"w\",\"payload\":{}}", "task_id");
	expect_task_refused("{\"task_id\":null,\"workflow\":\"w\",\"payload\":{}}", "task_id");
	expect_task_refused("{\"task_id\":\"\",\"workflow\":\"w\",\"payload\":{}}", "task_id");
	expect_task_refused("{\"task_id\":\"a b\",\"workflow\":\"w\",\"payload\":{}}", "task_id");
	expect_task_refused("{\"task_id\":\"a/b\",\"workflow\":\"w\",\"payload\":{}}", "task_id");
	expect_task_refused("{\"task_id\":\"../x\",\"workflow\":\"w\",\"payload\":{}}", "task_id");
	expect_task_refused("{\"task_id\":\"a'b\",\"workflow\":\"w\",\"payload\":{}}", "task_id");
	expect_task_refused("{\"task_id\":\"caf\xc3\xa9\",\"workflow\":\"w\",\"payload\":{}}",
	    "task_id");
	expect_task_refused("{\"task_id\":\"a\\nb\",\"workflow\":\"w\",\"payload\":{}}",
	    "task_id");

	/* exactly the maximum length is fine, one more is not */
	memset(id, 'x', KGYM_TASK_ID_MAX);
	id[KGYM_TASK_ID_MAX] = '\0';
	snprintf(text, sizeof text, "{\"task_id\":\"%s\",\"workflow\":\"w\",\"payload\":{}}", id);
	expect_task_ok(text, &spec, &task);
	assert_int_equal(strlen(spec.id), KGYM_TASK_ID_MAX);
	json_decref(task);
	id[KGYM_TASK_ID_MAX] = 'x';
	id[KGYM_TASK_ID_MAX + 1] = '\0';
	snprintf(text, sizeof text, "{\"task_id\":\"%s\",\"workflow\":\"w\",\"payload\":{}}", id);
	expect_task_refused(text, "task_id");
}

static void
test_task_id_valid(void **state)
{
	char id[KGYM_TASK_ID_MAX + 2];

	(void)state;
	assert_true(proto_task_id_valid("a"));
	assert_true(proto_task_id_valid("AZaz09._:-"));
	assert_false(proto_task_id_valid(""));
	assert_false(proto_task_id_valid("a b"));
	assert_false(proto_task_id_valid("a\tb"));
	assert_false(proto_task_id_valid("a+b"));
	assert_false(proto_task_id_valid("a%b"));
	assert_false(proto_task_id_valid("\xc3\xa9"));
	memset(id, '7', sizeof id - 1);
	id[KGYM_TASK_ID_MAX] = '\0';
	assert_true(proto_task_id_valid(id));
	id[KGYM_TASK_ID_MAX] = '7';
	id[KGYM_TASK_ID_MAX + 1] = '\0';
	assert_false(proto_task_id_valid(id));
}

static void
test_task_workflow(void **state)
{
	struct task_spec spec;
	char text[256], name[KGYM_NAME_MAX + 2];
	json_t *task;

	(void)state;
	expect_task_refused("{\"payload\":{}}", "workflow");
	expect_task_refused("{\"payload\":{}}", "missing");
	expect_task_refused("{\"workflow\":1,\"payload\":{}}", "workflow");
	expect_task_refused("{\"workflow\":[\"w\"],\"payload\":{}}", "workflow");
	expect_task_refused("{\"workflow\":\"\",\"payload\":{}}", "workflow");
	expect_task_refused("{\"workflow\":\"SelfTest\",\"payload\":{}}", "workflow");
	expect_task_refused("{\"workflow\":\"self-test\",\"payload\":{}}", "workflow");
	expect_task_refused("{\"workflow\":\"../x\",\"payload\":{}}", "workflow");
	expect_task_refused("{\"workflow\":\"a b\",\"payload\":{}}", "workflow");

	memset(name, 'w', KGYM_NAME_MAX);
	name[KGYM_NAME_MAX] = '\0';
	snprintf(text, sizeof text, "{\"workflow\":\"%s\",\"payload\":{}}", name);
	expect_task_ok(text, &spec, &task);
	json_decref(task);
	name[KGYM_NAME_MAX] = 'w';
	name[KGYM_NAME_MAX + 1] = '\0';
	snprintf(text, sizeof text, "{\"workflow\":\"%s\",\"payload\":{}}", name);
	expect_task_refused(text, "workflow");
}

static void
test_task_priority(void **state)
{
	(void)state;
	expect_task_refused("{\"workflow\":\"w\",\"priority\":\"urgent\",\"payload\":{}}",
	    "priority");
	expect_task_refused("{\"workflow\":\"w\",\"priority\":\"HIGH\",\"payload\":{}}",
	    "priority");
	expect_task_refused("{\"workflow\":\"w\",\"priority\":\"\",\"payload\":{}}", "priority");
	expect_task_refused("{\"workflow\":\"w\",\"priority\":0,\"payload\":{}}", "priority");
	expect_task_refused("{\"workflow\":\"w\",\"priority\":null,\"payload\":{}}", "priority");
}

static void
test_task_timeout(void **state)
{
	struct task_spec spec;
	char text[128];
	json_t *task;

	(void)state;
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":0,\"payload\":{}}", "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":0.0,\"payload\":{}}", "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":-1,\"payload\":{}}", "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":-0.5,\"payload\":{}}", "timeout_s");
	/* A denormal is above 0 but no timeout at all. */
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":5e-324,\"payload\":{}}", "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":0.0009,\"payload\":{}}", "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":\"10\",\"payload\":{}}",
	    "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":null,\"payload\":{}}", "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":true,\"payload\":{}}", "timeout_s");
	expect_task_refused("{\"workflow\":\"w\",\"timeout_s\":1e300,\"payload\":{}}", "timeout_s");
	snprintf(text, sizeof text, "{\"workflow\":\"w\",\"timeout_s\":%.17g,\"payload\":{}}",
	    MAX_TIMEOUT + 0.001);
	expect_task_refused(text, "timeout_s");

	/* the maximum itself is allowed, and so is the minimum, 1 ms */
	snprintf(text, sizeof text, "{\"workflow\":\"w\",\"timeout_s\":%.17g,\"payload\":{}}",
	    MAX_TIMEOUT);
	expect_task_ok(text, &spec, &task);
	assert_true(spec.timeout_s == MAX_TIMEOUT);
	json_decref(task);
	expect_task_ok("{\"workflow\":\"w\",\"timeout_s\":0.001,\"payload\":{}}", &spec, &task);
	assert_true(spec.timeout_s == 0.001);
	json_decref(task);
}

static void
test_task_timeout_uses_max(void **state)
{
	struct task_spec spec;
	struct proto_error err = { 0 };
	json_t *task = load("{\"workflow\":\"w\",\"timeout_s\":100,\"payload\":{}}");

	(void)state;
	assert_int_equal(proto_parse_task(task, 100.0, &spec, &err), 0);
	assert_int_equal(proto_parse_task(task, 99.5, &spec, &err), -EINVAL);
	assert_non_null(strstr(err.message, "99.5"));
	json_decref(task);
}

static void
test_task_payload(void **state)
{
	(void)state;
	expect_task_refused("{\"workflow\":\"w\"}", "payload");
	expect_task_refused("{\"workflow\":\"w\"}", "missing");
	expect_task_refused("{\"workflow\":\"w\",\"payload\":[]}", "payload");
	expect_task_refused("{\"workflow\":\"w\",\"payload\":\"{}\"}", "payload");
	expect_task_refused("{\"workflow\":\"w\",\"payload\":null}", "payload");
	expect_task_refused("{\"workflow\":\"w\",\"payload\":1}", "payload");
}

/* --- typed getters */

static void
test_get_string(void **state)
{
	struct proto_error err = { 0 };
	json_t *o = load("{\"s\":\"str\",\"n\":1,\"z\":null}");
	const char *s = "untouched";

	(void)state;
	assert_int_equal(proto_get_string(o, "s", true, &s, &err), 0);
	assert_string_equal(s, "str");
	s = "untouched";
	assert_int_equal(proto_get_string(o, "absent", false, &s, &err), 0);
	assert_string_equal(s, "untouched");
	assert_int_equal(proto_get_string(o, "absent", true, &s, &err), -EINVAL);
	assert_string_equal(err.code, "bad_request");
	assert_non_null(strstr(err.message, "'absent'"));
	assert_non_null(strstr(err.message, "missing"));
	assert_int_equal(proto_get_string(o, "n", false, &s, &err), -EINVAL);
	assert_non_null(strstr(err.message, "'n'"));
	assert_non_null(strstr(err.message, "string"));
	assert_non_null(strstr(err.message, "integer"));	/* what it got */
	assert_int_equal(proto_get_string(o, "z", false, &s, &err), -EINVAL);
	assert_non_null(strstr(err.message, "null"));
	assert_string_equal(s, "untouched");
	json_decref(o);
}

static void
test_get_int(void **state)
{
	struct proto_error err = { 0 };
	json_t *o = load("{\"a\":5,\"neg\":-5,\"big\":9223372036854775807,\"r\":5.0,"
	    "\"s\":\"5\",\"b\":true}");
	int64_t n = 42;

	(void)state;
	assert_int_equal(proto_get_int(o, "a", true, 0, 10, &n, &err), 0);
	assert_int_equal(n, 5);
	/* bounds are inclusive */
	n = 42;
	assert_int_equal(proto_get_int(o, "a", true, 5, 5, &n, &err), 0);
	assert_int_equal(n, 5);
	n = 42;
	assert_int_equal(proto_get_int(o, "a", true, 6, 10, &n, &err), -EINVAL);
	assert_non_null(strstr(err.message, "'a'"));
	assert_non_null(strstr(err.message, "6"));
	assert_non_null(strstr(err.message, "10"));
	assert_int_equal(proto_get_int(o, "a", true, 0, 4, &n, &err), -EINVAL);
	assert_int_equal(proto_get_int(o, "neg", true, 0, 10, &n, &err), -EINVAL);
	assert_non_null(strstr(err.message, "-5"));
	assert_int_equal(proto_get_int(o, "neg", true, -5, 0, &n, &err), 0);
	assert_int_equal(n, -5);
	n = 42;
	assert_int_equal(proto_get_int(o, "big", true, 0, INT32_MAX, &n, &err), -EINVAL);
	assert_int_equal(proto_get_int(o, "big", true, 0, INT64_MAX, &n, &err), 0);
	assert_true(n == INT64_MAX);
	n = 42;
	assert_int_equal(proto_get_int(o, "r", true, 0, 10, &n, &err), -EINVAL);
	assert_non_null(strstr(err.message, "integer"));
	assert_int_equal(proto_get_int(o, "s", true, 0, 10, &n, &err), -EINVAL);
	assert_non_null(strstr(err.message, "'s'"));
	assert_int_equal(proto_get_int(o, "b", true, 0, 10, &n, &err), -EINVAL);
	assert_int_equal(proto_get_int(o, "x", true, 0, 10, &n, &err), -EINVAL);
	assert_non_null(strstr(err.message, "missing"));
	assert_int_equal(proto_get_int(o, "x", false, 0, 10, &n, &err), 0);
	assert_int_equal(n, 42);
	json_decref(o);
}

static void
test_get_bool(void **state)
{
	struct proto_error err = { 0 };
	json_t *o = load("{\"t\":true,\"f\":false,\"n\":1,\"s\":\"true\"}");
	bool b = true;

	(void)state;
	assert_int_equal(proto_get_bool(o, "t", true, &b, &err), 0);
	assert_true(b);
	assert_int_equal(proto_get_bool(o, "f", true, &b, &err), 0);
	assert_false(b);
	b = true;
	assert_int_equal(proto_get_bool(o, "n", false, &b, &err), -EINVAL);
	assert_non_null(strstr(err.message, "'n'"));
	assert_non_null(strstr(err.message, "boolean"));
	assert_int_equal(proto_get_bool(o, "s", false, &b, &err), -EINVAL);
	assert_int_equal(proto_get_bool(o, "x", true, &b, &err), -EINVAL);
	assert_non_null(strstr(err.message, "'x'"));
	assert_int_equal(proto_get_bool(o, "x", false, &b, &err), 0);
	assert_true(b);
	json_decref(o);
}

static void
test_get_array(void **state)
{
	struct proto_error err = { 0 };
	json_t *o = load("{\"a\":[1],\"e\":[],\"o\":{},\"s\":\"x\"}");
	json_t *a = NULL;

	(void)state;
	assert_int_equal(proto_get_array(o, "a", true, &a, &err), 0);
	assert_ptr_equal(a, json_object_get(o, "a"));
	assert_int_equal(proto_get_array(o, "e", true, &a, &err), 0);
	assert_int_equal(json_array_size(a), 0);
	a = NULL;
	assert_int_equal(proto_get_array(o, "o", true, &a, &err), -EINVAL);
	assert_non_null(strstr(err.message, "'o'"));
	assert_non_null(strstr(err.message, "array"));
	assert_non_null(strstr(err.message, "object"));
	assert_int_equal(proto_get_array(o, "s", false, &a, &err), -EINVAL);
	assert_int_equal(proto_get_array(o, "x", true, &a, &err), -EINVAL);
	assert_non_null(strstr(err.message, "missing"));
	assert_int_equal(proto_get_array(o, "x", false, &a, &err), 0);
	assert_null(a);
	json_decref(o);
}

static void
test_error_set(void **state)
{
	struct proto_error err = { 0 };
	char big[2048];

	(void)state;
	proto_error_set(&err, "not_found", "no task '%s' (%d)", "t1", 3);
	assert_string_equal(err.code, "not_found");
	assert_string_equal(err.message, "no task 't1' (3)");
	/* long messages are cut to the buffer, never overflow it */
	memset(big, 'm', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	proto_error_set(&err, "internal", "%s", big);
	assert_int_equal(strlen(err.message), sizeof err.message - 1);
	/* and a cut that splits a character leaves valid UTF-8 */
	memset(big, 0, sizeof big);
	big[0] = 'x';
	while (strlen(big) + 2 < sizeof big)
		strcat(big, "\xe2\x82\xac");	/* 3 bytes: cuts at 511 split one */
	proto_error_set(&err, "internal", "%s", big);
	assert_true(utf8_valid(err.message));
	proto_error_set(&err, "bad_request", "bytes \xff\xfe and \xc3\xa9 stay");
	assert_true(utf8_valid(err.message));
	assert_non_null(strstr(err.message, "\xc3\xa9 stay"));
}

/* --- replies */

static void
test_reply_ok(void **state)
{
	json_t *id = json_string("req-1"), *r;

	(void)state;
	r = proto_reply_ok(id);
	assert_non_null(r);
	assert_int_equal(json_object_size(r), 3);
	assert_int_equal(json_integer_value(json_object_get(r, "v")), 1);
	assert_true(json_is_true(json_object_get(r, "ok")));
	/* the reply holds its own reference to the id */
	json_decref(id);
	assert_string_equal(json_string_value(json_object_get(r, "id")), "req-1");
	json_decref(r);

	r = proto_reply_ok(NULL);
	assert_true(json_is_null(json_object_get(r, "id")));
	assert_non_null(json_object_get(r, "id"));	/* present, not absent */
	json_decref(r);
}

static void
test_reply_error(void **state)
{
	json_t *id = json_integer(9), *r, *e;

	(void)state;
	r = proto_reply_error(id, "bad_request", "field 'x' is missing");
	assert_int_equal(json_object_size(r), 4);
	assert_int_equal(json_integer_value(json_object_get(r, "v")), 1);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 9);
	assert_true(json_is_false(json_object_get(r, "ok")));
	e = json_object_get(r, "error");
	assert_true(json_is_object(e));
	assert_int_equal(json_object_size(e), 2);
	assert_string_equal(json_string_value(json_object_get(e, "code")), "bad_request");
	assert_string_equal(json_string_value(json_object_get(e, "message")),
	    "field 'x' is missing");
	assert_null(json_object_get(e, "supported"));
	json_decref(r);

	r = proto_reply_error(NULL, "unsupported_version", "no");
	assert_true(json_is_null(json_object_get(r, "id")));
	e = json_object_get(r, "error");
	assert_int_equal(json_object_size(e), 3);
	json_decref(r);
	json_decref(id);
}

static void
test_reply_error_supported(void **state)
{
	json_t *r, *want = json_pack("[i]", KGYM_PROTOCOL_VERSION);

	(void)state;
	r = proto_reply_error(NULL, "unsupported_version", "version 2 is not supported");
	assert_true(json_equal(json_object_get(json_object_get(r, "error"), "supported"),
	    want));
	json_decref(r);
	json_decref(want);
}

static void
test_reply_error_bad_utf8(void **state)
{
	json_t *r, *e;
	const char *m;

	(void)state;
	/* ops.c quotes client strings cut with %.Ns; the error must survive */
	r = proto_reply_error(NULL, "not_found", "no task with task_id 'caf\xc3'");
	e = json_object_get(r, "error");
	assert_non_null(e);
	assert_string_equal(json_string_value(json_object_get(e, "code")), "not_found");
	m = json_string_value(json_object_get(e, "message"));
	assert_non_null(m);
	assert_non_null(strstr(m, "no task with task_id 'caf"));
	json_decref(r);
}

static void
test_event_result(void **state)
{
	json_t *id = json_string("w1"), *result = json_pack("{s:s}", "status", "completed");
	json_t *r;

	(void)state;
	r = proto_event_result(id, "t-1", TASK_COMPLETED, result);
	assert_int_equal(json_object_size(r), 6);
	assert_int_equal(json_integer_value(json_object_get(r, "v")), 1);
	assert_string_equal(json_string_value(json_object_get(r, "id")), "w1");
	assert_string_equal(json_string_value(json_object_get(r, "event")), "result");
	assert_string_equal(json_string_value(json_object_get(r, "task_id")), "t-1");
	assert_string_equal(json_string_value(json_object_get(r, "state")), "completed");
	assert_null(json_object_get(r, "ok"));	/* events are not replies */
	/* result is shared, not stolen */
	assert_ptr_equal(json_object_get(r, "result"), result);
	assert_int_equal(result->refcount, 2);
	json_decref(r);
	assert_int_equal(result->refcount, 1);
	json_decref(result);

	r = proto_event_result(NULL, "t-2", TASK_CANCELLED, NULL);
	assert_true(json_is_null(json_object_get(r, "id")));
	assert_true(json_is_null(json_object_get(r, "result")));
	assert_string_equal(json_string_value(json_object_get(r, "state")), "cancelled");
	json_decref(r);
	json_decref(id);
}

static void
test_encode_one_line(void **state)
{
	json_t *id = json_string("a\nb"), *r, *back;
	char *line;
	size_t len = 0, i, newlines;

	(void)state;
	r = proto_reply_ok(id);
	json_decref(id);
	json_object_set_new(r, "text", json_string("line1\nline2\r\n\ttab"));
	json_object_set_new(r, "nested", json_pack("{s:[i,i,{s:f}]}", "a", 1, 2, "b", 0.5));
	line = proto_encode(r, &len);
	assert_non_null(line);
	assert_int_equal(len, strlen(line));
	assert_true(len > 1);
	assert_int_equal(line[len - 1], '\n');
	for (newlines = 0, i = 0; i < len; i++)
		if (line[i] == '\n')
			newlines++;
	assert_int_equal(newlines, 1);
	/* compact: no pretty-printing whitespace */
	assert_null(strstr(line, ": "));
	assert_null(strstr(line, ", "));
	assert_null(strchr(line, '\t'));
	/* and it says the same thing */
	back = json_loadb(line, len, 0, NULL);
	assert_non_null(back);
	assert_true(json_equal(back, r));
	json_decref(back);
	free(line);
	json_decref(r);
}

static void
test_encode_roundtrip_reply(void **state)
{
	struct request req;
	struct proto_error err;
	json_t *id, *r;
	char *line;
	size_t len;

	(void)state;
	/* an error reply encodes to a line a client parses back */
	assert_int_equal(parse("{\"v\":1,\"id\":[],\"op\":\"x\"}", &req, &id, &err), -EINVAL);
	r = proto_reply_error(id, err.code, err.message);
	line = proto_encode(r, &len);
	assert_non_null(line);
	json_decref(r);
	r = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	assert_non_null(r);
	assert_true(json_is_null(json_object_get(r, "id")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "error"),
	    "code")), "bad_request");
	json_decref(r);
	free(line);
}

/* --- names */

static void
test_prio_names(void **state)
{
	int p;

	(void)state;
	assert_string_equal(proto_prio_name(PRIO_HIGH), "high");
	assert_string_equal(proto_prio_name(PRIO_NORMAL), "normal");
	assert_string_equal(proto_prio_name(PRIO_LOW), "low");
	for (p = 0; p < PRIO__COUNT; p++)
		assert_int_equal(proto_prio_parse(proto_prio_name((enum task_prio)p)), p);
	assert_int_equal(proto_prio_parse(""), -EINVAL);
	assert_int_equal(proto_prio_parse("High"), -EINVAL);
	assert_int_equal(proto_prio_parse("unknown"), -EINVAL);
	assert_string_equal(proto_prio_name(PRIO__COUNT), "unknown");
}

static void
test_state_names(void **state_)
{
	static const char *const names[] = {
		"queued", "running", "completed", "failed", "cancelled",
	};
	int s;

	(void)state_;
	for (s = 0; s < TASK__STATE_COUNT; s++) {
		assert_string_equal(proto_state_name((enum task_state)s), names[s]);
		assert_int_equal(proto_state_parse(names[s]), s);
	}
	assert_int_equal(proto_state_parse("canceled"), -EINVAL);
	assert_int_equal(proto_state_parse(""), -EINVAL);
	assert_int_equal(proto_state_parse("unknown"), -EINVAL);
	assert_string_equal(proto_state_name(TASK__STATE_COUNT), "unknown");
}

static void
test_state_terminal(void **state)
{
	(void)state;
	assert_false(proto_state_terminal(TASK_QUEUED));
	assert_false(proto_state_terminal(TASK_RUNNING));
	assert_true(proto_state_terminal(TASK_COMPLETED));
	assert_true(proto_state_terminal(TASK_FAILED));
	assert_true(proto_state_terminal(TASK_CANCELLED));
	assert_false(proto_state_terminal(TASK__STATE_COUNT));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_every_op),
		cmocka_unit_test(test_request_op_names),
		cmocka_unit_test(test_request_args_kept),
		cmocka_unit_test(test_request_len_bounds_input),
		cmocka_unit_test(test_request_bad_json),
		cmocka_unit_test(test_request_bad_json_no_id),
		cmocka_unit_test(test_request_bad_json_message_utf8),
		cmocka_unit_test(test_request_not_object),
		cmocka_unit_test(test_request_version),
		cmocka_unit_test(test_request_op),
		cmocka_unit_test(test_request_long_op_utf8),
		cmocka_unit_test(test_request_id_echo),
		cmocka_unit_test(test_request_id_outlives_line),
		cmocka_unit_test(test_request_id_not_scalar),
		cmocka_unit_test(test_request_ret_id_optional),
		cmocka_unit_test(test_task_minimal),
		cmocka_unit_test(test_task_full),
		cmocka_unit_test(test_task_not_object),
		cmocka_unit_test(test_task_id),
		cmocka_unit_test(test_task_id_valid),
		cmocka_unit_test(test_task_workflow),
		cmocka_unit_test(test_task_priority),
		cmocka_unit_test(test_task_timeout),
		cmocka_unit_test(test_task_timeout_uses_max),
		cmocka_unit_test(test_task_payload),
		cmocka_unit_test(test_get_string),
		cmocka_unit_test(test_get_int),
		cmocka_unit_test(test_get_bool),
		cmocka_unit_test(test_get_array),
		cmocka_unit_test(test_error_set),
		cmocka_unit_test(test_reply_ok),
		cmocka_unit_test(test_reply_error),
		cmocka_unit_test(test_reply_error_supported),
		cmocka_unit_test(test_reply_error_bad_utf8),
		cmocka_unit_test(test_event_result),
		cmocka_unit_test(test_encode_one_line),
		cmocka_unit_test(test_encode_roundtrip_reply),
		cmocka_unit_test(test_prio_names),
		cmocka_unit_test(test_state_names),
		cmocka_unit_test(test_state_terminal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

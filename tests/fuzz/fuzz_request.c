/*
 * fuzz_request.c -- fuzz target for the control protocol parser.
 *
 * Drives kgymd/protocol.c the way control.c and ops.c do with one request
 * line: parse it, build the error reply when it is refused, and for a
 * submit check every task and build the accepted/rejected reply and the
 * result events.  Besides memory errors (ASan/UBSan under libFuzzer), it
 * aborts when an invariant the daemon relies on breaks: an error carries a
 * known code and a message that survives into the reply, a checked task
 * has the shape proto_parse_task promises, and every reply encodes to one
 * compact line that parses back to the same value.  Everything allocated
 * here is freed here, so LeakSanitizer finds leaks in protocol.c.
 *
 * Built two ways: with clang -fsanitize=fuzzer by run-fuzz.sh, and with
 * the ordinary compiler together with replay_main.c (make check), which
 * replays the seed corpus and simple mutations of it.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"

#define FUZZ_MAX_TIMEOUT	86400.0

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_request: invariant broken: %s%s%s\n", what,
	    detail != NULL ? ": " : "", detail != NULL ? detail : "");
	abort();
}

static bool
fuzz_code_known(const char *code)
{
	static const char *const codes[] = {
		"bad_json", "bad_request", "unsupported_version", "unknown_op",
	};
	size_t i;

	if (code == NULL)
		return false;
	for (i = 0; i < sizeof codes / sizeof codes[0]; i++)
		if (strcmp(code, codes[i]) == 0)
			return true;
	return false;
}

/* The reply must encode to exactly one line that reads back the same. */
static void
fuzz_check_encode(const json_t *reply)
{
	json_t *back;
	char *line;
	size_t len = 0;

	if (reply == NULL)
		fuzz_fail("reply is NULL", NULL);
	if ((line = proto_encode(reply, &len)) == NULL)
		fuzz_fail("proto_encode failed", NULL);
	if (len == 0 || len != strlen(line) || line[len - 1] != '\n')
		fuzz_fail("encoded reply is not one '\\n'-terminated line", line);
	if (memchr(line, '\n', len - 1) != NULL)
		fuzz_fail("encoded reply holds a newline", line);
	back = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (back == NULL || !json_equal(back, reply))
		fuzz_fail("encoded reply does not read back", line);
	json_decref(back);
	free(line);
}

static void
fuzz_check_error_reply(json_t *id, const struct proto_error *err)
{
	json_t *reply, *e;
	const char *code, *msg;

	reply = proto_reply_error(id, err->code, err->message);
	if (reply == NULL)
		fuzz_fail("proto_reply_error returned NULL", NULL);
	e = json_object_get(reply, "error");
	code = json_string_value(json_object_get(e, "code"));
	msg = json_string_value(json_object_get(e, "message"));
	if (code == NULL || strcmp(code, err->code) != 0)
		fuzz_fail("error reply lost its code", err->code);
	if (msg == NULL)
		fuzz_fail("error reply lost its message", err->message);
	if (!json_is_false(json_object_get(reply, "ok")))
		fuzz_fail("error reply is not ok:false", NULL);
	if (id != NULL && !json_equal(json_object_get(reply, "id"), id))
		fuzz_fail("error reply does not echo the id", NULL);
	fuzz_check_encode(reply);
	json_decref(reply);
}

/* A spec that proto_parse_task accepted. */
static void
fuzz_check_spec(const struct task_spec *spec)
{
	if (spec->id != NULL && !proto_task_id_valid(spec->id))
		fuzz_fail("accepted an invalid task_id", spec->id);
	if (spec->workflow == NULL || spec->workflow[0] == '\0' ||
	    strlen(spec->workflow) > KGYM_NAME_MAX)
		fuzz_fail("accepted a bad workflow", spec->workflow);
	if ((unsigned)spec->prio >= PRIO__COUNT)
		fuzz_fail("priority out of range", NULL);
	if (!(spec->timeout_s >= 0) || spec->timeout_s > FUZZ_MAX_TIMEOUT)
		fuzz_fail("timeout_s out of range", NULL);
	if (!json_is_object(spec->payload))
		fuzz_fail("payload is not an object", NULL);
}

/* One task of a submit: adds to accepted or rejected as ops.c would. */
static void
fuzz_submit_task(json_t *task, size_t index, json_t *accepted, json_t *rejected,
    json_t *events)
{
	struct task_spec spec;
	struct proto_error err = { 0 };
	const char *id;
	json_t *result, *event, *rej;

	if (proto_parse_task(task, FUZZ_MAX_TIMEOUT, &spec, &err) < 0) {
		if (err.code == NULL || strcmp(err.code, "bad_request") != 0)
			fuzz_fail("task refused without bad_request", err.code);
		/* json_pack refuses a message that is not valid UTF-8 */
		rej = json_pack("{s:I, s:{s:s, s:s}}", "index", (json_int_t)index, "error",
		    "code", err.code, "message", err.message);
		if (rej == NULL)
			fuzz_fail("rejection message does not build", err.message);
		json_array_append_new(rejected, rej);
		return;
	}
	fuzz_check_spec(&spec);
	id = spec.id != NULL ? spec.id : "generated-id";
	json_array_append_new(accepted, json_pack("{s:I, s:s, s:s, s:b}", "index",
	    (json_int_t)index, "task_id", id, "state",
	    proto_state_name(TASK_QUEUED), "existing", 0));
	result = json_pack("{s:s, s:s, s:s, s:O}", "task_id", id, "status", "completed",
	    "workflow", spec.workflow, "payload", spec.payload);
	if (result == NULL)
		fuzz_fail("result object does not build", spec.workflow);
	event = proto_event_result(NULL, id, TASK_COMPLETED, result);
	json_array_append_new(events, event);
	json_decref(result);
}

static void
fuzz_submit(struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	json_t *tasks = NULL, *accepted, *rejected, *events, *task, *v, *ev;
	bool wait = false;
	size_t i;

	accepted = json_array();
	rejected = json_array();
	events = json_array();
	if (proto_get_bool(req->root, "wait", false, &wait, &err) < 0)
		fuzz_check_error_reply(req->id, &err);
	if ((task = json_object_get(req->root, "task")) != NULL)
		fuzz_submit_task(task, 0, accepted, rejected, events);
	if (proto_get_array(req->root, "tasks", false, &tasks, &err) < 0)
		fuzz_check_error_reply(req->id, &err);
	else if (tasks != NULL) {
		json_array_foreach(tasks, i, v)
			fuzz_submit_task(v, i, accepted, rejected, events);
	}
	if (json_array_size(accepted) + json_array_size(rejected) !=
	    (task != NULL) + json_array_size(tasks))
		fuzz_fail("a task was neither accepted nor rejected", NULL);
	if (wait)
		json_object_set_new(reply, "wait", json_true());
	json_object_set_new(reply, "accepted", accepted);
	json_object_set_new(reply, "rejected", rejected);
	json_array_foreach(events, i, ev)
		fuzz_check_encode(ev);
	json_decref(events);
}

/* The argument checks of the other ops; a refusal must make a good reply. */
static void
fuzz_args(struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	const char *s = NULL;
	int64_t n = -1;
	json_t *a = NULL, *v;
	size_t i;
	int st;

	if (proto_get_string(req->root, "task_id", false, &s, &err) < 0)
		fuzz_check_error_reply(req->id, &err);
	else if (s != NULL)
		json_object_set_new(reply, "task_id_valid", json_boolean(proto_task_id_valid(s)));
	s = NULL;
	if (proto_get_string(req->root, "state", false, &s, &err) < 0)
		fuzz_check_error_reply(req->id, &err);
	else if (s != NULL && (st = proto_state_parse(s)) >= 0 &&
	    strcmp(proto_state_name((enum task_state)st), s) != 0)
		fuzz_fail("state name does not round-trip", s);
	if (proto_get_int(req->root, "limit", false, 1, 10000, &n, &err) < 0)
		fuzz_check_error_reply(req->id, &err);
	else if (n != -1 && (n < 1 || n > 10000))
		fuzz_fail("limit out of range", NULL);
	n = -1;
	if (proto_get_int(req->root, "timeout_ms", false, 0, INT64_MAX, &n, &err) < 0)
		fuzz_check_error_reply(req->id, &err);
	else if (n < -1)
		fuzz_fail("timeout_ms out of range", NULL);
	if (proto_get_array(req->root, "task_ids", false, &a, &err) < 0)
		fuzz_check_error_reply(req->id, &err);
	else if (a != NULL) {
		json_array_foreach(a, i, v)
			if (json_is_string(v))
				(void)proto_task_id_valid(json_string_value(v));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct request req = { 0 };
	struct proto_error err = { 0 };
	json_t *id = NULL, *reply;

	if (proto_parse_request((const char *)data, size, &req, &id, &err) < 0) {
		if (req.root != NULL)
			fuzz_fail("failed parse left a request", NULL);
		if (!fuzz_code_known(err.code))
			fuzz_fail("unknown error code", err.code);
		if (err.message[0] == '\0')
			fuzz_fail("error without a message", err.code);
		fuzz_check_error_reply(id, &err);
		json_decref(id);
		return 0;
	}
	json_decref(id);
	if ((unsigned)req.op >= OP__COUNT || strcmp(proto_op_name(req.op), "unknown") == 0)
		fuzz_fail("op out of range", NULL);
	if (!json_is_object(req.root))
		fuzz_fail("request root is not an object", NULL);
	reply = proto_reply_ok(req.id);
	if (req.op == OP_SUBMIT)
		fuzz_submit(&req, reply);
	else
		fuzz_args(&req, reply);
	fuzz_check_encode(reply);
	json_decref(reply);
	proto_request_clear(&req);
	return 0;
}

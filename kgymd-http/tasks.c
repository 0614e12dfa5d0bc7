/*
 * tasks.c -- the endpoints about one task: GET /status/{id},
 * GET /results/{id}, GET /workflow/results/{id} and DELETE /tasks/{id}.
 *
 * Each is kgymd's status (then, for an ended task, its result) or cancel,
 * asked on behalf of the request's token, so a task of another token is
 * not found, exactly as one that does not exist (kgymd decides).  Unlike
 * KernelGYM's, /status carries the task's error_message.
 */
#include "config.h"

#include <string.h>

#include "gateway.h"

struct task_state {
	json_t *status; /* kgymd's status reply */
	bool workflow_form;
};

static json_t *
tasks_time(const json_t *status, const char *key)
{
	const json_t *v = json_object_get(status, key);

	return json_is_integer(v) ? shape_time(json_integer_value(v)) : json_null();
}

static bool
tasks_terminal(const char *state)
{
	return state != NULL &&
	    (strcmp(state, "completed") == 0 || strcmp(state, "failed") == 0 ||
		strcmp(state, "cancelled") == 0);
}

/* KernelGYM's TaskStatusResponse, with error_message and kgymd's timestamps. */
static json_t *
tasks_status_body(const json_t *s)
{
	return json_pack(
	    "{s:O?, s:s, s:O?, s:O?, s:n, s:n, s:n, s:n, s:o, s:o, s:o, s:O?, s:O?, s:O?}",
	    "task_id", json_object_get(s, "task_id"), "status",
	    shape_status(json_string_value(json_object_get(s, "state"))),
	    "error_message", json_object_get(s, "error_message"), "error_code",
	    json_object_get(s, "error_code"), "queue_position", "progress",
	    "estimated_completion", "assigned_device", "submitted_at",
	    tasks_time(s, "created_ms"), "started_at", tasks_time(s, "started_ms"),
	    "completed_at", tasks_time(s, "finished_ms"), "attempt",
	    json_object_get(s, "attempt"), "workflow", json_object_get(s, "workflow"),
	    "priority", json_object_get(s, "priority"));
}

static void
tasks_status_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	json_t *out;

	if (msg == NULL)
		return gw_reply_unavailable(r);
	if (!json_is_true(json_object_get(msg, "ok")))
		return gw_reply_kgymd_error(r, msg, gw_req_arg(r), NULL);
	out = tasks_status_body(msg);
	gw_reply_json(r, 200, out);
	json_decref(out);
}

void
tasks_status(struct gw_req *r)
{
	if (gw_call(r,
		json_pack("{s:s, s:s}", "op", "status", "task_id", gw_req_arg(r)),
		tasks_status_cb) < 0)
		gw_reply_unavailable(r);
}

static void
tasks_result_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	struct task_state *st = gw_req_state(r, sizeof *st);
	const json_t *s = st->status;
	const json_t *created = json_object_get(s, "created_ms");
	const json_t *finished = json_object_get(s, "finished_ms");
	const char *state;
	json_t *out;

	if (msg == NULL)
		goto unavailable;
	if (!json_is_true(json_object_get(msg, "ok"))) {
		gw_reply_kgymd_error(r, msg, gw_req_arg(r), NULL);
		goto done;
	}
	state = json_string_value(json_object_get(msg, "state"));
	if (st->workflow_form) {
		out = json_pack("{s:s, s:s, s:O?, s:O?, s:O?, s:o, s:o}", "task_id",
		    gw_req_arg(r), "status", shape_status(state), "result",
		    json_object_get(msg, "result"), "error_message",
		    json_object_get(json_object_get(msg, "result"), "error_message"),
		    "error_code",
		    json_object_get(json_object_get(msg, "result"), "error_code"),
		    "submitted_at", tasks_time(s, "created_ms"), "completed_at",
		    tasks_time(s, "finished_ms"));
	} else {
		out = shape_evaluation(gw_req_arg(r), state,
		    json_object_get(msg, "result"), json_integer_value(created),
		    json_integer_value(finished));
	}
	gw_reply_json(r, 200, out);
	json_decref(out);
	goto done;
unavailable:
	gw_reply_unavailable(r);
done:
	json_decref(st->status);
	st->status = NULL;
}

static void
tasks_results_status_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	struct task_state *st = gw_req_state(r, sizeof *st);
	const char *state;
	json_t *out;

	if (msg == NULL)
		return gw_reply_unavailable(r);
	if (!json_is_true(json_object_get(msg, "ok")))
		return gw_reply_kgymd_error(r, msg, gw_req_arg(r), NULL);
	state = json_string_value(json_object_get(msg, "state"));
	if (!tasks_terminal(state)) {
		/* Not ended: its status, no result fields. */
		out = json_pack("{s:s, s:s, s:o}", "task_id", gw_req_arg(r), "status",
		    shape_status(state), "submitted_at", tasks_time(msg, "created_ms"));
		/* A WorkflowResponse has its fields, null until the end. */
		if (st->workflow_form) {
			json_object_set_new(out, "result", json_null());
			json_object_set_new(out, "error_message", json_null());
			json_object_set_new(out, "error_code", json_null());
			json_object_set_new(out, "completed_at", json_null());
		}
		gw_reply_json(r, 200, out);
		json_decref(out);
		return;
	}
	st->status = json_deep_copy(msg);
	if (gw_call(r,
		json_pack("{s:s, s:s}", "op", "result", "task_id", gw_req_arg(r)),
		tasks_result_cb) < 0) {
		json_decref(st->status);
		st->status = NULL;
		gw_reply_unavailable(r);
	}
}

static void
tasks_results_common(struct gw_req *r, bool workflow_form)
{
	struct task_state *st = gw_req_state(r, sizeof *st);

	if (st == NULL)
		return gw_reply_unavailable(r);
	st->workflow_form = workflow_form;
	if (gw_call(r,
		json_pack("{s:s, s:s}", "op", "status", "task_id", gw_req_arg(r)),
		tasks_results_status_cb) < 0)
		gw_reply_unavailable(r);
}

void
tasks_results(struct gw_req *r)
{
	tasks_results_common(r, false);
}

void
tasks_workflow_results(struct gw_req *r)
{
	tasks_results_common(r, true);
}

static void
tasks_cancel_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	json_t *out;

	if (msg == NULL)
		return gw_reply_unavailable(r);
	if (!json_is_true(json_object_get(msg, "ok")))
		return gw_reply_kgymd_error(r, msg, gw_req_arg(r), NULL);
	out = json_pack("{s:s, s:s, s:O?}", "task_id", gw_req_arg(r), "status",
	    shape_status(json_string_value(json_object_get(msg, "state"))), "cancelled",
	    json_object_get(msg, "cancelled"));
	gw_reply_json(r, 200, out);
	json_decref(out);
}

void
tasks_cancel(struct gw_req *r)
{
	if (gw_call(r,
		json_pack("{s:s, s:s}", "op", "cancel", "task_id", gw_req_arg(r)),
		tasks_cancel_cb) < 0)
		gw_reply_unavailable(r);
}

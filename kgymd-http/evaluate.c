/*
 * evaluate.c -- the endpoints that submit: POST /evaluate (synchronous),
 * POST /evaluate/batch (concurrent) and POST /workflow/submit.
 *
 * A synchronous evaluation is a task in a kgymd "submit" with "wait":true
 * (coalesce.c gathers those of one loop turn into one submit): the reply
 * says whether the task was accepted (or that its task_id already existed,
 * so the request attaches to that task and never re-runs it), and the
 * result event, when the task ends, becomes the HTTP response.  A batch is
 * one submit of all its tasks, which kgymd runs concurrently.
 * When kgymd goes away before the end the client gets a 503; retrying with
 * the same task_id attaches to the task, which kgymd kept.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "gateway.h"

#define BATCH_MAX 100

struct batch_state {
	json_t *ids;	 /* task_id per index */
	json_t *results; /* EvaluationResponse per index, null until it ends */
	size_t remaining;
	int64_t submitted_ms;
};

/*
 * The first rejection of a submit reply, answered as kgymd's error; `ids`
 * the batch's task_id per index, NULL for a /workflow/submit's one task.
 */
static bool
evaluate_rejected(struct gw_req *r, const json_t *msg, const json_t *ids)
{
	const json_t *rej = json_array_get(json_object_get(msg, "rejected"), 0);
	json_int_t index;
	const char *task_id;
	char prefix[32];
	json_t *wrapped;

	if (rej == NULL)
		return false;
	index = json_integer_value(json_object_get(rej, "index"));
	snprintf(prefix, sizeof prefix, "tasks[%lld].", (long long)index);
	/* kgymd's rejection names the task by index only: name its id too. */
	task_id = ids != NULL ?
	    json_string_value(json_array_get(ids, (size_t)index)) :
	    json_string_value(json_object_get(gw_req_body(r), "task_id"));
	wrapped = json_pack("{s:O}", "error", json_object_get(rej, "error"));
	if (ids != NULL)
		gw_reply_kgymd_error(r, wrapped, task_id, prefix);
	else
		gw_reply_kgymd_error_in(r, wrapped, task_id, NULL, "payload.");
	json_decref(wrapped);
	return true;
}

void
evaluate_one(struct gw_req *r)
{
	struct shape_error err;
	json_t *body, *task;
	char id[GW_TASK_ID_MAX + 1];

	if ((body = gw_req_body(r)) == NULL)
		return;
	if ((task = shape_task(body, false, "", &err)) == NULL)
		return gw_reply_error(
		    r, 400, "VALIDATION_ERROR", err.field, NULL, "%s", err.message);
	snprintf(
	    id, sizeof id, "%s", json_string_value(json_object_get(task, "task_id")));
	if (coalesce_submit(r, task, id, shape_now_ms()) < 0)
		gw_reply_unavailable(r);
}

static void
batch_state_clear(struct batch_state *st)
{
	json_decref(st->ids);
	json_decref(st->results);
	st->ids = st->results = NULL;
}

static void
batch_reply(struct gw_req *r, struct batch_state *st)
{
	const char *batch_id =
	    json_string_value(json_object_get(gw_req_body(r), "batch_id"));
	size_t i, n = json_array_size(st->results), completed = 0, failed = 0;
	const char *status;
	json_t *out;

	for (i = 0; i < n; i++) {
		status = json_string_value(
		    json_object_get(json_array_get(st->results, i), "status"));
		if (status != NULL && strcmp(status, "completed") == 0)
			completed++;
		else
			failed++;
	}
	out = json_pack("{s:s, s:I, s:I, s:I, s:O, s:s, s:o, s:o}", "batch_id",
	    batch_id, "total_tasks", (json_int_t)n, "completed_tasks",
	    (json_int_t)completed, "failed_tasks", (json_int_t)failed, "results",
	    st->results, "batch_status", "completed", "submitted_at",
	    shape_time(st->submitted_ms), "completed_at", shape_time(shape_now_ms()));
	gw_reply_json(r, 200, out);
	json_decref(out);
}

static void
evaluate_batch_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	struct batch_state *st = gw_req_state(r, sizeof *st);
	const char *id, *state;
	json_t *one;
	size_t i;

	if (msg == NULL) {
		gw_reply_error(r, 503, "SERVICE_UNAVAILABLE", NULL, NULL,
		    "kgymd went away before the batch ended (%s); its tasks are kept: retry with the "
		    "same task_ids to attach to them",
		    up_why_down());
	} else if (json_is_false(json_object_get(msg, "ok"))) {
		gw_reply_kgymd_error(r, msg, NULL, NULL);
	} else if (json_object_get(msg, "accepted") != NULL) {
		evaluate_rejected(r, msg, st->ids);
	} else if (json_is_string(json_object_get(msg, "event"))) {
		id = json_string_value(json_object_get(msg, "task_id"));
		state = json_string_value(json_object_get(msg, "state"));
		/* An id listed twice gets the same result twice. */
		for (i = 0; id != NULL && i < json_array_size(st->ids); i++) {
			if (strcmp(json_string_value(json_array_get(st->ids, i)), id) !=
				0 ||
			    !json_is_null(json_array_get(st->results, i)))
				continue;
			one =
			    shape_evaluation(id, state, json_object_get(msg, "result"),
				st->submitted_ms, shape_now_ms());
			metrics_task(gw_req_age_ms(r));
			json_array_set_new(st->results, i, one);
			st->remaining--;
		}
		if (st->remaining == 0)
			batch_reply(r, st);
	}
	if (last) {
		batch_state_clear(st);
		gw_reply_error(r, 503, "KGYMD_ERROR", NULL, NULL,
		    "kgymd ended the wait before every task of the batch ended; retry");
	}
}

void
evaluate_batch(struct gw_req *r)
{
	struct batch_state *st = gw_req_state(r, sizeof *st);
	struct shape_error err;
	const json_t *batch_id, *tasks;
	json_t *body, *list, *task;
	char prefix[32];
	size_t i, n;
	int rc;

	if (st == NULL)
		return gw_reply_unavailable(r);
	if ((body = gw_req_body(r)) == NULL)
		return;
	batch_id = json_object_get(body, "batch_id");
	tasks = json_object_get(body, "tasks");
	if (!json_is_string(batch_id))
		return gw_reply_error(r, 400, "VALIDATION_ERROR", "batch_id", NULL,
		    "field 'batch_id': %s",
		    batch_id == NULL ? "missing: expected a string" :
				       "expected a string");
	if (!json_is_array(tasks))
		return gw_reply_error(r, 400, "VALIDATION_ERROR", "tasks", NULL,
		    "field 'tasks': %s",
		    tasks == NULL ? "missing: expected an array of tasks" :
				    "expected an array of tasks");
	n = json_array_size(tasks);
	if (n < 1 || n > BATCH_MAX)
		return gw_reply_error(r, 400, "VALIDATION_ERROR", "tasks", NULL,
		    "field 'tasks': a batch holds 1 to %d tasks, this one %zu",
		    BATCH_MAX, n);
	list = json_array();
	st->ids = json_array();
	st->results = json_array();
	for (i = 0; i < n; i++) {
		snprintf(prefix, sizeof prefix, "tasks[%zu].", i);
		if ((task = shape_task(
			 json_array_get(tasks, i), false, prefix, &err)) == NULL) {
			json_decref(list);
			batch_state_clear(st);
			return gw_reply_error(r, 400, "VALIDATION_ERROR", err.field,
			    NULL, "%s", err.message);
		}
		json_array_append(st->ids, json_object_get(task, "task_id"));
		json_array_append_new(st->results, json_null());
		json_array_append_new(list, task);
	}
	st->remaining = n;
	st->submitted_ms = shape_now_ms();
	if ((rc = gw_call(r,
		 json_pack("{s:s, s:o, s:b}", "op", "submit", "tasks", list, "wait", 1),
		 evaluate_batch_cb)) < 0) {
		batch_state_clear(st);
		gw_reply_call_failed(r, rc, NULL);
	}
}

static void
workflow_submit_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	const json_t *acc;
	json_t *out;

	if (msg == NULL)
		return gw_reply_unavailable(r);
	if (json_is_false(json_object_get(msg, "ok")))
		return gw_reply_kgymd_error_in(r, msg, NULL, NULL, "payload.");
	if (evaluate_rejected(r, msg, NULL))
		return;
	acc = json_array_get(json_object_get(msg, "accepted"), 0);
	out = json_pack("{s:O?, s:s, s:n, s:n, s:n, s:o, s:n}", "task_id",
	    json_object_get(acc, "task_id"), "status",
	    shape_status(json_string_value(json_object_get(acc, "state"))), "result",
	    "error_message", "error_code", "submitted_at", shape_time(shape_now_ms()),
	    "completed_at");
	gw_reply_json(r, 200, out);
	json_decref(out);
}

void
workflow_submit(struct gw_req *r)
{
	struct shape_error err;
	json_t *body, *task;
	int rc;

	if ((body = gw_req_body(r)) == NULL)
		return;
	if ((task = shape_task(body, true, "", &err)) == NULL)
		return gw_reply_error(
		    r, 400, "VALIDATION_ERROR", err.field, NULL, "%s", err.message);
	if ((rc = gw_call(r, json_pack("{s:s, s:o}", "op", "submit", "task", task),
		 workflow_submit_cb)) < 0)
		gw_reply_call_failed(r, rc, NULL);
}

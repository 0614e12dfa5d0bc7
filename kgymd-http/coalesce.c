/*
 * coalesce.c -- synchronous /evaluate requests that arrive in the same turn
 * of the event loop go to kgymd as one submit.
 *
 * kgymd accepts a submit of many tasks for about the cost of one (one
 * check pass, one store transaction), so under load the gateway gathers
 * the /evaluate requests of each turn of its loop, per principal (a submit
 * has one "on_behalf_of"), into one {"op":"submit","tasks":[...],"wait":true}
 * of at most COALESCE_MAX tasks, sent once the loop has handled every
 * ready event.  Alone, a request waits for nothing: its turn ends at once.
 * Each task's rejection (by index) and result event (by task_id) is
 * answered to its own request; a task_id that two requests of one batch
 * share gets its result in both.  If kgymd refuses the submit as a whole
 * for its size (max_batch_tasks), or its line would be longer than kgymd
 * reads (max_request_bytes), each task is sent again on its own.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "gateway.h"

#define COALESCE_MAX 64

struct coalesce_batch {
	char as[GW_NAME_MAX + 1]; /* the principal; "" with no_as */
	bool no_as;
	json_t *tasks; /* kgymd tasks, by index */
	struct gw_req *reqs[COALESCE_MAX];
	char *ids[COALESCE_MAX];
	int64_t submitted_ms[COALESCE_MAX];
	bool answered[COALESCE_MAX];
	size_t n;
	struct coalesce_batch *next; /* while gathering */
};

static struct {
	struct event_base *base;
	struct event *flush;
	struct coalesce_batch *gathering;
} co;

static void
coalesce_batch_free(struct coalesce_batch *b)
{
	size_t i;

	for (i = 0; i < b->n; i++) {
		free(b->ids[i]);
		gw_req_release(b->reqs[i]);
	}
	json_decref(b->tasks);
	free(b);
}

static void
coalesce_answer_error(struct coalesce_batch *b, size_t i, const json_t *reply)
{
	if (b->answered[i])
		return;
	b->answered[i] = true;
	gw_reply_kgymd_error(b->reqs[i], reply, b->ids[i], NULL);
}

static void
coalesce_event(struct coalesce_batch *b, const json_t *msg)
{
	const char *id = json_string_value(json_object_get(msg, "task_id"));
	const char *state = json_string_value(json_object_get(msg, "state"));
	json_t *out;
	size_t i;

	for (i = 0; id != NULL && i < b->n; i++) {
		if (b->answered[i] || strcmp(b->ids[i], id) != 0)
			continue;
		b->answered[i] = true;
		out = shape_evaluation(id, state, json_object_get(msg, "result"),
		    b->submitted_ms[i], shape_now_ms());
		metrics_task(gw_req_age_ms(b->reqs[i]));
		gw_reply_json(b->reqs[i], 200, out);
		json_decref(out);
	}
}

static void coalesce_send(struct coalesce_batch *b);

/* kgymd refused the submit for its size: each task on its own. */
static void
coalesce_split(struct coalesce_batch *b)
{
	struct coalesce_batch *one;
	size_t i;

	for (i = 0; i < b->n; i++) {
		if (b->answered[i] || (one = calloc(1, sizeof *one)) == NULL)
			continue;
		memcpy(one->as, b->as, sizeof one->as);
		one->no_as = b->no_as;
		one->tasks = json_array();
		json_array_append(one->tasks, json_array_get(b->tasks, i));
		one->reqs[0] = b->reqs[i];
		gw_req_hold(b->reqs[i]);
		one->ids[0] = strdup(b->ids[i]);
		one->submitted_ms[0] = b->submitted_ms[i];
		one->n = 1;
		b->answered[i] = true;
		coalesce_send(one);
	}
}

static void
coalesce_cb(const json_t *msg, bool last, void *arg)
{
	struct coalesce_batch *b = arg;
	const json_t *rej, *code;
	json_t *wrapped;
	size_t i, index;

	if (msg == NULL) {
		for (i = 0; i < b->n; i++)
			if (!b->answered[i])
				gw_reply_error(b->reqs[i], 503, "SERVICE_UNAVAILABLE",
				    NULL, b->ids[i],
				    "kgymd went away before task '%s' ended (%s); it is kept if it was "
				    "accepted: retry with the same task_id to attach to it",
				    b->ids[i], up_why_down());
	} else if (json_is_false(json_object_get(msg, "ok"))) {
		code = json_object_get(json_object_get(msg, "error"), "code");
		if (b->n > 1 && json_is_string(code) &&
		    strcmp(json_string_value(code), "bad_request") == 0)
			coalesce_split(b);
		else
			for (i = 0; i < b->n; i++)
				coalesce_answer_error(b, i, msg);
	} else if (json_object_get(msg, "accepted") != NULL) {
		json_array_foreach(json_object_get(msg, "rejected"), i, rej) {
			index =
			    (size_t)json_integer_value(json_object_get(rej, "index"));
			if (index >= b->n)
				continue;
			wrapped =
			    json_pack("{s:O}", "error", json_object_get(rej, "error"));
			coalesce_answer_error(b, index, wrapped);
			json_decref(wrapped);
		}
	} else if (json_is_string(json_object_get(msg, "event"))) {
		coalesce_event(b, msg);
	}
	if (!last)
		return;
	for (i = 0; i < b->n; i++)
		if (!b->answered[i])
			gw_reply_error(b->reqs[i], 503, "KGYMD_ERROR", NULL, b->ids[i],
			    "kgymd ended the wait without a result for task '%s'; retry",
			    b->ids[i]);
	coalesce_batch_free(b);
}

static void
coalesce_send(struct coalesce_batch *b)
{
	json_t *req =
	    json_pack("{s:s, s:O, s:b}", "op", "submit", "tasks", b->tasks, "wait", 1);
	size_t i;
	int rc;

	rc = up_call(req, b->no_as ? NULL : b->as, coalesce_cb, b);
	if (rc == 0)
		return;
	/* Too long a line for kgymd together: each task alone may fit. */
	if (rc == -EMSGSIZE && b->n > 1)
		coalesce_split(b);
	for (i = 0; i < b->n; i++)
		if (!b->answered[i])
			gw_reply_call_failed(b->reqs[i], rc, b->ids[i]);
	coalesce_batch_free(b);
}

static void
coalesce_flush(evutil_socket_t fd, short what, void *arg)
{
	struct coalesce_batch *b;

	while ((b = co.gathering) != NULL) {
		co.gathering = b->next;
		b->next = NULL;
		coalesce_send(b);
	}
}

int
coalesce_init(struct event_base *base)
{
	co.base = base;
	co.flush = event_new(base, -1, 0, coalesce_flush, NULL);
	return co.flush != NULL ? 0 : -ENOMEM;
}

void
coalesce_free(void)
{
	struct coalesce_batch *b;

	while ((b = co.gathering) != NULL) {
		co.gathering = b->next;
		coalesce_batch_free(b);
	}
	if (co.flush != NULL)
		event_free(co.flush);
	co.flush = NULL;
}

int
coalesce_submit(
    struct gw_req *r, json_t *task, const char *task_id, int64_t submitted_ms)
{
	const char *as = gw_req_as(r);
	struct coalesce_batch *b, **pp;
	static const struct timeval now = { 0, 0 };

	for (pp = &co.gathering; (b = *pp) != NULL; pp = &b->next)
		if ((as == NULL) == b->no_as && (as == NULL || strcmp(as, b->as) == 0))
			break;
	if (b == NULL) {
		if ((b = calloc(1, sizeof *b)) == NULL) {
			json_decref(task);
			return -ENOMEM;
		}
		b->no_as = as == NULL;
		if (as != NULL)
			snprintf(b->as, sizeof b->as, "%s", as);
		b->tasks = json_array();
		*pp = b;
	}
	if ((b->ids[b->n] = strdup(task_id)) == NULL) {
		json_decref(task);
		return -ENOMEM;
	}
	json_array_append_new(b->tasks, task);
	b->reqs[b->n] = r;
	b->submitted_ms[b->n] = submitted_ms;
	b->n++;
	gw_req_hold(r);
	if (b->n == COALESCE_MAX) {
		*pp = b->next;
		b->next = NULL;
		coalesce_send(b);
		return 0;
	}
	/* After the ready events of this turn: every /evaluate they bring. */
	if (!evtimer_pending(co.flush, NULL))
		evtimer_add(co.flush, &now);
	return 0;
}

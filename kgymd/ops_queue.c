/*
 * ops_queue.c -- the op handlers' answers that come later, from a shared
 * queue (queue_redis.c): status, result, cancel of a task that is not live
 * here, list, and the nodes of workers and stats.  The single-node
 * backend answers the same callbacks at once.
 *
 * A request answered later keeps its peer's pointer until the
 * peer goes (ops_peer_gone), and then answers nobody.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static TAILQ_HEAD(, ops_later) ops_laters = TAILQ_HEAD_INITIALIZER(ops_laters);

struct ops_later *
ops_later_new(struct peer *peer, struct request *req, json_t *reply, const char *id)
{
	struct ops_later *l;

	if ((l = calloc(1, sizeof *l)) == NULL)
		return NULL;
	l->peer = peer;
	l->who = req->who;
	l->req_id = req->id != NULL ? json_incref(req->id) : NULL;
	l->reply = json_incref(reply);
	if (id != NULL)
		snprintf(l->id, sizeof l->id, "%s", id);
	TAILQ_INSERT_TAIL(&ops_laters, l, entry);
	return l;
}

void
ops_later_free(struct ops_later *l)
{
	TAILQ_REMOVE(&ops_laters, l, entry);
	json_decref(l->req_id);
	json_decref(l->reply);
	store_row_free(l->local);
	free(l->page);
	free(l);
}

void
ops_later_error(struct ops_later *l, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ops_verror(l->peer, l->req_id, code, fmt, ap);
	va_end(ap);
}

void
ops_peer_gone(struct peer *peer)
{
	struct ops_later *l;

	TAILQ_FOREACH(l, &ops_laters, entry)
		if (l->peer == peer)
			l->peer = NULL;
}

/* ----------------------------------------------- answers from a shared queue */

#define OPS_UNAVAILABLE	"the cluster queue (Redis) is unavailable"

/*
 * With a shared queue, a task not live here is asked of the queue, which
 * holds the result that stands (this node's copy may be of a run whose
 * result lost); this node's copy answers only when the queue cannot.
 */
bool
ops_ask_queue(struct peer *peer, struct request *req, json_t *reply, const char *id,
    bool with_result, queue_lookup_cb *cb)
{
	struct store_row *row = NULL;
	struct ops_later *l;
	struct task *live;

	/*
	 * A task live here answers for itself -- unless it has ended and its
	 * end is still being committed: then its result here may be one that
	 * loses (a run stopped because the task ended on another node), and
	 * the queue holds the one that stands.
	 */
	live = task_index_find(id);
	if (queue->lookup == NULL || (live != NULL && !live->finished))
		return false;
	if ((l = ops_later_new(peer, req, reply, id)) == NULL)
		return false;
	if (queue->get(id, &row) == 0)
		l->local = row;
	queue->lookup(id, with_result, cb, l);
	return true;
}

/* The row to answer from, or NULL when the error reply has gone out. */
static const struct store_row *
ops_later_row(struct ops_later *l, int error, const struct store_row *row)
{
	if (error < 0 && l->local != NULL) {
		row = l->local;
		error = 0;
	}
	if (error == -ENOENT || (error == 0 && !ops_may_see(&l->who, row->owner))) {
		ops_later_error(l, "not_found", "no task with task_id '%.128s'", l->id);
		return NULL;
	}
	if (error < 0) {
		ops_later_error(l, "unavailable", OPS_UNAVAILABLE " and this node has no copy "
		    "of task '%.128s'", l->id);
		return NULL;
	}
	return row;
}

void
ops_status_looked_up(int error, const struct store_row *row, void *arg)
{
	struct ops_later *l = arg;

	if (l->peer != NULL && (row = ops_later_row(l, error, row)) != NULL) {
		ops_row_fields(l->reply, row);
		peer_send(l->peer, l->reply);
	}
	ops_later_free(l);
}

void
ops_result_looked_up(int error, const struct store_row *row, void *arg)
{
	struct ops_later *l = arg;
	json_t *result;

	if (l->peer == NULL || (row = ops_later_row(l, error, row)) == NULL) {
		ops_later_free(l);
		return;
	}
	if (!proto_state_terminal(row->state) || row->result == NULL) {
		ops_later_error(l, "not_ready", "task '%s' is %s; its result is not ready",
		    l->id, proto_state_name(row->state));
	} else {
		result = json_loads(row->result, 0, NULL);
		json_object_set_new(l->reply, "task_id", json_string(l->id));
		json_object_set_new(l->reply, "state", json_string(proto_state_name(row->state)));
		json_object_set_new(l->reply, "result", result != NULL ? result : json_null());
		peer_send(l->peer, l->reply);
	}
	ops_later_free(l);
}

static void
ops_cancel_reply(struct ops_later *l, enum task_state state, bool cancelled)
{
	json_object_set_new(l->reply, "task_id", json_string(l->id));
	json_object_set_new(l->reply, "state", json_string(proto_state_name(state)));
	json_object_set_new(l->reply, "cancelled", json_boolean(cancelled));
	peer_send(l->peer, l->reply);
}

static void
ops_cancel_done(int error, const struct store_row *row, void *arg)
{
	struct ops_later *l = arg;

	if (l->peer == NULL)
		;
	else if (error == 0 || (error == -EALREADY && row != NULL))
		ops_cancel_reply(l, row->state, error == 0);
	else if (error == -ENOENT)
		ops_later_error(l, "not_found", "no task with task_id '%.128s'", l->id);
	else
		ops_later_error(l, "unavailable", OPS_UNAVAILABLE "; the task was not cancelled");
	ops_later_free(l);
}

/* Who may cancel it is known: now cancel it in the queue, if it has not ended. */
void
ops_cancel_looked_up(int error, const struct store_row *row, void *arg)
{
	struct ops_later *l = arg;

	if (l->peer == NULL) {
		ops_later_free(l);
		return;
	}
	if (error == -ENOENT || (error == 0 && !ops_may_see(&l->who, row->owner)))
		ops_later_error(l, "not_found", "no task with task_id '%.128s'", l->id);
	else if (error < 0)
		ops_later_error(l, "unavailable", OPS_UNAVAILABLE "; the task was not cancelled");
	else if (proto_state_terminal(row->state))
		ops_cancel_reply(l, row->state, false);
	else {
		queue->cancel(l->id, ops_cancel_done, l);
		return;
	}
	ops_later_free(l);
}


int
ops_list_row(const struct store_row *row, void *arg)
{
	struct ops_later *l = arg;
	json_t *o = json_object();

	ops_row_fields(o, row);
	json_object_del(o, "error_message");
	json_array_append_new(l->page->tasks, o);
	l->page->last_seq = row->seq;
	return 0;
}

void
ops_list_done(int error, void *arg)
{
	struct ops_later *l = arg;
	struct ops_list_page *page = l->page;

	if (l->peer == NULL) {
		;
	} else if (error < 0) {
		ops_later_error(l, error == -EAGAIN ? "unavailable" : "internal", "%s",
		    error == -EAGAIN ? OPS_UNAVAILABLE : "the task store failed to list tasks");
	} else {
		json_object_set_new(l->reply, "next", json_array_size(page->tasks) ==
		    (size_t)page->limit ? json_integer(page->last_seq) : json_null());
		json_object_set(l->reply, "tasks", page->tasks);
		peer_send(l->peer, l->reply);
	}
	json_decref(page->tasks);
	ops_later_free(l);
}

/* workers and stats with a shared queue: every node's heartbeat too. */
static void
ops_nodes_done(json_t *nodes, void *arg)
{
	struct ops_later *l = arg;

	if (l->peer != NULL) {
		json_object_set_new(l->reply, "node", json_string(queue_node));
		json_object_set(l->reply, "nodes", nodes != NULL ? nodes : json_null());
		if (nodes == NULL)
			json_object_set_new(l->reply, "nodes_error", json_string(OPS_UNAVAILABLE));
		peer_send(l->peer, l->reply);
	}
	ops_later_free(l);
}

void
ops_send_with_nodes(struct peer *peer, struct request *req, json_t *reply)
{
	struct ops_later *l;

	if (queue->nodes == NULL || (l = ops_later_new(peer, req, reply, NULL)) == NULL) {
		peer_send(peer, reply);
		return;
	}
	queue->nodes(ops_nodes_done, l);
}


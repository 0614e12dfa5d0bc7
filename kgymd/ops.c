/*
 * ops.c -- one handler per protocol op, and who may call it.
 *
 * control.c hands every well-formed request here.  The table below says
 * which handler answers an op and whether it needs an admin peer; each
 * handler checks its own arguments (through protocol.c's typed getters, so
 * every error names the field), does the work through the scheduler, the
 * store, the waiters or the plugin list, and sends exactly one reply (plus
 * event lines for the waiting ops).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kgymd.h"

#define OPS_LIST_DEFAULT	100
#define OPS_LIST_MAX		1000	/* a page; more with `before` */
#define OPS_WAIT_MAX_IDS	100000
/* A submit is stored in slices of about this long (microseconds). */
#define OPS_SLICE_US		100

struct ops_entry {
	void (*handler)(struct conn *, struct request *, json_t *reply);
	bool admin;
};

static void
ops_error(struct conn *conn, struct request *req, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
ops_error(struct conn *conn, struct request *req, const char *code, const char *fmt, ...)
{
	char message[768];
	json_t *reply;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	reply = proto_reply_error(req->id, code, message);
	control_send(conn, reply);
	json_decref(reply);
}

static void
ops_bad(struct conn *conn, struct request *req, const struct proto_error *err)
{
	ops_error(conn, req, err->code, "%s", err->message);
}

static json_t *
ops_plugin_names(void)
{
	const struct plugin_list *list = plugin_loaded();
	const struct plugin *pl;
	json_t *names = json_array();

	TAILQ_FOREACH(pl, list, entry)
		json_array_append_new(names, json_string(pl->p->name));
	return names;
}

static void
ops_hello(struct conn *conn, struct request *req, json_t *reply)
{
	json_object_set_new(reply, "daemon", json_string("kgymd"));
	json_object_set_new(reply, "version", json_string(PACKAGE_VERSION));
	json_object_set_new(reply, "protocol", json_pack("[i]", KGYM_PROTOCOL_VERSION));
	json_object_set_new(reply, "plugins", ops_plugin_names());
	json_object_set_new(reply, "admin", json_boolean(req->who.admin));
	json_object_set_new(reply, "gateway", json_boolean(config_uid_gateway(kgymd_config,
	    conn->uid)));
	control_send(conn, reply);
}

/* Check one task of a submit: shape, workflow, and the plugin's own validation. */
static int
ops_check_task(json_t *task, struct task_spec *spec, struct proto_error *err)
{
	struct plugin *wf;
	char *cause = NULL;

	if (proto_parse_task(task, kgymd_config->max_timeout_s, spec, err) < 0)
		return -EINVAL;
	if ((wf = plugin_find_workflow(spec->workflow)) == NULL) {
		proto_error_set(err, "bad_request",
		    "field 'workflow': unknown workflow '%s' (loaded plugins serve no such workflow)",
		    spec->workflow);
		return -ENOENT;
	}
	if (wf->p->validate(spec->payload, &cause) < 0) {
		proto_error_set(err, "bad_request", "field 'payload': %s",
		    cause != NULL ? cause : "rejected by the workflow");
		free(cause);
		return -EINVAL;
	}
	return 0;
}

static json_t *
ops_rejection(size_t index, const char *code, const char *message)
{
	return json_pack("{s:I, s:{s:s, s:s}}", "index", (json_int_t)index, "error",
	    "code", code, "message", message);
}

/*
 * A submit is checked in slices of at most OPS_SLICE_US, with a turn of
 * the loop between slices, so a 10,000-task batch does not make every
 * other client wait for it.  Then its new tasks go to the writer
 * (writer.c) as one job, committed off the loop, often in one transaction
 * with other clients' submits; the reply goes out when that commit has
 * landed, so nothing is said "accepted" before it is on disk.  If the
 * commit fails, every new task of the request is rejected "internal"; when
 * nothing at all was accepted the whole request is answered "internal".
 */
/* The next slice after the loop has polled every socket (see control.c). */
static const struct timeval ops_next_turn = { 0, 0 };

struct ops_pending {
	struct conn *conn;		/* NULL once the connection is gone */
	struct request req;		/* owned */
	json_t *reply, *accepted, *rejected;
	json_t *fresh;			/* the accepted entry of each batch row */
	json_t *one, *many;
	size_t next, n;
	bool wait;
	bool committing;		/* the batch is with the writer */
	struct sched_batch *batch;
	char *store_failure;		/* why the store refused the batch */
	uint64_t t0;
	struct event *ev;
};

static void
ops_pending_destroy(struct ops_pending *p)
{
	if (p == NULL)
		return;
	if (p->ev != NULL)
		event_free(p->ev);
	json_decref(p->reply);
	json_decref(p->accepted);
	json_decref(p->rejected);
	json_decref(p->fresh);
	sched_batch_free(p->batch);
	proto_request_clear(&p->req);
	free(p->store_failure);
	free(p);
}

void
ops_pending_free(struct conn *conn)
{
	struct ops_pending *p = conn->pending;

	conn->pending = NULL;
	if (p != NULL && p->committing) {
		/* The writer holds its batch: the completion frees it, telling no one. */
		p->conn = NULL;
		return;
	}
	ops_pending_destroy(p);
}

/* One slice of checks; true when the whole submit has been looked at. */
static bool
ops_submit_slice(struct ops_pending *p)
{
	struct proto_error err = { 0 };
	struct task_spec spec;
	const char *owner;
	enum task_state state;
	char id[KGYM_TASK_ID_MAX + 1], msg[KGYM_TASK_ID_MAX + 64];
	uint64_t start = stats_now_us();
	char *cause = NULL;
	bool existing;
	json_t *task, *entry;
	int error;

	while (p->next < p->n) {
		size_t i = p->next++;

		task = p->one != NULL ? p->one : json_array_get(p->many, i);
		if (ops_check_task(task, &spec, &err) < 0) {
			json_array_append_new(p->rejected, ops_rejection(i, err.code, err.message));
			continue;
		}
		owner = NULL;
		error = sched_submit(p->batch, &spec, p->req.who.owner, id, sizeof id, &state,
		    &existing, &owner, &cause);
		if (error == -ENOSPC) {
			json_array_append_new(p->rejected, ops_rejection(i, "queue_full",
			    cause != NULL ? cause : "the queue is full"));
		} else if (error < 0) {
			json_array_append_new(p->rejected, ops_rejection(i, "internal",
			    cause != NULL ? cause : strerror(-error)));
		} else if (existing && !ops_may_see(&p->req.who, owner)) {
			/* Another client's id: neither its state nor its result is ours. */
			snprintf(msg, sizeof msg, "task_id '%s' belongs to another client", id);
			json_array_append_new(p->rejected, ops_rejection(i, "forbidden", msg));
		} else {
			entry = json_pack("{s:I, s:s, s:s, s:b}", "index", (json_int_t)i,
			    "task_id", id, "state", proto_state_name(state), "existing",
			    existing);
			json_array_append_new(p->accepted, entry);
			if (!existing)
				json_array_append(p->fresh, entry);
		}
		free(cause);
		cause = NULL;
		if (stats_now_us() - start >= OPS_SLICE_US)
			break;
	}
	return p->next >= p->n;
}

/* Send the reply, and register the wait. */
static void
ops_submit_finish(struct ops_pending *p)
{
	struct conn *conn = p->conn;
	const char **wait_ids = NULL;
	const json_t *a;
	size_t i, nwait = 0;

	/* The store failed before anything was accepted: the request failed. */
	if (p->store_failure != NULL && json_array_size(p->accepted) == 0) {
		ops_error(conn, &p->req, "internal", "%s", p->store_failure);
		return;
	}
	json_object_set(p->reply, "accepted", p->accepted);
	json_object_set(p->reply, "rejected", p->rejected);
	control_send(conn, p->reply);
	if (!p->wait)
		return;
	if (json_array_size(p->accepted) > 0 &&
	    (wait_ids = calloc(json_array_size(p->accepted), sizeof *wait_ids)) == NULL) {
		ops_error(conn, &p->req, "internal", "cannot register the wait");
		return;
	}
	for (i = 0; i < json_array_size(p->accepted); i++) {
		a = json_array_get(p->accepted, i);
		wait_ids[nwait++] = json_string_value(json_object_get(a, "task_id"));
	}
	if (wait_add(conn, &p->req.who, p->req.id, wait_ids, nwait, -1, false) < 0)
		ops_error(conn, &p->req, "internal", "cannot register the wait");
	free(wait_ids);
}

/* Reply, and let the connection read its next request. */
static void
ops_submit_end(struct ops_pending *p)
{
	struct conn *conn = p->conn;

	if (conn != NULL) {
		ops_submit_finish(p);
		stats_request(OP_SUBMIT, stats_now_us() - p->t0);
		conn->pending = NULL;
	}
	ops_pending_destroy(p);
	if (conn != NULL)
		control_resume(conn);
}

/* Move the accepted entries marked "_drop" out of the accepted list. */
static void
ops_submit_prune(struct ops_pending *p)
{
	json_t *kept = json_array(), *a;
	size_t i;

	json_array_foreach(p->accepted, i, a) {
		if (json_object_get(a, "_drop") == NULL)
			json_array_append(kept, a);
	}
	json_decref(p->accepted);
	p->accepted = kept;
}

/* The writer is done with the batch: fix up what it found, then reply. */
static void
ops_submit_committed(struct sched_batch *b, int error, void *arg)
{
	struct ops_pending *p = arg;
	enum task_state state;
	const char *owner, *id;
	char msg[KGYM_TASK_ID_MAX + 64];
	size_t k, index;
	bool drops = false;
	json_t *a;

	p->committing = false;
	if (p->conn == NULL) {
		ops_pending_destroy(p);
		return;
	}
	json_array_foreach(p->fresh, k, a) {
		index = (size_t)json_integer_value(json_object_get(a, "index"));
		id = json_string_value(json_object_get(a, "task_id"));
		if (error < 0) {
			json_array_append_new(p->rejected, ops_rejection(index, "internal",
			    "the task store could not commit the submission"));
		} else if (!sched_batch_dup(b, k)) {
			continue;
		} else if (sched_find(id, &state, &owner) == 0 &&
		    ops_may_see(&p->req.who, owner)) {
			/* Another submit of this id got there first: that one stands. */
			json_object_set_new(a, "existing", json_true());
			json_object_set_new(a, "state", json_string(proto_state_name(state)));
			continue;
		} else {
			snprintf(msg, sizeof msg, "task_id '%s' belongs to another client", id);
			json_array_append_new(p->rejected, ops_rejection(index, "forbidden", msg));
		}
		json_object_set_new(a, "_drop", json_true());
		drops = true;
	}
	if (error < 0 && p->store_failure == NULL)
		p->store_failure = strdup("the task store could not commit the submission");
	if (drops)
		ops_submit_prune(p);
	ops_submit_end(p);
}

/* Check the next slice; once all is checked, hand the batch to the writer. */
static void
ops_submit_continue(evutil_socket_t fd, short what, void *arg)
{
	struct ops_pending *p = arg;

	if (!ops_submit_slice(p)) {
		evtimer_add(p->ev, &ops_next_turn);
		return;
	}
	if (sched_batch_count(p->batch) == 0) {
		ops_submit_end(p);
		return;
	}
	p->committing = true;
	sched_batch_commit(p->batch, ops_submit_committed, p);
}

static int
ops_submit(struct conn *conn, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	json_t *one = json_object_get(req->root, "task"), *many = NULL;
	struct ops_pending *p;
	bool wait = false;
	size_t n;

	if (proto_get_array(req->root, "tasks", false, &many, &err) < 0 ||
	    proto_get_bool(req->root, "wait", false, &wait, &err) < 0) {
		ops_bad(conn, req, &err);
		return 0;
	}
	if ((one == NULL) == (many == NULL)) {
		ops_error(conn, req, "bad_request",
		    "give exactly one of the fields 'task' (an object) or 'tasks' (an array)");
		return 0;
	}
	if (one != NULL && !json_is_object(one)) {
		ops_error(conn, req, "bad_request", "field 'task': expected an object");
		return 0;
	}
	n = one != NULL ? 1 : json_array_size(many);
	if (n > (size_t)kgymd_config->max_batch_tasks) {
		ops_error(conn, req, "bad_request",
		    "field 'tasks': %zu tasks exceed max_batch_tasks (%d)", n,
		    kgymd_config->max_batch_tasks);
		return 0;
	}
	if (kgymd_draining()) {
		ops_error(conn, req, "draining",
		    "the daemon is draining or stopping and accepts no new tasks");
		return 0;
	}
	if ((p = calloc(1, sizeof *p)) == NULL ||
	    (p->batch = sched_batch_new()) == NULL ||
	    (p->ev = evtimer_new(kgymd_base, ops_submit_continue, p)) == NULL) {
		if (p != NULL) {
			sched_batch_free(p->batch);
			free(p);
		}
		ops_error(conn, req, "internal", "out of memory");
		return 0;
	}
	p->conn = conn;
	p->req = *req;			/* borrowed until it goes on */
	p->reply = json_incref(reply);
	p->accepted = json_array();
	p->rejected = json_array();
	p->fresh = json_array();
	p->one = one;
	p->many = many;
	p->n = n;
	p->wait = wait;
	p->t0 = stats_now_us();
	if (ops_submit_slice(p) && sched_batch_count(p->batch) == 0) {
		/* Nothing new to store (all rejected, or all known): answer now. */
		ops_submit_finish(p);
		memset(&p->req, 0, sizeof p->req);	/* still the caller's */
		ops_pending_destroy(p);
		return 0;
	}
	/* The rest of the checks, and the commit, from the loop's next turns. */
	memset(req, 0, sizeof *req);	/* ours now */
	conn->pending = p;
	evtimer_add(p->ev, &ops_next_turn);
	return 1;
}

static int
ops_task_id(struct conn *conn, struct request *req, const char **ret_id)
{
	struct proto_error err = { 0 };

	if (proto_get_string(req->root, "task_id", true, ret_id, &err) < 0) {
		ops_bad(conn, req, &err);
		return -EINVAL;
	}
	return 0;
}

static void
ops_row_fields(json_t *o, const struct store_row *row)
{
	json_object_set_new(o, "task_id", json_string(row->id));
	json_object_set_new(o, "state", json_string(proto_state_name(row->state)));
	json_object_set_new(o, "workflow", json_string(row->workflow));
	json_object_set_new(o, "priority", json_string(proto_prio_name(row->prio)));
	json_object_set_new(o, "attempt", json_integer(row->attempt));
	json_object_set_new(o, "created_ms", json_integer(row->created_ms));
	if (row->started_ms > 0)
		json_object_set_new(o, "started_ms", json_integer(row->started_ms));
	if (row->finished_ms > 0)
		json_object_set_new(o, "finished_ms", json_integer(row->finished_ms));
	if (row->error_code != NULL)
		json_object_set_new(o, "error_code", json_string(row->error_code));
	if (row->error_message != NULL)
		json_object_set_new(o, "error_message", json_string(row->error_message));
}

static int
ops_get_row(struct conn *conn, struct request *req, const char *id,
    struct store_row **ret_row)
{
	int error = store_get(kgymd_store, id, ret_row);

	/* Another client's task is not found: its existence is not ours to learn. */
	if (error == 0 && !ops_may_see(&req->who, (*ret_row)->owner)) {
		store_row_free(*ret_row);
		error = -ENOENT;
	}
	if (error == -ENOENT)
		ops_error(conn, req, "not_found", "no task with task_id '%.128s'", id);
	else if (error < 0)
		ops_error(conn, req, "internal", "the task store failed: %s", strerror(-error));
	return error;
}

static void
ops_status(struct conn *conn, struct request *req, json_t *reply)
{
	struct store_row *row;
	struct task *task;
	const char *id;

	if (ops_task_id(conn, req, &id) < 0 || ops_get_row(conn, req, id, &row) < 0)
		return;
	/*
	 * A cancel is answered "cancelled" at once, while the writer commits
	 * it: status must not say otherwise meanwhile.  Other ends show once
	 * they are on disk.
	 */
	if ((task = task_index_find(id)) != NULL && task->finished &&
	    task->state == TASK_CANCELLED && row->state < TASK_COMPLETED)
		row->state = TASK_CANCELLED;
	ops_row_fields(reply, row);
	store_row_free(row);
	control_send(conn, reply);
}

static void
ops_result(struct conn *conn, struct request *req, json_t *reply)
{
	struct store_row *row;
	struct task *task;
	const char *id;
	json_t *result;

	if (ops_task_id(conn, req, &id) < 0 || ops_get_row(conn, req, id, &row) < 0)
		return;
	/*
	 * A cancel is answered "cancelled" at once, and status says so while
	 * the writer commits it (ops_status): the result, kept in memory until
	 * then, says so too.
	 */
	if ((task = task_index_find(id)) != NULL && task->finished &&
	    task->state == TASK_CANCELLED && row->state < TASK_COMPLETED &&
	    task->result != NULL) {
		json_object_set_new(reply, "task_id", json_string(row->id));
		json_object_set_new(reply, "state", json_string(proto_state_name(TASK_CANCELLED)));
		json_object_set(reply, "result", task->result);
		store_row_free(row);
		control_send(conn, reply);
		return;
	}
	if (!proto_state_terminal(row->state) || row->result == NULL) {
		ops_error(conn, req, "not_ready", "task '%s' is %s; its result is not ready",
		    id, proto_state_name(row->state));
		store_row_free(row);
		return;
	}
	result = json_loads(row->result, 0, NULL);
	json_object_set_new(reply, "task_id", json_string(row->id));
	json_object_set_new(reply, "state", json_string(proto_state_name(row->state)));
	json_object_set_new(reply, "result", result != NULL ? result : json_null());
	store_row_free(row);
	control_send(conn, reply);
}

static void
ops_wait(struct conn *conn, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	json_t *ids = NULL, *v;
	const char **list;
	int64_t timeout = -1;
	size_t i, n;

	if (proto_get_array(req->root, "task_ids", true, &ids, &err) < 0 ||
	    proto_get_int(req->root, "timeout_ms", false, 0, INT64_C(86400000) * 365,
	    &timeout, &err) < 0)
		return ops_bad(conn, req, &err);
	n = json_array_size(ids);
	if (n > OPS_WAIT_MAX_IDS)
		return ops_error(conn, req, "bad_request",
		    "field 'task_ids': at most %d ids per wait", OPS_WAIT_MAX_IDS);
	if ((list = calloc(n + 1, sizeof *list)) == NULL)
		return ops_error(conn, req, "internal", "out of memory");
	for (i = 0; i < n; i++) {
		v = json_array_get(ids, i);
		if (!json_is_string(v)) {
			free(list);
			return ops_error(conn, req, "bad_request",
			    "field 'task_ids': element %zu is not a string", i);
		}
		list[i] = json_string_value(v);
	}
	if (wait_add(conn, &req->who, req->id, list, n, timeout, true) < 0)
		ops_error(conn, req, "internal", "cannot register the wait");
	free(list);
}

/* May this client see (and cancel) task `id`?  Unknown ids say yes: sched says not_found. */
static bool
ops_task_visible(const struct principal *who, const char *id)
{
	struct store_row *row = NULL;
	struct task *task;
	bool visible;

	if (who->admin)
		return true;
	if ((task = task_index_find(id)) != NULL)
		return ops_may_see(who, task->owner);
	if (store_get(kgymd_store, id, &row) < 0)
		return true;
	visible = ops_may_see(who, row->owner);
	store_row_free(row);
	return visible;
}

static void
ops_cancel(struct conn *conn, struct request *req, json_t *reply)
{
	enum task_state state;
	const char *id;
	int error;

	if (ops_task_id(conn, req, &id) < 0)
		return;
	if (!ops_task_visible(&req->who, id))
		return ops_error(conn, req, "not_found", "no task with task_id '%.128s'", id);
	error = sched_cancel(id, &state);
	if (error == -ENOENT)
		return ops_error(conn, req, "not_found", "no task with task_id '%.128s'", id);
	if (error < 0 && error != -EALREADY)
		return ops_error(conn, req, "internal", "cancel failed: %s", strerror(-error));
	json_object_set_new(reply, "task_id", json_string(id));
	json_object_set_new(reply, "state", json_string(proto_state_name(state)));
	json_object_set_new(reply, "cancelled", json_boolean(error == 0));
	control_send(conn, reply);
}

struct ops_list_page {
	json_t *tasks;
	int64_t last_seq;
};

static int
ops_list_row(const struct store_row *row, void *arg)
{
	struct ops_list_page *page = arg;
	json_t *o = json_object();

	ops_row_fields(o, row);
	json_object_del(o, "error_message");
	json_array_append_new(page->tasks, o);
	page->last_seq = row->seq;
	return 0;
}

/*
 * A page of at most `limit` tasks, newest first, walked from an index; the
 * reply's `next` (when the page is full) is the `before` of the next page.
 * Admins list every task; any other client its own.
 */
static void
ops_list(struct conn *conn, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	struct ops_list_page page = { 0 };
	const char *state_name = NULL;
	int64_t limit = OPS_LIST_DEFAULT, before = 0;
	int state = -1;

	if (proto_get_string(req->root, "state", false, &state_name, &err) < 0 ||
	    proto_get_int(req->root, "limit", false, 1, OPS_LIST_MAX, &limit, &err) < 0 ||
	    proto_get_int(req->root, "before", false, 1, INT64_MAX, &before, &err) < 0)
		return ops_bad(conn, req, &err);
	if (state_name != NULL && (state = proto_state_parse(state_name)) < 0)
		return ops_error(conn, req, "bad_request",
		    "field 'state': expected queued, running, completed, failed or cancelled, got '%.32s'",
		    state_name);
	page.tasks = json_array();
	if (store_list(kgymd_store, state, req->who.admin ? NULL : req->who.owner, before,
	    (int)limit, ops_list_row, &page) < 0) {
		json_decref(page.tasks);
		return ops_error(conn, req, "internal", "the task store failed to list tasks");
	}
	json_object_set_new(reply, "next", json_array_size(page.tasks) == (size_t)limit ?
	    json_integer(page.last_seq) : json_null());
	json_object_set_new(reply, "tasks", page.tasks);
	control_send(conn, reply);
}

static void
ops_workers(struct conn *conn, struct request *req, json_t *reply)
{
	json_t *pool = pool_describe();

	json_object_update(reply, pool);
	json_decref(pool);
	json_object_set_new(reply, "workers_per_gpu", json_integer(kgymd_config->workers_per_gpu));
	control_send(conn, reply);
}

static void
ops_health(struct conn *conn, struct request *req, json_t *reply)
{
	const char *status = "healthy";

	if (kgymd_draining())
		status = "draining";
	json_object_set_new(reply, "status", json_string(status));
	json_object_set_new(reply, "queued", json_integer((json_int_t)sched_queued()));
	json_object_set_new(reply, "running", json_integer((json_int_t)sched_running()));
	control_send(conn, reply);
}

static void
ops_plugins(struct conn *conn, struct request *req, json_t *reply)
{
	const struct plugin_refusal_list *refused = plugin_refused();
	const struct plugin_refusal *r;
	json_t *list = json_array();

	TAILQ_FOREACH(r, refused, entry)
		json_array_append_new(list, json_pack("{s:s, s:s}", "path", r->path,
		    "reason", r->reason));
	json_object_set_new(reply, "plugins", plugin_describe());
	json_object_set_new(reply, "refused", list);
	control_send(conn, reply);
}

static void
ops_stats(struct conn *conn, struct request *req, json_t *reply)
{
	json_t *stats = stats_describe();

	json_object_update(reply, stats);
	json_decref(stats);
	control_send(conn, reply);
}

static void
ops_drain(struct conn *conn, struct request *req, json_t *reply)
{
	log_info("drain requested by uid %lu", (unsigned long)conn->uid);
	kgymd_drain();
	json_object_set_new(reply, "draining", json_true());
	json_object_set_new(reply, "queued", json_integer((json_int_t)sched_queued()));
	json_object_set_new(reply, "running", json_integer((json_int_t)sched_running()));
	control_send(conn, reply);
}

static void
ops_shutdown(struct conn *conn, struct request *req, json_t *reply)
{
	json_object_set_new(reply, "stopping", json_true());
	control_send(conn, reply);
	kgymd_shutdown("shutdown requested by a client");
}

static const struct ops_entry ops_table[OP__COUNT] = {
	[OP_HELLO] = { ops_hello, false },
	[OP_SUBMIT] = { NULL, false },		/* ops_submit: may go on */
	[OP_STATUS] = { ops_status, false },
	[OP_RESULT] = { ops_result, false },
	[OP_WAIT] = { ops_wait, false },
	[OP_CANCEL] = { ops_cancel, false },
	[OP_LIST] = { ops_list, false },
	[OP_WORKERS] = { ops_workers, false },
	[OP_HEALTH] = { ops_health, false },
	[OP_PLUGINS] = { ops_plugins, false },
	[OP_STATS] = { ops_stats, false },
	[OP_DRAIN] = { ops_drain, true },
	[OP_SHUTDOWN] = { ops_shutdown, true },
};

bool
ops_may_see(const struct principal *who, const char *owner)
{
	size_t n = strlen(who->owner);

	if (who->admin)
		return true;
	if (owner == NULL)
		return false;
	if (strcmp(owner, who->owner) == 0)
		return true;
	/* A gateway as itself sees what it submitted for its principals. */
	return who->gateway && strncmp(owner, who->owner, n) == 0 && owner[n] == ':';
}

/*
 * Whom the request acts for.  A peer of gateway_uids (kgymd-http) may name
 * a principal per request, "on_behalf_of": NAME; the request then owns and
 * sees only the tasks of "uid:N:NAME" and is never an admin one, so
 * ownership between the gateway's users is enforced here, not trusted to
 * the gateway.  Any other request acts for its connection's peer.
 */
static int
ops_principal(struct conn *conn, struct request *req)
{
	struct proto_error err = { 0 };
	const char *name = NULL;
	size_t len;

	if (proto_get_string(req->root, "on_behalf_of", false, &name, &err) < 0) {
		ops_bad(conn, req, &err);
		return -EINVAL;
	}
	if (name == NULL) {
		snprintf(req->who.owner, sizeof req->who.owner, "%s", conn->owner);
		req->who.admin = conn->admin;
		req->who.gateway = config_uid_gateway(kgymd_config, conn->uid);
		return 0;
	}
	if (!config_uid_gateway(kgymd_config, conn->uid)) {
		ops_error(conn, req, "forbidden",
		    "field 'on_behalf_of': uid %lu is not in gateway_uids",
		    (unsigned long)conn->uid);
		return -EPERM;
	}
	len = strlen(name);
	if (len < 1 || len > KGYM_PRINCIPAL_MAX ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != len) {
		ops_error(conn, req, "bad_request",
		    "field 'on_behalf_of': expected 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'",
		    KGYM_PRINCIPAL_MAX);
		return -EINVAL;
	}
	/* The same "uid:N" as control.c gives the connection, then the name. */
	snprintf(req->who.owner, sizeof req->who.owner, "uid:%lu:%.*s",
	    (unsigned long)conn->uid, KGYM_PRINCIPAL_MAX, name);
	req->who.admin = false;
	req->who.gateway = false;
	return 0;
}

int
ops_dispatch(struct conn *conn, struct request *req)
{
	const struct ops_entry *e = &ops_table[req->op];
	json_t *reply;
	int more = 0;

	if (ops_principal(conn, req) < 0)
		return 0;
	if (e->admin && !req->who.admin) {
		ops_error(conn, req, "forbidden", "op '%s' is for admin peers (admin_uids); uid %lu is not one%s",
		    proto_op_name(req->op), (unsigned long)conn->uid,
		    json_object_get(req->root, "on_behalf_of") != NULL ?
		    " (and a request on_behalf_of another never is)" : "");
		return 0;
	}
	if ((reply = proto_reply_ok(req->id)) == NULL)
		return 0;
	if (req->op == OP_SUBMIT)
		more = ops_submit(conn, req, reply);
	else
		e->handler(conn, req, reply);
	json_decref(reply);
	return more;
}

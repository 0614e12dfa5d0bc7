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

#include "ops.h"

#define OPS_LIST_DEFAULT	100
#define OPS_LIST_MAX		1000	/* a page; more with `before` */
#define OPS_WAIT_MAX_IDS	100000
/* A submit is stored in slices of about this long (microseconds). */
#define OPS_SLICE_US		100
/*
 * A submit reply with this many accepted tasks is encoded, and its trees
 * and the request's freed, on the parser thread: for 1,000 tasks that is
 * ~3 ms the loop would otherwise spend while every other client waits.
 */
#define OPS_ENCODE_OFFLOAD	256

struct ops_entry {
	void (*handler)(struct peer *, struct request *, json_t *reply);
	bool admin;
};

static void
ops_error(struct peer *peer, struct request *req, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void
ops_verror(struct peer *peer, json_t *req_id, const char *code, const char *fmt, va_list ap)
{
	char message[768];
	json_t *reply;

	vsnprintf(message, sizeof message, fmt, ap);
	reply = proto_reply_error(req_id, code, message);
	peer_send(peer, reply);
	json_decref(reply);
}

static void
ops_error(struct peer *peer, struct request *req, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ops_verror(peer, req->id, code, fmt, ap);
	va_end(ap);
}


static void
ops_bad(struct peer *peer, struct request *req, const struct proto_error *err)
{
	ops_error(peer, req, err->code, "%s", err->message);
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
ops_hello(struct peer *peer, struct request *req, json_t *reply)
{
	json_object_set_new(reply, "daemon", json_string("kgymd"));
	json_object_set_new(reply, "version", json_string(PACKAGE_VERSION));
	json_object_set_new(reply, "protocol", json_pack("[i]", KGYM_PROTOCOL_VERSION));
	json_object_set_new(reply, "plugins", ops_plugin_names());
	json_object_set_new(reply, "admin", json_boolean(req->who.admin));
	json_object_set_new(reply, "gateway", json_boolean(config_uid_gateway(kgymd_config,
	    peer->uid)));
	peer_send(peer, reply);
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
	struct peer *peer;		/* NULL once the peer is gone */
	struct request req;		/* owned */
	json_t *reply, *accepted, *rejected;
	json_t *fresh;			/* the accepted entry of each batch row */
	json_t *one, *many;
	size_t next, n;
	bool wait;
	bool committing;		/* the batch is with the writer */
	struct sched_batch *batch;
	char *store_failure;		/* why the store refused the batch */
	bool store_unavailable;		/* the shared queue could not be reached */
	uint64_t t0;
	struct event *ev;
	struct offload_job enc;		/* the reply, encoded on the parser thread */
	bool encoding;
	json_t *garbage;		/* the request's tasks, freed there too */
	char *line;			/* the encoded reply */
	size_t len;
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
	json_decref(p->garbage);
	free(p->store_failure);
	free(p->line);
	free(p);
}

void
ops_pending_free(struct peer *peer)
{
	struct ops_pending *p = peer->pending;

	peer->pending = NULL;
	if (p != NULL && (p->committing || p->encoding)) {
		/* The writer (or the encoder) holds it: the completion frees it, telling no one. */
		p->peer = NULL;
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

/* With "wait": true, wait for the accepted tasks (once the reply is out). */
static void
ops_submit_wait(struct ops_pending *p)
{
	struct peer *peer = p->peer;
	const char **wait_ids = NULL;
	const json_t *a;
	size_t i, nwait = 0;

	if (!p->wait)
		return;
	if (json_array_size(p->accepted) > 0 &&
	    (wait_ids = calloc(json_array_size(p->accepted), sizeof *wait_ids)) == NULL) {
		ops_error(peer, &p->req, "internal", "cannot register the wait");
		return;
	}
	for (i = 0; i < json_array_size(p->accepted); i++) {
		a = json_array_get(p->accepted, i);
		wait_ids[nwait++] = json_string_value(json_object_get(a, "task_id"));
	}
	if (wait_add(peer, &p->req.who, p->req.id, wait_ids, nwait, -1, false) < 0)
		ops_error(peer, &p->req, "internal", "cannot register the wait");
	free(wait_ids);
}

/* Send the reply, and register the wait. */
static void
ops_submit_finish(struct ops_pending *p)
{
	/* The store failed before anything was accepted: the request failed. */
	if (p->store_failure != NULL && json_array_size(p->accepted) == 0) {
		ops_error(p->peer, &p->req, p->store_unavailable ? "unavailable" : "internal",
		    "%s", p->store_failure);
		return;
	}
	json_object_set(p->reply, "accepted", p->accepted);
	json_object_set(p->reply, "rejected", p->rejected);
	peer_send(p->peer, p->reply);
	ops_submit_wait(p);
}

/* Let the peer send its next request. */
static void
ops_submit_done(struct ops_pending *p)
{
	struct peer *peer = p->peer;

	if (peer != NULL) {
		stats_request(OP_SUBMIT, stats_now_us() - p->t0);
		peer->pending = NULL;
	}
	ops_pending_destroy(p);
	if (peer != NULL)
		peer_resume(peer);
}

/*
 * In the parser thread: encode the reply, and free the request's tasks
 * and, unless a wait still needs the accepted ids, the reply's trees.  The
 * loop touches none of them meanwhile: the peer's next line waits for this
 * reply, and the tasks' payloads that the scheduler keeps are shared only
 * through jansson's reference counts, which are atomic.
 */
static void
ops_submit_encode_run(void *arg)
{
	struct ops_pending *p = arg;

	p->line = proto_encode(p->reply, &p->len);
	json_decref(p->garbage);
	p->garbage = NULL;
	if (p->line != NULL && !p->wait) {
		json_decref(p->reply);
		json_decref(p->accepted);
		json_decref(p->rejected);
		json_decref(p->fresh);
		p->reply = p->accepted = p->rejected = p->fresh = NULL;
	}
}

static void
ops_submit_encoded(void *arg)
{
	struct ops_pending *p = arg;

	p->encoding = false;
	if (p->peer != NULL) {
		if (p->line != NULL)
			peer_send_line(p->peer, p->line, p->len);
		else
			ops_error(p->peer, &p->req, "internal", "cannot encode the reply");
		ops_submit_wait(p);
	}
	ops_submit_done(p);
}

/* Reply (a big one from the parser thread), and take the peer's next request. */
static void
ops_submit_end(struct ops_pending *p)
{
	if (p->peer != NULL && json_array_size(p->accepted) >= OPS_ENCODE_OFFLOAD &&
	    (p->store_failure == NULL || json_array_size(p->accepted) > 0)) {
		json_object_set(p->reply, "accepted", p->accepted);
		json_object_set(p->reply, "rejected", p->rejected);
		/* The tasks' trees are the request's biggest part: freed off the loop too. */
		if ((p->garbage = json_object_get(p->req.root, "tasks")) != NULL) {
			json_incref(p->garbage);
			json_object_del(p->req.root, "tasks");
			p->many = NULL;
		}
		p->enc.run = ops_submit_encode_run;
		p->enc.done = ops_submit_encoded;
		p->enc.arg = p;
		p->encoding = true;
		if (offload_parser_submit(&p->enc))
			return;
		p->encoding = false;
	}
	if (p->peer != NULL)
		ops_submit_finish(p);
	ops_submit_done(p);
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
	if (p->peer == NULL) {
		ops_pending_destroy(p);
		return;
	}
	json_array_foreach(p->fresh, k, a) {
		index = (size_t)json_integer_value(json_object_get(a, "index"));
		id = json_string_value(json_object_get(a, "task_id"));
		if (error < 0) {
			json_array_append_new(p->rejected, ops_rejection(index,
			    error == -EAGAIN ? "unavailable" : "internal",
			    sched_batch_cause(b) != NULL ? sched_batch_cause(b) :
			    "the task store could not commit the submission"));
		} else if (!sched_batch_dup(b, k, &state, &owner)) {
			continue;
		} else if (ops_may_see(&p->req.who, owner)) {
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
	if (error < 0 && p->store_failure == NULL) {
		p->store_failure = strdup(sched_batch_cause(b) != NULL ? sched_batch_cause(b) :
		    "the task store could not commit the submission");
		p->store_unavailable = error == -EAGAIN;
	}
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
ops_submit(struct peer *peer, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	json_t *one = json_object_get(req->root, "task"), *many = NULL;
	struct ops_pending *p;
	bool wait = false;
	size_t n;

	if (proto_get_array(req->root, "tasks", false, &many, &err) < 0 ||
	    proto_get_bool(req->root, "wait", false, &wait, &err) < 0) {
		ops_bad(peer, req, &err);
		return 0;
	}
	if ((one == NULL) == (many == NULL)) {
		ops_error(peer, req, "bad_request",
		    "give exactly one of the fields 'task' (an object) or 'tasks' (an array)");
		return 0;
	}
	if (one != NULL && !json_is_object(one)) {
		ops_error(peer, req, "bad_request", "field 'task': expected an object");
		return 0;
	}
	n = one != NULL ? 1 : json_array_size(many);
	if (n > (size_t)kgymd_config->max_batch_tasks) {
		ops_error(peer, req, "bad_request",
		    "field 'tasks': %zu tasks exceed max_batch_tasks (%d)", n,
		    kgymd_config->max_batch_tasks);
		return 0;
	}
	if (kgymd_draining()) {
		ops_error(peer, req, "draining",
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
		ops_error(peer, req, "internal", "out of memory");
		return 0;
	}
	p->peer = peer;
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
	peer->pending = p;
	evtimer_add(p->ev, &ops_next_turn);
	return 1;
}

static int
ops_task_id(struct peer *peer, struct request *req, const char **ret_id)
{
	struct proto_error err = { 0 };

	if (proto_get_string(req->root, "task_id", true, ret_id, &err) < 0) {
		ops_bad(peer, req, &err);
		return -EINVAL;
	}
	return 0;
}

void
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
ops_get_row(struct peer *peer, struct request *req, const char *id,
    struct store_row **ret_row)
{
	int error = queue->get(id, ret_row);

	/* Another client's task is not found: its existence is not ours to learn. */
	if (error == 0 && !ops_may_see(&req->who, (*ret_row)->owner)) {
		store_row_free(*ret_row);
		error = -ENOENT;
	}
	if (error == -ENOENT)
		ops_error(peer, req, "not_found", "no task with task_id '%.128s'", id);
	else if (error < 0)
		ops_error(peer, req, "internal", "the task store failed: %s", strerror(-error));
	return error;
}

static void
ops_status(struct peer *peer, struct request *req, json_t *reply)
{
	struct store_row *row;
	struct task *task;
	const char *id;

	if (ops_task_id(peer, req, &id) < 0 ||
	    ops_ask_queue(peer, req, reply, id, false, ops_status_looked_up) ||
	    ops_get_row(peer, req, id, &row) < 0)
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
	peer_send(peer, reply);
}

static void
ops_result(struct peer *peer, struct request *req, json_t *reply)
{
	struct store_row *row;
	struct task *task;
	const char *id;
	json_t *result;

	if (ops_task_id(peer, req, &id) < 0 ||
	    ops_ask_queue(peer, req, reply, id, true, ops_result_looked_up) ||
	    ops_get_row(peer, req, id, &row) < 0)
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
		peer_send(peer, reply);
		return;
	}
	if (!proto_state_terminal(row->state) || row->result == NULL) {
		ops_error(peer, req, "not_ready", "task '%s' is %s; its result is not ready",
		    id, proto_state_name(row->state));
		store_row_free(row);
		return;
	}
	result = json_loads(row->result, 0, NULL);
	json_object_set_new(reply, "task_id", json_string(row->id));
	json_object_set_new(reply, "state", json_string(proto_state_name(row->state)));
	json_object_set_new(reply, "result", result != NULL ? result : json_null());
	store_row_free(row);
	peer_send(peer, reply);
}

static void
ops_wait(struct peer *peer, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	json_t *ids = NULL, *v;
	const char **list;
	int64_t timeout = -1;
	size_t i, n;

	if (proto_get_array(req->root, "task_ids", true, &ids, &err) < 0 ||
	    proto_get_int(req->root, "timeout_ms", false, 0, INT64_C(86400000) * 365,
	    &timeout, &err) < 0)
		return ops_bad(peer, req, &err);
	n = json_array_size(ids);
	if (n > OPS_WAIT_MAX_IDS)
		return ops_error(peer, req, "bad_request",
		    "field 'task_ids': at most %d ids per wait", OPS_WAIT_MAX_IDS);
	if ((list = calloc(n + 1, sizeof *list)) == NULL)
		return ops_error(peer, req, "internal", "out of memory");
	for (i = 0; i < n; i++) {
		v = json_array_get(ids, i);
		if (!json_is_string(v)) {
			free(list);
			return ops_error(peer, req, "bad_request",
			    "field 'task_ids': element %zu is not a string", i);
		}
		list[i] = json_string_value(v);
	}
	if (wait_add(peer, &req->who, req->id, list, n, timeout, true) < 0)
		ops_error(peer, req, "internal", "cannot register the wait");
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
	if (queue->get(id, &row) < 0)
		return true;
	visible = ops_may_see(who, row->owner);
	store_row_free(row);
	return visible;
}

static void
ops_cancel(struct peer *peer, struct request *req, json_t *reply)
{
	enum task_state state;
	const char *id;
	int error;

	if (ops_task_id(peer, req, &id) < 0)
		return;
	/* Not live here: the shared queue says whose it is, then cancels it. */
	if (queue->cancel != NULL && task_index_find(id) == NULL &&
	    ops_ask_queue(peer, req, reply, id, false, ops_cancel_looked_up))
		return;
	if (!ops_task_visible(&req->who, id))
		return ops_error(peer, req, "not_found", "no task with task_id '%.128s'", id);
	error = sched_cancel(id, &state);
	if (error == -ENOENT)
		return ops_error(peer, req, "not_found", "no task with task_id '%.128s'", id);
	if (error < 0 && error != -EALREADY)
		return ops_error(peer, req, "internal", "cancel failed: %s", strerror(-error));
	json_object_set_new(reply, "task_id", json_string(id));
	json_object_set_new(reply, "state", json_string(proto_state_name(state)));
	json_object_set_new(reply, "cancelled", json_boolean(error == 0));
	peer_send(peer, reply);
}

/*
 * A page of at most `limit` tasks, newest first, walked from an index; the
 * reply's `next` (when the page is full) is the `before` of the next page.
 * Admins list every task; any other client its own.  A shared queue lists
 * the tasks of every node.
 */
static void
ops_list(struct peer *peer, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	const char *state_name = NULL;
	int64_t limit = OPS_LIST_DEFAULT, before = 0;
	struct ops_later *l;
	int state = -1;

	if (proto_get_string(req->root, "state", false, &state_name, &err) < 0 ||
	    proto_get_int(req->root, "limit", false, 1, OPS_LIST_MAX, &limit, &err) < 0 ||
	    proto_get_int(req->root, "before", false, 1, INT64_MAX, &before, &err) < 0)
		return ops_bad(peer, req, &err);
	if (state_name != NULL && (state = proto_state_parse(state_name)) < 0)
		return ops_error(peer, req, "bad_request",
		    "field 'state': expected queued, running, completed, failed or cancelled, got '%.32s'",
		    state_name);
	if ((l = ops_later_new(peer, req, reply, NULL)) == NULL ||
	    (l->page = calloc(1, sizeof *l->page)) == NULL) {
		if (l != NULL)
			ops_later_free(l);
		return ops_error(peer, req, "internal", "out of memory");
	}
	l->page->tasks = json_array();
	l->page->limit = limit;
	queue->list(state, req->who.admin ? NULL : req->who.owner, before, (int)limit, ops_list_row,
	    ops_list_done, l);
}

/*
 * A worker's task is named only to whom may see that task: status and list
 * hide another principal's tasks, and so does this (a gateway's users share
 * one daemon).
 */
static void
ops_hide_tasks(json_t *workers, const struct principal *who)
{
	const struct task *task;
	const char *id;
	json_t *w;
	size_t i;

	json_array_foreach(workers, i, w) {
		if ((id = json_string_value(json_object_get(w, "task_id"))) == NULL)
			continue;
		task = task_index_find(id);
		if (!ops_may_see(who, task != NULL ? task->owner : NULL))
			json_object_set_new(w, "task_id", json_null());
	}
}

static void
ops_workers(struct peer *peer, struct request *req, json_t *reply)
{
	json_t *pool = pool_describe(), *gpu;
	size_t i;

	ops_hide_tasks(json_object_get(pool, "cpu_workers"), &req->who);
	json_array_foreach(json_object_get(pool, "gpus"), i, gpu)
		ops_hide_tasks(json_object_get(gpu, "workers"), &req->who);
	json_object_update(reply, pool);
	json_decref(pool);
	json_object_set_new(reply, "workers_per_gpu", json_integer(pool_workers_per_gpu()));
	ops_send_with_nodes(peer, req, reply);
}

static void
ops_health(struct peer *peer, struct request *req, json_t *reply)
{
	const char *status = "healthy";

	if (kgymd_draining())
		status = "draining";
	else if (queue->reachable != NULL && !queue->reachable())
		status = "unavailable";	/* submits are refused until Redis is back */
	json_object_set_new(reply, "status", json_string(status));
	json_object_set_new(reply, "queued", json_integer((json_int_t)sched_queued()));
	json_object_set_new(reply, "running", json_integer((json_int_t)sched_running()));
	peer_send(peer, reply);
}

static void
ops_plugins(struct peer *peer, struct request *req, json_t *reply)
{
	const struct plugin_refusal_list *refused = plugin_refused();
	const struct plugin_refusal *r;
	json_t *list = json_array();

	TAILQ_FOREACH(r, refused, entry)
		json_array_append_new(list, json_pack("{s:s, s:s}", "path", r->path,
		    "reason", r->reason));
	json_object_set_new(reply, "plugins", plugin_describe());
	json_object_set_new(reply, "refused", list);
	peer_send(peer, reply);
}

static void
ops_stats(struct peer *peer, struct request *req, json_t *reply)
{
	json_t *stats = stats_describe();

	json_object_update(reply, stats);
	json_decref(stats);
	ops_send_with_nodes(peer, req, reply);
}

static void
ops_drain(struct peer *peer, struct request *req, json_t *reply)
{
	log_info("drain requested by uid %lu", (unsigned long)peer->uid);
	kgymd_drain();
	json_object_set_new(reply, "draining", json_true());
	json_object_set_new(reply, "queued", json_integer((json_int_t)sched_queued()));
	json_object_set_new(reply, "running", json_integer((json_int_t)sched_running()));
	peer_send(peer, reply);
}

static void
ops_shutdown(struct peer *peer, struct request *req, json_t *reply)
{
	json_object_set_new(reply, "stopping", json_true());
	peer_send(peer, reply);
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
 * the gateway.  Any other request acts for its peer.
 */
static int
ops_principal(struct peer *peer, struct request *req)
{
	struct proto_error err = { 0 };
	const char *name = NULL;
	size_t len;

	if (proto_get_string(req->root, "on_behalf_of", false, &name, &err) < 0) {
		ops_bad(peer, req, &err);
		return -EINVAL;
	}
	if (name == NULL) {
		snprintf(req->who.owner, sizeof req->who.owner, "%s", peer->owner);
		req->who.admin = peer->admin;
		req->who.gateway = config_uid_gateway(kgymd_config, peer->uid);
		return 0;
	}
	if (!config_uid_gateway(kgymd_config, peer->uid)) {
		ops_error(peer, req, "forbidden",
		    "field 'on_behalf_of': uid %lu is not in gateway_uids",
		    (unsigned long)peer->uid);
		return -EPERM;
	}
	len = strlen(name);
	if (len < 1 || len > KGYM_PRINCIPAL_MAX ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != len) {
		ops_error(peer, req, "bad_request",
		    "field 'on_behalf_of': expected 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'",
		    KGYM_PRINCIPAL_MAX);
		return -EINVAL;
	}
	/* The same "uid:N" as control.c gives the connection, then the name. */
	snprintf(req->who.owner, sizeof req->who.owner, "uid:%lu:%.*s",
	    (unsigned long)peer->uid, KGYM_PRINCIPAL_MAX, name);
	req->who.admin = false;
	req->who.gateway = false;
	return 0;
}

int
ops_dispatch(struct peer *peer, struct request *req)
{
	const struct ops_entry *e = &ops_table[req->op];
	json_t *reply;
	int more = 0;

	if (ops_principal(peer, req) < 0)
		return 0;
	if (e->admin && !req->who.admin) {
		if (json_object_get(req->root, "on_behalf_of") != NULL)
			ops_error(peer, req, "forbidden", "op '%s' is for admin peers (admin_uids); "
			    "a request on_behalf_of a principal never is one", proto_op_name(req->op));
		else
			ops_error(peer, req, "forbidden", "op '%s' is for admin peers (admin_uids); "
			    "uid %lu is not one", proto_op_name(req->op), (unsigned long)peer->uid);
		return 0;
	}
	if ((reply = proto_reply_ok(req->id)) == NULL)
		return 0;
	if (req->op == OP_SUBMIT)
		more = ops_submit(peer, req, reply);
	else
		e->handler(peer, req, reply);
	json_decref(reply);
	return more;
}

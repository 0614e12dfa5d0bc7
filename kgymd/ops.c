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

#include "kgymd.h"

#define OPS_LIST_DEFAULT	100
#define OPS_LIST_MAX		10000
#define OPS_WAIT_MAX_IDS	100000

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
	json_object_set_new(reply, "admin", json_boolean(conn->admin));
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

static void
ops_submit(struct conn *conn, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	struct task_spec spec;
	json_t *one = json_object_get(req->root, "task"), *many = NULL, *tasks;
	json_t *accepted, *rejected, *task;
	const char **wait_ids = NULL;
	size_t i, n, nwait = 0;
	enum task_state state;
	char id[KGYM_TASK_ID_MAX + 1];
	char *cause = NULL;
	bool wait = false, existing;
	int error;

	if (proto_get_array(req->root, "tasks", false, &many, &err) < 0 ||
	    proto_get_bool(req->root, "wait", false, &wait, &err) < 0)
		return ops_bad(conn, req, &err);
	if ((one == NULL) == (many == NULL))
		return ops_error(conn, req, "bad_request",
		    "give exactly one of the fields 'task' (an object) or 'tasks' (an array)");
	if (one != NULL && !json_is_object(one))
		return ops_error(conn, req, "bad_request", "field 'task': expected an object");
	n = one != NULL ? 1 : json_array_size(many);
	if (n > (size_t)kgymd_config->max_batch_tasks)
		return ops_error(conn, req, "bad_request",
		    "field 'tasks': %zu tasks exceed max_batch_tasks (%d)", n,
		    kgymd_config->max_batch_tasks);
	if (kgymd_draining())
		return ops_error(conn, req, "draining",
		    "the daemon is draining or stopping and accepts no new tasks");

	accepted = json_array();
	rejected = json_array();
	if (wait && n > 0 && (wait_ids = calloc(n, sizeof *wait_ids)) == NULL)
		goto internal;
	if (sched_batch_begin() < 0)
		goto internal;
	for (i = 0; i < n; i++) {
		task = one != NULL ? one : json_array_get(many, i);
		if (ops_check_task(task, &spec, &err) < 0) {
			json_array_append_new(rejected, ops_rejection(i, err.code, err.message));
			continue;
		}
		error = sched_submit(&spec, id, sizeof id, &state, &existing, &cause);
		if (error == -ENOSPC) {
			json_array_append_new(rejected, ops_rejection(i, "queue_full",
			    cause != NULL ? cause : "the queue is full"));
		} else if (error < 0) {
			json_array_append_new(rejected, ops_rejection(i, "internal",
			    cause != NULL ? cause : strerror(-error)));
		} else {
			json_array_append_new(accepted, json_pack("{s:I, s:s, s:s, s:b}",
			    "index", (json_int_t)i, "task_id", id,
			    "state", proto_state_name(state), "existing", existing));
		}
		free(cause);
		cause = NULL;
	}
	/* Durable before we say "accepted". */
	if (sched_batch_commit(&cause) < 0) {
		ops_error(conn, req, "internal", "%s", cause != NULL ? cause : "store failure");
		free(cause);
		goto out;
	}
	json_object_set_new(reply, "accepted", accepted);
	json_object_set_new(reply, "rejected", rejected);
	accepted = rejected = NULL;
	control_send(conn, reply);
	if (wait) {
		tasks = json_object_get(reply, "accepted");
		for (i = 0; i < json_array_size(tasks); i++)
			wait_ids[nwait++] = json_string_value(json_object_get(
			    json_array_get(tasks, i), "task_id"));
		if (wait_add(conn, req->id, wait_ids, nwait, -1, false) < 0)
			ops_error(conn, req, "internal", "cannot register the wait");
	}
	goto out;
internal:
	ops_error(conn, req, "internal", "cannot start a submission (see the daemon log)");
out:
	free(wait_ids);
	json_decref(accepted);
	json_decref(rejected);
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
	const char *id;

	if (ops_task_id(conn, req, &id) < 0 || ops_get_row(conn, req, id, &row) < 0)
		return;
	ops_row_fields(reply, row);
	store_row_free(row);
	control_send(conn, reply);
}

static void
ops_result(struct conn *conn, struct request *req, json_t *reply)
{
	struct store_row *row;
	const char *id;
	json_t *result;

	if (ops_task_id(conn, req, &id) < 0 || ops_get_row(conn, req, id, &row) < 0)
		return;
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
	if (wait_add(conn, req->id, list, n, timeout, true) < 0)
		ops_error(conn, req, "internal", "cannot register the wait");
	free(list);
}

static void
ops_cancel(struct conn *conn, struct request *req, json_t *reply)
{
	enum task_state state;
	const char *id;
	int error;

	if (ops_task_id(conn, req, &id) < 0)
		return;
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

static int
ops_list_row(const struct store_row *row, void *arg)
{
	json_t *o = json_object();

	ops_row_fields(o, row);
	json_object_del(o, "error_message");
	json_array_append_new(arg, o);
	return 0;
}

static void
ops_list(struct conn *conn, struct request *req, json_t *reply)
{
	struct proto_error err = { 0 };
	const char *state_name = NULL;
	int64_t limit = OPS_LIST_DEFAULT;
	int state = -1;
	json_t *tasks;

	if (proto_get_string(req->root, "state", false, &state_name, &err) < 0 ||
	    proto_get_int(req->root, "limit", false, 1, OPS_LIST_MAX, &limit, &err) < 0)
		return ops_bad(conn, req, &err);
	if (state_name != NULL && (state = proto_state_parse(state_name)) < 0)
		return ops_error(conn, req, "bad_request",
		    "field 'state': expected queued, running, completed, failed or cancelled, got '%.32s'",
		    state_name);
	tasks = json_array();
	if (store_list(kgymd_store, state, (int)limit, ops_list_row, tasks) < 0) {
		json_decref(tasks);
		return ops_error(conn, req, "internal", "the task store failed to list tasks");
	}
	json_object_set_new(reply, "tasks", tasks);
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
	[OP_SUBMIT] = { ops_submit, false },
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

void
ops_dispatch(struct conn *conn, struct request *req)
{
	const struct ops_entry *e = &ops_table[req->op];
	json_t *reply;

	if (e->admin && !conn->admin) {
		ops_error(conn, req, "forbidden", "op '%s' is for admin peers (admin_uids); uid %lu is not one",
		    proto_op_name(req->op), (unsigned long)conn->uid);
		return;
	}
	if ((reply = proto_reply_ok(req->id)) == NULL)
		return;
	e->handler(conn, req, reply);
	json_decref(reply);
}

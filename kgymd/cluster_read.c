/*
 * cluster_read.c -- what any node may ask of the shared queue about any
 * task: a task's row (and result), a cancel, a page of the listing, and
 * the nodes' heartbeats; and the helpers that read hiredis's replies.
 * Each answer comes back on the loop through its callback; a NULL reply
 * (Redis away) becomes -EAGAIN.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* ----------------------------------------------------------- replies */

const char *
cluster_str(const redisReply *r)
{
	return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ?
	    r->str : NULL;
}

long long
cluster_int(const redisReply *r, long long def)
{
	if (r == NULL)
		return def;
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer;
	if (r->type == REDIS_REPLY_STRING)
		return strtoll(r->str, NULL, 10);
	return def;
}

char *
cluster_dup(const redisReply *r)
{
	const char *s = cluster_str(r);

	return s != NULL ? strdup(s) : NULL;
}

bool
cluster_reply_ok(const redisReply *r, const char *what)
{
	if (r == NULL)
		return false;
	if (r->type == REDIS_REPLY_ERROR) {
		log_warnx("cluster: Redis refused %s: %s", what, r->str);
		return false;
	}
	return true;
}

int
cluster_eval(const char *script, struct cluster_argv *a, cluster_reply_cb *cb, void *arg)
{
	int error = cluster_command(cb, arg, (int)a->n, a->v, a->len);

	cluster_argv_clear(a);
	return error;
}

/* Start an EVAL of script with no keys. */
int
cluster_eval_begin(struct cluster_argv *a, const char *script)
{
	memset(a, 0, sizeof *a);
	if (cluster_argv_str(a, "EVAL") < 0 || cluster_argv_str(a, script) < 0 ||
	    cluster_argv_str(a, "0") < 0)
		return -ENOMEM;
	return 0;
}

/* ------------------------------------------------------------- lookups */

#define QR_FIELDS	"state", "owner", "workflow", "prio", "attempt", "created_ms", \
	"started_ms", "finished_ms", "error_code", "error_message", "seq", "timeout_s", \
	"result"

struct cluster_lookup {
	char id[KGYM_TASK_ID_MAX + 1];
	queue_lookup_cb *cb;
	void *arg;
	int cancel;			/* 1: a cancel's finish script */
};

static void
qr_row_from_hash(struct store_row *row, const char *id, redisReply *const *f, bool with_result)
{
	memset(row, 0, sizeof *row);
	row->id = (char *)id;
	row->state = (enum task_state)cluster_int(f[0], 0);
	row->owner = (char *)(cluster_str(f[1]) != NULL ? f[1]->str : "");
	row->workflow = (char *)(cluster_str(f[2]) != NULL ? f[2]->str : "");
	row->prio = (enum task_prio)cluster_int(f[3], PRIO_NORMAL);
	row->attempt = (int)cluster_int(f[4], 0);
	row->created_ms = cluster_int(f[5], 0);
	row->started_ms = cluster_int(f[6], 0);
	row->finished_ms = cluster_int(f[7], 0);
	row->error_code = cluster_str(f[8]) != NULL && f[8]->str[0] != '\0' ? f[8]->str : NULL;
	row->error_message = cluster_str(f[9]) != NULL && f[9]->str[0] != '\0' ? f[9]->str : NULL;
	row->seq = cluster_int(f[10], 0);
	row->timeout_s = cluster_str(f[11]) != NULL ? strtod(f[11]->str, NULL) : 0;
	row->result = with_result ? (char *)cluster_str(f[12]) : NULL;
}

static void
cluster_lookup_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct cluster_lookup *l = arg;
	redisReply *reply = r;
	struct store_row row;

	if (reply == NULL || !cluster_reply_ok(reply, "a lookup") ||
	    reply->type != REDIS_REPLY_ARRAY || reply->elements != 13)
		l->cb(reply == NULL ? -EAGAIN : -EIO, NULL, l->arg);
	else if (cluster_str(reply->element[0]) == NULL)
		l->cb(-ENOENT, NULL, l->arg);
	else {
		qr_row_from_hash(&row, l->id, reply->element, true);
		l->cb(0, &row, l->arg);
	}
	free(l);
}

void
cluster_lookup(const char *id, bool with_result, queue_lookup_cb *cb, void *arg)
{
	static const char *fields[] = { QR_FIELDS };
	struct cluster_argv a = { 0 };
	struct cluster_lookup *l;
	size_t i;
	int error;

	if ((l = calloc(1, sizeof *l)) == NULL)
		return cb(-ENOMEM, NULL, arg);
	snprintf(l->id, sizeof l->id, "%s", id);
	l->cb = cb;
	l->arg = arg;
	error = cluster_argv_str(&a, "HMGET");
	error = error ?: cluster_argv_fmt(&a, "kgym:t:%s", id);
	for (i = 0; i < sizeof fields / sizeof fields[0] && error == 0; i++)
		error = cluster_argv_str(&a, i == 12 && !with_result ? "-" : fields[i]);
	if (error == 0 && (error = cluster_command(cluster_lookup_reply, l, (int)a.n, a.v, a.len)) == 0) {
		cluster_argv_clear(&a);
		return;
	}
	cluster_argv_clear(&a);
	free(l);
	cb(error, NULL, arg);
}

/* Cancel: the finish script with "cancelled"; then the row as it stands. */
static void
cluster_cancel_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct cluster_lookup *l = arg;
	redisReply *reply = r, *e;
	struct store_row row;
	long long won;

	if (reply == NULL || !cluster_reply_ok(reply, "a cancel") ||
	    reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 ||
	    reply->element[0]->type != REDIS_REPLY_ARRAY) {
		l->cb(reply == NULL ? -EAGAIN : -EIO, NULL, l->arg);
		free(l);
		return;
	}
	e = reply->element[0];
	won = cluster_int(e->element[0], -1);
	memset(&row, 0, sizeof row);
	row.id = l->id;
	row.state = won == 1 ? TASK_CANCELLED : (enum task_state)cluster_int(e->elements > 1 ?
	    e->element[1] : NULL, TASK_FAILED);
	l->cb(won == 1 ? 0 : won == 0 ? -EALREADY : -ENOENT, &row, l->arg);
	free(l);
}

void
cluster_cancel(const char *id, queue_lookup_cb *cb, void *arg)
{
	struct cluster_argv a;
	struct cluster_lookup *l;
	json_t *result;
	char *text;
	int error;

	if ((l = calloc(1, sizeof *l)) == NULL)
		return cb(-ENOMEM, NULL, arg);
	snprintf(l->id, sizeof l->id, "%s", id);
	l->cb = cb;
	l->arg = arg;
	result = sched_error_result(id, "CANCELLED", "cancelled by a client");
	text = json_dumps(result, JSON_COMPACT);
	json_decref(result);
	error = cluster_eval_begin(&a, cluster_lua_finish);
	error = error ?: cluster_argv_str(&a, CLUSTER_GROUP);
	error = error ?: cluster_argv_str(&a, cluster_node);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)kgymd_config->cluster_result_ttl_s);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)stats_wall_ms());
	error = error ?: cluster_argv_str(&a, id);
	error = error ?: cluster_argv_fmt(&a, "%d", TASK_CANCELLED);
	error = error ?: cluster_argv_str(&a, "CANCELLED");
	error = error ?: cluster_argv_str(&a, "cancelled by a client");
	error = error ?: cluster_argv_str(&a, text != NULL ? text : "{}");
	/* The words are sent (copied into hiredis's buffer) by cluster_eval. */
	if (error < 0) {
		cluster_argv_clear(&a);
	} else if ((error = cluster_eval(cluster_lua_finish, &a, cluster_cancel_reply, l)) == 0) {
		free(text);
		return;
	}
	free(text);
	free(l);
	cb(error, NULL, arg);
}

/* --------------------------------------------------------------- list */

struct cluster_list {
	queue_row_cb *row_cb;
	void (*done)(int, void *);
	void *arg;
};

static void
cluster_list_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct cluster_list *l = arg;
	redisReply *reply = r, *e;
	struct store_row row;
	size_t i;

	if (reply == NULL || !cluster_reply_ok(reply, "a listing") ||
	    reply->type != REDIS_REPLY_ARRAY) {
		l->done(reply == NULL ? -EAGAIN : -EIO, l->arg);
		free(l);
		return;
	}
	for (i = 0; i < reply->elements; i++) {
		e = reply->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 11 || cluster_str(e->element[0]) == NULL)
			continue;
		memset(&row, 0, sizeof row);
		row.id = e->element[0]->str;
		row.seq = cluster_int(e->element[1], 0);
		row.state = (enum task_state)cluster_int(e->element[2], 0);
		row.owner = e->element[3]->str;
		row.workflow = e->element[4]->str;
		row.prio = (enum task_prio)cluster_int(e->element[5], PRIO_NORMAL);
		row.attempt = (int)cluster_int(e->element[6], 0);
		row.created_ms = cluster_int(e->element[7], 0);
		row.started_ms = cluster_int(e->element[8], 0);
		row.finished_ms = cluster_int(e->element[9], 0);
		row.error_code = cluster_str(e->element[10]) != NULL && e->element[10]->str[0] != '\0' ?
		    e->element[10]->str : NULL;
		l->row_cb(&row, l->arg);
	}
	l->done(0, l->arg);
	free(l);
}

void
cluster_list(int state, const char *owner, int64_t before_seq, int limit, queue_row_cb *row_cb,
    void (*done)(int, void *), void *arg)
{
	struct cluster_argv a;
	struct cluster_list *l;
	int error;

	if ((l = calloc(1, sizeof *l)) == NULL)
		return done(-ENOMEM, arg);
	l->row_cb = row_cb;
	l->done = done;
	l->arg = arg;
	error = cluster_eval_begin(&a, cluster_lua_list);
	error = error ?: cluster_argv_str(&a, owner != NULL ? owner : "");
	error = error ?: cluster_argv_fmt(&a, "%d", state);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)(before_seq > 0 ? before_seq : 0));
	error = error ?: cluster_argv_fmt(&a, "%d", limit);
	if (error < 0)
		cluster_argv_clear(&a);
	else if ((error = cluster_eval(cluster_lua_list, &a, cluster_list_reply, l)) == 0)
		return;
	free(l);
	done(error, arg);
}

/* -------------------------------------------------------------- nodes */

struct cluster_nodes {
	void (*cb)(json_t *, void *);
	void *arg;
};

static void
cluster_nodes_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct cluster_nodes *n = arg;
	redisReply *reply = r;
	json_t *nodes = json_array(), *node;
	int64_t now = stats_wall_ms(), hb;
	size_t i;

	if (reply != NULL && reply->type == REDIS_REPLY_ARRAY) {
		for (i = 0; i + 1 < reply->elements; i += 2) {
			if (cluster_str(reply->element[i + 1]) == NULL ||
			    (node = json_loads(reply->element[i + 1]->str, 0, NULL)) == NULL)
				continue;
			hb = json_integer_value(json_object_get(node, "heartbeat_ms"));
			json_object_set_new(node, "heartbeat_age_ms", json_integer(now - hb));
			json_object_set_new(node, "alive", json_boolean(now - hb <=
			    kgymd_config->cluster_lease_s * 1000));
			json_array_append_new(nodes, node);
		}
	}
	n->cb(reply != NULL ? nodes : NULL, n->arg);
	json_decref(nodes);
	free(n);
}

void
cluster_nodes(void (*cb)(json_t *, void *), void *arg)
{
	const char *argv[] = { "HGETALL", "kgym:nodes" };
	size_t lens[] = { 7, 10 };
	struct cluster_nodes *n;

	if ((n = calloc(1, sizeof *n)) == NULL)
		return cb(NULL, arg);
	n->cb = cb;
	n->arg = arg;
	if (cluster_command(cluster_nodes_reply, n, 2, argv, lens) < 0) {
		free(n);
		cb(NULL, arg);
	}
}


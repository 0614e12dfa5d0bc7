/*
 * queue_redis.c -- the queue backend of several nodes: Redis Streams with
 * one consumer group (DESIGN §12, kgymd.conf(5) "THE [cluster] SECTION").
 *
 * A submit is added to Redis (the task's hash and an entry of its
 * priority's stream, one script for the batch) and then to this node's
 * own store; "accepted" is said once both hold it, and a submit while
 * Redis is unreachable is refused `unavailable`.  Every node takes
 * entries (XREADGROUP, in the claim script) only while it has room under
 * max_running_tasks, keeps each claimed task in its store, renews its
 * claims every lease/3 (the heartbeat), and at the end writes the result
 * first to its store, then to Redis with the finish script, which
 * acknowledges the entry in the same step.  Entries idle past lease (a
 * dead or cut-off node) are reclaimed by any node (XAUTOCLAIM, every
 * lease/2), each claim counting an attempt.  The finish script writes a
 * result only while the task is not final, so each task has one result;
 * a node that loses learns the result that stands, and tells its waiters
 * that one.  Results that cannot reach Redis wait here, in memory (and in
 * the store), and are written when Redis is back; a node that dies
 * meanwhile leaves entries that others reclaim and run again.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "cluster.h"

#define QR_UNAVAILABLE	"the cluster queue (Redis) is unavailable; try again later"

static char qr_node[65];
static struct event *qr_heartbeat_ev, *qr_reclaim_ev;
static TAILQ_HEAD(, queue_marks) qr_outbox = TAILQ_HEAD_INITIALIZER(qr_outbox);
static bool qr_claiming, qr_claim_again, qr_reclaim;
static size_t qr_adopting;		/* claimed, not yet handed to sched */
static char qr_cursor[PRIO__COUNT][48] = { "0-0", "0-0", "0-0" };

/* The entries this node holds, by task id, for the heartbeat. */
struct qr_claim {
	char id[KGYM_TASK_ID_MAX + 1];
	int prio;
	char entry[48];
};
static void *qr_claims;
static size_t qr_nclaims;

static int
qr_claim_cmp(const void *a, const void *b)
{
	return strcmp(((const struct qr_claim *)a)->id, ((const struct qr_claim *)b)->id);
}

static void
qr_claim_put(const char *id, int prio, const char *entry)
{
	struct qr_claim *c, **found;

	if ((c = calloc(1, sizeof *c)) == NULL)
		return;
	snprintf(c->id, sizeof c->id, "%s", id);
	snprintf(c->entry, sizeof c->entry, "%s", entry);
	c->prio = prio;
	if ((found = tsearch(c, &qr_claims, qr_claim_cmp)) == NULL) {
		free(c);
		return;
	}
	if (*found != c) {
		(*found)->prio = prio;
		snprintf((*found)->entry, sizeof (*found)->entry, "%s", entry);
		free(c);
	} else {
		qr_nclaims++;
	}
}

static void
qr_claim_drop(const char *id)
{
	struct qr_claim key, **found;
	struct qr_claim *c;

	snprintf(key.id, sizeof key.id, "%s", id);
	if ((found = tfind(&key, &qr_claims, qr_claim_cmp)) == NULL)
		return;
	c = *found;
	tdelete(&key, &qr_claims, qr_claim_cmp);
	free(c);
	qr_nclaims--;
}

/* ----------------------------------------------------------- replies */

static const char *
qr_str(const redisReply *r)
{
	return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ?
	    r->str : NULL;
}

static long long
qr_int(const redisReply *r, long long def)
{
	if (r == NULL)
		return def;
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer;
	if (r->type == REDIS_REPLY_STRING)
		return strtoll(r->str, NULL, 10);
	return def;
}

static char *
qr_dup(const redisReply *r)
{
	const char *s = qr_str(r);

	return s != NULL ? strdup(s) : NULL;
}

static bool
qr_reply_ok(const redisReply *r, const char *what)
{
	if (r == NULL)
		return false;
	if (r->type == REDIS_REPLY_ERROR) {
		log_warnx("cluster: Redis refused %s: %s", what, r->str);
		return false;
	}
	return true;
}

static int
qr_eval(const char *script, struct cluster_argv *a, cluster_reply_cb *cb, void *arg)
{
	int error = cluster_command(cb, arg, (int)a->n, a->v, a->len);

	cluster_argv_clear(a);
	return error;
}

/* Start an EVAL of script with no keys. */
static int
qr_eval_begin(struct cluster_argv *a, const char *script)
{
	memset(a, 0, sizeof *a);
	if (cluster_argv_str(a, "EVAL") < 0 || cluster_argv_str(a, script) < 0 ||
	    cluster_argv_str(a, "0") < 0)
		return -ENOMEM;
	return 0;
}

/* ------------------------------------------------------------- submit */

struct qr_submit {
	struct queue_batch *b;
	void (*done)(struct queue_batch *, void *);
	void *arg;
};

static void
qr_submit_stored(struct queue_batch *b, void *arg)
{
	struct qr_submit *s = arg;

	if (b->error < 0)
		log_errorx("cluster: %zu tasks are in Redis but not in this node's store: %s",
		    b->n, b->cause != NULL ? b->cause : "?");
	b->done = s->done;
	b->arg = s->arg;
	free(s);
	b->done(b, b->arg);
}

static void
qr_submit_fail(struct qr_submit *s, int error, const char *cause)
{
	struct queue_batch *b = s->b;

	b->error = error;
	free(b->cause);
	b->cause = strdup(cause);
	b->done = s->done;
	b->arg = s->arg;
	free(s);
	b->done(b, b->arg);
}

static void
qr_submit_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct qr_submit *s = arg;
	struct queue_batch *b = s->b;
	redisReply *reply = r, *e;
	size_t i;

	if (reply == NULL)
		return qr_submit_fail(s, -EAGAIN, QR_UNAVAILABLE);
	if (!qr_reply_ok(reply, "a submission") || reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != b->n)
		return qr_submit_fail(s, -EIO, "the cluster queue (Redis) refused the submission");
	for (i = 0; i < b->n; i++) {
		e = reply->element[i];
		if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
		    qr_int(e->element[0], 0) == 1) {
			b->t[i].dup = true;
			b->t[i].dup_state = (enum task_state)qr_int(e->element[1], 0);
			b->t[i].dup_owner = qr_dup(e->element[2]);
			if (b->t[i].dup_owner == NULL)
				b->t[i].dup_owner = strdup("");
		}
	}
	b->done = qr_submit_stored;
	b->arg = s;
	queue_sqlite_submit(b);
}

static void
qr_submit(struct queue_batch *b)
{
	struct cluster_argv a;
	struct qr_submit *s;
	struct queue_task *t;
	size_t i;
	int error = 0;

	if ((s = calloc(1, sizeof *s)) == NULL) {
		b->error = -ENOMEM;
		b->done(b, b->arg);
		return;
	}
	s->b = b;
	s->done = b->done;
	s->arg = b->arg;
	if (!cluster_up())
		return qr_submit_fail(s, -EAGAIN, QR_UNAVAILABLE);
	error = qr_eval_begin(&a, cluster_lua_submit);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)stats_wall_ms());
	error = error ?: cluster_argv_str(&a, qr_node);
	error = error ?: cluster_argv_fmt(&a, "%zu", b->n);
	for (i = 0; i < b->n && error == 0; i++) {
		t = &b->t[i];
		if (t->row.payload == NULL &&
		    (t->row.payload = json_dumps(t->payload, JSON_COMPACT)) == NULL) {
			error = -ENOMEM;
			break;
		}
		error = cluster_argv_str(&a, t->row.id);
		error = error ?: cluster_argv_fmt(&a, "%d", (int)t->row.prio);
		error = error ?: cluster_argv_str(&a, t->row.owner);
		error = error ?: cluster_argv_str(&a, t->row.workflow);
		error = error ?: cluster_argv_fmt(&a, "%.17g", t->row.timeout_s);
		error = error ?: cluster_argv_fmt(&a, "%lld", (long long)t->row.gpu_memory_bytes);
		error = error ?: cluster_argv_fmt(&a, "%lld", (long long)t->row.created_ms);
		error = error ?: cluster_argv_str(&a, t->row.payload);
	}
	if (error < 0) {
		cluster_argv_clear(&a);
		return qr_submit_fail(s, error, "out of memory");
	}
	if (qr_eval(cluster_lua_submit, &a, qr_submit_reply, s) < 0)
		qr_submit_fail(s, -EAGAIN, QR_UNAVAILABLE);
}

/* -------------------------------------------------------------- claim */

static void qr_claim(size_t room);

static void
qr_adopted(struct queue_batch *b, void *arg)
{
	size_t i;
	int error;

	qr_adopting -= b->n;
	for (i = 0; i < b->n; i++) {
		if (b->error < 0) {
			/* Not in our store: leave it to be reclaimed after the lease. */
			qr_claim_drop(b->t[i].row.id);
			continue;
		}
		/* A task live here already (our own entry, reclaimed by us) goes on as it is. */
		if (task_index_find(b->t[i].row.id) != NULL)
			continue;
		error = sched_adopt(&b->t[i].row, b->t[i].payload);
		b->t[i].payload = NULL;		/* sched's now, or freed */
		if (error < 0) {
			log_warnx("cluster: task %s: cannot queue it here: %s",
			    b->t[i].row.id, strerror(-error));
			qr_claim_drop(b->t[i].row.id);
		}
	}
	queue_batch_clear(b);
	free(b);
	sched_kick();
}

static int
qr_claim_entry(struct queue_batch *b, const redisReply *e)
{
	struct queue_task *t;
	json_error_t jerr;
	const char *payload;

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 11 || qr_str(e->element[0]) == NULL ||
	    qr_str(e->element[1]) == NULL)
		return -EPROTO;
	if ((t = queue_batch_add(b)) == NULL)
		return -ENOMEM;
	t->row.id = qr_dup(e->element[0]);
	t->row.prio = (enum task_prio)qr_int(e->element[2], PRIO_NORMAL);
	t->row.attempt = (int)qr_int(e->element[3], 1) - 1;	/* dispatch counts it */
	t->row.owner = qr_dup(e->element[4]);
	t->row.workflow = qr_dup(e->element[5]);
	t->row.timeout_s = qr_str(e->element[6]) != NULL ? strtod(e->element[6]->str, NULL) : 0;
	t->row.gpu_memory_bytes = qr_int(e->element[7], 0);
	t->row.created_ms = qr_int(e->element[8], 0);
	t->row.state = TASK_QUEUED;
	payload = qr_str(e->element[9]);
	t->row.payload = payload != NULL ? strdup(payload) : NULL;
	t->payload = payload != NULL ? json_loads(payload, 0, &jerr) : NULL;
	if (t->row.owner == NULL)
		t->row.owner = strdup("");
	if (t->row.id == NULL || t->row.workflow == NULL || t->row.owner == NULL)
		return -ENOMEM;
	qr_claim_put(t->row.id, (int)t->row.prio, e->element[1]->str);
	return 0;
}

static void
qr_claim_reply(redisAsyncContext *ac, void *r, void *arg)
{
	size_t asked = (size_t)(uintptr_t)arg, i;
	redisReply *reply = r, *list;
	struct queue_batch *b;

	qr_claiming = false;
	if (reply == NULL || !qr_reply_ok(reply, "a claim") || reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != 2)
		return;
	for (i = 0; i < PRIO__COUNT && i < reply->element[1]->elements; i++)
		if (qr_str(reply->element[1]->element[i]) != NULL)
			snprintf(qr_cursor[i], sizeof qr_cursor[i], "%s",
			    reply->element[1]->element[i]->str);
	list = reply->element[0];
	if (list->type == REDIS_REPLY_ARRAY && list->elements > 0 &&
	    (b = calloc(1, sizeof *b)) != NULL) {
		for (i = 0; i < list->elements; i++)
			if (qr_claim_entry(b, list->element[i]) < 0)
				log_warnx("cluster: a claimed entry could not be read");
		qr_adopting += b->n;
		b->done = qr_adopted;
		queue_sqlite_adopt(b);
	}
	/* A full claim may have left more; a wake-up meanwhile asks again. */
	if (qr_claim_again || (list->type == REDIS_REPLY_ARRAY && list->elements >= asked)) {
		qr_claim_again = false;
		sched_kick();
	}
}

static void
qr_claim(size_t room)
{
	struct cluster_argv a;
	int error, i;

	if (qr_claiming) {
		qr_claim_again = true;
		return;
	}
	if (room <= qr_adopting || !cluster_up())
		return;
	room -= qr_adopting;
	error = qr_eval_begin(&a, cluster_lua_claim);
	error = error ?: cluster_argv_str(&a, CLUSTER_GROUP);
	error = error ?: cluster_argv_str(&a, qr_node);
	error = error ?: cluster_argv_fmt(&a, "%zu", room);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)stats_wall_ms());
	error = error ?: cluster_argv_fmt(&a, "%d", kgymd_config->cluster_max_attempts);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)kgymd_config->cluster_result_ttl_s);
	error = error ?: cluster_argv_str(&a, qr_reclaim ? "1" : "0");
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)kgymd_config->cluster_lease_s * 1000);
	for (i = 0; i < PRIO__COUNT && error == 0; i++)
		error = cluster_argv_str(&a, qr_cursor[i]);
	if (error < 0) {
		cluster_argv_clear(&a);
		return;
	}
	qr_reclaim = false;
	if (qr_eval(cluster_lua_claim, &a, qr_claim_reply, (void *)(uintptr_t)room) == 0)
		qr_claiming = true;
}

/* -------------------------------------------------------------- marks */

static void qr_finish_send(struct queue_marks *m);

static void
qr_finish_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct queue_marks *m = arg;
	redisReply *reply = r, *e;
	struct queue_mark *t;
	json_error_t jerr;
	size_t i;

	if (reply == NULL || !qr_reply_ok(reply, "results") || reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != m->n) {
		/* Kept here until Redis takes them (waiters hear once it has). */
		TAILQ_INSERT_TAIL(&qr_outbox, m, entry);
		return;
	}
	for (i = 0; i < m->n; i++) {
		t = &m->t[i];
		e = reply->element[i];
		qr_claim_drop(t->id);
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 1)
			continue;
		if (qr_int(e->element[0], 1) == -1) {
			log_warnx("task %s: Redis no longer has it (result_ttl?); its result "
			    "stays in this node's store", t->id);
		} else if (qr_int(e->element[0], 1) == 0 && e->elements >= 4) {
			t->lost = true;
			t->state = (enum task_state)qr_int(e->element[1], TASK_FAILED);
			t->canon = qr_str(e->element[2]) != NULL ?
			    json_loads(e->element[2]->str, 0, &jerr) : NULL;
			if (t->canon == NULL)
				t->canon = sched_error_result(t->id, "SYSTEM_ERROR",
				    "the result that stands could not be read");
			log_info("task %s: %s's result stands (%s); this node's is dropped",
			    t->id, qr_str(e->element[3]) != NULL ? e->element[3]->str : "another node",
			    proto_state_name(t->state));
		}
	}
	m->done(m, m->arg);
}

static void
qr_finish_send(struct queue_marks *m)
{
	struct cluster_argv a;
	size_t i;
	int error;

	error = qr_eval_begin(&a, cluster_lua_finish);
	error = error ?: cluster_argv_str(&a, CLUSTER_GROUP);
	error = error ?: cluster_argv_str(&a, qr_node);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)kgymd_config->cluster_result_ttl_s);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)m->now_ms);
	for (i = 0; i < m->n && error == 0; i++) {
		error = cluster_argv_str(&a, m->t[i].id);
		error = error ?: cluster_argv_fmt(&a, "%d", (int)m->t[i].state);
		error = error ?: cluster_argv_str(&a, m->t[i].code);
		error = error ?: cluster_argv_str(&a, m->t[i].message);
		error = error ?: cluster_argv_str(&a, m->t[i].text);
	}
	if (error < 0 || qr_eval(cluster_lua_finish, &a, qr_finish_reply, m) < 0) {
		if (error < 0)
			cluster_argv_clear(&a);
		TAILQ_INSERT_TAIL(&qr_outbox, m, entry);
	}
}

struct qr_mark {
	void (*done)(struct queue_marks *, void *);
	void *arg;
};

/* In this node's store: now to Redis. */
static void
qr_done_stored(struct queue_marks *m, void *arg)
{
	struct qr_mark *k = arg;

	m->done = k->done;
	m->arg = k->arg;
	free(k);
	if (m->error < 0) {
		m->done(m, m->arg);	/* sched keeps them and tries again */
		return;
	}
	qr_finish_send(m);
}

static void
qr_mark_done(struct queue_marks *m)
{
	struct qr_mark *k;

	if ((k = calloc(1, sizeof *k)) == NULL) {
		m->error = -ENOMEM;
		m->done(m, m->arg);
		return;
	}
	k->done = m->done;
	k->arg = m->arg;
	m->done = qr_done_stored;
	m->arg = k;
	queue_sqlite_mark_done(m);
}

static void
qr_outbox_flush(void)
{
	TAILQ_HEAD(, queue_marks) todo = TAILQ_HEAD_INITIALIZER(todo);
	struct queue_marks *m;
	size_t n = 0;

	TAILQ_CONCAT(&todo, &qr_outbox, entry);
	while ((m = TAILQ_FIRST(&todo)) != NULL) {
		TAILQ_REMOVE(&todo, m, entry);
		qr_finish_send(m);
		n++;
	}
	if (n > 0)
		log_info("cluster: %zu groups of results kept while Redis was away are "
		    "being written", n);
}

static int
qr_mark_queued(const char *id)
{
	/* Our entry stays pending: another node (or we) reclaims it after the lease. */
	qr_claim_drop(id);
	return store_mark_queued(kgymd_store, id);
}

/* ---------------------------------------------------------- heartbeat */

struct qr_walk {
	struct cluster_argv *a;
	int error;
};
static struct qr_walk *qr_walking;

static void
qr_walk_claim(const void *node, VISIT which, int depth)
{
	const struct qr_claim *c = *(struct qr_claim *const *)node;
	struct qr_walk *w = qr_walking;

	if ((which != postorder && which != leaf) || w->error < 0)
		return;
	w->error = cluster_argv_fmt(w->a, "%d", c->prio);
	w->error = w->error ?: cluster_argv_str(w->a, c->entry);
	w->error = w->error ?: cluster_argv_str(w->a, c->id);
}

static void
qr_renew_reply(redisAsyncContext *ac, void *r, void *arg)
{
	redisReply *reply = r, *ended, *taken;
	size_t i;

	if (reply == NULL || !qr_reply_ok(reply, "the heartbeat") ||
	    reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
		return;
	ended = reply->element[0];
	taken = reply->element[1];
	for (i = 0; i < ended->elements; i++)
		if (qr_str(ended->element[i]) != NULL)
			sched_ended_elsewhere(ended->element[i]->str);
	for (i = 0; i < taken->elements; i++)
		if (qr_str(taken->element[i]) != NULL)
			log_warnx("task %s: our lease expired and another node holds it now; "
			    "the first result written stands", taken->element[i]->str);
}

static json_t *
qr_node_describe(void)
{
	json_t *pool = pool_describe(), *gpus = json_object_get(pool, "gpus"), *g;
	size_t i, workers = json_array_size(json_object_get(pool, "cpu_workers"));
	json_t *node;

	json_array_foreach(gpus, i, g)
		workers += json_array_size(json_object_get(g, "workers"));
	node = json_pack("{s:s, s:I, s:I, s:I, s:I, s:i, s:b}", "node", qr_node,
	    "heartbeat_ms", (json_int_t)stats_wall_ms(), "gpus", (json_int_t)json_array_size(gpus),
	    "workers", (json_int_t)workers, "running", (json_int_t)sched_running(),
	    "max_running_tasks", kgymd_config->max_running_tasks, "draining", kgymd_draining());
	json_decref(pool);
	return node;
}

static void
qr_heartbeat(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { 0, 0 };
	int64_t ms = kgymd_config->cluster_lease_s * 1000 / 3;
	struct cluster_argv a;
	struct qr_walk w = { .a = &a };
	json_t *node;
	char *text;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(qr_heartbeat_ev, &tv);
	if (!cluster_up())
		return;
	node = qr_node_describe();
	text = json_dumps(node, JSON_COMPACT);
	json_decref(node);
	w.error = qr_eval_begin(&a, cluster_lua_renew);
	w.error = w.error ?: cluster_argv_str(&a, CLUSTER_GROUP);
	w.error = w.error ?: cluster_argv_str(&a, qr_node);
	w.error = w.error ?: cluster_argv_str(&a, text != NULL ? text : "{}");
	qr_walking = &w;
	twalk(qr_claims, qr_walk_claim);
	qr_walking = NULL;
	if (w.error == 0)
		qr_eval(cluster_lua_renew, &a, qr_renew_reply, NULL);
	else
		cluster_argv_clear(&a);
	free(text);
}

static void
qr_reclaim_tick(evutil_socket_t fd, short what, void *arg)
{
	int64_t ms = kgymd_config->cluster_lease_s * 1000 / 2;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(qr_reclaim_ev, &tv);
	qr_reclaim = true;
	sched_kick();
}

/* ------------------------------------------------------------- lookups */

#define QR_FIELDS	"state", "owner", "workflow", "prio", "attempt", "created_ms", \
	"started_ms", "finished_ms", "error_code", "error_message", "seq", "timeout_s", \
	"result"

struct qr_lookup {
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
	row->state = (enum task_state)qr_int(f[0], 0);
	row->owner = (char *)(qr_str(f[1]) != NULL ? f[1]->str : "");
	row->workflow = (char *)(qr_str(f[2]) != NULL ? f[2]->str : "");
	row->prio = (enum task_prio)qr_int(f[3], PRIO_NORMAL);
	row->attempt = (int)qr_int(f[4], 0);
	row->created_ms = qr_int(f[5], 0);
	row->started_ms = qr_int(f[6], 0);
	row->finished_ms = qr_int(f[7], 0);
	row->error_code = qr_str(f[8]) != NULL && f[8]->str[0] != '\0' ? f[8]->str : NULL;
	row->error_message = qr_str(f[9]) != NULL && f[9]->str[0] != '\0' ? f[9]->str : NULL;
	row->seq = qr_int(f[10], 0);
	row->timeout_s = qr_str(f[11]) != NULL ? strtod(f[11]->str, NULL) : 0;
	row->result = with_result ? (char *)qr_str(f[12]) : NULL;
}

static void
qr_lookup_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct qr_lookup *l = arg;
	redisReply *reply = r;
	struct store_row row;

	if (reply == NULL || !qr_reply_ok(reply, "a lookup") ||
	    reply->type != REDIS_REPLY_ARRAY || reply->elements != 13)
		l->cb(reply == NULL ? -EAGAIN : -EIO, NULL, l->arg);
	else if (qr_str(reply->element[0]) == NULL)
		l->cb(-ENOENT, NULL, l->arg);
	else {
		qr_row_from_hash(&row, l->id, reply->element, true);
		l->cb(0, &row, l->arg);
	}
	free(l);
}

static void
qr_lookup(const char *id, bool with_result, queue_lookup_cb *cb, void *arg)
{
	static const char *fields[] = { QR_FIELDS };
	struct cluster_argv a = { 0 };
	struct qr_lookup *l;
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
	if (error == 0 && (error = cluster_command(qr_lookup_reply, l, (int)a.n, a.v, a.len)) == 0) {
		cluster_argv_clear(&a);
		return;
	}
	cluster_argv_clear(&a);
	free(l);
	cb(error, NULL, arg);
}

/* Cancel: the finish script with "cancelled"; then the row as it stands. */
static void
qr_cancel_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct qr_lookup *l = arg;
	redisReply *reply = r, *e;
	struct store_row row;
	long long won;

	if (reply == NULL || !qr_reply_ok(reply, "a cancel") ||
	    reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 ||
	    reply->element[0]->type != REDIS_REPLY_ARRAY) {
		l->cb(reply == NULL ? -EAGAIN : -EIO, NULL, l->arg);
		free(l);
		return;
	}
	e = reply->element[0];
	won = qr_int(e->element[0], -1);
	memset(&row, 0, sizeof row);
	row.id = l->id;
	row.state = won == 1 ? TASK_CANCELLED : (enum task_state)qr_int(e->elements > 1 ?
	    e->element[1] : NULL, TASK_FAILED);
	l->cb(won == 1 ? 0 : won == 0 ? -EALREADY : -ENOENT, &row, l->arg);
	free(l);
}

static void
qr_cancel(const char *id, queue_lookup_cb *cb, void *arg)
{
	struct cluster_argv a;
	struct qr_lookup *l;
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
	error = qr_eval_begin(&a, cluster_lua_finish);
	error = error ?: cluster_argv_str(&a, CLUSTER_GROUP);
	error = error ?: cluster_argv_str(&a, qr_node);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)kgymd_config->cluster_result_ttl_s);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)stats_wall_ms());
	error = error ?: cluster_argv_str(&a, id);
	error = error ?: cluster_argv_fmt(&a, "%d", TASK_CANCELLED);
	error = error ?: cluster_argv_str(&a, "CANCELLED");
	error = error ?: cluster_argv_str(&a, "cancelled by a client");
	error = error ?: cluster_argv_str(&a, text != NULL ? text : "{}");
	free(text);
	if (error < 0) {
		cluster_argv_clear(&a);
	} else if ((error = qr_eval(cluster_lua_finish, &a, qr_cancel_reply, l)) == 0) {
		return;
	}
	free(l);
	cb(error, NULL, arg);
}

/* --------------------------------------------------------------- list */

struct qr_list {
	queue_row_cb *row_cb;
	void (*done)(int, void *);
	void *arg;
};

static void
qr_list_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct qr_list *l = arg;
	redisReply *reply = r, *e;
	struct store_row row;
	size_t i;

	if (reply == NULL || !qr_reply_ok(reply, "a listing") ||
	    reply->type != REDIS_REPLY_ARRAY) {
		l->done(reply == NULL ? -EAGAIN : -EIO, l->arg);
		free(l);
		return;
	}
	for (i = 0; i < reply->elements; i++) {
		e = reply->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 11 || qr_str(e->element[0]) == NULL)
			continue;
		memset(&row, 0, sizeof row);
		row.id = e->element[0]->str;
		row.seq = qr_int(e->element[1], 0);
		row.state = (enum task_state)qr_int(e->element[2], 0);
		row.owner = e->element[3]->str;
		row.workflow = e->element[4]->str;
		row.prio = (enum task_prio)qr_int(e->element[5], PRIO_NORMAL);
		row.attempt = (int)qr_int(e->element[6], 0);
		row.created_ms = qr_int(e->element[7], 0);
		row.started_ms = qr_int(e->element[8], 0);
		row.finished_ms = qr_int(e->element[9], 0);
		row.error_code = qr_str(e->element[10]) != NULL && e->element[10]->str[0] != '\0' ?
		    e->element[10]->str : NULL;
		l->row_cb(&row, l->arg);
	}
	l->done(0, l->arg);
	free(l);
}

static void
qr_list(int state, const char *owner, int64_t before_seq, int limit, queue_row_cb *row_cb,
    void (*done)(int, void *), void *arg)
{
	struct cluster_argv a;
	struct qr_list *l;
	int error;

	if ((l = calloc(1, sizeof *l)) == NULL)
		return done(-ENOMEM, arg);
	l->row_cb = row_cb;
	l->done = done;
	l->arg = arg;
	error = qr_eval_begin(&a, cluster_lua_list);
	error = error ?: cluster_argv_str(&a, owner != NULL ? owner : "");
	error = error ?: cluster_argv_fmt(&a, "%d", state);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)(before_seq > 0 ? before_seq : 0));
	error = error ?: cluster_argv_fmt(&a, "%d", limit);
	if (error < 0)
		cluster_argv_clear(&a);
	else if ((error = qr_eval(cluster_lua_list, &a, qr_list_reply, l)) == 0)
		return;
	free(l);
	done(error, arg);
}

/* -------------------------------------------------------------- nodes */

struct qr_nodes {
	void (*cb)(json_t *, void *);
	void *arg;
};

static void
qr_nodes_reply(redisAsyncContext *ac, void *r, void *arg)
{
	struct qr_nodes *n = arg;
	redisReply *reply = r;
	json_t *nodes = json_array(), *node;
	int64_t now = stats_wall_ms(), hb;
	size_t i;

	if (reply != NULL && reply->type == REDIS_REPLY_ARRAY) {
		for (i = 0; i + 1 < reply->elements; i += 2) {
			if (qr_str(reply->element[i + 1]) == NULL ||
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

static void
qr_nodes(void (*cb)(json_t *, void *), void *arg)
{
	const char *argv[] = { "HGETALL", "kgym:nodes" };
	size_t lens[] = { 7, 10 };
	struct qr_nodes *n;

	if ((n = calloc(1, sizeof *n)) == NULL)
		return cb(NULL, arg);
	n->cb = cb;
	n->arg = arg;
	if (cluster_command(qr_nodes_reply, n, 2, argv, lens) < 0) {
		free(n);
		cb(NULL, arg);
	}
}

/* ------------------------------------------------------------- events */

static void
qr_done_looked_up(int error, const struct store_row *row, void *arg)
{
	wait_task_answer(arg, error, row);
	free(arg);
}

static void
qr_on_message(const char *channel, const char *data, size_t len)
{
	struct task *task;
	char *id;

	if (strcmp(channel, CLUSTER_CHANNEL_WAKE) == 0) {
		sched_kick();
		return;
	}
	if (strcmp(channel, CLUSTER_CHANNEL_DONE) != 0 || len > KGYM_TASK_ID_MAX)
		return;
	if ((task = task_index_find(data)) != NULL) {
		/* Ended here: nothing to do; ended elsewhere: ours stops. */
		if (!task->finished)
			sched_ended_elsewhere(data);
		return;
	}
	if (wait_watched(data) && (id = strdup(data)) != NULL)
		qr_lookup(id, true, qr_done_looked_up, id);
}

/* Waits for tasks of other nodes may have missed their end while Redis was away. */
static void
qr_ask_again(const char *id)
{
	char *copy;

	if (task_index_find(id) == NULL && (copy = strdup(id)) != NULL)
		qr_lookup(copy, true, qr_done_looked_up, copy);
}

static void
qr_on_up(void)
{
	qr_outbox_flush();
	wait_foreach_watched(qr_ask_again);
	qr_heartbeat(-1, 0, NULL);
	qr_reclaim = true;
	sched_kick();
}

/* ------------------------------------------------------------ start-up */

static int
qr_open(const char *state_dir, char **ret_cause)
{
	int error;

	if (kgymd_config->cluster_node_id[0] != '\0') {
		snprintf(qr_node, sizeof qr_node, "%s", kgymd_config->cluster_node_id);
	} else if (gethostname(qr_node, sizeof qr_node) < 0) {
		*ret_cause = strdup("cannot read the host name for node_id");
		return -errno;
	}
	qr_node[sizeof qr_node - 1] = '\0';
	queue_node = qr_node;
	/* Queued tasks are Redis's to hand out: this store only remembers them. */
	if ((error = queue_sqlite_open(state_dir, false, ret_cause)) < 0)
		return error;
	qr_heartbeat_ev = evtimer_new(kgymd_base, qr_heartbeat, NULL);
	qr_reclaim_ev = evtimer_new(kgymd_base, qr_reclaim_tick, NULL);
	if (qr_heartbeat_ev == NULL || qr_reclaim_ev == NULL) {
		*ret_cause = strdup("out of memory");
		return -ENOMEM;
	}
	if ((error = cluster_start(qr_on_up, qr_on_message, ret_cause)) < 0)
		return error;
	qr_reclaim_tick(-1, 0, NULL);
	log_info("cluster: node %s, lease %llds, max_attempts %d", qr_node,
	    (long long)kgymd_config->cluster_lease_s, kgymd_config->cluster_max_attempts);
	return 0;
}

static void
qr_close(void)
{
	struct queue_marks *m;

	writer_sync();
	cluster_stop();
	while ((m = TAILQ_FIRST(&qr_outbox)) != NULL) {
		TAILQ_REMOVE(&qr_outbox, m, entry);
		log_warnx("cluster: %zu results never reached Redis; their tasks run again "
		    "elsewhere after the lease", m->n);
		queue_marks_free(m);	/* their tasks were freed with the scheduler */
	}
	if (qr_heartbeat_ev != NULL)
		event_free(qr_heartbeat_ev);
	if (qr_reclaim_ev != NULL)
		event_free(qr_reclaim_ev);
	qr_heartbeat_ev = qr_reclaim_ev = NULL;
	tdestroy(qr_claims, free);
	qr_claims = NULL;
	writer_stop();
}

static int
qr_get(const char *id, struct store_row **ret_row)
{
	return store_get(kgymd_store, id, ret_row);
}

static int
qr_get_payload(const char *id, char **ret_payload)
{
	return store_get_payload(kgymd_store, id, ret_payload);
}

static int
qr_prune(int64_t before_ms, int *ret_n, int64_t by_state[TASK__STATE_COUNT])
{
	/* Redis's copies expire by themselves (result_ttl of [cluster]). */
	return store_prune(kgymd_store, before_ms, ret_n, by_state);
}

void
queue_select(const struct config *config)
{
	queue = config->cluster_redis[0] != '\0' ? &queue_redis : &queue_sqlite;
}

const struct queue_backend queue_redis = {
	.name = "redis",
	.local = false,
	.open = qr_open,
	.close = qr_close,
	.submit = qr_submit,
	.claim = qr_claim,
	.mark_running = queue_sqlite_mark_running,
	.mark_done = qr_mark_done,
	.mark_queued = qr_mark_queued,
	.get = qr_get,
	.get_payload = qr_get_payload,
	.lookup = qr_lookup,
	.cancel = qr_cancel,
	.list = qr_list,
	.prune = qr_prune,
	.nodes = qr_nodes,
};

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

char cluster_node[65];
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

/* ------------------------------------------------------------- submit */

static void qr_claim_handle(const redisReply *reply, size_t asked);
static void qr_claim_over(void);
static int qr_claim_args(struct cluster_argv *a, size_t room);
static size_t qr_room(void);

struct qr_submit {
	struct queue_batch *b;
	size_t room;			/* claimed with the submit, at most */
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
	redisReply *reply = r, *e, *out;
	size_t i;

	if (s->room > 0)
		qr_claim_over();
	if (reply == NULL)
		return qr_submit_fail(s, -EAGAIN, QR_UNAVAILABLE);
	if (!cluster_reply_ok(reply, "a submission") || reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_ARRAY ||
	    reply->element[0]->elements != b->n)
		return qr_submit_fail(s, -EIO, "the cluster queue (Redis) refused the submission");
	out = reply->element[0];
	for (i = 0; i < b->n; i++) {
		e = out->element[i];
		if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
		    cluster_int(e->element[0], 0) == 1) {
			b->t[i].dup = true;
			b->t[i].dup_state = (enum task_state)cluster_int(e->element[1], 0);
			b->t[i].dup_owner = cluster_dup(e->element[2]);
			if (b->t[i].dup_owner == NULL)
				b->t[i].dup_owner = strdup("");
		}
	}
	b->done = qr_submit_stored;
	b->arg = s;
	queue_sqlite_submit(b);
	/* Stored after the rows above, in the same group commit as a rule. */
	if (s->room > 0)
		qr_claim_handle(reply->element[1], 0);
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
	/* With room here, the submit claims at once what this node can run. */
	s->room = qr_claiming ? 0 : qr_room();
	error = cluster_eval_begin(&a, cluster_lua_submit);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)stats_wall_ms());
	error = error ?: cluster_argv_str(&a, cluster_node);
	error = error ?: cluster_argv_fmt(&a, "%zu", b->n);
	error = error ?: qr_claim_args(&a, s->room);
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
	if (cluster_eval(cluster_lua_submit, &a, qr_submit_reply, s) < 0)
		return qr_submit_fail(s, -EAGAIN, QR_UNAVAILABLE);
	if (s->room > 0) {
		qr_claiming = true;
		qr_reclaim = false;
	}
}

/* -------------------------------------------------------------- claim */


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

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 11 || cluster_str(e->element[0]) == NULL ||
	    cluster_str(e->element[1]) == NULL)
		return -EPROTO;
	if ((t = queue_batch_add(b)) == NULL)
		return -ENOMEM;
	t->row.id = cluster_dup(e->element[0]);
	t->row.prio = (enum task_prio)cluster_int(e->element[2], PRIO_NORMAL);
	t->row.attempt = (int)cluster_int(e->element[3], 1);
	t->row.started_ms = stats_wall_ms();
	t->row.owner = cluster_dup(e->element[4]);
	t->row.workflow = cluster_dup(e->element[5]);
	t->row.timeout_s = cluster_str(e->element[6]) != NULL ? strtod(e->element[6]->str, NULL) : 0;
	t->row.gpu_memory_bytes = cluster_int(e->element[7], 0);
	t->row.created_ms = cluster_int(e->element[8], 0);
	t->row.state = TASK_RUNNING;	/* the claim is its running mark */
	payload = cluster_str(e->element[9]);
	t->row.payload = payload != NULL ? strdup(payload) : NULL;
	t->payload = payload != NULL ? json_loads(payload, 0, &jerr) : NULL;
	if (t->row.owner == NULL)
		t->row.owner = strdup("");
	if (t->row.id == NULL || t->row.workflow == NULL || t->row.owner == NULL)
		return -ENOMEM;
	qr_claim_put(t->row.id, (int)t->row.prio, e->element[1]->str);
	return 0;
}

/* A claim's reply, {entries, cursors}: store the entries here, then queue them. */
static void
qr_claim_handle(const redisReply *reply, size_t asked)
{
	const redisReply *list;
	struct queue_batch *b;
	size_t i;

	if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
		return;
	for (i = 0; i < PRIO__COUNT && i < reply->element[1]->elements; i++)
		if (cluster_str(reply->element[1]->element[i]) != NULL)
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
	/* A full claim may have left more. */
	if (list->type == REDIS_REPLY_ARRAY && asked > 0 && list->elements >= asked)
		qr_claim_again = true;
}

/* The claim is over: one asked for meanwhile goes now. */
static void
qr_claim_over(void)
{
	qr_claiming = false;
	if (qr_claim_again) {
		qr_claim_again = false;
		sched_kick();
	}
}

static void
qr_claim_reply(redisAsyncContext *ac, void *r, void *arg)
{
	redisReply *reply = r;

	if (reply != NULL && cluster_reply_ok(reply, "a claim"))
		qr_claim_handle(reply, (size_t)(uintptr_t)arg);
	qr_claim_over();
}

/* The claim script's arguments, for `room` entries. */
static int
qr_claim_args(struct cluster_argv *a, size_t room)
{
	int error, i;

	error = cluster_argv_str(a, CLUSTER_GROUP);
	error = error ?: cluster_argv_str(a, cluster_node);
	error = error ?: cluster_argv_fmt(a, "%zu", room);
	error = error ?: cluster_argv_fmt(a, "%lld", (long long)stats_wall_ms());
	error = error ?: cluster_argv_fmt(a, "%d", kgymd_config->cluster_max_attempts);
	error = error ?: cluster_argv_fmt(a, "%lld", (long long)kgymd_config->cluster_result_ttl_s);
	error = error ?: cluster_argv_str(a, qr_reclaim ? "1" : "0");
	error = error ?: cluster_argv_fmt(a, "%lld",
	    (long long)kgymd_config->cluster_lease_s * 1000);
	for (i = 0; i < PRIO__COUNT && error == 0; i++)
		error = cluster_argv_str(a, qr_cursor[i]);
	return error;
}

/* Room for more tasks here, beyond what runs, waits, or is being stored. */
static size_t
qr_room(void)
{
	size_t busy = sched_running() + sched_queued() + qr_adopting;

	if (kgymd_draining() || busy >= (size_t)kgymd_config->max_running_tasks)
		return 0;
	return (size_t)kgymd_config->max_running_tasks - busy;
}

static void
qr_claim(size_t room)
{
	struct cluster_argv a;
	int error;

	if (qr_claiming) {
		qr_claim_again = true;
		return;
	}
	if (room <= qr_adopting || !cluster_up() || kgymd_draining())
		return;
	room -= qr_adopting;
	error = cluster_eval_begin(&a, cluster_lua_claim);
	error = error ?: qr_claim_args(&a, room);
	if (error < 0) {
		cluster_argv_clear(&a);
		return;
	}
	qr_reclaim = false;
	if (cluster_eval(cluster_lua_claim, &a, qr_claim_reply, (void *)(uintptr_t)room) == 0)
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

	if (reply == NULL || !cluster_reply_ok(reply, "results") || reply->type != REDIS_REPLY_ARRAY ||
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
		if (cluster_int(e->element[0], 1) == -1) {
			log_warnx("task %s: Redis no longer has it (result_ttl?); its result "
			    "stays in this node's store", t->id);
		} else if (cluster_int(e->element[0], 1) == 0 && e->elements >= 4) {
			t->lost = true;
			t->state = (enum task_state)cluster_int(e->element[1], TASK_FAILED);
			t->canon = cluster_str(e->element[2]) != NULL ?
			    json_loads(e->element[2]->str, 0, &jerr) : NULL;
			if (t->canon == NULL)
				t->canon = sched_error_result(t->id, "SYSTEM_ERROR",
				    "the result that stands could not be read");
			log_info("task %s: %s's result stands (%s); this node's is dropped",
			    t->id, cluster_str(e->element[3]) != NULL ? e->element[3]->str : "another node",
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

	error = cluster_eval_begin(&a, cluster_lua_finish);
	error = error ?: cluster_argv_str(&a, CLUSTER_GROUP);
	error = error ?: cluster_argv_str(&a, cluster_node);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)kgymd_config->cluster_result_ttl_s);
	error = error ?: cluster_argv_fmt(&a, "%lld", (long long)m->now_ms);
	for (i = 0; i < m->n && error == 0; i++) {
		error = cluster_argv_str(&a, m->t[i].id);
		error = error ?: cluster_argv_fmt(&a, "%d", (int)m->t[i].state);
		error = error ?: cluster_argv_str(&a, m->t[i].code);
		error = error ?: cluster_argv_str(&a, m->t[i].message);
		error = error ?: cluster_argv_str(&a, queue_mark_text(&m->t[i]));
	}
	if (error < 0 || cluster_eval(cluster_lua_finish, &a, qr_finish_reply, m) < 0) {
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

	if (reply == NULL || !cluster_reply_ok(reply, "the heartbeat") ||
	    reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
		return;
	ended = reply->element[0];
	taken = reply->element[1];
	for (i = 0; i < ended->elements; i++)
		if (cluster_str(ended->element[i]) != NULL)
			sched_ended_elsewhere(ended->element[i]->str);
	for (i = 0; i < taken->elements; i++)
		if (cluster_str(taken->element[i]) != NULL)
			log_warnx("task %s: our lease expired and another node holds it now; "
			    "the first result written stands", taken->element[i]->str);
}

static json_t *
cluster_node_describe(void)
{
	json_t *pool = pool_describe(), *gpus = json_object_get(pool, "gpus"), *g;
	size_t i, workers = json_array_size(json_object_get(pool, "cpu_workers"));
	json_t *node;

	json_array_foreach(gpus, i, g)
		workers += json_array_size(json_object_get(g, "workers"));
	node = json_pack("{s:s, s:I, s:I, s:I, s:I, s:i, s:b}", "node", cluster_node,
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
	node = cluster_node_describe();
	text = json_dumps(node, JSON_COMPACT);
	json_decref(node);
	w.error = cluster_eval_begin(&a, cluster_lua_renew);
	w.error = w.error ?: cluster_argv_str(&a, CLUSTER_GROUP);
	w.error = w.error ?: cluster_argv_str(&a, cluster_node);
	w.error = w.error ?: cluster_argv_str(&a, text != NULL ? text : "{}");
	qr_walking = &w;
	twalk(qr_claims, qr_walk_claim);
	qr_walking = NULL;
	if (w.error == 0)
		cluster_eval(cluster_lua_renew, &a, qr_renew_reply, NULL);
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
		cluster_lookup(id, true, qr_done_looked_up, id);
}

/* Waits for tasks of other nodes may have missed their end while Redis was away. */
static void
qr_ask_again(const char *id)
{
	char *copy;

	if (task_index_find(id) == NULL && (copy = strdup(id)) != NULL)
		cluster_lookup(copy, true, qr_done_looked_up, copy);
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
		snprintf(cluster_node, sizeof cluster_node, "%s", kgymd_config->cluster_node_id);
	} else if (gethostname(cluster_node, sizeof cluster_node) < 0) {
		*ret_cause = strdup("cannot read the host name for node_id");
		return -errno;
	}
	cluster_node[sizeof cluster_node - 1] = '\0';
	queue_node = cluster_node;
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
	log_info("cluster: node %s, lease %llds, max_attempts %d", cluster_node,
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
	.lookup = cluster_lookup,
	.cancel = cluster_cancel,
	.list = cluster_list,
	.prune = qr_prune,
	.reachable = cluster_up,
	.nodes = cluster_nodes,
};

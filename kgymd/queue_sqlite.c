/*
 * queue_sqlite.c -- the queue backend of one machine: the SQLite store.
 *
 * Tasks live in the store (store.c); every write of the running daemon
 * is a job of the writer thread (writer.c), committed off the loop in
 * group commits, and a batch's or a mark's done() runs once it is on disk.
 * Reads (status, result, list, a payload at dispatch) use the loop's own
 * connection.  Tasks submitted here run here: the scheduler queues them
 * when their submit is committed, so claim has nothing to do.
 *
 * queue_redis.c keeps this store under it, as each node's own copy of the
 * tasks it accepted or ran, and uses the functions below for it.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

const struct queue_backend *queue = &queue_sqlite;
const char *queue_node;

struct queue_task *
queue_batch_add(struct queue_batch *b)
{
	struct queue_task *nt;

	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 16;

		if ((nt = reallocarray(b->t, cap, sizeof *nt)) == NULL)
			return NULL;
		b->t = nt;
		b->cap = cap;
	}
	memset(&b->t[b->n], 0, sizeof b->t[b->n]);
	return &b->t[b->n++];
}

void
queue_batch_clear(struct queue_batch *b)
{
	size_t i;

	for (i = 0; i < b->n; i++) {
		free(b->t[i].row.id);
		free(b->t[i].row.workflow);
		free(b->t[i].row.payload);
		free(b->t[i].row.owner);
		free(b->t[i].dup_owner);
		json_decref(b->t[i].payload);
	}
	free(b->t);
	free(b->cause);
	b->t = NULL;
	b->cause = NULL;
	b->n = b->cap = 0;
}

struct queue_marks *
queue_marks_new(size_t n)
{
	return calloc(1, sizeof(struct queue_marks) + n * sizeof(struct queue_mark));
}

void
queue_marks_free(struct queue_marks *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->n; i++) {
		free(m->t[i].code);
		free(m->t[i].message);
		free(m->t[i].text);
		json_decref(m->t[i].result);
		json_decref(m->t[i].payload);
		json_decref(m->t[i].canon);
	}
	free(m);
}

/*
 * Encoding a result is the writer's work, not the loop's: 1,000 short
 * tasks' results took ~8% of the loop's time under bench/control's batched
 * submits.  The tree is read-only once the task has ended, and jansson's
 * reference counts are atomic, so another thread may read it.
 */
const char *
queue_mark_text(struct queue_mark *t)
{
	if (t->text == NULL && t->result != NULL)
		t->text = json_dumps(t->result, JSON_COMPACT);
	return t->text;
}

/* ------------------------------------------------------------- submit */

/* In the writer thread: insert the rows; an id the store has is a dup, not a failure. */
static int
queue_sqlite_insert(struct store *store, struct queue_batch *b, bool adopt)
{
	struct queue_task *t;
	size_t i;
	int error;

	for (i = 0; i < b->n; i++) {
		t = &b->t[i];
		if (!adopt && t->dup)
			continue;	/* a backend above found it already */
		/* jansson may read a tree from two threads; only its refcounts are not shared. */
		if (t->row.payload == NULL && t->payload != NULL &&
		    (t->row.payload = json_dumps(t->payload, JSON_COMPACT)) == NULL)
			return -ENOMEM;
		error = store_insert(store, &t->row, &t->seq);
		/* Accepted here, or run here before: now running here (unless it ended here). */
		if (error == -EEXIST && adopt) {
			error = store_mark_running(store, t->row.id, t->row.attempt,
			    t->row.started_ms, NULL);
			if (error < 0 && error != -EALREADY && error != -ENOENT)
				return error;
			continue;
		}
		if (!adopt)
			t->dup = error == -EEXIST;
		if (error < 0 && error != -EEXIST)
			return error;
	}
	return 0;
}

static int
queue_sqlite_submit_run(struct store *store, void *arg)
{
	return queue_sqlite_insert(store, arg, false);
}

static int
queue_sqlite_adopt_run(struct store *store, void *arg)
{
	return queue_sqlite_insert(store, arg, true);
}

static void
queue_sqlite_batch_done(int error, void *arg)
{
	struct queue_batch *b = arg;

	b->error = error;
	if (error < 0 && b->cause == NULL)
		b->cause = strdup("the task store could not commit the submission");
	b->done(b, b->arg);
}

void
queue_sqlite_submit(struct queue_batch *b)
{
	b->job.run = queue_sqlite_submit_run;
	b->job.done = queue_sqlite_batch_done;
	b->job.arg = b;
	writer_submit(&b->job);
}

void
queue_sqlite_adopt(struct queue_batch *b)
{
	b->job.run = queue_sqlite_adopt_run;
	b->job.done = queue_sqlite_batch_done;
	b->job.arg = b;
	writer_submit(&b->job);
}

/* -------------------------------------------------------------- marks */

static int
queue_sqlite_running_run(struct store *store, void *arg)
{
	struct queue_marks *m = arg;
	size_t i;
	int error;

	char *text;

	for (i = 0; i < m->n; i++) {
		/*
		 * A payload the scheduler did not keep is read and parsed here,
		 * not on the loop: jansson takes ~1 ms for a 30 KiB KernelBench
		 * task, time every client would wait.  None (or unparsable): the
		 * loop reads it itself and says why it cannot.
		 */
		text = NULL;
		error = store_mark_running(store, m->t[i].id, m->t[i].attempt, m->now_ms,
		    m->t[i].want_payload ? &text : NULL);
		if (text != NULL)
			m->t[i].payload = json_loads(text, 0, NULL);
		free(text);
		/* Gone or terminal in the store: that task fails, the others go on. */
		if (error < 0 && error != -ENOENT && error != -EALREADY)
			return error;
		m->t[i].error = error;
	}
	return 0;
}

static int
queue_sqlite_done_run(struct store *store, void *arg)
{
	struct queue_marks *m = arg;
	size_t i;
	int error;

	for (i = 0; i < m->n; i++) {
		error = store_mark_done(store, m->t[i].id, m->t[i].state, m->t[i].code,
		    m->t[i].message, queue_mark_text(&m->t[i]), m->now_ms);
		/* Gone or already terminal in the store: nothing left to record. */
		if (error < 0 && error != -ENOENT && error != -EALREADY) {
			log_errorx("task %s: the store could not record its end: %s",
			    m->t[i].id, strerror(-error));
			return error;
		}
	}
	return 0;
}

static void
queue_sqlite_marks_done(int error, void *arg)
{
	struct queue_marks *m = arg;

	m->error = error;
	m->done(m, m->arg);
}

void
queue_sqlite_mark_running(struct queue_marks *m)
{
	m->job.run = queue_sqlite_running_run;
	m->job.done = queue_sqlite_marks_done;
	m->job.arg = m;
	writer_submit(&m->job);
}

void
queue_sqlite_mark_done(struct queue_marks *m)
{
	m->job.run = queue_sqlite_done_run;
	m->job.done = queue_sqlite_marks_done;
	m->job.arg = m;
	writer_submit(&m->job);
}

static int
queue_sqlite_mark_queued(const char *id)
{
	return store_mark_queued(kgymd_store, id);
}

/* ----------------------------------------------------------------- reads */

static int
queue_sqlite_get(const char *id, struct store_row **ret_row)
{
	return store_get(kgymd_store, id, ret_row);
}

static int
queue_sqlite_get_payload(const char *id, char **ret_payload)
{
	return store_get_payload(kgymd_store, id, ret_payload);
}

static void
queue_sqlite_list(int state, const char *owner, int64_t before_seq, int limit,
    queue_row_cb *row_cb, void (*done)(int, void *), void *arg)
{
	done(store_list(kgymd_store, state, owner, before_seq, limit, row_cb, arg), arg);
}

static int
queue_sqlite_prune(int64_t before_ms, int *ret_n, int64_t by_state[TASK__STATE_COUNT])
{
	return store_prune(kgymd_store, before_ms, ret_n, by_state);
}

/* ------------------------------------------------------------ start-up */

static int
queue_sqlite_restore_row(const struct store_row *row, void *arg)
{
	int *n = arg;

	(*n)++;
	return sched_restore(row);
}

/* The shared queue holds what is queued: this copy only remembers it. */
static int
queue_sqlite_skip_row(const struct store_row *row, void *arg)
{
	return 0;
}

static int
queue_sqlite_mkdir(const char *dir, const char *sub, char **ret_cause)
{
	char *path;

	if (asprintf(&path, "%s%s", dir, sub) < 0)
		return -ENOMEM;
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		if (asprintf(ret_cause, "%s: %s", path, strerror(errno)) < 0)
			*ret_cause = NULL;
		free(path);
		return -EIO;
	}
	free(path);
	return 0;
}

/*
 * Open the store and recover it: running tasks of a crashed daemon go
 * back to the queue (or fail after max_attempts) and, when `recover_here`,
 * are queued on this node again.  Then every write goes through the writer.
 */
int
queue_sqlite_open(const char *state_dir, bool recover_here, char **ret_cause)
{
	int64_t counts[TASK__STATE_COUNT];
	int restored = 0, failed = 0, error;
	char *db;

	if ((error = queue_sqlite_mkdir(state_dir, "", ret_cause)) < 0)
		return error;
	if (asprintf(&db, "%s/tasks.db", state_dir) < 0)
		return -ENOMEM;
	if ((kgymd_store = store_open(db, kgymd_config->store_sync_full, ret_cause)) == NULL) {
		free(db);
		return -EIO;
	}
	/* Workers' private directories, and the compile cache they share. */
	if ((error = queue_sqlite_mkdir(state_dir, "/work", ret_cause)) < 0 ||
	    (error = queue_sqlite_mkdir(state_dir, "/cache", ret_cause)) < 0) {
		free(db);
		return error;
	}
	if (store_recover(kgymd_store, recover_here ? kgymd_config->max_attempts : INT_MAX,
	    stats_wall_ms(), recover_here ? queue_sqlite_restore_row : queue_sqlite_skip_row,
	    &restored, &failed) < 0) {
		*ret_cause = strdup("recovery failed");
		free(db);
		return -EIO;
	}
	if (restored > 0 || failed > 0)
		log_info("recovered %d queued tasks; %d failed after max_attempts", restored,
		    failed);
	/* The one count of the whole store: stats follows it from here on. */
	if (store_count(kgymd_store, counts) < 0) {
		*ret_cause = strdup("cannot count its tasks");
		free(db);
		return -EIO;
	}
	stats_set_stored(counts);
	error = writer_start(db, kgymd_config->store_sync_full, ret_cause);
	free(db);
	return error;
}

static int
queue_sqlite_open_here(const char *state_dir, char **ret_cause)
{
	return queue_sqlite_open(state_dir, true, ret_cause);
}

static void
queue_sqlite_close(void)
{
	writer_stop();
}

const struct queue_backend queue_sqlite = {
	.name = "sqlite",
	.local = true,
	.open = queue_sqlite_open_here,
	.close = queue_sqlite_close,
	.submit = queue_sqlite_submit,
	.claim = NULL,
	.mark_running = queue_sqlite_mark_running,
	.mark_done = queue_sqlite_mark_done,
	.mark_queued = queue_sqlite_mark_queued,
	.get = queue_sqlite_get,
	.get_payload = queue_sqlite_get_payload,
	.lookup = NULL,
	.cancel = NULL,
	.list = queue_sqlite_list,
	.prune = queue_sqlite_prune,
	.nodes = NULL,
};

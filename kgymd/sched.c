/*
 * sched.c -- the scheduler: queues, dispatch, completion, cancel, timeouts.
 *
 * Three FIFO queues, one per priority class; a dispatch pass takes the
 * oldest task of the highest non-empty class while fewer than
 * max_running_tasks run, loads its payload from the store, marks it running
 * (one transaction for the whole pass) and hands it to its workflow plugin.
 * The plugin ends it with host->task_finish (sched_finish).  Dispatch passes
 * run from a deferred event (sched_kick), never recursively from inside a
 * plugin call, so a plugin that finishes a task synchronously in start()
 * cannot re-enter the dispatcher.
 *
 * Every state change goes to the store first; memory follows.  A task is
 * freed when it reaches a terminal state; its result then lives only in
 * the store.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kgymd.h"

static struct task_queue sched_queues[PRIO__COUNT];
static struct task_queue sched_running_list;
static struct task_queue sched_batch;	/* inserted, not yet committed */
static size_t sched_nbatch;
static struct task_queue sched_finishing;	/* ended, not yet committed */
static struct event *sched_flush_ev;
static struct event *sched_flush_retry_ev;
static bool sched_batch_broken;	/* the store rolled the open batch back */
static size_t sched_nqueued;
static size_t sched_nrunning;
static bool sched_batch_open;
static bool sched_is_paused;
static struct event *sched_kick_ev;
static void (*sched_idle_cb)(void);

static void sched_dispatch(evutil_socket_t, short, void *);
static void sched_flush(evutil_socket_t, short, void *);

void
sched_init(void)
{
	int i;

	for (i = 0; i < PRIO__COUNT; i++)
		TAILQ_INIT(&sched_queues[i]);
	TAILQ_INIT(&sched_running_list);
	TAILQ_INIT(&sched_batch);
	TAILQ_INIT(&sched_finishing);
	sched_kick_ev = event_new(kgymd_base, -1, 0, sched_dispatch, NULL);
	sched_flush_ev = event_new(kgymd_base, -1, 0, sched_flush, NULL);
	sched_flush_retry_ev = evtimer_new(kgymd_base, sched_flush, NULL);
	if (sched_kick_ev == NULL || sched_flush_ev == NULL || sched_flush_retry_ev == NULL)
		fatalx("sched: cannot create the dispatch events");
}

static void
sched_drop(struct task *task)
{
	task_index_remove(task);
	task_free(task);
}

void
sched_free(void)
{
	struct task *task;
	int i;

	for (i = 0; i < PRIO__COUNT; i++) {
		while ((task = TAILQ_FIRST(&sched_queues[i])) != NULL) {
			TAILQ_REMOVE(&sched_queues[i], task, entry);
			sched_drop(task);
		}
	}
	while ((task = TAILQ_FIRST(&sched_running_list)) != NULL) {
		TAILQ_REMOVE(&sched_running_list, task, entry);
		sched_drop(task);
	}
	sched_flush(-1, 0, NULL);	/* what ended must be written before we go */
	if (sched_kick_ev != NULL)
		event_free(sched_kick_ev);
	if (sched_flush_ev != NULL)
		event_free(sched_flush_ev);
	if (sched_flush_retry_ev != NULL)
		event_free(sched_flush_retry_ev);
	sched_kick_ev = sched_flush_ev = sched_flush_retry_ev = NULL;
	sched_nqueued = sched_nrunning = 0;
}

void
sched_kick(void)
{
	if (sched_kick_ev != NULL && !sched_is_paused)
		event_active(sched_kick_ev, 0, 0);
}

static void
sched_enqueue(struct task *task)
{
	task->state = TASK_QUEUED;
	task->enqueued_us = stats_now_us();
	TAILQ_INSERT_TAIL(&sched_queues[task->prio], task, entry);
	sched_nqueued++;
}

int
sched_batch_begin(void)
{
	int error;

	if (sched_batch_open)
		return -EBUSY;
	if ((error = store_begin(kgymd_store)) < 0)
		return error;
	sched_batch_open = true;
	sched_batch_broken = false;
	return 0;
}

int
sched_submit(const struct task_spec *spec, const char *owner, char *ret_id,
    size_t idlen, enum task_state *ret_state, bool *ret_existing,
    const char **ret_owner, char **ret_cause)
{
	static char old_owner[KGYM_OWNER_MAX + 1];
	struct store_row row = { 0 }, *old = NULL;
	struct task *task, *live;
	char idbuf[KGYM_TASK_ID_MAX + 1];
	int64_t seq;
	char *payload;
	int error;

	if (spec->id != NULL) {
		/* Idempotent submit: a live task, or one the store remembers. */
		if ((live = task_index_find(spec->id)) != NULL) {
			snprintf(ret_id, idlen, "%s", live->id);
			*ret_state = live->state;
			*ret_existing = true;
			*ret_owner = live->owner;
			return 0;
		}
		if (store_get(kgymd_store, spec->id, &old) == 0) {
			snprintf(ret_id, idlen, "%s", old->id);
			snprintf(old_owner, sizeof old_owner, "%s",
			    old->owner != NULL ? old->owner : "");
			*ret_state = old->state;
			*ret_existing = true;
			*ret_owner = old_owner;
			store_row_free(old);
			return 0;
		}
		snprintf(idbuf, sizeof idbuf, "%s", spec->id);
	} else if ((error = task_id_generate(idbuf, sizeof idbuf)) < 0) {
		*ret_cause = strdup("cannot generate a task id");
		return error;
	}
	if (sched_batch_broken) {
		*ret_cause = strdup("the task store failed earlier in this submission");
		return -EIO;
	}
	if (sched_nqueued + sched_nbatch >= (size_t)kgymd_config->max_queued_tasks) {
		if (asprintf(ret_cause, "the queue holds %zu tasks (max_queued_tasks)",
		    sched_nqueued) < 0)
			*ret_cause = NULL;
		return -ENOSPC;
	}
	if ((payload = json_dumps(spec->payload, JSON_COMPACT)) == NULL)
		return -ENOMEM;
	row.id = idbuf;
	row.workflow = (char *)spec->workflow;
	row.prio = spec->prio;
	row.state = TASK_QUEUED;
	row.timeout_s = spec->timeout_s;
	row.gpu_memory_bytes = spec->gpu_memory_bytes;
	row.payload = payload;
	row.owner = (char *)owner;
	row.created_ms = stats_wall_ms();
	error = store_insert(kgymd_store, &row, &seq);
	free(payload);
	if (error == -EEXIST) {
		/* Submitted twice within this batch: the first one stands. */
		TAILQ_FOREACH(task, &sched_batch, entry) {
			if (strcmp(task->id, idbuf) == 0) {
				snprintf(ret_id, idlen, "%s", task->id);
				*ret_state = TASK_QUEUED;
				*ret_existing = true;
				*ret_owner = task->owner;
				return 0;
			}
		}
	}
	if (error < 0) {
		/* SQLite may have rolled the whole batch back (disk full, I/O error). */
		if (!store_in_transaction(kgymd_store))
			sched_batch_broken = true;
		*ret_cause = strdup("the task store refused the task (see the daemon log)");
		return error;
	}
	task = task_new(idbuf, seq, spec->prio, spec->workflow, spec->timeout_s,
	    row.created_ms);
	if (task == NULL)
		return -ENOMEM;
	task->gpu_memory_bytes = spec->gpu_memory_bytes;
	if ((task->owner = strdup(owner)) == NULL) {
		task_free(task);
		return -ENOMEM;
	}
	TAILQ_INSERT_TAIL(&sched_batch, task, entry);
	sched_nbatch++;
	snprintf(ret_id, idlen, "%s", task->id);
	*ret_state = TASK_QUEUED;
	*ret_existing = false;
	stats_task_submitted();
	return 0;
}

int
sched_batch_commit(char **ret_cause)
{
	struct task *task;
	int error;

	if (!sched_batch_open)
		return -EINVAL;
	sched_batch_open = false;
	sched_nbatch = 0;
	if (sched_batch_broken || (error = store_commit(kgymd_store)) < 0) {
		if (sched_batch_broken)
			error = -EIO;
		store_rollback(kgymd_store);
		while ((task = TAILQ_FIRST(&sched_batch)) != NULL) {
			TAILQ_REMOVE(&sched_batch, task, entry);
			task_free(task);
		}
		*ret_cause = strdup("the task store could not commit the submission");
		return error;
	}
	while ((task = TAILQ_FIRST(&sched_batch)) != NULL) {
		TAILQ_REMOVE(&sched_batch, task, entry);
		if (task_index_add(task) < 0) {
			/* Cannot happen: the store's unique index saw it first. */
			log_errorx("task %s: in the index twice", task->id);
			task_free(task);
			continue;
		}
		sched_enqueue(task);
	}
	sched_kick();
	return 0;
}

int
sched_restore(const struct store_row *row)
{
	struct task *task;
	int error;

	task = task_new(row->id, row->seq, row->prio, row->workflow, row->timeout_s,
	    row->created_ms);
	if (task == NULL)
		return -ENOMEM;
	task->attempt = row->attempt;
	task->gpu_memory_bytes = row->gpu_memory_bytes;
	if ((task->owner = strdup(row->owner != NULL ? row->owner : "")) == NULL) {
		task_free(task);
		return -ENOMEM;
	}
	if ((error = task_index_add(task)) < 0) {
		task_free(task);
		return error;
	}
	sched_enqueue(task);
	return 0;
}

json_t *
sched_error_result(const char *task_id, const char *error_code, const char *message)
{
	return json_pack("{s:s, s:s, s:b, s:b, s:b, s:s, s:s, s:n, s:n, s:n}",
	    "task_id", task_id, "status", "failed", "compiled", 0, "correctness", 0,
	    "decoy_kernel", 0, "error_code", error_code, "error_message", message,
	    "kernel_runtime", "reference_runtime", "speedup");
}

static void
sched_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct task *task = arg;

	if (task->wf != NULL)
		task->wf->p->cancel((struct kgym_task *)task);
	sched_fail(task, TASK_FAILED, "TIMEOUT_ERROR",
	    "the task ran past its timeout of %g s", task->timeout_s);
}

/* Move a task to running in the store and memory; caller holds a transaction. */
static int
sched_prepare(struct task *task, char **ret_cause)
{
	json_error_t jerr;
	char *payload = NULL;
	int error;

	task->wf = plugin_find_workflow(task->workflow);
	if (task->wf == NULL) {
		if (asprintf(ret_cause, "workflow '%s' is not served by any loaded plugin",
		    task->workflow) < 0)
			*ret_cause = NULL;
		return -ENOENT;
	}
	task->attempt++;
	error = store_mark_running(kgymd_store, task->id, task->attempt, stats_wall_ms(),
	    &payload);
	if (error < 0) {
		*ret_cause = strdup("the task store could not mark the task running");
		return error;
	}
	task->payload = payload != NULL ? json_loads(payload, 0, &jerr) : NULL;
	free(payload);
	if (task->payload == NULL) {
		*ret_cause = strdup("the stored payload is not valid JSON");
		return -EINVAL;
	}
	return 0;
}

static void
sched_start(struct task *task)
{
	struct timeval tv;
	double t;
	char *cause = NULL;
	int error;

	t = task->timeout_s > 0 ? task->timeout_s : kgymd_config->default_timeout_s;
	task->timeout_s = t;
	tv.tv_sec = (time_t)t;
	tv.tv_usec = (suseconds_t)((t - (double)tv.tv_sec) * 1e6);
	task->deadline = evtimer_new(kgymd_base, sched_deadline, task);
	if (task->deadline != NULL)
		evtimer_add(task->deadline, &tv);

	error = task->wf->p->start((struct kgym_task *)task, &cause);
	if (task->finished) {
		/* The plugin ended the task from inside start(); the flush frees it. */
		if (error < 0)
			log_warnx("workflow %s: start failed after finishing task %s",
			    task->wf->p->name, task->id);
		free(cause);
		return;
	}
	if (error == -E2BIG) {
		/* The task can never get what it needs (e.g. more GPU memory than any GPU). */
		sched_fail(task, TASK_FAILED, "RESOURCE_ERROR", "%s",
		    cause != NULL ? cause : "the task needs more than this daemon has");
		free(cause);
	} else if (error < 0) {
		sched_fail(task, TASK_FAILED, "SYSTEM_ERROR", "workflow %s could not start: %s",
		    task->wf->p->name, cause != NULL ? cause : strerror(-error));
		free(cause);
	}
}

static struct task *
sched_pop(void)
{
	struct task *task;
	int i;

	for (i = 0; i < PRIO__COUNT; i++) {
		if ((task = TAILQ_FIRST(&sched_queues[i])) != NULL) {
			TAILQ_REMOVE(&sched_queues[i], task, entry);
			sched_nqueued--;
			return task;
		}
	}
	return NULL;
}

static void
sched_dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct task_queue starting = TAILQ_HEAD_INITIALIZER(starting);
	struct task_queue broken = TAILQ_HEAD_INITIALIZER(broken);
	struct task *task;
	char *cause;
	bool tx;

	if (sched_is_paused)
		return;
	/* One transaction marks the whole pass running. */
	tx = store_begin(kgymd_store) == 0;
	while (sched_nrunning < (size_t)kgymd_config->max_running_tasks &&
	    (task = sched_pop()) != NULL) {
		cause = NULL;
		task->state = TASK_RUNNING;
		task->started_us = stats_now_us();
		TAILQ_INSERT_TAIL(&sched_running_list, task, entry);
		sched_nrunning++;
		if (sched_prepare(task, &cause) < 0) {
			log_warnx("task %s: %s", task->id, cause ? cause : "cannot start");
			TAILQ_REMOVE(&sched_running_list, task, entry);
			/* Keep the cause with the task until the transaction is over. */
			task->plugin_data = cause;
			TAILQ_INSERT_TAIL(&broken, task, entry);
			continue;
		}
		TAILQ_REMOVE(&sched_running_list, task, entry);
		TAILQ_INSERT_TAIL(&starting, task, entry);
	}
	if (tx && store_commit(kgymd_store) < 0) {
		store_rollback(kgymd_store);
		log_errorx("sched: the store could not commit a dispatch pass");
	}
	while ((task = TAILQ_FIRST(&broken)) != NULL) {
		TAILQ_REMOVE(&broken, task, entry);
		TAILQ_INSERT_TAIL(&sched_running_list, task, entry);
		cause = task->plugin_data;
		task->plugin_data = NULL;
		task->wf = NULL;	/* no plugin work to cancel */
		sched_fail(task, TASK_FAILED, "SYSTEM_ERROR", "%s",
		    cause != NULL ? cause : "cannot start the task");
		free(cause);
	}
	while ((task = TAILQ_FIRST(&starting)) != NULL) {
		TAILQ_REMOVE(&starting, task, entry);
		TAILQ_INSERT_TAIL(&sched_running_list, task, entry);
		sched_start(task);
	}
}

static void
sched_end(struct task *task, enum task_state state, json_t *result)
{
	json_t *meta;
	uint64_t now = stats_now_us(), queue_us = 0, run_us = 0;

	if (task->finished) {
		/* A plugin ended it already (e.g. from its cancel): once is all. */
		log_warnx("task %s: ended twice; the second end is ignored", task->id);
		json_decref(result);
		return;
	}

	if (task->state == TASK_RUNNING) {
		queue_us = task->started_us - task->enqueued_us;
		run_us = now - task->started_us;
	} else {
		queue_us = now - task->enqueued_us;
	}
	json_object_set_new(result, "task_id", json_string(task->id));
	meta = json_object_get(result, "metadata");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(result, "metadata", meta);
	}
	json_object_set_new(meta, "queue_ms", json_real((double)queue_us / 1000.0));
	json_object_set_new(meta, "run_ms", json_real((double)run_us / 1000.0));
	json_object_set_new(meta, "attempt", json_integer(task->attempt));
	json_object_set_new(meta, "workflow", json_string(task->workflow));

	if (task->state == TASK_RUNNING) {
		TAILQ_REMOVE(&sched_running_list, task, entry);
		sched_nrunning--;
	} else {
		TAILQ_REMOVE(&sched_queues[task->prio], task, entry);
		sched_nqueued--;
	}
	pool_task_gone(task);	/* its job, if any, must not outlive it */
	task->state = state;
	task->finished = true;
	task->result = result;
	if (task->plugin_timer != NULL)
		evtimer_del(task->plugin_timer);
	if (task->deadline != NULL)
		evtimer_del(task->deadline);
	stats_task_done(state, queue_us, run_us);
	log_debug("task %s %s", task->id, proto_state_name(state));
	/* Durable first, then told: see sched_flush(). */
	TAILQ_INSERT_TAIL(&sched_finishing, task, entry);
	event_active(sched_flush_ev, 0, 0);
	sched_kick();
	if (sched_nrunning == 0 && sched_idle_cb != NULL)
		sched_idle_cb();
}

/*
 * Group commit: every task that ended since the last pass is written in one
 * transaction, and only then are its waiters told.  A client never hears of
 * a result that a crash could take back, and a burst of short tasks costs
 * one commit instead of one each.
 */
static void
sched_flush(evutil_socket_t fd, short what, void *arg)
{
	struct task *task;
	const char *code, *message;
	char *text;
	bool tx, ok = true;
	int error;

	if (TAILQ_EMPTY(&sched_finishing))
		return;
	tx = store_begin(kgymd_store) == 0;
	TAILQ_FOREACH(task, &sched_finishing, entry) {
		code = json_string_value(json_object_get(task->result, "error_code"));
		message = json_string_value(json_object_get(task->result, "error_message"));
		text = json_dumps(task->result, JSON_COMPACT);
		error = store_mark_done(kgymd_store, task->id, task->state, code, message,
		    text, stats_wall_ms());
		free(text);
		/* Gone or already terminal in the store: nothing left to record. */
		if (error < 0 && error != -ENOENT && error != -EALREADY) {
			log_errorx("task %s: the store could not record its end: %s",
			    task->id, strerror(-error));
			ok = false;
			break;
		}
	}
	if (ok && tx && (error = store_commit(kgymd_store)) < 0) {
		log_errorx("sched: the store could not commit finished tasks: %s",
		    strerror(-error));
		ok = false;
	}
	if (!ok) {
		/*
		 * Nobody hears of a result the store does not hold: keep the
		 * tasks and try again in a second (a full disk may be freed).
		 */
		if (tx)
			store_rollback(kgymd_store);
		evtimer_add(sched_flush_retry_ev, &(struct timeval){ .tv_sec = 1 });
		return;
	}
	while ((task = TAILQ_FIRST(&sched_finishing)) != NULL) {
		TAILQ_REMOVE(&sched_finishing, task, entry);
		task_index_remove(task);
		wait_task_done(task->id, task->state, task->result);
		task_free(task);
	}
}

void
sched_finish(struct task *task, json_t *result)
{
	const char *status;
	enum task_state state;

	if (task->finished || task->state != TASK_RUNNING) {
		log_warnx("task %s: finished twice by its workflow; second result ignored",
		    task->id);
		json_decref(result);
		return;
	}
	if (!json_is_object(result)) {
		json_decref(result);
		result = sched_error_result(task->id, "SYSTEM_ERROR",
		    "the workflow returned no result object");
	}
	status = json_string_value(json_object_get(result, "status"));
	if (status != NULL && strcmp(status, "completed") == 0) {
		state = TASK_COMPLETED;
	} else {
		state = TASK_FAILED;
		if (status == NULL || strcmp(status, "failed") != 0)
			json_object_set_new(result, "status", json_string("failed"));
	}
	sched_end(task, state, result);
}

void
sched_fail(struct task *task, enum task_state state, const char *error_code,
    const char *fmt, ...)
{
	char message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	sched_end(task, state, sched_error_result(task->id, error_code, message));
}

int
sched_cancel(const char *id, enum task_state *ret_state)
{
	struct store_row *row;
	struct task *task;
	int error;

	if ((task = task_index_find(id)) == NULL) {
		if ((error = store_get(kgymd_store, id, &row)) < 0)
			return error;
		*ret_state = row->state;
		store_row_free(row);
		return -EALREADY;
	}
	if (task->finished) {
		*ret_state = task->state;	/* ended, not yet committed */
		return -EALREADY;
	}
	if (task->state == TASK_RUNNING && task->wf != NULL)
		task->wf->p->cancel((struct kgym_task *)task);
	sched_fail(task, TASK_CANCELLED, "CANCELLED", "cancelled by a client");
	*ret_state = TASK_CANCELLED;
	return 0;
}

size_t
sched_queued(void)
{
	return sched_nqueued;
}

size_t
sched_running(void)
{
	return sched_nrunning;
}

void
sched_pause(void)
{
	sched_is_paused = true;
}

void
sched_on_idle(void (*cb)(void))
{
	sched_idle_cb = cb;
}

void
sched_requeue_running(void)
{
	struct task *task;

	while ((task = TAILQ_FIRST(&sched_running_list)) != NULL) {
		TAILQ_REMOVE(&sched_running_list, task, entry);
		sched_nrunning--;
		if (task->wf != NULL)
			task->wf->p->cancel((struct kgym_task *)task);
		pool_task_gone(task);
		if (store_mark_queued(kgymd_store, task->id) < 0)
			log_errorx("task %s: could not requeue in the store; a restart "
			    "retries it", task->id);
		if (task->plugin_timer != NULL)
			evtimer_del(task->plugin_timer);
		if (task->deadline != NULL)
			evtimer_del(task->deadline);
		json_decref(task->payload);
		task->payload = NULL;
		task->wf = NULL;
		sched_enqueue(task);
		log_info("task %s: requeued for the next start", task->id);
	}
}

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
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "queue.h"

static struct task_queue sched_queues[PRIO__COUNT];
static struct task_queue sched_running_list;
static struct task_queue sched_finishing;	/* ended, not yet handed to the writer */
static struct event *sched_flush_more_ev;	/* the next flush, next turn */
static size_t sched_nfinishing;
/* Ends written by one flush job at most (they are also bounded by a slice). */
#define SCHED_FLUSH_MAX		1024
static struct event *sched_flush_ev;
static struct event *sched_flush_retry_ev;
static size_t sched_nqueued;
static size_t sched_nrunning;
static size_t sched_ninflight;		/* submitted, not yet committed */
static size_t sched_ncached;		/* bytes of payloads kept with queued tasks */

/*
 * A queued task may keep its payload, as parsed from the request, so that
 * its dispatch needs neither a store read nor a parse on the loop (0.1 ms
 * for 8 KiB).  Bounded, so that a deep queue stays small: past the bound,
 * payloads are read back from the store at dispatch.  Each payload counts
 * its text plus SCHED_CACHE_OVERHEAD for jansson's nodes.
 */
#define SCHED_CACHE_BYTES	(4 * 1024 * 1024)
#define SCHED_CACHE_OVERHEAD	512
static bool sched_is_paused;
static struct event *sched_kick_ev;
static struct event *sched_turn_ev;	/* a dispatch pass goes on next turn */
static void (*sched_idle_cb)(void);

/* A dispatch pass, or the completion of a submit, holds the loop this long at most. */
#define SCHED_SLICE_US		100
static const struct timeval sched_next_turn = { 0, 0 };

static void sched_dispatch(evutil_socket_t, short, void *);
static void sched_flush(evutil_socket_t, short, void *);

/*
 * What the writer hands back (tasks to queue, to start, to tell their
 * waiters about) is done in slices of SCHED_SLICE_US, in the order the
 * writer handed it back, with a turn of the loop between slices: a commit
 * of a thousand tasks must not hold the loop for milliseconds.  step()
 * does what fits before `deadline` and says whether it is finished.
 */
struct sched_slice {
	bool (*step)(void *arg, uint64_t deadline);
	void *arg;
	TAILQ_ENTRY(sched_slice) entry;
};
static TAILQ_HEAD(, sched_slice) sched_slices = TAILQ_HEAD_INITIALIZER(sched_slices);
static struct event *sched_slices_ev;

static void
sched_slices_run(evutil_socket_t fd, short what, void *arg)
{
	uint64_t deadline = arg != NULL ? UINT64_MAX : stats_now_us() + SCHED_SLICE_US;
	struct sched_slice *sl;

	while ((sl = TAILQ_FIRST(&sched_slices)) != NULL) {
		if (!sl->step(sl->arg, deadline)) {
			evtimer_add(sched_slices_ev, &sched_next_turn);
			return;
		}
		TAILQ_REMOVE(&sched_slices, sl, entry);	/* step may have freed its arg */
		free(sl);
	}
}

/* Queue a slice; without a writer thread (unit tests), do it now. */
static void
sched_slice_add(bool (*step)(void *, uint64_t), void *arg)
{
	struct sched_slice *sl;

	if (!writer_active() || (sl = calloc(1, sizeof *sl)) == NULL) {
		/* Out of memory: all of it now rather than never. */
		while (!step(arg, UINT64_MAX))
			;
		return;
	}
	sl->step = step;
	sl->arg = arg;
	TAILQ_INSERT_TAIL(&sched_slices, sl, entry);
	evtimer_add(sched_slices_ev, &sched_next_turn);
}

/* Shutdown: every write committed and every slice done, whatever they take. */
static void
sched_settle(void)
{
	for (;;) {
		writer_sync();
		if (TAILQ_EMPTY(&sched_slices))
			return;
		sched_slices_run(-1, 0, sched_slices_run);	/* any non-NULL: no deadline */
	}
}

void
sched_init(void)
{
	int i;

	for (i = 0; i < PRIO__COUNT; i++)
		TAILQ_INIT(&sched_queues[i]);
	TAILQ_INIT(&sched_running_list);
	TAILQ_INIT(&sched_finishing);
	sched_kick_ev = event_new(kgymd_base, -1, 0, sched_dispatch, NULL);
	sched_turn_ev = evtimer_new(kgymd_base, sched_dispatch, NULL);
	sched_flush_ev = event_new(kgymd_base, -1, 0, sched_flush, NULL);
	sched_flush_retry_ev = evtimer_new(kgymd_base, sched_flush, NULL);
	sched_slices_ev = evtimer_new(kgymd_base, sched_slices_run, NULL);
	sched_flush_more_ev = evtimer_new(kgymd_base, sched_flush, NULL);
	if (sched_kick_ev == NULL || sched_turn_ev == NULL || sched_flush_ev == NULL ||
	    sched_flush_retry_ev == NULL || sched_slices_ev == NULL ||
	    sched_flush_more_ev == NULL)
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

	sched_settle();		/* no job may still point at a task */
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
	sched_flush(-1, 0, sched_flush);	/* all that ended (non-NULL: no slice) */
	sched_settle();
	if (sched_kick_ev != NULL)
		event_free(sched_kick_ev);
	if (sched_turn_ev != NULL)
		event_free(sched_turn_ev);
	if (sched_flush_ev != NULL)
		event_free(sched_flush_ev);
	if (sched_flush_retry_ev != NULL)
		event_free(sched_flush_retry_ev);
	if (sched_slices_ev != NULL)
		event_free(sched_slices_ev);
	if (sched_flush_more_ev != NULL)
		event_free(sched_flush_more_ev);
	sched_slices_ev = sched_flush_more_ev = NULL;
	sched_kick_ev = sched_turn_ev = sched_flush_ev = sched_flush_retry_ev = NULL;
	sched_nqueued = sched_nrunning = 0;
	sched_ncached = 0;
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

/*
 * A submission: the new tasks of one submit request, handed to the queue
 * backend as one batch.  The rows own their strings, since the writer
 * thread reads them while the loop goes on.
 */
struct sched_batch {
	struct queue_batch q;
	bool committing;
	size_t next;			/* rows queued so far, after the commit */
	void (*done)(struct sched_batch *, int error, void *arg);
	void *arg;
};

struct sched_batch *
sched_batch_new(void)
{
	return calloc(1, sizeof(struct sched_batch));
}

void
sched_batch_free(struct sched_batch *b)
{
	if (b == NULL)
		return;
	/* A batch with the writer is freed by its completion, not here. */
	if (b->committing)
		fatalx("sched: a batch freed while the writer holds it");
	sched_ninflight -= b->q.n;
	queue_batch_clear(&b->q);
	free(b);
}

size_t
sched_batch_count(const struct sched_batch *b)
{
	return b->q.n;
}

bool
sched_batch_dup(const struct sched_batch *b, size_t k, enum task_state *ret_state,
    const char **ret_owner)
{
	if (k >= b->q.n || !b->q.t[k].dup)
		return false;
	if (b->q.t[k].dup_owner != NULL) {
		/* The backend said whose it is (a task of another node). */
		*ret_state = b->q.t[k].dup_state;
		*ret_owner = b->q.t[k].dup_owner;
	} else if (sched_find(b->q.t[k].row.id, ret_state, ret_owner) < 0) {
		*ret_state = TASK_QUEUED;
		*ret_owner = "";
	}
	return true;
}

const char *
sched_batch_cause(const struct sched_batch *b)
{
	return b->q.cause;
}

int
sched_find(const char *id, enum task_state *ret_state, const char **ret_owner)
{
	static char old_owner[KGYM_OWNER_MAX + 1];
	struct store_row *old = NULL;
	struct task *live;
	int error;

	if ((live = task_index_find(id)) != NULL) {
		*ret_state = live->state;
		*ret_owner = live->owner;
		return 0;
	}
	if ((error = queue->get(id, &old)) < 0)
		return error;
	snprintf(old_owner, sizeof old_owner, "%s", old->owner != NULL ? old->owner : "");
	*ret_state = old->state;
	*ret_owner = old_owner;
	store_row_free(old);
	return 0;
}

int
sched_submit(struct sched_batch *b, const struct task_spec *spec, const char *owner,
    char *ret_id, size_t idlen, enum task_state *ret_state, bool *ret_existing,
    const char **ret_owner, char **ret_cause)
{
	struct queue_task *r;
	char idbuf[KGYM_TASK_ID_MAX + 1];
	int error;

	if (spec->id != NULL) {
		/* Idempotent submit: a live task, or one the store remembers. */
		if (sched_find(spec->id, ret_state, ret_owner) == 0) {
			snprintf(ret_id, idlen, "%s", spec->id);
			*ret_existing = true;
			return 0;
		}
		snprintf(idbuf, sizeof idbuf, "%s", spec->id);
	} else if ((error = task_id_generate(idbuf, sizeof idbuf)) < 0) {
		*ret_cause = strdup("cannot generate a task id");
		return error;
	}
	if (sched_nqueued + sched_ninflight >= (size_t)kgymd_config->max_queued_tasks) {
		if (asprintf(ret_cause, "the queue holds %zu tasks (max_queued_tasks)",
		    sched_nqueued) < 0)
			*ret_cause = NULL;
		return -ENOSPC;
	}
	if ((r = queue_batch_add(&b->q)) == NULL)
		return -ENOMEM;
	r->row.id = strdup(idbuf);
	r->row.workflow = strdup(spec->workflow);
	r->row.owner = strdup(owner);
	if (r->row.id == NULL || r->row.workflow == NULL || r->row.owner == NULL) {
		free(r->row.id);
		free(r->row.workflow);
		free(r->row.owner);
		b->q.n--;
		return -ENOMEM;
	}
	/* Serialised by the writer: 8 KiB of JSON text costs jansson ~0.1 ms. */
	r->payload = json_incref(spec->payload);
	r->row.prio = spec->prio;
	r->row.state = TASK_QUEUED;
	r->row.timeout_s = spec->timeout_s;
	r->row.gpu_memory_bytes = spec->gpu_memory_bytes;
	r->row.created_ms = stats_wall_ms();
	sched_ninflight++;
	snprintf(ret_id, idlen, "%s", idbuf);
	*ret_state = TASK_QUEUED;
	*ret_existing = false;
	return 0;
}

/* On the loop: the rows are on disk (or none is); queue their tasks, a slice at a time. */
static bool
sched_batch_step(void *arg, uint64_t deadline)
{
	struct sched_batch *b = arg;
	struct queue_task *r;
	struct task *task;

	/* A shared queue hands its tasks to whichever node has room (sched_adopt). */
	while (b->q.error == 0 && queue->local && b->next < b->q.n) {
		if (stats_now_us() >= deadline)
			return false;
		r = &b->q.t[b->next++];
		if (r->dup)
			continue;
		task = task_new(r->row.id, r->seq, r->row.prio, r->row.workflow,
		    r->row.timeout_s, r->row.created_ms);
		if (task == NULL || (task->owner = strdup(r->row.owner)) == NULL) {
			/* Stored: a restart runs it.  Nothing else can be done now. */
			log_errorx("task %s: out of memory; it runs after a restart",
			    r->row.id);
			task_free(task);
			continue;
		}
		task->gpu_memory_bytes = r->row.gpu_memory_bytes;
		if (r->row.payload != NULL &&
		    sched_ncached + strlen(r->row.payload) + SCHED_CACHE_OVERHEAD <=
		    SCHED_CACHE_BYTES) {
			task->payload = json_incref(r->payload);
			task->payload_cached = strlen(r->row.payload) + SCHED_CACHE_OVERHEAD;
			sched_ncached += task->payload_cached;
		}
		if (task_index_add(task) < 0) {
			/* Cannot happen: the store's unique index saw it first. */
			log_errorx("task %s: in the index twice", task->id);
			task_free(task);
			continue;
		}
		sched_enqueue(task);
		stats_task_submitted();
		sched_kick();
	}
	b->done(b, b->q.error, b->arg);	/* may free b */
	return true;
}

static void
sched_batch_done(struct queue_batch *q, void *arg)
{
	struct sched_batch *b = arg;

	b->committing = false;
	sched_slice_add(sched_batch_step, b);
}

void
sched_batch_commit(struct sched_batch *b, void (*done)(struct sched_batch *, int, void *),
    void *arg)
{
	b->done = done;
	b->arg = arg;
	b->committing = true;
	b->q.done = sched_batch_done;
	b->q.arg = b;
	queue->submit(&b->q);
}

/* Queue a task read back from a queue backend; payload (stolen) may be NULL. */
static int
sched_requeue_row(const struct store_row *row, json_t *payload)
{
	struct task *task;
	int error;

	task = task_new(row->id, row->seq, row->prio, row->workflow, row->timeout_s,
	    row->created_ms);
	if (task == NULL) {
		json_decref(payload);
		return -ENOMEM;
	}
	task->attempt = row->attempt;
	task->gpu_memory_bytes = row->gpu_memory_bytes;
	if ((task->owner = strdup(row->owner != NULL ? row->owner : "")) == NULL) {
		json_decref(payload);
		task_free(task);
		return -ENOMEM;
	}
	if ((error = task_index_add(task)) < 0) {
		json_decref(payload);
		task_free(task);
		return error;
	}
	if (payload != NULL) {
		task->payload = payload;
		task->payload_cached = SCHED_CACHE_OVERHEAD;
		sched_ncached += task->payload_cached;
	}
	sched_enqueue(task);
	return 0;
}

int
sched_restore(const struct store_row *row)
{
	return sched_requeue_row(row, NULL);
}

int
sched_adopt(const struct store_row *row, json_t *payload)
{
	struct task *task;
	int error = sched_requeue_row(row, payload);

	if (error == 0) {
		/* The claim stored it running, this attempt counted: it starts as it is popped. */
		if ((task = task_index_find(row->id)) != NULL) {
			task->marked = true;
			task->attempt = row->attempt - 1;	/* sched_prepare counts it */
		}
		stats_task_submitted();
		sched_kick();
	}
	return error;
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

/* A queued task leaves the payload cache (dispatched or ended). */
static void
sched_uncache(struct task *task)
{
	sched_ncached -= task->payload_cached;
	task->payload_cached = 0;
}

/*
 * Resolve the workflow and load the payload (a read on the loop's
 * connection).  With `later`, a payload that is not kept is left to the
 * running mark's job (the writer's thread), and *ret_later says so.
 */
static int
sched_prepare(struct task *task, bool later, bool *ret_later, char **ret_cause)
{
	json_error_t jerr;
	char *payload = NULL;
	int error;

	if (task->payload_cached > 0) {
		sched_uncache(task);
		task->wf = plugin_find_workflow(task->workflow);
		if (task->wf == NULL) {
			if (asprintf(ret_cause, "workflow '%s' is not served by any loaded "
			    "plugin", task->workflow) < 0)
				*ret_cause = NULL;
			return -ENOENT;
		}
		task->attempt++;
		return 0;
	}

	task->wf = plugin_find_workflow(task->workflow);
	if (task->wf == NULL) {
		if (asprintf(ret_cause, "workflow '%s' is not served by any loaded plugin",
		    task->workflow) < 0)
			*ret_cause = NULL;
		return -ENOENT;
	}
	if (later) {
		*ret_later = true;
		task->attempt++;
		return 0;
	}
	if ((error = queue->get_payload(task->id, &payload)) < 0) {
		*ret_cause = strdup("the task store could not read the task's payload");
		return error;
	}
	task->payload = payload != NULL ? json_loads(payload, 0, &jerr) : NULL;
	free(payload);
	if (task->payload == NULL) {
		*ret_cause = strdup("the stored payload is not valid JSON");
		return -EINVAL;
	}
	task->attempt++;
	return 0;
}

static void
sched_start(struct task *task)
{
	struct timeval tv;
	double t;
	char *cause = NULL;
	int error;

	/* The task's deadline: the one clock that ends a task (ARCHITECTURE.md). */
	t = task->timeout_s > 0 ? task->timeout_s : kgymd_config->default_timeout_s;
	task->timeout_s = t;
	task->deadline_us = stats_now_us() + (uint64_t)(t * 1e6);
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

/*
 * The payload the running mark's job read and parsed; if none came, the
 * loop reads it after all (and fails the task if it cannot).
 */
static int
sched_payload_arrived(struct task *task, struct queue_mark *m)
{
	json_error_t jerr;
	char *payload = NULL;
	const char *why = NULL;

	json_decref(task->payload);
	if ((task->payload = m->payload) != NULL) {
		m->payload = NULL;
		return 0;
	}
	if (queue->get_payload(task->id, &payload) < 0)
		why = "the task store could not read the task's payload";
	else if ((task->payload = payload != NULL ? json_loads(payload, 0, &jerr) : NULL) == NULL)
		why = "the stored payload is not valid JSON";
	free(payload);
	if (why == NULL)
		return 0;
	log_warnx("task %s: %s", task->id, why);
	task->wf = NULL;	/* no plugin work to cancel */
	sched_fail(task, TASK_FAILED, "SYSTEM_ERROR", "%s", why);
	return -EINVAL;
}

/*
 * The tasks of one dispatch pass are marked running by the queue backend
 * in one job.  A task starts only once its running mark is committed, so
 * its attempt counts across a crash.  The marks name tasks by id, and the
 * loop looks each up again when they come back: a task may have been
 * cancelled (and freed), or requeued at shutdown, meanwhile.
 */
static bool
sched_starting_step(void *arg, uint64_t deadline)
{
	struct queue_marks *st = arg;
	struct task *task;
	size_t i;

	while (st->next < st->n) {
		if (stats_now_us() >= deadline)
			return false;
		i = st->next++;
		task = task_index_find(st->t[i].id);
		if (task == NULL || !task->starting || task->attempt != st->t[i].attempt)
			continue;	/* ended or requeued meanwhile */
		task->starting = false;
		if (task->finished)
			continue;	/* cancelled while it was being marked */
		if (st->error < 0 || st->t[i].error < 0) {
			log_warnx("task %s: the task store could not mark it running",
			    task->id);
			task->wf = NULL;	/* no plugin work to cancel */
			sched_fail(task, TASK_FAILED, "SYSTEM_ERROR",
			    "the task store could not mark the task running");
			continue;
		}
		if (st->t[i].want_payload && sched_payload_arrived(task, &st->t[i]) < 0)
			continue;
		sched_start(task);
	}
	queue_marks_free(st);
	return true;
}

static void
sched_starting_done(struct queue_marks *st, void *arg)
{
	sched_slice_add(sched_starting_step, st);
}

/*
 * One pass: while fewer than max_running_tasks run, pop the next task,
 * load its payload and hand it to the writer; at most SCHED_SLICE_US of the
 * loop, then the rest on the next turn.
 */
static void
sched_dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct queue_marks *st;
	struct task *task;
	uint64_t t0 = stats_now_us();
	size_t room, n = 0;
	bool later;
	char *cause;

	if (sched_is_paused)
		return;
	/* A shared queue: ask for what this node has room for beyond its own queue. */
	if (queue->claim != NULL &&
	    sched_nrunning + sched_nqueued < (size_t)kgymd_config->max_running_tasks)
		queue->claim((size_t)kgymd_config->max_running_tasks - sched_nrunning -
		    sched_nqueued);
	if (sched_nrunning >= (size_t)kgymd_config->max_running_tasks || sched_nqueued == 0)
		return;
	room = (size_t)kgymd_config->max_running_tasks - sched_nrunning;
	if (room > sched_nqueued)
		room = sched_nqueued;
	if ((st = queue_marks_new(room)) == NULL) {
		log_errorx("sched: out of memory in a dispatch pass");
		evtimer_add(sched_turn_ev, &(struct timeval){ .tv_sec = 1 });
		return;
	}
	while (n < room && (task = sched_pop()) != NULL) {
		cause = NULL;
		task->state = TASK_RUNNING;
		task->started_us = stats_now_us();
		TAILQ_INSERT_TAIL(&sched_running_list, task, entry);
		sched_nrunning++;
		later = false;
		if (sched_prepare(task, !task->marked, &later, &cause) < 0) {
			log_warnx("task %s: %s", task->id, cause ? cause : "cannot start");
			task->wf = NULL;	/* no plugin work to cancel */
			sched_fail(task, TASK_FAILED, "SYSTEM_ERROR", "%s",
			    cause != NULL ? cause : "cannot start the task");
			free(cause);
		} else if (task->marked) {
			task->marked = false;
			sched_start(task);	/* its claim is its running mark */
		} else {
			task->starting = true;
			snprintf(st->t[n].id, sizeof st->t[n].id, "%s", task->id);
			st->t[n].attempt = task->attempt;
			st->t[n].want_payload = later;
			n++;
		}
		if (stats_now_us() - t0 >= SCHED_SLICE_US)
			break;
	}
	if (n == 0) {
		queue_marks_free(st);
	} else {
		st->n = n;
		st->now_ms = stats_wall_ms();
		st->done = sched_starting_done;
		queue->mark_running(st);
	}
	if (!sched_is_paused && sched_nqueued > 0 &&
	    sched_nrunning < (size_t)kgymd_config->max_running_tasks)
		evtimer_add(sched_turn_ev, &sched_next_turn);
}

static void
sched_end(struct task *task, enum task_state state, json_t *result)
{
	const char *name;
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
	/*
	 * Which GPU ran it, whatever the workflow: throughput and timing are
	 * compared per GPU, and a worker's name is no contract.
	 */
	if (task->gpu >= 0) {
		json_object_set_new(meta, "gpu_index", json_integer(task->gpu));
		if (json_object_get(meta, "gpu") == NULL &&
		    (name = pool_gpu_name(task->gpu)) != NULL)
			json_object_set_new(meta, "gpu", json_string(name));
	}
	if (queue_node != NULL)
		json_object_set_new(meta, "node", json_string(queue_node));

	if (task->state == TASK_RUNNING) {
		TAILQ_REMOVE(&sched_running_list, task, entry);
		sched_nrunning--;
	} else {
		TAILQ_REMOVE(&sched_queues[task->prio], task, entry);
		sched_nqueued--;
		sched_uncache(task);
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
	sched_nfinishing++;
	event_active(sched_flush_ev, 0, 0);
	sched_kick();
	if (sched_nrunning == 0 && sched_idle_cb != NULL)
		sched_idle_cb();
}

/*
 * Group commit: every task that ended since the last flush is written by
 * the queue backend in one job, and only then are its waiters told.  A
 * client never hears of a result that a crash could take back, and a burst
 * of short tasks costs one commit instead of one each.  A shared queue
 * may answer that another node's result stands (the task was reclaimed
 * from us, or cancelled): the waiters hear that one.
 */
/*
 * A burst of tasks leaves freed memory in malloc's arenas (the loop's and
 * the parser's and writer's threads'); once the daemon is quiet again it
 * goes back to the system.  malloc_trim() holds each arena's lock while it
 * walks it, so it runs in the writer thread and only when nothing is
 * queued or running, never while clients are being served in earnest.
 */
#define SCHED_TRIM_AFTER	1000	/* tasks ended since the last trim */
static size_t sched_ended_since_trim;
static bool sched_trim_busy;
static struct writer_job sched_trim_job;

static int
sched_trim_run(struct store *store, void *arg)
{
	malloc_trim(0);
	return 0;
}

static void
sched_trim_done(int error, void *arg)
{
	sched_trim_busy = false;
}

static void
sched_trim_if_quiet(void)
{
	if (sched_trim_busy || !writer_active() || sched_ended_since_trim < SCHED_TRIM_AFTER ||
	    sched_nqueued > 0 || sched_nrunning > 0 || sched_ninflight > 0)
		return;
	sched_ended_since_trim = 0;
	sched_trim_busy = true;
	sched_trim_job.run = sched_trim_run;
	sched_trim_job.done = sched_trim_done;
	writer_submit(&sched_trim_job);
}

/* Tell the waiters of committed ends and free the tasks, a slice at a time. */
static bool
sched_ending_step(void *arg, uint64_t deadline)
{
	struct queue_marks *en = arg;
	struct queue_mark *t;
	struct task *task;

	while (en->next < en->n) {
		if (stats_now_us() >= deadline)
			return false;
		t = &en->t[en->next++];
		task = t->task;
		if (t->lost && t->canon != NULL) {
			json_decref(task->result);
			task->result = json_incref(t->canon);
			task->state = t->state;
		}
		task_index_remove(task);
		wait_task_done(task->id, task->state, task->result);
		task_free(task);
		sched_ended_since_trim++;
	}
	queue_marks_free(en);
	if (TAILQ_EMPTY(&sched_finishing))
		sched_trim_if_quiet();
	return true;
}

static void
sched_ending_done(struct queue_marks *en, void *arg)
{
	size_t i;

	if (en->error < 0) {
		/*
		 * Nobody hears of a result the store does not hold: keep the
		 * tasks, first in line, and try again in a second (a full disk
		 * may be freed).
		 */
		log_errorx("sched: the store could not commit finished tasks: %s",
		    strerror(-en->error));
		for (i = en->n; i > 0; i--)
			TAILQ_INSERT_HEAD(&sched_finishing, en->t[i - 1].task, entry);
		sched_nfinishing += en->n;
		queue_marks_free(en);
		evtimer_add(sched_flush_retry_ev, &(struct timeval){ .tv_sec = 1 });
		return;
	}
	sched_slice_add(sched_ending_step, en);
}

static char *
sched_strdup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

static void
sched_flush(evutil_socket_t fd, short what, void *arg)
{
	struct queue_marks *en;
	struct task *task;
	uint64_t t0 = stats_now_us();
	size_t n, i = 0;

	if (TAILQ_EMPTY(&sched_finishing))
		return;
	n = sched_nfinishing < SCHED_FLUSH_MAX || arg != NULL ? sched_nfinishing :
	    SCHED_FLUSH_MAX;
	if ((en = queue_marks_new(n)) == NULL) {
		evtimer_add(sched_flush_retry_ev, &(struct timeval){ .tv_sec = 1 });
		return;
	}
	/* What fits in a slice goes now; the rest with the next flush, next turn. */
	while (i < n && (task = TAILQ_FIRST(&sched_finishing)) != NULL) {
		if (i > 0 && arg == NULL && stats_now_us() - t0 >= SCHED_SLICE_US)
			break;
		TAILQ_REMOVE(&sched_finishing, task, entry);
		sched_nfinishing--;
		en->t[i].task = task;
		snprintf(en->t[i].id, sizeof en->t[i].id, "%s", task->id);
		en->t[i].state = task->state;
		en->t[i].code = sched_strdup_or_null(json_string_value(
		    json_object_get(task->result, "error_code")));
		en->t[i].message = sched_strdup_or_null(json_string_value(
		    json_object_get(task->result, "error_message")));
		en->t[i].result = json_incref(task->result);	/* encoded by the backend */
		en->t[i].attempt = task->attempt;
		en->n = ++i;
	}
	en->now_ms = stats_wall_ms();
	en->done = sched_ending_done;
	queue->mark_done(en);
	if (!TAILQ_EMPTY(&sched_finishing) && sched_flush_more_ev != NULL)
		evtimer_add(sched_flush_more_ev, &sched_next_turn);
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
		if ((error = queue->get(id, &row)) < 0)
			return error;
		*ret_state = row->state;
		store_row_free(row);
		return -EALREADY;
	}
	if (task->finished) {
		*ret_state = task->state;	/* ended, not yet committed */
		return -EALREADY;
	}
	/* A task still being marked running has no plugin work yet. */
	if (task->state == TASK_RUNNING && task->wf != NULL && !task->starting)
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

	/* Tasks being marked running start first, so that each is one case below. */
	sched_settle();
	while ((task = TAILQ_FIRST(&sched_running_list)) != NULL) {
		TAILQ_REMOVE(&sched_running_list, task, entry);
		sched_nrunning--;
		if (task->wf != NULL && !task->starting)
			task->wf->p->cancel((struct kgym_task *)task);
		pool_task_gone(task);
		if (queue->mark_queued(task->id) < 0)
			log_errorx("task %s: could not requeue in the store; a restart "
			    "retries it", task->id);
		if (task->plugin_timer != NULL)
			evtimer_del(task->plugin_timer);
		if (task->deadline != NULL)
			evtimer_del(task->deadline);
		json_decref(task->payload);
		task->payload = NULL;
		task->wf = NULL;
		task->starting = false;
		sched_enqueue(task);
		log_info("task %s: requeued for the next start", task->id);
	}
}

void
sched_ended_elsewhere(const char *id)
{
	struct task *task = task_index_find(id);

	if (task == NULL || task->finished)
		return;
	/* The shared queue's result stands; ending it here fetches that result. */
	if (task->state == TASK_RUNNING && task->wf != NULL && !task->starting)
		task->wf->p->cancel((struct kgym_task *)task);
	sched_fail(task, TASK_CANCELLED, "CANCELLED", "the task ended on another node");
}

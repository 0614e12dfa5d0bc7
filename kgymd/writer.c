/*
 * writer.c -- the store's writer: SQLite commits off the event loop.
 *
 * A commit costs the loop 0.1 to 2 ms (more when SQLite checkpoints its
 * WAL), and every client waits while the loop waits.  So every write of
 * the running daemon (tasks submitted, marked running, ended) is a job
 * handed to one thread with its own SQLite connection.  The thread takes
 * every job queued since its last pass and runs them in one transaction
 * (group commit: many clients' writes, one commit), then hands them back;
 * the loop hears of it through a pipe and calls each job's done() in the
 * order the jobs were queued.  Nothing that depends on a write (the reply
 * "accepted", a worker starting a task, a waiter hearing a result) happens
 * before done() runs, so "accepted" still means committed.
 *
 * A job's run() reads only data the job owns (copied strings, never a
 * struct task or a jansson value, which the loop may touch meanwhile).
 * When one job of a group fails, the group is rolled back and each of its
 * jobs is run again in a transaction of its own, so one bad job fails
 * alone.
 *
 * The loop's own connection (kgymd_store) stays for reads (status,
 * result, list, payloads at dispatch) and for the writes of start-up and
 * shutdown.  Before writer_start() (start-up recovery, the unit tests) and
 * after writer_stop(), writer_submit() runs the job at once on kgymd_store
 * and calls done() before it returns.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "kgymd.h"

static pthread_t writer_thread;
static pthread_mutex_t writer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t writer_wake = PTHREAD_COND_INITIALIZER;	/* jobs queued */
static pthread_cond_t writer_idle = PTHREAD_COND_INITIALIZER;	/* a pass ended */
static STAILQ_HEAD(, writer_job) writer_todo = STAILQ_HEAD_INITIALIZER(writer_todo);
static STAILQ_HEAD(, writer_job) writer_done = STAILQ_HEAD_INITIALIZER(writer_done);
static bool writer_busy;		/* the thread holds a group */
static bool writer_stopping;
static bool writer_running;		/* the thread exists */
static struct store *writer_store;	/* the thread's connection */
static int writer_pipe[2] = { -1, -1 };	/* thread -> loop: "jobs are done" */
static struct event *writer_ev;

/* Run one job in a transaction of its own. */
static void
writer_run_alone(struct store *store, struct writer_job *job)
{
	if ((job->error = store_begin(store)) < 0)
		return;
	if ((job->error = job->run(store, job->arg)) == 0)
		job->error = store_commit(store);
	if (job->error < 0)
		store_rollback(store);
}

/* Run a group of jobs in one transaction; each job's error in job->error. */
static void
writer_run_group(struct store *store, struct writer_job *first)
{
	struct writer_job *job;
	int error;

	if (STAILQ_NEXT(first, entry) == NULL) {
		writer_run_alone(store, first);
		return;
	}
	if ((error = store_begin(store)) == 0) {
		for (job = first; job != NULL && error == 0; job = STAILQ_NEXT(job, entry))
			error = job->run(store, job->arg);
		if (error == 0)
			error = store_commit(store);
		if (error == 0) {
			for (job = first; job != NULL; job = STAILQ_NEXT(job, entry))
				job->error = 0;
			return;
		}
		store_rollback(store);
	}
	/* Someone's write failed: each job again, on its own. */
	for (job = first; job != NULL; job = STAILQ_NEXT(job, entry))
		writer_run_alone(store, job);
}

static void *
writer_main(void *arg)
{
	STAILQ_HEAD(, writer_job) group;
	bool was_empty;
	char c = 1;

	pthread_mutex_lock(&writer_lock);
	for (;;) {
		while (STAILQ_EMPTY(&writer_todo) && !writer_stopping)
			pthread_cond_wait(&writer_wake, &writer_lock);
		if (STAILQ_EMPTY(&writer_todo))
			break;		/* stopping, and nothing left */
		STAILQ_INIT(&group);
		STAILQ_CONCAT(&group, &writer_todo);
		writer_busy = true;
		pthread_mutex_unlock(&writer_lock);

		writer_run_group(writer_store, STAILQ_FIRST(&group));

		pthread_mutex_lock(&writer_lock);
		was_empty = STAILQ_EMPTY(&writer_done);
		STAILQ_CONCAT(&writer_done, &group);
		writer_busy = false;
		pthread_cond_broadcast(&writer_idle);
		/* One byte per batch of news; the loop takes the whole list. */
		if (was_empty && write(writer_pipe[1], &c, 1) < 0 && errno != EAGAIN)
			log_warn("writer: waking the loop");
	}
	pthread_mutex_unlock(&writer_lock);
	return NULL;
}

/* Call done() of every job the thread has handed back, in queue order. */
static void
writer_deliver(void)
{
	STAILQ_HEAD(, writer_job) done;
	struct writer_job *job;

	STAILQ_INIT(&done);
	pthread_mutex_lock(&writer_lock);
	STAILQ_CONCAT(&done, &writer_done);
	pthread_mutex_unlock(&writer_lock);
	while ((job = STAILQ_FIRST(&done)) != NULL) {
		STAILQ_REMOVE_HEAD(&done, entry);
		job->done(job->error, job->arg);	/* may free the job */
	}
}

static void
writer_readable(evutil_socket_t fd, short what, void *arg)
{
	char buf[64];

	while (read(fd, buf, sizeof buf) > 0)
		;
	writer_deliver();
}

int
writer_start(const char *path, bool sync_full, char **ret_cause)
{
	int error;

	if ((writer_store = store_open(path, sync_full, ret_cause)) == NULL)
		return -EIO;
	if (pipe2(writer_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		error = -errno;
		*ret_cause = strdup("writer: cannot create its pipe");
		goto free_store;
	}
	writer_ev = event_new(kgymd_base, writer_pipe[0], EV_READ | EV_PERSIST,
	    writer_readable, NULL);
	if (writer_ev == NULL || event_add(writer_ev, NULL) < 0) {
		error = -ENOMEM;
		*ret_cause = strdup("writer: cannot watch its pipe");
		goto close_pipe;
	}
	writer_stopping = false;
	if ((error = -pthread_create(&writer_thread, NULL, writer_main, NULL)) < 0) {
		*ret_cause = strdup("writer: cannot start its thread");
		goto free_event;
	}
	writer_running = true;
	return 0;

free_event:
	if (writer_ev != NULL)
		event_free(writer_ev);
	writer_ev = NULL;
close_pipe:
	close(writer_pipe[0]);
	close(writer_pipe[1]);
	writer_pipe[0] = writer_pipe[1] = -1;
free_store:
	store_free(writer_store);
	writer_store = NULL;
	return error;
}

void
writer_submit(struct writer_job *job)
{
	if (!writer_running) {
		writer_run_alone(kgymd_store, job);
		job->done(job->error, job->arg);
		return;
	}
	pthread_mutex_lock(&writer_lock);
	STAILQ_INSERT_TAIL(&writer_todo, job, entry);
	pthread_cond_signal(&writer_wake);
	pthread_mutex_unlock(&writer_lock);
}

void
writer_sync(void)
{
	if (!writer_running)
		return;
	/* done() may queue more (a dispatch ends a task): until all is quiet. */
	for (;;) {
		pthread_mutex_lock(&writer_lock);
		while (!STAILQ_EMPTY(&writer_todo) || writer_busy)
			pthread_cond_wait(&writer_idle, &writer_lock);
		if (STAILQ_EMPTY(&writer_done)) {
			pthread_mutex_unlock(&writer_lock);
			return;
		}
		pthread_mutex_unlock(&writer_lock);
		writer_deliver();
	}
}

void
writer_stop(void)
{
	if (!writer_running)
		return;
	writer_sync();
	pthread_mutex_lock(&writer_lock);
	writer_stopping = true;
	pthread_cond_signal(&writer_wake);
	pthread_mutex_unlock(&writer_lock);
	pthread_join(writer_thread, NULL);
	writer_running = false;
	writer_deliver();
	event_free(writer_ev);
	writer_ev = NULL;
	close(writer_pipe[0]);
	close(writer_pipe[1]);
	writer_pipe[0] = writer_pipe[1] = -1;
	store_free(writer_store);
	writer_store = NULL;
}

/*
 * offload.c -- work off the event loop: one thread, a FIFO of jobs, and
 * each job's done() called back on the loop in the order jobs were queued.
 *
 * The loop must answer every client within a millisecond, so work that
 * takes longer (SQLite commits, see writer.c; parsing a request line of
 * megabytes, see control.c) runs in a thread of its own.  The thread takes
 * every job queued since its last pass and gives the whole group to its
 * run_group() (the writer commits a group in one transaction), then hands
 * the jobs back; the loop hears of it through a pipe (one byte per group;
 * the thread never touches libevent) and calls done() for each.
 *
 * A job is owned by whoever queued it; the thread borrows it until done().
 * run_group() may touch only what the jobs own, never loop state.
 */
#include "config.h"

#include <sys/resource.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "kgymd.h"

/* How much less CPU time the threads get than the loop when the CPUs are short. */
#define OFFLOAD_NICE	5

struct offload {
	char *name;
	void (*run_group)(struct offload_job *first, void *ctx);
	void *ctx;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;		/* jobs queued, or stopping */
	pthread_cond_t idle;		/* a group is done */
	STAILQ_HEAD(, offload_job) todo, done;
	bool busy;			/* the thread holds a group */
	bool stopping;
	int pipe[2];			/* thread -> loop */
	struct event *ev;
};

static void *
offload_main(void *arg)
{
	struct offload *o = arg;
	STAILQ_HEAD(, offload_job) group;
	bool was_empty;
	char c = 1;

	/*
	 * On a busy machine the loop comes first: a client's status must not
	 * wait for our time slice to end.  (A thread's nice value is its own.)
	 */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), OFFLOAD_NICE) < 0)
		log_debug("%s: setpriority: %s", o->name, strerror(errno));

	pthread_mutex_lock(&o->lock);
	for (;;) {
		while (STAILQ_EMPTY(&o->todo) && !o->stopping)
			pthread_cond_wait(&o->wake, &o->lock);
		if (STAILQ_EMPTY(&o->todo))
			break;		/* stopping, and nothing left */
		STAILQ_INIT(&group);
		STAILQ_CONCAT(&group, &o->todo);
		o->busy = true;
		pthread_mutex_unlock(&o->lock);

		o->run_group(STAILQ_FIRST(&group), o->ctx);

		pthread_mutex_lock(&o->lock);
		was_empty = STAILQ_EMPTY(&o->done);
		STAILQ_CONCAT(&o->done, &group);
		o->busy = false;
		pthread_cond_broadcast(&o->idle);
		/* The loop takes the whole list per wake-up: one byte is enough. */
		if (was_empty && write(o->pipe[1], &c, 1) < 0 && errno != EAGAIN)
			log_warn("%s: waking the loop", o->name);
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

/* Call done() of every job the thread has handed back, in queue order. */
static void
offload_deliver(struct offload *o)
{
	STAILQ_HEAD(, offload_job) done;
	struct offload_job *job;

	STAILQ_INIT(&done);
	pthread_mutex_lock(&o->lock);
	STAILQ_CONCAT(&done, &o->done);
	pthread_mutex_unlock(&o->lock);
	while ((job = STAILQ_FIRST(&done)) != NULL) {
		STAILQ_REMOVE_HEAD(&done, entry);
		job->done(job->arg);	/* may free the job */
	}
}

static void
offload_readable(evutil_socket_t fd, short what, void *arg)
{
	char buf[64];

	while (read(fd, buf, sizeof buf) > 0)
		;
	offload_deliver(arg);
}

struct offload *
offload_new(const char *name, void (*run_group)(struct offload_job *, void *), void *ctx)
{
	struct offload *o;

	if ((o = calloc(1, sizeof *o)) == NULL || (o->name = strdup(name)) == NULL) {
		free(o);
		return NULL;
	}
	o->run_group = run_group;
	o->ctx = ctx;
	STAILQ_INIT(&o->todo);
	STAILQ_INIT(&o->done);
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->wake, NULL);
	pthread_cond_init(&o->idle, NULL);
	/* CLOEXEC: workers are fork+exec'd from this process. */
	if (pipe2(o->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		goto free_o;
	o->ev = event_new(kgymd_base, o->pipe[0], EV_READ | EV_PERSIST, offload_readable, o);
	if (o->ev == NULL || event_add(o->ev, NULL) < 0)
		goto close_pipe;
	if (pthread_create(&o->thread, NULL, offload_main, o) != 0)
		goto close_pipe;
	pthread_setname_np(o->thread, o->name);	/* for top and perf */
	return o;

close_pipe:
	if (o->ev != NULL)
		event_free(o->ev);
	close(o->pipe[0]);
	close(o->pipe[1]);
free_o:
	free(o->name);
	free(o);
	return NULL;
}

void
offload_run_each(struct offload_job *first, void *ctx)
{
	struct offload_job *job;

	for (job = first; job != NULL; job = STAILQ_NEXT(job, entry))
		job->run(job->arg);
}

void
offload_submit(struct offload *o, struct offload_job *job)
{
	pthread_mutex_lock(&o->lock);
	STAILQ_INSERT_TAIL(&o->todo, job, entry);
	pthread_cond_signal(&o->wake);
	pthread_mutex_unlock(&o->lock);
}

void
offload_sync(struct offload *o)
{
	/* done() may queue more (a dispatch ends a task): until all is quiet. */
	for (;;) {
		pthread_mutex_lock(&o->lock);
		while (!STAILQ_EMPTY(&o->todo) || o->busy)
			pthread_cond_wait(&o->idle, &o->lock);
		if (STAILQ_EMPTY(&o->done)) {
			pthread_mutex_unlock(&o->lock);
			return;
		}
		pthread_mutex_unlock(&o->lock);
		offload_deliver(o);
	}
}

void
offload_free(struct offload *o)
{
	if (o == NULL)
		return;
	offload_sync(o);
	pthread_mutex_lock(&o->lock);
	o->stopping = true;
	pthread_cond_signal(&o->wake);
	pthread_mutex_unlock(&o->lock);
	pthread_join(o->thread, NULL);
	offload_deliver(o);
	event_free(o->ev);
	close(o->pipe[0]);
	close(o->pipe[1]);
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->wake);
	pthread_cond_destroy(&o->idle);
	free(o->name);
	free(o);
}

/* One thread for parsing and encoding: see offload_parser_submit(). */
static struct offload *offload_parser;

bool
offload_parser_submit(struct offload_job *job)
{
	if (offload_parser == NULL &&
	    (offload_parser = offload_new("kgymd-parser", offload_run_each, NULL)) == NULL)
		return false;
	offload_submit(offload_parser, job);
	return true;
}

void
offload_parser_free(void)
{
	offload_free(offload_parser);
	offload_parser = NULL;
}

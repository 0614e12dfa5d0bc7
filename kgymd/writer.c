/*
 * writer.c -- the store's writer: SQLite commits off the event loop.
 *
 * A commit costs the loop 0.1 to 2 ms (more when SQLite checkpoints its
 * WAL), and every client waits while the loop waits.  So every write of
 * the running daemon (tasks submitted, marked running, ended) is a job
 * handed to one thread (offload.c) with its own SQLite connection.  The
 * thread takes every job queued since its last pass and runs them in one
 * transaction (group commit: many clients' writes, one commit), then hands
 * them back; the loop calls each job's done() in the order the jobs were
 * queued.  Nothing that depends on a write (the reply
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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"

static struct offload *writer;		/* NULL: not started, or stopped */
static struct store *writer_store;	/* the thread's connection */

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

/* In the thread: a group of jobs in one transaction; each job's error in job->error. */
static void
writer_run_group(struct offload_job *first, void *ctx)
{
	struct store *store = ctx;
	struct offload_job *o;
	struct writer_job *job;
	int error;

	if (STAILQ_NEXT(first, entry) == NULL) {
		writer_run_alone(store, first->arg);
		return;
	}
	if ((error = store_begin(store)) == 0) {
		for (o = first; o != NULL && error == 0; o = STAILQ_NEXT(o, entry)) {
			job = o->arg;
			error = job->run(store, job->arg);
		}
		if (error == 0)
			error = store_commit(store);
		if (error == 0) {
			for (o = first; o != NULL; o = STAILQ_NEXT(o, entry))
				((struct writer_job *)o->arg)->error = 0;
			return;
		}
		store_rollback(store);
	}
	/* Someone's write failed: each job again, on its own. */
	for (o = first; o != NULL; o = STAILQ_NEXT(o, entry))
		writer_run_alone(store, o->arg);
}

static void
writer_done(void *arg)
{
	struct writer_job *job = arg;

	job->done(job->error, job->arg);	/* may free the job */
}

int
writer_start(const char *path, bool sync_full, char **ret_cause)
{
	if ((writer_store = store_open(path, sync_full, ret_cause)) == NULL)
		return -EIO;
	if ((writer = offload_new("kgymd-writer", writer_run_group, writer_store)) == NULL) {
		*ret_cause = strdup("cannot start the store's writer thread");
		store_free(writer_store);
		writer_store = NULL;
		return -ENOMEM;
	}
	return 0;
}

void
writer_submit(struct writer_job *job)
{
	if (writer == NULL) {
		writer_run_alone(kgymd_store, job);
		job->done(job->error, job->arg);
		return;
	}
	job->o.run = NULL;
	job->o.done = writer_done;
	job->o.arg = job;
	offload_submit(writer, &job->o);
}

bool
writer_active(void)
{
	return writer != NULL;
}

void
writer_sync(void)
{
	if (writer != NULL)
		offload_sync(writer);
}

void
writer_stop(void)
{
	if (writer == NULL)
		return;
	offload_free(writer);
	writer = NULL;
	store_free(writer_store);
	writer_store = NULL;
}

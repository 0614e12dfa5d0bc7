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
 * SQLite checkpoints (copies the WAL into the database, with two fsyncs)
 * after a commit once the WAL holds store_checkpoint_pages() pages: ~70 ms
 * every ~2,700 tasks of 8 KiB, about a third of the writer's time in
 * bench/control's 8 KiB phase, during which no submit could commit.  So
 * the writer's connection does not checkpoint: a thread of its own with a
 * connection of its own (kgymd-ckpt) does, passively, beside the
 * writer's commits.  Under a stream of commits with no gap the WAL is never
 * restarted (SQLite restarts it only when a write begins with every frame
 * copied); past four times the size the writer checkpoints itself between
 * two transactions, as SQLite would have, which bounds it.
 *
 * The loop's own connection (kgymd_store) stays for reads (status,
 * result, list, payloads at dispatch) and for the writes of start-up and
 * shutdown.  Before writer_start() (start-up recovery, the unit tests) and
 * after writer_stop(), writer_submit() runs the job at once on kgymd_store
 * and calls done() before it returns.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"

static struct offload *writer;		/* NULL: not started, or stopped */
static struct store *writer_store;	/* the thread's connection */

static struct offload *writer_ckpt;	/* the checkpoint thread; NULL: the writer checkpoints */
static struct store *writer_ckpt_store;	/* its connection */
static struct offload_job writer_ckpt_job;
static atomic_bool writer_ckpt_busy;	/* the job is queued or running */
static int writer_ckpt_from;		/* writer thread: the WAL's size at the last checkpoint asked */
static int writer_ckpt_seen;		/* writer thread: the WAL's size after the last commit */

/* In the checkpoint thread. */
static void
writer_checkpoint_run(void *arg)
{
	int error;

	/* -EBUSY: the writer's own checkpoint runs; the next commit asks again. */
	if ((error = store_checkpoint(writer_ckpt_store, NULL)) < 0 && error != -EBUSY)
		log_warnx("store: checkpoint: %s", strerror(-error));
}

/* On the loop: the job is back, it may be queued again. */
static void
writer_checkpoint_done(void *arg)
{
	atomic_store(&writer_ckpt_busy, false);
}

/* In the writer thread, after its commits: checkpoint elsewhere, or here when far behind. */
static void
writer_checkpoint(struct store *store)
{
	int frames = store_wal_frames(store), pages = store_checkpoint_pages();

	if (writer_ckpt == NULL)
		return;
	if (frames < writer_ckpt_seen)
		writer_ckpt_from = 0;	/* SQLite restarted the WAL */
	writer_ckpt_seen = frames;
	if (frames < writer_ckpt_from + pages || atomic_load(&writer_ckpt_busy))
		return;
	writer_ckpt_from = frames;
	if (frames >= 4 * pages) {
		/* No write is open now, so this copies everything: the WAL restarts. */
		(void)store_checkpoint(store, NULL);
		return;
	}
	atomic_store(&writer_ckpt_busy, true);
	offload_submit(writer_ckpt, &writer_ckpt_job);
}

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
		writer_checkpoint(store);
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
			writer_checkpoint(store);
			return;
		}
		store_rollback(store);
	}
	/* Someone's write failed: each job again, on its own. */
	for (o = first; o != NULL; o = STAILQ_NEXT(o, entry))
		writer_run_alone(store, o->arg);
	writer_checkpoint(store);
}

/* End the checkpoint thread and close its connection. */
static void
writer_checkpoint_stop(void)
{
	offload_free(writer_ckpt);
	writer_ckpt = NULL;
	store_free(writer_ckpt_store);
	writer_ckpt_store = NULL;
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
	char *cause = NULL;

	if ((writer_store = store_open(path, sync_full, ret_cause)) == NULL)
		return -EIO;
	/* Without the checkpoint thread the writer checkpoints as SQLite does: slower, as safe. */
	if ((writer_ckpt_store = store_open(path, sync_full, &cause)) == NULL ||
	    (writer_ckpt = offload_new("kgymd-ckpt", offload_run_each, NULL)) == NULL) {
		log_warnx("store: no checkpoint thread (%s); the writer checkpoints",
		    cause != NULL ? cause : "cannot start it");
		free(cause);
		store_free(writer_ckpt_store);
		writer_ckpt_store = NULL;
	} else {
		writer_ckpt_job.run = writer_checkpoint_run;
		writer_ckpt_job.done = writer_checkpoint_done;
		writer_ckpt_job.arg = NULL;
		atomic_store(&writer_ckpt_busy, false);
		writer_ckpt_from = writer_ckpt_seen = 0;
		store_checkpoint_apart(writer_store);
	}
	if ((writer = offload_new("kgymd-writer", writer_run_group, writer_store)) == NULL) {
		*ret_cause = strdup("cannot start the store's writer thread");
		writer_checkpoint_stop();
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
	writer_checkpoint_stop();	/* after the writer: it queues checkpoints */
	store_free(writer_store);
	writer_store = NULL;
}

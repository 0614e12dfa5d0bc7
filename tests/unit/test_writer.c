/*
 * test_writer.c -- unit tests of the store's writer: jobs come back on the
 * loop in the order they were queued, only after their commit, and a job
 * that fails in a group fails alone.
 *
 * The writer runs with its real neighbours: a SQLite store in a temporary
 * directory, its thread (offload.c) and a libevent loop.  The WAL reaches
 * the database file through the checkpoint thread, not the writer's commits.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "kgymd.h"

struct event_base *kgymd_base;
struct store *kgymd_store;

static char tmpdir[64];
static char dbpath[256];

struct tjob {
	struct writer_job job;
	const char *id;		/* row to insert; NULL: fail */
	int order;		/* when done() ran */
	int error;
	bool visible;		/* the loop's connection saw the row in done() */
};
static int ndone;

static int
tjob_run(struct store *store, void *arg)
{
	struct tjob *t = arg;
	struct store_row row = { .id = (char *)t->id, .workflow = "w", .owner = "uid:0" };

	if (t->id == NULL)
		return -EIO;	/* a write that fails: only this job must */
	return store_insert(store, &row, NULL);
}

static void
tjob_done(int error, void *arg)
{
	struct tjob *t = arg;
	struct store_row *row;

	t->order = ++ndone;
	t->error = error;
	if (t->id != NULL && store_get(kgymd_store, t->id, &row) == 0) {
		t->visible = true;
		store_row_free(row);
	}
}

static void
tjob_init(struct tjob *t, const char *id)
{
	memset(t, 0, sizeof *t);
	t->id = id;
	t->job.run = tjob_run;
	t->job.done = tjob_done;
	t->job.arg = t;
}

static int
setup(void **state)
{
	char *cause = NULL;

	snprintf(tmpdir, sizeof tmpdir, "/tmp/kgym-writer-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(dbpath, sizeof dbpath, "%s/tasks.db", tmpdir);
	kgymd_store = store_open(dbpath, false, &cause);
	assert_non_null(kgymd_store);
	kgymd_base = event_base_new();
	assert_int_equal(writer_start(dbpath, false, &cause), 0);
	ndone = 0;
	return 0;
}

static int
teardown(void **state)
{
	char cmd[300];

	writer_stop();
	event_base_free(kgymd_base);
	store_free(kgymd_store);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void
test_order_commit_and_isolation(void **state)
{
	struct tjob t[4];
	int i;

	tjob_init(&t[0], "a");
	tjob_init(&t[1], NULL);
	tjob_init(&t[2], "b");
	tjob_init(&t[3], "a");	/* a duplicate: the job's own error */
	for (i = 0; i < 4; i++)
		writer_submit(&t[i].job);
	writer_sync();		/* on the loop: every done() has run */
	for (i = 0; i < 4; i++)
		assert_int_equal(t[i].order, i + 1);
	assert_int_equal(t[0].error, 0);
	assert_true(t[0].visible);	/* committed before done() */
	assert_int_equal(t[1].error, -EIO);
	assert_int_equal(t[2].error, 0);
	assert_true(t[2].visible);
	assert_int_equal(t[3].error, -EEXIST);
}

static void
test_done_through_the_loop(void **state)
{
	struct tjob t;

	tjob_init(&t, "c");
	writer_submit(&t.job);
	/* The thread wakes the loop through its pipe. */
	while (t.order == 0)
		event_base_loop(kgymd_base, EVLOOP_ONCE);
	assert_int_equal(t.error, 0);
	assert_true(t.visible);
}

/* A job that inserts rows [first, first + n) with an 8 KiB payload each. */
struct bigjob {
	struct writer_job job;
	int first, n;
	int error;
	bool done;
};

static int
bigjob_run(struct store *store, void *arg)
{
	struct bigjob *b = arg;
	static char payload[8200];
	struct store_row row = { .workflow = "w", .owner = "uid:0", .payload = payload };
	char id[32];
	int i, err;

	memset(payload, 'x', sizeof payload - 1);	/* a JSON string */
	payload[0] = '"';
	payload[sizeof payload - 2] = '"';
	for (i = b->first; i < b->first + b->n; i++) {
		snprintf(id, sizeof id, "big-%d", i);
		row.id = id;
		if ((err = store_insert(store, &row, NULL)) < 0)
			return err;
	}
	return 0;
}

static void
bigjob_done(int error, void *arg)
{
	struct bigjob *b = arg;

	b->error = error;
	b->done = true;
}

static void
stop_loop(evutil_socket_t fd, short what, void *arg)
{
	*(bool *)arg = true;
}

static off_t
file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

/*
 * More than store_checkpoint_pages() of WAL: the checkpoint thread copies
 * it into the database file, so the file grows (the writer's connection
 * does not checkpoint, and nothing else writes).  If no checkpoint ran,
 * every row would still be in the WAL and the file would stay small.
 */
static void
test_checkpoint_apart(void **state)
{
	enum { NJOBS = 40, PER_JOB = 100 };
	struct bigjob b[NJOBS];
	struct store_row *row;
	struct timeval ten_s = { 10, 0 };
	struct event *timer;
	bool timed_out = false;
	off_t want = (off_t)store_checkpoint_pages() * 4096 / 2;
	int i;

	assert_true(file_size(dbpath) < want);
	for (i = 0; i < NJOBS; i++) {
		memset(&b[i], 0, sizeof b[i]);
		b[i].first = i * PER_JOB;
		b[i].n = PER_JOB;
		b[i].job.run = bigjob_run;
		b[i].job.done = bigjob_done;
		b[i].job.arg = &b[i];
		writer_submit(&b[i].job);
	}
	writer_sync();
	for (i = 0; i < NJOBS; i++) {
		assert_true(b[i].done);
		assert_int_equal(b[i].error, 0);
	}
	/* The checkpoint's done() comes through the loop, like the writer's. */
	timer = evtimer_new(kgymd_base, stop_loop, &timed_out);
	assert_non_null(timer);
	evtimer_add(timer, &ten_s);
	while (file_size(dbpath) < want && !timed_out)
		event_base_loop(kgymd_base, EVLOOP_ONCE);
	event_free(timer);
	assert_false(timed_out);
	assert_true(file_size(dbpath) >= want);
	assert_int_equal(store_get(kgymd_store, "big-3999", &row), 0);
	assert_int_equal(strlen(row->payload), 8199);
	store_row_free(row);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_order_commit_and_isolation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_done_through_the_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_apart, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

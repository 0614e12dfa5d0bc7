/*
 * test_writer.c -- unit tests of the store's writer: jobs come back on the
 * loop in the order they were queued, only after their commit, and a job
 * that fails in a group fails alone.
 *
 * The writer runs with its real neighbours: a SQLite store in a temporary
 * directory, its thread (offload.c) and a libevent loop.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_order_commit_and_isolation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_done_through_the_loop, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

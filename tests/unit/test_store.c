/*
 * test_store.c -- unit tests of the task store (kgymd/store.c).
 *
 * Each test gets a fresh database in its own mkdtemp directory.  Besides
 * the row operations, the tests check what the daemon's promises rest on:
 * data survives close and kill -9, the files are 0600 whatever the umask,
 * a newer schema is refused, and a batch insert is fast enough.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "kgymd.h"

struct fixture {
	char dir[64];
	char path[128];
	struct store *store;
};

static void
fixture_path(const struct fixture *f, const char *name, char *buf, size_t len)
{
	int n;

	n = snprintf(buf, len, "%s/%s", f->dir, name);
	assert_true(n > 0 && (size_t)n < len);
}

static int
setup(void **state)
{
	struct fixture *f;
	char *cause = NULL;

	f = calloc(1, sizeof *f);
	assert_non_null(f);
	strcpy(f->dir, "/tmp/kgym-test-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	fixture_path(f, "tasks.db", f->path, sizeof f->path);
	f->store = store_open(f->path, false, &cause);
	if (f->store == NULL)
		fail_msg("store_open: %s", cause ? cause : "(no cause)");
	*state = f;
	return 0;
}

/* Remove whatever the tests left in the directory, then the directory. */
static int
teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[160];

	store_free(f->store);
	snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", f->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", f->dir);
	free(f);
	return 0;
}

static struct store_row
row_queued(const char *id, int64_t created_ms)
{
	struct store_row row = {
		.id = (char *)id,
		.workflow = (char *)"kernel_simple",
		.prio = PRIO_NORMAL,
		.state = TASK_QUEUED,
		.timeout_s = 30.0,
		.payload = (char *)"{\"backend\":\"nvrtc\"}",
		.created_ms = created_ms,
	};

	return row;
}

static int64_t
insert_queued(struct store *store, const char *id, int64_t created_ms)
{
	struct store_row row = row_queued(id, created_ms);
	int64_t seq = -1;

	assert_int_equal(store_insert(store, &row, &seq), 0);
	assert_true(seq > 0);
	return seq;
}

static struct store_row *
get(struct store *store, const char *id)
{
	struct store_row *row = NULL;

	assert_int_equal(store_get(store, id, &row), 0);
	assert_non_null(row);
	return row;
}

static void
assert_state(struct store *store, const char *id, enum task_state state)
{
	struct store_row *row = get(store, id);

	assert_int_equal(row->state, state);
	store_row_free(row);
}

static void
assert_str_or_null(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

static void
assert_rows_equal(const struct store_row *a, const struct store_row *b)
{
	assert_string_equal(a->id, b->id);
	assert_str_or_null(a->workflow, b->workflow);
	assert_int_equal(a->prio, b->prio);
	assert_int_equal(a->state, b->state);
	assert_true(a->timeout_s == b->timeout_s);
	assert_str_or_null(a->payload, b->payload);
	assert_int_equal(a->attempt, b->attempt);
	assert_int_equal(a->created_ms, b->created_ms);
	assert_int_equal(a->started_ms, b->started_ms);
	assert_int_equal(a->finished_ms, b->finished_ms);
	assert_str_or_null(a->error_code, b->error_code);
	assert_str_or_null(a->error_message, b->error_message);
	assert_str_or_null(a->result, b->result);
}

/* A row with every field set to something other than its default. */
static const struct store_row full_row = {
	.id = (char *)"task-full.1:x",
	.workflow = (char *)"kernelbench",
	.prio = PRIO_LOW,
	.state = TASK_FAILED,
	.timeout_s = 12.25,
	.payload = (char *)"{\"kernel_code\":\"int main() { return \\\"\\u00e9\\\"; }\"}",
	.attempt = 4,
	.created_ms = 1700000000123,
	.started_ms = 1700000001456,
	.finished_ms = 1700000002789,
	.error_code = (char *)"COMPILATION_ERROR",
	.error_message = (char *)"line 1: error: expected ';'\nline 2: \xc3\xa9",
	.result = (char *)"{\"status\":\"failed\",\"compiled\":false}",
};

static void
test_insert_get_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct store_row *got, q = row_queued("q1", 42);
	int64_t seq1 = 0, seq2 = 0;

	assert_int_equal(store_insert(f->store, &q, &seq1), 0);
	assert_int_equal(store_insert(f->store, &full_row, &seq2), 0);
	assert_true(seq2 > seq1);

	got = get(f->store, "q1");
	assert_int_equal(got->seq, seq1);
	assert_rows_equal(got, &q);
	assert_null(got->error_code);
	assert_null(got->result);
	store_row_free(got);

	got = get(f->store, full_row.id);
	assert_int_equal(got->seq, seq2);
	assert_rows_equal(got, &full_row);
	store_row_free(got);

	/* NULL workflow and payload come back NULL, not "". */
	q = row_queued("q2", 1);
	q.workflow = NULL;
	q.payload = NULL;
	assert_int_equal(store_insert(f->store, &q, NULL), 0);
	got = get(f->store, "q2");
	assert_null(got->workflow);
	assert_null(got->payload);
	store_row_free(got);

	store_row_free(NULL);
}

static void
test_duplicate_and_missing(void **state)
{
	struct fixture *f = *state;
	struct store_row *got = NULL, dup = row_queued("same", 1);
	int64_t seq = 0, seq_after = -7;

	seq = insert_queued(f->store, "same", 1);
	dup.workflow = (char *)"other";
	assert_int_equal(store_insert(f->store, &dup, &seq_after), -EEXIST);
	assert_int_equal(seq_after, -7);	/* ret_seq untouched on failure */
	got = get(f->store, "same");
	assert_string_equal(got->workflow, "kernel_simple");
	assert_int_equal(got->seq, seq);
	store_row_free(got);

	got = NULL;
	assert_int_equal(store_get(f->store, "nope", &got), -ENOENT);
	assert_null(got);

	dup.id = NULL;
	assert_int_equal(store_insert(f->store, &dup, NULL), -EINVAL);
	dup.id = (char *)"bad-state";
	dup.state = TASK__STATE_COUNT;
	assert_int_equal(store_insert(f->store, &dup, NULL), -EINVAL);
	assert_int_equal(store_get(f->store, "bad-state", &got), -ENOENT);
}

static void
test_transitions(void **state)
{
	struct fixture *f = *state;
	struct store_row *got;
	char *payload = NULL;

	insert_queued(f->store, "t", 10);

	/* Marking running hands back the stored payload in the same statement. */
	assert_int_equal(store_mark_running(f->store, "t", 1, 1000, &payload), 0);
	assert_non_null(payload);
	got = get(f->store, "t");
	assert_string_equal(payload, got->payload);
	free(payload);
	assert_int_equal(got->state, TASK_RUNNING);
	assert_int_equal(got->attempt, 1);
	assert_int_equal(got->started_ms, 1000);
	assert_int_equal(got->finished_ms, 0);
	store_row_free(got);

	/* Requeue keeps the attempt count. */
	assert_int_equal(store_mark_queued(f->store, "t"), 0);
	got = get(f->store, "t");
	assert_int_equal(got->state, TASK_QUEUED);
	assert_int_equal(got->attempt, 1);
	store_row_free(got);

	assert_int_equal(store_mark_running(f->store, "t", 2, 2000, NULL), 0);
	assert_int_equal(store_mark_done(f->store, "t", TASK_RUNNING, NULL, NULL,
	    NULL, 3000), -EINVAL);
	assert_int_equal(store_mark_done(f->store, "t", TASK_COMPLETED, NULL,
	    NULL, "{\"status\":\"completed\"}", 3000), 0);
	got = get(f->store, "t");
	assert_int_equal(got->state, TASK_COMPLETED);
	assert_int_equal(got->attempt, 2);
	assert_int_equal(got->started_ms, 2000);
	assert_int_equal(got->finished_ms, 3000);
	assert_null(got->error_code);
	assert_string_equal(got->result, "{\"status\":\"completed\"}");
	store_row_free(got);

	/* A task ends once: later writes are refused and change nothing. */
	assert_int_equal(store_mark_done(f->store, "t", TASK_CANCELLED,
	    "CANCELLED", "cancelled", "{\"status\":\"cancelled\"}", 4000),
	    -EALREADY);
	assert_int_equal(store_mark_running(f->store, "t", 3, 5000, NULL), -EALREADY);
	assert_int_equal(store_mark_queued(f->store, "t"), -EALREADY);
	got = get(f->store, "t");
	assert_int_equal(got->state, TASK_COMPLETED);
	assert_int_equal(got->attempt, 2);
	assert_int_equal(got->finished_ms, 3000);
	assert_string_equal(got->result, "{\"status\":\"completed\"}");
	store_row_free(got);

	/* A queued task may be cancelled directly, with an error. */
	insert_queued(f->store, "c", 11);
	assert_int_equal(store_mark_done(f->store, "c", TASK_CANCELLED,
	    "CANCELLED", "cancelled by client", NULL, 6000), 0);
	got = get(f->store, "c");
	assert_int_equal(got->state, TASK_CANCELLED);
	assert_string_equal(got->error_code, "CANCELLED");
	assert_string_equal(got->error_message, "cancelled by client");
	assert_null(got->result);
	store_row_free(got);

	assert_int_equal(store_mark_running(f->store, "ghost", 1, 1, NULL), -ENOENT);
	assert_int_equal(store_mark_queued(f->store, "ghost"), -ENOENT);
	assert_int_equal(store_mark_done(f->store, "ghost", TASK_FAILED, NULL,
	    NULL, NULL, 1), -ENOENT);
}

struct seen {
	char ids[16][16];
	int64_t seqs[16];
	int n;
	int stop_after;			/* return 7 after this many; 0: never */
};

static int
collect_cb(const struct store_row *row, void *arg)
{
	struct seen *s = arg;

	assert_true(s->n < 16);
	snprintf(s->ids[s->n], sizeof s->ids[0], "%s", row->id);
	s->seqs[s->n] = row->seq;
	s->n++;
	if (s->stop_after > 0 && s->n == s->stop_after)
		return 7;
	return 0;
}

static void
test_recover(void **state)
{
	struct fixture *f = *state;
	struct store_row *got;
	struct seen s = { .n = 0 };
	json_t *result, *v;
	json_error_t jerr;
	int failed = -1;

	insert_queued(f->store, "q1", 1);
	insert_queued(f->store, "r1", 2);
	assert_int_equal(store_mark_running(f->store, "r1", 1, 100, NULL), 0);
	insert_queued(f->store, "q2", 3);
	insert_queued(f->store, "r3", 4);
	assert_int_equal(store_mark_running(f->store, "r3", 3, 100, NULL), 0);
	insert_queued(f->store, "r5", 5);
	assert_int_equal(store_mark_running(f->store, "r5", 5, 100, NULL), 0);
	insert_queued(f->store, "done", 6);
	assert_int_equal(store_mark_done(f->store, "done", TASK_COMPLETED, NULL,
	    NULL, "{}", 200), 0);
	insert_queued(f->store, "r2", 7);
	assert_int_equal(store_mark_running(f->store, "r2", 2, 100, NULL), 0);

	assert_int_equal(store_recover(f->store, 3, 99999, collect_cb, &s,
	    &failed), 0);
	assert_int_equal(failed, 2);

	/* Queued rows, old and requeued alike, in submission order. */
	assert_int_equal(s.n, 4);
	assert_string_equal(s.ids[0], "q1");
	assert_string_equal(s.ids[1], "r1");
	assert_string_equal(s.ids[2], "q2");
	assert_string_equal(s.ids[3], "r2");
	assert_true(s.seqs[0] < s.seqs[1] && s.seqs[1] < s.seqs[2] &&
	    s.seqs[2] < s.seqs[3]);

	got = get(f->store, "r1");
	assert_int_equal(got->state, TASK_QUEUED);
	assert_int_equal(got->attempt, 1);
	store_row_free(got);

	got = get(f->store, "r3");
	assert_int_equal(got->state, TASK_FAILED);
	assert_string_equal(got->error_code, "SYSTEM_ERROR");
	assert_string_equal(got->error_message,
	    "daemon stopped while the task was running (3 attempts)");
	assert_int_equal(got->finished_ms, 99999);
	assert_non_null(got->result);
	result = json_loads(got->result, 0, &jerr);
	assert_non_null(result);
	assert_string_equal(json_string_value(json_object_get(result, "status")),
	    "failed");
	assert_true(json_is_false(json_object_get(result, "compiled")));
	assert_true(json_is_false(json_object_get(result, "correctness")));
	assert_string_equal(json_string_value(json_object_get(result,
	    "error_code")), "SYSTEM_ERROR");
	assert_string_equal(json_string_value(json_object_get(result,
	    "error_message")), got->error_message);
	v = json_object_get(result, "task_id");
	assert_string_equal(json_string_value(v), "r3");
	json_decref(result);
	store_row_free(got);

	got = get(f->store, "r5");
	assert_int_equal(got->state, TASK_FAILED);
	assert_string_equal(got->error_message,
	    "daemon stopped while the task was running (5 attempts)");
	store_row_free(got);

	got = get(f->store, "done");
	assert_int_equal(got->state, TASK_COMPLETED);
	assert_string_equal(got->result, "{}");
	store_row_free(got);

	/* Nothing is running any more: a second pass fails nothing. */
	memset(&s, 0, sizeof s);
	s.stop_after = 2;
	failed = -1;
	assert_int_equal(store_recover(f->store, 3, 100000, collect_cb, &s,
	    &failed), 7);
	assert_int_equal(s.n, 2);
	assert_int_equal(failed, -1);	/* not written on failure */

	failed = -1;
	assert_int_equal(store_recover(f->store, 3, 100000, NULL, NULL,
	    &failed), 0);
	assert_int_equal(failed, 0);
	assert_int_equal(store_recover(f->store, 3, 100000, NULL, NULL, NULL),
	    0);
	got = get(f->store, "r3");
	assert_int_equal(got->finished_ms, 99999);
	store_row_free(got);
}

static void
test_recover_single_attempt(void **state)
{
	struct fixture *f = *state;
	struct store_row *got;
	int failed = -1;

	insert_queued(f->store, "once", 1);
	assert_int_equal(store_mark_running(f->store, "once", 1, 5, NULL), 0);
	assert_int_equal(store_recover(f->store, 1, 6, NULL, NULL, &failed), 0);
	assert_int_equal(failed, 1);
	got = get(f->store, "once");
	assert_int_equal(got->state, TASK_FAILED);
	assert_string_equal(got->error_message,
	    "daemon stopped while the task was running (1 attempt)");
	store_row_free(got);
}

struct listing {
	int64_t seqs[32];
	int states[32];
	int n;
	bool texts_null;
};

static int
list_cb(const struct store_row *row, void *arg)
{
	struct listing *l = arg;

	assert_true(l->n < 32);
	l->seqs[l->n] = row->seq;
	l->states[l->n] = row->state;
	if (row->payload != NULL || row->result != NULL)
		l->texts_null = false;
	assert_non_null(row->id);
	assert_non_null(row->workflow);
	l->n++;
	return 0;
}

static void
test_list(void **state)
{
	struct fixture *f = *state;
	struct listing l;
	int64_t seq[10];
	char id[16];
	int i;

	for (i = 0; i < 10; i++) {
		snprintf(id, sizeof id, "l%d", i);
		seq[i] = insert_queued(f->store, id, i);
		if (i % 3 == 1)
			assert_int_equal(store_mark_done(f->store, id,
			    TASK_COMPLETED, NULL, NULL, "{\"x\":1}", 100 + i), 0);
		else if (i % 3 == 2)
			assert_int_equal(store_mark_running(f->store, id, 1, i, NULL), 0);
	}

	memset(&l, 0, sizeof l);
	l.texts_null = true;
	assert_int_equal(store_list(f->store, -1, NULL, 0, -1, list_cb, &l), 0);
	assert_int_equal(l.n, 10);
	assert_true(l.texts_null);
	for (i = 0; i < 10; i++)
		assert_int_equal(l.seqs[i], seq[9 - i]);

	/* Completed: l1, l4, l7, newest first. */
	memset(&l, 0, sizeof l);
	l.texts_null = true;
	assert_int_equal(store_list(f->store, TASK_COMPLETED, NULL, 0, 100, list_cb, &l),
	    0);
	assert_int_equal(l.n, 3);
	assert_true(l.texts_null);
	assert_int_equal(l.seqs[0], seq[7]);
	assert_int_equal(l.seqs[1], seq[4]);
	assert_int_equal(l.seqs[2], seq[1]);
	for (i = 0; i < l.n; i++)
		assert_int_equal(l.states[i], TASK_COMPLETED);

	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, -1, NULL, 0, 3, list_cb, &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.seqs[0], seq[9]);
	assert_int_equal(l.seqs[2], seq[7]);

	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, TASK_QUEUED, NULL, 0, 2, list_cb, &l), 0);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.seqs[0], seq[9]);
	assert_int_equal(l.seqs[1], seq[6]);

	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, TASK_CANCELLED, NULL, 0, 5, list_cb, &l), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(store_list(f->store, -1, NULL, 0, 0, list_cb, &l), 0);
	assert_int_equal(l.n, 0);

	assert_int_equal(store_list(f->store, 9, NULL, 0, 5, list_cb, &l), -EINVAL);
	assert_int_equal(store_list(f->store, -2, NULL, 0, 5, list_cb, &l), -EINVAL);
}

static void
test_prune_and_count(void **state)
{
	struct fixture *f = *state;
	struct store_row *got = NULL;
	int64_t counts[TASK__STATE_COUNT], last_seq, seq;
	int n = -1;

	assert_int_equal(store_count(f->store, counts), 0);
	for (int i = 0; i < TASK__STATE_COUNT; i++)
		assert_int_equal(counts[i], 0);

	insert_queued(f->store, "old-done", 1);
	assert_int_equal(store_mark_done(f->store, "old-done", TASK_COMPLETED,
	    NULL, NULL, "{}", 100), 0);
	insert_queued(f->store, "old-failed", 2);
	assert_int_equal(store_mark_done(f->store, "old-failed", TASK_FAILED,
	    "RUNTIME_ERROR", "boom", "{}", 200), 0);
	insert_queued(f->store, "new-cancelled", 3);
	assert_int_equal(store_mark_done(f->store, "new-cancelled",
	    TASK_CANCELLED, "CANCELLED", "x", NULL, 300), 0);
	insert_queued(f->store, "queued", 4);
	insert_queued(f->store, "running", 5);
	assert_int_equal(store_mark_running(f->store, "running", 1, 6, NULL), 0);
	last_seq = insert_queued(f->store, "old-last", 6);
	assert_int_equal(store_mark_done(f->store, "old-last", TASK_FAILED,
	    NULL, NULL, NULL, 150), 0);

	assert_int_equal(store_count(f->store, counts), 0);
	assert_int_equal(counts[TASK_QUEUED], 1);
	assert_int_equal(counts[TASK_RUNNING], 1);
	assert_int_equal(counts[TASK_COMPLETED], 1);
	assert_int_equal(counts[TASK_FAILED], 2);
	assert_int_equal(counts[TASK_CANCELLED], 1);

	/* Queued and running rows have finished_ms 0 but are not terminal. */
	assert_int_equal(store_prune(f->store, 250, &n, NULL), 0);
	assert_int_equal(n, 3);
	assert_int_equal(store_get(f->store, "old-done", &got), -ENOENT);
	assert_int_equal(store_get(f->store, "old-failed", &got), -ENOENT);
	assert_int_equal(store_get(f->store, "old-last", &got), -ENOENT);
	assert_state(f->store, "new-cancelled", TASK_CANCELLED);
	assert_state(f->store, "queued", TASK_QUEUED);
	assert_state(f->store, "running", TASK_RUNNING);

	assert_int_equal(store_count(f->store, counts), 0);
	assert_int_equal(counts[TASK_QUEUED], 1);
	assert_int_equal(counts[TASK_RUNNING], 1);
	assert_int_equal(counts[TASK_COMPLETED], 0);
	assert_int_equal(counts[TASK_FAILED], 0);
	assert_int_equal(counts[TASK_CANCELLED], 1);

	/* The boundary is exclusive. */
	assert_int_equal(store_prune(f->store, 300, &n, NULL), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_prune(f->store, 301, NULL, NULL), 0);
	assert_int_equal(store_get(f->store, "new-cancelled", &got), -ENOENT);

	/* A pruned id may be used again, and seq never goes back. */
	seq = insert_queued(f->store, "old-last", 7);
	assert_true(seq > last_seq);
}

static void
test_transactions(void **state)
{
	struct fixture *f = *state;
	struct store_row *got = NULL;

	assert_int_equal(store_commit(f->store), -EINVAL);
	assert_int_equal(store_rollback(f->store), 0);

	assert_int_equal(store_begin(f->store), 0);
	assert_int_equal(store_begin(f->store), -EALREADY);
	insert_queued(f->store, "rolled-back", 1);
	assert_int_equal(store_rollback(f->store), 0);
	assert_int_equal(store_get(f->store, "rolled-back", &got), -ENOENT);

	/* A duplicate inside a batch fails alone; the batch goes on. */
	insert_queued(f->store, "dup", 1);
	assert_int_equal(store_begin(f->store), 0);
	insert_queued(f->store, "b1", 1);
	assert_int_equal(store_insert(f->store, &full_row, NULL), 0);
	{
		struct store_row dup = row_queued("dup", 1);

		assert_int_equal(store_insert(f->store, &dup, NULL), -EEXIST);
	}
	insert_queued(f->store, "b2", 1);
	assert_int_equal(store_commit(f->store), 0);
	assert_state(f->store, "b1", TASK_QUEUED);
	assert_state(f->store, "b2", TASK_QUEUED);

	/* store_recover joins a transaction the caller holds. */
	assert_int_equal(store_mark_running(f->store, "b1", 9, 1, NULL), 0);
	assert_int_equal(store_begin(f->store), 0);
	assert_int_equal(store_recover(f->store, 3, 2, NULL, NULL, NULL), 0);
	assert_int_equal(store_rollback(f->store), 0);
	assert_state(f->store, "b1", TASK_RUNNING);
}

static void
test_reopen(void **state)
{
	struct fixture *f = *state;
	struct store_row *got;
	char *cause = NULL;
	int64_t seq_full = 0;

	insert_queued(f->store, "a", 1);
	assert_int_equal(store_mark_running(f->store, "a", 2, 50, NULL), 0);
	assert_int_equal(store_insert(f->store, &full_row, &seq_full), 0);
	store_free(f->store);

	f->store = store_open(f->path, true, &cause);
	if (f->store == NULL)
		fail_msg("reopen: %s", cause);
	got = get(f->store, "a");
	assert_int_equal(got->state, TASK_RUNNING);
	assert_int_equal(got->attempt, 2);
	assert_int_equal(got->started_ms, 50);
	store_row_free(got);
	got = get(f->store, full_row.id);
	assert_int_equal(got->seq, seq_full);
	assert_rows_equal(got, &full_row);
	store_row_free(got);
	assert_true(insert_queued(f->store, "b", 2) > seq_full);
}

/* Commits must survive the process being killed without closing. */
static void
test_survives_kill9(void **state)
{
	struct fixture *f = *state;
	struct store *child_store;
	int64_t counts[TASK__STATE_COUNT];
	char path[128], id[32];
	pid_t pid;
	int status, i, ok;

	fixture_path(f, "killed.db", path, sizeof path);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		ok = (child_store = store_open(path, false, NULL)) != NULL;
		for (i = 0; ok && i < 50; i++) {
			struct store_row row;

			snprintf(id, sizeof id, "single-%d", i);
			row = row_queued(id, i);
			ok = store_insert(child_store, &row, NULL) == 0;
		}
		ok = ok && store_begin(child_store) == 0;
		for (i = 0; ok && i < 50; i++) {
			struct store_row row;

			snprintf(id, sizeof id, "batch-%d", i);
			row = row_queued(id, i);
			ok = store_insert(child_store, &row, NULL) == 0;
		}
		ok = ok && store_commit(child_store) == 0;
		ok = ok && store_mark_running(child_store, "single-3", 1, 9, NULL) == 0;
		if (!ok)
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);

	store_free(f->store);
	f->store = store_open(path, false, NULL);
	assert_non_null(f->store);
	assert_int_equal(store_count(f->store, counts), 0);
	assert_int_equal(counts[TASK_QUEUED], 99);
	assert_int_equal(counts[TASK_RUNNING], 1);
	assert_state(f->store, "batch-49", TASK_QUEUED);
}

/* Each owner's rows, a page at a time: what a non-admin's `list` walks. */
static void
test_list_owner_pages(void **state)
{
	struct fixture *f = *state;
	struct store_row row;
	struct listing l;
	int64_t seq[12];
	char id[16];
	int i;

	for (i = 0; i < 12; i++) {
		snprintf(id, sizeof id, "o%d", i);
		row = row_queued(id, i);
		row.owner = (char *)(i % 2 == 0 ? "uid:1000" : "uid:1001");
		assert_int_equal(store_insert(f->store, &row, &seq[i]), 0);
	}
	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, -1, "uid:1000", 0, 4, list_cb, &l), 0);
	assert_int_equal(l.n, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(l.seqs[i], seq[10 - 2 * i]);
	/* The next page starts below the last seq of this one. */
	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, -1, "uid:1000", seq[4], 4, list_cb, &l), 0);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.seqs[0], seq[2]);
	assert_int_equal(l.seqs[1], seq[0]);
	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, TASK_QUEUED, "uid:1001", 0, -1, list_cb, &l), 0);
	assert_int_equal(l.n, 6);
	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, -1, "uid:1002", 0, -1, list_cb, &l), 0);
	assert_int_equal(l.n, 0);
	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, -1, NULL, seq[6], -1, list_cb, &l), 0);
	assert_int_equal(l.n, 6);
}

/*
 * The schema of versions 1 and 2 as those kgymds created it (version 2 adds
 * the owner): the payload was a column of the task's row.
 */
#define OLD_TASKS_TABLE(owner) \
	"CREATE TABLE tasks (seq INTEGER PRIMARY KEY AUTOINCREMENT," \
	" id TEXT NOT NULL UNIQUE, workflow TEXT, priority INTEGER NOT NULL," \
	" state INTEGER NOT NULL, timeout_s REAL NOT NULL DEFAULT 0," \
	" gpu_memory_bytes INTEGER NOT NULL DEFAULT 0, payload TEXT," \
	" attempt INTEGER NOT NULL DEFAULT 0, created_ms INTEGER NOT NULL DEFAULT 0," \
	" started_ms INTEGER NOT NULL DEFAULT 0, finished_ms INTEGER NOT NULL DEFAULT 0," \
	" error_code TEXT, error_message TEXT, result TEXT" owner ");" \
	"CREATE INDEX tasks_state_seq ON tasks (state, seq);" \
	"CREATE INDEX tasks_finished ON tasks (finished_ms) WHERE state >= 2;"

/* Make f->path an old store holding one queued task "old" with a payload. */
static void
make_old_store(struct fixture *f, int version)
{
	char sql[2048];
	sqlite3 *db;

	store_free(f->store);
	f->store = NULL;
	assert_int_equal(unlink(f->path), 0);
	snprintf(sql, sizeof sql, "%s%s PRAGMA user_version = %d;"
	    " INSERT INTO tasks (id, workflow, priority, state, payload)"
	    " VALUES ('old', 'wf', 1, 0, '{\"old\":1}');",
	    version == 1 ? OLD_TASKS_TABLE("") :
	    OLD_TASKS_TABLE(", owner TEXT NOT NULL DEFAULT ''"),
	    version == 1 ? "" : "CREATE INDEX tasks_owner_seq ON tasks (owner, seq);",
	    version);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL),
	    SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* An upgraded store keeps its task's payload, and new tasks work beside it. */
static void
check_upgraded(struct fixture *f)
{
	struct store_row *got = NULL;
	char *payload = NULL, *cause = NULL;

	f->store = store_open(f->path, false, &cause);
	if (f->store == NULL)
		fail_msg("store_open: %s", cause ? cause : "(no cause)");
	assert_int_equal(store_get(f->store, "old", &got), 0);
	assert_string_equal(got->payload, "{\"old\":1}");
	store_row_free(got);
	assert_int_equal(store_mark_running(f->store, "old", 1, 5, &payload), 0);
	assert_string_equal(payload, "{\"old\":1}");
	free(payload);
	insert_queued(f->store, "new", 2);
	assert_int_equal(store_get_payload(f->store, "new", &payload), 0);
	assert_string_equal(payload, "{\"backend\":\"nvrtc\"}");
	free(payload);
}

/* A version 1 store (no owners) is upgraded in place; its rows are nobody's. */
static void
test_schema_v1_upgraded(void **state)
{
	struct fixture *f = *state;
	struct store_row *got = NULL;
	struct listing l;

	make_old_store(f, 1);
	check_upgraded(f);
	assert_int_equal(store_get(f->store, "old", &got), 0);
	assert_string_equal(got->owner, "");
	store_row_free(got);
	memset(&l, 0, sizeof l);
	assert_int_equal(store_list(f->store, -1, "uid:0", 0, -1, list_cb, &l), 0);
	assert_int_equal(l.n, 0);
}

/* A version 2 store (payloads in the task rows) moves them to their table. */
static void
test_schema_v2_upgraded(void **state)
{
	struct fixture *f = *state;

	make_old_store(f, 2);
	check_upgraded(f);
}

/* A pruned task takes its payload with it. */
static void
test_prune_takes_payload(void **state)
{
	struct fixture *f = *state;
	sqlite3 *db;
	sqlite3_stmt *st;
	int n = -1;

	insert_queued(f->store, "gone", 1);
	assert_int_equal(store_mark_done(f->store, "gone", TASK_COMPLETED, NULL, NULL, "{}", 10),
	    0);
	assert_int_equal(store_prune(f->store, 100, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM payloads", -1, &st,
	    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void
test_newer_schema_refused(void **state)
{
	struct fixture *f = *state;
	sqlite3 *db;
	sqlite3_stmt *st;
	char *cause = NULL;

	insert_queued(f->store, "keep", 1);
	store_free(f->store);
	f->store = NULL;

	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 4", NULL, NULL,
	    NULL), SQLITE_OK);
	sqlite3_close(db);

	assert_null(store_open(f->path, false, &cause));
	assert_non_null(cause);
	assert_non_null(strstr(cause, f->path));
	assert_non_null(strstr(cause, "schema version 4"));
	assert_non_null(strstr(cause, "newer"));
	free(cause);

	/* Refusing must not have touched it. */
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st,
	    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 4);
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_prepare_v2(db,
	    "SELECT count(*) FROM tasks WHERE id = 'keep'", -1, &st, NULL),
	    SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 1);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void
test_open_failure_cause(void **state)
{
	struct fixture *f = *state;
	char path[192], *cause = NULL;

	snprintf(path, sizeof path, "%s/no-such-dir/tasks.db", f->dir);
	assert_null(store_open(path, false, &cause));
	assert_non_null(cause);
	assert_int_equal(strncmp(cause, path, strlen(path)), 0);
	assert_non_null(strstr(cause, ": unable to open database file"));
	free(cause);

	/* Not a database at all. */
	fixture_path(f, "garbage.db", path, sizeof path);
	{
		FILE *fp = fopen(path, "w");

		assert_non_null(fp);
		fputs("this is not an SQLite database, just some text long "
		    "enough to have a header of one hundred bytes ........"
		    "..............................................\n", fp);
		fclose(fp);
	}
	cause = NULL;
	assert_null(store_open(path, false, &cause));
	assert_non_null(cause);
	assert_int_equal(strncmp(cause, path, strlen(path)), 0);
	free(cause);

	/* No cause wanted: still refuses, nothing leaks. */
	assert_null(store_open(path, false, NULL));
}

static void
assert_mode_0600(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) == -1)
		fail_msg("stat %s: %s", path, strerror(errno));
	if ((sb.st_mode & 0777) != 0600)
		fail_msg("%s: mode %03o, want 600", path,
		    (unsigned int)(sb.st_mode & 0777));
}

static void
test_file_modes(void **state)
{
	struct fixture *f = *state;
	struct store *s;
	char path[128], side[160];
	mode_t old;
	int fd;

	/* Whatever the umask, no one else may read the store. */
	fixture_path(f, "modes.db", path, sizeof path);
	old = umask(0);
	s = store_open(path, false, NULL);
	umask(old);
	assert_non_null(s);
	insert_queued(s, "m", 1);
	assert_mode_0600(path);
	snprintf(side, sizeof side, "%s-wal", path);
	assert_mode_0600(side);
	snprintf(side, sizeof side, "%s-shm", path);
	assert_mode_0600(side);
	store_free(s);

	/* A database left readable by others is tightened on open. */
	fixture_path(f, "loose.db", path, sizeof path);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	close(fd);
	snprintf(side, sizeof side, "%s-wal", path);
	fd = open(side, O_CREAT | O_WRONLY, 0666);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0666), 0);
	close(fd);
	s = store_open(path, false, NULL);
	assert_non_null(s);
	insert_queued(s, "m", 1);
	assert_mode_0600(path);
	assert_mode_0600(side);
	store_free(s);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
test_batch_speed(void **state)
{
	struct fixture *f = *state;
	int64_t counts[TASK__STATE_COUNT];
	struct store_row row;
	char id[32], payload[1100];
	double t0, batch_s, single_s;
	const int nbatch = 20000, nsingle = 2000;
	int i;

	/* About the size of a small kernel submission. */
	memset(payload, 'x', sizeof payload);
	memcpy(payload, "{\"src\":\"", 8);
	memcpy(payload + sizeof payload - 3, "\"}", 3);

	t0 = now_s();
	assert_int_equal(store_begin(f->store), 0);
	for (i = 0; i < nbatch; i++) {
		snprintf(id, sizeof id, "batch-%06d", i);
		row = row_queued(id, i);
		row.payload = payload;
		assert_int_equal(store_insert(f->store, &row, NULL), 0);
	}
	assert_int_equal(store_commit(f->store), 0);
	batch_s = now_s() - t0;

	t0 = now_s();
	for (i = 0; i < nsingle; i++) {
		snprintf(id, sizeof id, "single-%06d", i);
		row = row_queued(id, i);
		row.payload = payload;
		assert_int_equal(store_insert(f->store, &row, NULL), 0);
	}
	single_s = now_s() - t0;

	print_message("store: %d inserts in one transaction: %.3f s"
	    " (%.0f tasks/s)\n", nbatch, batch_s, nbatch / batch_s);
	print_message("store: %d inserts of one transaction each: %.3f s"
	    " (%.0f tasks/s)\n", nsingle, single_s, nsingle / single_s);
	assert_true(batch_s < 2.0);
	/* synchronous=NORMAL: no fsync per commit, so well under 1 ms each. */
	assert_true(single_s < 2.0);

	assert_int_equal(store_count(f->store, counts), 0);
	assert_int_equal(counts[TASK_QUEUED], nbatch + nsingle);
}

static void
test_sync_full(void **state)
{
	struct fixture *f = *state;
	char path[128];
	struct store *s;

	fixture_path(f, "full.db", path, sizeof path);
	s = store_open(path, true, NULL);
	assert_non_null(s);
	insert_queued(s, "durable", 1);
	assert_state(s, "durable", TASK_QUEUED);
	store_free(s);
	store_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_insert_get_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_and_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_transitions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recover, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recover_single_attempt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_and_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_transactions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_survives_kill9, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_owner_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_v1_upgraded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_v2_upgraded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_takes_payload, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_failure_cause, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_speed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_full, setup, teardown),
	};

	/* Expected refusals log warnings; keep the test output readable. */
	log_init(KGYM_LOG_ERROR, true);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

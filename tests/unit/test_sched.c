/*
 * test_sched.c -- unit tests of the scheduler: priority order, FIFO within a
 * class, the running limit, cancel, queue_full, restore and timeouts.
 *
 * The scheduler runs here with its real neighbours where they are cheap
 * (the SQLite store in a temporary directory, the task index, libevent) and
 * with fakes where they are not: a fake workflow plugin that records the
 * order in which tasks start and finishes them when told, and recording
 * stand-ins for the waiter and stats modules.
 */
#include "config.h"

#include <errno.h>
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
struct config *kgymd_config;
struct store *kgymd_store;

/* --- fakes of the neighbours sched.c calls --- */

#define MAX_EVENTS 64
static char started[MAX_EVENTS][32];
static int nstarted;
static struct task *running_tasks[MAX_EVENTS];
static int nrunning_tasks;
static char ended[MAX_EVENTS][32];
static enum task_state ended_state[MAX_EVENTS];
static int nended;
static int ncancelled_by_plugin;

static int
fake_init(const struct kgym_host *h, const struct kgym_plugin_handle *s, char **c)
{
	return 0;
}

static void
fake_fini(void)
{
}

static int
fake_validate(const json_t *p, char **c)
{
	return 0;
}

static int
fake_start(struct kgym_task *t, char **ret_cause)
{
	struct task *task = (struct task *)t;

	snprintf(started[nstarted++], sizeof started[0], "%s", task->id);
	running_tasks[nrunning_tasks++] = task;
	if (json_is_true(json_object_get(task->payload, "finish_now")))
		sched_finish(task, json_pack("{s:s}", "status", "completed"));
	return 0;
}

static void
fake_cancel(struct kgym_task *t)
{
	ncancelled_by_plugin++;
}

static const char *const fake_serves[] = { "fake", NULL };
static const struct kgym_plugin fake_plugin_struct = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "fake",
	.kind = KGYM_PLUGIN_WORKFLOW,
	.version = "1",
	.serves = fake_serves,
	.init = fake_init,
	.fini = fake_fini,
	.validate = fake_validate,
	.start = fake_start,
	.cancel = fake_cancel,
};
static struct plugin fake_plugin = { .p = &fake_plugin_struct };

struct plugin *
plugin_find_workflow(const char *workflow)
{
	return strcmp(workflow, "fake") == 0 ? &fake_plugin : NULL;
}

void
wait_task_done(const char *id, enum task_state state, json_t *result)
{
	ended_state[nended] = state;
	snprintf(ended[nended++], sizeof ended[0], "%s", id);
}

void
pool_task_gone(struct task *task)
{
	/* No jobs in these tests: the workflow fake runs nothing sandboxed. */
}

const char *
pool_gpu_name(int index)
{
	(void)index;
	return NULL;	/* no task here runs a job, so none names a GPU */
}

static uint64_t fake_clock;

uint64_t
stats_now_us(void)
{
	return ++fake_clock;
}

static int64_t fake_wall_ms = 1700000000000;

int64_t
stats_wall_ms(void)
{
	return fake_wall_ms;
}

void
stats_task_submitted(void)
{
}

void
stats_task_done(enum task_state s, uint64_t q, uint64_t r)
{
}

/* queue_sqlite.c's start-up, which these tests do by hand. */
void
stats_set_stored(const int64_t counts[TASK__STATE_COUNT])
{
}

/* --- helpers --- */

static char tmpdir[64];

static int
setup(void **state)
{
	char path[128], *cause = NULL;

	snprintf(tmpdir, sizeof tmpdir, "/tmp/kgym-sched-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(path, sizeof path, "%s/tasks.db", tmpdir);
	kgymd_store = store_open(path, false, &cause);
	assert_non_null(kgymd_store);
	kgymd_config = config_defaults();
	kgymd_config->max_running_tasks = 2;
	kgymd_base = event_base_new();
	sched_init();
	nstarted = nended = nrunning_tasks = ncancelled_by_plugin = 0;
	log_init(KGYM_LOG_ERROR, true);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[160];

	sched_free();
	event_base_free(kgymd_base);
	store_free(kgymd_store);
	config_free(kgymd_config);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* No writer thread here: sched_batch_commit() calls back before it returns. */
static int commit_error = 1;

static void
commit_done(struct sched_batch *b, int error, void *arg)
{
	commit_error = error;
	sched_batch_free(b);
}

static int
commit(struct sched_batch *b)
{
	commit_error = 1;
	sched_batch_commit(b, commit_done, NULL);
	return commit_error;
}

static void
submit(const char *id, enum task_prio prio, bool finish_now)
{
	struct task_spec spec = { .id = id, .workflow = "fake", .prio = prio };
	enum task_state state;
	char got[KGYM_TASK_ID_MAX + 1], *cause = NULL;
	bool existing;
	const char *owner = NULL;

	spec.payload = json_pack("{s:b}", "finish_now", finish_now);
	struct sched_batch *b = sched_batch_new();
	assert_non_null(b);
	assert_int_equal(sched_submit(b, &spec, "uid:0", got, sizeof got, &state, &existing, &owner, &cause), 0);
	assert_int_equal(commit(b), 0);
	assert_string_equal(got, id);
	assert_false(existing);
	json_decref(spec.payload);
}

/* Run the loop until nothing is pending (dispatch passes are deferred). */
static void
settle(void)
{
	event_base_loop(kgymd_base, EVLOOP_NONBLOCK);
	event_base_loop(kgymd_base, EVLOOP_NONBLOCK);
}

static void
finish_running(int i)
{
	sched_finish(running_tasks[i], json_pack("{s:s}", "status", "completed"));
	settle();
}

/* --- tests --- */

static void
test_priority_then_fifo(void **state)
{
	/* All submitted before one dispatch pass: high first, FIFO within. */
	submit("l1", PRIO_LOW, true);
	submit("n1", PRIO_NORMAL, true);
	submit("h1", PRIO_HIGH, true);
	submit("l2", PRIO_LOW, true);
	submit("h2", PRIO_HIGH, true);
	submit("n2", PRIO_NORMAL, true);
	settle();
	settle();
	settle();
	assert_int_equal(nstarted, 6);
	assert_string_equal(started[0], "h1");
	assert_string_equal(started[1], "h2");
	assert_string_equal(started[2], "n1");
	assert_string_equal(started[3], "n2");
	assert_string_equal(started[4], "l1");
	assert_string_equal(started[5], "l2");
	assert_int_equal(nended, 6);
	assert_int_equal(sched_queued(), 0);
	assert_int_equal(sched_running(), 0);
}

static void
test_running_limit(void **state)
{
	submit("a", PRIO_NORMAL, false);
	submit("b", PRIO_NORMAL, false);
	submit("c", PRIO_NORMAL, false);
	submit("d", PRIO_HIGH, false);
	settle();
	/*
	 * max_running_tasks = 2, and all four were queued before the first
	 * dispatch pass: the high-priority d goes first, then a.
	 */
	assert_int_equal(sched_running(), 2);
	assert_int_equal(sched_queued(), 2);
	assert_string_equal(started[0], "d");
	assert_string_equal(started[1], "a");
	finish_running(0);
	assert_int_equal(nstarted, 3);
	assert_string_equal(started[2], "b");
	assert_int_equal(sched_running(), 2);
}

static void
test_cancel_queued_and_running(void **state)
{
	enum task_state st;

	submit("r1", PRIO_NORMAL, false);
	submit("r2", PRIO_NORMAL, false);
	submit("q1", PRIO_NORMAL, false);
	settle();
	assert_int_equal(sched_cancel("q1", &st), 0);
	assert_int_equal(st, TASK_CANCELLED);
	assert_int_equal(ncancelled_by_plugin, 0);
	assert_int_equal(sched_cancel("r1", &st), 0);
	assert_int_equal(ncancelled_by_plugin, 1);
	assert_int_equal(sched_cancel("r1", &st), -EALREADY);
	assert_int_equal(st, TASK_CANCELLED);
	assert_int_equal(sched_cancel("nope", &st), -ENOENT);
	settle();
	/* q1 never started; the freed slot went to nobody else. */
	assert_int_equal(nstarted, 2);
	assert_int_equal(sched_running(), 1);
	assert_int_equal(nended, 2);
	assert_int_equal(ended_state[0], TASK_CANCELLED);
}

static void
test_queue_full(void **state)
{
	struct task_spec spec = { .id = "x3", .workflow = "fake", .prio = PRIO_NORMAL };
	enum task_state st;
	char got[KGYM_TASK_ID_MAX + 1], *cause = NULL;
	bool existing;
	const char *owner = NULL;

	kgymd_config->max_queued_tasks = 2;
	kgymd_config->max_running_tasks = 0;
	submit("x1", PRIO_NORMAL, false);
	submit("x2", PRIO_NORMAL, false);
	spec.payload = json_object();
	struct sched_batch *b = sched_batch_new();
	assert_non_null(b);
	assert_int_equal(sched_submit(b, &spec, "uid:0", got, sizeof got, &st, &existing, &owner, &cause), -ENOSPC);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "max_queued_tasks"));
	free(cause);
	cause = NULL;
	/* An existing id is not refused by a full queue: it is idempotent. */
	spec.id = "x1";
	assert_int_equal(sched_submit(b, &spec, "uid:0", got, sizeof got, &st, &existing, &owner, &cause), 0);
	assert_true(existing);
	assert_int_equal(commit(b), 0);
	json_decref(spec.payload);
}

static int
restore_cb(const struct store_row *row, void *arg)
{
	return sched_restore(row);
}

static void
test_restore_keeps_order(void **state)
{
	int failed = 0;

	kgymd_config->max_running_tasks = 0;	/* queue only */
	submit("o1", PRIO_LOW, false);
	submit("o2", PRIO_HIGH, false);
	submit("o3", PRIO_LOW, false);
	settle();
	/* Forget the in-memory queue, as a crash would, and recover. */
	sched_free();
	sched_init();
	assert_int_equal(store_recover(kgymd_store, 3, 0, restore_cb, NULL, &failed), 0);
	assert_int_equal(sched_queued(), 3);
	kgymd_config->max_running_tasks = 3;
	sched_kick();
	settle();
	assert_int_equal(nstarted, 3);
	assert_string_equal(started[0], "o2");
	assert_string_equal(started[1], "o1");
	assert_string_equal(started[2], "o3");
}

static void
test_unknown_workflow_fails_task(void **state)
{
	struct task_spec spec = { .id = "w1", .workflow = "gone", .prio = PRIO_NORMAL };
	enum task_state st;
	char got[KGYM_TASK_ID_MAX + 1], *cause = NULL;
	bool existing;
	const char *owner = NULL;
	struct store_row *row;

	spec.payload = json_object();
	struct sched_batch *b = sched_batch_new();
	assert_non_null(b);
	assert_int_equal(sched_submit(b, &spec, "uid:0", got, sizeof got, &st, &existing, &owner, &cause), 0);
	assert_int_equal(commit(b), 0);
	json_decref(spec.payload);
	settle();
	assert_int_equal(nended, 1);
	assert_int_equal(ended_state[0], TASK_FAILED);
	assert_int_equal(store_get(kgymd_store, "w1", &row), 0);
	assert_int_equal(row->state, TASK_FAILED);
	assert_string_equal(row->error_code, "SYSTEM_ERROR");
	assert_non_null(strstr(row->error_message, "gone"));
	store_row_free(row);
}

static void
test_timeout(void **state)
{
	struct task_spec spec = { .id = "slow", .workflow = "fake", .prio = PRIO_NORMAL,
	    .timeout_s = 0.05 };
	enum task_state st;
	char got[KGYM_TASK_ID_MAX + 1], *cause = NULL;
	bool existing;
	const char *owner = NULL;

	spec.payload = json_object();
	struct sched_batch *b = sched_batch_new();
	assert_non_null(b);
	assert_int_equal(sched_submit(b, &spec, "uid:0", got, sizeof got, &st, &existing, &owner, &cause), 0);
	assert_int_equal(commit(b), 0);
	json_decref(spec.payload);
	settle();
	assert_int_equal(nstarted, 1);
	usleep(80000);
	event_base_loop(kgymd_base, EVLOOP_ONCE);
	assert_int_equal(nended, 1);
	assert_int_equal(ended_state[0], TASK_FAILED);
	assert_int_equal(ncancelled_by_plugin, 1);
}

/*
 * Generated ids: 32 lowercase hex digits, never equal, and ids made in a
 * later millisecond sort after earlier ones (the store's id index relies
 * on it to keep a batch's rows on a few pages).
 */
static void
test_task_ids_sort_by_time(void **state)
{
	char a[KGYM_TASK_ID_MAX + 1], b[KGYM_TASK_ID_MAX + 1], prev[KGYM_TASK_ID_MAX + 1];
	int i;

	assert_int_equal(task_id_generate(a, sizeof a), 0);
	assert_int_equal(strlen(a), 32);
	assert_int_equal(strspn(a, "0123456789abcdef"), 32);
	strcpy(prev, a);
	/* 600 ids: more than one refill of the random bytes. */
	for (i = 0; i < 600; i++) {
		assert_int_equal(task_id_generate(b, sizeof b), 0);
		assert_string_not_equal(b, prev);
		assert_memory_not_equal(b + 12, prev + 12, 20);
		strcpy(prev, b);
	}
	fake_wall_ms++;
	assert_int_equal(task_id_generate(b, sizeof b), 0);
	assert_true(strcmp(a, b) < 0);
	assert_int_equal(task_id_generate(b, 32), -ENOSPC);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_priority_then_fifo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_running_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_queued_and_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restore_keeps_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_workflow_fails_task, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
		cmocka_unit_test(test_task_ids_sort_by_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

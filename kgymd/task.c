/*
 * task.c -- the in-memory record of live tasks.
 *
 * Only queued and running tasks live in memory, and only what scheduling
 * needs (id, order, priority, workflow name): the payload stays in the store
 * until the task is dispatched, so a million queued tasks cost tens of
 * megabytes, not the size of their sources.  Terminal tasks exist only in
 * the store.  The index is glibc's tsearch(3) tree keyed by id.
 *
 * Ownership: task_new() returns an owned task; task_free() releases it and
 * everything it holds, and must be called only after task_index_remove().
 */
#include "config.h"

#include <sys/random.h>

#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kgymd.h"

static void *task_root;
static size_t task_count;

static int
task_compare(const void *a, const void *b)
{
	const struct task *ta = a, *tb = b;

	return strcmp(ta->id, tb->id);
}

struct task *
task_new(const char *id, int64_t seq, enum task_prio prio, const char *workflow,
    double timeout_s, int64_t created_ms)
{
	struct task *task;

	if ((task = calloc(1, sizeof *task)) == NULL)
		return NULL;
	task->gpu = -1;
	task->id = strdup(id);
	task->workflow = strdup(workflow);
	if (task->id == NULL || task->workflow == NULL) {
		task_free(task);
		return NULL;
	}
	task->seq = seq;
	task->prio = prio;
	task->state = TASK_QUEUED;
	task->timeout_s = timeout_s;
	task->created_ms = created_ms;
	return task;
}

void
task_free(struct task *task)
{
	if (task == NULL)
		return;
	if (task->plugin_timer != NULL)
		event_free(task->plugin_timer);
	if (task->deadline != NULL)
		event_free(task->deadline);
	json_decref(task->payload);
	json_decref(task->result);
	free(task->workflow);
	free(task->owner);
	free(task->id);
	free(task);
}

int
task_index_add(struct task *task)
{
	void *node;

	node = tsearch(task, &task_root, task_compare);
	if (node == NULL)
		return -ENOMEM;
	if (*(struct task **)node != task)
		return -EEXIST;
	task_count++;
	return 0;
}

void
task_index_remove(struct task *task)
{
	void *node = tfind(task, &task_root, task_compare);

	if (node != NULL && *(struct task **)node == task) {
		tdelete(task, &task_root, task_compare);
		task_count--;
	}
}

struct task *
task_index_find(const char *id)
{
	struct task key = { .id = (char *)id };
	void *node;

	node = tfind(&key, &task_root, task_compare);
	return node != NULL ? *(struct task **)node : NULL;
}

size_t
task_index_count(void)
{
	return task_count;
}

/*
 * Random bytes fetched from the kernel in bulk, one getrandom() per 25 ids
 * (up to 256 bytes it always returns them all, signals or not).
 */
static unsigned char task_random[256];
static size_t task_random_left;

int
task_id_generate(char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[16];
	uint64_t ms = (uint64_t)stats_wall_ms();
	size_t i;

	/*
	 * The wall clock's milliseconds (48 bits), then 80 random bits, as
	 * UUIDv7 does: ids made together sort together, so a batch's rows go
	 * to a few pages at the end of the store's id index instead of one
	 * random page each (with 100,000 tasks stored, a 1,000-task commit
	 * wrote a page of WAL per task for that alone).  kgymd-protocol(7)
	 * promises nothing of an id's form; two ids of one millisecond still
	 * differ in 80 random bits, and an id tells nobody but its owner
	 * (ownership) the time they could read in the task's created_ms.
	 */
	if (len < 2 * sizeof r + 1)
		return -ENOSPC;
	if (task_random_left < sizeof r - 6) {
		if (getrandom(task_random, sizeof task_random, 0) != (ssize_t)sizeof task_random)
			return -errno;
		task_random_left = sizeof task_random;
	}
	for (i = 0; i < 6; i++)
		r[i] = (unsigned char)(ms >> (8 * (5 - i)));
	task_random_left -= sizeof r - 6;
	memcpy(r + 6, task_random + task_random_left, sizeof r - 6);
	/* Used bytes are not kept: nothing can read them back. */
	memset(task_random + task_random_left, 0, sizeof r - 6);
	for (i = 0; i < sizeof r; i++) {
		buf[2 * i] = hex[r[i] >> 4];
		buf[2 * i + 1] = hex[r[i] & 15];
	}
	buf[2 * sizeof r] = '\0';
	return 0;
}

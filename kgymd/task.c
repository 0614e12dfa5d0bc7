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

int
task_id_generate(char *buf, size_t len)
{
	unsigned char r[16];
	size_t i;

	/* 128 random bits: collisions are not a practical concern. */
	if (len < 2 * sizeof r + 1)
		return -ENOSPC;
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return -errno;
	/* Not snprintf: a 1,000-task submit made 16,000 calls of it. */
	for (i = 0; i < sizeof r; i++) {
		buf[2 * i] = "0123456789abcdef"[r[i] >> 4];
		buf[2 * i + 1] = "0123456789abcdef"[r[i] & 0xf];
	}
	buf[2 * sizeof r] = '\0';
	return 0;
}

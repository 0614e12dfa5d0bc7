/*
 * host.c -- the table of host functions handed to plugins.
 *
 * Plugins link nothing of kgymd (kgym-plugin(3)): everything they may ask of
 * the daemon is in this table, so the daemon's internals can change without
 * breaking a plugin as long as these functions keep their meaning.  A
 * `struct kgym_task` as plugins see it is kgymd's `struct task`.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#include <event2/event.h>

#include "kgymd.h"

static void
host_log(const struct kgym_plugin_handle *self, enum kgym_log_level level,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	plugin_vlog(self, (int)level, fmt, ap);
	va_end(ap);
}

static const char *
host_config_get(const struct kgym_plugin_handle *self, const char *key)
{
	return plugin_config_value(kgymd_config, self, key);
}

static const char *
host_task_id(const struct kgym_task *t)
{
	return ((const struct task *)t)->id;
}

static const json_t *
host_task_payload(const struct kgym_task *t)
{
	return ((const struct task *)t)->payload;
}

static void
host_task_set_data(struct kgym_task *t, void *data)
{
	((struct task *)t)->plugin_data = data;
}

static void *
host_task_get_data(const struct kgym_task *t)
{
	return ((const struct task *)t)->plugin_data;
}

static void
host_timer_fire(evutil_socket_t fd, short what, void *arg)
{
	struct task *task = arg;

	task->plugin_timer_cb((struct kgym_task *)task);
}

static int
host_task_timer(struct kgym_task *t, unsigned int ms, void (*cb)(struct kgym_task *))
{
	struct task *task = (struct task *)t;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	if (cb == NULL || task->state != TASK_RUNNING)
		return -EINVAL;
	if (task->plugin_timer == NULL &&
	    (task->plugin_timer = evtimer_new(kgymd_base, host_timer_fire, task)) == NULL)
		return -ENOMEM;
	task->plugin_timer_cb = cb;
	return evtimer_add(task->plugin_timer, &tv) == 0 ? 0 : -EIO;
}

static int
host_task_finish(struct kgym_task *t, json_t *result)
{
	sched_finish((struct task *)t, result);
	return 0;
}

static double
host_task_time_left(const struct kgym_task *t)
{
	const struct task *task = (const struct task *)t;
	uint64_t now = stats_now_us();

	if (task->deadline_us == 0)	/* not started: all of it */
		return task->timeout_s > 0 ? task->timeout_s : kgymd_config->default_timeout_s;
	return task->deadline_us > now ? (double)(task->deadline_us - now) / 1e6 : 0.0;
}

static int
host_job_run(struct kgym_task *t, const struct kgym_job_spec *spec,
    void (*done)(struct kgym_task *, const struct kgym_job_outcome *), char **ret_cause)
{
	return pool_job_run((struct task *)t, spec, done, ret_cause);
}

static const struct kgym_host host = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_host),
	.log = host_log,
	.alloc = malloc,
	.free = free,
	.config_get = host_config_get,
	.task_id = host_task_id,
	.task_payload = host_task_payload,
	.task_set_data = host_task_set_data,
	.task_get_data = host_task_get_data,
	.task_timer = host_task_timer,
	.task_finish = host_task_finish,
	.job_run = host_job_run,
	.gpu_arch = pool_gpu_arch,
	.task_time_left = host_task_time_left,
	.toolkit = plugin_toolkit,
	/* gpu_lock and phase exist only inside workers. */
};

const struct kgym_host *
host_table(void)
{
	return &host;
}

/*
 * selftest.c -- the test-only workflow plugin `selftest` (never installed).
 *
 * It exercises the workflow half of the plugin ABI without any GPU: a task
 * with payload {"action":"ok","delay_ms":N} completes N ms after it starts
 * with a small result; "incorrect" completes with correctness false and
 * "fail" fails, so clients can test every verdict.  The actions that need a
 * sandboxed job (crash, hang, network, ...) arrive with the worker issue.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <kgym/plugin.h>

static const struct kgym_host *host;
static const struct kgym_plugin_handle *self;

static const char *const selftest_actions[] = { "ok", "incorrect", "fail", NULL };

static int
selftest_init(const struct kgym_host *h, const struct kgym_plugin_handle *s, char **ret_cause)
{
	host = h;
	self = s;
	return 0;
}

static void
selftest_fini(void)
{
}

static char *
selftest_strdup(const char *s)
{
	char *d = host->alloc(strlen(s) + 1);

	if (d != NULL)
		memcpy(d, s, strlen(s) + 1);
	return d;
}

static int
selftest_validate(const json_t *payload, char **ret_cause)
{
	const json_t *action = json_object_get(payload, "action");
	const json_t *delay = json_object_get(payload, "delay_ms");
	int i;

	if (!json_is_string(action)) {
		*ret_cause = selftest_strdup("'action': expected a string (ok, incorrect, fail)");
		return -EINVAL;
	}
	for (i = 0; selftest_actions[i] != NULL; i++)
		if (strcmp(json_string_value(action), selftest_actions[i]) == 0)
			break;
	if (selftest_actions[i] == NULL) {
		*ret_cause = selftest_strdup("'action': expected ok, incorrect or fail");
		return -EINVAL;
	}
	if (delay != NULL && (!json_is_integer(delay) || json_integer_value(delay) < 0 ||
	    json_integer_value(delay) > 3600000)) {
		*ret_cause = selftest_strdup("'delay_ms': expected an integer from 0 to 3600000");
		return -EINVAL;
	}
	return 0;
}

static void
selftest_done(struct kgym_task *task)
{
	const json_t *payload = host->task_payload(task);
	const char *action = json_string_value(json_object_get(payload, "action"));
	json_int_t delay = json_integer_value(json_object_get(payload, "delay_ms"));
	json_t *result;

	if (strcmp(action, "fail") == 0)
		result = json_pack("{s:s, s:b, s:b, s:s, s:s}", "status", "failed",
		    "compiled", 0, "correctness", 0, "error_code", "RUNTIME_ERROR",
		    "error_message", "selftest: the task asked to fail");
	else
		result = json_pack("{s:s, s:b, s:b, s:b, s:f, s:f, s:f, s:{s:I, s:s}}",
		    "status", "completed", "compiled", 1,
		    "correctness", strcmp(action, "ok") == 0, "decoy_kernel", 0,
		    "kernel_runtime", (double)delay, "reference_runtime", (double)delay,
		    "speedup", 1.0, "metadata", "delay_ms", delay, "action", action);
	host->task_finish(task, result);
}

static int
selftest_start(struct kgym_task *task, char **ret_cause)
{
	json_int_t delay = json_integer_value(json_object_get(host->task_payload(task),
	    "delay_ms"));

	if (delay <= 0) {
		selftest_done(task);
		return 0;
	}
	return host->task_timer(task, (unsigned int)delay, selftest_done);
}

static void
selftest_cancel(struct kgym_task *task)
{
	/* Nothing of ours to release: the host drops the task's timer. */
}

static const char *const selftest_serves[] = { "selftest", NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "selftest",
	.kind = KGYM_PLUGIN_WORKFLOW,
	.version = "0.1.0",
	.serves = selftest_serves,
	.init = selftest_init,
	.fini = selftest_fini,
	.validate = selftest_validate,
	.start = selftest_start,
	.cancel = selftest_cancel,
};

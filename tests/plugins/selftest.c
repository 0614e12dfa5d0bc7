/*
 * selftest.c -- the test-only workflow plugin `selftest` (never installed).
 *
 * It exercises the workflow half of the plugin ABI without any GPU.  Every
 * task becomes one sandboxed job of the test backend `selftest`
 * (selftest_backend.c), on a CPU worker or, with "device":"gpu", on a GPU
 * slot; the job's outcome becomes the task's result.  Payload:
 *   {"action": A, "delay_ms": N, "device": "cpu"|"gpu", "phase": P,
 *    "gpu_memory_bytes": B, ...action arguments}
 * where A is ok, incorrect or fail (the three verdicts) or one of the
 * hostile actions the worker tests use (crash, hang, network, exec, ...).
 * "in_daemon": true runs ok/incorrect/fail on a timer in the daemon
 * itself, with no worker, for tests of the control plane alone.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <kgym/plugin.h>

static const struct kgym_host *host;
static const struct kgym_plugin_handle *self;

static const char *const selftest_actions[] = {
	"ok", "incorrect", "fail", "sleep", "crash", "hang", "network", "unix_socket", "exec",
	"ptrace", "read_secret", "fork_bomb", "oom", "huge_output", "garbage_output",
	"gpu_shared", "gpu_exclusive", "gpu_relock", "gpu_probe", "toolkit", NULL
};

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
	const json_t *device, *in_daemon;
	int i;

	if (!json_is_string(action)) {
		*ret_cause = selftest_strdup("'action': expected a string (ok, incorrect, fail, ...)");
		return -EINVAL;
	}
	for (i = 0; selftest_actions[i] != NULL; i++)
		if (strcmp(json_string_value(action), selftest_actions[i]) == 0)
			break;
	if (selftest_actions[i] == NULL) {
		*ret_cause = selftest_strdup("'action': expected ok, incorrect, fail or a "
		    "worker test action (crash, hang, network, exec, ...)");
		return -EINVAL;
	}
	device = json_object_get(payload, "device");
	if (device != NULL && (!json_is_string(device) ||
	    (strcmp(json_string_value(device), "cpu") != 0 &&
	    strcmp(json_string_value(device), "gpu") != 0))) {
		*ret_cause = selftest_strdup("'device': expected \"cpu\" or \"gpu\"");
		return -EINVAL;
	}
	in_daemon = json_object_get(payload, "in_daemon");
	if (in_daemon != NULL && !json_is_boolean(in_daemon)) {
		*ret_cause = selftest_strdup("'in_daemon': expected a boolean");
		return -EINVAL;
	}
	if (json_object_get(payload, "affinity") != NULL &&
	    !json_is_string(json_object_get(payload, "affinity"))) {
		*ret_cause = selftest_strdup("'affinity': expected a string");
		return -EINVAL;
	}
	if (json_object_get(payload, "spec_abi_1_3") != NULL &&
	    !json_is_boolean(json_object_get(payload, "spec_abi_1_3"))) {
		*ret_cause = selftest_strdup("'spec_abi_1_3': expected a boolean");
		return -EINVAL;
	}
	if (json_is_true(in_daemon) && i > 2) {
		*ret_cause = selftest_strdup("'in_daemon': only ok, incorrect and fail run in the daemon");
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

/* The job's end is the task's end; an obituary becomes a failed result. */
static void
selftest_job_done(struct kgym_task *task, const struct kgym_job_outcome *o)
{
	json_t *result;

	if (o->ok)
		result = json_deep_copy(o->result);
	else
		result = json_pack("{s:s, s:b, s:b, s:s, s:s, s:{s:s?}}", "status", "failed",
		    "compiled", 0, "correctness", 0, "error_code", o->error_code,
		    "error_message", o->error_message, "metadata", "phase", o->phase);
	if (!json_is_object(json_object_get(result, "metadata")))
		json_object_set_new(result, "metadata", json_object());
	json_object_set_new(json_object_get(result, "metadata"), "worker",
	    json_string(o->worker != NULL ? o->worker : "?"));
	host->task_finish(task, result);
}

static int
selftest_start(struct kgym_task *task, char **ret_cause)
{
	const json_t *payload = host->task_payload(task);
	json_int_t delay = json_integer_value(json_object_get(payload, "delay_ms"));
	const char *device = json_string_value(json_object_get(payload, "device"));
	const char *phase = json_string_value(json_object_get(payload, "phase"));
	struct kgym_job_spec spec = { .struct_size = sizeof spec };

	if (json_is_true(json_object_get(payload, "in_daemon"))) {
		if (delay <= 0) {
			selftest_done(task);
			return 0;
		}
		return host->task_timer(task, (unsigned int)delay, selftest_done);
	}
	if (host->struct_size < offsetof(struct kgym_host, job_run) + sizeof host->job_run) {
		*ret_cause = selftest_strdup("this kgymd has no sandboxed jobs (plugin ABI < 1.1)");
		return -ENOTSUP;
	}
	spec.backend = "selftest";
	spec.where = device != NULL && strcmp(device, "gpu") == 0 ? KGYM_JOB_GPU : KGYM_JOB_CPU;
	spec.request = payload;
	spec.phase = phase != NULL ? phase : "correctness";
	spec.gpu_memory_bytes = (uint64_t)json_integer_value(json_object_get(payload,
	    "gpu_memory_bytes"));
	spec.affinity = json_string_value(json_object_get(payload, "affinity"));
	if (json_is_true(json_object_get(payload, "spec_abi_1_3"))) {
		/* A spec as a plugin built for ABI 1.3 makes it: it ends before
		 * affinity, and what lies after it is nobody's to read (a
		 * pointer no one may follow). */
		spec.struct_size = offsetof(struct kgym_job_spec, affinity);
		spec.affinity = (const char *)(uintptr_t)1;
	}
	return host->job_run(task, &spec, selftest_job_done, ret_cause);
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

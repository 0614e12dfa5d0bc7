/*
 * whost.c -- the host table a backend sees inside kgymd-worker.
 *
 * Same struct kgym_host as in the daemon, different machinery: logging
 * travels to the parent as LOG messages (so it lands in kgymd's log with
 * the worker's name), gpu_lock blocks on a LOCK/GRANTED exchange with the
 * parent's per-GPU lock, and phase tells the parent to start the next
 * phase's deadline.  Task and job functions are NULL here: they belong to
 * workflows, in the daemon.  toolkit is the loader's, as in the daemon.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kgymd.h"
#include "worker.h"

static size_t whost_max_message = 1 << 20;

void
whost_set_max_message(size_t max)
{
	whost_max_message = max;
}

static void
whost_sink(int level, const char *tag, const char *msg)
{
	json_t *o = json_pack("{s:i, s:s}", "level", level, "message", msg);
	char line[2048];

	if (tag != NULL) {
		snprintf(line, sizeof line, "%s: %s", tag, msg);
		json_object_set_new(o, "message", json_string(line));
	}
	if (o != NULL && ipc_send(WORKER_CHANNEL_FD, IPC_LOG, o) < 0) {
		/* The parent is gone: nothing to tell anyone; stderr is the last resort. */
		dprintf(2, "kgymd-worker: %s\n", msg);
	}
	json_decref(o);
}

void
whost_log_to_parent(void)
{
	log_set_sink(whost_sink);
}

static void
whost_log(const struct kgym_plugin_handle *self, enum kgym_log_level level,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	plugin_vlog(self, (int)level, fmt, ap);
	va_end(ap);
}

static const char *
whost_config_get(const struct kgym_plugin_handle *self, const char *key)
{
	return plugin_config_value(kgymd_config, self, key);
}

static int
whost_gpu_lock(enum kgym_gpu_lock mode)
{
	char why[256];
	unsigned int type;
	json_t *msg;
	int error;

	msg = json_pack("{s:s}", "mode", mode == KGYM_GPU_EXCLUSIVE ? "exclusive" : "shared");
	error = ipc_send(WORKER_CHANNEL_FD, IPC_LOCK, msg);
	json_decref(msg);
	if (error < 0)
		return error;
	/* Nothing else may arrive while we wait: the parent is in LOCK_WAIT with us. */
	if ((error = ipc_recv(WORKER_CHANNEL_FD, whost_max_message, &type, &msg, why,
	    sizeof why)) < 0)
		return error;
	json_decref(msg);
	return type == IPC_GRANTED ? 0 : -EPROTO;
}

static int
whost_phase(const char *name)
{
	json_t *msg = json_pack("{s:s}", "phase", name);
	int error = ipc_send(WORKER_CHANNEL_FD, IPC_PHASE, msg);

	json_decref(msg);
	return error;
}

static const struct kgym_host whost = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_host),
	.log = whost_log,
	.alloc = malloc,
	.free = free,
	.config_get = whost_config_get,
	.gpu_lock = whost_gpu_lock,
	.phase = whost_phase,
	/* Toolkits load in workers too: backends find them here in prepare(). */
	.toolkit = plugin_toolkit,
};

const struct kgym_host *
whost_table(void)
{
	return &whost;
}

/*
 * cupti.c -- the toolkit plugin `cupti`: CUPTI's activity records and
 * launch correlation for backends that profile GPU work (kgym/cupti.h;
 * kgym-plugin(3), TOOLKITS).
 *
 * A backend asks host->toolkit("cupti", ...) in its prepare(), with its
 * GPU context current and before the sandbox, and starts collection with
 * a sink of its own; collector.c does the rest.  The nvrtc backend feeds
 * its per-call accounting (plugins/nvrtc/profdata.c) from it; a third
 * backend, or a task that is no kernel (a simulation, a renderer), gets
 * the same records without carrying its own CUPTI code.  Without this
 * toolkit (or without libcupti) such a backend times with events alone.
 *
 * init() touches nothing: the daemon loads every toolkit and never
 * initialises CUDA; libcupti is loaded by start(), in a worker.
 */
#include "config.h"

#include <string.h>

#include "kgym/plugin.h"

#include "collector.h"

static int
cupti_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
    char **ret_cause)
{
	return 0;
}

static void
cupti_fini(void)
{
	/* CUPTI stays subscribed until exit; its callbacks find no sink. */
	collector_api.stop();
}

static const struct kgym_toolkit_api *
cupti_toolkit_api(const char *name)
{
	if (name != NULL && strcmp(name, KGYM_CUPTI_API) == 0)
		return &collector_api.head;
	return NULL;
}

static const char *const cupti_serves[] = { KGYM_CUPTI_API, NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "cupti",
	.kind = KGYM_PLUGIN_TOOLKIT,
	.version = "0.1.0",
	.serves = cupti_serves,
	.init = cupti_init,
	.fini = cupti_fini,
	.toolkit_api = cupti_toolkit_api,
};

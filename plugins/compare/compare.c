/*
 * compare.c -- the toolkit plugin `compare`: the output comparator that
 * backends share (kgym/compare.h; kgym-plugin(3), TOOLKITS).
 *
 * It serves one API, "compare": the rule that decides whether an output is
 * right (tolerances, NaN and Inf, integers exact), as a CUDA kernel's text
 * for backends that judge on the GPU (kernel.c) and as a host function
 * (rules.c), plus the words of a failed check, the mismatch report, which a
 * model reads to fix its code.  The nvrtc backend uses it for every
 * verdict; a third backend, or a task that is not a kernel at all (a
 * simulation, a renderer), gets the same rules and the same report by
 * asking host->toolkit("compare", ...) in its prepare().
 *
 * Nothing here touches a GPU, a file or the host table: the plugin is pure
 * functions, safe in the daemon, in workers and inside their sandbox.
 */
#include "config.h"

#include <string.h>

#include "kgym/plugin.h"

#include "rules.h"

static int
compare_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
    char **ret_cause)
{
	return 0;
}

static void
compare_fini(void)
{
}

static const struct kgym_toolkit_api *
compare_toolkit_api(const char *name)
{
	if (name != NULL && strcmp(name, KGYM_COMPARE_API) == 0)
		return &rules_api.head;
	return NULL;
}

static const char *const compare_serves[] = { KGYM_COMPARE_API, NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "compare",
	.kind = KGYM_PLUGIN_TOOLKIT,
	.version = "0.1.0",
	.serves = compare_serves,
	.init = compare_init,
	.fini = compare_fini,
	.toolkit_api = compare_toolkit_api,
};

/*
 * toolkit_selftest.c -- a test-only toolkit plugin for host->toolkit
 * (kgym/toolkit.h), loaded by tests/unit/test_plugin.c.
 *
 * It serves three APIs, one per answer the lookup can give:
 *   selftest_api     version 3, with one function: found for a
 *                    min_version up to 3, refused (too old) above;
 *   selftest_none    listed in serves, but toolkit_api() gives NULL;
 *   selftest_small   a struct_size smaller than the head: refused.
 * Like any plugin it links nothing of kgymd.
 */
#include "config.h"

#include <string.h>

#include "kgym/plugin.h"

struct selftest_api {
	struct kgym_toolkit_api head;
	int (*add)(int a, int b);
};

static int
selftest_add(int a, int b)
{
	return a + b;
}

static const struct selftest_api selftest_api = {
	.head = { .version = 3, .struct_size = sizeof(struct selftest_api) },
	.add = selftest_add,
};

static const struct kgym_toolkit_api selftest_small = { .version = 1, .struct_size = 4 };

static int
selftest_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
    char **ret_cause)
{
	return 0;
}

static void
selftest_fini(void)
{
}

static const struct kgym_toolkit_api *
selftest_toolkit_api(const char *name)
{
	if (strcmp(name, "selftest_api") == 0)
		return &selftest_api.head;
	if (strcmp(name, "selftest_small") == 0)
		return &selftest_small;
	return NULL;
}

static const char *const selftest_serves[] = { "selftest_api", "selftest_none",
	"selftest_small", NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "toolkit_selftest",
	.kind = KGYM_PLUGIN_TOOLKIT,
	.version = "0.1.0",
	.serves = selftest_serves,
	.init = selftest_init,
	.fini = selftest_fini,
	.toolkit_api = selftest_toolkit_api,
};

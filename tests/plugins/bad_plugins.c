/*
 * bad_plugins.c -- test-only plugins that the loader must refuse.
 *
 * One source, built once per -D flag (Makefile.am, tests/plugins/bad_*.la);
 * each build breaks exactly one rule of the ABI (include/kgym/plugin.h) and
 * is otherwise a well-formed, working workflow plugin, so that a refusal
 * can only come from the rule under test:
 *
 *   BAD_ABI_MAJOR   abi_major 99              refused: wrong ABI major
 *   BAD_ABI_MINOR   abi_minor 999             refused: newer minor than kgymd
 *   BAD_SIZE        struct_size 8             refused: smaller than ABI 1.0's struct
 *   BAD_SIGNATURE   build_signature "wrong"   refused: build signature mismatch
 *   BAD_MISSING_OP  workflow without start    refused: lacks operation 'start'
 *   BAD_NO_SYMBOL   exports kgym_plugin_v1    refused: does not export kgym_plugin
 *                   instead of kgym_plugin
 *   BAD_KIND        kind 42                   refused: unknown kind
 *   BAD_TOOLKIT_API a toolkit (ABI 1.3) with  refused: lacks operation
 *                   no toolkit_api            'toolkit_api'
 *   OLD_TOOLKIT     a toolkit built for ABI 1.2 (its struct ends before
 *                   toolkit_api), serving "old_api": loads, as old plugins
 *                   must, and host->toolkit finds no API in it.
 *   DUP_SELFTEST    a good workflow plugin named "selftest" serving
 *                   "selftest_dup": loaded after the real selftest plugin it
 *                   is refused as a duplicate name; loaded alone it loads.
 *   DUP_SERVES      a good workflow plugin named "dup_serves" that also
 *                   serves "selftest_dup": refused when dup_selftest is
 *                   loaded, as a workflow served by two plugins.
 *
 * DUP_SELFTEST also has a failure path of its own: when its config section
 * ([plugin.selftest]) sets `fail_init`, init() fails with a cause, which the
 * loader must report as the refusal.  It logs "init" and "fini" through the
 * host table, so a test can see both were called with its handle.
 *
 * Like any plugin, these link nothing of kgymd; jansson comes from the
 * process that loads them.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kgym/plugin.h"

#if defined(BAD_ABI_MAJOR) + defined(BAD_ABI_MINOR) + defined(BAD_SIZE) + \
    defined(BAD_SIGNATURE) + defined(BAD_MISSING_OP) + defined(BAD_NO_SYMBOL) + \
    defined(BAD_KIND) + defined(BAD_TOOLKIT_API) + defined(OLD_TOOLKIT) + \
    defined(DUP_SELFTEST) + defined(DUP_SERVES) != 1
#error "define exactly one of BAD_ABI_MAJOR ... DUP_SERVES"
#endif

/* What is right, overridden below by the one thing each variant breaks. */
#define PLUGIN_ABI_MAJOR	KGYM_PLUGIN_ABI_MAJOR
#define PLUGIN_ABI_MINOR	KGYM_PLUGIN_ABI_MINOR
#define PLUGIN_STRUCT_SIZE	sizeof(struct kgym_plugin)
#define PLUGIN_SIGNATURE	KGYM_BUILD_SIGNATURE
#define PLUGIN_KIND		KGYM_PLUGIN_WORKFLOW
#define PLUGIN_START		bad_start
#define PLUGIN_SYMBOL		kgym_plugin

#if defined(BAD_ABI_MAJOR)
#define PLUGIN_NAME		"bad_abi_major"
#undef PLUGIN_ABI_MAJOR
#define PLUGIN_ABI_MAJOR	99
#elif defined(BAD_ABI_MINOR)
#define PLUGIN_NAME		"bad_abi_minor"
#undef PLUGIN_ABI_MINOR
#define PLUGIN_ABI_MINOR	999
#elif defined(BAD_SIZE)
#define PLUGIN_NAME		"bad_size"
#undef PLUGIN_STRUCT_SIZE
#define PLUGIN_STRUCT_SIZE	8
#elif defined(BAD_SIGNATURE)
#define PLUGIN_NAME		"bad_signature"
#undef PLUGIN_SIGNATURE
#define PLUGIN_SIGNATURE	"wrong"
#elif defined(BAD_MISSING_OP)
#define PLUGIN_NAME		"bad_missing_op"
#undef PLUGIN_START
#define PLUGIN_START		NULL
#elif defined(BAD_NO_SYMBOL)
#define PLUGIN_NAME		"bad_no_symbol"
#undef PLUGIN_SYMBOL
#define PLUGIN_SYMBOL		kgym_plugin_v1
#elif defined(BAD_KIND)
#define PLUGIN_NAME		"bad_kind"
#undef PLUGIN_KIND
#define PLUGIN_KIND		((enum kgym_plugin_kind)42)
#elif defined(BAD_TOOLKIT_API)
#define PLUGIN_NAME		"bad_toolkit_api"
#undef PLUGIN_KIND
#define PLUGIN_KIND		KGYM_PLUGIN_TOOLKIT
#elif defined(OLD_TOOLKIT)
#define PLUGIN_NAME		"old_toolkit"
#define PLUGIN_SERVES		"old_api"
#undef PLUGIN_KIND
#define PLUGIN_KIND		KGYM_PLUGIN_TOOLKIT
#undef PLUGIN_ABI_MINOR
#define PLUGIN_ABI_MINOR	2
#undef PLUGIN_STRUCT_SIZE
#define PLUGIN_STRUCT_SIZE	offsetof(struct kgym_plugin, toolkit_api)
#elif defined(DUP_SELFTEST)
#define PLUGIN_NAME		"selftest"
#define PLUGIN_SERVES		"selftest_dup"
#elif defined(DUP_SERVES)
#define PLUGIN_NAME		"dup_serves"
#define PLUGIN_SERVES		"selftest_dup"
#endif

#ifndef PLUGIN_SERVES
#define PLUGIN_SERVES		PLUGIN_NAME
#endif

static const struct kgym_host *host;
static const struct kgym_plugin_handle *self;

static int
bad_init(const struct kgym_host *h, const struct kgym_plugin_handle *s, char **ret_cause)
{
	host = h;
	self = s;
	if (host->config_get != NULL && host->config_get(self, "fail_init") != NULL) {
		*ret_cause = strdup("fail_init is set in the plugin's config section");
		return -EINVAL;
	}
	host->log(self, KGYM_LOG_INFO, "init");
	return 0;
}

static void
bad_fini(void)
{
	host->log(self, KGYM_LOG_INFO, "fini");
	host = NULL;
	self = NULL;
}

static int
bad_validate(const json_t *payload, char **ret_cause)
{
	return 0;
}

/*
 * Finishes every task at once: the plugin exists to be loaded, not to work.
 * (Unused in BAD_MISSING_OP, which leaves it out of the struct.)
 */
static int __attribute__((unused))
bad_start(struct kgym_task *task, char **ret_cause)
{
	json_t *result;

	if ((result = json_pack("{s:s}", "status", "completed")) == NULL) {
		*ret_cause = strdup("out of memory");
		return -ENOMEM;
	}
	return host->task_finish(task, result);
}

static void
bad_cancel(struct kgym_task *task)
{
}

static const char *const bad_serves[] = { PLUGIN_SERVES, NULL };

extern const struct kgym_plugin PLUGIN_SYMBOL;
const struct kgym_plugin PLUGIN_SYMBOL = {
	.abi_major = PLUGIN_ABI_MAJOR,
	.abi_minor = PLUGIN_ABI_MINOR,
	.struct_size = PLUGIN_STRUCT_SIZE,
	.build_signature = PLUGIN_SIGNATURE,
	.name = PLUGIN_NAME,
	.kind = PLUGIN_KIND,
	.version = "0.1.0",
	.serves = bad_serves,
	.init = bad_init,
	.fini = bad_fini,
	.validate = bad_validate,
	.start = PLUGIN_START,
	.cancel = bad_cancel,
};

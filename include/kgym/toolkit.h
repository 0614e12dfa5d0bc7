/*
 * kgym/toolkit.h -- toolkits: evaluation pieces a backend uses through the
 * plugin ABI (ABI 1.3).
 *
 * A toolkit is a plugin of kind KGYM_PLUGIN_TOOLKIT (kgym/plugin.h) whose
 * `serves` list names the APIs it offers ("compare", "cupti", ...).  Each
 * API is a const struct that begins with a `struct kgym_toolkit_api` head:
 * the API's version and the size of the whole struct.  Those two fields
 * come first and protect the rest, like the plugin struct's ABI guard.
 * A backend asks the host for an API by name and the lowest version it
 * can use:
 *
 *	const struct kgym_compare_api *cmp = (const void *)
 *	    host->toolkit(KGYM_COMPARE_API, KGYM_COMPARE_VERSION, &cause);
 *
 * and gets NULL, with a cause naming the toolkit, when no loaded toolkit
 * serves that name or the one that does is older than asked.  A backend
 * that needs a toolkit asks in prepare() and fails there, closed, when it
 * is missing (kgym-plugin(3), TOOLKITS).
 *
 * Rules of evolution of one API (the same as the plugin ABI's, per API):
 *   - the version grows when functions or fields are appended at the end;
 *     a caller that uses a field appended after the version it asked for
 *     checks KGYM_TOOLKIT_HAS() first;
 *   - nothing is removed, reordered or changes meaning under one name: an
 *     incompatible API is a new name ("compare2").
 *
 * Ownership: an API struct is the toolkit's, static, valid from the
 * toolkit's init() until its fini(), i.e. for the life of the process
 * that loaded it.  Functions in it borrow their arguments unless their
 * comment says otherwise.
 */
#ifndef KGYM_TOOLKIT_H
#define KGYM_TOOLKIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The head of every toolkit API struct. */
struct kgym_toolkit_api {
	uint32_t version;	/* grows when fields are appended */
	uint32_t struct_size;	/* sizeof the whole API struct */
};

/*
 * Whether `field` of the API struct `api` (a pointer to a struct whose
 * first member is a struct kgym_toolkit_api named `head`) lies within the
 * bytes the toolkit gave: false for fields appended after its version.
 */
#define KGYM_TOOLKIT_HAS(api, field)					\
	(offsetof(__typeof__(*(api)), field) +				\
	    sizeof((api)->field) <= (api)->head.struct_size)

#ifdef __cplusplus
}
#endif

#endif /* KGYM_TOOLKIT_H */

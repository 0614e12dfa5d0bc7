/*
 * plugin.c -- the plugin loader.
 *
 * kgymd extends itself only through plugins (kgym-plugin(3)): shared objects
 * that export one `const struct kgym_plugin` (include/kgym/plugin.h).  This
 * file finds them in plugin_dir, decides whether each may be trusted and
 * understood, and keeps the list of the ones that were.  Everything else in
 * the daemon reaches plugins through plugin_find*() and the struct plugin
 * records kept here.
 *
 * Loading one file goes from cheap-and-safe to costly-and-trusting:
 *   1. the file and its directory must be safe to load from (a regular file,
 *      not writable by group or others, owned by root or by us; a directory
 *      nobody else can swap files in) -- checked before dlopen(), because
 *      dlopen() runs the object's constructors;
 *   2. dlopen() and the one symbol;
 *   3. the ABI guard fields (major, minor, size, build signature), before
 *      anything else of the struct is read: they say whether the rest means
 *      what we think it means;
 *   4. identity (name, kind, version, serves) and required operations;
 *   5. no clash with a plugin already loaded;
 *   6. the plugin's own init().
 * Any refusal is logged with its reason, recorded for the `plugins` op and
 * health checks, and the object is closed: one bad plugin never stops the
 * daemon or the other plugins (fail closed, keep serving).
 *
 * ABI evolution: a plugin built against an older minor has a shorter
 * struct.  We remember how many bytes of it we may read (plugin->size) and
 * read every field through PLUGIN_OP(), which yields NULL for fields past
 * that size.
 */
#include "config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kgymd.h"

/* Size of struct kgym_plugin in ABI 1.0: everything up to and with `run`. */
#define PLUGIN_SIZE_1_0							\
	(offsetof(struct kgym_plugin, run) + sizeof(((struct kgym_plugin *)0)->run))
/* A struct_size past this is a corrupt or hostile value, not a future ABI. */
#define PLUGIN_SIZE_MAX		(64 * 1024)
/* A `serves` list longer than this has most likely lost its NULL. */
#define PLUGIN_SERVES_MAX	64

/* Whether `field` lies within the bytes of the plugin's struct we may read. */
#define PLUGIN_HAS(pl, field)						\
	(offsetof(struct kgym_plugin, field) +				\
	    sizeof(((struct kgym_plugin *)0)->field) <= (pl)->size)
/* A field of the plugin's struct, or NULL when its minor predates it. */
#define PLUGIN_OP(pl, field)						\
	(PLUGIN_HAS(pl, field) ? (pl)->p->field : NULL)

static struct plugin_list plugins = TAILQ_HEAD_INITIALIZER(plugins);
/* Kinds this process loads (a bit per kind): workers load only backends. */
static unsigned int plugin_kinds = ~0u;
static struct plugin_refusal_list refusals = TAILQ_HEAD_INITIALIZER(refusals);

static char *reasonf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A malloc'd reason string, or NULL when out of memory. */
static char *
reasonf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/*
 * Copy a string that came from a plugin into buf for a message: control
 * characters and non-ASCII bytes become '?', and it is cut at the buffer's
 * size, so a broken plugin cannot garble the log or make invalid JSON.
 */
static const char *
plugin_quote(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len && s[i] != '\0'; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

static bool
plugin_name_valid(const char *name)
{
	size_t i;

	if (name == NULL)
		return false;
	for (i = 0; name[i] != '\0'; i++) {
		if (i >= KGYM_NAME_MAX - 1)
			return false;
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return false;
	}
	return i > 0;
}

/* Printable ASCII, 1..127 bytes: it goes into logs and JSON replies. */
static bool
plugin_version_valid(const char *version)
{
	size_t i;

	if (version == NULL)
		return false;
	for (i = 0; version[i] != '\0'; i++)
		if (i >= 127 || version[i] < 0x20 || version[i] >= 0x7f)
			return false;
	return i > 0;
}

const char *
plugin_kind_name(enum kgym_plugin_kind kind)
{
	switch (kind) {
	case KGYM_PLUGIN_BACKEND:
		return "backend";
	case KGYM_PLUGIN_TOOLKIT:
		return "toolkit";
	case KGYM_PLUGIN_WORKFLOW:
		return "workflow";
	}
	return "unknown";
}

static bool
plugin_serves(const struct plugin *pl, const char *what)
{
	const char *const *s;

	for (s = PLUGIN_OP(pl, serves); s != NULL && *s != NULL; s++)
		if (strcmp(*s, what) == 0)
			return true;
	return false;
}

/*
 * The handle a plugin sees as `self` is its struct plugin, cast to the
 * opaque type of the ABI: the plugin cannot look inside, and the host gets
 * its record back without a lookup.  A handle is valid from the plugin's
 * init() to the return of its fini().
 */
const struct kgym_plugin_handle *
plugin_handle(const struct plugin *plugin)
{
	return (const struct kgym_plugin_handle *)plugin;
}

struct plugin *
plugin_from_handle(const struct kgym_plugin_handle *self)
{
	return (struct plugin *)self;
}

const struct plugin_list *
plugin_loaded(void)
{
	return &plugins;
}

const struct plugin_refusal_list *
plugin_refused(void)
{
	return &refusals;
}

struct plugin *
plugin_find(const char *name)
{
	struct plugin *pl;

	TAILQ_FOREACH(pl, &plugins, entry)
		if (strcmp(pl->p->name, name) == 0)
			return pl;
	return NULL;
}

static struct plugin *
plugin_find_serving(enum kgym_plugin_kind kind, const char *what)
{
	struct plugin *pl;

	TAILQ_FOREACH(pl, &plugins, entry)
		if (pl->p->kind == kind && plugin_serves(pl, what))
			return pl;
	return NULL;
}

struct plugin *
plugin_find_workflow(const char *workflow)
{
	return plugin_find_serving(KGYM_PLUGIN_WORKFLOW, workflow);
}

struct plugin *
plugin_find_backend(const char *backend)
{
	return plugin_find_serving(KGYM_PLUGIN_BACKEND, backend);
}

/*
 * Step 1: may this file be loaded at all?  The checks are made on the
 * resolved path, which is also what gets dlopen()ed, so a symlink cannot
 * point the check at one file and the load at another; and a path with a
 * slash keeps dlopen() from searching the library path.  On success
 * *ret_real is the resolved path (malloc'd).
 */
static int
plugin_check_file(const char *path, char **ret_real, char **ret_reason)
{
	struct stat st, dst;
	char *real, *dircopy;
	const char *dir;
	uid_t euid = geteuid();
	int rc;

	if ((real = realpath(path, NULL)) == NULL) {
		rc = -errno;
		*ret_reason = reasonf("cannot resolve: %s", strerror(-rc));
		return rc;
	}
	if (stat(real, &st) == -1) {
		rc = -errno;
		*ret_reason = reasonf("cannot stat %s: %s", real, strerror(-rc));
		goto free_real;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		*ret_reason = reasonf("refused: %s is not a regular file", real);
		goto free_real;
	}
	if (st.st_mode & 022) {
		rc = -EPERM;
		*ret_reason = reasonf("refused: %s is writable by group or others (mode %04o)",
		    real, (unsigned int)(st.st_mode & 07777));
		goto free_real;
	}
	if (st.st_uid != 0 && st.st_uid != euid) {
		rc = -EPERM;
		*ret_reason = reasonf("refused: %s is owned by uid %lu, not by root or kgymd (uid %lu)",
		    real, (unsigned long)st.st_uid, (unsigned long)euid);
		goto free_real;
	}

	/*
	 * Whoever may rename files in the directory may replace the plugin
	 * between this check and the next load (or reload), so the same rules
	 * hold for it, except that the sticky bit (as on /tmp) keeps others
	 * from replacing files they do not own.
	 */
	if ((dircopy = strdup(real)) == NULL) {
		rc = -ENOMEM;
		*ret_reason = NULL;
		goto free_real;
	}
	dir = dirname(dircopy);
	if (stat(dir, &dst) == -1) {
		rc = -errno;
		*ret_reason = reasonf("cannot stat directory %s: %s", dir, strerror(-rc));
		goto free_dircopy;
	}
	if ((dst.st_mode & 022) && !(dst.st_mode & S_ISVTX)) {
		rc = -EPERM;
		*ret_reason = reasonf("refused: directory %s is writable by group or others "
		    "without the sticky bit (mode %04o)", dir,
		    (unsigned int)(dst.st_mode & 07777));
		goto free_dircopy;
	}
	if (dst.st_uid != 0 && dst.st_uid != euid) {
		rc = -EPERM;
		*ret_reason = reasonf("refused: directory %s is owned by uid %lu, not by root or "
		    "kgymd (uid %lu)", dir, (unsigned long)dst.st_uid, (unsigned long)euid);
		goto free_dircopy;
	}
	free(dircopy);
	*ret_real = real;
	return 0;

free_dircopy:
	free(dircopy);
free_real:
	free(real);
	return rc;
}

/*
 * Step 3: the guard fields.  They are the only part of the struct whose
 * layout every ABI version shares, so nothing else is read until they
 * check out.  Sets pl->size.
 */
static int
plugin_check_guard(struct plugin *pl, char **ret_reason)
{
	const struct kgym_plugin *p = pl->p;
	char quoted[80];

	if (p->abi_major != KGYM_PLUGIN_ABI_MAJOR) {
		*ret_reason = reasonf("built for ABI %u.%u, kgymd speaks %d.%d",
		    p->abi_major, p->abi_minor, KGYM_PLUGIN_ABI_MAJOR,
		    KGYM_PLUGIN_ABI_MINOR);
		return -EPROTO;
	}
	if (p->abi_minor > KGYM_PLUGIN_ABI_MINOR) {
		*ret_reason = reasonf("built for ABI %u.%u, newer than kgymd's %d.%d",
		    p->abi_major, p->abi_minor, KGYM_PLUGIN_ABI_MAJOR,
		    KGYM_PLUGIN_ABI_MINOR);
		return -EPROTO;
	}
	if (p->struct_size < PLUGIN_SIZE_1_0) {
		*ret_reason = reasonf("struct_size %u is smaller than ABI %d.0's %zu bytes",
		    p->struct_size, KGYM_PLUGIN_ABI_MAJOR, PLUGIN_SIZE_1_0);
		return -EPROTO;
	}
	if (p->struct_size > PLUGIN_SIZE_MAX) {
		*ret_reason = reasonf("struct_size %u is absurd (more than %d bytes)",
		    p->struct_size, PLUGIN_SIZE_MAX);
		return -EPROTO;
	}
	if (p->build_signature == NULL) {
		*ret_reason = reasonf("has no build signature (kgymd's is '%s')",
		    KGYM_BUILD_SIGNATURE);
		return -EPROTO;
	}
	if (strcmp(p->build_signature, KGYM_BUILD_SIGNATURE) != 0) {
		*ret_reason = reasonf("build signature '%s' does not match kgymd's '%s'",
		    plugin_quote(p->build_signature, quoted, sizeof quoted),
		    KGYM_BUILD_SIGNATURE);
		return -EPROTO;
	}
	pl->size = p->struct_size < sizeof(struct kgym_plugin) ?
	    p->struct_size : sizeof(struct kgym_plugin);
	return 0;
}

/* Step 4a: name, kind, version and what it serves. */
static int
plugin_check_identity(const struct plugin *pl, char **ret_reason)
{
	const struct kgym_plugin *p = pl->p;
	const char *const *serves;
	char quoted[80];
	size_t i, j;
	int kind;

	if (!plugin_name_valid(p->name)) {
		*ret_reason = p->name == NULL ? reasonf("has no name") :
		    reasonf("plugin name '%s' is not [a-z0-9_]{1,%d}",
		    plugin_quote(p->name, quoted, sizeof quoted), KGYM_NAME_MAX - 1);
		return -EINVAL;
	}
	/* Read as int: the plugin may hold any value in the enum's storage. */
	kind = (int)p->kind;
	if (kind != KGYM_PLUGIN_BACKEND && kind != KGYM_PLUGIN_TOOLKIT &&
	    kind != KGYM_PLUGIN_WORKFLOW) {
		*ret_reason = reasonf("plugin '%s' has unknown kind %d", p->name, kind);
		return -EINVAL;
	}
	if (!plugin_version_valid(p->version)) {
		*ret_reason = reasonf("plugin '%s' has no version, or one that is not "
		    "1 to 127 printable characters", p->name);
		return -EINVAL;
	}
	if ((serves = p->serves) == NULL) {
		*ret_reason = reasonf("plugin '%s' has no serves list", p->name);
		return -EINVAL;
	}
	for (i = 0; serves[i] != NULL; i++) {
		if (i >= PLUGIN_SERVES_MAX) {
			*ret_reason = reasonf("plugin '%s' serves more than %d names "
			    "(is its list NULL-terminated?)", p->name, PLUGIN_SERVES_MAX);
			return -EINVAL;
		}
		if (!plugin_name_valid(serves[i])) {
			*ret_reason = reasonf("plugin '%s' serves '%s', which is not "
			    "[a-z0-9_]{1,%d}", p->name,
			    plugin_quote(serves[i], quoted, sizeof quoted),
			    KGYM_NAME_MAX - 1);
			return -EINVAL;
		}
		for (j = 0; j < i; j++) {
			if (strcmp(serves[i], serves[j]) == 0) {
				*ret_reason = reasonf("plugin '%s' lists '%s' twice in serves",
				    p->name, serves[i]);
				return -EINVAL;
			}
		}
	}
	if (i == 0 && kind != KGYM_PLUGIN_TOOLKIT) {
		*ret_reason = reasonf("%s plugin '%s' serves nothing",
		    plugin_kind_name(p->kind), p->name);
		return -EINVAL;
	}
	return 0;
}

/* Step 4b: every operation its kind requires. */
static int
plugin_check_ops(const struct plugin *pl, char **ret_reason)
{
	const char *missing = NULL;

	if (PLUGIN_OP(pl, init) == NULL)
		missing = "init";
	else if (PLUGIN_OP(pl, fini) == NULL)
		missing = "fini";
	else if (pl->p->kind == KGYM_PLUGIN_WORKFLOW) {
		if (PLUGIN_OP(pl, validate) == NULL)
			missing = "validate";
		else if (PLUGIN_OP(pl, start) == NULL)
			missing = "start";
		else if (PLUGIN_OP(pl, cancel) == NULL)
			missing = "cancel";
	} else if (pl->p->kind == KGYM_PLUGIN_BACKEND) {
		if (PLUGIN_OP(pl, prepare) == NULL)
			missing = "prepare";
		else if (PLUGIN_OP(pl, run) == NULL)
			missing = "run";
	} else if (pl->p->kind == KGYM_PLUGIN_TOOLKIT) {
		/* Before 1.3 a toolkit had no way to give an API: it loads, unused. */
		if (PLUGIN_HAS(pl, toolkit_api) && pl->p->toolkit_api == NULL)
			missing = "toolkit_api";
	}
	if (missing != NULL) {
		*ret_reason = reasonf("%s plugin '%s' lacks operation '%s'",
		    plugin_kind_name(pl->p->kind), pl->p->name, missing);
		return -EINVAL;
	}
	return 0;
}

/*
 * Step 5: names must be unambiguous.  Two plugins of one name could not be
 * told apart in config sections or logs; a workflow (or backend) served
 * twice would depend on load order.
 */
static int
plugin_check_unique(const struct plugin *pl, char **ret_reason)
{
	const struct plugin *q;
	const char *const *s;

	TAILQ_FOREACH(q, &plugins, entry) {
		if (strcmp(q->p->name, pl->p->name) == 0) {
			*ret_reason = reasonf("duplicate plugin name '%s' (already loaded "
			    "from %s)", pl->p->name, q->path);
			return -EEXIST;
		}
		if (q->p->kind != pl->p->kind)
			continue;
		for (s = PLUGIN_OP(pl, serves); s != NULL && *s != NULL; s++) {
			if (plugin_serves(q, *s)) {
				*ret_reason = reasonf("%s '%s' of plugin '%s' is already "
				    "served by plugin '%s' (loaded from %s)",
				    plugin_kind_name(pl->p->kind), *s, pl->p->name,
				    q->p->name, q->path);
				return -EEXIST;
			}
		}
	}
	return 0;
}

/* Step 6: the plugin's init(); its cause, if any, becomes our reason. */
static int
plugin_call_init(struct plugin *pl, const struct kgym_host *host, char **ret_reason)
{
	char *cause = NULL;
	int rc;

	rc = pl->p->init(host, plugin_handle(pl), &cause);
	if (rc == 0) {
		/* A cause handed back with success is ignored, not leaked. */
		free(cause);
		pl->initialised = true;
		return 0;
	}
	if (rc > 0)
		rc = -EINVAL;	/* the ABI says -errno; a positive value is a bug */
	*ret_reason = reasonf("plugin '%s' failed to initialise: %s", pl->p->name,
	    cause != NULL ? cause : strerror(-rc));
	/* Plugins allocate causes with host->alloc or strdup: both free(). */
	free(cause);
	return rc;
}

static void
plugin_record_refusal(const char *path, const char *reason)
{
	struct plugin_refusal *r;

	if ((r = calloc(1, sizeof *r)) == NULL)
		return;
	if ((r->path = strdup(path)) == NULL || (r->reason = strdup(reason)) == NULL) {
		free(r->path);
		free(r);
		return;
	}
	TAILQ_INSERT_TAIL(&refusals, r, entry);
}

static void
plugin_log_loaded(const struct plugin *pl)
{
	const char *const *s;
	char list[512] = "";
	size_t off = 0;
	int n;

	for (s = PLUGIN_OP(pl, serves); s != NULL && *s != NULL; s++) {
		n = snprintf(list + off, sizeof list - off, "%s%s",
		    off > 0 ? ", " : "", *s);
		if (n < 0 || (size_t)n >= sizeof list - off)
			break;
		off += n;
	}
	log_info("plugin %s: loaded %s plugin '%s' version %s, serving %s",
	    pl->path, plugin_kind_name(pl->p->kind), pl->p->name, pl->p->version,
	    off > 0 ? list : "nothing");
}

static void
plugin_free(struct plugin *pl)
{
	if (pl == NULL)
		return;
	free(pl->path);
	free(pl);
}

int
plugin_load(const char *path, const struct kgym_host *host, char **ret_cause)
{
	struct plugin *pl = NULL;
	char *real = NULL, *reason = NULL;
	const char *err;
	void *dl = NULL, *sym;
	int rc;

	if ((rc = plugin_check_file(path, &real, &reason)) < 0)
		goto refuse;

	dlerror();
	if ((dl = dlopen(real, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		err = dlerror();
		reason = reasonf("%s", err != NULL ? err : "dlopen failed");
		rc = -ENOEXEC;
		goto refuse;
	}
	if ((sym = dlsym(dl, KGYM_PLUGIN_SYMBOL)) == NULL) {
		reason = reasonf("does not export %s", KGYM_PLUGIN_SYMBOL);
		rc = -ENOEXEC;
		goto close_dl;
	}

	if ((pl = calloc(1, sizeof *pl)) == NULL || (pl->path = strdup(path)) == NULL) {
		rc = -ENOMEM;
		goto free_plugin;
	}
	pl->dl = dl;
	pl->p = sym;

	if ((rc = plugin_check_guard(pl, &reason)) < 0 ||
	    (rc = plugin_check_identity(pl, &reason)) < 0)
		goto free_plugin;
	if (!(plugin_kinds & (1u << pl->p->kind))) {
		/* Not for this process (a workflow in a worker): skip, not refuse. */
		log_debug("plugin %s: %s plugin skipped here", path,
		    plugin_kind_name(pl->p->kind));
		plugin_free(pl);
		dlclose(dl);
		free(real);
		return -ENOTSUP;
	}
	if ((rc = plugin_check_ops(pl, &reason)) < 0 ||
	    (rc = plugin_check_unique(pl, &reason)) < 0 ||
	    (rc = plugin_call_init(pl, host, &reason)) < 0)
		goto free_plugin;

	TAILQ_INSERT_TAIL(&plugins, pl, entry);
	plugin_log_loaded(pl);
	free(real);
	return 0;

free_plugin:
	plugin_free(pl);
close_dl:
	dlclose(dl);
refuse:
	/* reason is NULL only when formatting it ran out of memory. */
	log_warnx("plugin %s: %s", path, reason != NULL ? reason : strerror(-rc));
	plugin_record_refusal(path, reason != NULL ? reason : strerror(-rc));
	if (ret_cause != NULL)
		*ret_cause = reason != NULL ? reason : strdup(strerror(-rc));
	else
		free(reason);
	free(real);
	return rc;
}

/* scandir() filter: "*.so", as a shell glob would match it (no dot files). */
static int
plugin_dirent_filter(const struct dirent *d)
{
	size_t len = strlen(d->d_name);

	return d->d_name[0] != '.' && len > 3 && strcmp(d->d_name + len - 3, ".so") == 0;
}

static void
plugin_load_dir(const char *dir, const struct kgym_host *host)
{
	struct dirent **names;
	char path[PATH_MAX];
	int i, n;

	if ((n = scandir(dir, &names, plugin_dirent_filter, alphasort)) == -1) {
		if (errno == ENOENT)
			log_warnx("plugin directory %s does not exist, skipped", dir);
		else
			log_warn("plugin directory %s, skipped", dir);
		return;
	}
	for (i = 0; i < n; i++) {
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name) >=
		    sizeof path) {
			log_warnx("plugin %s/%s: path too long, skipped", dir,
			    names[i]->d_name);
		} else {
			/* plugin_load() logs and records the refusal itself. */
			(void)plugin_load(path, host, NULL);
		}
		free(names[i]);
	}
	free(names);
}

void
plugin_load_all(const char *dirs, const struct kgym_host *host)
{
	const char *p, *colon;
	char *dir;
	size_t len, nloaded = 0, nrefused = 0;
	struct plugin *pl;
	struct plugin_refusal *r;

	for (p = dirs; p != NULL && *p != '\0'; p = colon != NULL ? colon + 1 : NULL) {
		colon = strchr(p, ':');
		len = colon != NULL ? (size_t)(colon - p) : strlen(p);
		if (len == 0)
			continue;
		if ((dir = strndup(p, len)) == NULL) {
			log_warn("plugin directory list");
			return;
		}
		plugin_load_dir(dir, host);
		free(dir);
	}
	TAILQ_FOREACH(pl, &plugins, entry)
		nloaded++;
	TAILQ_FOREACH(r, &refusals, entry)
		nrefused++;
	log_info("plugins: %zu loaded, %zu refused", nloaded, nrefused);
}

void
plugin_vlog(const struct kgym_plugin_handle *self, int level, const char *fmt, va_list ap)
{
	const struct plugin *pl = plugin_from_handle(self);

	log_emit(level, pl != NULL ? pl->p->name : "plugin", fmt, ap);
}

const char *
plugin_config_value(const struct config *config, const struct kgym_plugin_handle *self,
    const char *key)
{
	const struct plugin *pl = plugin_from_handle(self);

	if (pl == NULL || config == NULL)
		return NULL;
	return config_plugin_get(config, pl->p->name, key);
}

void
plugin_only_kinds(unsigned int mask)
{
	plugin_kinds = mask;
}

const char *const *
plugin_syscalls(const struct plugin *pl)
{
	return PLUGIN_OP(pl, syscalls);
}

const struct kgym_toolkit_api *
plugin_toolkit(const char *name, uint32_t min_version, char **ret_cause)
{
	const struct kgym_toolkit_api *(*get)(const char *);
	const struct kgym_toolkit_api *api;
	struct plugin *pl;
	char *why;

	if (name == NULL) {
		why = reasonf("toolkit API without a name");
		goto refuse;
	}
	if ((pl = plugin_find_serving(KGYM_PLUGIN_TOOLKIT, name)) == NULL) {
		why = reasonf("no toolkit serves the '%s' API (kgymctl plugins lists the "
		    "plugins loaded from plugin_dir, and those refused, with why)", name);
		goto refuse;
	}
	if ((get = PLUGIN_OP(pl, toolkit_api)) == NULL || (api = get(name)) == NULL) {
		why = reasonf("toolkit '%s' lists the '%s' API but gives none",
		    pl->p->name, name);
		goto refuse;
	}
	/*
	 * The head protects the rest: nothing past it is read by us.  Causes
	 * name no path: a backend may hand them on to clients in results.
	 */
	if (api->struct_size < sizeof *api) {
		why = reasonf("toolkit '%s' gives a '%s' API of %u bytes, smaller "
		    "than its head", pl->p->name, name, api->struct_size);
		goto refuse;
	}
	if (api->version < min_version) {
		why = reasonf("toolkit '%s' version %s serves the '%s' API at version %u; "
		    "version %u or later is needed", pl->p->name, pl->p->version, name,
		    api->version, min_version);
		goto refuse;
	}
	return api;

refuse:
	if (ret_cause != NULL)
		*ret_cause = why;
	else
		free(why);
	return NULL;
}

/* Unload, in reverse order, the plugins whose kind is (or is not) `kind`. */
static void
plugin_unload_kind(enum kgym_plugin_kind kind, bool match)
{
	struct plugin *pl, *prev;

	for (pl = TAILQ_LAST(&plugins, plugin_list); pl != NULL; pl = prev) {
		prev = TAILQ_PREV(pl, plugin_list, entry);
		if ((pl->p->kind == kind) != match)
			continue;
		TAILQ_REMOVE(&plugins, pl, entry);
		if (pl->initialised)
			pl->p->fini();
		dlclose(pl->dl);
		plugin_free(pl);
	}
}

void
plugin_unload_all(void)
{
	struct plugin_refusal *r;

	/*
	 * Reverse order, so a plugin never outlives one loaded before it; and
	 * toolkits last, whatever their file names, because other plugins hold
	 * pointers to their APIs until their own fini().
	 */
	plugin_unload_kind(KGYM_PLUGIN_TOOLKIT, false);
	plugin_unload_kind(KGYM_PLUGIN_TOOLKIT, true);
	while ((r = TAILQ_FIRST(&refusals)) != NULL) {
		TAILQ_REMOVE(&refusals, r, entry);
		free(r->path);
		free(r->reason);
		free(r);
	}
}

json_t *
plugin_describe(void)
{
	const struct plugin *pl;
	const char *const *s;
	json_t *arr, *serves, *obj;

	if ((arr = json_array()) == NULL)
		return NULL;
	TAILQ_FOREACH(pl, &plugins, entry) {
		if ((serves = json_array()) == NULL)
			goto free_arr;
		for (s = PLUGIN_OP(pl, serves); s != NULL && *s != NULL; s++) {
			if (json_array_append_new(serves, json_string(*s)) == -1) {
				json_decref(serves);
				goto free_arr;
			}
		}
		obj = json_pack("{s:s, s:s, s:s, s:o, s:s}",
		    "name", pl->p->name,
		    "kind", plugin_kind_name(pl->p->kind),
		    "version", pl->p->version,
		    "serves", serves,
		    "path", pl->path);
		if (json_array_append_new(arr, obj) == -1)
			goto free_arr;
	}
	return arr;

free_arr:
	json_decref(arr);
	return NULL;
}

/*
 * config_plugin.c -- the [plugin.NAME] sections of kgymd.conf: each one's
 * keys and values, kept as written and handed only to that plugin (which
 * parses them itself: kgymd knows no plugin's keys).  Split from config.c,
 * which parses kgymd's own sections.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"


bool
config_plugin_name_valid(const char *name, size_t len)
{
	size_t i;

	if (len == 0 || len >= KGYM_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return false;
	return true;
}

void
config_plugins_free(struct config_plugin_section *plugins, size_t n)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		for (j = 0; j < plugins[i].nkv; j++) {
			free(plugins[i].kv[j].key);
			free(plugins[i].kv[j].value);
		}
		free(plugins[i].kv);
		free(plugins[i].name);
	}
	free(plugins);
}

struct config_plugin_section *
config_plugin_find(const struct config *config, const char *name)
{
	size_t i;

	for (i = 0; i < config->nplugins; i++)
		if (strcmp(config->plugins[i].name, name) == 0)
			return &config->plugins[i];
	return NULL;
}

/* -EEXIST with the line of the first setting when the key is there. */
int
config_plugin_add(struct config *config, const char *plugin, const char *key,
    const char *value, int line, int *ret_first)
{
	struct config_plugin_section *section, *grown;
	struct config_plugin_kv *kv;
	size_t i;

	if ((section = config_plugin_find(config, plugin)) == NULL) {
		grown = realloc(config->plugins,
		    (config->nplugins + 1) * sizeof *config->plugins);
		if (grown == NULL)
			return -ENOMEM;
		config->plugins = grown;
		section = &config->plugins[config->nplugins];
		memset(section, 0, sizeof *section);
		if ((section->name = strdup(plugin)) == NULL)
			return -ENOMEM;
		config->nplugins++;
	}
	for (i = 0; i < section->nkv; i++) {
		if (strcmp(section->kv[i].key, key) == 0) {
			*ret_first = section->kv[i].line;
			return -EEXIST;
		}
	}
	kv = realloc(section->kv, (section->nkv + 1) * sizeof *section->kv);
	if (kv == NULL)
		return -ENOMEM;
	section->kv = kv;
	kv = &section->kv[section->nkv];
	kv->key = strdup(key);
	kv->value = strdup(value);
	kv->line = line;
	if (kv->key == NULL || kv->value == NULL) {
		free(kv->key);
		free(kv->value);
		return -ENOMEM;
	}
	section->nkv++;
	return 0;
}

bool
config_plugins_equal(const struct config *a, const struct config *b)
{
	const struct config_plugin_section *sa, *sb;
	size_t i, j;

	if (a->nplugins != b->nplugins)
		return false;
	for (i = 0; i < a->nplugins; i++) {
		sa = &a->plugins[i];
		sb = &b->plugins[i];
		if (strcmp(sa->name, sb->name) != 0 || sa->nkv != sb->nkv)
			return false;
		for (j = 0; j < sa->nkv; j++)
			if (strcmp(sa->kv[j].key, sb->kv[j].key) != 0 ||
			    strcmp(sa->kv[j].value, sb->kv[j].value) != 0)
				return false;
	}
	return true;
}

/* Deep copy of src's plugin sections into a config that has none. */
int
config_plugins_copy(struct config *dst, const struct config *src)
{
	const struct config_plugin_section *section;
	size_t i, j;
	int first, rc;

	for (i = 0; i < src->nplugins; i++) {
		section = &src->plugins[i];
		for (j = 0; j < section->nkv; j++) {
			rc = config_plugin_add(dst, section->name,
			    section->kv[j].key, section->kv[j].value,
			    section->kv[j].line, &first);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

const char *
config_plugin_get(const struct config *config, const char *plugin,
    const char *key)
{
	const struct config_plugin_section *section;
	size_t i;

	if (config == NULL || (section = config_plugin_find(config, plugin)) == NULL)
		return NULL;
	for (i = 0; i < section->nkv; i++)
		if (strcmp(section->kv[i].key, key) == 0)
			return section->kv[i].value;
	return NULL;
}


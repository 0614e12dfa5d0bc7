/*
 * json_lru.c -- a small LRU cache of JSON values keyed by SHA-256 (see
 * json_lru.h).  A linear list: at the sizes the workflows use (about a
 * thousand entries) a lookup costs microseconds per task, far below one
 * compile or one timing run, and keeps the LRU order trivially right.
 */
#include "config.h"

#include <sys/queue.h>

#include <stdlib.h>
#include <string.h>

#include "json_lru.h"

struct json_lru_entry {
	unsigned char key[JSON_LRU_KEY];
	json_t *value;
	uint64_t bytes;
	TAILQ_ENTRY(json_lru_entry) entry;	/* most recently used first */
};

struct json_lru {
	TAILQ_HEAD(json_lru_list_head_tag, json_lru_entry) list;
	size_t count;
	uint64_t bytes;
};

struct json_lru *
json_lru_new(void)
{
	struct json_lru *lru = calloc(1, sizeof *lru);

	if (lru != NULL)
		TAILQ_INIT(&lru->list);
	return lru;
}

static void
json_lru_drop(struct json_lru *lru, struct json_lru_entry *e)
{
	TAILQ_REMOVE(&lru->list, e, entry);
	lru->count--;
	lru->bytes -= e->bytes;
	json_decref(e->value);
	free(e);
}

void
json_lru_free(struct json_lru *lru)
{
	if (lru == NULL)
		return;
	while (!TAILQ_EMPTY(&lru->list))
		json_lru_drop(lru, TAILQ_FIRST(&lru->list));
	free(lru);
}

static struct json_lru_entry *
json_lru_find(struct json_lru *lru, const unsigned char key[JSON_LRU_KEY])
{
	struct json_lru_entry *e;

	TAILQ_FOREACH(e, &lru->list, entry)
		if (memcmp(e->key, key, JSON_LRU_KEY) == 0)
			return e;
	return NULL;
}

json_t *
json_lru_get(struct json_lru *lru, const unsigned char key[JSON_LRU_KEY])
{
	struct json_lru_entry *e = json_lru_find(lru, key);

	if (e == NULL)
		return NULL;
	TAILQ_REMOVE(&lru->list, e, entry);
	TAILQ_INSERT_HEAD(&lru->list, e, entry);
	return e->value;
}

void
json_lru_trim(struct json_lru *lru, size_t max_entries, uint64_t max_bytes)
{
	while (!TAILQ_EMPTY(&lru->list) && (lru->count > max_entries || lru->bytes > max_bytes))
		json_lru_drop(lru, TAILQ_LAST(&lru->list, json_lru_list_head_tag));
}

void
json_lru_put(struct json_lru *lru, const unsigned char key[JSON_LRU_KEY], json_t *value,
    uint64_t bytes, size_t max_entries, uint64_t max_bytes)
{
	struct json_lru_entry *e;

	if (max_entries == 0)
		return;
	if ((e = json_lru_find(lru, key)) != NULL)
		json_lru_drop(lru, e);
	if ((e = calloc(1, sizeof *e)) == NULL)
		return;		/* a cache that cannot grow is only slower */
	memcpy(e->key, key, JSON_LRU_KEY);
	e->value = json_incref(value);
	e->bytes = bytes;
	TAILQ_INSERT_HEAD(&lru->list, e, entry);
	lru->count++;
	lru->bytes += bytes;
	json_lru_trim(lru, max_entries, max_bytes);
}

void
json_lru_del(struct json_lru *lru, const unsigned char key[JSON_LRU_KEY])
{
	struct json_lru_entry *e = json_lru_find(lru, key);

	if (e != NULL)
		json_lru_drop(lru, e);
}

size_t
json_lru_count(const struct json_lru *lru)
{
	return lru->count;
}

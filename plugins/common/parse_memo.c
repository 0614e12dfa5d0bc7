/*
 * parse_memo.c -- what validate() made of a payload, kept for start()
 * (parse_memo.h says why the payload object is the key).
 *
 * A list in put order: a submitted batch is started in about the order it
 * was validated, so take() usually finds its entry at the head.
 */
#include "config.h"

#include <sys/queue.h>

#include <stdbool.h>
#include <stdlib.h>

#include "parse_memo.h"

struct memo_entry {
	TAILQ_ENTRY(memo_entry) link;
	json_t *payload;		/* a reference of ours */
	void *value;
	uint64_t bytes;
};

struct parse_memo {
	TAILQ_HEAD(, memo_entry) entries;
	void (*free_value)(void *);
	size_t count;
	uint64_t bytes;
};

struct parse_memo *
parse_memo_new(void (*free_value)(void *value))
{
	struct parse_memo *m;

	if ((m = calloc(1, sizeof *m)) == NULL)
		return NULL;
	TAILQ_INIT(&m->entries);
	m->free_value = free_value;
	return m;
}

static void
memo_drop(struct parse_memo *m, struct memo_entry *e, bool free_value)
{
	TAILQ_REMOVE(&m->entries, e, link);
	m->count--;
	m->bytes -= e->bytes;
	if (free_value)
		m->free_value(e->value);
	json_decref(e->payload);
	free(e);
}

void
parse_memo_clear(struct parse_memo *m)
{
	struct memo_entry *e;

	while (m != NULL && (e = TAILQ_FIRST(&m->entries)) != NULL)
		memo_drop(m, e, true);
}

void
parse_memo_free(struct parse_memo *m)
{
	parse_memo_clear(m);
	free(m);
}

/*
 * Entries whose payload only we still hold: the daemon let go of it (a
 * submit refused after validate(), a payload it chose not to keep, a
 * task gone), so no start() will ever present it.  jansson's json_t
 * carries its reference count in its public struct.
 */
static void
memo_sweep(struct parse_memo *m)
{
	struct memo_entry *e, *next;

	for (e = TAILQ_FIRST(&m->entries); e != NULL; e = next) {
		next = TAILQ_NEXT(e, link);
		if (e->payload->refcount == 1)
			memo_drop(m, e, true);
	}
}

void
parse_memo_put(struct parse_memo *m, const json_t *payload, void *value, uint64_t bytes,
    uint64_t max_bytes)
{
	struct memo_entry *e;

	if (m == NULL || payload == NULL || bytes > max_bytes) {
		if (m != NULL)
			m->free_value(value);
		return;
	}
	/* A full memo of live entries costs each further put one pass
	 * (at most max_bytes / the smallest entry's bytes entries). */
	if (m->bytes + bytes > max_bytes)
		memo_sweep(m);
	if (m->bytes + bytes > max_bytes || (e = calloc(1, sizeof *e)) == NULL) {
		m->free_value(value);
		return;
	}
	/* A reference of ours: the pointer stays this object's while kept. */
	e->payload = json_incref((json_t *)payload);
	e->value = value;
	e->bytes = bytes;
	TAILQ_INSERT_TAIL(&m->entries, e, link);
	m->count++;
	m->bytes += bytes;
}

void *
parse_memo_take(struct parse_memo *m, const json_t *payload)
{
	struct memo_entry *e;
	void *value;

	if (m == NULL || payload == NULL)
		return NULL;
	TAILQ_FOREACH(e, &m->entries, link) {
		if (e->payload != payload)
			continue;
		value = e->value;
		memo_drop(m, e, false);
		return value;
	}
	return NULL;
}

size_t
parse_memo_count(const struct parse_memo *m)
{
	return m != NULL ? m->count : 0;
}

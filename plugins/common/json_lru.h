/*
 * json_lru.h -- a small least-recently-used cache of JSON values keyed by
 * a SHA-256 digest, bounded by entries and bytes.
 *
 * The workflows keep two such caches in the daemon: compiled reference
 * cubins (native_workflow.c) and reference timings (python_workflow.c).
 * Ownership: json_lru_put takes a new reference to the value; json_lru_get
 * returns a borrowed one, valid until the next put, trim or free.
 */
#ifndef KGYM_JSON_LRU_H
#define KGYM_JSON_LRU_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define JSON_LRU_KEY	32	/* SHA-256 */

struct json_lru;

/* An empty cache; NULL when out of memory. */
struct json_lru *json_lru_new(void);
void	json_lru_free(struct json_lru *lru);
/* The value under key, now the most recently used; NULL when absent. */
json_t	*json_lru_get(struct json_lru *lru, const unsigned char key[JSON_LRU_KEY]);
/*
 * Store value (a new reference) under key, replacing any old one, counting
 * `bytes` against the byte limit, then evict from the cold end until the
 * cache fits `max_entries` and `max_bytes` (0 entries: store nothing).
 */
void	json_lru_put(struct json_lru *lru, const unsigned char key[JSON_LRU_KEY],
	    json_t *value, uint64_t bytes, size_t max_entries, uint64_t max_bytes);
/* Evict until within the limits (after a reload lowered them). */
void	json_lru_trim(struct json_lru *lru, size_t max_entries, uint64_t max_bytes);
/* Forget the value under key (one found stale); absent is a no-op. */
void	json_lru_del(struct json_lru *lru, const unsigned char key[JSON_LRU_KEY]);
size_t	json_lru_count(const struct json_lru *lru);

#endif /* KGYM_JSON_LRU_H */

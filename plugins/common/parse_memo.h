/*
 * parse_memo.h -- what a workflow made of a payload at submit, kept for
 * the task's start, keyed by the payload object itself.
 *
 * The daemon hands a workflow's validate() the payload object it parsed
 * from the request, and keeps that same object with the queued task (while
 * the payloads it keeps stay under its limit), so start() sees the same
 * pointer: a workflow can keep what validate() made of it (a parsed,
 * evaluated spec) and take it back in start() instead of parsing the
 * payload again.  A payload the daemon read back from its store (a
 * restart, a payload it did not keep) is a new object: no entry matches,
 * and the workflow parses it as before.
 *
 * Each entry holds a reference to its payload, so the pointer cannot be
 * reused by another object while the entry lives.  An entry whose payload
 * nobody else holds any more (its submit was refused after validate(), a
 * task that ended or was dropped) can never be taken; such entries are
 * swept when the memo is full.  Bounded by bytes: a put that does not fit
 * after the sweep keeps nothing (the task's start parses again).
 *
 * Ownership: put() takes the value (freed with the memo's free function
 * when evicted, cleared or not kept); take() gives it back to the caller.
 * Loop-thread only, like everything of a workflow.
 */
#ifndef KGYM_PARSE_MEMO_H
#define KGYM_PARSE_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct parse_memo;

/* An empty memo whose values free_value frees; NULL when out of memory. */
struct parse_memo *parse_memo_new(void (*free_value)(void *value));
/* Every entry freed, then the memo; NULL is a no-op. */
void	parse_memo_free(struct parse_memo *m);
/* Every entry freed (a configuration that changed what a parse yields). */
void	parse_memo_clear(struct parse_memo *m);
/*
 * Keep `value` (taken) for `payload` (a new reference), counting `bytes`
 * against max_bytes.  Not kept (value freed at once) when it does not fit
 * or max_bytes is 0.
 */
void	parse_memo_put(struct parse_memo *m, const json_t *payload, void *value,
	    uint64_t bytes, uint64_t max_bytes);
/* The value kept for this very payload object, now the caller's; NULL
 * when there is none. */
void	*parse_memo_take(struct parse_memo *m, const json_t *payload);
size_t	parse_memo_count(const struct parse_memo *m);

#endif /* KGYM_PARSE_MEMO_H */

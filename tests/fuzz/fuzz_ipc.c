/*
 * fuzz_ipc.c -- fuzz target for the worker<->daemon frame decoder.
 *
 * The input is what a worker wrote on its channel: its first byte picks
 * the state the parent holds the worker in (and a small or the default
 * max_message_bytes), the rest is the byte stream, which is decoded frame
 * after frame the way proc.c's reader does -- the header alone first, then
 * the whole frame once it is there -- moving the state as the parent would
 * (HELLO: idle; a job dispatched: busy; LOCK: lock_wait, then granted;
 * RESULT: idle) until an error, which would kill the worker, or the end.
 * Besides memory errors (ASan/UBSan under libFuzzer) it aborts when an
 * invariant proc.c relies on breaks: a decoded frame is exactly header +
 * length bytes, within the limit, of a type the state accepts, with a
 * JSON object payload that re-frames to the same value; a frame not yet
 * whole asks for more bytes than there are and no more than the limit
 * allows; a refusal is one of the three documented errors with a reason,
 * and the header alone already gives it unless it is the payload's fault.
 *
 * Built two ways, like fuzz_request.c: with clang -fsanitize=fuzzer by
 * run-fuzz.sh (KGYM_FUZZ_TARGET=ipc), and with the ordinary compiler and
 * replay_main.c (make check), which replays tests/fuzz/corpus_ipc.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"

#define FUZZ_SMALL_MAX		256	/* a limit the fuzzer can reach */
#define FUZZ_DEFAULT_MAX	(64u * 1024u * 1024u)

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_ipc: invariant broken: %s%s%s\n", what,
	    detail != NULL ? ": " : "", detail != NULL ? detail : "");
	abort();
}

/* A decoded payload frames again, and that frame decodes to the same. */
static void
fuzz_check_reframe(unsigned int type, const json_t *payload, enum worker_state st)
{
	struct ipc_msg msg;
	char why[256];
	size_t len;
	char *frame;
	ssize_t n;

	if ((frame = ipc_frame(type, payload, &len)) == NULL)
		fuzz_fail("ipc_frame refused a decoded payload", ipc_type_name(type));
	n = ipc_decode(frame, len, SIZE_MAX, st, &msg, why, sizeof why);
	if (n != (ssize_t)len || msg.type != type || !json_equal(msg.payload, payload))
		fuzz_fail("a re-framed payload does not decode to itself", why);
	json_decref(msg.payload);
	free(frame);
}

/* The state the parent moves a worker to after it accepted `type`. */
static enum worker_state
fuzz_next_state(enum worker_state st, unsigned int type)
{
	switch (type) {
	case IPC_HELLO:
		return W_IDLE;
	case IPC_RESULT:
		return W_IDLE;
	case IPC_LOCK:
		return W_LOCK_WAIT;
	default:
		break;
	}
	if (st == W_IDLE)
		return W_BUSY;		/* the parent dispatched a job */
	if (st == W_LOCK_WAIT)
		return W_BUSY;		/* the parent granted the lock */
	return st;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum worker_state st;
	struct ipc_msg msg, hmsg;
	char why[256], hwhy[256];
	size_t max_len, off = 1;
	ssize_t n, hn;

	if (size < 1)
		return 0;
	st = (enum worker_state)((data[0] & 0x7f) % (W_DOWN + 1));
	max_len = (data[0] & 0x80) ? FUZZ_SMALL_MAX : FUZZ_DEFAULT_MAX;
	while (off < size) {
		const uint8_t *p = data + off;
		size_t avail = size - off;

		why[0] = hwhy[0] = '\0';
		/* proc.c's first step: the header alone. */
		hn = ipc_decode(p, avail < IPC_HEADER_LEN ? avail : IPC_HEADER_LEN, max_len,
		    st, &hmsg, hwhy, sizeof hwhy);
		if (hn > 0)
			fuzz_fail("a header alone decoded as a frame", NULL);
		n = ipc_decode(p, avail, max_len, st, &msg, why, sizeof why);
		if (n < 0) {
			if (n != -EPROTO && n != -EMSGSIZE && n != -EPERM)
				fuzz_fail("an undocumented error", NULL);
			if (msg.payload != NULL)
				fuzz_fail("a refusal left a payload", why);
			if (why[0] == '\0')
				fuzz_fail("a refusal without a reason", NULL);
			/* Only the payload needs more than the header to be refused. */
			if (hn == 0 && n != -EPROTO)
				fuzz_fail("the header alone did not refuse it", why);
			if (hn < 0 && (hn != n || strcmp(hwhy, why) != 0))
				fuzz_fail("header and frame are refused differently", why);
			return 0;
		}
		if (hn < 0)
			fuzz_fail("a frame the header alone refused was accepted", hwhy);
		if (n == 0) {
			if (msg.need <= avail)
				fuzz_fail("asks for bytes it has", NULL);
			if (msg.need > IPC_HEADER_LEN + max_len)
				fuzz_fail("asks for more than the limit", NULL);
			if (avail >= IPC_HEADER_LEN && hmsg.need != msg.need)
				fuzz_fail("header and frame disagree on the length", NULL);
			return 0;
		}
		if ((size_t)n > avail || (size_t)n != msg.need || (size_t)n < IPC_HEADER_LEN ||
		    (size_t)n - IPC_HEADER_LEN > max_len || (size_t)n != hmsg.need)
			fuzz_fail("a frame of the wrong size", NULL);
		if (!ipc_allowed(st, msg.type))
			fuzz_fail("a type the state does not accept", ipc_type_name(msg.type));
		if (!json_is_object(msg.payload))
			fuzz_fail("a payload that is not an object", NULL);
		fuzz_check_reframe(msg.type, msg.payload, st);
		json_decref(msg.payload);
		st = fuzz_next_state(st, msg.type);
		off += (size_t)n;
	}
	return 0;
}

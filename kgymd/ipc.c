/*
 * ipc.c -- the parent<->worker protocol: typed, versioned, size-limited frames.
 *
 * Both kgymd and kgymd-worker link this file.  A frame is a 12-byte header
 * (magic "KGYM", protocol version, message type, payload length, all in
 * network byte order) followed by a JSON object of at most the configured
 * size.  The parent reads frames from a bufferevent and validates every
 * header before it trusts a byte of the payload (proc.c); the worker uses
 * the blocking helpers here, since it does one thing at a time.
 *
 * The worker side is less trusted than the parent: a job runs candidate
 * code in the worker's address space, so anything the parent receives may
 * be forged.  Hence the strict header checks, a hard cap on the length
 * whatever the configuration says, and the per-state table of the types a
 * worker may send, all in ipc_decode() so that one function, unit-tested
 * (tests/unit/test_ipc.c) and fuzzed (tests/fuzz/fuzz_ipc.c), stands
 * between the worker's bytes and proc.c's handlers.
 */
#include "config.h"

#include <arpa/inet.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kgymd.h"

static const char *const ipc_type_names[IPC__TYPE_COUNT] = {
	[IPC_HELLO] = "HELLO",
	[IPC_JOB] = "JOB",
	[IPC_RESULT] = "RESULT",
	[IPC_LOG] = "LOG",
	[IPC_LOCK] = "LOCK",
	[IPC_GRANTED] = "GRANTED",
	[IPC_PHASE] = "PHASE",
	[IPC_FATAL] = "FATAL",
	[IPC_BYE] = "BYE",
};

static const char *const ipc_state_names[] = {
	[W_STARTING] = "starting",
	[W_IDLE] = "idle",
	[W_BUSY] = "busy",
	[W_LOCK_WAIT] = "lock_wait",
	[W_STOPPING] = "stopping",
	[W_DOWN] = "down",
};

#define T(x) (1u << (x))
/*
 * What a worker may send in each state; anything else kills it.  JOB,
 * GRANTED and BYE go the other way and are accepted in no state.
 */
static const unsigned int ipc_accepts[] = {
	[W_STARTING] = T(IPC_HELLO) | T(IPC_LOG) | T(IPC_FATAL),
	[W_IDLE] = T(IPC_LOG),
	[W_BUSY] = T(IPC_LOG) | T(IPC_RESULT) | T(IPC_LOCK) | T(IPC_PHASE) | T(IPC_FATAL),
	[W_LOCK_WAIT] = T(IPC_LOG),
	[W_STOPPING] = T(IPC_LOG) | T(IPC_FATAL),
	[W_DOWN] = 0,
};
#undef T

const char *
ipc_state_name(enum worker_state state)
{
	if ((unsigned)state >= sizeof ipc_state_names / sizeof ipc_state_names[0])
		return "invalid";
	return ipc_state_names[state];
}

bool
ipc_allowed(enum worker_state state, unsigned int type)
{
	if ((unsigned)state >= sizeof ipc_accepts / sizeof ipc_accepts[0] ||
	    type == 0 || type >= IPC__TYPE_COUNT)
		return false;
	return (ipc_accepts[state] & (1u << type)) != 0;
}

const char *
ipc_type_name(unsigned int type)
{
	if (type == 0 || type >= IPC__TYPE_COUNT)
		return "invalid";
	return ipc_type_names[type];
}

void
ipc_header_encode(unsigned char hdr[IPC_HEADER_LEN], unsigned int type, uint32_t len)
{
	uint32_t magic = htonl(IPC_MAGIC), n = htonl(len);
	uint16_t version = htons(IPC_VERSION), t = htons((uint16_t)type);

	memcpy(hdr, &magic, 4);
	memcpy(hdr + 4, &version, 2);
	memcpy(hdr + 6, &t, 2);
	memcpy(hdr + 8, &n, 4);
}

int
ipc_header_decode(const unsigned char hdr[IPC_HEADER_LEN], size_t max_len,
    unsigned int *ret_type, uint32_t *ret_len, char *why, size_t whylen)
{
	uint32_t magic, len;
	uint16_t version, type;

	memcpy(&magic, hdr, 4);
	memcpy(&version, hdr + 4, 2);
	memcpy(&type, hdr + 6, 2);
	memcpy(&len, hdr + 8, 4);
	magic = ntohl(magic);
	version = ntohs(version);
	type = ntohs(type);
	len = ntohl(len);
	if (magic != IPC_MAGIC) {
		snprintf(why, whylen, "bad frame magic 0x%08x", magic);
		return -EPROTO;
	}
	if (version != IPC_VERSION) {
		snprintf(why, whylen, "protocol version %u, expected %u", version, IPC_VERSION);
		return -EPROTO;
	}
	if (type == 0 || type >= IPC__TYPE_COUNT) {
		snprintf(why, whylen, "unknown message type %u", type);
		return -EPROTO;
	}
	if (len > max_len || len > IPC_MAX_PAYLOAD) {
		if (max_len > IPC_MAX_PAYLOAD)
			max_len = IPC_MAX_PAYLOAD;
		snprintf(why, whylen, "%s message of %u bytes exceeds the limit of %zu bytes",
		    ipc_type_name(type), len, max_len);
		return -EMSGSIZE;
	}
	*ret_type = type;
	*ret_len = len;
	return 0;
}

json_t *
ipc_payload_decode(const char *buf, size_t len, char *why, size_t whylen)
{
	json_error_t jerr;
	json_t *o;

	if (len == 0) {
		snprintf(why, whylen, "empty payload, expected a JSON object");
		return NULL;
	}
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (o == NULL) {
		snprintf(why, whylen, "payload is not JSON: %s", jerr.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		snprintf(why, whylen, "payload is not a JSON object");
		json_decref(o);
		return NULL;
	}
	return o;
}

ssize_t
ipc_decode(const void *buf, size_t avail, size_t max_len, enum worker_state state,
    struct ipc_msg *msg, char *why, size_t whylen)
{
	const unsigned char *p = buf;
	unsigned int type;
	uint32_t len;
	int error;

	msg->type = 0;
	msg->payload = NULL;
	msg->need = IPC_HEADER_LEN;
	if (avail < IPC_HEADER_LEN)
		return 0;
	if ((error = ipc_header_decode(p, max_len, &type, &len, why, whylen)) < 0)
		return error;
	/* Refused before its payload is buffered: no waiting on what is refused. */
	if (!ipc_allowed(state, type)) {
		snprintf(why, whylen, "%s is not allowed while %s", ipc_type_name(type),
		    ipc_state_name(state));
		return -EPERM;
	}
	/* len <= IPC_MAX_PAYLOAD: the sum cannot wrap, even with a 32-bit size_t. */
	msg->need = IPC_HEADER_LEN + (size_t)len;
	if (avail < msg->need)
		return 0;
	if ((msg->payload = ipc_payload_decode((const char *)p + IPC_HEADER_LEN, len, why,
	    whylen)) == NULL)
		return -EPROTO;
	msg->type = type;
	return (ssize_t)msg->need;
}

char *
ipc_frame(unsigned int type, const json_t *payload, size_t *ret_len)
{
	char *body, *frame;
	size_t n;

	body = json_dumps(payload, JSON_COMPACT);
	if (body == NULL)
		return NULL;
	n = strlen(body);
	if (n > IPC_MAX_PAYLOAD || (frame = malloc(IPC_HEADER_LEN + n)) == NULL) {
		free(body);
		return NULL;
	}
	ipc_header_encode((unsigned char *)frame, type, (uint32_t)n);
	memcpy(frame + IPC_HEADER_LEN, body, n);
	free(body);
	*ret_len = IPC_HEADER_LEN + n;
	return frame;
}

static int
ipc_write_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
ipc_read_all(int fd, char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = read(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int
ipc_send(int fd, unsigned int type, const json_t *payload)
{
	size_t len;
	char *frame;
	int error;

	if ((frame = ipc_frame(type, payload, &len)) == NULL)
		return -ENOMEM;
	error = ipc_write_all(fd, frame, len);
	free(frame);
	return error;
}

int
ipc_recv(int fd, size_t max_len, unsigned int *ret_type, json_t **ret_payload,
    char *why, size_t whylen)
{
	unsigned char hdr[IPC_HEADER_LEN];
	unsigned int type;
	uint32_t len;
	char *buf;
	json_t *o;
	int error;

	if ((error = ipc_read_all(fd, (char *)hdr, sizeof hdr)) < 0) {
		snprintf(why, whylen, "reading a frame header: %s", strerror(-error));
		return error;
	}
	if ((error = ipc_header_decode(hdr, max_len, &type, &len, why, whylen)) < 0)
		return error;
	if ((buf = malloc((size_t)len + 1)) == NULL)
		return -ENOMEM;
	if ((error = ipc_read_all(fd, buf, len)) < 0) {
		snprintf(why, whylen, "reading a %s payload: %s", ipc_type_name(type),
		    strerror(-error));
		free(buf);
		return error;
	}
	o = ipc_payload_decode(buf, len, why, whylen);
	free(buf);
	if (o == NULL)
		return -EPROTO;
	*ret_type = type;
	*ret_payload = o;
	return 0;
}

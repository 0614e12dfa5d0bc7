/*
 * client.h -- a client's connection to kgymd's control socket: a small
 * library (libkgymclient) that kgymctl, bench/control and the C tests share.
 *
 * Blocking I/O over a Unix stream socket speaking protocol v1
 * (kgymd-protocol(7)): one compact JSON object per line both ways.  Requests
 * get increasing integer ids; client_await() reads until the reply to one id
 * arrives and hands every other line (events, replies to other requests) to
 * a callback, so several requests may be in flight on one connection.
 *
 * Ownership: client_connect() returns an owned client, client_free(NULL) is a
 * no-op.  Arguments are borrowed; every json_t handed back through a ret_*
 * parameter is a new reference the caller must json_decref().  Causes are
 * malloc'd and freed by the caller.
 */
#ifndef KGYMCTL_CLIENT_H
#define KGYMCTL_CLIENT_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define CLIENT_PROTOCOL_VERSION 1

struct client;

/* Connect to the socket at `path`; NULL with a cause naming path and error. */
struct client *client_connect(const char *path, char **ret_cause);
void client_free(struct client *c);

/*
 * Every line received is passed to `tap` first, exactly as it came (without
 * the newline): kgymctl --json prints replies and events through it.
 */
void client_set_tap(
    struct client *c, void (*tap)(const char *line, size_t len, void *arg), void *arg);

/*
 * Send {"v":1,"id":N,"op":op, ...args}; args (an object or NULL) is copied
 * into the request, not stolen.  ret_id (may be NULL) gets N.
 * -EPIPE and friends when the daemon went away, -EINVAL for a bad args.
 */
int client_send(
    struct client *c, const char *op, json_t *args, json_int_t *ret_id, char **ret_cause);

/*
 * Read the next line as a JSON object.  -ECONNRESET when kgymd closed the
 * connection, -EPROTO for a line that is not a protocol v1 object, -EMSGSIZE
 * for a line past the client's limit, other -errno for read failures.
 */
int client_read(struct client *c, json_t **ret_msg, char **ret_cause);

/*
 * Read until the reply (not an event) to request `id` arrives and return it
 * in ret_reply, whether ok or not.  Every other line read meanwhile goes to
 * on_other (which may be NULL: dropped).  A reply with a null id and ok:false
 * (an error about the connection itself, e.g. forbidden) also ends the wait.
 */
int client_await(struct client *c, json_int_t id, void (*on_other)(json_t *msg, void *arg),
    void *arg, json_t **ret_reply, char **ret_cause);

/* Send, then await the reply; events of this request go to on_other. */
int client_call(struct client *c, const char *op, json_t *args,
    void (*on_other)(json_t *msg, void *arg), void *arg, json_t **ret_reply, char **ret_cause);

/* The daemon's pid, from the socket's peer credentials; -1 if unknown. */
pid_t client_peer_pid(struct client *c);

/* Helpers for reading replies. */
bool client_msg_is_event(json_t *msg);
bool client_msg_ok(json_t *msg);
/* The integer id of a message, or -1 when it has none or not an integer. */
json_int_t client_msg_id(json_t *msg);
/* error.code / error.message of an ok:false reply ("?" when missing). */
const char *client_error_code(json_t *msg);
const char *client_error_message(json_t *msg);

#endif /* KGYMCTL_CLIENT_H */

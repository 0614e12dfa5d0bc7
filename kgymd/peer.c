/*
 * peer.c -- a client as the op handlers and the waits see it, whatever
 * transport carries its lines.
 *
 * ops.c and wait.c answer a struct peer: who it is (uid, owner, admin),
 * how to send it a line, how to let it go on after a request that took
 * several loop turns, and what it holds (a request in progress, waiters).
 * A transport -- control.c's Unix-socket connections today -- embeds one
 * and fills it in.  So the op handlers and the scheduler's end-of-task
 * reports (through wait.c) never know about connections, and a second
 * transport needs no change below it.
 */
#include "config.h"

#include <string.h>

#include "kgymd.h"

void
peer_init(struct peer *peer, const struct peer_transport *transport)
{
	memset(peer, 0, sizeof *peer);
	peer->transport = transport;
	TAILQ_INIT(&peer->waiters);
}

void
peer_send(struct peer *peer, const json_t *msg)
{
	if (peer->gone)
		return;
	peer->transport->send(peer, msg);
}

void
peer_send_line(struct peer *peer, const char *line, size_t len)
{
	if (peer->gone)
		return;
	peer->transport->send_line(peer, line, len);
}

void
peer_resume(struct peer *peer)
{
	peer->transport->resume(peer);
}

void
peer_release(struct peer *peer)
{
	if (peer->pending != NULL)
		ops_pending_free(peer);
	wait_peer_gone(peer);
	ops_peer_gone(peer);
}

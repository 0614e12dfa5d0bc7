/*
 * control_socket.c -- the control socket's file: create it, or refuse to.
 *
 * A stale socket of a crashed daemon is replaced; a live daemon's, or a
 * file that is no socket, is not.  The socket is created with no access
 * and then opened up to its mode, so no client connects in between.
 * control.c listens on what this returns (names: ctlsock_, since the
 * control_ functions are control.c's alone).
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kgymd.h"

/* Is a live daemon answering on `path`?  Then we must not steal its socket. */
static bool
ctlsock_live(const struct sockaddr_un *sun)
{
	int fd, live;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return false;
	live = connect(fd, (const struct sockaddr *)sun, sizeof *sun) == 0;
	close(fd);
	return live;
}

int
ctlsock_bind(const char *path, int mode, int *ret_fd, char **ret_cause)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, error;

	if (strlen(path) >= sizeof sun.sun_path) {
		if (asprintf(ret_cause, "%s: socket path too long", path) < 0)
			*ret_cause = NULL;
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			if (asprintf(ret_cause, "%s exists and is not a socket", path) < 0)
				*ret_cause = NULL;
			return -EEXIST;
		}
		if (ctlsock_live(&sun)) {
			if (asprintf(ret_cause, "%s: another kgymd is already listening", path) < 0)
				*ret_cause = NULL;
			return -EADDRINUSE;
		}
		unlink(path);	/* a stale socket of a crashed daemon */
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		goto fail;
	/* Create the socket with no access, then open it up to `mode`. */
	old = umask(0777);
	error = bind(fd, (struct sockaddr *)&sun, sizeof sun);
	umask(old);
	if (error < 0 || chmod(path, (mode_t)mode) < 0 || listen(fd, 512) < 0) {
		error = -errno;
		close(fd);
		errno = -error;
		goto fail;
	}
	*ret_fd = fd;
	return 0;
fail:
	error = -errno;
	if (asprintf(ret_cause, "%s: %s", path, strerror(errno)) < 0)
		*ret_cause = NULL;
	return error;
}

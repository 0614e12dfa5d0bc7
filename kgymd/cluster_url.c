/*
 * cluster_url.c -- where the shared queue's Redis is: the [cluster] redis
 * key, parsed once for the configuration check and for the connection.
 *
 * Two forms: redis://HOST[:PORT][/DB] (TCP) and an absolute path (a Unix
 * socket; DB 0).  HOST is a name or an address; an IPv6 address goes in
 * brackets.  No user or password in the URL: the password comes from
 * password_file, so that it is never in a file anyone may read.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"

static int
cluster_url_reason(char **ret_reason, const char *what, const char *url)
{
	if (ret_reason != NULL && asprintf(ret_reason, "expected redis://HOST[:PORT][/DB] "
	    "or the absolute path of a Unix socket, got \"%s\" (%s)", url, what) < 0)
		*ret_reason = NULL;
	return -EINVAL;
}

/* A decimal from min to max, the whole of [s, s + len). */
static int
cluster_url_number(const char *s, size_t len, long min, long max, long *ret)
{
	long v = 0;
	size_t i;

	if (len == 0 || len > 9)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	if (v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

int
cluster_url_parse(const char *url, struct cluster_addr *ret, char **ret_reason)
{
	static const char scheme[] = "redis://";
	const char *host, *end, *port = NULL, *db = NULL;
	struct cluster_addr a = { .port = 6379, .db = 0 };
	long v;

	if (url[0] == '/') {
		if (strlen(url) >= sizeof a.path)
			return cluster_url_reason(ret_reason, "the socket path is too long", url);
		snprintf(a.path, sizeof a.path, "%s", url);
		*ret = a;
		return 0;
	}
	if (strncmp(url, scheme, sizeof scheme - 1) != 0)
		return cluster_url_reason(ret_reason, "neither a redis:// URL nor a path", url);
	host = url + sizeof scheme - 1;
	if (strchr(host, '@') != NULL)
		return cluster_url_reason(ret_reason, "a password goes in password_file", url);
	if (*host == '[') {
		if ((end = strchr(host, ']')) == NULL)
			return cluster_url_reason(ret_reason, "an unclosed [", url);
		host++;
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] == '/')
			db = end + 2;
		else if (end[1] != '\0')
			return cluster_url_reason(ret_reason, "junk after ]", url);
	} else {
		end = host + strcspn(host, ":/");
		if (*end == ':')
			port = end + 1;
		else if (*end == '/')
			db = end + 1;
	}
	if (end == host || (size_t)(end - host) >= sizeof a.host)
		return cluster_url_reason(ret_reason, "no host, or too long a one", url);
	memcpy(a.host, host, (size_t)(end - host));
	a.host[end - host] = '\0';
	if (port != NULL) {
		size_t n = strcspn(port, "/");

		if (cluster_url_number(port, n, 1, 65535, &v) < 0)
			return cluster_url_reason(ret_reason, "the port must be 1 to 65535", url);
		a.port = (int)v;
		if (port[n] == '/')
			db = port + n + 1;
	}
	if (db != NULL && *db != '\0') {
		if (cluster_url_number(db, strlen(db), 0, 100000, &v) < 0)
			return cluster_url_reason(ret_reason, "the database must be a number", url);
		a.db = (int)v;
	}
	*ret = a;
	return 0;
}

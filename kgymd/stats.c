/* stats.c -- placeholder, being written */

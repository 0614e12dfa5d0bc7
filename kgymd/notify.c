/* notify.c -- placeholder, being written */

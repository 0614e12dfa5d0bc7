/* plugin.c -- placeholder, being written */

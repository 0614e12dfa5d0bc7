/* main.c -- placeholder, being written */

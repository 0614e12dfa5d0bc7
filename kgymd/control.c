/* control.c -- placeholder, being written */

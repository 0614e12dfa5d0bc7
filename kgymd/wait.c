/* wait.c -- placeholder, being written */

/* task.c -- placeholder, being written */

/* ops.c -- placeholder, being written */

/* protocol.c -- placeholder, being written */

/* gpus.c -- placeholder, being written */

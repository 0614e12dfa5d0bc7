/* sched.c -- placeholder, being written */

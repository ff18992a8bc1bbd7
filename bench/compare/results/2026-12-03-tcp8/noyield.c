/* noyield.c - LD_PRELOAD experiment with gate.c: sched_yield() returns at once (no system call). Not library code. */
int sched_yield(void) { return 0; }

/* Spinning processes beside a run (load.h). Processes rather than threads: the engine's workers
 * and the spinners then compete as a user's program and another program do, through the
 * scheduler, and the spinners share no OpenMP runtime with the engine. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "load.h"

#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

enum { LOAD_MAX = 256 };
static pid_t spinners[LOAD_MAX];
static int spinner_count;

static void spin(void) {
    volatile unsigned long long x = 0;
    for (;;) x = x + 1;
}

bool load_start(int count) {
    if (count < 0 || count > LOAD_MAX - spinner_count) return false;
    pid_t parent = getpid();
    for (int i = 0; i < count; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            load_stop();
            return false;
        }
        if (pid == 0) {
            /* Ends with the parent even if the parent is killed before load_stop(). */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(0);
            spin();
        }
        spinners[spinner_count++] = pid;
    }
    return true;
}

void load_stop(void) {
    for (int i = 0; i < spinner_count; i++) kill(spinners[i], SIGKILL);
    for (int i = 0; i < spinner_count; i++) waitpid(spinners[i], NULL, 0);
    spinner_count = 0;
}

/*
 * pause: the first process of every pod sandbox. It holds the pod's namespaces open while the
 * pod's containers come and go, so it does nothing but wait: it reaps the children it inherits
 * (when the pod shares one PID namespace, it is that namespace's init) and exits 0 on SIGINT or
 * SIGTERM. Built static (gcc -static) into a FROM scratch image by scripts/build-kind-images.sh.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PAUSE_VERSION
#define PAUSE_VERSION "unknown"
#endif

static void on_stop(int sig)
{
    static const char msg[] = "pause: stopping\n";
    (void)sig;
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(0);
}

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char **argv)
{
    struct sigaction stop = {0}, child = {0};

    if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("pause %s (odradek)\n", PAUSE_VERSION);
        return 0;
    }
    if (getpid() != 1)
        fputs("pause: not PID 1: children of this process's namespace are not reaped here\n", stderr);

    stop.sa_handler = on_stop;
    sigemptyset(&stop.sa_mask);
    if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    child.sa_handler = on_child;
    sigemptyset(&child.sa_mask);
    child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    if (sigaction(SIGCHLD, &child, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;)
        pause();
}

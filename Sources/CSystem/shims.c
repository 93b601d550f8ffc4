#define _GNU_SOURCE
#include "CSystem.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

int csys_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int csys_errno(void) { return errno; }

void csys_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

int csys_block_termination_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int csys_wait_termination_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {}
    return sig;
}

void csys_stdout_line_buffered(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

void csys_random_bytes(void *buf, size_t len) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 36))
    arc4random_buf(buf, len);
#else
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) { if (errno == EINTR) continue; abort(); }
        p += n; len -= (size_t)n;
    }
#endif
}

unsigned long long csys_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int csys_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg, size_t stack_size) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (stack_size > 0) pthread_attr_setstacksize(&attr, stack_size);
    int rc = pthread_create(thread, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc;
}

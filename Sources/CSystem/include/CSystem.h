#ifndef CSYSTEM_H
#define CSYSTEM_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC; Glibc's module does not export it without _GNU_SOURCE.
int csys_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *len);

/// The calling thread's errno.
int csys_errno(void);

/// Ignores SIGPIPE for the whole process (writes to closed sockets return EPIPE instead).
void csys_ignore_sigpipe(void);

/// Blocks SIGINT and SIGTERM in the calling thread (threads created afterwards inherit the mask).
int csys_block_termination_signals(void);

/// Waits for SIGINT or SIGTERM (which must be blocked) and returns the signal number.
int csys_wait_termination_signal(void);

/// Makes stdout line-buffered (Swift 6 cannot touch `stdout` directly).
void csys_stdout_line_buffered(void);

/// Fills buf with len bytes from the system CSPRNG (arc4random_buf, glibc >= 2.36, seeded from getrandom).
void csys_random_bytes(void *buf, size_t len);

/// Monotonic time in nanoseconds.
unsigned long long csys_monotonic_ns(void);

/// Creates a detached-able pthread running fn(arg); returns 0 on success.
int csys_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg, size_t stack_size);

/// libFuzzer's driver (linked only by scripts/fuzz, from libclang_rt.fuzzer_no_main).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const unsigned char *data, size_t size));

#endif

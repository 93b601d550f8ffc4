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
#include <malloc.h>  /* mallopt: Glibc's module does not export it */

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

/// `phone-auth-emulator exec`: blocks SIGINT, SIGTERM and SIGCHLD in the calling thread (before any other thread starts,
/// so every thread inherits the mask and only `csys_wait_exec_signal` sees them).
int csys_block_exec_signals(void);

/// Starts `file` with `argv` and `envp` (NULL-terminated) as a child process, as a shell would: a name without a slash
/// is looked up in PATH (unset: /bin:/usr/bin), a file without a #! line runs under /bin/sh. fork + execve, so the
/// child starts with no signal blocked and none ignored (the parent blocks some and ignores SIGPIPE; posix_spawn
/// would leave glibc's two internal signals ignored). Returns 0 and the child's pid, or an errno value (ENOENT: not
/// found; EACCES: not executable).
int csys_spawn(const char *file, char *const argv[], char *const envp[], pid_t *pid);

/// The process's environment (`environ`, which Swift 6 cannot read directly): NAME=VALUE strings, NULL-terminated.
char *const *csys_environ(void);

/// Waits for SIGINT, SIGTERM or SIGCHLD (blocked by `csys_block_exec_signals`) and returns it. `*from_terminal` is 1
/// when the kernel sent it on its own (a terminal's Ctrl-C reaches the whole foreground process group, the child
/// included), 0 when a process sent it (kill).
int csys_wait_exec_signal(int *from_terminal);

/// Reaps `pid` if it has ended, without waiting: 1 and its status as a shell reports it (the exit code, or 128 + N
/// when signal N ended it); 0 while it runs; -1 on error (errno).
int csys_reap_child(pid_t pid, int *status);

/// Makes stdout line-buffered (Swift 6 cannot touch `stdout` directly).
void csys_stdout_line_buffered(void);

/// Fills buf with len bytes from the system CSPRNG (arc4random_buf, glibc >= 2.36, seeded from getrandom).
void csys_random_bytes(void *buf, size_t len);

/// Monotonic time in nanoseconds.
unsigned long long csys_monotonic_ns(void);

/// An io_uring used for one thing: many non-blocking socket sends in one system call (an event loop answering a
/// batch of requests). Opaque; one per event loop thread, never shared.
typedef struct csys_uring csys_uring;

/// Sets up a ring for up to `entries` sends per call; NULL when the kernel or a seccomp filter refuses io_uring.
/// Set up, use and destroy it on one thread (the one that submits).
csys_uring *csys_uring_create(unsigned entries);

/// Unmaps and closes the ring.
void csys_uring_destroy(csys_uring *ring);

/// Sends `lens[i]` bytes from `bufs[i]` on socket `fds[i]` (MSG_DONTWAIT | MSG_NOSIGNAL), i < n, in as few
/// io_uring_enter calls as the ring's size allows; `results[i]` is the byte count or -errno (-EAGAIN: would block).
/// Returns 0, or -errno when the ring itself failed: the results not yet written are then -EIO (whether those
/// bytes went out is unknown; the caller must give up on those connections).
int csys_uring_send_batch(csys_uring *ring, int n, const int *fds, const void *const *bufs, const unsigned *lens, int *results);

/// The calling thread's event loop (NULL: none), for work that asks to run on "the loop I am on".
void csys_set_current_loop(void *loop);
void *csys_current_loop(void);

/// libFuzzer's driver (linked only by scripts/fuzz, from libclang_rt.fuzzer_no_main).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const unsigned char *data, size_t size));

#endif

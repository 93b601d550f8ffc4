#define _GNU_SOURCE
#include "CSystem.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <string.h>

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

int csys_block_exec_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/// The file execvp would run for `file`: itself when it names a path, else the first executable regular file in
/// PATH (unset: /bin:/usr/bin; an empty entry is the working directory). 0, or ENOENT/EACCES/ENAMETOOLONG.
static int find_in_path(const char *file, char *out, size_t size) {
    if (strchr(file, '/') != NULL) {
        if (strlen(file) >= size) return ENAMETOOLONG;
        strcpy(out, file);
        return 0;
    }
    const char *path = getenv("PATH");
    if (path == NULL) path = "/bin:/usr/bin";
    int found_unusable = 0;
    for (const char *p = path;; ) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int n = len == 0 ? snprintf(out, size, "%s", file) : snprintf(out, size, "%.*s/%s", (int)len, p, file);
        if (n > 0 && (size_t)n < size) {
            struct stat st;
            if (stat(out, &st) == 0) {
                if (S_ISREG(st.st_mode) && access(out, X_OK) == 0) return 0;
                found_unusable = 1;
            } else if (errno == EACCES) {
                found_unusable = 1;
            }
        }
        if (end == NULL) break;
        p = end + 1;
    }
    return found_unusable ? EACCES : ENOENT;
}

int csys_spawn(const char *file, char *const argv[], char *const envp[], pid_t *pid) {
    char path[4096];
    int rc = find_in_path(file, path, sizeof path);
    if (rc != 0) return rc;
    // A file without a #! line runs under /bin/sh, as execvp and shells do: that argv is built here, before fork.
    int argc = 0;
    while (argv[argc] != NULL) argc++;
    char **sh_argv = calloc((size_t)argc + 2, sizeof(char *));
    if (sh_argv == NULL) return ENOMEM;
    sh_argv[0] = "sh";
    sh_argv[1] = path;
    for (int i = 1; i < argc; i++) sh_argv[i + 1] = argv[i];
    // The child reports a failed execve through this pipe; a successful one closes it (O_CLOEXEC).
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) { rc = errno; free(sh_argv); return rc; }
    pid_t child = fork();
    if (child < 0) {
        rc = errno;
        close(report[0]);
        close(report[1]);
        free(sh_argv);
        return rc;
    }
    if (child == 0) {
        // Only async-signal-safe calls from here on (the parent has other threads). A signal the parent ignores
        // stays ignored across execve: put each back to its default; then unblock everything.
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++) {
            struct sigaction cur;
            if (sigaction(sig, NULL, &cur) == 0 && cur.sa_handler == SIG_IGN) sigaction(sig, &dfl, NULL);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(path, argv, envp);
        if (errno == ENOEXEC) execve("/bin/sh", sh_argv, envp);
        int e = errno;
        ssize_t ignored = write(report[1], &e, sizeof e);
        (void)ignored;
        _exit(127);
    }
    close(report[1]);
    free(sh_argv);
    int child_errno = 0;
    ssize_t n;
    while ((n = read(report[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {}
    close(report[0]);
    if (n > 0) {
        // execve failed: reap the child that reported it.
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
        return child_errno != 0 ? child_errno : EACCES;
    }
    *pid = child;
    return 0;
}

char *const *csys_environ(void) { return environ; }

int csys_wait_exec_signal(int *from_terminal) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    siginfo_t info;
    int sig;
    while ((sig = sigwaitinfo(&set, &info)) < 0) {}
    *from_terminal = info.si_code == SI_KERNEL;
    return sig;
}

int csys_reap_child(pid_t pid, int *status) {
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) < 0 && errno == EINTR) {}
    if (r < 0) return -1;
    if (r == 0) return 0;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
    return 1;
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

// MARK: io_uring sends (see CSystem.h)

#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <string.h>
#include <stdint.h>

struct csys_uring {
    int fd;
    unsigned entries;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    struct io_uring_sqe *sqes;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_cqe *cqes;
    void *sq_ptr, *cq_ptr;
    size_t sq_len, cq_len, sqes_len;
};

csys_uring *csys_uring_create(unsigned entries) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    // One thread submits, and completions are taken right after each submission: no interrupting notifications
    // (COOP_TASKRUN, Linux 5.19; SINGLE_ISSUER, 6.0). Older kernels refuse the flags: set up without them.
#ifdef IORING_SETUP_SINGLE_ISSUER
    p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER;
#endif
    int fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (fd < 0 && errno == EINVAL) {
        memset(&p, 0, sizeof p);
        fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    }
    if (fd < 0) return NULL;
    csys_uring *r = calloc(1, sizeof *r);
    if (!r) { close(fd); return NULL; }
    r->fd = fd;
    r->entries = p.sq_entries < entries ? p.sq_entries : entries;
    r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) {
        if (r->cq_len > r->sq_len) r->sq_len = r->cq_len;
        r->cq_len = r->sq_len;
    }
    r->sq_ptr = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (r->sq_ptr == MAP_FAILED) { close(fd); free(r); return NULL; }
    if (single) {
        r->cq_ptr = r->sq_ptr;
    } else {
        r->cq_ptr = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
        if (r->cq_ptr == MAP_FAILED) { munmap(r->sq_ptr, r->sq_len); close(fd); free(r); return NULL; }
    }
    r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED) {
        if (!single) munmap(r->cq_ptr, r->cq_len);
        munmap(r->sq_ptr, r->sq_len);
        close(fd);
        free(r);
        return NULL;
    }
    char *sq = r->sq_ptr, *cq = r->cq_ptr;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return r;
}

void csys_uring_destroy(csys_uring *r) {
    if (!r) return;
    munmap(r->sqes, r->sqes_len);
    if (r->cq_ptr != r->sq_ptr) munmap(r->cq_ptr, r->cq_len);
    munmap(r->sq_ptr, r->sq_len);
    close(r->fd);
    free(r);
}

/// Reaps completions into `results` (indexed by user_data) until `want` arrived; waits in the kernel when needed.
static int uring_reap(csys_uring *r, unsigned want, int *results, int base) {
    unsigned got = 0;
    unsigned head = *r->cq_head;
    while (got < want) {
        unsigned tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
        while (head != tail && got < want) {
            struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
            results[base + (int)cqe->user_data] = cqe->res;
            head++;
            got++;
        }
        __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
        if (got < want) {
            int rc = (int)syscall(__NR_io_uring_enter, r->fd, 0, want - got, IORING_ENTER_GETEVENTS, NULL, 0);
            if (rc < 0 && errno != EINTR) return -errno;
        }
    }
    return 0;
}

int csys_uring_send_batch(csys_uring *r, int n, const int *fds, const void *const *bufs, const unsigned *lens, int *results) {
    int done = 0;
    while (done < n) {
        unsigned batch = (unsigned)(n - done) < r->entries ? (unsigned)(n - done) : r->entries;
        unsigned tail = *r->sq_tail;
        for (unsigned i = 0; i < batch; i++) {
            unsigned idx = tail & *r->sq_mask;
            struct io_uring_sqe *sqe = &r->sqes[idx];
            memset(sqe, 0, sizeof *sqe);
            sqe->opcode = IORING_OP_SEND;
            sqe->fd = fds[done + (int)i];
            sqe->addr = (unsigned long long)(uintptr_t)bufs[done + (int)i];
            sqe->len = lens[done + (int)i];
            sqe->msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
            sqe->user_data = i;
            r->sq_array[idx] = idx;
            results[done + (int)i] = -EIO;
            tail++;
        }
        __atomic_store_n(r->sq_tail, tail, __ATOMIC_RELEASE);
        unsigned submitted = 0;
        int retries = 0;
        while (submitted < batch) {
            int rc = (int)syscall(__NR_io_uring_enter, r->fd, batch - submitted, 0, 0, NULL, 0);
            if (rc < 0) {
                if ((errno == EINTR || errno == EAGAIN || errno == EBUSY) && ++retries < 1000) continue;
                int e = errno;
                for (int k = done; k < n; k++) results[k] = -EIO;
                return -e;
            }
            submitted += (unsigned)rc;
        }
        int rc = uring_reap(r, batch, results, done);
        if (rc < 0) {
            for (int k = done; k < n; k++) results[k] = -EIO;
            return rc;
        }
        done += (int)batch;
    }
    return 0;
}

// MARK: the calling thread's event loop

static __thread void *current_loop = NULL;
void csys_set_current_loop(void *loop) { current_loop = loop; }
void *csys_current_loop(void) { return current_loop; }

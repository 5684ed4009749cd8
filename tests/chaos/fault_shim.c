/* LD_PRELOAD fault injector of the chaos suite (tests/chaos/shim.py compiles and drives it).
 *
 * The harness shares a small control file with each broker (ODRADEK_CHAOS_CONTROL, mapped
 * read-only here) and changes its fields while the broker runs:
 *   - clock_offset_ns: added to every wall-clock reading (CLOCK_REALTIME, gettimeofday, time),
 *     a clock step as NTP makes it; the monotonic clocks are left alone;
 *   - io_faults: bit 0 fails write/pwrite/writev on files under `prefix` with EIO, bit 1 fails
 *     fsync/fdatasync there with EIO (a dying disk as the process sees it).
 * Without the variable, or with the fields at zero, every call goes straight through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct control {
    volatile int64_t clock_offset_ns;
    volatile int32_t io_faults;
    volatile int32_t prefix_len;
    char prefix[4080];
};

enum { FAIL_WRITE = 1, FAIL_FSYNC = 2 };

static const struct control quiet;
static const struct control *ctl = &quiet;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_gettimeofday)(struct timeval *restrict, void *restrict);
static time_t (*real_time)(time_t *);

#define RESOLVE(name) real_##name = dlsym(RTLD_NEXT, #name)

__attribute__((constructor)) static void shim_init(void) {
    RESOLVE(write);
    RESOLVE(pwrite);
    RESOLVE(pwrite64);
    RESOLVE(writev);
    RESOLVE(pwritev);
    RESOLVE(fsync);
    RESOLVE(fdatasync);
    RESOLVE(clock_gettime);
    RESOLVE(gettimeofday);
    RESOLVE(time);
    const char *path = getenv("ODRADEK_CHAOS_CONTROL");
    if (path == NULL) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void *map = mmap(NULL, sizeof(struct control), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map != MAP_FAILED) ctl = map;
}

/* Is `fd` a file under the control's prefix? Only asked while a fault is armed. */
static int targeted(int fd) {
    int len = ctl->prefix_len;
    if (len <= 0 || len >= (int)sizeof(ctl->prefix)) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < len) return 0;
    return memcmp(target, ctl->prefix, (size_t)len) == 0;
}

static int fails(int fd, int what) {
    if (!(ctl->io_faults & what) || !targeted(fd)) return 0;
    errno = EIO;
    return 1;
}

ssize_t write(int fd, const void *buf, size_t count) {
    if (fails(fd, FAIL_WRITE)) return -1;
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    if (fails(fd, FAIL_WRITE)) return -1;
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    if (fails(fd, FAIL_WRITE)) return -1;
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    if (fails(fd, FAIL_WRITE)) return -1;
    return real_writev(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    if (fails(fd, FAIL_WRITE)) return -1;
    return real_pwritev(fd, iov, iovcnt, offset);
}

int fsync(int fd) {
    if (fails(fd, FAIL_FSYNC)) return -1;
    return real_fsync(fd);
}

int fdatasync(int fd) {
    if (fails(fd, FAIL_FSYNC)) return -1;
    return real_fdatasync(fd);
}

static void shift(struct timespec *ts) {
    int64_t ns = ts->tv_nsec + ctl->clock_offset_ns % 1000000000;
    ts->tv_sec += ctl->clock_offset_ns / 1000000000 + ns / 1000000000;
    ns %= 1000000000;
    if (ns < 0) {
        ns += 1000000000;
        ts->tv_sec -= 1;
    }
    ts->tv_nsec = ns;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int rc = real_clock_gettime(clock, ts);
    if (rc == 0 && ctl->clock_offset_ns != 0 &&
        (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE || clock == CLOCK_TAI))
        shift(ts);
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    int rc = real_gettimeofday(tv, tz);
    if (rc == 0 && ctl->clock_offset_ns != 0) {
        struct timespec ts = {tv->tv_sec, tv->tv_usec * 1000};
        shift(&ts);
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}

/*
 * A clock for the redis-cell differential test (tests/throttle.rs), preloaded into
 * the server with LD_PRELOAD: the wall clock (CLOCK_REALTIME, gettimeofday, time)
 * reads the unix time in nanoseconds written in the file named by RL_FAKE_CLOCK, so
 * the test steps the one clock that redis-cell, redis-rl and the server's expiry
 * all read. With RL_FAKE_MONOTONIC set, the monotonic clock reads the same instant
 * too: Valkey 9 derives its time from the monotonic clock between wall clock reads,
 * so only then does it stand still (timers then fire only when the test steps the
 * clock, which the tests that set it do not need otherwise).
 *
 * Only raw system calls are used: no allocation and no lookup of the real function
 * (libfaketime's dlsym recursion is why libfaketime cannot start Debian's
 * jemalloc-linked redis-server).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int fake_ns(long long *out) {
    const char *path = getenv("RL_FAKE_CLOCK");
    if (path == NULL) return 0;
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    if (fd < 0) return 0;
    char buf[32];
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n <= 0) return 0;
    long long v = 0;
    for (long i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) v = v * 10 + (buf[i] - '0');
    if (v <= 0) return 0;
    *out = v;
    return 1;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    long long ns;
    int wall = id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
    int mono = id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_MONOTONIC_RAW ||
               id == CLOCK_BOOTTIME;
    if ((wall || (mono && getenv("RL_FAKE_MONOTONIC") != NULL)) && ts != NULL && fake_ns(&ns)) {
        ts->tv_sec = (time_t)(ns / 1000000000LL);
        ts->tv_nsec = (long)(ns % 1000000000LL);
        return 0;
    }
    return (int)syscall(SYS_clock_gettime, id, ts);
}

int gettimeofday(struct timeval *tv, void *tz) {
    long long ns;
    if (tv != NULL && fake_ns(&ns)) {
        tv->tv_sec = (time_t)(ns / 1000000000LL);
        tv->tv_usec = (suseconds_t)(ns % 1000000000LL / 1000);
        return 0;
    }
    return (int)syscall(SYS_gettimeofday, tv, tz);
}

time_t time(time_t *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t != NULL) *t = ts.tv_sec;
    return ts.tv_sec;
}

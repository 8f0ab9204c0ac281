// libdlock_skew.so: the fault suite's wall-clock skew shim (reliability.md Appendix A; libfaketime
// kills redis-server 7.0 here, V5). LD_PRELOAD it into a process with DLOCK_SKEW_FILE naming a
// file that holds "<offset_ms> <rate>"; CLOCK_REALTIME (and its coarse twin), gettimeofday()
// and time() then read  base + (real - base) * rate + offset,  base being the first clock read
// of the process. CLOCK_MONOTONIC is never touched: it is the clock of every history. The file
// is re-read at most every millisecond of real time, so the test can step the clock while the
// process runs (a rate change applies from the process's first read: set it before start).
// The real clock is read with the raw syscall, which avoids libfaketime's recursion.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

namespace {

std::int64_t raw_ns(clockid_t id) {
    timespec ts{};
    ::syscall(SYS_clock_gettime, id, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Racy by design (a test tool): torn reads of these only delay a file change by one call.
std::int64_t base_ns = -1;
std::int64_t offset_ms = 0;
double rate = 1.0;
std::int64_t next_read_ns = 0;

void refresh(std::int64_t now) {
    if (now < next_read_ns) return;
    next_read_ns = now + 1'000'000;
    const char* path = std::getenv("DLOCK_SKEW_FILE");
    if (!path) return;
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[64] = {};
    auto n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return;
    long long off = 0;
    double r = 1.0;
    if (std::sscanf(buf, "%lld %lf", &off, &r) >= 1) {
        offset_ms = off;
        rate = r > 0 ? r : 1.0;
    }
}

std::int64_t skewed(std::int64_t now) {
    if (base_ns < 0) base_ns = now;
    refresh(now);
    auto scaled = static_cast<double>(now - base_ns) * rate;
    return base_ns + static_cast<std::int64_t>(scaled) + offset_ms * 1'000'000;
}

} // namespace

extern "C" {

int clock_gettime(clockid_t id, timespec* tp) noexcept {
    std::int64_t ns = raw_ns(id);
    if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) ns = skewed(ns);
    tp->tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    tp->tv_nsec = static_cast<long>(ns % 1'000'000'000);
    return 0;
}

int gettimeofday(timeval* tv, void* /*tz*/) noexcept {
    std::int64_t ns = skewed(raw_ns(CLOCK_REALTIME));
    tv->tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    tv->tv_usec = static_cast<suseconds_t>((ns % 1'000'000'000) / 1000);
    return 0;
}

// glibc names the parameter __timer (a reserved name we may not use).
time_t time(time_t* t) noexcept { // NOLINT(readability-inconsistent-declaration-parameter-name)
    auto s = static_cast<time_t>(skewed(raw_ns(CLOCK_REALTIME)) / 1'000'000'000);
    if (t) *t = s;
    return s;
}

} // extern "C"

#include "core/random.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <pthread.h>
#include <sys/random.h>
#include <system_error>

namespace dlock::detail {
namespace {

/// Bumped in every child process after fork(): buffers filled before it are discarded.
std::atomic<unsigned> fork_generation{0};

void on_fork_child() noexcept {
    fork_generation.fetch_add(1, std::memory_order_relaxed);
}

void fill_from_os(unsigned char* out, std::size_t n) {
    while (n > 0) {
        const ssize_t got = ::getrandom(out, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            throw std::system_error(errno, std::generic_category(), "dlock: getrandom");
        }
        out += got;
        n -= static_cast<std::size_t>(got);
    }
}

struct buffer {
    static constexpr std::size_t size = 4096;
    std::array<unsigned char, size> bytes{};
    std::size_t used = size; // empty
    unsigned generation = 0;

    void take(unsigned char* out, std::size_t n) {
        static const int registered = ::pthread_atfork(nullptr, nullptr, on_fork_child);
        (void)registered;
        const unsigned gen = fork_generation.load(std::memory_order_relaxed);
        if (gen != generation) {
            generation = gen;
            used = size;
        }
        while (n > 0) {
            if (used == size) {
                fill_from_os(bytes.data(), size);
                used = 0;
            }
            const std::size_t k = std::min(n, size - used);
            std::memcpy(out, bytes.data() + used, k);
            // Bytes handed out are wiped, so a later memory disclosure cannot replay them.
            std::memset(bytes.data() + used, 0, k);
            used += k;
            out += k;
            n -= k;
        }
    }
};

std::string hex(const unsigned char* p, std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(2 * n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        s[2 * i] = digits[p[i] >> 4];
        s[2 * i + 1] = digits[p[i] & 15];
    }
    return s;
}

} // namespace

void random_bytes(unsigned char* out, std::size_t n) {
    thread_local buffer buf;
    buf.take(out, n);
}

std::string random_token() {
    unsigned char b[16];
    random_bytes(b, sizeof b);
    return hex(b, sizeof b);
}

std::string random_uuid() {
    unsigned char b[16];
    random_bytes(b, sizeof b);
    b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
    b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
    const std::string h = hex(b, sizeof b);
    return h.substr(0, 8) + '-' + h.substr(8, 4) + '-' + h.substr(12, 4) + '-' + h.substr(16, 4) +
           '-' + h.substr(20);
}

} // namespace dlock::detail

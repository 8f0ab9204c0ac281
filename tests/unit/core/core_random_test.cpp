// Tokens: format, uniqueness, and no reuse of buffered random bytes across fork().
#include "core/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace dlock::detail {
namespace {

bool is_lower_hex(const std::string& s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

TEST(random, a_token_is_32_lowercase_hex_characters) {
    const auto t = random_token();
    EXPECT_EQ(t.size(), 32u);
    EXPECT_TRUE(is_lower_hex(t)) << t;
}

TEST(random, a_uuid_has_the_version_4_layout) {
    const auto u = random_uuid();
    ASSERT_EQ(u.size(), 36u);
    EXPECT_EQ(u[8], '-');
    EXPECT_EQ(u[13], '-');
    EXPECT_EQ(u[14], '4');
    EXPECT_EQ(u[18], '-');
    EXPECT_NE(std::string("89ab").find(u[19]), std::string::npos) << u;
    EXPECT_EQ(u[23], '-');
}

TEST(random, tokens_do_not_repeat_across_buffer_refills_and_threads) {
    // 4 threads x 2,000 tokens: each thread refills its 4 KiB buffer several times.
    std::vector<std::vector<std::string>> per(4);
    std::vector<std::thread> ts;
    for (auto& v : per)
        ts.emplace_back([&v] {
            for (int i = 0; i < 2000; ++i)
                v.push_back(random_token());
        });
    for (auto& t : ts)
        t.join();
    std::set<std::string> all;
    for (auto& v : per)
        all.insert(v.begin(), v.end());
    EXPECT_EQ(all.size(), 8000u);
}

TEST(random, a_million_tokens_from_the_generator_have_no_duplicate) {
    // reliability.md S6 at the generator: 10^6 tokens from random_token() (the simple and
    // Redlock lock tokens), kept as their 128 bits, sorted, checked for a repeat. Not 10^6
    // acquisitions against a server.
    constexpr std::size_t n = 1'000'000;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;
    seen.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const auto t = random_token();
        ASSERT_EQ(t.size(), 32u);
        seen.emplace_back(std::stoull(t.substr(0, 16), nullptr, 16),
                          std::stoull(t.substr(16), nullptr, 16));
    }
    std::sort(seen.begin(), seen.end());
    const auto dup = std::adjacent_find(seen.begin(), seen.end());
    EXPECT_EQ(dup, seen.end()) << "a token repeated among " << n;
    // The 128 bits are all used: no half of a token is constant.
    EXPECT_NE(seen.front().first, seen.back().first);
    const auto [lo, hi] = std::minmax_element(
        seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    EXPECT_NE(lo->second, hi->second);
}

TEST(random, a_forked_child_never_repeats_the_parents_next_tokens) {
    (void)random_token(); // the parent's buffer now holds unused bytes
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(fds[0]);
        std::string out;
        for (int i = 0; i < 8; ++i)
            out += random_token();
        const bool ok = ::write(fds[1], out.data(), out.size()) == static_cast<ssize_t>(out.size());
        ::_exit(ok ? 0 : 1);
    }
    ::close(fds[1]);
    std::string child(8 * 32, '\0');
    std::size_t got = 0;
    while (got < child.size()) {
        const ssize_t n = ::read(fds[0], child.data() + got, child.size() - got);
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_EQ(got, child.size());
    std::set<std::string> parent;
    for (int i = 0; i < 8; ++i)
        parent.insert(random_token());
    for (std::size_t i = 0; i < 8; ++i)
        EXPECT_EQ(parent.count(child.substr(32 * i, 32)), 0u) << "token reused across fork()";
}

} // namespace
} // namespace dlock::detail

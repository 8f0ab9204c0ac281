// Wire compatibility with Redisson: its own RLock scripts (text from Redisson 4.7,
// RedissonLock.java tryLockInnerAsync / unlockInnerAsync) run through a plain connection play
// the Java client.
#include "redis/resp3/parser.hpp"
#include "redisson_scripts.hpp"
#include "test_util.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;

namespace {

using dlock::test::java_owner;
using dlock::test::redisson_try_lock;
using dlock::test::redisson_unlock;

dlock::resp3::value java_lock(dlock::client& plain, std::string_view name) {
    return dlock::redis::command(plain,
                                 {"EVAL", redisson_try_lock, "1", name, "30000", java_owner});
}

/// One Redisson unlock request. Each request id gets its own latch key (a retry of the same
/// request would reuse it and get the latched answer).
dlock::resp3::value java_unlock(dlock::client& plain, const std::string& name) {
    static int request = 0;
    const std::string channel = "redisson_lock__channel:{" + name + "}";
    const std::string latch = "redisson_unlock_latch:{" + name + "}:" + std::to_string(++request);
    return dlock::redis::command(plain, {"EVAL", redisson_unlock, "3", name, channel, latch, "0",
                                         "30000", java_owner, "PUBLISH", "20000"});
}

/// A RESP2 subscriber on a plain socket, like a Java client's pub/sub connection.
class raw_subscriber {
public:
    raw_subscriber(std::uint16_t port, const std::string& channel) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error("connect failed");
        std::string cmd;
        dlock::resp3::encode_command(cmd, {"SUBSCRIBE", channel});
        (void)!::send(fd_, cmd.data(), cmd.size(), MSG_NOSIGNAL);
        const auto confirm = next(2s); // ["subscribe", channel, 1]
        if (!confirm || confirm->elements.empty() || confirm->elements[0].str != "subscribe")
            throw std::runtime_error("no subscribe confirmation");
    }
    ~raw_subscriber() { ::close(fd_); }

    std::optional<std::string> next_message(std::chrono::milliseconds budget) {
        auto v = next(budget);
        if (!v || v->elements.size() != 3 || v->elements[0].str != "message") return {};
        return v->elements[2].str;
    }

private:
    std::optional<dlock::resp3::value> next(std::chrono::milliseconds budget) {
        const auto until = std::chrono::steady_clock::now() + budget;
        for (;;) {
            std::size_t used = 0;
            std::error_code ec;
            auto v = parser_.consume(buf_, used, ec);
            buf_.erase(0, used);
            if (ec) return {};
            if (v) return v;
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now());
            if (left.count() <= 0) return {};
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
            char chunk[1024];
            const auto n = ::recv(fd_, chunk, sizeof chunk, 0);
            if (n <= 0) return {};
            buf_.append(chunk, static_cast<std::size_t>(n));
        }
    }
    int fd_ = -1;
    std::string buf_;
    dlock::resp3::parser parser_;
};

} // namespace

TEST(interop, a_redisson_holder_excludes_dlock_and_its_unlock_wakes_a_dlock_waiter) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client plain(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    ASSERT_TRUE(java_lock(plain, "shared").is_null()); // nil = acquired, Redisson convention
    dlock::mutex m = c.make_mutex("shared");
    EXPECT_FALSE(m.try_lock());

    dlock::test::blocked_waiter waiter(c, "shared");
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::one_subscriber(s, "redisson_lock__channel:{shared}"); }, 2s));
    const auto released = std::chrono::steady_clock::now();
    EXPECT_EQ(java_unlock(plain, "shared").integer, 1);
    waiter.join();
    EXPECT_TRUE(waiter.acquired.load());
    // Woken by Redisson's unlock message, not by the 30 s TTL.
    EXPECT_LT(waiter.acquired_at - released, 500ms);
}

TEST(interop, a_dlock_holder_excludes_redisson_and_writes_redissons_layout) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client plain(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("shared2");
    m.lock(dlock::fixed_lease{30s});
    const auto pttl = java_lock(plain, "shared2");
    ASSERT_TRUE(pttl.is_integer()); // Redisson sees the remaining lease, i.e. "not acquired"
    EXPECT_GT(pttl.integer, 25000);

    const auto fields = dlock::redis::command(plain, {"HGETALL", "shared2"});
    ASSERT_EQ(fields.kind, dlock::resp3::type::map);
    ASSERT_EQ(fields.elements.size(), 2u);
    const std::string owner = fields.elements[0].str;
    EXPECT_EQ(owner.rfind(c.id() + ":", 0), 0u);
    EXPECT_EQ(c.id().size(), 36u);
    EXPECT_EQ(fields.elements[1].str, "1");
    EXPECT_EQ(s.cli({"GET", "redisson_lock_token:{shared2}"}), "1");

    // dlock's unlock publishes Redisson's message ("0") on Redisson's channel.
    raw_subscriber sub(s.port(), "redisson_lock__channel:{shared2}");
    m.unlock();
    const auto msg = sub.next_message(2s);
    ASSERT_TRUE(msg.has_value());
    EXPECT_EQ(*msg, "0");
    EXPECT_TRUE(java_lock(plain, "shared2").is_null()); // free for the Java client now
    EXPECT_EQ(java_unlock(plain, "shared2").integer, 1);
}

TEST(interop, reentrant_counts_are_shared_with_redissons_unlock_semantics) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client plain(fast_options(s.url()));
    ASSERT_TRUE(java_lock(plain, "count").is_null());
    ASSERT_TRUE(java_lock(plain, "count").is_null()); // re-entry by the Java owner
    EXPECT_EQ(s.cli({"HGET", "count", std::string(java_owner)}), "2");
    EXPECT_EQ(java_unlock(plain, "count").integer, 0);
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("count");
    EXPECT_FALSE(m.try_lock());
    EXPECT_EQ(java_unlock(plain, "count").integer, 1);
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

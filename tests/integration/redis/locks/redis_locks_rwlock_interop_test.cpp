// The read-write lock against Redisson's own scripts (redisson.md §3.1-3.4, verbatim), run with
// EVAL as "another client": both exclude and wake each other on one name, and each reads the
// other's hash (modes, owner fields, timeout keys, TTL).
#include "lock_test_util.hpp"

#include <dlock/redis.hpp>
#include <dlock/rw_mutex.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>
#include <thread>
#include <unistd.h>

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using clock_type = std::chrono::steady_clock;

namespace {

// RedissonReadLock.tryLockInnerAsync. KEYS = [N, {N}:<id>:<tid>:rwlock_timeout];
// ARGV = [lease, <id>:<tid>, <id>:<tid>:write].
constexpr const char* redisson_read_acquire = R"(
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
redis.call('hset', KEYS[1], 'mode', 'read');
redis.call('hset', KEYS[1], ARGV[2], 1);
redis.call('set', KEYS[2] .. ':1', 1);
redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
redis.call('pexpire', KEYS[1], ARGV[1]);
return nil;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1);
local key = KEYS[2] .. ':' .. ind;
redis.call('set', key, 1);
redis.call('pexpire', key, ARGV[1]);
local remainTime = redis.call('pttl', KEYS[1]);
redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1]));
return nil;
end;
return redis.call('pttl', KEYS[1]);
)";

// RedissonReadLock.unlockInnerAsync. KEYS = [N, channel, timeoutPrefix, keyPrefix, latch];
// ARGV = [0, <id>:<tid>, publishCmd, latchTTL].
constexpr const char* redisson_read_release = R"(
local val = redis.call('get', KEYS[5]);
if val ~= false then
return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
redis.call(ARGV[3], KEYS[2], ARGV[1]);
redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
return nil;
end;
local lockExists = redis.call('hexists', KEYS[1], ARGV[2]);
if (lockExists == 0) then
return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
if (counter == 0) then
redis.call('hdel', KEYS[1], ARGV[2]);
end;
redis.call('del', KEYS[3] .. ':' .. (counter+1));
if (redis.call('hlen', KEYS[1]) > 1) then
local maxRemainTime = -3;
local keys = redis.call('hkeys', KEYS[1]);
for n, key in ipairs(keys) do
counter = tonumber(redis.call('hget', KEYS[1], key));
if type(counter) == 'number' then
for i=counter, 1, -1 do
local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i);
maxRemainTime = math.max(remainTime, maxRemainTime);
end;
end;
end;
if maxRemainTime > 0 then
redis.call('pexpire', KEYS[1], maxRemainTime);
redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
return 0;
end;
if mode == 'write' then
redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
return 0;
end;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[3], KEYS[2], ARGV[1]);
redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
return 1;
)";

// RedissonWriteLock.tryLockInnerAsync. KEYS = [N]; ARGV = [lease, <id>:<tid>:write].
constexpr const char* redisson_write_acquire = R"(
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
redis.call('hset', KEYS[1], 'mode', 'write');
redis.call('hset', KEYS[1], ARGV[2], 1);
redis.call('pexpire', KEYS[1], ARGV[1]);
return nil;
end;
if (mode == 'write') then
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
redis.call('hincrby', KEYS[1], ARGV[2], 1);
local currentExpire = redis.call('pttl', KEYS[1]);
redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]);
return nil;
end;
end;
return redis.call('pttl', KEYS[1]);
)";

// RedissonWriteLock.unlockInnerAsync. KEYS = [N, channel, latch];
// ARGV = [1, internalLockLeaseTime, <id>:<tid>:write, publishCmd, latchTTL].
constexpr const char* redisson_write_release = R"(
local val = redis.call('get', KEYS[3]);
if val ~= false then
return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
redis.call(ARGV[4], KEYS[2], ARGV[1]);
redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
return nil;
end;
if (mode == 'write') then
local lockExists = redis.call('hexists', KEYS[1], ARGV[3]);
if (lockExists == 0) then
return nil;
else
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
redis.call('pexpire', KEYS[1], ARGV[2]);
redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
return 0;
else
redis.call('hdel', KEYS[1], ARGV[3]);
if (redis.call('hlen', KEYS[1]) == 1) then
redis.call('del', KEYS[1]);
redis.call(ARGV[4], KEYS[2], ARGV[1]);
else
-- has unlocked read-locks
redis.call('hset', KEYS[1], 'mode', 'read');
end;
redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
return 1;
end;
end;
end;
return nil;
)";

/// A Java Redisson client, as far as the server can tell: its scripts, its owner id.
class redisson_client {
public:
    redisson_client(const redis_server& s, std::string name)
        : c_(fast_options(s.url()))
        , name_(std::move(name)) {}

    static constexpr const char* owner = "0a1b2c3d-0000-4000-8000-00000000beef:1";

    /// nil: acquired; an integer: refused with that PTTL.
    dlock::resp3::value read_lock(std::int64_t lease_ms) {
        const std::string timeout = "{" + name_ + "}:" + owner + ":rwlock_timeout";
        const auto lease = std::to_string(lease_ms);
        const std::string write_field = std::string(owner) + ":write";
        return dlock::redis::command(
            c_, {"EVAL", redisson_read_acquire, "2", name_, timeout, lease, owner, write_field});
    }
    dlock::resp3::value read_unlock() {
        const std::string timeout = "{" + name_ + "}:" + owner + ":rwlock_timeout";
        const std::string prefix = "{" + name_ + "}";
        const std::string latch = "redisson_unlock_latch:{" + name_ + "}:" + next_request();
        return dlock::redis::command(c_, {"EVAL", redisson_read_release, "5", name_, channel(),
                                          timeout, prefix, latch, "0", owner, "publish", "30000"});
    }
    dlock::resp3::value write_lock(std::int64_t lease_ms) {
        const auto lease = std::to_string(lease_ms);
        const std::string write_field = std::string(owner) + ":write";
        return dlock::redis::command(
            c_, {"EVAL", redisson_write_acquire, "1", name_, lease, write_field});
    }
    dlock::resp3::value write_unlock() {
        const std::string write_field = std::string(owner) + ":write";
        const std::string latch = "redisson_unlock_latch:{" + name_ + "}:" + next_request();
        return dlock::redis::command(c_, {"EVAL", redisson_write_release, "3", name_, channel(),
                                          latch, "1", "30000", write_field, "publish", "30000"});
    }
    std::string channel() const { return "redisson_rwlock:{" + name_ + "}"; }

private:
    std::string next_request() { return std::to_string(++requests_); }
    dlock::client c_;
    std::string name_;
    int requests_ = 0;
};

/// A bare RESP2 subscriber on one channel (what a Redisson client's pub/sub connection sees).
class raw_subscriber {
public:
    raw_subscriber(std::uint16_t port, const std::string& channel) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        timeval tv{5, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
        const std::string cmd = "*2\r\n$9\r\nSUBSCRIBE\r\n$" + std::to_string(channel.size()) +
                                "\r\n" + channel + "\r\n";
        if (::write(fd_, cmd.data(), cmd.size()) != static_cast<ssize_t>(cmd.size())) return;
        subscribed_ = read_until(":1\r\n"); // the confirmation ends with the count 1
        buf_.clear();
    }
    ~raw_subscriber() { ::close(fd_); }
    raw_subscriber(const raw_subscriber&) = delete;
    raw_subscriber& operator=(const raw_subscriber&) = delete;

    bool subscribed() const { return subscribed_; }
    /// The payload of the next message (empty after 5 s without one).
    std::string next_payload() {
        // *3 $7 message $<n> <channel> $<m> <payload>: the payload is the last bulk string.
        for (;;) {
            const auto at = buf_.find("message\r\n");
            if (at != std::string::npos) {
                auto p = at + 9;
                std::string last;
                for (int i = 0; i < 2; ++i) {
                    const auto crlf = buf_.find("\r\n", p);
                    if (crlf == std::string::npos || buf_[p] != '$') break;
                    const auto n = std::stoul(buf_.substr(p + 1, crlf - p - 1));
                    if (buf_.size() < crlf + 2 + n + 2) break;
                    last = buf_.substr(crlf + 2, n);
                    p = crlf + 2 + n + 2;
                    if (i == 1) {
                        buf_.erase(0, p);
                        return last;
                    }
                }
            }
            if (!read_some()) return {};
        }
    }

private:
    bool read_some() {
        char b[512];
        const auto n = ::read(fd_, b, sizeof b);
        if (n <= 0) return false;
        buf_.append(b, static_cast<std::size_t>(n));
        return true;
    }
    bool read_until(const std::string& tail) {
        while (buf_.find(tail) == std::string::npos)
            if (!read_some()) return false;
        return true;
    }
    int fd_ = -1;
    bool subscribed_ = false;
    std::string buf_;
};

} // namespace

TEST(rwlock_interop, a_redisson_reader_shares_with_our_readers_and_excludes_our_writer) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    redisson_client java(s, "shared-doc");
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("shared-doc");
    ASSERT_TRUE(java.read_lock(30000).is_null()); // Redisson: acquired
    EXPECT_FALSE(m.try_lock());
    EXPECT_TRUE(m.try_lock_shared()); // joins the Redisson reader
    EXPECT_EQ(std::stoll(s.cli({"HLEN", "shared-doc"})), 3);
    EXPECT_EQ(java.read_unlock().integer, 0); // Redisson: still read-locked by us
    EXPECT_EQ(s.cli({"HGET", "shared-doc", "mode"}), "read");
    m.unlock_shared();
    EXPECT_EQ(s.cli({"EXISTS", "shared-doc"}), "0");
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

TEST(rwlock_interop, redissons_read_unlock_reads_our_timeout_keys_for_the_hash_ttl) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    redisson_client java(s, "ttl-doc");
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("ttl-doc");
    m.lock_shared(dlock::fixed_lease{20s});
    ASSERT_TRUE(java.read_lock(1000).is_null());
    EXPECT_EQ(java.read_unlock().integer, 0);
    // Redisson recomputed N's TTL from every reader's timeout key: ours, 20 s.
    EXPECT_GT(std::stoll(s.cli({"PTTL", "ttl-doc"})), 15000);
    // And ours reads Redisson's: a Redisson reader with 1 s keeps N alive after we leave.
    ASSERT_TRUE(java.read_lock(1000).is_null());
    m.unlock_shared();
    EXPECT_EQ(s.cli({"HGET", "ttl-doc", "mode"}), "read");
    EXPECT_LE(std::stoll(s.cli({"PTTL", "ttl-doc"})), 1000);
    EXPECT_EQ(java.read_unlock().integer, 1);
}

TEST(rwlock_interop, our_writer_excludes_redisson_and_its_unlock_wakes_redisson_waiters) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    redisson_client java(s, "w-doc");
    raw_subscriber sub(s.port(), java.channel());
    ASSERT_TRUE(sub.subscribed());
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("w-doc");
    m.lock();
    m.lock_shared(); // read under write: Redisson still sees a write mode
    auto r = java.read_lock(30000);
    EXPECT_TRUE(r.is_integer() && r.integer > 0); // refused with our PTTL
    r = java.write_lock(30000);
    EXPECT_TRUE(r.is_integer() && r.integer > 0);
    m.unlock_shared();
    m.unlock();
    EXPECT_EQ(sub.next_payload(), "1"); // READ_UNLOCK_MESSAGE: every Redisson waiter wakes
    EXPECT_TRUE(java.write_lock(30000).is_null());
    EXPECT_EQ(java.write_unlock().integer, 1);
    EXPECT_EQ(sub.next_payload(), "1");
    // Our read unlock publishes Redisson's "0".
    m.lock_shared();
    m.unlock_shared();
    EXPECT_EQ(sub.next_payload(), "0");
}

TEST(rwlock_interop, a_redisson_write_unlock_wakes_our_waiting_readers_and_writers) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    redisson_client java(s, "j-doc");
    dlock::client c(fast_options(s.url()));
    ASSERT_TRUE(java.write_lock(30000).is_null()); // its expiry would take 30 s
    std::atomic<int> readers_in{0};
    std::atomic<bool> writer_in{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
        threads.emplace_back([&] {
            dlock::rw_mutex m = c.make_rw_mutex("j-doc");
            if (!m.try_lock_shared_for(10000ms)) return;
            readers_in.fetch_add(1);
            m.unlock_shared();
        });
    threads.emplace_back([&] {
        dlock::rw_mutex m = c.make_rw_mutex("j-doc");
        if (!m.try_lock_for(10000ms)) return;
        writer_in = true;
        m.unlock();
    });
    ASSERT_TRUE(
        eventually([&] { return dlock::test::sleeping_waiters(c, java.channel()) == 4; }, 10s));
    const auto t0 = clock_type::now();
    EXPECT_EQ(java.write_unlock().integer, 1); // publishes "1"
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(readers_in.load(), 3);
    EXPECT_TRUE(writer_in.load());
    EXPECT_LT(clock_type::now() - t0, 5s);
}

TEST(rwlock_interop,
     our_reader_wakes_a_redisson_style_writer_and_a_redisson_reader_ignores_the_marker) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    redisson_client java(s, "mixed-doc");
    dlock::client c(fast_options(s.url())), wc(fast_options(s.url()));
    dlock::rw_mutex reader = c.make_rw_mutex("mixed-doc");
    reader.lock_shared();
    // Our writer waits and announces itself: our new readers hold back, Redisson's do not.
    std::atomic<bool> writer_in{false};
    std::thread writer([&] {
        dlock::rw_mutex w = wc.make_rw_mutex("mixed-doc");
        if (!w.try_lock_for(10000ms)) return;
        writer_in = true;
        w.unlock();
    });
    ASSERT_TRUE(eventually(
        [&] {
            return s.cli({"EXISTS", "dlock_rwlock_writer:{mixed-doc}"}) == "1";
        },
        10s));
    std::thread([&] {
        dlock::rw_mutex other = c.make_rw_mutex("mixed-doc");
        EXPECT_FALSE(other.try_lock_shared()); // a new dlock reader waits behind the writer
    }).join();
    EXPECT_TRUE(reader.try_lock_shared()); // a re-entry does not
    reader.unlock_shared();
    ASSERT_TRUE(java.read_lock(30000).is_null()); // a Redisson reader joins anyway
    reader.unlock_shared();
    EXPECT_FALSE(writer_in.load());
    EXPECT_EQ(java.read_unlock().integer, 1); // the last reader: publishes, the writer wakes
    writer.join();
    EXPECT_TRUE(writer_in.load());
}

TEST(rwlock_interop, our_last_read_unlock_wakes_every_waiter_while_a_dlock_writer_waits) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    raw_subscriber sub(s.port(), "redisson_rwlock:{marked}");
    ASSERT_TRUE(sub.subscribed());
    dlock::client c(fast_options(s.url())), wc(fast_options(s.url()));
    dlock::rw_mutex reader = c.make_rw_mutex("marked");
    reader.lock_shared();
    std::atomic<bool> writer_in{false};
    std::thread writer([&] {
        dlock::rw_mutex w = wc.make_rw_mutex("marked");
        if (!w.try_lock_for(10000ms)) return;
        writer_in = true;
        w.unlock();
    });
    ASSERT_TRUE(eventually(
        [&] {
            return s.cli({"EXISTS", "dlock_rwlock_writer:{marked}"}) == "1";
        },
        10s));
    reader.unlock_shared();
    // "1", not Redisson's "0": a reader of the writer's client held back by the marker must
    // not take the only wake-up of that client.
    EXPECT_EQ(sub.next_payload(), "1");
    writer.join();
    EXPECT_TRUE(writer_in.load());
    EXPECT_EQ(sub.next_payload(), "1");                                // the write unlock
    EXPECT_EQ(s.cli({"EXISTS", "dlock_rwlock_writer:{marked}"}), "0"); // deleted by its owner
}

// Security cases of reliability.md §7.5 against a real redis-server: S5 (every script the
// server receives is one of the library's constant scripts, for random and hostile lock names,
// recorded with MONITOR) and S4 (every lock kind works as a restricted ACL user and leaves the
// ACL LOG empty).
#include "log_collector.hpp"
#include "redis/locks/lock_test_util.hpp"
#include "redis/locks/names.hpp"
#include "redis/locks/protocol.hpp"
#include "redis/scripts.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <future>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;
using dlock::lock_kind;
using dlock::test::eventually;
using dlock::test::redis_cluster;
using dlock::test::redis_server;
using dlock::test::server_options;
using dlock::test::watchdog_options;

namespace {

/// The restricted lock user (S4): the commands a lock client sends (the handshake, the
/// constant scripts, the simple kind's SET/GET, a waiter's PTTL/EXISTS, pub/sub, the health
/// PING) and those its scripts run. README "Least-privilege ACL" lists the same.
const char* const locker_acl =
    "user locker on >pw ~* &* resetchannels &* -@all +hello +auth +ping +select +eval +evalsha "
    "+script|load +set +get +del +exists +pttl +pexpire +incr +time +hset +hget +hdel +hexists "
    "+hincrby +hlen +rpush +lpop +lindex +zadd +zrem +zscore +publish +spublish +subscribe "
    "+unsubscribe +ssubscribe +sunsubscribe +pubsub|numsub +pubsub|shardnumsub";

/// One command MONITOR reported: who ran it ("lua" for a script's redis.call) and its words.
struct monitored {
    std::string source;
    std::vector<std::string> argv;
};

/// Undoes the server's quoting of a MONITOR argument (sdscatrepr: \" \\ \n \r \t \a \b \xHH).
std::vector<std::string> parse_monitor_args(const std::string& line, std::size_t at) {
    std::vector<std::string> out;
    while ((at = line.find('"', at)) != std::string::npos) {
        std::string arg;
        for (++at; at < line.size() && line[at] != '"'; ++at) {
            if (line[at] != '\\' || at + 1 >= line.size()) {
                arg += line[at];
                continue;
            }
            const char e = line[++at];
            switch (e) {
            case 'n':
                arg += '\n';
                break;
            case 'r':
                arg += '\r';
                break;
            case 't':
                arg += '\t';
                break;
            case 'a':
                arg += '\a';
                break;
            case 'b':
                arg += '\b';
                break;
            case 'x':
                arg += static_cast<char>(std::stoi(line.substr(at + 1, 2), nullptr, 16));
                at += 2;
                break;
            default:
                arg += e; // \" and \\ (and anything else) stand for themselves
            }
        }
        out.push_back(std::move(arg));
        ++at;
    }
    return out;
}

/// A MONITOR connection to `s` that records every command until stop() (bounded: 20 s).
class monitor {
public:
    explicit monitor(const redis_server& s)
        : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(s.port());
        ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error("monitor: connect failed");
        const std::string cmd = "MONITOR\r\n";
        if (::write(fd_, cmd.data(), cmd.size()) != static_cast<ssize_t>(cmd.size()))
            throw std::runtime_error("monitor: write failed");
        std::string buf;
        read_until(buf, [&] { return buf.find("+OK\r\n") != std::string::npos; });
        rest_ = buf.substr(buf.find("+OK\r\n") + 5);
    }
    ~monitor() { ::close(fd_); }
    monitor(const monitor&) = delete;
    monitor& operator=(const monitor&) = delete;

    /// Sends ECHO <marker> from `s`, reads until MONITOR shows it, and returns what came before.
    std::vector<monitored> stop(const redis_server& s) {
        const std::string marker = "dlock-monitor-end-marker";
        s.cli({"ECHO", marker});
        std::string buf = rest_;
        read_until(buf, [&] { return buf.find(marker) != std::string::npos; });
        std::vector<monitored> out;
        std::size_t at = 0;
        for (std::size_t eol; (eol = buf.find("\r\n", at)) != std::string::npos; at = eol + 2) {
            const std::string line = buf.substr(at, eol - at);
            if (line.find(marker) != std::string::npos) break;
            // "+1700000000.123456 [0 127.0.0.1:5000] "EVAL" ..." or "[0 lua] ..."
            const auto close = line.find("] ");
            if (line.empty() || line[0] != '+' || close == std::string::npos) {
                ADD_FAILURE() << "unexpected MONITOR line: " << line;
                continue;
            }
            const auto open = line.find('[');
            const auto space = line.find(' ', open);
            out.push_back(
                {line.substr(space + 1, close - space - 1), parse_monitor_args(line, close + 2)});
        }
        return out;
    }

private:
    template <class Done>
    void read_until(std::string& buf, Done done) {
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (!done()) {
            if (std::chrono::steady_clock::now() >= until)
                throw std::runtime_error("monitor: no marker within 20 s");
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            char chunk[65536];
            const auto n = ::read(fd_, chunk, sizeof chunk);
            if (n <= 0) throw std::runtime_error("monitor: connection closed");
            buf.append(chunk, static_cast<std::size_t>(n));
        }
    }

    int fd_;
    std::string rest_;
};

/// Names that would break a script composed from them, or a key derivation that is not
/// binary safe, plus random ones.
std::vector<std::string> hostile_names() {
    std::vector<std::string> names = {
        "]] redis.call('flushall') --",
        "\"",
        "\n",
        "x\r\nFLUSHALL\r\n",
        "{x}",
        "'); redis.call('flushdb'); --",
        std::string(1000, 'n'),
        std::string("nul\0byte", 8),
    };
    std::mt19937 rng(11); // fixed seed: the same names every run
    for (int i = 0; i < 3; ++i) {
        std::string n;
        for (int j = 0; j < 24; ++j)
            n += static_cast<char>(1 + rng() % 255);
        std::erase_if(n, [](char ch) { return ch == '{' || ch == '}'; }); // B08 rejects "{}"
        names.push_back(n);
    }
    return names;
}

/// Waits until `c`'s watchdog has sent `n` more renewal batches (bounded).
void see_renewals(dlock::client& c, std::uint64_t n) {
    const auto base = c.metrics().renewal_batches;
    EXPECT_TRUE(eventually([&] { return c.metrics().renewal_batches >= base + n; }, 5s));
}

/// Every lock kind on `name` through `holder`: acquire, watchdog renewals, a waiter on
/// `waiter` woken by the release (pub/sub), force_unlock; then a multi-lock of every kind.
/// The unlock channel of the lock `name` of kind `k`, as the library derives it (a hostile
/// name's hash tags included).
std::string channel(lock_kind k, const std::string& name) {
    std::error_code ec;
    return dlock::detail::protocol_of(k).keys(name, ec).channel;
}

/// `subscribed()`: whether some client is subscribed to a channel of the server(s) now.
void exercise(dlock::client& holder, dlock::client& waiter, const std::string& name,
              const std::function<bool()>& subscribed) {
    for (const lock_kind k : {lock_kind::reentrant, lock_kind::simple, lock_kind::fair,
                              lock_kind::read, lock_kind::write}) {
        SCOPED_TRACE("kind " + std::to_string(static_cast<int>(k)));
        auto l = holder.acquire(name, {.wait = 2s, .kind = k});
        ASSERT_TRUE(l);
        see_renewals(holder, 2);
        // A waiter that sleeps until the release wakes it (write excludes read and write).
        const lock_kind wk = k == lock_kind::read ? lock_kind::write : k;
        auto woken = std::async(std::launch::async, [&] {
            return waiter.acquire(name, {.wait = 10s, .lease = 5s, .kind = wk});
        });
        EXPECT_TRUE(eventually([&] { return subscribed(); }, 5s));
        l.release();
        auto w = woken.get();
        EXPECT_TRUE(w);
        // force_unlock of the waiter's hold (an operator's tool).
        std::error_code ec;
        EXPECT_TRUE(holder.force_unlock(name, wk, ec)) << ec.message();
        EXPECT_FALSE(ec) << ec.message();
    }
    // A waiter of the holder's own client: the release hands the lock over in one script
    // (client_options::handover), which asks PUBSUB NUMSUB whether another client waits.
    for (const lock_kind k :
         {lock_kind::reentrant, lock_kind::simple, lock_kind::fair, lock_kind::write}) {
        SCOPED_TRACE("hand-over, kind " + std::to_string(static_cast<int>(k)));
        const auto local = name + "/h";
        auto l = holder.acquire(local, {.wait = 2s, .kind = k});
        ASSERT_TRUE(l);
        auto handed = std::async(std::launch::async, [&] {
            return holder.acquire(local, {.wait = 10s, .lease = 5s, .kind = k});
        });
        // Asleep, so the release hands over (the fair lock's waiter sleeps on a channel of its
        // own: subscribed is what can be seen of it here).
        EXPECT_TRUE(eventually(
            [&] {
                return k == lock_kind::fair
                           ? subscribed()
                           : dlock::test::sleeping_waiters(holder, channel(k, local)) == 1;
            },
            5s));
        std::error_code ec;
        l.release(ec);
        EXPECT_FALSE(ec) << ec.message() << ": " << holder.last_error_detail();
        auto h = handed.get();
        EXPECT_TRUE(h);
        h.release(ec);
        EXPECT_FALSE(ec) << ec.message();
    }
    std::vector<dlock::lock_ref> set;
    for (const lock_kind k :
         {lock_kind::reentrant, lock_kind::simple, lock_kind::fair, lock_kind::write})
        set.push_back({name + "/m" + std::to_string(static_cast<int>(k)), k});
    auto m = holder.acquire_all(set, {.wait = 2s});
    ASSERT_TRUE(m);
    see_renewals(holder, 2);
    m.release();
    // Leader election (redis/locks/election/): observe, campaign, proclaim, resign.
    const auto election = name + "/e";
    std::atomic<int> states{0};
    std::atomic<bool> vacant{false};
    auto obs = waiter.observe(election, [&](const std::optional<dlock::leader_info>& li) {
        vacant = !li;
        ++states;
    });
    ASSERT_TRUE(obs);
    auto leader = holder.campaign(election, "v", {.wait = 2s});
    ASSERT_TRUE(leader);
    ASSERT_TRUE(eventually([&] { return states == 2; }, 5s)) << "vacant, then v";
    leader.proclaim("w");
    EXPECT_EQ(waiter.leader(election)->value, "w");
    leader.resign();
    EXPECT_TRUE(eventually([&] { return states >= 3 && vacant; }, 5s)) << "vacant at the end";
}

void exercise(dlock::client& holder, dlock::client& waiter, const std::string& name,
              const redis_server& s) {
    exercise(holder, waiter, name, [&] { return !s.cli({"PUBSUB", "CHANNELS"}).empty(); });
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return s;
}

} // namespace

// S5: the server only ever receives the library's constant scripts, by text (EVAL) or by its
// SHA-1 (EVALSHA), and a lock name only ever travels as a key or an argument.
TEST(security, every_script_the_server_receives_is_a_constant_one_for_hostile_names) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    s.cli({"SET", "sentinel-key", "still-here"});
    std::set<std::string> texts, shas;
    for (int i = 0; i < static_cast<int>(dlock::detail::script_id::count_); ++i) {
        const auto& sc = dlock::detail::get_script(static_cast<dlock::detail::script_id>(i));
        texts.emplace(sc.text);
        shas.emplace(sc.sha);
    }
    const auto names = hostile_names();
    std::vector<monitored> seen;
    {
        monitor mon(s);
        dlock::client holder(watchdog_options(s.url()));
        dlock::client waiter(watchdog_options(s.url()));
        for (const auto& n : names) {
            SCOPED_TRACE("name of " + std::to_string(n.size()) + " bytes");
            exercise(holder, waiter, n, s);
        }
        s.cli({"SCRIPT", "FLUSH"}); // so the EVAL fallback is recorded too
        exercise(holder, waiter, names[0], s);
        seen = mon.stop(s);
    }
    std::set<std::string> commands, lua_commands;
    const std::set<std::string> one_key_commands = {"set", "exists", "pttl", "get", "del"};
    std::size_t evals = 0, evalshas = 0, flushes = 0;
    for (const auto& m : seen) {
        ASSERT_FALSE(m.argv.empty());
        const auto cmd = lower(m.argv[0]);
        EXPECT_NE(cmd, "flushall");
        EXPECT_NE(cmd, "flushdb");
        if (m.source == "lua") { // a constant script's own redis.call
            lua_commands.insert(cmd);
            continue;
        }
        commands.insert(cmd);
        if (cmd == "eval" || cmd == "evalsha") {
            ASSERT_GE(m.argv.size(), 3u);
            if (cmd == "eval") {
                ++evals;
                EXPECT_TRUE(texts.count(m.argv[1])) << "EVAL of a script that is not constant";
            } else {
                ++evalshas;
                EXPECT_TRUE(shas.count(m.argv[1])) << "EVALSHA " << m.argv[1];
            }
            continue;
        }
        if (cmd == "script" && m.argv.size() == 2 && lower(m.argv[1]) == "flush") {
            ++flushes; // the test's own, below
            continue;
        }
        if (cmd == "script") {
            ASSERT_GE(m.argv.size(), 3u);
            EXPECT_EQ(lower(m.argv[1]), "load");
            EXPECT_TRUE(texts.count(m.argv[2])) << "SCRIPT LOAD of a script that is not constant";
            continue;
        }
        // Outside scripts a lock name is only a key (the first argument of a one-key
        // command: the simple kind's SET NX PX, a waiter's PTTL) or part of a channel.
        const bool channels = cmd == "subscribe" || cmd == "unsubscribe" || cmd == "ssubscribe" ||
                              cmd == "sunsubscribe";
        for (std::size_t i = 1; i < m.argv.size(); ++i)
            for (const auto& n : names) {
                if (n.size() <= 2 || m.argv[i].find(n) == std::string::npos) continue;
                EXPECT_TRUE(channels || (i == 1 && one_key_commands.count(cmd)))
                    << cmd << " carries a lock name as argument " << i;
            }
    }
    EXPECT_EQ(flushes, 1u);
    EXPECT_GT(evalshas, 0u);
    EXPECT_GT(evals + commands.count("script"), 0u); // after SCRIPT FLUSH
    std::string all;
    for (const auto& c : commands)
        all += c + " ";
    std::cout << "commands the server received from the clients: " << all << "\n";
    all.clear();
    for (const auto& c : lua_commands)
        all += c + " ";
    std::cout << "commands the scripts ran: " << all << "\n";
    EXPECT_EQ(s.cli({"GET", "sentinel-key"}), "still-here");
}

// S4: a user with only the commands a lock client needs takes, renews, waits for, releases
// and force-unlocks every lock kind and a multi-lock, and nothing was denied.
TEST(security, every_lock_kind_works_as_the_least_privileged_user) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.acl_lines = {locker_acl}});
    const auto url = "redis://locker:pw@127.0.0.1:" + std::to_string(s.port());
    dlock::client holder(watchdog_options(url));
    dlock::client waiter(watchdog_options(url));
    for (const auto& n : {std::string("orders:42"), std::string("]] redis.call('flushall') --")})
        exercise(holder, waiter, n, s);
    s.cli({"SCRIPT", "FLUSH"});
    exercise(holder, waiter, "after-flush", s);
    EXPECT_EQ(s.cli({"ACL", "LOG"}), "");
}

// The optional +config|get: with a log sink the client asks CONFIG GET maxmemory-policy once.
// Without it the restricted user still locks, the check is one info line and ACL LOG's only
// entry; with it the policy is read (allkeys-lru: a warning) and ACL LOG stays empty.
TEST(security, the_eviction_policy_check_is_optional_for_the_least_privileged_user) {
    DLOCK_SKIP_WITHOUT_REDIS();
    for (const bool config : {false, true}) {
        SCOPED_TRACE(config ? "with +config|get" : "without +config|get");
        redis_server s(
            server_options{.acl_lines = {std::string(locker_acl) + (config ? " +config|get" : "")},
                           .extra_config = {"maxmemory-policy allkeys-lru"}});
        dlock::test::collecting_sink log;
        auto o =
            dlock::test::fast_options("redis://locker:pw@127.0.0.1:" + std::to_string(s.port()));
        o.log.sink = log.sink();
        dlock::client c(o);
        auto l = c.acquire("checked", {.wait = 1s});
        EXPECT_TRUE(l) << c.last_error_detail();
        if (config) {
            EXPECT_TRUE(
                eventually([&] { return log.has("warning", "maxmemory-policy=allkeys-lru"); }, 2s))
                << log.all();
            EXPECT_EQ(s.cli({"ACL", "LOG"}), "");
        } else {
            EXPECT_TRUE(eventually(
                [&] { return log.has("info", "could not check the server's maxmemory-policy"); },
                2s))
                << log.all();
            // ACL LOG lists each entry's fields and values one per line: one denial, of it.
            std::vector<std::string> objects;
            std::istringstream in(s.cli({"ACL", "LOG"}));
            for (std::string line; std::getline(in, line);)
                if (line == "object" && std::getline(in, line)) objects.push_back(line);
            EXPECT_EQ(objects, std::vector<std::string>{"config|get"});
        }
    }
}

// S4 behind Sentinel: the README's user with +role (a master's connection checks ROLE in its
// handshake) does everything the standalone user does on the master the sentinels name.
TEST(security, a_sentinel_client_works_as_the_least_privileged_user) {
    DLOCK_SKIP_WITHOUT_REDIS();
    dlock::test::redis_sentinel_group g(
        server_options{.acl_lines = {std::string(locker_acl) + " +role"}});
    auto url = g.url();
    url.insert(std::string("redis-sentinel://").size(), "locker:pw@");
    dlock::client holder(watchdog_options(url));
    dlock::client waiter(watchdog_options(url));
    exercise(holder, waiter, "orders:42", [&] {
        return !g.master().cli({"PUBSUB", "CHANNELS"}).empty();
    });
    EXPECT_EQ(g.master().cli({"ACL", "LOG"}), "");
}

namespace {

/// A Cluster whose nodes know the locker user (with `extra` commands), the URL that logs in as
/// it, and the slot of the lock "moving" with its master and another master to migrate it to.
struct locker_cluster {
    explicit locker_cluster(const std::string& extra)
        : cl(server_options{.acl_lines = {std::string(locker_acl) + extra}})
        , url(cl.url())
        , slot(dlock::detail::key_slot(moving))
        , from(cl.master_of(slot)) {
        url.insert(std::string("redis-cluster://").size(), "locker:pw@");
        while (to == from || cl.node(to).cli({"ROLE"}).rfind("master", 0) != 0)
            ++to;
    }
    redis_cluster cl;
    std::string url;
    const std::string moving = "moving";
    std::uint16_t slot;
    std::size_t from, to = 0;
};

} // namespace

// S4 on a Cluster: the README's user with what a Cluster client adds (CLUSTER SHARDS for the
// slot map, ASKING for a slot in migration) takes, renews, waits for, hands over and
// force-unlocks every kind, a multi-lock and an election on names of all three masters, follows
// ASK during a migration, and no node's ACL LOG records a denial.
TEST(security, a_cluster_client_works_as_the_least_privileged_user) {
    DLOCK_SKIP_WITHOUT_REDIS();
    locker_cluster lc(" +cluster|shards +asking +role");
    auto& cl = lc.cl;
    dlock::client holder(watchdog_options(lc.url));
    dlock::client waiter(watchdog_options(lc.url));
    const auto subscribed = [&] {
        for (std::size_t i = 0; i < cl.size(); ++i)
            if (!cl.node(i).cli({"PUBSUB", "SHARDCHANNELS"}).empty()) return true;
        return false;
    };
    std::set<std::size_t> masters;
    for (int i = 0; masters.size() < 3 && i < 1000; ++i) {
        const auto name = "orders:" + std::to_string(i);
        if (masters.insert(cl.master_of(dlock::detail::key_slot(name))).second) {
            SCOPED_TRACE(name);
            exercise(holder, waiter, name, subscribed);
        }
    }
    ASSERT_EQ(masters.size(), 3u);
    // ASK: a new lock in a slot that is migrating is made on the target after ASKING.
    cl.begin_migration(lc.slot, lc.from, lc.to);
    auto m = holder.make_simple_mutex(lc.moving);
    ASSERT_TRUE(m.try_lock()) << holder.last_error_detail();
    EXPECT_NE(cl.node(lc.from).cli({"EXISTS", lc.moving}), "1"); // the source answered ASK
    cl.move_keys(lc.slot, lc.from, lc.to);
    cl.finish_migration(lc.slot, lc.to);
    EXPECT_EQ(cl.node(lc.to).cli({"EXISTS", lc.moving}), "1"); // made on the target
    m.unlock();
    for (std::size_t i = 0; i < cl.size(); ++i)
        EXPECT_EQ(cl.node(i).cli({"ACL", "LOG"}), "") << "node " << i;
}

// The other side: without +asking, a lock in a slot that is migrating is permission_denied
// (not MOVED back and forth until the redirections run out), and nothing was made.
TEST(security, a_cluster_user_without_asking_is_permission_denied_during_a_migration) {
    DLOCK_SKIP_WITHOUT_REDIS();
    locker_cluster lc(" +cluster|shards +role");
    auto& cl = lc.cl;
    dlock::client c(dlock::test::fast_options(lc.url));
    cl.begin_migration(lc.slot, lc.from, lc.to);
    std::error_code ec;
    auto l = c.acquire(lc.moving, {.wait = 0ms, .kind = lock_kind::simple}, ec);
    EXPECT_FALSE(l);
    EXPECT_EQ(ec, dlock::errc::permission_denied) << ec.message() << ": " << c.last_error_detail();
    EXPECT_NE(cl.node(lc.to).cli({"ACL", "LOG"}).find("asking"), std::string::npos);
    cl.finish_migration(lc.slot, lc.to);
    EXPECT_EQ(cl.node(lc.to).cli({"EXISTS", lc.moving}), "0");
}

// Without PUBSUB NUMSUB (the README's ACL before 2026-11-29) a local hand-over is refused
// inside its script before anything is written: the release is permission_denied, the lock
// stays held by the releaser on the server, and ACL LOG names the subcommand.
TEST(security, a_handover_the_acl_denies_writes_nothing) {
    DLOCK_SKIP_WITHOUT_REDIS();
    std::string acl = locker_acl;
    acl.erase(acl.find(" +pubsub|numsub"));
    redis_server s(server_options{.acl_lines = {acl}});
    dlock::client c(
        dlock::test::fast_options("redis://locker:pw@127.0.0.1:" + std::to_string(s.port())));
    for (const lock_kind k : {lock_kind::reentrant, lock_kind::simple, lock_kind::write}) {
        SCOPED_TRACE("kind " + std::to_string(static_cast<int>(k)));
        const std::string name = "denied-" + std::to_string(static_cast<int>(k));
        auto l = c.acquire(name, {.wait = 2s, .kind = k});
        ASSERT_TRUE(l);
        auto waiting = std::async(std::launch::async,
                                  [&] { return c.acquire(name, {.wait = 300ms, .kind = k}); });
        ASSERT_TRUE(eventually(
            [&] { return dlock::test::sleeping_waiters(c, channel(k, name)) == 1; }, 5s));
        const auto before = s.cli({"DUMP", name});
        std::error_code ec;
        l.release(ec);
        EXPECT_EQ(ec, dlock::errc::permission_denied) << ec.message();
        EXPECT_EQ(s.cli({"DUMP", name}), before) << "the refused script changed the lock";
        EXPECT_FALSE(waiting.get()) << "the waiter got a lock that was never released";
        s.cli({"DEL", name});
    }
    EXPECT_NE(s.cli({"ACL", "LOG"}).find("numsub"), std::string::npos);
}

// The other side of S4: a user without one command a script runs (HSET, the reentrant
// acquire's) is told permission_denied, not a generic server error, and ACL LOG shows it
// (so the check above can fail).
TEST(security, a_command_the_acl_denies_inside_a_script_is_permission_denied) {
    DLOCK_SKIP_WITHOUT_REDIS();
    std::string acl = locker_acl;
    const std::string hset = " +hset";
    acl.erase(acl.find(hset), hset.size());
    redis_server s(server_options{.acl_lines = {acl}});
    dlock::client c(
        dlock::test::fast_options("redis://locker:pw@127.0.0.1:" + std::to_string(s.port())));
    std::error_code ec;
    auto l = c.acquire("denied", {.wait = 0ms}, ec);
    EXPECT_FALSE(l);
    EXPECT_EQ(ec, dlock::errc::permission_denied) << ec.message() << ": " << c.last_error_detail();
    EXPECT_NE(s.cli({"ACL", "LOG"}), "");
}

// The backend seam (core/lock_backend.hpp): dlock::client, dlock::lease and the thread-bound
// lock objects over a backend other than Redis. The backend here is a small in-process lock
// table (one process, condition variable for waiting) so the routing, the local re-entry count
// and the loss path are checked without a server; the ZooKeeper and PostgreSQL backends have
// their own integration tests against real servers.
#include "core/lock_backend.hpp"
#include "redis/client.hpp"

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>
#include <dlock/redis.hpp>
#include <dlock/zookeeper.hpp>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::lock_kind;

class table_backend;

class table_hold final : public dlock::detail::hold {
public:
    table_hold(std::shared_ptr<table_backend> b, std::string name, std::uint64_t token)
        : b_(std::move(b))
        , name_(std::move(name))
        , token_(token) {
        set_valid_until(clock::now() + 1h);
    }
    const std::string& name() const noexcept override { return name_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }
    void release_blocking(std::error_code& ec) override;
    void release_async(std::function<void(std::error_code)> done) override {
        std::error_code ec;
        release_blocking(ec);
        done(ec);
    }
    void extend(std::chrono::milliseconds lease, std::error_code& ec) override {
        ec = lost() ? make_error_code(errc::not_owner) : std::error_code{};
        if (!ec) set_valid_until(clock::now() + lease);
    }
    void extend_async(std::chrono::milliseconds lease,
                      std::function<void(std::error_code)> done) override {
        std::error_code ec;
        extend(lease, ec);
        done(ec);
    }
    asio::any_io_executor executor() const override;
    /// The table backend counts nothing.
    void with_metrics(const std::function<void(dlock::detail::client_metrics&)>&) const override {}
    void lose() { mark_lost(); }
    void end() { mark_released(); }

private:
    std::shared_ptr<table_backend> b_;
    std::string name_;
    std::uint64_t token_;
};

/// One process's lock table: a name is held by at most one hold; waiters sleep on a condition
/// variable until it is free or their wait ends.
class table_backend final : public dlock::detail::lock_backend,
                            public std::enable_shared_from_this<table_backend> {
public:
    table_backend()
        : thread_([this] { io_.run(); }) {}
    ~table_backend() override { shutdown(); }

    std::string_view backend_name() const noexcept override { return "table"; }
    const std::string& id() const noexcept override { return id_; }
    asio::any_io_executor executor() const override {
        return const_cast<asio::io_context&>(io_).get_executor();
    }
    bool on_io_thread() const noexcept override {
        return std::this_thread::get_id() == thread_.get_id();
    }
    std::string last_error_detail() const override { return {}; }
    dlock::metrics_snapshot metrics() const override { return {}; }
    bool supports(lock_kind k) const noexcept override {
        return k == lock_kind::reentrant || k == lock_kind::simple;
    }

    std::shared_ptr<dlock::detail::hold> acquire(std::string_view name,
                                                 const dlock::acquire_options& opts,
                                                 std::error_code& ec) override {
        ec.clear();
        if (!supports(opts.kind)) {
            ec = make_error_code(errc::unsupported);
            return nullptr;
        }
        std::unique_lock lk(mu_);
        ++acquisitions;
        const std::string n(name);
        const auto free = [&] { return !held_.contains(n); };
        if (!opts.wait)
            cv_.wait(lk, free);
        else if (!cv_.wait_for(lk, std::max(*opts.wait, 0ms), free))
            return nullptr;
        auto h = std::make_shared<table_hold>(shared_from_this(), n, ++counter_);
        held_[n] = h;
        return h;
    }
    void async_acquire(
        std::string name, const dlock::acquire_options& opts,
        std::function<void(std::error_code, std::shared_ptr<dlock::detail::hold>)> done) override {
        std::thread([self = shared_from_this(), name = std::move(name), opts,
                     done = std::move(done)]() mutable {
            std::error_code ec;
            auto h = self->acquire(name, opts, ec);
            asio::post(self->io_, [done = std::move(done), ec, h] { done(ec, h); });
        }).detach();
    }
    bool is_locked(std::string_view name, lock_kind, std::error_code& ec) override {
        ec.clear();
        std::lock_guard lk(mu_);
        return held_.contains(std::string(name));
    }
    bool force_unlock(std::string_view name, lock_kind, std::error_code& ec) override {
        ec.clear();
        std::shared_ptr<table_hold> h;
        {
            std::lock_guard lk(mu_);
            const auto it = held_.find(std::string(name));
            if (it == held_.end()) return false;
            h = it->second;
            held_.erase(it);
        }
        cv_.notify_all();
        h->lose();
        return true;
    }
    std::optional<std::chrono::milliseconds> remaining_lease(std::string_view, lock_kind,
                                                             std::error_code& ec) override {
        ec.clear();
        return std::nullopt;
    }
    dlock::lock_status inspect(std::string_view name, lock_kind, std::error_code& ec) override {
        ec.clear();
        std::lock_guard lk(mu_);
        dlock::lock_status s{.name = std::string(name), .kind = "lock"};
        if (const auto it = held_.find(s.name); it != held_.end()) {
            s.exists = true;
            s.contenders.push_back(
                {.owner = id_, .holds = true, .token = *it->second->fencing_token()});
        }
        return s;
    }
    std::vector<dlock::lock_status> list(std::string_view, std::error_code& ec) override {
        ec.clear();
        std::lock_guard lk(mu_);
        std::vector<dlock::lock_status> all;
        for (const auto& [n, h] : held_)
            all.push_back({.name = n, .kind = "lock", .exists = true});
        return all;
    }
    void shutdown() noexcept override {
        if (stopped_.exchange(true)) return;
        work_.reset();
        io_.stop();
        if (thread_.joinable()) thread_.join();
    }

    void end(const std::string& name, table_hold* h, std::error_code& ec) {
        {
            std::lock_guard lk(mu_);
            const auto it = held_.find(name);
            if (it == held_.end() || it->second.get() != h) {
                ec = make_error_code(errc::not_owner);
                return;
            }
            held_.erase(it);
        }
        cv_.notify_all();
    }

    int acquisitions = 0; // guarded by mu_ (read after the threads joined)

private:
    std::string id_ = "table-client";
    asio::io_context io_;
    asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
    std::atomic<bool> stopped_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, std::shared_ptr<table_hold>> held_; // guarded by mu_
    std::uint64_t counter_ = 0;                               // guarded by mu_
    std::thread thread_;
};

void table_hold::release_blocking(std::error_code& ec) {
    ec.clear();
    if (released()) return;
    if (lost()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    b_->end(name_, this, ec);
    if (ec) {
        lose();
        return;
    }
    end();
}

asio::any_io_executor table_hold::executor() const {
    return b_->executor();
}

struct seam : ::testing::Test {
    std::shared_ptr<table_backend> b = std::make_shared<table_backend>();
    dlock::client c = dlock::detail::access::make_client(b);
};

TEST_F(seam, leases_go_to_the_backend_with_its_tokens) {
    EXPECT_EQ(c.backend_name(), "table");
    EXPECT_EQ(c.id(), "table-client");
    auto a = c.acquire("job", {.wait = 0ms});
    ASSERT_TRUE(a);
    EXPECT_EQ(a.token(), 1u);
    EXPECT_FALSE(c.acquire("job", {.wait = 0ms})); // held: not acquired, no error
    std::error_code ec;
    EXPECT_TRUE(c.inspect("job", lock_kind::reentrant, ec).exists);
    EXPECT_EQ(c.list("", ec).size(), 1u);
    a.release();
    auto b2 = c.acquire("job", {.wait = 0ms});
    ASSERT_TRUE(b2);
    EXPECT_EQ(b2.token(), 2u);
}

TEST_F(seam, a_waiting_lease_is_served_when_the_holder_releases) {
    auto a = c.acquire("job");
    std::thread t([&] { a.release(); });
    auto w = c.acquire("job", {.wait = 10s});
    t.join();
    EXPECT_TRUE(w);
}

TEST_F(seam, async_acquire_completes_with_a_lease) {
    auto f = c.async_acquire("job", {.wait = 1s}, asio::use_future);
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    auto l = f.get();
    EXPECT_TRUE(l);
    EXPECT_EQ(l.name(), "job");
}

TEST_F(seam, a_thread_re_enters_locally_and_the_backend_sees_one_acquisition) {
    auto m = c.make_mutex("orders");
    m.lock();
    m.lock();
    EXPECT_EQ(m.hold_count(), 2);
    EXPECT_TRUE(m.is_held_by_this_thread());
    EXPECT_EQ(m.fencing_token(), 1u);
    EXPECT_EQ(b->acquisitions, 1);
    std::thread([&] {
        std::error_code ec;
        EXPECT_FALSE(m.try_lock(ec)); // another thread: the backend says held
        EXPECT_FALSE(ec);
        m.unlock(ec);
        EXPECT_EQ(ec, errc::not_owner); // it holds nothing
    }).join();
    m.unlock();
    EXPECT_TRUE(m.is_locked()); // one hold left
    m.unlock();
    EXPECT_FALSE(m.is_locked());
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
}

TEST_F(seam, a_non_reentrant_kind_refuses_the_holders_second_lock) {
    auto m = c.make_simple_mutex("once");
    m.lock();
    std::error_code ec;
    EXPECT_FALSE(m.try_lock(ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    m.unlock();
}

TEST_F(seam, a_lost_thread_hold_stops_its_token_and_unlock_says_not_owner) {
    auto m = c.make_mutex("orders");
    m.lock();
    const auto stop = m.stop_token();
    EXPECT_TRUE(m.force_unlock()); // the backend takes it away: the hold is lost
    EXPECT_TRUE(stop.stop_requested());
    EXPECT_LT(m.valid_until(), std::chrono::steady_clock::now());
    EXPECT_EQ(m.hold_count(), 0);
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_TRUE(m.try_lock()); // a new hold after the loss
    m.unlock();
}

TEST_F(seam, leader_election_is_unsupported_on_a_backend_without_it) {
    // The seam's defaults (dlock/election.hpp): every election call is errc::unsupported.
    std::error_code ec;
    EXPECT_FALSE(c.campaign("jobs", "v", {.wait = 0ms}, ec));
    EXPECT_EQ(ec, errc::unsupported);
    EXPECT_FALSE(c.leader("jobs", ec));
    EXPECT_EQ(ec, errc::unsupported);
    EXPECT_FALSE(c.observe(
        "jobs", [](const std::optional<dlock::leader_info>&) {}, ec));
    EXPECT_EQ(ec, errc::unsupported);
    std::promise<std::error_code> async_ec;
    c.async_campaign("jobs", "v", {}, [&](std::error_code e, dlock::leadership l) {
        EXPECT_FALSE(l);
        async_ec.set_value(e);
    });
    auto f = async_ec.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::unsupported);
    try {
        (void)c.campaign("jobs", "v");
        ADD_FAILURE() << "a campaign on a backend without elections";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::unsupported);
    }
}

TEST_F(seam, a_kind_the_backend_lacks_and_redis_only_calls_are_unsupported) {
    try {
        auto m = c.make_fair_mutex("fifo");
        ADD_FAILURE() << "a fair lock on a backend without it";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::unsupported);
    }
    std::error_code ec;
    const std::string_view ping[] = {"PING"};
    dlock::redis::command(c, ping, ec);
    EXPECT_EQ(ec, errc::unsupported);
    EXPECT_EQ(dlock::redis::masters(c, ec), 0u);
    EXPECT_EQ(ec, errc::unsupported);
    // The throwing forms say what the call needs and what the client has.
    for (const auto& [call, what] :
         std::initializer_list<std::pair<std::function<void()>, std::string>>{
             {[&] { (void)dlock::redis::command(c, {"PING"}); }, "dlock::redis::command"},
             {[&] { (void)dlock::redis::masters(c); }, "dlock::redis::masters"},
             {[&] { (void)dlock::redis::command_on_master(c, 0, ping); },
              "dlock::redis::command_on_master"},
             {[&] { (void)dlock::redis::fenced_set(c, "k", "k:fence", 1, "v"); },
              "dlock::redis::fenced_set"}}) {
        try {
            call();
            ADD_FAILURE() << what << " on a backend";
        } catch (const dlock::error& e) {
            const std::string text = e.what();
            EXPECT_EQ(e.code(), errc::unsupported) << text;
            EXPECT_NE(text.find(what + " needs a Redis client (redis://, rediss://, unix://, "
                                       "redis-sentinel:// or redis-cluster://)"),
                      std::string::npos)
                << text;
            EXPECT_NE(text.find("this client's backend is table"), std::string::npos) << text;
        }
    }
    EXPECT_FALSE(dlock::redis::fenced_set(c, "k", "k:fence", 1, "v", ec));
    EXPECT_EQ(ec, errc::unsupported);
    {
        auto held = c.acquire("zk-only", {.wait = 1s});
        ASSERT_TRUE(held);
        EXPECT_FALSE(dlock::zookeeper::fenced_set(c, held, "res", "v", ec));
        EXPECT_EQ(ec, errc::unsupported);
        try {
            dlock::zookeeper::fenced_set(c, held, "res", "v");
            ADD_FAILURE() << "zookeeper::fenced_set on a backend";
        } catch (const dlock::error& e) {
            EXPECT_EQ(e.code(), errc::unsupported);
            EXPECT_NE(std::string(e.what()).find("dlock::zookeeper::fenced_set needs a ZooKeeper "
                                                 "client (zk://); this client's backend is table"),
                      std::string::npos)
                << e.what();
        }
    }
    auto f = dlock::redis::async_command(c, {"PING"}, asio::use_future);
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    try {
        f.get();
        ADD_FAILURE() << "async_command on a backend";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), errc::unsupported);
    }
    // acquire_all works on any backend (in name order); a member kind it lacks is unsupported.
    const dlock::lock_ref two[] = {{"b"}, {"a"}};
    {
        auto m = c.acquire_all(two, {.wait = 1s}, ec);
        EXPECT_FALSE(ec);
        ASSERT_TRUE(m);
        EXPECT_EQ(m.members()[0].name(), "a");
    }
    const dlock::lock_ref mixed[] = {{"a"}, {"b", lock_kind::fair}};
    c.acquire_all(mixed, {}, ec);
    EXPECT_EQ(ec, errc::unsupported);
}

TEST(seam_redis, inspect_and_list_go_to_the_redis_server_and_other_kinds_are_refused) {
    dlock::client r("redis://127.0.0.1:1"); // connects lazily: nothing is sent
    EXPECT_EQ(r.backend_name(), "redis");
    std::error_code ec;
    r.inspect("x", lock_kind::reentrant, ec); // answered by the server, which is not there
    EXPECT_EQ(ec, errc::unavailable);
    r.list("*", ec);
    EXPECT_EQ(ec, errc::unavailable);
    r.inspect("x", lock_kind::shedlock, ec);
    EXPECT_EQ(ec, errc::unsupported);
    EXPECT_FALSE(r.force_unlock("x", lock_kind::lease, ec));
    EXPECT_EQ(ec, errc::unsupported);
    // A kind only another backend offers is refused before anything is sent.
    EXPECT_FALSE(r.acquire("x", {.wait = 0ms, .kind = lock_kind::shedlock}, ec));
    EXPECT_EQ(ec, errc::unsupported);
}

TEST(seam_urls, a_backend_this_build_lacks_is_unsupported_with_the_package_named) {
    for (const auto& [url, package, name] :
         {std::tuple{"zk://127.0.0.1:1/locks", "libzookeeper-st-dev", "zookeeper"},
          std::tuple{"postgresql://127.0.0.1:1/db", "libpq-dev", "postgresql"}}) {
        try {
            dlock::client k(url);
            EXPECT_EQ(k.backend_name(), name) << url; // this build has the backend
        } catch (const dlock::error& e) {
            EXPECT_EQ(e.code(), errc::unsupported) << url;
            EXPECT_NE(std::string(e.what()).find(package), std::string::npos) << e.what();
        }
    }
}

} // namespace

TEST(seam_urls, an_unknown_scheme_is_a_configuration_error_that_lists_the_known_ones) {
    for (const char* url : {"consul://127.0.0.1:8500", "http://x", "no-scheme-at-all"}) {
        try {
            dlock::client k(url);
            ADD_FAILURE() << url << " made a client";
        } catch (const dlock::error& e) {
            EXPECT_EQ(e.code(), errc::configuration_error) << url;
            const std::string what = e.what();
            for (const char* scheme : {"redis://", "redis-sentinel://", "redis-cluster://", "zk://",
                                       "postgresql://", "etcd://", "etcds://"})
                EXPECT_NE(what.find(scheme), std::string::npos) << url << ": " << what;
        }
    }
}

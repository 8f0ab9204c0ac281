// The read-write lock on etcd (src/etcd: acquire.cpp's RWMutex side, downgrade.cpp,
// queries.cpp) against a real member, with keys that etcdctl puts standing in for etcd's
// recipes.RWMutex in another process: dlock's keys follow the recipe's layout, a reader waits
// only for older writers, a writer for every older key, each is woken by the deletion within a
// second, readers queued behind a writer do not overtake it, status shows the mode and every
// holder, a forced unlock frees every reader, and a downgrade is granted only while no writer
// waits behind the write hold. (What every backend's read-write lock promises is in the
// conformance suite.)
#include "etcd_test_util.hpp"
#include "process.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <future>
#include <regex>
#include <sstream>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using dlock::lock_kind;

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget) {
    return dlock::test::wait_until(pred, budget);
}

class etcd_rwlock : public dlock::test::etcd_member_test {
protected:
    /// Puts `key` as another process's recipe contender would (`etcdctl put`); its revision.
    std::int64_t put(const std::string& key) const {
        auto [out, rc] = etcd_->etcdctl({"put", key, "", "-w", "json"});
        EXPECT_EQ(rc, 0) << out;
        std::smatch m;
        if (!std::regex_search(out, m, std::regex("\"revision\":([0-9]+)"))) return 0;
        return std::stoll(m[1].str());
    }
    void del(const std::string& key) const {
        auto [out, rc] = etcd_->etcdctl({"del", key});
        EXPECT_EQ(rc, 0) << out;
    }
    /// The keys under "<name>/", oldest first, as etcdctl lists them.
    std::vector<std::string> keys(const std::string& name) const {
        auto [out, rc] = etcd_->etcdctl(
            {"get", "--prefix", name + "/", "--keys-only", "--sort-by=CREATE", "--order=ASCEND"});
        EXPECT_EQ(rc, 0) << out;
        std::vector<std::string> found;
        std::istringstream in(out);
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) found.push_back(line);
        return found;
    }
    std::size_t contenders(dlock::client& c, const std::string& name) const {
        std::error_code ec;
        return c.inspect(name, lock_kind::write, ec).contenders.size();
    }
    /// Acquires `name` as `kind` on another thread (up to 10 s); the lease and when it came.
    auto waiter(dlock::client& c, const std::string& name, lock_kind kind) const {
        return std::async(std::launch::async, [&c, name, kind] {
            auto l = c.acquire(name, {.wait = 10s, .kind = kind});
            return std::make_pair(std::move(l), clock_type::now());
        });
    }
};

// Keys as the recipe makes them: "<name>/read/<unix ns>" and "<name>/write/<unix ns>", bound to
// the client's lease; the token is the key's create revision.
TEST_F(etcd_rwlock, keys_follow_the_recipes_layout) {
    auto c = connect();
    auto r = c->acquire("layout", {.wait = 5s, .kind = lock_kind::read});
    ASSERT_TRUE(r);
    const auto k = keys("layout");
    ASSERT_EQ(k.size(), 1U);
    EXPECT_TRUE(std::regex_match(k[0], std::regex("layout/read/[0-9]{19}"))) << k[0];
    auto [json, rc] = etcd_->etcdctl({"get", k[0], "-w", "json"});
    ASSERT_EQ(rc, 0);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(json, m, std::regex("\"create_revision\":([0-9]+)"))) << json;
    EXPECT_EQ(r.token(), std::stoull(m[1].str()));
    EXPECT_TRUE(std::regex_search(json, std::regex("\"lease\":[1-9][0-9]*"))) << json;
    const auto read_token = r.token();
    r.release();
    auto w = c->acquire("layout", {.wait = 5s, .kind = lock_kind::write});
    ASSERT_TRUE(w);
    const auto k2 = keys("layout");
    ASSERT_EQ(k2.size(), 1U);
    EXPECT_TRUE(std::regex_match(k2[0], std::regex("layout/write/[0-9]{19}"))) << k2[0];
    ASSERT_TRUE(w.token() && read_token);
    EXPECT_GT(*w.token(), *read_token);
}

// An older write key of another process keeps a reader out until it is deleted; an older read
// key does not.
TEST_F(etcd_rwlock, a_reader_waits_only_for_an_older_writer) {
    auto c = connect();
    put("shared/read/1000");
    auto r = c->acquire("shared", {.wait = 0ms, .kind = lock_kind::read});
    EXPECT_TRUE(r) << "readers share";
    r.release();
    put("shared/write/1001");
    EXPECT_FALSE(c->acquire("shared", {.wait = 0ms, .kind = lock_kind::read}));
    auto pending = waiter(*c, "shared", lock_kind::read);
    ASSERT_EQ(pending.wait_for(300ms), std::future_status::timeout) << "granted beside a writer";
    const auto released_at = clock_type::now();
    del("shared/write/1001");
    ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
    auto [held, at] = pending.get();
    EXPECT_TRUE(held);
    EXPECT_LT(at - released_at, 1s);
}

// A writer waits for every older key, readers too, and is woken by the last one's deletion.
TEST_F(etcd_rwlock, a_writer_waits_for_every_older_key) {
    auto c = connect();
    put("excl/read/1000");
    put("excl/read/1001");
    auto pending = waiter(*c, "excl", lock_kind::write);
    ASSERT_TRUE(eventually([&] { return contenders(*c, "excl") == 3; }, 5s));
    del("excl/read/1001");
    ASSERT_EQ(pending.wait_for(300ms), std::future_status::timeout) << "granted beside a reader";
    const auto released_at = clock_type::now();
    del("excl/read/1000");
    ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
    auto [held, at] = pending.get();
    EXPECT_TRUE(held);
    EXPECT_LT(at - released_at, 1s);
}

// A reader that comes after a queued writer waits behind it (no writer starvation), and the
// three are served in revision order: reader, writer, reader.
TEST_F(etcd_rwlock, readers_do_not_overtake_a_queued_writer) {
    auto a = connect(), b = connect(), c = connect();
    auto first = a->acquire("fifo", {.wait = 5s, .kind = lock_kind::read});
    ASSERT_TRUE(first);
    auto writer = waiter(*b, "fifo", lock_kind::write);
    ASSERT_TRUE(eventually([&] { return contenders(*a, "fifo") == 2; }, 5s));
    auto reader = waiter(*c, "fifo", lock_kind::read);
    ASSERT_TRUE(eventually([&] { return contenders(*a, "fifo") == 3; }, 5s));
    EXPECT_EQ(reader.wait_for(300ms), std::future_status::timeout) << "overtook the writer";
    first.release();
    ASSERT_EQ(writer.wait_for(5s), std::future_status::ready);
    auto w = writer.get().first;
    ASSERT_TRUE(w);
    EXPECT_EQ(reader.wait_for(300ms), std::future_status::timeout) << "read beside the writer";
    w.release();
    ASSERT_EQ(reader.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(reader.get().first);
}

// status: the kind is read-write, the holders are every reader before the first writer, the
// mode is theirs; a forced unlock deletes every holding reader (not the waiting writer) and
// signals their loss.
TEST_F(etcd_rwlock, status_and_forced_unlock_cover_every_reader) {
    auto a = connect(), b = connect();
    auto r1 = a->acquire("many", {.wait = 5s, .kind = lock_kind::read});
    auto r2 = b->acquire("many", {.wait = 5s, .kind = lock_kind::read});
    ASSERT_TRUE(r1 && r2);
    auto writer = waiter(*b, "many", lock_kind::write);
    ASSERT_TRUE(eventually([&] { return contenders(*a, "many") == 3; }, 5s));
    std::error_code ec;
    const auto st = a->inspect("many", lock_kind::read, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(st.details.at("mode"), "read");
    ASSERT_EQ(st.contenders.size(), 3U);
    EXPECT_TRUE(st.contenders[0].holds);
    EXPECT_TRUE(st.contenders[1].holds);
    EXPECT_FALSE(st.contenders[2].holds);
    EXPECT_TRUE(st.contenders[2].entry.starts_with("many/write/"));
    const auto listed = a->list("many", ec);
    ASSERT_EQ(listed.size(), 1U);
    EXPECT_EQ(listed[0].kind, "read-write");
    EXPECT_TRUE(a->force_unlock("many", lock_kind::read, ec)) << ec.message();
    EXPECT_TRUE(eventually([&] { return r1.lost() && r2.lost(); }, 2s));
    ASSERT_EQ(writer.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(writer.get().first);
}

// A write lock downgraded to read (lock, lock_shared, unlock on one thread): granted at once
// while no writer waits behind it; another reader then shares, a writer waits for the reader.
TEST_F(etcd_rwlock, a_downgrade_keeps_writers_out_and_lets_readers_in) {
    auto a = connect(), b = connect();
    auto mine = a->make_rw_mutex("down");
    mine.lock();
    mine.lock_shared(); // the downgrade
    mine.unlock();
    EXPECT_TRUE(b->acquire("down", {.wait = 2s, .kind = lock_kind::read}));
    EXPECT_FALSE(b->acquire("down", {.wait = 0ms, .kind = lock_kind::write}));
    mine.unlock_shared();
    EXPECT_TRUE(b->acquire("down", {.wait = 2s, .kind = lock_kind::write}));
}

// With a writer queued behind the write hold, a read key put now would not keep that writer out
// once the write key goes: the downgrade is refused (invalid_argument, the reason in the last
// error) instead of waiting for itself, and the write hold is kept.
TEST_F(etcd_rwlock, a_downgrade_with_a_writer_queued_behind_is_refused) {
    auto a = connect(), b = connect();
    auto mine = a->make_rw_mutex("queued");
    mine.lock();
    auto writer = waiter(*b, "queued", lock_kind::write);
    ASSERT_TRUE(eventually([&] { return contenders(*a, "queued") == 2; }, 5s));
    std::error_code ec;
    EXPECT_FALSE(mine.try_lock_shared_for(2s, ec));
    EXPECT_EQ(ec, dlock::errc::invalid_argument) << ec.message();
    EXPECT_NE(a->last_error_detail().find("a writer waits behind"), std::string::npos)
        << a->last_error_detail();
    EXPECT_EQ(writer.wait_for(200ms), std::future_status::timeout) << "the write hold went";
    mine.unlock();
    ASSERT_EQ(writer.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(writer.get().first);
}

} // namespace

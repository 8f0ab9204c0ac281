// The log sink on every backend: a client made with client(url, log_options) reports the loss
// of a lock ended by another client's force_unlock() as one "lock lost" record at warning
// level, with the lock's name, its kind and the cause, and never the owner (the client id) nor
// the token; and every backend counts its connections (metrics_snapshot::connects). Run over
// every backend and every kind it offers (backends.cpp); the Redis-only records (renewal
// batches, reconnects, the eviction policy) are tests/integration/log_sink_test.cpp's.
#include "backends.hpp"

#include <mutex>
#include <string>
#include <vector>

namespace dlock::conformance {
namespace {

/// One record, copied (the views are valid only during the sink's call).
struct record {
    log_level level;
    std::string message;
    std::vector<std::pair<std::string, std::string>> fields;

    std::string field(std::string_view key) const {
        for (const auto& [k, v] : fields)
            if (k == key) return v;
        return {};
    }
};

class collecting_sink {
public:
    log_options options() {
        return {.sink =
                    [this](const log_record& r) {
                        record c{r.level, std::string(r.message), {}};
                        for (const auto& f : r.fields)
                            c.fields.emplace_back(std::string(f.key), std::string(f.value));
                        std::lock_guard lk(mu_);
                        records_.push_back(std::move(c));
                    },
                .level = log_level::debug};
    }
    std::vector<record> records() const {
        std::lock_guard lk(mu_);
        return records_;
    }
    /// The "lock lost" records of `lock`.
    std::vector<record> lost(const std::string& lock) const {
        std::vector<record> out;
        for (auto& r : records())
            if (r.message == "lock lost" && r.field("lock") == lock) out.push_back(r);
        return out;
    }

private:
    mutable std::mutex mu_;
    std::vector<record> records_;
};

class log_sink : public ::testing::TestWithParam<kind_case> {
protected:
    void SetUp() override {
        CONFORMANCE_START(backend(), u);
        url_ = u;
        name_ = fresh_name("log-" + name_of(traits().kind));
    }
    const backend_entry& backend() const { return *GetParam().backend; }
    const kind_traits& traits() const { return GetParam().traits; }

    std::string url_;
    std::string name_;
};

// A lock ended by force_unlock() is reported once as "lock lost" (warning) with its name, kind
// and cause; no record carries the holder's id (the owner field's first half) or its token.
TEST_P(log_sink, a_forced_unlock_is_logged_as_lock_lost) {
    collecting_sink log;
    client holder(url_, log.options());
    auto other = backend().connect(url_);
    auto held = holder.acquire(name_, {.wait = 5s, .kind = traits().kind});
    ASSERT_TRUE(held);
    const auto token = held.token();
    std::error_code ec;
    EXPECT_TRUE(other->force_unlock(name_, traits().kind, ec)) << ec.message();
    ASSERT_FALSE(ec) << ec.message();
    // A backend that learns only at its next renewal (or Redis's watchdog, 10 s away at the
    // default lease) learns now; one that watches has learnt already or soon.
    held.extend(30s, ec);
    ASSERT_TRUE(eventually([&] { return held.lost() && !log.lost(name_).empty(); }, 10s))
        << "lost: " << held.lost() << ", records: " << log.records().size();
    const auto lost = log.lost(name_);
    ASSERT_EQ(lost.size(), 1U);
    EXPECT_EQ(lost[0].level, log_level::warning);
    EXPECT_FALSE(lost[0].field("cause").empty());
    ASSERT_TRUE(held.loss_cause());
    EXPECT_EQ(lost[0].field("cause"), to_string(*held.loss_cause()));
    EXPECT_FALSE(lost[0].field("kind").empty());
    for (const auto& r : log.records())
        for (const auto& [k, v] : r.fields) {
            EXPECT_EQ(v.find(holder.id()), std::string::npos) << r.message << ' ' << k;
            if (token) {
                EXPECT_NE(v, std::to_string(*token)) << r.message << ' ' << k;
            }
        }
}

INSTANTIATE_TEST_SUITE_P(conformance, log_sink, ::testing::ValuesIn(kind_params()),
                         [](const auto& i) { return param_name(i); });

// Every backend counts the connections it opened (Redis: its handshakes; ZooKeeper: its
// session's; PostgreSQL: its sessions; etcd: its channel's) in metrics_snapshot::connects.
class log_backend : public ::testing::TestWithParam<const backend_entry*> {};

TEST_P(log_backend, connections_are_counted) {
    CONFORMANCE_START(*GetParam(), url);
    auto c = GetParam()->connect(url);
    const auto name = fresh_name("connects");
    auto held = c->acquire(name, {.wait = 5s, .kind = GetParam()->kinds.at(0).kind});
    ASSERT_TRUE(held);
    held.release();
    EXPECT_GE(c->metrics().connects, 1U);
}

INSTANTIATE_TEST_SUITE_P(conformance, log_backend, ::testing::ValuesIn(backend_params()),
                         [](const auto& i) { return param_name(i); });

} // namespace
} // namespace dlock::conformance

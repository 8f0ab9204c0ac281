// The PostgreSQL backend behind dlock::client (postgresql:// and postgres:// URLs): the
// lock_backend seam (core/lock_backend.hpp) over pg::engine, dispatching each kind to its
// implementation (advisory*.cpp, rows/).
#include "postgres/backend.hpp"

#include "core/blocking_acquire.hpp"
#include "core/random.hpp"
#include "postgres/advisory.hpp"
#include "postgres/election.hpp"
#include "postgres/engine.hpp"
#include "postgres/once.hpp"
#include "postgres/rows.hpp"

#include <algorithm>

namespace dlock::detail {
namespace pg {
namespace {

/// I/O thread: appends the rows of the row kinds from `next` on to `v`, then `done`.
void list_tables(
    const std::shared_ptr<engine>& e, const std::string& pattern, std::size_t next,
    std::vector<lock_status> v,
    const std::function<void(std::pair<std::error_code, std::vector<lock_status>>)>& done) {
    static constexpr lock_kind tables[] = {lock_kind::shedlock, lock_kind::lease,
                                           lock_kind::versioned, lock_kind::semaphore};
    if (next == std::size(tables)) return done(std::make_pair(std::error_code{}, std::move(v)));
    list_rows(e, tables[next], pattern,
              [e, pattern, next, v = std::move(v), done](std::error_code ec,
                                                         std::vector<lock_status> rows) mutable {
                  for (auto& row : rows)
                      v.push_back(std::move(row));
                  if (ec) return done(std::make_pair(ec, std::move(v)));
                  list_tables(e, pattern, next + 1, std::move(v), done);
              });
}

void start_acquire(const std::shared_ptr<engine>& e, std::string name, const acquire_options& opts,
                   acquire_handler done) {
    if (row_kind(opts.kind))
        acquire_row(e, opts.kind, std::move(name), opts, std::move(done));
    else
        acquire_advisory(e, std::move(name), opts, std::move(done));
}

class pg_backend final : public lock_backend {
public:
    pg_backend(settings s, const log_options& log)
        : engine_(engine::create(std::move(s), log)) {}
    ~pg_backend() override { engine_->shutdown(); }

    std::string_view backend_name() const noexcept override { return "postgresql"; }
    const std::string& id() const noexcept override { return engine_->id(); }
    asio::any_io_executor executor() const override { return engine_->io().get_executor(); }
    bool on_io_thread() const noexcept override { return engine_->on_io_thread(); }
    std::string last_error_detail() const override { return engine_->last_error(); }
    metrics_snapshot metrics() const override { return engine_->metrics().snapshot(); }
    bool supports(lock_kind kind) const noexcept override {
        return advisory_kind(kind) || row_kind(kind);
    }
    bool reentrant(lock_kind kind) const noexcept override {
        // A lease row is one owner's, like the simple lock's key.
        return kind != lock_kind::simple && !row_kind(kind);
    }

    std::shared_ptr<hold> acquire(std::string_view name, const acquire_options& opts,
                                  std::error_code& ec) override {
        ec.clear();
        if (engine_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return nullptr;
        }
        if (!supports(opts.kind)) {
            ec = make_error_code(errc::unsupported);
            return nullptr;
        }
        using out = std::pair<std::error_code, std::shared_ptr<hold>>;
        auto e = engine_;
        auto r = engine_->call<out>(
            [e, n = std::string(name), opts](std::function<void(out)> done) {
                start_acquire(e, n, opts, [done](std::error_code ec2, std::shared_ptr<hold> h) {
                    done({ec2, std::move(h)});
                });
            },
            {make_error_code(errc::cancelled), nullptr});
        ec = r.first;
        return std::move(r.second);
    }

    void async_acquire(std::string name, const acquire_options& opts,
                       std::function<void(std::error_code, std::shared_ptr<hold>)> done) override {
        if (!supports(opts.kind)) {
            if (!engine_->post([done] { done(make_error_code(errc::unsupported), nullptr); }))
                done(make_error_code(errc::cancelled), nullptr);
            return;
        }
        auto e = engine_;
        if (!engine_->post([e, name = std::move(name), opts, done]() mutable {
                start_acquire(e, std::move(name), opts, std::move(done));
            }))
            done(make_error_code(errc::cancelled), nullptr);
    }

    bool is_locked(std::string_view name, lock_kind kind, std::error_code& ec) override {
        const auto st = inspect(name, kind, ec);
        if (ec) return false;
        return std::any_of(st.contenders.begin(), st.contenders.end(),
                           [](const lock_contender& c) { return c.holds; });
    }

    bool force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) override {
        ec.clear();
        if (!check(kind, ec)) return false;
        using out = std::pair<std::error_code, bool>;
        auto e = engine_;
        auto r = engine_->call<out>(
            [e, n = std::string(name), kind](std::function<void(out)> done) {
                auto cb = [done](std::error_code ec2, bool any) { done({ec2, any}); };
                if (row_kind(kind))
                    force_unlock_row(e, kind, n, cb);
                else
                    force_unlock_advisory(e, n, cb);
            },
            {make_error_code(errc::cancelled), false});
        ec = r.first;
        return r.second;
    }

    std::optional<std::chrono::milliseconds> remaining_lease(std::string_view name, lock_kind kind,
                                                             std::error_code& ec) override {
        ec.clear();
        if (!check(kind, ec)) return std::nullopt;
        if (!row_kind(kind)) return std::nullopt; // lives as long as its session
        return inspect(name, kind, ec).remaining_lease;
    }

    lock_status inspect(std::string_view name, lock_kind kind, std::error_code& ec) override {
        ec.clear();
        if (!check(kind, ec)) return {};
        using out = std::pair<std::error_code, lock_status>;
        auto e = engine_;
        auto r = engine_->call<out>(
            [e, n = std::string(name), kind](std::function<void(out)> done) {
                auto cb = [done](std::error_code ec2, lock_status st) {
                    done({ec2, std::move(st)});
                };
                if (row_kind(kind))
                    inspect_row(e, kind, n, cb);
                else
                    inspect_advisory(e, n, kind, cb);
            },
            {make_error_code(errc::cancelled), {}});
        ec = r.first;
        return std::move(r.second);
    }

    std::vector<lock_status> list(std::string_view pattern, std::error_code& ec) override {
        ec.clear();
        if (engine_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return {};
        }
        using out = std::pair<std::error_code, std::vector<lock_status>>;
        auto e = engine_;
        auto r = engine_->call<out>(
            [e, p = std::string(pattern)](std::function<void(out)> done) {
                // Advisory locks, then the rows of each table (a missing table lists none).
                list_advisory(e, p, [e, p, done](std::error_code ec2, std::vector<lock_status> v) {
                    if (ec2) return done({ec2, std::move(v)});
                    list_tables(e, p, 0, std::move(v), done);
                });
            },
            {make_error_code(errc::cancelled), {}});
        ec = r.first;
        return std::move(r.second);
    }

    std::optional<period_slot> claim_period(std::string_view name, std::chrono::milliseconds period,
                                            std::error_code& ec) override {
        using out = std::pair<std::error_code, std::optional<period_slot>>;
        auto e = engine_;
        auto r = engine_->call<out>(
            [e, n = std::string(name), period](std::function<void(out)> done) {
                claim_period_row(e, n, period, random_token(),
                                 [done](std::error_code ec2, std::optional<period_slot> s) {
                                     done({ec2, std::move(s)});
                                 });
            },
            {make_error_code(errc::cancelled), std::nullopt});
        ec = r.first;
        return std::move(r.second);
    }

    bool release_period(std::string_view name, const period_slot& slot,
                        std::error_code& ec) override {
        using out = std::pair<std::error_code, bool>;
        auto e = engine_;
        auto r = engine_->call<out>(
            [e, n = std::string(name), slot](std::function<void(out)> done) {
                release_period_row(e, n, slot, [done](std::error_code ec2, bool gone) {
                    done({ec2, gone});
                });
            },
            {make_error_code(errc::cancelled), false});
        ec = r.first;
        return r.second;
    }

    // Leader election (election.hpp): the advisory lock of the name, and the leader's row.
    std::shared_ptr<hold> campaign(std::string_view name, std::string value,
                                   const campaign_options& opts, std::error_code& ec) override {
        return campaign_blocking(*this, name, std::move(value), opts, ec);
    }

    void async_campaign(std::string name, std::string value, const campaign_options& opts,
                        std::function<void(std::error_code, std::shared_ptr<hold>)> done) override {
        auto e = engine_;
        const bool posted = engine_->post([e, name = std::move(name), value = std::move(value),
                                           wait = opts.wait, done]() mutable {
            if (value.size() > leadership::max_value_size) {
                e->set_error("the value is over leadership::max_value_size bytes");
                return done(make_error_code(errc::invalid_argument), nullptr);
            }
            campaign_advisory(e, std::move(name), std::move(value), wait, std::move(done));
        });
        if (!posted) done(make_error_code(errc::cancelled), nullptr);
    }

    void proclaim(hold& leader, std::string value, std::error_code& ec) override {
        ec.clear();
        if (engine_->on_io_thread() || value.size() > leadership::max_value_size) {
            ec = make_error_code(errc::invalid_argument);
            return;
        }
        // The caller blocks here, so the hold outlives the call.
        ec = engine_->call<std::error_code>(
            [&leader, value = std::move(value)](std::function<void(std::error_code)> done) mutable {
                proclaim_leader(leader, std::move(value), std::move(done));
            },
            make_error_code(errc::not_owner));
    }

    std::optional<leader_info> leader(std::string_view name, std::error_code& ec) override {
        ec.clear();
        if (engine_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return std::nullopt;
        }
        using out = std::pair<std::error_code, std::optional<leader_info>>;
        auto e = engine_;
        auto r = engine_->call<out>(
            [e, n = std::string(name)](std::function<void(out)> done) {
                read_leader(e, n, [done](std::error_code ec2, std::optional<leader_info> li) {
                    done({ec2, std::move(li)});
                });
            },
            {make_error_code(errc::cancelled), std::nullopt});
        ec = r.first;
        return std::move(r.second);
    }

    std::shared_ptr<observer> observe(std::string_view name, observe_fn cb,
                                      std::error_code& ec) override {
        return observe_election(engine_, name, std::move(cb), ec);
    }

    void shutdown() noexcept override { engine_->shutdown(); }

private:
    bool check(lock_kind kind, std::error_code& ec) const {
        if (engine_->on_io_thread())
            ec = make_error_code(errc::invalid_argument);
        else if (!supports(kind))
            ec = make_error_code(errc::unsupported);
        return !ec;
    }

    std::shared_ptr<engine> engine_;
};

} // namespace
} // namespace pg

std::shared_ptr<lock_backend> make_postgres_backend(std::string_view url, std::error_code& ec,
                                                    std::string* why, const log_options& log) {
    auto s = pg::parse_settings(url, ec, why);
    if (ec) return nullptr;
    return std::make_shared<pg::pg_backend>(std::move(s), log);
}

} // namespace dlock::detail

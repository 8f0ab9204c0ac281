// client::acquire_all and dlock::multi_mutex: the blocking and async shells around
// core::multi_sequence. The members are lease handles taken through the client's backend
// (lock_backend::acquire / async_acquire), one at a time in name order; the sequence decides
// what comes next. One path for every backend.
#include "access.hpp"
#include "core/lock_backend.hpp"
#include "core/loss_signal.hpp"
#include "core/multi_sequence.hpp"
#include "hand_out.hpp"
#include "multi_state.hpp"

#include <dlock/client.hpp>
#include <dlock/multi_lock.hpp>

#include <asio/post.hpp>

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace dlock::detail {

/// A multi_mutex: its set, its client and the current hold (guarded: any thread may lock).
struct multi_mutex_state {
    client* c = nullptr;
    std::vector<lock_ref> locks; // sorted
    mutable std::mutex mu;
    multi_lease held;        // guarded by mu
    std::thread::id owner{}; // guarded by mu
};

namespace {

using clock = std::chrono::steady_clock;
using seq_action = multi_sequence::action_type;

/// The members sorted by (name, kind), each checked by `backend`. Errors: invalid_argument for
/// an empty set, a name given twice or a bad name; unsupported for a kind the backend does not
/// offer.
std::error_code sorted_members(std::span<const lock_ref> in, std::vector<lock_ref>& out,
                               const lock_backend& backend) {
    if (in.empty()) return make_error_code(errc::invalid_argument);
    out.assign(in.begin(), in.end());
    std::sort(out.begin(), out.end(), [](const lock_ref& a, const lock_ref& b) {
        return a.name != b.name ? a.name < b.name : a.kind < b.kind;
    });
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (i > 0 && out[i].name == out[i - 1].name) return make_error_code(errc::invalid_argument);
        if (auto ec = backend.check_name(out[i].name, out[i].kind)) return ec;
    }
    return {};
}

acquire_options member_options(const acquire_options& opts, lock_kind kind,
                               const multi_sequence::action& a) {
    acquire_options o = opts;
    o.kind = kind;
    o.wait = a.wait;
    o.lease = a.lease;
    return o;
}

bool any_lost(const std::vector<lease>& held) {
    return std::any_of(held.begin(), held.end(), [](const lease& l) { return l.lost(); });
}

/// Keeps the error a refresh reports: a lost member (not_owner) wins, else the first error.
void keep(std::error_code& first, std::error_code e) {
    if (!e || first == errc::not_owner) return;
    if (!first || e == errc::not_owner) first = e;
}

multi_lease make_multi(std::vector<lease> held) {
    auto s = std::make_shared<multi_state>();
    s->members = std::move(held);
    std::weak_ptr<multi_state> w = s;
    for (auto& m : s->members)
        m.on_lost([w] {
            if (auto p = w.lock()) p->member_lost();
        });
    return access::make_multi(std::move(s));
}

/// The async shell: one acquisition of a set, alive until it reports.
class multi_acquire_op : public std::enable_shared_from_this<multi_acquire_op> {
public:
    using done_fn = std::function<void(std::error_code, multi_lease)>;
    multi_acquire_op(std::shared_ptr<lock_backend> b, std::vector<lock_ref> members,
                     const acquire_options& opts, done_fn done)
        : b_(std::move(b))
        , members_(std::move(members))
        , opts_(opts)
        , seq_(members_.size(), opts.wait, opts.lease, clock::now())
        , done_(std::move(done)) {}

    void start() { run(seq_.start(clock::now())); }

private:
    void run(multi_sequence::action a) {
        auto self = shared_from_this();
        switch (a.what) {
        case seq_action::acquire: {
            const auto& m = members_[a.member];
            b_->async_acquire(m.name, member_options(opts_, m.kind, a),
                              [self, kind = m.kind](std::error_code ec, std::shared_ptr<hold> h) {
                                  if (h && !ec) {
                                      hand_out(*h, self->opts_);
                                      h->set_kind(kind);
                                  }
                                  self->on_member(ec, h && !ec ? access::make_lease(std::move(h))
                                                               : lease{});
                              });
            return;
        }
        case seq_action::refresh: {
            if (a.count == 0) return run(seq_.refreshed(clock::now(), {}, earliest(held_)));
            begin_countdown(a.count);
            for (std::size_t j = 0; j < a.count; ++j)
                held_[j].async_extend(*a.lease, [self](std::error_code ec) {
                    if (self->count_down(ec))
                        self->run(self->seq_.refreshed(clock::now(), self->first_,
                                                       earliest(self->held_)));
                });
            return;
        }
        case seq_action::release: {
            if (held_.empty()) return run(seq_.released(clock::now()));
            begin_countdown(held_.size());
            // Every release is sent before any completes; their errors do not matter here
            // (a failed release is given up and the key expires).
            for (std::size_t j = held_.size(); j-- > 0;)
                held_[j].async_release([self](std::error_code) {
                    if (self->count_down({})) {
                        self->held_.clear();
                        self->run(self->seq_.released(clock::now()));
                    }
                });
            return;
        }
        case seq_action::done: {
            auto done = std::move(done_);
            if (!a.acquired) {
                held_.clear();
                return done(a.ec, multi_lease{});
            }
            return done({}, make_multi(std::move(held_)));
        }
        }
    }

    void on_member(std::error_code ec, lease l) {
        const auto now = clock::now();
        if (ec) return run(seq_.failed(ec));
        if (!l) return run(seq_.not_acquired(now));
        held_.push_back(std::move(l));
        run(seq_.acquired(now, any_lost(held_), earliest(held_)));
    }

    void begin_countdown(std::size_t n) {
        std::lock_guard lk(mu_);
        pending_ = n;
        first_.clear();
    }
    /// True for the last of the operations counted.
    bool count_down(std::error_code ec) {
        std::lock_guard lk(mu_);
        keep(first_, ec);
        return --pending_ == 0;
    }

    std::shared_ptr<lock_backend> b_;
    std::vector<lock_ref> members_;
    acquire_options opts_;
    multi_sequence seq_;
    done_fn done_;
    std::vector<lease> held_;
    // Completions of a refresh or release may run on several threads (a member whose client is
    // gone completes on the system executor): the countdown is guarded.
    std::mutex mu_;
    std::size_t pending_ = 0;
    std::error_code first_;
};

} // namespace
} // namespace dlock::detail

namespace dlock {

// ---- client ------------------------------------------------------------------------------

multi_lease client::acquire_all(std::span<const lock_ref> locks, const acquire_options& opts) {
    std::error_code ec;
    auto m = acquire_all(locks, opts, ec);
    throw_if(ec);
    return m;
}

multi_lease client::acquire_all(std::initializer_list<lock_ref> locks,
                                const acquire_options& opts) {
    return acquire_all(std::span<const lock_ref>(locks.begin(), locks.size()), opts);
}

multi_lease client::acquire_all(std::span<const lock_ref> locks, const acquire_options& opts,
                                std::error_code& ec) {
    using namespace detail;
    ec.clear();
    if (backend_->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    std::vector<lock_ref> members;
    if ((ec = sorted_members(locks, members, *backend_))) return {};
    multi_sequence seq(members.size(), opts.wait, opts.lease, clock::now());
    std::vector<lease> held;
    auto a = seq.start(clock::now());
    for (;;) {
        switch (a.what) {
        case seq_action::acquire: {
            const auto& m = members[a.member];
            std::error_code e;
            lease l = acquire(m.name, member_options(opts, m.kind, a), e);
            const auto now = clock::now();
            if (e) {
                a = seq.failed(e);
            } else if (!l) {
                a = seq.not_acquired(now);
            } else {
                held.push_back(std::move(l));
                a = seq.acquired(now, any_lost(held), earliest(held));
            }
            break;
        }
        case seq_action::refresh: {
            std::error_code first;
            for (std::size_t j = 0; j < a.count; ++j) {
                std::error_code e;
                held[j].extend(*a.lease, e);
                keep(first, e);
            }
            a = seq.refreshed(clock::now(), first, earliest(held));
            break;
        }
        case seq_action::release:
            for (std::size_t j = held.size(); j-- > 0;) {
                std::error_code ignore; // given up: the key expires
                held[j].release(ignore);
            }
            held.clear();
            a = seq.released(clock::now());
            break;
        case seq_action::done:
            ec = a.ec;
            if (!a.acquired) return {};
            return make_multi(std::move(held));
        }
    }
}

void client::start_async_acquire_all(std::vector<lock_ref> locks, const acquire_options& opts,
                                     std::function<void(std::error_code, multi_lease)> done) {
    std::vector<lock_ref> members;
    auto ec = detail::sorted_members(locks, members, *backend_);
    if (!ec && !detail::valid_hold_options(opts)) ec = make_error_code(errc::invalid_argument);
    if (ec)
        return asio::post(get_executor(),
                          [done = std::move(done), ec] { done(ec, multi_lease{}); });
    auto op = std::make_shared<detail::multi_acquire_op>(backend_, std::move(members), opts,
                                                         std::move(done));
    op->start();
}

// ---- multi_mutex -------------------------------------------------------------------------

multi_mutex::multi_mutex(client& c, std::vector<lock_ref> locks)
    : s_(std::make_unique<detail::multi_mutex_state>()) {
    s_->c = &c;
    throw_if(detail::sorted_members(locks, s_->locks, *detail::access::backend(c)));
}

multi_mutex::multi_mutex(multi_mutex&&) noexcept = default;
multi_mutex& multi_mutex::operator=(multi_mutex&&) noexcept = default;
multi_mutex::~multi_mutex() = default; // the held multi_lease releases itself

void multi_mutex::lock() {
    std::error_code ec;
    lock_impl(std::nullopt, std::nullopt, ec);
    throw_if(ec);
}

void multi_mutex::lock(fixed_lease lease) {
    std::error_code ec;
    lock_impl(std::nullopt, lease.duration, ec);
    throw_if(ec);
}

void multi_mutex::lock(std::error_code& ec) {
    lock_impl(std::nullopt, std::nullopt, ec);
}

bool multi_mutex::try_lock() {
    return try_lock_impl(milliseconds{0}, std::nullopt);
}

bool multi_mutex::try_lock_for(milliseconds wait, std::error_code& ec) {
    return lock_impl(wait, std::nullopt, ec);
}

bool multi_mutex::try_lock_impl(std::optional<milliseconds> wait,
                                std::optional<milliseconds> lease) {
    std::error_code ec;
    const bool ok = lock_impl(wait, lease, ec);
    throw_if(ec);
    return ok;
}

bool multi_mutex::lock_impl(std::optional<milliseconds> wait, std::optional<milliseconds> lease,
                            std::error_code& ec) {
    ec.clear();
    if (!s_) {
        ec = make_error_code(errc::invalid_argument);
        return false;
    }
    {
        std::lock_guard lk(s_->mu);
        if (s_->owner == std::this_thread::get_id()) {
            ec = make_error_code(errc::invalid_argument); // not reentrant
            return false;
        }
    }
    auto m = s_->c->acquire_all(s_->locks, {.wait = wait, .lease = lease}, ec);
    if (ec || !m) return false;
    std::lock_guard lk(s_->mu);
    s_->held = std::move(m); // the previous holder moved its hold out in unlock()
    s_->owner = std::this_thread::get_id();
    return true;
}

void multi_mutex::unlock() {
    std::error_code ec;
    unlock(ec);
    throw_if(ec);
}

void multi_mutex::unlock(std::error_code& ec) {
    ec.clear();
    multi_lease m;
    if (!s_) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    {
        std::lock_guard lk(s_->mu);
        if (s_->owner != std::this_thread::get_id()) {
            ec = make_error_code(errc::not_owner);
            return;
        }
        m = std::move(s_->held);
        s_->owner = {};
    }
    const bool was_lost = m.lost();
    m.release(ec);
    if (!ec && was_lost) ec = make_error_code(errc::not_owner);
}

bool multi_mutex::is_held_by_this_thread() const {
    if (!s_) return false;
    std::lock_guard lk(s_->mu);
    return s_->owner == std::this_thread::get_id() && s_->held && !s_->held.lost();
}

std::stop_token multi_mutex::stop_token() const {
    if (!s_) return {};
    std::lock_guard lk(s_->mu);
    return s_->held.stop_token();
}

std::chrono::steady_clock::time_point multi_mutex::valid_until() const {
    if (!s_) return {};
    std::lock_guard lk(s_->mu);
    return s_->held.valid_until();
}

void multi_mutex::on_lost(std::function<void()> cb) {
    if (!s_) return;
    std::shared_ptr<detail::multi_state> st;
    {
        std::lock_guard lk(s_->mu);
        st = detail::access::state(s_->held);
    }
    if (st) st->on_lost(std::move(cb)); // may run `cb` at once: not under our mutex
}

const std::vector<lock_ref>& multi_mutex::locks() const noexcept {
    static const std::vector<lock_ref> none;
    return s_ ? s_->locks : none;
}

} // namespace dlock

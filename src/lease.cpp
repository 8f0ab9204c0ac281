// dlock::lease: the RAII handle of one acquisition by an owner id of its own.
#include "redis/client_impl.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <dlock/lease.hpp>

namespace dlock {
namespace {

/// Ends the handle's hold by the release's outcome; returns the caller's error.
std::error_code end(detail::hold_state& h, const detail::release_outcome& out) {
    // Only the server saying "not yours" makes the hold lost; a failed release (ambiguous,
    // unavailable) still ends the handle: the lock expires after its lease.
    if (out.what == detail::release_outcome::kind::not_owner) {
        h.end_lost();
        return make_error_code(errc::not_owner);
    }
    h.end_released();
    return out.what == detail::release_outcome::kind::error ? out.ec : std::error_code{};
}

/// The checks before a release of `h`, shared by release() and async_release(). Returns the
/// client when a release must be sent (the hold is then marked releasing and off the
/// watchdog); otherwise null, with `ec` saying why (clear: nothing to release).
std::shared_ptr<detail::client_impl> begin_release(const std::shared_ptr<detail::hold_state>& h,
                                                   std::error_code& ec) {
    if (!h || h->released()) return nullptr;
    auto c = h->client.lock();
    if (!c || c->shut_down()) {
        h->end_released();
        ec = make_error_code(errc::cancelled);
        return nullptr;
    }
    c->renewal().remove(h);
    if (h->lost()) {
        ec = make_error_code(errc::not_owner);
        return nullptr;
    }
    h->releasing = true;
    return c;
}

/// The checks before an extension of `h`, shared by extend() and async_extend(). Returns the
/// client when the command must be sent; otherwise null with `ec` set.
std::shared_ptr<detail::client_impl> begin_extend(const std::shared_ptr<detail::hold_state>& h,
                                                  std::chrono::milliseconds lease_ms,
                                                  std::error_code& ec) {
    ec.clear();
    if (!h || h->released()) {
        ec = make_error_code(errc::not_owner);
        return nullptr;
    }
    if (lease_ms.count() < 1) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    auto c = h->client.lock();
    if (!c) {
        ec = make_error_code(errc::cancelled);
        return nullptr;
    }
    if (h->lost()) {
        ec = make_error_code(errc::not_owner);
        return nullptr;
    }
    return c;
}

/// Reads the extension's reply (`ec`: its transport error) and updates `h`; returns the
/// caller's error.
std::error_code end_extend(detail::client_impl& c, const std::shared_ptr<detail::hold_state>& h,
                           std::chrono::milliseconds lease_ms,
                           std::chrono::steady_clock::time_point sent, std::error_code ec,
                           const resp3::value& v) {
    if (ec) return ec;
    if ((ec = detail::reply_error(v))) return ec;
    std::vector<char> ok;
    if (!detail::lock_protocol::read_renew({}, v, 1, ok))
        return make_error_code(errc::protocol_error);
    if (!ok[0]) {
        c.renewal().remove(h);
        h->end_lost();
        return make_error_code(errc::not_owner);
    }
    h->set_valid_until(sent + lease_ms - detail::drift_for(lease_ms));
    return {};
}

/// One extension in flight (lease::async_extend).
class extend_op final : public detail::request {
public:
    std::shared_ptr<detail::hold_state> hold;
    std::chrono::milliseconds lease_ms{};
    std::chrono::steady_clock::time_point sent_at;
    detail::command cmd;
    std::function<void(std::error_code)> done;

    void complete(std::error_code ec, resp3::value&& reply) override {
        auto c = hold->client.lock();
        if (!c)
            ec = make_error_code(errc::cancelled);
        else
            ec = end_extend(*c, hold, lease_ms, sent_at, ec, reply);
        auto d = std::move(done);
        delete this;
        if (d) d(ec);
    }
};

} // namespace

lease::lease(lease&&) noexcept = default;

lease& lease::operator=(lease&& o) noexcept {
    if (this != &o) {
        std::error_code ignore;
        release(ignore);
        state_ = std::move(o.state_);
    }
    return *this;
}

lease::~lease() {
    std::error_code ignore;
    release(ignore);
}

const std::string& lease::name() const {
    static const std::string empty;
    return state_ ? state_->keys.key : empty; // on Redis the name is the key N
}

std::optional<std::uint64_t> lease::token() const {
    return state_ ? state_->token : std::nullopt;
}

std::chrono::steady_clock::time_point lease::valid_until() const {
    return state_ ? state_->valid_until() : std::chrono::steady_clock::time_point{};
}

bool lease::lost() const noexcept {
    return state_ && state_->lost();
}

std::stop_token lease::stop_token() const {
    return state_ ? state_->stop_token() : std::stop_token{};
}

void lease::on_lost(std::function<void()> cb) {
    if (state_) state_->on_lost(std::move(cb));
}

void lease::release() {
    std::error_code ec;
    release(ec);
    throw_if(ec);
}

void lease::release(std::error_code& ec) {
    ec.clear();
    auto h = std::move(state_);
    auto c = begin_release(h, ec);
    if (!c) return;
    if (c->on_io_thread()) {
        // Called from a completion handler: never block the I/O thread.
        detail::release_async(*c, h, [h](detail::release_outcome out) { end(*h, out); });
        return;
    }
    const auto out = detail::release_blocking(*c, h);
    ec = end(*h, out);
}

void lease::extend(std::chrono::milliseconds lease_ms) {
    std::error_code ec;
    extend(lease_ms, ec);
    throw_if(ec);
}

void lease::extend(std::chrono::milliseconds lease_ms, std::error_code& ec) {
    auto c = begin_extend(state_, lease_ms, ec);
    if (!c) return;
    detail::command cmd;
    const detail::hold_state* one[] = {state_.get()};
    state_->protocol->renew(cmd, one, lease_ms);
    const auto sent = std::chrono::steady_clock::now();
    const auto v = c->run(*state_->where, cmd, ec);
    ec = end_extend(*c, state_, lease_ms, sent, ec, v);
}

void lease::start_extend(std::shared_ptr<detail::hold_state> h, std::chrono::milliseconds lease_ms,
                         std::function<void(std::error_code)> done) {
    std::error_code ec;
    auto c = begin_extend(h, lease_ms, ec);
    if (!c) return done(ec);
    auto* op = new extend_op();
    op->hold = std::move(h);
    op->lease_ms = lease_ms;
    op->done = std::move(done);
    const detail::hold_state* one[] = {op->hold.get()};
    op->hold->protocol->renew(op->cmd, one, lease_ms);
    op->args = op->cmd.args();
    op->eval_fallback = op->cmd.eval_fallback();
    op->sent_at = std::chrono::steady_clock::now();
    op->deadline = op->sent_at + c->options().command_timeout;
    op->hold->where->conn().submit(*op); // op may be gone from here on
}

asio::any_io_executor lease::executor_of(const std::shared_ptr<detail::hold_state>& h) {
    auto c = h ? h->client.lock() : nullptr;
    return c && !c->shut_down() ? asio::any_io_executor(c->io().get_executor())
                                : asio::any_io_executor{};
}

void lease::start_release(std::shared_ptr<detail::hold_state> h,
                          std::function<void(std::error_code)> done) {
    std::error_code ec;
    auto c = begin_release(h, ec);
    if (!c) return done(ec);
    detail::release_async(*c, h, [h, done = std::move(done)](detail::release_outcome out) {
        const auto e = end(*h, out);
        if (done) done(e);
    });
}

} // namespace dlock

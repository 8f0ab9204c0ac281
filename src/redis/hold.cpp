// redis_hold as a lease's detail::hold: release and extend of one single-node Redis hold
// (moved here from lease.cpp when the lease became backend-neutral; behaviour unchanged).
#include "redis/hold.hpp"

#include "redis/client.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {
namespace {

/// Ends the handle's hold by the release's outcome; returns the caller's error.
std::error_code end(redis_hold& h, const release_outcome& out) {
    // Only the server saying "not yours" makes the hold lost; a failed release (ambiguous,
    // unavailable) still ends the handle: the lock expires after its lease.
    if (out.what == release_outcome::kind::not_owner) {
        h.end_lost();
        return make_error_code(errc::not_owner);
    }
    h.end_released();
    return out.what == release_outcome::kind::error ? out.ec : std::error_code{};
}

/// The checks before a release of `h`, shared by release_blocking() and release_async().
/// Returns the client when a release must be sent (the hold is then marked releasing and off
/// the watchdog); otherwise null, with `ec` saying why (clear: nothing to release).
std::shared_ptr<redis_client> begin_release(const std::shared_ptr<redis_hold>& h,
                                            std::error_code& ec) {
    if (h->released()) return nullptr;
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

/// The checks before an extension of `h`, shared by extend() and extend_async(). Returns the
/// client when the command must be sent; otherwise null with `ec` set.
std::shared_ptr<redis_client> begin_extend(const std::shared_ptr<redis_hold>& h,
                                           std::chrono::milliseconds lease_ms,
                                           std::error_code& ec) {
    ec.clear();
    if (h->released()) {
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
std::error_code end_extend(redis_client& c, const std::shared_ptr<redis_hold>& h,
                           std::chrono::milliseconds lease_ms,
                           std::chrono::steady_clock::time_point sent, std::error_code ec,
                           const resp3::value& v) {
    if (ec) return ec;
    if ((ec = reply_error(v))) return ec;
    std::vector<char> ok;
    if (!lock_protocol::read_renew({}, v, 1, ok)) return make_error_code(errc::protocol_error);
    if (!ok[0]) {
        c.renewal().remove(h);
        h->end_lost();
        return make_error_code(errc::not_owner);
    }
    h->set_valid_until(sent + lease_ms - drift_for(lease_ms));
    c.renewal().add(h); // (already registered: re-arms the loss check if it is now earlier)
    return {};
}

/// One extension in flight (extend_async).
class extend_op final : public request {
public:
    std::shared_ptr<redis_hold> hold;
    std::chrono::milliseconds lease_ms{};
    std::chrono::steady_clock::time_point sent_at;
    command cmd;
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

void redis_hold::release_blocking(std::error_code& ec) {
    ec.clear();
    auto h = std::static_pointer_cast<redis_hold>(shared_from_this());
    auto c = begin_release(h, ec);
    if (!c) return;
    if (c->on_io_thread()) {
        // Called from a completion handler: never block the I/O thread.
        detail::release_async(*c, h, [h](release_outcome out) { end(*h, out); });
        return;
    }
    const auto out = detail::release_blocking(*c, h);
    ec = end(*h, out);
}

void redis_hold::release_async(std::function<void(std::error_code)> done) {
    auto h = std::static_pointer_cast<redis_hold>(shared_from_this());
    std::error_code ec;
    auto c = begin_release(h, ec);
    if (!c) return done(ec);
    detail::release_async(*c, h, [h, done = std::move(done)](release_outcome out) {
        const auto e = end(*h, out);
        if (done) done(e);
    });
}

void redis_hold::extend(std::chrono::milliseconds lease_ms, std::error_code& ec) {
    auto h = std::static_pointer_cast<redis_hold>(shared_from_this());
    auto c = begin_extend(h, lease_ms, ec);
    if (!c) return;
    command cmd;
    const lock_holder* one[] = {this};
    protocol->renew(cmd, one, lease_ms);
    const auto sent = std::chrono::steady_clock::now();
    const auto v = c->run(*where, cmd, ec);
    ec = end_extend(*c, h, lease_ms, sent, ec, v);
}

void redis_hold::extend_async(std::chrono::milliseconds lease_ms,
                              std::function<void(std::error_code)> done) {
    auto h = std::static_pointer_cast<redis_hold>(shared_from_this());
    std::error_code ec;
    auto c = begin_extend(h, lease_ms, ec);
    if (!c) return done(ec);
    auto* op = new extend_op();
    op->hold = std::move(h);
    op->lease_ms = lease_ms;
    op->done = std::move(done);
    const lock_holder* one[] = {op->hold.get()};
    protocol->renew(op->cmd, one, lease_ms);
    op->args = op->cmd.args();
    op->eval_fallback = op->cmd.eval_fallback();
    op->sent_at = std::chrono::steady_clock::now();
    op->deadline = op->sent_at + c->options().command_timeout;
    where->conn().submit(*op); // op may be gone from here on
}

void redis_hold::with_metrics(const std::function<void(client_metrics&)>& f) const {
    if (auto c = client.lock()) f(c->metrics());
}

asio::any_io_executor redis_hold::executor() const {
    auto c = client.lock();
    return c && !c->shut_down() ? asio::any_io_executor(c->io().get_executor())
                                : asio::any_io_executor{};
}

} // namespace dlock::detail

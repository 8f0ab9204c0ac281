// hold_state as a lease's detail::hold: release and extend of one single-node Redis hold
// (moved here from lease.cpp when the lease became backend-neutral; behaviour unchanged).
#include "redis/hold.hpp"

#include "redis/client_impl.hpp"
#include "redis/release.hpp"
#include "redis/renewal.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {
namespace {

/// Ends the handle's hold by the release's outcome; returns the caller's error.
std::error_code end(hold_state& h, const release_outcome& out) {
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
std::shared_ptr<client_impl> begin_release(const std::shared_ptr<hold_state>& h,
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

} // namespace

void hold_state::release_blocking(std::error_code& ec) {
    ec.clear();
    auto h = std::static_pointer_cast<hold_state>(shared_from_this());
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

void hold_state::release_async(std::function<void(std::error_code)> done) {
    auto h = std::static_pointer_cast<hold_state>(shared_from_this());
    std::error_code ec;
    auto c = begin_release(h, ec);
    if (!c) return done(ec);
    detail::release_async(*c, h, [h, done = std::move(done)](release_outcome out) {
        const auto e = end(*h, out);
        if (done) done(e);
    });
}

void hold_state::extend(std::chrono::milliseconds lease_ms, std::error_code& ec) {
    ec.clear();
    if (released()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    if (lease_ms.count() < 1) {
        ec = make_error_code(errc::invalid_argument);
        return;
    }
    auto c = client.lock();
    if (!c) {
        ec = make_error_code(errc::cancelled);
        return;
    }
    if (lost()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    command cmd;
    const hold_state* one[] = {this};
    protocol->renew(cmd, one, lease_ms);
    const auto sent = std::chrono::steady_clock::now();
    const auto v = c->run(*where, cmd, ec);
    if (ec) return;
    if ((ec = reply_error(v))) return;
    std::vector<char> ok;
    if (!lock_protocol::read_renew({}, v, 1, ok)) {
        ec = make_error_code(errc::protocol_error);
        return;
    }
    if (!ok[0]) {
        c->renewal().remove(std::static_pointer_cast<hold_state>(shared_from_this()));
        end_lost();
        ec = make_error_code(errc::not_owner);
        return;
    }
    set_valid_until(sent + lease_ms - drift_for(lease_ms));
}

asio::any_io_executor hold_state::executor() const {
    auto c = client.lock();
    return c && !c->shut_down() ? asio::any_io_executor(c->io().get_executor())
                                : asio::any_io_executor{};
}

} // namespace dlock::detail

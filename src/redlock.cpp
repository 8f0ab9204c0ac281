// The public calls of dlock/redlock.hpp: the client over Redlock options, and what only a
// Redlock client has (votes, masters, quorum) over redlock_backend (redis/redlock/backend.cpp).
// On a client of another backend they are errc::unsupported (wrong_backend.hpp).
#include "access.hpp"
#include "hand_out.hpp"
#include "redis/redlock/backend.hpp"
#include "redis/redlock/redlock_impl.hpp"
#include "wrong_backend.hpp"

#include <dlock/redlock.hpp>

namespace dlock {

client::client(const redlock_options& opts)
    : backend_(std::make_shared<detail::redlock_backend>(opts)) {}

detail::redlock_backend* detail::access::redlock(const client& c) noexcept {
    return dynamic_cast<redlock_backend*>(c.backend_.get());
}

namespace {
/// The Redlock backend of `c`, or null with `ec` = errc::unsupported.
detail::redlock_backend* redlock_of(const client& c, std::error_code& ec) {
    auto* r = detail::access::redlock(c);
    ec = r ? std::error_code{} : make_error_code(errc::unsupported);
    return r;
}

/// The Redlock backend of `c`; throws the wrong backend named for `call` on another client.
detail::redlock_backend& redlock_or_throw(const client& c, std::string_view call) {
    auto* r = detail::access::redlock(c);
    if (!r) throw detail::wrong_backend(c, call, detail::needs_redlock);
    return *r;
}
} // namespace

void detail::redlock_start_acquire(client& c, std::string name, const acquire_options& opts,
                                   std::function<void(std::error_code, redlock_acquisition)> done) {
    std::error_code ec;
    auto* r = redlock_of(c, ec);
    if (r && !valid_hold_options(opts)) ec = make_error_code(errc::invalid_argument);
    if (r && !ec)
        return r->start_acquire(
            std::move(name), opts,
            [opts, done = std::move(done)](std::error_code e, redlock_acquisition a) {
                if (auto h = access::state(a.held); h && !e) hand_out(*h, opts);
                done(e, std::move(a));
            });
    asio::post(c.get_executor(), [done = std::move(done), ec] { done(ec, {}); });
}

namespace redlock {

std::size_t masters(const client& c, std::error_code& ec) {
    auto* r = redlock_of(c, ec);
    return r ? r->impl().size() : 0;
}

std::size_t masters(const client& c) {
    return redlock_or_throw(c, "dlock::redlock::masters").impl().size();
}

std::size_t quorum(const client& c) {
    const auto& r = redlock_or_throw(c, "dlock::redlock::quorum");
    return detail::quorum_round::quorum_of(r.impl().size());
}

const redlock_options& options(const client& c) {
    return redlock_or_throw(c, "dlock::redlock::options").impl().options();
}

redlock_acquisition acquire_with_votes(client& c, std::string_view name,
                                       const acquire_options& opts, std::error_code& ec) {
    auto* r = redlock_of(c, ec);
    if (r && !detail::valid_hold_options(opts)) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    auto a = r ? r->acquire_with_votes(name, opts, ec) : redlock_acquisition{};
    if (auto h = detail::access::state(a.held); h && !ec) detail::hand_out(*h, opts);
    return a;
}

std::vector<redlock_vote> votes(const lease& l) {
    auto h = std::dynamic_pointer_cast<detail::redlock_hold>(detail::access::state(l));
    return h ? h->votes() : std::vector<redlock_vote>{};
}

} // namespace redlock
} // namespace dlock

// detail::access: the library's way into the public objects (their backend, hold and state),
// for the facades, the backends, tests and benchmarks. Never installed.
#pragma once

#include <dlock/client.hpp>
#include <dlock/election.hpp>
#include <dlock/lease.hpp>
#include <dlock/multi_lock.hpp>

#include <memory>

namespace dlock::detail {

class redis_client;
class redis_backend;
class redlock_backend;

struct access {
    /// The client's backend (never null for a client that was not moved from).
    static const std::shared_ptr<lock_backend>& backend(const client& c) noexcept {
        return c.backend_;
    }
    /// The client's Redis backend, or null on another backend (redis/backend.cpp).
    static redis_backend* redis(const client& c) noexcept;
    /// The client's Redlock backend, or null on another backend (src/redlock.cpp).
    static redlock_backend* redlock(const client& c) noexcept;
    /// The Redis client's internals, or null on another backend (redis/backend.cpp).
    static std::shared_ptr<redis_client> impl(const client& c) noexcept;
    /// Throws dlock::error(ec, c.last_error_detail()) when `ec` is a failure the detail can
    /// explain (the throwing overloads of the backends' own calls, dlock/redis.hpp).
    static void throw_with_detail(const client& c, const std::error_code& ec) {
        c.throw_with_detail(ec);
    }
    /// A client over `b` (what client(url) makes for every URL).
    static client make_client(std::shared_ptr<lock_backend> b) { return client(std::move(b)); }
    static lease make_lease(std::shared_ptr<hold> h) noexcept { return lease(std::move(h)); }
    static const std::shared_ptr<hold>& state(const lease& l) noexcept { return l.state_; }
    /// The hold of `l`, which is left empty (its destructor releases nothing).
    static std::shared_ptr<hold> take(lease& l) noexcept { return std::move(l.state_); }
    static leadership make_leadership(lease l, std::weak_ptr<lock_backend> b) noexcept {
        return leadership(std::move(l), std::move(b));
    }
    static observation make_observation(std::shared_ptr<observer> o,
                                        std::shared_ptr<observe_queue> q = nullptr,
                                        asio::any_io_executor ex = {}) noexcept {
        return observation(std::move(o), std::move(q), std::move(ex));
    }
    /// Takes the observer out of `o` (which is then empty without being stopped).
    static std::shared_ptr<observer> observer_of(observation& o) noexcept {
        return std::move(o.state_);
    }
    static multi_lease make_multi(std::shared_ptr<multi_state> s) noexcept {
        return multi_lease(std::move(s));
    }
    static const std::shared_ptr<multi_state>& state(const multi_lease& m) noexcept {
        return m.state_;
    }
};

} // namespace dlock::detail

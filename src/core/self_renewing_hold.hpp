// core/self_renewing_hold.hpp: what the holds of the backends that renew their own lease share
// (a ZooKeeper session, an etcd lease with its keep-alive stream): extend() sends nothing
// (not_owner once the hold ended, invalid_argument for a lease under 1 ms), and a blocking
// release is release_async() waited for up to a budget (errc::ambiguous after it).
#pragma once

#include "core/hold.hpp"
#include "core/metrics.hpp"
#include "core/runtime.hpp"

#include <dlock/error.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace dlock::detail {

class self_renewing_hold : public hold {
public:
    void extend(std::chrono::milliseconds lease, std::error_code& ec) override {
        ec = check_extend(lease); // renewed by the backend: nothing to send
    }
    void extend_async(std::chrono::milliseconds lease,
                      std::function<void(std::error_code)> done) override {
        done(check_extend(lease));
    }

protected:
    /// The session (or lease) was renewed to `t`, and this hold with it: the slack left is
    /// counted in `m` (null: the backend is gone), then valid_until moves. Nothing once ended.
    void session_renewed(client_metrics* m, std::chrono::steady_clock::time_point t) {
        if (lost() || released()) return;
        if (m) m->renewal_slack(valid_until());
        set_valid_until(t);
    }
    /// with_metrics() of a backend `B` (counters()) known as `live` on its I/O thread (null
    /// once gone) and as `backend` elsewhere (kept alive while `f` runs).
    template <class B>
    static void with_backend_metrics(B* live, const std::weak_ptr<B>& backend,
                                     const std::function<void(client_metrics&)>& f) {
        if (live && live->on_io_thread()) return f(live->counters());
        if (auto b = backend.lock()) f(b->counters());
    }
    std::error_code check_extend(std::chrono::milliseconds lease) const {
        if (lease < std::chrono::milliseconds(1)) return make_error_code(errc::invalid_argument);
        if (lost() || released()) return make_error_code(errc::not_owner);
        return {};
    }
    /// release_blocking()'s body: on the I/O thread only starts the release (it must not
    /// block there); without a live backend reports not_owner for a lost hold; otherwise waits
    /// for release_async() up to `budget`.
    void release_and_wait(std::error_code& ec, bool on_io_thread, bool backend_alive,
                          std::chrono::nanoseconds budget) {
        ec.clear();
        if (on_io_thread) return release_async([](std::error_code) {});
        if (!backend_alive) {
            if (lost()) ec = errc::not_owner;
            return;
        }
        auto slot = std::make_shared<one_shot<std::error_code>>();
        release_async([slot](std::error_code e) { slot->set(e); });
        auto e = slot->take_for(budget);
        ec = e ? *e : make_error_code(errc::ambiguous);
    }
};

} // namespace dlock::detail

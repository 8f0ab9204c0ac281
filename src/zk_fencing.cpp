// dlock::zk_fenced_set: the public shell over zk_backend::fenced_set (a multi of check + write).
#include "access.hpp"

#include <dlock/client.hpp>
#include <dlock/error.hpp>
#include <dlock/lease.hpp>
#include <dlock/zk_fencing.hpp>

#if defined(DLOCK_WITH_ZOOKEEPER)
#include "zookeeper/backend.hpp"
#include "zookeeper/hold.hpp"
#endif

namespace dlock {

bool zk_fenced_set(client& c, const lease& held, std::string_view node, std::string_view data,
                   std::error_code& ec) {
    ec.clear();
#if defined(DLOCK_WITH_ZOOKEEPER)
    auto* b = dynamic_cast<detail::zk::zk_backend*>(detail::access::backend(c).get());
    if (!b) {
        ec = make_error_code(errc::unsupported);
        return false;
    }
    const auto* h = dynamic_cast<const detail::zk::zk_hold*>(detail::access::state(held).get());
    if (!h) {
        ec = make_error_code(errc::invalid_argument);
        return false;
    }
    if (h->lost() || h->released()) {
        ec = make_error_code(errc::not_owner);
        return false;
    }
    ec = b->fenced_set(h->path(), node, data);
    return !ec;
#else
    (void)c;
    (void)held;
    (void)node;
    (void)data;
    ec = make_error_code(errc::unsupported);
    return false;
#endif
}

void zk_fenced_set(client& c, const lease& held, std::string_view node, std::string_view data) {
    std::error_code ec;
    if (!zk_fenced_set(c, held, node, data, ec)) {
        if (auto d = c.last_error_detail(); !d.empty() && ec != errc::unsupported)
            throw error(ec, d);
        throw_if(ec);
    }
}

} // namespace dlock

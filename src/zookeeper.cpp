// dlock::zookeeper::fenced_set (dlock/zookeeper.hpp): the public shell over zk_backend::fenced_set
// (a multi of check + write); errc::unsupported on a client of another backend.
#include "access.hpp"
#include "wrong_backend.hpp"

#include <dlock/client.hpp>
#include <dlock/error.hpp>
#include <dlock/lease.hpp>
#include <dlock/zookeeper.hpp>

#if defined(DLOCK_WITH_ZOOKEEPER)
#include "zookeeper/backend.hpp"
#include "zookeeper/hold.hpp"
#endif

namespace dlock::zookeeper {

bool fenced_set(client& c, const lease& held, std::string_view node, std::string_view data,
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

void fenced_set(client& c, const lease& held, std::string_view node, std::string_view data) {
    std::error_code ec;
    if (!fenced_set(c, held, node, data, ec)) {
        if (ec == errc::unsupported && c.backend_name() != "zookeeper")
            throw detail::wrong_backend(c, "dlock::zookeeper::fenced_set", detail::needs_zookeeper);
        if (auto d = c.last_error_detail(); !d.empty()) throw error(ec, d);
        throw_if(ec);
    }
}

} // namespace dlock::zookeeper

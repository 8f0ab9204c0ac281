// dlock::rw_mutex: the two sides are basic_mutex objects of the read and write kinds
// (src/redis/locks/rwlock/); only the any-mode query is its own.
#include "redis/client_impl.hpp"
#include "redis/locks/names.hpp"
#include "redis/topology/router.hpp"

#include <dlock/client.hpp>
#include <dlock/rw_mutex.hpp>

namespace dlock {

rw_mutex::rw_mutex(client& c, std::string name)
    : r_(c, name)
    , w_(c, std::move(name))
    , c_(detail::access::impl(c)) {}

bool rw_mutex::is_locked() {
    std::error_code ec;
    const bool locked = is_locked(ec);
    throw_if(ec);
    return locked;
}

bool rw_mutex::is_locked(std::error_code& ec) {
    detail::command cmd;
    cmd.plain("EXISTS").arg(name());
    const auto v = c_->run(c_->router().for_slot(detail::key_slot(name())), cmd, ec);
    if (!ec) ec = detail::reply_error(v);
    return !ec && v.is_integer() && v.integer == 1;
}

} // namespace dlock

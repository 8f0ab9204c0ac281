// dlock::rw_mutex: the two sides are basic_mutex objects of the read and write kinds; only the
// any-mode query is its own, answered by the client's backend (lock_backend::rw_is_locked).
#include "access.hpp"
#include "core/lock_backend.hpp"

#include <dlock/client.hpp>
#include <dlock/rw_mutex.hpp>

namespace dlock {

rw_mutex::rw_mutex(client& c, std::string name)
    : r_(c, name)
    , w_(c, std::move(name))
    , b_(detail::access::backend(c)) {}

bool rw_mutex::is_locked() {
    std::error_code ec;
    const bool locked = is_locked(ec);
    throw_if(ec);
    return locked;
}

bool rw_mutex::is_locked(std::error_code& ec) {
    ec.clear();
    if (b_->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return false;
    }
    return b_->rw_is_locked(name(), ec);
}

} // namespace dlock

// The reentrant lock (the class is in protocol.hpp: the fair lock builds on it).
#include "redis/locks/reentrant/protocol.hpp"

namespace dlock::detail {

lock_protocol& reentrant_protocol() noexcept {
    static reentrant_lock p;
    return p;
}

} // namespace dlock::detail

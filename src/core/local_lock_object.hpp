// The thread-bound lock object of a backend whose server keeps no hold counts (ZooKeeper,
// PostgreSQL): one backend acquisition per first hold of a thread, re-entries counted here, as
// Curator counts them. A read lock taken by the thread that holds the write lock of the same
// name is a downgrade where the backend offers one (lock_backend::acquire_read_under).
#pragma once

#include "core/lock_object.hpp"

#include <dlock/lock_options.hpp>

#include <memory>
#include <string>

namespace dlock::detail {

class lock_backend;

/// Errors: dlock::error(errc::invalid_argument) for an empty name or one over 4096 bytes,
/// errc::unsupported for a kind `b` does not offer.
std::shared_ptr<lock_object> make_local_lock_object(std::shared_ptr<lock_backend> b,
                                                    std::string name, lock_kind kind);

} // namespace dlock::detail

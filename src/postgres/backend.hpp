// postgres/backend.hpp: the PostgreSQL backend's factory (pg_backend itself is private to
// backend.cpp): what src/backends.cpp calls for a postgresql:// or postgres:// URL.
#pragma once

#include "core/lock_backend.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail {

/// The PostgreSQL backend of `url` (the contract of make_backend(), backends.hpp).
std::shared_ptr<lock_backend> make_postgres_backend(std::string_view url, std::error_code& ec,
                                                    std::string* why, const log_options& log = {});

} // namespace dlock::detail

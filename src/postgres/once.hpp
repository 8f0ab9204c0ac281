// postgres/once.hpp: run once per period on PostgreSQL (once.cpp), for pg_backend's
// claim_period / release_period.
#pragma once

#include "postgres/engine.hpp"

#include <dlock/once.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

namespace dlock::detail::pg {

/// I/O thread: claims the current slot of `period` for `name` with `token`; `done` gets the
/// slot, or nullopt when it was taken. Makes the table dlock_once when it is missing.
void claim_period_row(const std::shared_ptr<engine>& e, std::string name,
                      std::chrono::milliseconds period, std::string token,
                      std::function<void(std::error_code, std::optional<period_slot>)> done);

/// I/O thread: gives `s` back; `done` gets true when it was this claim's and is gone.
void release_period_row(const std::shared_ptr<engine>& e, std::string name, const period_slot& s,
                        std::function<void(std::error_code, bool)> done);

} // namespace dlock::detail::pg

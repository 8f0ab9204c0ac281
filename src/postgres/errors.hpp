// How PostgreSQL's failures map onto dlock::errc, sans-I/O
// (tests/unit/postgres/postgres_settings_test.cpp).
//
// Statements carry a SQLSTATE; a failed connection set-up carries only libpq's message (the
// server's FATAL text, or the socket error), so it is classified by its wording.
#pragma once

#include <dlock/error.hpp>

#include <string_view>

namespace dlock::detail::pg {

/// SQLSTATE codes dlock acts on.
namespace sqlstate {
inline constexpr std::string_view lock_not_available = "55P03"; ///< lock_timeout passed
inline constexpr std::string_view insufficient_privilege = "42501";
inline constexpr std::string_view undefined_table = "42P01";
inline constexpr std::string_view unique_violation = "23505";
inline constexpr std::string_view admin_shutdown = "57P01"; ///< pg_terminate_backend, shutdown
/// A statement run by a name the server session does not know (connection.hpp prepares them).
inline constexpr std::string_view invalid_sql_statement_name = "26000";
} // namespace sqlstate

/// The errc of a statement's error. 55P03 is not an error for dlock (not acquired) and is
/// never passed here. Classes: 28 auth_failed; 42501 permission_denied; 53 out_of_memory
/// (53300 too_many_connections: server_busy); 57P0x, 08 unavailable; 25006 readonly; 57014
/// cancelled; 22, 42 (other) invalid_argument when `caller_input`, else server_error; others
/// server_error.
errc classify_sqlstate(std::string_view state, bool caller_input = false) noexcept;

/// The errc of a connection set-up that failed with libpq's `message`.
errc classify_connect_failure(std::string_view message) noexcept;

} // namespace dlock::detail::pg

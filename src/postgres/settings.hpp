// pg::settings: what a postgresql:// or postgres:// URL asks for, split into what libpq gets
// (its connection parameters) and what dlock itself reads (the `dlock_*` query parameters).
//
//   postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]
//
// Every libpq URI parameter works (sslmode, sslrootcert, target_session_attrs, options,
// keepalives..., application_name, several hosts `h1:p1,h2:p2`); libpq validates them. dlock's
// own parameters, removed before libpq sees the URL:
//   dlock_key=PRESET        advisory key convention (advisory_key.hpp); default sha256-le64
//   dlock_fence=on|off      fencing token from the sequence dlock_fence (created when missing);
//                           default on
//   dlock_check=MS          held-lock check period P: a `SELECT 1` on each lock session every
//                           P / 2; valid_until is the last good check's send time + P; default 2000
//   dlock_keepalive=I:N:C:U TCP keepalive of every lock session, set on both ends (libpq's
//                           keepalives_* and the server's tcp_keepalives_* / tcp_user_timeout):
//                           idle I s, interval N s, count C, user timeout U ms; default 5:2:3:10000
//                           (a vanished client's locks are freed after about 11 s, not the
//                           server default's 2 h 11 min); `off` leaves both ends' defaults
//   dlock_pool=N            holding sessions opened for tries, and idle sessions kept for
//                           reuse (more linger 5 s after a burst of waits); default 8
//   dlock_timeout=MS        budget of one statement (besides a lock wait); default 5000
//   dlock_connect_timeout=MS  budget of one connection set-up; default 5000
//   dlock_table=NAME        lease tables: ShedLock's table name; default shedlock
//   dlock_lease=MS          the lease rows' watchdog lease (at least 30; extended every third of
//                           it) when acquire_options::lease is not set; default 30000 (the
//                           versioned kind: 20000, and every party must use the same)
//   dlock_versioned_table=NAME  the versioned kind's table (pglock's); default locks (its
//                           sequence is NAME_rvn)
//   dlock_prepare=on|off    each session prepares the statements it runs (named, at their first
//                           use, in the same round trip) and runs them by name after; `off`
//                           sends every statement unnamed (for a pooler in transaction mode
//                           that does not track prepared statements); default on
//
// Passwords never appear in `display` or in any message built from these settings.
#pragma once

#include "postgres/advisory_key.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace dlock::detail::pg {

struct keepalive {
    bool enabled = true;
    int idle_s = 5;
    int interval_s = 2;
    int count = 3;
    int user_timeout_ms = 10000;
    /// The longest a server keeps a vanished client's session: the first probe after `idle`
    /// that finds `user_timeout` passed since the last data (Linux), or the last probe.
    std::chrono::milliseconds server_bound() const noexcept;
};

struct settings {
    /// libpq keywords and values, in order (PQconnectStartParams with expand_dbname = 0).
    std::vector<std::pair<std::string, std::string>> params{};
    /// "postgresql://user@host:port/dbname" (never the password).
    std::string display{};
    key_scheme key = key_scheme::sha256_le64;
    bool fence = true;
    std::chrono::milliseconds check_period{2000};
    keepalive keep{};
    std::size_t pool = 8;
    std::chrono::milliseconds request_timeout{5000};
    std::chrono::milliseconds connect_timeout{5000};
    std::string shedlock_table = "shedlock";
    std::string versioned_table = "locks";
    bool prepare = true; ///< dlock_prepare
    /// dlock_lease: the row kinds' watchdog lease; nullopt = rows.hpp's defaults.
    std::optional<std::chrono::milliseconds> row_lease{};
    /// The password, as the URL writes it and decoded (for redacting libpq's messages).
    std::vector<std::string> secrets{};
};

/// Parses `url`. Errors: errc::configuration_error (bad scheme, unknown dlock_ parameter, bad
/// value, or what libpq's PQconninfoParse rejects), with one line in `why` (no password).
settings parse_settings(std::string_view url, std::error_code& ec, std::string* why = nullptr);

/// `text` with every occurrence of each secret replaced by "***" (libpq may echo URL parts).
std::string redact(std::string text, const std::vector<std::string>& secrets);

} // namespace dlock::detail::pg

#include "postgres/errors.hpp"

namespace dlock::detail::pg {
namespace {

bool has(std::string_view text, std::string_view what) noexcept {
    return text.find(what) != std::string_view::npos;
}

} // namespace

errc classify_sqlstate(std::string_view state, bool caller_input) noexcept {
    const auto cls = state.substr(0, 2);
    if (state == sqlstate::insufficient_privilege) return errc::permission_denied;
    if (cls == "28") return errc::auth_failed;
    if (state == "53300") return errc::server_busy;
    if (cls == "53") return errc::out_of_memory;
    if (cls == "57" && state != "57014") return errc::unavailable;
    if (cls == "08") return errc::unavailable;
    if (state == "57014") return errc::cancelled;
    if (state == "25006") return errc::readonly;
    if (caller_input && (cls == "22" || cls == "42")) return errc::invalid_argument;
    return errc::server_error;
}

errc classify_connect_failure(std::string_view m) noexcept {
    if (has(m, "password authentication failed") || has(m, "no password supplied") ||
        has(m, "authentication failed") || has(m, "no pg_hba.conf entry") ||
        (has(m, "role \"") && has(m, "does not exist")) || has(m, "certificate verify failed") ||
        has(m, "SCRAM") || has(m, "server certificate"))
        return errc::auth_failed;
    if (has(m, "permission denied")) return errc::permission_denied;
    if (has(m, "database \"") && has(m, "does not exist")) return errc::configuration_error;
    if (has(m, "server does not support SSL")) return errc::configuration_error;
    if (has(m, "too many clients") || has(m, "remaining connection slots"))
        return errc::server_busy;
    return errc::unavailable;
}

} // namespace dlock::detail::pg

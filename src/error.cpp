#include <dlock/error.hpp>

#include <array>
#include <utility>

namespace dlock {
namespace {

class category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "dlock"; }

    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::not_owner:
            return "lock is not held by this owner";
        case errc::lock_lost:
            return "lock was lost (lease expired or taken by another owner)";
        case errc::unavailable:
            return "server unavailable";
        case errc::ambiguous:
            return "outcome unknown: connection lost after the command was sent";
        case errc::timeout:
            return "operation timed out before the command was sent";
        case errc::cancelled:
            return "operation cancelled";
        case errc::auth_failed:
            return "authentication failed";
        case errc::permission_denied:
            return "permission denied by ACL";
        case errc::out_of_memory:
            return "server out of memory (OOM)";
        case errc::server_busy:
            return "server busy or not ready";
        case errc::readonly:
            return "server is a read-only replica";
        case errc::moved:
            return "key moved to another cluster node";
        case errc::cross_slot:
            return "keys hash to different cluster slots";
        case errc::no_script:
            return "script not loaded on server";
        case errc::server_error:
            return "server returned an error";
        case errc::protocol_error:
            return "protocol error: malformed or oversized reply";
        case errc::configuration_error:
            return "configuration error";
        case errc::invalid_argument:
            return "invalid argument";
        case errc::not_replicated:
            return "acquisition not acknowledged by enough replicas (undone)";
        case errc::unsupported:
            return "not supported by this backend or build";
        }
        return "unknown dlock error";
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category_impl instance;
    return instance;
}

errc classify_server_error(std::string_view message) noexcept {
    const auto space = message.find(' ');
    const std::string_view word = message.substr(0, space);
    static constexpr std::array<std::pair<std::string_view, errc>, 17> table{{
        {"NOSCRIPT", errc::no_script},
        {"READONLY", errc::readonly},
        {"MOVED", errc::moved},
        {"ASK", errc::moved},
        {"OOM", errc::out_of_memory},
        {"BUSY", errc::server_busy},
        {"LOADING", errc::server_busy},
        {"MASTERDOWN", errc::server_busy},
        {"TRYAGAIN", errc::server_busy},
        {"CLUSTERDOWN", errc::server_busy},
        {"UNKILLABLE", errc::server_busy},
        {"NOAUTH", errc::auth_failed},
        {"WRONGPASS", errc::auth_failed},
        {"DENIED", errc::auth_failed},
        {"NOPERM", errc::permission_denied},
        {"CROSSSLOT", errc::cross_slot},
        {"NOREPLICAS", errc::server_busy},
    }};
    for (const auto& [prefix, code] : table)
        if (word == prefix) return code;
    // An ACL denial inside a script (a command, key or channel the user may not use) comes
    // back as ERR, not NOPERM (Redis 7): "ERR The user executing the script can't ...".
    if (word == "ERR" &&
        message.substr(space + 1).starts_with("The user executing the script can't"))
        return errc::permission_denied;
    return errc::server_error;
}

} // namespace dlock

// Small pieces of the wire protocol shared by the pipelined connection and the sync lane, so
// both transports treat NOSCRIPT, handshake replies and their read buffers the same way.
#pragma once

#include "redis/resp3/parser.hpp"

#include <dlock/error.hpp>

#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::net {

/// The server does not know the script of an EVALSHA that has a fallback text.
inline bool needs_eval(const resp3::value& reply, std::string_view eval_fallback) noexcept {
    return reply.is_error() && !eval_fallback.empty() && reply.str.starts_with("NOSCRIPT");
}

/// Appends `args` (an EVALSHA) to `out` as EVAL with the script's text instead of its SHA1.
inline void encode_as_eval(std::string& out, std::span<const std::string_view> args,
                           std::string_view text) {
    std::vector<std::string_view> eval(args.begin(), args.end());
    eval[0] = "EVAL";
    eval[1] = text;
    resp3::encode_command(out, eval);
}

/// An error reply that means "this server is not (or not yet) a usable master": READONLY (a
/// replica: failover or demotion), LOADING (restarted, loading its data), MASTERDOWN (a replica
/// that lost its master). The command was not carried out, so it may be sent again elsewhere.
inline bool topology_error(const resp3::value& reply) noexcept {
    return reply.is_error() &&
           (reply.str.starts_with("READONLY") || reply.str.starts_with("LOADING") ||
            reply.str.starts_with("MASTERDOWN"));
}

/// A Cluster redirection or a Cluster that cannot serve the slot right now: MOVED, ASK,
/// CLUSTERDOWN, TRYAGAIN (the command was not carried out).
inline bool cluster_redirect(const resp3::value& reply) noexcept {
    return reply.is_error() &&
           (reply.str.starts_with("MOVED ") || reply.str.starts_with("ASK ") ||
            reply.str.starts_with("CLUSTERDOWN") || reply.str.starts_with("TRYAGAIN"));
}

/// Whether a ROLE reply names a master (["master", offset, replicas]).
inline bool role_is_master(const resp3::value& reply) noexcept {
    return reply.is_aggregate() && !reply.elements.empty() &&
           reply.elements.front().str == "master";
}

/// What an error reply to the handshake (HELLO, AUTH, SETNAME, SELECT) means. HELLO errors
/// other than authentication (e.g. ERR unknown command) are configuration problems.
inline std::error_code handshake_error(const resp3::value& reply) noexcept {
    if (!reply.is_error()) return {};
    auto code = classify_server_error(reply.str);
    if (code == errc::server_error) code = errc::configuration_error;
    return make_error_code(code);
}

/// Drops the parsed prefix [0, pos) of a read buffer: all of it when everything was parsed,
/// else only once it reaches `min_drop` bytes (fewer copies on a busy connection).
inline void drop_parsed(std::string& buf, std::size_t& pos, std::size_t min_drop) {
    if (pos > 0 && pos == buf.size()) {
        buf.clear();
        pos = 0;
    } else if (pos >= min_drop && pos > 0) {
        buf.erase(0, pos);
        pos = 0;
    }
}

} // namespace dlock::net

// The election's protocol on Redis (protocol.hpp; the scripts beside it).
#include "redis/locks/election/protocol.hpp"

#include "redis/locks/names.hpp"

namespace dlock::detail {
namespace {
constexpr std::string_view record_prefix = "dlock_election";
constexpr std::string_view channel_prefix_ = "dlock_election__channel";
} // namespace

std::string election_lock::observer_channel(const lock_keys& k) {
    return prefix_name(channel_prefix_, k.key);
}

void election_lock::payload_attempt(command& c, const lock_keys& k, std::string_view owner,
                                    std::chrono::milliseconds lease, std::string_view value,
                                    pubsub::mode m) const {
    c.script(script_id::election_acquire).arg("4").arg(k.key).arg(k.token_key);
    c.own(prefix_name(record_prefix, k.key)).own(observer_channel(k));
    c.number(lease.count()).arg(owner).arg(value).arg(pubsub::publish_command(m));
}

void election_lock::release(command& c, const lock_keys& k, std::string_view owner,
                            std::chrono::milliseconds, pubsub::mode m) const {
    c.script(script_id::election_release).arg("4").arg(k.key).arg(k.channel);
    c.own(prefix_name(record_prefix, k.key)).own(observer_channel(k));
    c.arg(owner).arg(pubsub::publish_command(m));
}

release_outcome election_lock::read_release(std::error_code ec, const resp3::value& r) const {
    if (!ec) ec = reply_error(r);
    if (ec) return {release_outcome::kind::error, ec};
    if (r.is_null()) return {release_outcome::kind::not_owner, {}};
    if (release_outcome out; read_published_release(r, out)) return out;
    return {release_outcome::kind::error, make_error_code(errc::protocol_error)};
}

void election_lock::proclaim(command& c, const lock_holder& h, std::string_view value,
                             pubsub::mode m) const {
    c.script(script_id::election_proclaim).arg("3").arg(h.keys.key);
    c.own(prefix_name(record_prefix, h.keys.key)).own(observer_channel(h.keys));
    c.arg(h.owner).arg(value).arg(pubsub::publish_command(m));
}

bool election_lock::read_proclaim(const resp3::value& r, std::error_code& ec) {
    if (!ec) ec = reply_error(r);
    if (ec) return false;
    if (!r.is_integer() || (r.integer != 0 && r.integer != 1)) {
        ec = make_error_code(errc::protocol_error);
        return false;
    }
    return r.integer == 1;
}

void election_lock::leader_query(command& c, const lock_keys& k) const {
    c.script(script_id::election_leader).arg("2").arg(k.key);
    c.own(prefix_name(record_prefix, k.key));
}

leader_reading election_lock::read_leader(const resp3::value& r, std::error_code& ec) {
    leader_reading out;
    if (!ec) ec = reply_error(r);
    if (ec) return out;
    const auto& e = r.elements;
    const bool ok = r.kind == resp3::type::array && !e.empty() && e[0].is_integer() &&
                    ((e[0].integer == 0 && e.size() == 2 && e[1].is_integer()) ||
                     (e[0].integer == 1 && e.size() == 4 && e[1].is_string() && e[2].is_integer() &&
                      e[2].integer > 0 && e[3].is_integer()));
    if (!ok) {
        ec = make_error_code(errc::protocol_error);
        return out;
    }
    out.pttl = e.back().integer;
    if (e[0].integer == 1)
        out.leader = leader_info{e[1].str, static_cast<std::uint64_t>(e[2].integer)};
    return out;
}

election_lock& election_protocol() noexcept {
    static election_lock p;
    return p;
}

} // namespace dlock::detail

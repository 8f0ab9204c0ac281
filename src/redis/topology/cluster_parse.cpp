// The parsers of the replies the Redis Cluster router reads: CLUSTER SHARDS, CLUSTER SLOTS and
// the MOVED / ASK redirections.
#include "redis/topology/cluster.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>

namespace dlock::detail {
namespace {

std::optional<std::uint16_t> as_port(const resp3::value& v) {
    if (v.is_integer()) {
        if (v.integer <= 0 || v.integer > 65535) return std::nullopt;
        return static_cast<std::uint16_t>(v.integer);
    }
    unsigned p = 0;
    const auto& s = v.str;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), p);
    if (ec != std::errc{} || end != s.data() + s.size() || p == 0 || p > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(p);
}

std::optional<std::int64_t> as_int(const resp3::value& v) {
    if (v.is_integer()) return v.integer;
    std::int64_t n = 0;
    const auto& s = v.str;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return n;
}

/// A field of a RESP3 map or a RESP2 flat key/value array; null when absent.
const resp3::value* field(const resp3::value& m, std::string_view key) {
    if (!m.is_aggregate()) return nullptr;
    for (std::size_t i = 0; i + 1 < m.elements.size(); i += 2)
        if (m.elements[i].str == key) return &m.elements[i + 1];
    return nullptr;
}

bool add_range(cluster_shard& s, std::int64_t lo, std::int64_t hi) {
    if (lo < 0 || hi < lo || hi > 16383) return false;
    s.ranges.emplace_back(static_cast<std::uint16_t>(lo), static_cast<std::uint16_t>(hi));
    return true;
}

} // namespace

std::optional<std::vector<cluster_shard>> parse_cluster_shards(const resp3::value& v, bool tls) {
    if (!v.is_aggregate()) return std::nullopt;
    std::vector<cluster_shard> out;
    for (const auto& sh : v.elements) {
        const auto* slots = field(sh, "slots");
        const auto* nodes = field(sh, "nodes");
        if (!slots || !nodes || !slots->is_aggregate() || !nodes->is_aggregate())
            return std::nullopt;
        cluster_shard s;
        const resp3::value* master = nullptr;
        for (const auto& n : nodes->elements) {
            const auto* id = field(n, "id");
            const auto* role = field(n, "role");
            const auto* health = field(n, "health");
            if (!id || !role) return std::nullopt;
            const bool online = !health || health->str == "online";
            if (role->str == "master" && online && !master) {
                master = &n;
                s.ids.insert(s.ids.begin(), id->str);
            } else {
                s.ids.push_back(id->str);
            }
        }
        if (!master) continue; // no usable master right now (a failover in progress)
        const auto* ip = field(*master, "ip");
        const auto* port =
            tls && field(*master, "tls-port") ? field(*master, "tls-port") : field(*master, "port");
        if (!ip || !port) return std::nullopt;
        const auto p = as_port(*port);
        if (!p) return std::nullopt;
        s.master.host = ip->str;
        s.master.port = *p;
        for (std::size_t i = 0; i + 1 < slots->elements.size(); i += 2) {
            const auto lo = as_int(slots->elements[i]);
            const auto hi = as_int(slots->elements[i + 1]);
            if (!lo || !hi || !add_range(s, *lo, *hi)) return std::nullopt;
        }
        out.push_back(std::move(s));
    }
    return out;
}

std::optional<std::vector<cluster_shard>> parse_cluster_slots(const resp3::value& v) {
    if (!v.is_aggregate()) return std::nullopt;
    std::vector<cluster_shard> out;
    for (const auto& e : v.elements) {
        // [start, end, [ip, port, id, ...], [replica ip, port, id, ...]...]
        if (!e.is_aggregate() || e.elements.size() < 3) return std::nullopt;
        const auto lo = as_int(e.elements[0]);
        const auto hi = as_int(e.elements[1]);
        const auto& m = e.elements[2];
        if (!lo || !hi || !m.is_aggregate() || m.elements.size() < 2) return std::nullopt;
        const auto p = as_port(m.elements[1]);
        if (!p) return std::nullopt;
        net::target t;
        t.host = m.elements[0].str;
        t.port = *p;
        auto it = std::find_if(out.begin(), out.end(), [&](const cluster_shard& s) {
            return net::same_endpoint(s.master, t);
        });
        if (it == out.end()) {
            cluster_shard s;
            s.master = t;
            for (std::size_t i = 2; i < e.elements.size(); ++i)
                if (e.elements[i].is_aggregate() && e.elements[i].elements.size() >= 3)
                    s.ids.push_back(e.elements[i].elements[2].str);
            out.push_back(std::move(s));
            it = std::prev(out.end());
        }
        if (!add_range(*it, *lo, *hi)) return std::nullopt;
    }
    return out;
}

bool parse_redirect(std::string_view error, bool& ask, std::uint16_t& slot, net::target& to) {
    // "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381"
    if (error.starts_with("MOVED "))
        ask = false;
    else if (error.starts_with("ASK "))
        ask = true;
    else
        return false;
    error.remove_prefix(error.find(' ') + 1);
    const auto sp = error.find(' ');
    if (sp == std::string_view::npos) return false;
    const auto num = error.substr(0, sp);
    const auto addr = error.substr(sp + 1);
    unsigned s = 0;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), s);
    if (ec != std::errc{} || end != num.data() + num.size() || s > 16383) return false;
    const auto colon = addr.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    resp3::value port;
    port.kind = resp3::type::simple_string;
    port.str.assign(addr.substr(colon + 1));
    const auto p = as_port(port);
    if (!p) return false;
    slot = static_cast<std::uint16_t>(s);
    to.host.assign(addr.substr(0, colon));
    to.port = *p;
    return true;
}

} // namespace dlock::detail

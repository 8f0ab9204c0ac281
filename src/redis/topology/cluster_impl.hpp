// redis/topology/cluster_impl.hpp: the helper cluster.cpp (the slot map) and cluster_parse.cpp
// (the replies' parsers) share.
#pragma once

#include "redis/topology/cluster.hpp"

namespace dlock::detail {

inline bool same(const net::target& a, const net::target& b) {
    return a.host == b.host && a.port == b.port;
}

} // namespace dlock::detail

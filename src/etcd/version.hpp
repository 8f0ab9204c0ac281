// etcd/version.hpp: the oldest etcd dlock speaks to, and the test of a member's version.
//
// dlock chooses the ids of its watches (WatchCreateRequest.watch_id: watch_hub.hpp) and asks
// for progress answers (WatchProgressRequest), both new in etcd 3.4. An older member ignores
// the fields it does not know: its watch answers would name ids no watch of dlock has, and a
// waiter would wait for ever. So a member whose Maintenance.Status names a version before 3.4
// is refused with errc::unsupported (etcd_backend::with_server). A version that does not read
// as "major.minor[...]" is not refused: etcd always sends one; something else speaking its API
// is judged by what it answers.
#pragma once

#include <charconv>
#include <string_view>

namespace dlock::detail::etcd {

inline constexpr int oldest_major = 3;
inline constexpr int oldest_minor = 4;

/// Whether a member of version `v` ("3.4.23", "3.5.0-alpha.0") is recent enough.
inline bool version_supported(std::string_view v) {
    int major = 0;
    int minor = 0;
    const auto* end = v.data() + v.size();
    auto r = std::from_chars(v.data(), end, major);
    if (r.ec != std::errc{} || r.ptr == end || *r.ptr != '.') return true;
    r = std::from_chars(r.ptr + 1, end, minor);
    if (r.ec != std::errc{}) return true;
    return major > oldest_major || (major == oldest_major && minor >= oldest_minor);
}

} // namespace dlock::detail::etcd

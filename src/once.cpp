// dlock/once.hpp's calls: checked here once, then asked of the client's backend
// (lock_backend::claim_period / release_period).
#include "access.hpp"
#include "core/lock_backend.hpp"

#include <dlock/client.hpp>
#include <dlock/once.hpp>

namespace dlock {
namespace {

constexpr std::chrono::milliseconds longest_period = std::chrono::hours(24 * 366);

/// The backend to ask, or null with `ec` set.
detail::lock_backend* checked(client& c, std::string_view name, std::chrono::milliseconds period,
                              std::error_code& ec) {
    ec.clear();
    const auto& b = detail::access::backend(c);
    if (name.empty() || name.size() > 4096 || period < std::chrono::milliseconds(1) ||
        period > longest_period || b->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    return b.get();
}

} // namespace

std::optional<period_slot> claim_period(client& c, std::string_view name,
                                        std::chrono::milliseconds period, std::error_code& ec) {
    auto* b = checked(c, name, period, ec);
    return b ? b->claim_period(name, period, ec) : std::nullopt;
}

std::optional<period_slot> claim_period(client& c, std::string_view name,
                                        std::chrono::milliseconds period) {
    std::error_code ec;
    auto s = claim_period(c, name, period, ec);
    detail::access::throw_with_detail(c, ec);
    throw_if(ec);
    return s;
}

bool release_period(client& c, std::string_view name, const period_slot& s, std::error_code& ec) {
    auto* b = checked(c, name, s.period, ec);
    return b && b->release_period(name, s, ec);
}

bool release_period(client& c, std::string_view name, const period_slot& s) {
    std::error_code ec;
    const bool gone = release_period(c, name, s, ec);
    detail::access::throw_with_detail(c, ec);
    throw_if(ec);
    return gone;
}

} // namespace dlock

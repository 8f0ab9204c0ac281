#include "redis/locks/acquire_logic.hpp"

#include "redis/client_impl.hpp"

#include <algorithm>

namespace dlock::detail {

attempt_outcome interpret_attempt(lock_kind kind, std::error_code ec0, const resp3::value& r0,
                                  std::error_code ec1, const resp3::value& r1) {
    attempt_outcome out;
    const auto protocol = [&] {
        out.what = attempt_outcome::kind::error;
        out.ec = make_error_code(errc::protocol_error);
        return out;
    };
    if (!ec0) ec0 = reply_error(r0);
    if (ec0) {
        out.ec = ec0;
        return out;
    }
    if (kind == lock_kind::reentrant) {
        if (r0.kind != resp3::type::array || r0.elements.size() != 2 ||
            !r0.elements[0].is_integer() || !r0.elements[1].is_integer())
            return protocol();
        const auto status = r0.elements[0].integer;
        const auto value = r0.elements[1].integer;
        switch (status) {
        case 1:
            if (value < 1) return protocol();
            out.what = attempt_outcome::kind::acquired;
            out.token = static_cast<std::uint64_t>(value);
            return out;
        case 2:
            if (value < 2) return protocol();
            out.what = attempt_outcome::kind::reentered;
            out.count = value;
            return out;
        case 0:
            out.what = attempt_outcome::kind::held;
            out.ttl_ms = value;
            return out;
        default:
            return protocol();
        }
    }
    if (r0.is_ok()) {
        out.what = attempt_outcome::kind::acquired;
        return out;
    }
    if (!r0.is_null()) return protocol();
    out.what = attempt_outcome::kind::held;
    out.ttl_ms = !ec1 && r1.is_integer() ? r1.integer : -1;
    return out;
}

std::chrono::steady_clock::time_point sleep_until(std::chrono::steady_clock::time_point now,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::int64_t ttl_ms) {
    if (ttl_ms < 0) return deadline;
    return std::min(deadline, now + std::chrono::milliseconds(ttl_ms));
}

} // namespace dlock::detail

#include "core/glob.hpp"

namespace dlock::detail {

bool glob_match(std::string_view p, std::string_view t) noexcept {
    if (p.empty()) return true; // no pattern: everything
    std::size_t pi = 0;
    std::size_t ti = 0;
    std::size_t star = std::string_view::npos;
    std::size_t mark = 0;
    while (ti < t.size()) {
        if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
            ++pi;
            ++ti;
        } else if (pi < p.size() && p[pi] == '*') {
            star = pi++;
            mark = ti;
        } else if (star != std::string_view::npos) {
            pi = star + 1;
            ti = ++mark;
        } else {
            return false;
        }
    }
    while (pi < p.size() && p[pi] == '*')
        ++pi;
    return pi == p.size();
}

} // namespace dlock::detail

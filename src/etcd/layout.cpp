#include "etcd/layout.hpp"

#include <algorithm>

namespace dlock::detail::etcd {
namespace {

constexpr std::size_t max_name = 4096;

bool is_hex_id(std::string_view s) {
    return !s.empty() && s.size() <= 16 && (s == "0" || s.front() != '0') &&
           std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_digits(std::string_view s) {
    return !s.empty() && s.size() <= 20 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

constexpr std::string_view read_part = "read/";
constexpr std::string_view write_part = "write/";
constexpr std::string_view semaphore_part = "semaphore/";

/// The kind of a unique key's tail after the lock's range: "read/<digits>",
/// "write/<digits>", "semaphore/<digits>".
std::optional<lock_kind> unique_tail(std::string_view tail) {
    for (const auto& [part, kind] :
         {std::pair{read_part, lock_kind::read}, std::pair{write_part, lock_kind::write},
          std::pair{semaphore_part, lock_kind::semaphore}})
        if (tail.starts_with(part) && is_digits(tail.substr(part.size()))) return kind;
    return std::nullopt;
}

} // namespace

bool valid_name(std::string_view name, std::string* why) {
    const auto no = [why](const char* m) {
        if (why) *why = m;
        return false;
    };
    if (name.empty()) return no("an etcd lock name is not empty");
    if (name.size() > max_name) return no("an etcd lock name has at most 4096 bytes");
    if (name.find('/') != std::string_view::npos)
        return no("an etcd lock name has no '/' (the range of \"a\" would hold the keys of "
                  "\"a/b\"); put hierarchy into the URL's prefix");
    if (std::any_of(name.begin(), name.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
        return no("an etcd lock name has no control characters");
    return true;
}

std::string lock_range(std::string_view prefix, std::string_view name) {
    std::string out(prefix);
    if (!out.empty()) out += '/';
    out.append(name);
    out += '/';
    return out;
}

std::string once_key(std::string_view prefix, std::string_view name) {
    std::string out(prefix);
    if (!out.empty()) out += '/';
    out += "dlock-once:";
    out.append(name);
    return out;
}

std::string lease_hex(std::int64_t lease) {
    static constexpr char digits[] = "0123456789abcdef";
    auto v = static_cast<std::uint64_t>(lease);
    std::string out;
    do {
        out.insert(out.begin(), digits[v & 0xf]);
        v >>= 4;
    } while (v != 0);
    return out;
}

std::string own_key(std::string_view range, std::int64_t lease) {
    return std::string(range) + lease_hex(lease);
}

std::string rw_key(std::string_view range, lock_kind side, std::int64_t unix_ns) {
    std::string out(range);
    out += side == lock_kind::write ? write_part : read_part;
    out += std::to_string(unix_ns);
    return out;
}

std::string semaphore_key(std::string_view range, std::int64_t unix_ns) {
    return semaphore_range(range) + std::to_string(unix_ns);
}

std::string semaphore_range(std::string_view range) {
    return std::string(range).append(semaphore_part);
}

std::string rw_blockers(std::string_view range, lock_kind side) {
    std::string out(range);
    if (side == lock_kind::read) out += "write"; // the recipe's prefix: no trailing '/'
    return out;
}

std::optional<lock_kind> kind_of_key(std::string_view range, std::string_view key) {
    if (!key.starts_with(range)) return std::nullopt;
    const auto tail = key.substr(range.size());
    if (is_hex_id(tail)) return lock_kind::reentrant;
    return unique_tail(tail);
}

std::string range_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        auto& last = end.back();
        if (static_cast<unsigned char>(last) < 0xff) {
            last = static_cast<char>(static_cast<unsigned char>(last) + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');
}

std::optional<std::string> lock_of_key(std::string_view prefix, std::string_view key) {
    if (!prefix.empty()) {
        if (!key.starts_with(prefix) || key.size() <= prefix.size() || key[prefix.size()] != '/')
            return std::nullopt;
        key.remove_prefix(prefix.size() + 1);
    }
    const auto slash = key.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    const auto name = key.substr(0, slash);
    const auto tail = key.substr(slash + 1);
    if (!valid_name(name, nullptr) || (!is_hex_id(tail) && !unique_tail(tail))) return std::nullopt;
    return std::string(name);
}

} // namespace dlock::detail::etcd

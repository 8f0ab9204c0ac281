#include "zookeeper/names.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace dlock::detail::zk {

bool valid_segment(std::string_view s) noexcept {
    if (s.empty() || s == "." || s == "..") return false;
    return std::none_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return c == '/' || u < 0x20 || u == 0x7f;
    });
}

std::string lock_dir(std::string_view name, std::string* why) {
    const auto fail = [&](const std::string& m) {
        if (why) *why = m;
        return std::string{};
    };
    if (name.empty()) return fail("the lock name is empty");
    while (!name.empty() && name.front() == '/')
        name.remove_prefix(1);
    while (!name.empty() && name.back() == '/')
        name.remove_suffix(1);
    if (name.empty()) return fail("the lock name names the root (give a znode path: \"orders\")");
    std::string path;
    std::size_t pos = 0;
    while (pos <= name.size()) {
        const auto slash = name.find('/', pos);
        const auto seg =
            name.substr(pos, slash == std::string_view::npos ? name.npos : slash - pos);
        if (!valid_segment(seg))
            return fail("lock name '" + std::string(name) +
                        "' has an empty, '.', '..' or control-character path segment");
        if (path.empty() && seg == "zookeeper")
            return fail("lock name '" + std::string(name) +
                        "' is under ZooKeeper's reserved /zookeeper");
        path += '/';
        path += seg;
        if (slash == std::string_view::npos) break;
        pos = slash + 1;
    }
    return path;
}

std::string node_prefix(std::string_view uuid, std::string_view infix) {
    std::string s;
    s.reserve(protect_prefix.size() + uuid.size() + 1 + infix.size());
    s += protect_prefix;
    s += uuid;
    s += '-';
    s += infix;
    return s;
}

std::optional<contender> parse_child(std::string_view name) {
    constexpr std::size_t digits = 10;
    if (name.size() < digits) return std::nullopt;
    const auto tail = name.substr(name.size() - digits);
    std::int64_t v = 0;
    for (const char c : tail) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
    }
    contender c;
    c.name = std::string(name);
    c.seq = v;
    c.shared = name.find(read_infix) != std::string_view::npos;
    const auto head = name.substr(0, name.size() - digits);
    if (head.size() >= protected_length && head.starts_with(protect_prefix) &&
        head[protected_length - 1] == '-')
        c.owner = std::string(head.substr(0, protected_length - 1));
    else
        c.owner = std::string(head);
    return c;
}

std::vector<contender> sort_children(const std::vector<std::string>& children,
                                     std::vector<std::string>* strangers) {
    std::vector<contender> out;
    out.reserve(children.size());
    for (const auto& ch : children) {
        if (auto c = parse_child(ch))
            out.push_back(std::move(*c));
        else if (strangers)
            strangers->push_back(ch);
    }
    // Equal sequences only come from a downgrade (a read node at its writer's sequence): the
    // writer first.
    std::sort(out.begin(), out.end(), [](const contender& a, const contender& b) {
        if (a.seq != b.seq) return a.seq < b.seq;
        if (a.shared != b.shared) return !a.shared;
        return a.name < b.name;
    });
    return out;
}

std::vector<std::string> sort_latch(std::vector<std::string> children) {
    const auto key = [](std::string_view n) {
        const auto at = n.rfind(latch_infix);
        return at == std::string_view::npos ? n : n.substr(at + latch_infix.size());
    };
    std::stable_sort(children.begin(), children.end(),
                     [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
    return children;
}

bool holds_at(const std::vector<contender>& sorted, std::size_t i) noexcept {
    if (i >= sorted.size()) return false;
    if (i == 0) return true;
    if (!sorted[i].shared) return false;
    // A downgrade's read node shares the sequence of the writer that holds (index 0).
    const auto first = !sorted[0].shared && sorted[0].seq == sorted[i].seq ? 1 : 0;
    return std::all_of(sorted.begin() + first, sorted.begin() + static_cast<std::ptrdiff_t>(i),
                       [](const contender& c) { return c.shared; });
}

decision decide(const std::vector<contender>& sorted, std::string_view own) {
    decision d;
    const auto it = std::find_if(sorted.begin(), sorted.end(),
                                 [&](const contender& c) { return c.name == own; });
    if (it == sorted.end()) return d;
    d.found = true;
    d.position = static_cast<std::size_t>(it - sorted.begin());
    d.holds = holds_at(sorted, d.position);
    if (d.holds) return d;
    if (!it->shared) {
        d.watch = sorted[d.position - 1].name; // the immediate predecessor
        return d;
    }
    // A blocked reader watches the first exclusive contender before it (Curator's rule).
    const auto w = std::find_if(sorted.begin(), it, [](const contender& c) { return !c.shared; });
    d.watch = w->name;
    return d;
}

decision decide_without(std::vector<contender> sorted, std::string_view own,
                        std::string_view gone) {
    for (const auto& c : sorted) {
        if (c.name == own) break;
        if (c.name.find(write_infix) != std::string::npos) return {}; // may downgrade: list
    }
    std::erase_if(sorted, [&](const contender& c) { return c.name == gone; });
    return decide(sorted, own);
}

std::optional<std::string> find_protected(const std::vector<std::string>& children,
                                          std::string_view prefix) {
    for (const auto& c : children)
        if (c.starts_with(prefix)) return c;
    return std::nullopt;
}

std::string session_hex(std::int64_t session) {
    std::array<char, 24> buf{};
    std::snprintf(buf.data(), buf.size(), "0x%016llx", static_cast<unsigned long long>(session));
    return buf.data();
}

} // namespace dlock::detail::zk

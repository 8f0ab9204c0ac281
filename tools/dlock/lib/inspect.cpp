// dlock status / list / unlock --force: read and break locks in Redisson's layout (reentrant
// lock: hash N of owner -> count) and redis-py's (simple lock: string N holding a token).
#include "commands.hpp"

#include <algorithm>
#include <cctype>
#include <iomanip>

namespace dlock::cli {
namespace {

struct lock_info {
    std::string name;
    std::string kind = "none"; ///< "lock", "simple" or "none"
    std::vector<std::pair<std::string, long long>> holders;
    long long ttl_ms = -2;
    long long waiters = 0;
    std::optional<long long> fencing_token;
};

/// Redisson's prefixName rule (see src/lock/names.cpp).
std::string prefixed(const std::string& prefix, const std::string& name) {
    return name.find('{') != std::string::npos ? prefix + ":" + name : prefix + ":{" + name + "}";
}

resp3::value checked(client& c, std::initializer_list<std::string_view> args) {
    auto v = c.command(args);
    if (v.is_error()) throw dlock::error(classify_server_error(v.str), v.str);
    return v;
}

long long as_number(const resp3::value& v) {
    if (v.is_integer()) return v.integer;
    if (v.is_string()) return std::stoll(v.str);
    return 0;
}

lock_info inspect(client& c, const std::string& name) {
    lock_info info;
    info.name = name;
    const auto type = checked(c, {"TYPE", name}).str;
    std::string channel;
    if (type == "hash") {
        info.kind = "lock";
        const auto all = checked(c, {"HGETALL", name});
        for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2)
            if (all.elements[i].str != "mode")
                info.holders.emplace_back(all.elements[i].str, as_number(all.elements[i + 1]));
        channel = prefixed("redisson_lock__channel", name);
    } else if (type == "string") {
        info.kind = "simple";
        info.holders.emplace_back(checked(c, {"GET", name}).str, 1);
        channel = prefixed("dlock_simple__channel", name);
    } else {
        channel = prefixed("redisson_lock__channel", name);
    }
    info.ttl_ms = as_number(checked(c, {"PTTL", name}));
    const auto numsub = checked(c, {"PUBSUB", "NUMSUB", channel});
    if (numsub.elements.size() == 2) info.waiters = as_number(numsub.elements[1]);
    const auto token = checked(c, {"GET", prefixed("redisson_lock_token", name)});
    if (!token.is_null()) info.fencing_token = as_number(token);
    return info;
}

void print_json(std::ostream& out, const lock_info& i) {
    out << "{\"name\":";
    json_string(out, i.name);
    out << ",\"kind\":";
    json_string(out, i.kind);
    out << ",\"holders\":[";
    for (std::size_t k = 0; k < i.holders.size(); ++k) {
        if (k) out << ',';
        out << "{\"owner\":";
        json_string(out, i.holders[k].first);
        out << ",\"count\":" << i.holders[k].second << '}';
    }
    out << "],\"ttl_ms\":" << (i.ttl_ms < 0 ? 0 : i.ttl_ms) << ",\"waiters\":" << i.waiters
        << ",\"fencing_token\":";
    if (i.fencing_token)
        out << *i.fencing_token;
    else
        out << "null";
    out << '}';
}

void print_text(std::ostream& out, const lock_info& i) {
    out << i.name << "  kind=" << i.kind << "  ttl=";
    if (i.ttl_ms >= 0)
        out << i.ttl_ms << "ms";
    else
        out << (i.ttl_ms == -1 ? "none" : "-");
    out << "  waiters=" << i.waiters << "  fencing_token=";
    if (i.fencing_token)
        out << *i.fencing_token;
    else
        out << '-';
    out << '\n';
    for (auto& [owner, count] : i.holders)
        out << "  holder " << owner << "  count=" << count << '\n';
}

bool looks_like_owner(const std::string& field) {
    // <36-char uuid>:<thread-id>[:write]
    if (field.size() < 38 || field[36] != ':') return false;
    return std::all_of(field.begin(), field.begin() + 36, [](char ch) {
        return std::isxdigit(static_cast<unsigned char>(ch)) || ch == '-';
    });
}

bool looks_like_token(const std::string& v) {
    return v.size() == 32 && std::all_of(v.begin(), v.end(), [](char ch) {
               return std::isxdigit(static_cast<unsigned char>(ch));
           });
}

} // namespace

int run_status(const global_options& g, const std::string& name, bool json, std::ostream& out,
               std::ostream&) {
    if (name.empty()) throw usage_error("empty lock name");
    client c(connect_options(g));
    const auto info = inspect(c, name);
    if (json) {
        print_json(out, info);
        out << '\n';
    } else {
        print_text(out, info);
    }
    return 0;
}

int run_list(const global_options& g, const std::string& pattern, bool json, std::ostream& out,
             std::ostream&) {
    client c(connect_options(g));
    std::vector<lock_info> locks;
    std::string cursor = "0";
    do {
        const auto page = checked(c, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
        if (page.elements.size() != 2) throw dlock::error(errc::protocol_error);
        cursor = page.elements[0].str;
        for (const auto& k : page.elements[1].elements) {
            const auto type = checked(c, {"TYPE", k.str}).str;
            bool is_lock = false;
            if (type == "hash") {
                const auto fields = checked(c, {"HKEYS", k.str});
                is_lock = !fields.elements.empty() &&
                          std::all_of(fields.elements.begin(), fields.elements.end(),
                                      [](const resp3::value& f) {
                                          return f.str == "mode" || looks_like_owner(f.str);
                                      });
            } else if (type == "string") {
                is_lock = looks_like_token(checked(c, {"GET", k.str}).str);
            }
            if (is_lock) locks.push_back(inspect(c, k.str));
        }
    } while (cursor != "0");
    std::sort(locks.begin(), locks.end(),
              [](const lock_info& a, const lock_info& b) { return a.name < b.name; });
    if (json) {
        out << '[';
        for (std::size_t i = 0; i < locks.size(); ++i) {
            if (i) out << ',';
            print_json(out, locks[i]);
        }
        out << "]\n";
    } else {
        for (auto& l : locks)
            print_text(out, l);
        if (locks.empty()) out << "no locks match '" << pattern << "'\n";
    }
    return 0;
}

int run_unlock(const global_options& g, const std::string& name, std::ostream& out, std::ostream&) {
    if (name.empty()) throw usage_error("empty lock name");
    client c(connect_options(g));
    const auto type = checked(c, {"TYPE", name}).str;
    bool deleted = false;
    if (type == "string")
        deleted = c.make_simple_mutex(name).force_unlock();
    else if (type == "hash" || type == "none")
        deleted = c.make_mutex(name).force_unlock();
    else
        throw usage_error("'" + name + "' is a " + type + ", not a lock");
    out << (deleted ? "unlocked " : "no lock named ") << name << '\n';
    return 0;
}

} // namespace dlock::cli

#include "backend_cmds.hpp"

namespace dlock::cli {
namespace {

void print_contenders_json(std::ostream& out, const lock_status& s) {
    out << "{\"name\":";
    json_string(out, s.name);
    out << ",\"kind\":";
    json_string(out, s.exists ? s.kind : "none");
    out << ",\"contenders\":[";
    for (std::size_t i = 0; i < s.contenders.size(); ++i) {
        const auto& c = s.contenders[i];
        out << (i ? "," : "") << "{\"holds\":" << (c.holds ? "true" : "false") << ",\"owner\":";
        json_string(out, c.owner);
        out << ",\"entry\":";
        json_string(out, c.entry);
        out << ",\"session\":";
        json_string(out, c.session);
        if (c.position) out << ",\"position\":" << *c.position;
        if (c.token) out << ",\"token\":" << *c.token;
        out << '}';
    }
    out << ']';
    if (!s.detail.empty()) {
        out << ",\"detail\":";
        json_string(out, s.detail);
    }
    out << '}';
}

void print_status_text(std::ostream& out, const lock_status& s) {
    if (!s.exists) {
        out << s.name << ": not locked\n";
        return;
    }
    std::size_t holders = 0;
    for (const auto& c : s.contenders)
        holders += c.holds ? 1 : 0;
    out << s.name << ": " << s.kind << ", " << holders << " holder(s), "
        << s.contenders.size() - holders << " waiter(s)\n";
    std::vector<std::vector<std::string>> rows{{"", "#", "owner", "session", "token", "node"}};
    for (const auto& c : s.contenders)
        rows.push_back({c.holds ? "holds" : "waits", c.position ? std::to_string(*c.position) : "",
                        c.owner, c.session.empty() ? "-" : c.session,
                        c.token ? std::to_string(*c.token) : "-", c.entry});
    print_table(out, rows);
    if (!s.detail.empty()) out << "note: " << one_line(s.detail) << '\n';
}

} // namespace

client backend_client(const global_options& g) {
    const auto urls = effective_urls(g);
    if (urls.size() > 1)
        throw usage_error("several --url options mean Redlock, which only Redis offers");
    try {
        return client(urls[0]);
    } catch (const dlock::error& e) {
        throw diagnose(e.code(), "cannot use " + one_line(urls[0]), e.what());
    }
}

int run_backend_status(const global_options& g, const std::vector<std::string>& names, bool json,
                       std::ostream& out) {
    auto c = backend_client(g);
    for (std::size_t k = 0; k < names.size(); ++k) {
        std::error_code ec;
        const auto s = c.inspect(names[k], lock_kind::reentrant, ec);
        if (ec) throw diagnose(c, ec, "cannot read '" + one_line(names[k]) + "'", names[k]);
        if (json) {
            print_contenders_json(out, s); // JSON Lines for several names
            out << '\n';
        } else {
            if (k) out << '\n';
            print_status_text(out, s);
        }
    }
    return exit_code::ok;
}

int run_backend_list(const global_options& g, const std::string& pattern, bool json,
                     std::ostream& out) {
    auto c = backend_client(g);
    std::error_code ec;
    const auto locks = c.list(pattern, ec);
    if (ec) throw diagnose(c, ec, "cannot list locks");
    if (json) {
        out << '[';
        for (std::size_t i = 0; i < locks.size(); ++i) {
            if (i) out << ',';
            print_contenders_json(out, locks[i]);
        }
        out << "]\n";
        return exit_code::ok;
    }
    if (locks.empty()) {
        out << "no locks match '" << pattern << "'\n";
        return exit_code::ok;
    }
    std::vector<std::vector<std::string>> rows{{"name", "kind", "holder", "waiters"}};
    for (const auto& s : locks) {
        std::string holder = "-";
        std::size_t waiters = 0;
        for (const auto& c2 : s.contenders)
            if (c2.holds)
                holder = holder == "-" ? c2.owner : holder + "," + c2.owner;
            else
                ++waiters;
        rows.push_back({s.name, s.kind, holder, std::to_string(waiters)});
    }
    print_table(out, rows);
    return exit_code::ok;
}

int run_backend_unlock(const global_options& g, const std::string& name, std::ostream& out) {
    auto c = backend_client(g);
    std::error_code ec;
    const auto before = c.inspect(name, lock_kind::reentrant, ec);
    bool deleted = false;
    if (!ec) deleted = c.make_mutex(name).force_unlock(ec);
    if (ec) throw diagnose(c, ec, "cannot unlock '" + one_line(name) + "'", name);
    if (!deleted) {
        out << "no lock named '" << name << "' is held: nothing deleted\n";
        return exit_code::ok;
    }
    out << "unlocked '" << name << "' (" << before.kind;
    for (const auto& h : before.contenders)
        if (h.holds) out << ", was held by " << h.owner << " in session " << h.session;
    out << "); the next waiter gets it\n";
    return exit_code::ok;
}

} // namespace dlock::cli

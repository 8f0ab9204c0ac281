#include "history.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

namespace dlock::fault {

namespace {

struct cursor {
    std::string_view s;
    std::size_t i = 0;
    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
            ++i;
    }
    bool eat(char c) {
        ws();
        if (i < s.size() && s[i] == c) {
            ++i;
            return true;
        }
        return false;
    }
};

void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

bool parse_string(cursor& c, std::string& out, std::string& error) {
    c.ws();
    if (c.i >= c.s.size() || c.s[c.i] != '"') {
        error = "expected a string at column " + std::to_string(c.i + 1);
        return false;
    }
    ++c.i;
    while (c.i < c.s.size()) {
        char ch = c.s[c.i++];
        if (ch == '"') return true;
        if (static_cast<unsigned char>(ch) < 0x20) {
            error = "control character in string at column " + std::to_string(c.i);
            return false;
        }
        if (ch != '\\') {
            out.push_back(ch);
            continue;
        }
        if (c.i >= c.s.size()) break;
        char e = c.s[c.i++];
        switch (e) {
        case '"':
            out.push_back('"');
            break;
        case '\\':
            out.push_back('\\');
            break;
        case '/':
            out.push_back('/');
            break;
        case 'b':
            out.push_back('\b');
            break;
        case 'f':
            out.push_back('\f');
            break;
        case 'n':
            out.push_back('\n');
            break;
        case 'r':
            out.push_back('\r');
            break;
        case 't':
            out.push_back('\t');
            break;
        case 'u': {
            if (c.i + 4 > c.s.size()) {
                error = "truncated \\u escape";
                return false;
            }
            unsigned cp = 0;
            auto sub = c.s.substr(c.i, 4);
            auto [p, ec] = std::from_chars(sub.data(), sub.data() + 4, cp, 16);
            if (ec != std::errc{} || p != sub.data() + 4) {
                error = "bad \\u escape at column " + std::to_string(c.i);
                return false;
            }
            c.i += 4;
            append_utf8(out, cp);
            break;
        }
        default:
            error = "bad escape at column " + std::to_string(c.i);
            return false;
        }
    }
    error = "unterminated string";
    return false;
}

bool parse_value(cursor& c, json_value& out, std::string& error) {
    c.ws();
    if (c.i >= c.s.size()) {
        error = "expected a value at end of line";
        return false;
    }
    char ch = c.s[c.i];
    if (ch == '"') {
        std::string s;
        if (!parse_string(c, s, error)) return false;
        out = std::move(s);
        return true;
    }
    if (c.s.substr(c.i, 4) == "true") {
        c.i += 4;
        out = true;
        return true;
    }
    if (c.s.substr(c.i, 5) == "false") {
        c.i += 5;
        out = false;
        return true;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        std::int64_t v = 0;
        auto [p, ec] = std::from_chars(c.s.data() + c.i, c.s.data() + c.s.size(), v);
        if (ec != std::errc{}) {
            error = "integer out of range at column " + std::to_string(c.i + 1);
            return false;
        }
        std::size_t end = static_cast<std::size_t>(p - c.s.data());
        if (end < c.s.size() && (c.s[end] == '.' || c.s[end] == 'e' || c.s[end] == 'E')) {
            error = "only integers are allowed (column " + std::to_string(c.i + 1) + ")";
            return false;
        }
        c.i = end;
        out = v;
        return true;
    }
    error =
        "unsupported value at column " + std::to_string(c.i + 1) + " (only string, integer, bool)";
    return false;
}

template <class T>
const T* get(const json_object& o, std::string_view k) {
    auto it = o.find(k);
    return it == o.end() ? nullptr : std::get_if<T>(&it->second);
}

bool has(const json_object& o, std::string_view k) {
    return o.find(k) != o.end();
}

} // namespace

std::optional<json_object> parse_flat_json(std::string_view line, std::string& error) {
    cursor c{line};
    json_object o;
    if (!c.eat('{')) {
        error = "expected '{'";
        return std::nullopt;
    }
    if (!c.eat('}')) {
        for (;;) {
            std::string key;
            if (!parse_string(c, key, error)) return std::nullopt;
            if (!c.eat(':')) {
                error = "expected ':' after key \"" + key + "\"";
                return std::nullopt;
            }
            json_value v;
            if (!parse_value(c, v, error)) return std::nullopt;
            if (!o.emplace(key, std::move(v)).second) {
                error = "duplicate key \"" + key + "\"";
                return std::nullopt;
            }
            if (c.eat(',')) continue;
            if (c.eat('}')) break;
            error = "expected ',' or '}' at column " + std::to_string(c.i + 1);
            return std::nullopt;
        }
    }
    c.ws();
    if (c.i != line.size()) {
        error = "trailing characters at column " + std::to_string(c.i + 1);
        return std::nullopt;
    }
    return o;
}

void jsonl_writer::key(std::string_view k) {
    buf_.push_back(buf_.empty() ? '{' : ',');
    buf_.push_back('"');
    buf_.append(k);
    buf_.append("\":");
}

jsonl_writer& jsonl_writer::field(std::string_view k, std::string_view value) {
    key(k);
    buf_.push_back('"');
    for (char ch : value) {
        switch (ch) {
        case '"':
            buf_.append("\\\"");
            break;
        case '\\':
            buf_.append("\\\\");
            break;
        case '\n':
            buf_.append("\\n");
            break;
        case '\r':
            buf_.append("\\r");
            break;
        case '\t':
            buf_.append("\\t");
            break;
        default:
            if (static_cast<unsigned char>(ch) < 0x20) {
                static constexpr char hex[] = "0123456789abcdef";
                buf_.append("\\u00");
                buf_.push_back(hex[(static_cast<unsigned char>(ch) >> 4) & 0xF]);
                buf_.push_back(hex[static_cast<unsigned char>(ch) & 0xF]);
            } else {
                buf_.push_back(ch);
            }
        }
    }
    buf_.push_back('"');
    return *this;
}

jsonl_writer& jsonl_writer::field(std::string_view k, std::int64_t value) {
    key(k);
    buf_.append(std::to_string(value));
    return *this;
}

jsonl_writer& jsonl_writer::field(std::string_view k, bool value) {
    key(k);
    buf_.append(value ? "true" : "false");
    return *this;
}

std::string jsonl_writer::line() {
    std::string out = buf_.empty() ? std::string("{") : std::move(buf_);
    out.append("}\n");
    buf_.clear();
    return out;
}

const char* to_string(op_kind k) noexcept {
    switch (k) {
    case op_kind::acquire:
        return "acquire";
    case op_kind::extend:
        return "extend";
    case op_kind::use:
        return "use";
    case op_kind::release:
        return "release";
    case op_kind::crash:
        return "crash";
    case op_kind::lost:
        return "lost";
    }
    return "?";
}

const char* to_string(op_type t) noexcept {
    switch (t) {
    case op_type::invoke:
        return "invoke";
    case op_type::ok:
        return "ok";
    case op_type::fail:
        return "fail";
    case op_type::info:
        return "info";
    }
    return "?";
}

namespace {

std::optional<std::string> to_event(const json_object& o, const std::string& src, history& h) {
    auto need_int = [&](std::string_view k, std::int64_t& out) -> std::optional<std::string> {
        auto* v = get<std::int64_t>(o, k);
        if (!v) return "field \"" + std::string(k) + "\" must be an integer";
        out = *v;
        return std::nullopt;
    };
    auto need_str = [&](std::string_view k, std::string& out) -> std::optional<std::string> {
        auto* v = get<std::string>(o, k);
        if (!v) return "field \"" + std::string(k) + "\" must be a string";
        out = *v;
        return std::nullopt;
    };
    auto opt_int = [&](std::string_view k,
                       std::optional<std::int64_t>& out) -> std::optional<std::string> {
        if (!has(o, k)) return std::nullopt;
        auto* v = get<std::int64_t>(o, k);
        if (!v) return "field \"" + std::string(k) + "\" must be an integer";
        out = *v;
        return std::nullopt;
    };
#define DLOCK_TRY(expr)                                                                            \
    if (auto err_ = (expr)) return err_

    if (has(o, "nemesis")) {
        nemesis_event n;
        n.source = src;
        DLOCK_TRY(need_str("nemesis", n.nemesis));
        DLOCK_TRY(need_int("t", n.t));
        if (auto* v = get<std::string>(o, "target")) n.target = *v;
        if (auto* v = get<std::string>(o, "value")) n.value = *v;
        h.nemesis.push_back(std::move(n));
        return std::nullopt;
    }
    if (has(o, "seq")) {
        resource_entry r;
        r.source = src;
        DLOCK_TRY(need_int("seq", r.seq));
        DLOCK_TRY(need_str("lock", r.lock));
        DLOCK_TRY(need_str("kind", r.kind));
        if (r.kind != "open" && r.kind != "write" && r.kind != "final")
            return "resource kind must be open, write or final, not \"" + r.kind + "\"";
        DLOCK_TRY(opt_int("fence", r.fence));
        DLOCK_TRY(opt_int("before", r.before));
        DLOCK_TRY(opt_int("after", r.after));
        if (has(o, "accepted")) {
            auto* b = get<bool>(o, "accepted");
            if (!b) return std::string("field \"accepted\" must be a bool");
            r.accepted = *b;
        }
        h.resource.push_back(std::move(r));
        return std::nullopt;
    }
    if (!has(o, "f"))
        return std::string("not an operation (no \"f\"), nemesis or resource entry (no \"seq\")");
    op_event e;
    e.source = src;
    std::string f, type;
    DLOCK_TRY(need_int("w", e.w));
    DLOCK_TRY(need_str("f", f));
    DLOCK_TRY(need_str("type", type));
    DLOCK_TRY(need_int("t", e.t));
    if (f == "acquire")
        e.f = op_kind::acquire;
    else if (f == "extend")
        e.f = op_kind::extend;
    else if (f == "use")
        e.f = op_kind::use;
    else if (f == "release")
        e.f = op_kind::release;
    else if (f == "crash")
        e.f = op_kind::crash;
    else if (f == "lost")
        e.f = op_kind::lost;
    else
        return "unknown operation f=\"" + f + "\"";
    if (type == "invoke")
        e.type = op_type::invoke;
    else if (type == "ok")
        e.type = op_type::ok;
    else if (type == "fail")
        e.type = op_type::fail;
    else if (type == "info")
        e.type = op_type::info;
    else
        return "unknown type \"" + type + "\"";
    if (e.f != op_kind::crash) {
        DLOCK_TRY(need_int("op", e.op));
        DLOCK_TRY(need_str("lock", e.lock));
    } else {
        std::optional<std::int64_t> op;
        DLOCK_TRY(opt_int("op", op));
        e.op = op.value_or(-1);
        if (auto* v = get<std::string>(o, "lock")) e.lock = *v;
    }
    if (has(o, "token_h")) {
        std::string tok;
        DLOCK_TRY(need_str("token_h", tok));
        e.token_h = tok;
    }
    DLOCK_TRY(opt_int("fence", e.fence));
    DLOCK_TRY(opt_int("deadline", e.deadline));
    DLOCK_TRY(opt_int("ttl_ms", e.ttl_ms));
    DLOCK_TRY(opt_int("t_start", e.t_start));
    DLOCK_TRY(opt_int("t_first_fwd", e.t_first_fwd));
    DLOCK_TRY(opt_int("deleted", e.deleted));
    if (has(o, "watchdog")) {
        auto* b = get<bool>(o, "watchdog");
        if (!b) return std::string("field \"watchdog\" must be a bool");
        e.watchdog = *b;
    }
#undef DLOCK_TRY
    h.events.push_back(std::move(e));
    return std::nullopt;
}

} // namespace

std::optional<parse_error> add_jsonl(history& h, std::string_view name, std::string_view text) {
    std::size_t line_no = 0;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t nl = text.find('\n', pos);
        std::string_view line =
            text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        ++line_no;
        pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
        std::size_t first = line.find_first_not_of(" \t\r");
        if (first == std::string_view::npos) continue;
        std::string src = std::string(name) + ":" + std::to_string(line_no);
        std::string err;
        auto obj = parse_flat_json(line, err);
        if (!obj) return parse_error{src + ": " + err};
        if (auto e = to_event(*obj, src, h)) return parse_error{src + ": " + *e};
    }
    return std::nullopt;
}

void finish(history& h) {
    auto rank = [](op_type t) { return t == op_type::invoke ? 0 : 1; };
    std::stable_sort(h.events.begin(), h.events.end(), [&](const op_event& a, const op_event& b) {
        if (a.t != b.t) return a.t < b.t;
        return rank(a.type) < rank(b.type);
    });
    std::stable_sort(h.nemesis.begin(), h.nemesis.end(),
                     [](const auto& a, const auto& b) { return a.t < b.t; });
    std::stable_sort(h.resource.begin(), h.resource.end(),
                     [](const auto& a, const auto& b) { return a.seq < b.seq; });
}

} // namespace dlock::fault

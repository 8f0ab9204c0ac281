#include "common.hpp"

#include <charconv>
#include <cstdlib>

namespace dlock::cli {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
    if (text == "0") return std::chrono::milliseconds(0);
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
        ++digits;
    if (digits == 0 || digits > 12) return std::nullopt;
    long long n = 0;
    std::from_chars(text.data(), text.data() + digits, n);
    const auto unit = text.substr(digits);
    long long ms = 0;
    if (unit == "ms")
        ms = n;
    else if (unit == "s")
        ms = n * 1000;
    else if (unit == "m")
        ms = n * 60'000;
    else if (unit == "h")
        ms = n * 3'600'000;
    else
        return std::nullopt;
    if (ms > 1000LL * 3'600'000) return std::nullopt;
    return std::chrono::milliseconds(ms);
}

std::chrono::milliseconds duration_arg(const std::string& option, const std::string& text) {
    auto d = parse_duration(text);
    if (!d)
        throw usage_error("invalid duration for " + option + ": '" + text +
                          "' (use e.g. 250ms, 30s, 5m, 1h)");
    return *d;
}

client_options connect_options(const global_options& g) {
    std::vector<std::string> urls = g.urls;
    if (urls.empty()) {
        const char* env = std::getenv("DLOCK_URL");
        urls.push_back(env && *env ? env : "redis://127.0.0.1:6379");
    }
    if (urls.size() > 1)
        throw usage_error("several --url options mean Redlock, which is not implemented yet");
    std::error_code ec;
    std::string why;
    auto o = parse_url(urls[0], ec, &why);
    if (ec) throw usage_error(why);
    if (const char* pw = std::getenv("DLOCK_PASSWORD"); pw && *pw) o.password = pw;
    o.client_name = "dlock-cli";
    return o;
}

int exit_code_for(const std::error_code& ec) {
    if (ec == errc::unavailable || ec == errc::timeout || ec == errc::ambiguous ||
        ec == errc::auth_failed || ec == errc::permission_denied)
        return exit_code::unavailable;
    if (ec == errc::invalid_argument || ec == errc::configuration_error) return exit_code::usage;
    return exit_code::failure;
}

void json_string(std::ostream& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out << '"';
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"':
            out << "\\\"";
            break;
        case '\\':
            out << "\\\\";
            break;
        case '\n':
            out << "\\n";
            break;
        case '\r':
            out << "\\r";
            break;
        case '\t':
            out << "\\t";
            break;
        default:
            if (c < 0x20)
                out << "\\u00" << hex[c >> 4] << hex[c & 15];
            else
                out << ch;
        }
    }
    out << '"';
}

} // namespace dlock::cli

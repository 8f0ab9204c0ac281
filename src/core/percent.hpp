// percent_decode: %XX escapes of URL parts (Redis URLs' userinfo and query, PostgreSQL URLs'
// dlock_* parameters); url_params: the items of a URL's query (zk://, redlock://).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

/// Decodes `in` into `out` (%XX, hex either case; every other byte as is). False for a '%' not
/// followed by two hex digits (`out` is then incomplete).
bool percent_decode(std::string_view in, std::string& out);

/// One `key=value` item of a URL query.
struct url_param {
    std::string_view key;
    std::string_view value; ///< empty without '='
    std::string_view item;  ///< the whole item, for messages
    bool has_value = false; ///< the item has '='
};

/// The items of a URL query joined with '&', in order (views into `query`; empty: none).
std::vector<url_param> url_params(std::string_view query);

} // namespace dlock::detail

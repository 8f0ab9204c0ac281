// make_backend(): the URL's scheme picks the backend (backends.hpp).
#include "backends.hpp"

namespace dlock::detail {

namespace {
[[maybe_unused]] std::shared_ptr<lock_backend>
missing(std::string_view what, std::string_view package, std::error_code& ec, std::string* why) {
    ec = make_error_code(errc::unsupported);
    if (why)
        *why = "this dlock was built without the " + std::string(what) + " backend (" +
               std::string(package) + " was not found when it was built)";
    return nullptr;
}
} // namespace

std::shared_ptr<lock_backend> make_backend(std::string_view url, std::error_code& ec,
                                           std::string* why) {
    ec.clear();
    const auto end = url.find("://");
    if (end == std::string_view::npos) return nullptr; // parse_url() names the problem
    const auto scheme = url.substr(0, end);
    if (scheme == "zk" || scheme == "zks") { // zks: TLS, which the ZooKeeper factory refuses
#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
        return make_zookeeper_backend(url, ec, why);
#else
        return missing("ZooKeeper", "libzookeeper-mt-dev", ec, why);
#endif
    }
    if (scheme == "postgresql" || scheme == "postgres") {
#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
        return make_postgres_backend(url, ec, why);
#else
        return missing("PostgreSQL", "libpq-dev", ec, why);
#endif
    }
    return nullptr;
}

} // namespace dlock::detail

// make_backend(): the URL's scheme picks the backend (backends.hpp). The one table of schemes:
// a new backend is one line here, its folder and CMake.
#include "backends.hpp"

#include "redis/backend.hpp"
#include "redis/redlock/backend.hpp"
#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
#include "zookeeper/backend.hpp"
#endif
#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
#include "postgres/backend.hpp"
#endif
#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
#include "etcd/backend.hpp"
#endif

#include <array>

namespace dlock::detail {

namespace {

using factory = std::shared_ptr<lock_backend> (*)(std::string_view url, std::error_code& ec,
                                                  std::string* why, const log_options& log);

/// The backend `make` builds, or null with `ec` and `why` from the dlock::error it threw.
template <class Make>
std::shared_ptr<lock_backend> guarded(Make make, std::error_code& ec, std::string* why) {
    try {
        return make();
    } catch (const dlock::error& e) {
        ec = e.code();
        if (why) { // what() is "<reason>: <the code's message>"; the caller adds the latter
            *why = e.what();
            const auto suffix = ": " + ec.message();
            if (why->ends_with(suffix)) why->resize(why->size() - suffix.size());
        }
        return nullptr;
    }
}

std::shared_ptr<lock_backend> make_redis_backend(std::string_view url, std::error_code& ec,
                                                 std::string* why, const log_options& log) {
    return guarded(
        [&] {
            auto o = parse_url(url);
            o.log = log;
            return std::make_shared<redis_backend>(std::move(o));
        },
        ec, why);
}

std::shared_ptr<lock_backend> make_redlock_backend(std::string_view url, std::error_code& ec,
                                                   std::string* why, const log_options& log) {
    return guarded(
        [&] {
            auto o = redlock::parse_url(url);
            for (auto& m : o.masters)
                m.log = log;
            return std::make_shared<redlock_backend>(std::move(o));
        },
        ec, why);
}

/// A backend this build lacks: errc::unsupported, naming the package it needs.
template <const char* What, const char* Package>
std::shared_ptr<lock_backend> missing(std::string_view, std::error_code& ec, std::string* why,
                                      const log_options&) {
    ec = make_error_code(errc::unsupported);
    if (why)
        *why = "this dlock was built without the " + std::string(What) + " backend (" +
               std::string(Package) + " was not found when it was built)";
    return nullptr;
}
[[maybe_unused]] constexpr char zookeeper_name[] = "ZooKeeper";
[[maybe_unused]] constexpr char zookeeper_package[] = "libzookeeper-st-dev";
[[maybe_unused]] constexpr char postgres_name[] = "PostgreSQL";
[[maybe_unused]] constexpr char postgres_package[] = "libpq-dev";
[[maybe_unused]] constexpr char etcd_name[] = "etcd";
[[maybe_unused]] constexpr char etcd_package[] = "libgrpc++-dev";

#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
constexpr factory zookeeper = make_zookeeper_backend;
#else
constexpr factory zookeeper = missing<zookeeper_name, zookeeper_package>;
#endif
#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
constexpr factory postgres = make_postgres_backend;
#else
constexpr factory postgres = missing<postgres_name, postgres_package>;
#endif
#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
constexpr factory etcd = make_etcd_backend;
#else
constexpr factory etcd = missing<etcd_name, etcd_package>;
#endif

struct scheme_entry {
    std::string_view scheme;
    factory make;
};

// zks: TLS, which the ZooKeeper factory refuses with its reason.
constexpr std::array schemes{
    scheme_entry{"redis", make_redis_backend},
    scheme_entry{"rediss", make_redis_backend},
    scheme_entry{"unix", make_redis_backend},
    scheme_entry{"redis-sentinel", make_redis_backend},
    scheme_entry{"rediss-sentinel", make_redis_backend},
    scheme_entry{"redis-cluster", make_redis_backend},
    scheme_entry{"redlock", make_redlock_backend},
    scheme_entry{"rediss-redlock", make_redlock_backend},
    scheme_entry{"zk", zookeeper},
    scheme_entry{"zks", zookeeper},
    scheme_entry{"postgresql", postgres},
    scheme_entry{"postgres", postgres},
    scheme_entry{"etcd", etcd},
    scheme_entry{"etcds", etcd},
};

} // namespace

std::string known_schemes() {
    std::string out;
    for (const auto& s : schemes)
        out.append(out.empty() ? "" : ", ").append(s.scheme).append("://");
    return out;
}

std::shared_ptr<lock_backend> make_backend(std::string_view url, std::error_code& ec,
                                           std::string* why, const log_options& log) {
    ec.clear();
    const auto end = url.find("://");
    const auto scheme = end == std::string_view::npos ? std::string_view{} : url.substr(0, end);
    for (const auto& s : schemes)
        if (s.scheme == scheme) return s.make(url, ec, why, log);
    ec = make_error_code(errc::configuration_error);
    if (why)
        *why =
            (end == std::string_view::npos ? std::string("the URL has no scheme")
                                           : "unknown URL scheme '" + std::string(scheme) + "'") +
            " (known: " + known_schemes() + ")";
    return nullptr;
}

} // namespace dlock::detail

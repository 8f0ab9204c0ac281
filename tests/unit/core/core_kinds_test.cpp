// The one table of lock kinds (src/core/kinds.cpp): names round-trip, every kind has its own
// metrics slot and label, and the table's "offered by" column says what each backend's own
// declaration says (the Redis registry, Redlock's backend, ZooKeeper's node infixes,
// PostgreSQL's kind tests, etcd's kinds).
#include "core/kinds.hpp"
#include "core/metrics.hpp"
#include "redis/locks/protocol.hpp"
#include "redis/redlock/backend.hpp"
#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
#include "zookeeper/backend.hpp"
#endif
#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
#include "etcd/layout.hpp"
#endif
#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
#include "postgres/advisory.hpp"
#include "postgres/rows.hpp"
#endif

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace dlock;

namespace {
bool offered_by(lock_kind k, std::string_view backend) {
    return std::string(backends_offering(k)).find(backend) != std::string::npos;
}
} // namespace

TEST(kinds, every_kind_has_a_name_that_maps_back_to_it) {
    std::set<std::string_view> names;
    for (const auto k : all_kinds()) {
        const auto n = kind_name(k);
        EXPECT_FALSE(n.empty());
        EXPECT_TRUE(names.insert(n).second) << "name given twice: " << n;
        ASSERT_TRUE(kind_from_name(n));
        EXPECT_EQ(*kind_from_name(n), k);
    }
    EXPECT_EQ(names.size(), detail::kind_count);
    EXPECT_EQ(kind_name(lock_kind::reentrant), "lock");
    EXPECT_FALSE(kind_from_name("reentrant")) << "the CLI name of the reentrant lock is lock";
    EXPECT_FALSE(kind_from_name(""));
}

TEST(kinds, every_kind_has_its_own_metrics_slot_and_label) {
    std::set<std::size_t> slots;
    for (const auto k : all_kinds())
        EXPECT_TRUE(slots.insert(detail::metrics_slot(k)).second);
    EXPECT_EQ(slots.size(), detail::kind_count);
    EXPECT_EQ(*slots.rbegin() + 1, detail::custom_kind_slot);
    detail::client_metrics m;
    m.acquisition(detail::metrics_slot(lock_kind::shedlock), {}, true, false, {});
    m.acquisition(detail::metrics_slot(lock_kind::semaphore), {}, true, false, {});
    m.acquisition(detail::custom_kind_slot, {}, true, false, {});
    const auto s = m.snapshot();
    ASSERT_EQ(s.acquisitions.size(), detail::kind_count + 1);
    std::set<std::string> labels;
    for (const auto& k : s.acquisitions) {
        EXPECT_TRUE(labels.insert(k.kind).second) << "label given twice: " << k.kind;
        const bool counted = k.kind == "shedlock" || k.kind == "semaphore" || k.kind == "custom";
        EXPECT_EQ(k.acquired, counted ? 1u : 0u) << k.kind;
    }
}

TEST(kinds, the_redis_column_matches_the_redis_registry) {
    for (const auto k : all_kinds())
        EXPECT_EQ(detail::protocol_of(k).offered(), offered_by(k, "redis")) << kind_name(k);
}

TEST(kinds, the_redis_registry_indexes_its_protocols_in_the_order_of_the_table) {
    // protocol_of() maps each kind to its registered protocol: each offered kind must reach
    // the protocol of that kind (its name is the kind's metrics label).
    for (const auto k : all_kinds()) {
        if (!detail::protocol_of(k).offered()) continue;
        EXPECT_EQ(detail::protocol_of(k).name(), detail::info_of(k).metrics_label) << kind_name(k);
    }
}

TEST(kinds, the_redlock_column_matches_the_redlock_backend) {
    redlock_options o;
    o.masters.push_back(client_options{.endpoints = {{"127.0.0.1", 1}}});
    detail::redlock_backend b(o); // connects lazily: no server is needed
    for (const auto k : all_kinds())
        EXPECT_EQ(b.supports(k), offered_by(k, "redlock")) << kind_name(k);
}

#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
TEST(kinds, the_zookeeper_column_matches_the_zookeeper_backend) {
    for (const auto k : all_kinds())
        EXPECT_EQ(!detail::zk::infix_of(k).empty(), offered_by(k, "zookeeper")) << kind_name(k);
}
#endif

#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
TEST(kinds, the_etcd_column_matches_the_etcd_backend) {
    for (const auto k : all_kinds())
        EXPECT_EQ(detail::etcd::offered(k), offered_by(k, "etcd")) << kind_name(k);
}
#endif

#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
TEST(kinds, the_postgresql_column_matches_the_postgresql_backend) {
    for (const auto k : all_kinds())
        EXPECT_EQ(detail::pg::advisory_kind(k) || detail::pg::row_kind(k),
                  offered_by(k, "postgresql"))
            << kind_name(k);
}
#endif

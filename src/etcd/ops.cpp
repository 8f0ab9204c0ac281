#include "etcd/ops.hpp"

#include "etcd/layout.hpp"

namespace dlock::detail::etcd {
namespace {

/// Compares `key`'s create revision with `rev` (0: the key is absent).
void created_at(pb::TxnRequest& t, const std::string& key, std::int64_t rev) {
    auto* cmp = t.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(rev);
}

void put(pb::TxnRequest& t, const std::string& key, std::int64_t lease, std::string value = {}) {
    auto* p = t.add_success()->mutable_request_put();
    p->set_key(key);
    p->set_lease(lease);
    p->set_value(std::move(value));
}

} // namespace

pb::RangeRequest by_create(const std::string& range, std::int64_t limit) {
    pb::RangeRequest r;
    r.set_key(range);
    r.set_range_end(range_end(range));
    r.set_sort_target(pb::RangeRequest::CREATE);
    r.set_sort_order(pb::RangeRequest::ASCEND);
    r.set_limit(limit);
    return r;
}

pb::RangeRequest predecessor(const std::string& range, std::int64_t below) {
    auto r = by_create(range, 1);
    r.set_sort_order(pb::RangeRequest::DESCEND);
    r.set_max_create_revision(below - 1);
    return r;
}

pb::RangeRequest one_key(const std::string& key) {
    pb::RangeRequest r;
    r.set_key(key);
    return r;
}

pb::TxnRequest lock_txn(const std::string& key, const std::string& range, std::int64_t lease,
                        const std::string* value) {
    pb::TxnRequest t;
    created_at(t, key, 0);
    put(t, key, lease, value ? *value : std::string());
    auto* count = t.add_success()->mutable_request_range();
    count->set_key(range);
    count->set_range_end(range_end(range));
    count->set_count_only(true);
    *t.add_failure()->mutable_request_range() = one_key(key);
    *t.add_failure()->mutable_request_range() = by_create(range, 1);
    if (value) { // the adopted key takes the campaign's value (responses [0] and [1] come first)
        auto* p = t.add_failure()->mutable_request_put();
        p->set_key(key);
        p->set_lease(lease);
        p->set_value(*value);
    }
    return t;
}

pb::TxnRequest proclaim_txn(const std::string& key, std::int64_t rev, std::int64_t lease,
                            std::string value) {
    pb::TxnRequest t;
    created_at(t, key, rev);
    put(t, key, lease, std::move(value));
    return t;
}

pb::RangeRequest last_before(const std::string& prefix, std::int64_t below) {
    auto r = by_create(prefix, 1);
    r.set_sort_target(pb::RangeRequest::MOD);
    r.set_sort_order(pb::RangeRequest::DESCEND);
    r.set_max_mod_revision(below - 1);
    return r;
}

pb::TxnRequest rw_txn(const std::string& key, const std::string& blockers, std::int64_t lease) {
    pb::TxnRequest t;
    created_at(t, key, 0);
    put(t, key, lease);
    auto newest = last_before(blockers, 0);
    newest.set_max_mod_revision(0); // no bound: the put above is the newest revision
    newest.set_limit(2);
    *t.add_success()->mutable_request_range() = std::move(newest);
    return t;
}

pb::TxnRequest semaphore_txn(const std::string& key, const std::string& keys, std::int64_t lease,
                             unsigned permits) {
    pb::TxnRequest t;
    created_at(t, key, 0);
    put(t, key, lease, std::to_string(permits));
    *t.add_success()->mutable_request_range() = by_create(keys, 0); // 0: no limit
    return t;
}

pb::TxnRequest semaphore_line(const std::string& key, const std::string& keys, std::int64_t rev) {
    pb::TxnRequest t; // no compare: the success branch runs
    pb::RangeRequest ahead;
    ahead.set_key(keys);
    ahead.set_range_end(range_end(keys));
    ahead.set_max_create_revision(rev - 1);
    *t.add_success()->mutable_request_range() = std::move(ahead);
    *t.add_success()->mutable_request_range() = one_key(key);
    return t;
}

pb::TxnRequest downgrade_txn(const std::string& key, const std::string& writers,
                             std::int64_t write_rev, std::int64_t lease) {
    pb::TxnRequest t;
    created_at(t, key, 0);
    auto* later = t.add_compare(); // every key in the range: none is younger than the hold
    later->set_key(writers);
    later->set_range_end(range_end(writers));
    later->set_target(pb::Compare::CREATE);
    later->set_result(pb::Compare::LESS);
    later->set_create_revision(write_rev + 1);
    put(t, key, lease);
    return t;
}

pb::TxnRequest once_claim_txn(const std::string& key, std::string token, std::int64_t lease) {
    pb::TxnRequest t;
    created_at(t, key, 0);
    put(t, key, lease, std::move(token));
    return t;
}

pb::TxnRequest once_release_txn(const std::string& key, const std::string& token) {
    pb::TxnRequest t;
    auto* cmp = t.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::VALUE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_value(token);
    t.add_success()->mutable_request_delete_range()->set_key(key);
    return t;
}

pb::TxnRequest still_mine_then(const std::string& key, std::int64_t rev, pb::RangeRequest ahead) {
    pb::TxnRequest t;
    created_at(t, key, rev);
    *t.add_success()->mutable_request_range() = std::move(ahead);
    return t;
}

pb::TxnRequest delete_if(const std::string& key, std::int64_t rev) {
    return delete_if({{key, rev}});
}

pb::TxnRequest delete_if(const std::vector<std::pair<std::string, std::int64_t>>& keys) {
    pb::TxnRequest t;
    for (const auto& [key, rev] : keys) {
        created_at(t, key, rev);
        t.add_success()->mutable_request_delete_range()->set_key(key);
    }
    return t;
}

} // namespace dlock::detail::etcd

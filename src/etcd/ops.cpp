#include "etcd/ops.hpp"

#include "etcd/layout.hpp"

namespace dlock::detail::etcd {

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

pb::TxnRequest lock_txn(const std::string& key, const std::string& range, std::int64_t lease) {
    pb::TxnRequest t;
    auto* cmp = t.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_lease(lease);
    *t.add_success()->mutable_request_range() = by_create(range, 1);
    *t.add_failure()->mutable_request_range() = one_key(key);
    *t.add_failure()->mutable_request_range() = by_create(range, 1);
    return t;
}

pb::TxnRequest delete_if(const std::string& key, std::int64_t rev) {
    pb::TxnRequest t;
    auto* cmp = t.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(rev);
    t.add_success()->mutable_request_delete_range()->set_key(key);
    return t;
}

} // namespace dlock::detail::etcd

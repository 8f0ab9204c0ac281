// etcd_backend's queries: inspect, is_locked, force_unlock, remaining_lease and list, from one
// read of a lock's key range (every contender in create-revision order) and, for the holder,
// LeaseTimeToLive.
#include "core/glob.hpp"
#include "etcd/backend.hpp"
#include "etcd/backend_call.hpp"
#include "etcd/layout.hpp"
#include "etcd/ops.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <iterator>

namespace dlock::detail::etcd {
namespace {

/// list() reads at most this many keys.
constexpr std::int64_t max_list_keys = 10000;

/// One contender of a semaphore, from its key (create-revision order).
void add_permit_holder(lock_status& st, const mvccpb::KeyValue& kv) {
    if (st.contenders.empty()) st.details["permits"] = kv.value();
    st.kind = "semaphore";
    std::uint64_t permits = 0;
    try {
        permits = std::stoull(st.details["permits"]);
    } catch (const std::exception&) { // not ours: no holder can be named
    }
    lock_contender c;
    c.owner = lease_hex(kv.lease());
    c.entry = kv.key();
    c.session = c.owner;
    c.position = st.contenders.size();
    c.holds = st.contenders.size() < permits;
    c.token = static_cast<std::uint64_t>(kv.create_revision());
    st.contenders.push_back(std::move(c));
    st.exists = true;
    const auto held = std::min<std::uint64_t>(st.contenders.size(), permits);
    st.detail = std::to_string(held) + " of " + st.details["permits"] + " permit(s) in use, " +
                std::to_string(st.contenders.size() - held) + " waiting";
}

/// One contender of the lock of `range`, from its key; the keys come in create-revision
/// order. A Mutex or write key holds when it is the first; a read key when no Mutex or write
/// key is before it. A read or write key makes the lock's kind "read-write" (unless the caller
/// asked for one side) and its holders set details["mode"]. A semaphore's N oldest keys hold,
/// N being the permits its first key stores (details["permits"]).
void add_contender(lock_status& st, const std::string& range, const mvccpb::KeyValue& kv) {
    const auto kind = kind_of_key(range, kv.key()).value_or(lock_kind::reentrant);
    if (kind == lock_kind::semaphore) return add_permit_holder(st, kv);
    // A read key holds only with no Mutex or write key before it, so one is before this key
    // unless the previous key is a holding reader (or there is none): no walk back.
    const bool exclusive_before =
        !st.contenders.empty() &&
        !(st.contenders.back().holds &&
          kind_of_key(range, st.contenders.back().entry) == lock_kind::read);
    lock_contender c;
    c.owner = lease_hex(kv.lease());
    c.entry = kv.key();
    c.session = c.owner;
    c.position = st.contenders.size();
    c.holds = kind == lock_kind::read ? !exclusive_before : st.contenders.empty();
    c.token = static_cast<std::uint64_t>(kv.create_revision());
    if (rw_side(kind)) {
        if (st.kind == "lock") st.kind = "read-write";
        if (c.holds) st.details["mode"] = std::string(kind_name(kind));
    }
    st.contenders.push_back(std::move(c));
    st.exists = true;
}

} // namespace

void etcd_backend::contenders(const std::string& range,
                              std::function<void(std::error_code, pb::RangeResponse&&)> done) {
    rpc_->range(by_create(range),
                [this, done = std::move(done)](grpc::Status s, pb::RangeResponse&& r) {
                    if (!s.ok())
                        set_error("range on etcd " + url_.display() + ": " + s.error_message());
                    done(to_error(s), std::move(r));
                });
}

lock_status etcd_backend::inspect(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec.clear();
    lock_status st;
    st.name = std::string(name);
    st.kind = std::string(kind_name(kind));
    const auto range = range_of(name, ec);
    if (ec) return st;
    if (on_io_thread()) {
        ec = errc::invalid_argument;
        return st;
    }
    using result = std::pair<std::error_code, lock_status>;
    auto [e, got] = call<result>(
        [this, range, st](std::function<void(result)> done) {
            contenders(range, [this, range, st, done](std::error_code e2,
                                                      pb::RangeResponse&& r) mutable {
                if (e2) return done({e2, st});
                for (const auto& kv : r.kvs())
                    add_contender(st, range, kv);
                st.details["revision"] = std::to_string(r.header().revision());
                if (r.kvs().empty()) return done({{}, st});
                pb::LeaseTimeToLiveRequest q;
                q.set_id(r.kvs(0).lease());
                rpc_->lease_ttl(std::move(q), [st, done](grpc::Status s,
                                                         pb::LeaseTimeToLiveResponse&& t) mutable {
                    if (s.ok() && t.ttl() > 0) st.remaining_lease = std::chrono::seconds(t.ttl());
                    done({{}, st});
                });
            });
        },
        {make_error_code(errc::unavailable), st});
    ec = e;
    return got;
}

bool etcd_backend::is_locked(std::string_view name, lock_kind kind, std::error_code& ec) {
    const auto st = inspect(name, kind, ec);
    return !ec && st.exists;
}

std::optional<std::chrono::milliseconds>
etcd_backend::remaining_lease(std::string_view name, lock_kind kind, std::error_code& ec) {
    const auto st = inspect(name, kind, ec);
    return ec ? std::nullopt : st.remaining_lease;
}

bool etcd_backend::force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) {
    (void)kind; // one range: the Mutex's holder, the RWMutex's writer or every reader
    ec.clear();
    const auto range = range_of(name, ec);
    if (ec) return false;
    if (on_io_thread()) {
        ec = errc::invalid_argument;
        return false;
    }
    using result = std::pair<std::error_code, bool>;
    auto [e, deleted] = call<result>(
        [this, range](std::function<void(result)> done) {
            rpc_->range(by_create(range), [this, range, done](grpc::Status s,
                                                              pb::RangeResponse&& r) {
                if (!s.ok() || r.kvs().empty()) return done({to_error(s), false});
                // The holders' keys (one, or every reader), if they are still the same ones.
                lock_status st;
                st.kind = "lock";
                std::vector<std::pair<std::string, std::int64_t>> holders;
                for (const auto& kv : r.kvs()) {
                    add_contender(st, range, kv);
                    if (st.contenders.back().holds)
                        holders.emplace_back(kv.key(), kv.create_revision());
                }
                rpc_->txn(delete_if(holders), [this, done](grpc::Status s2, pb::TxnResponse&& t) {
                    if (!s2.ok()) set_error("force unlock on etcd: " + s2.error_message());
                    done({to_error(s2), s2.ok() && t.succeeded()});
                });
            });
        },
        {make_error_code(errc::unavailable), false});
    ec = e;
    return deleted;
}

std::vector<lock_status> etcd_backend::list(std::string_view pattern, std::error_code& ec) {
    ec.clear();
    if (on_io_thread()) {
        ec = errc::invalid_argument;
        return {};
    }
    using result = std::pair<std::error_code, std::vector<lock_status>>;
    auto [e, out] = call<result>(
        [this, pat = std::string(pattern)](std::function<void(result)> done) {
            // Every key under the prefix (the whole keyspace without one), oldest first.
            pb::RangeRequest q = by_create(
                url_.prefix.empty() ? std::string(1, '\0') : url_.prefix + "/", max_list_keys);
            if (url_.prefix.empty()) q.set_range_end(std::string(1, '\0'));
            q.set_keys_only(true);
            rpc_->range(std::move(q), [this, pat, done](grpc::Status s, pb::RangeResponse&& r) {
                if (!s.ok()) return done({to_error(s), {}});
                std::vector<lock_status> found;
                for (const auto& kv : r.kvs()) {
                    const auto name = lock_of_key(url_.prefix, kv.key());
                    if (!name || !glob_match(pat, *name)) continue;
                    auto it = std::find_if(found.begin(), found.end(),
                                           [&](const lock_status& st) { return st.name == *name; });
                    if (it == found.end()) {
                        lock_status st;
                        st.name = *name;
                        st.kind = "lock";
                        found.push_back(std::move(st));
                        it = std::prev(found.end());
                    }
                    add_contender(*it, lock_range(url_.prefix, *name), kv);
                }
                done({{}, found});
            });
        },
        {make_error_code(errc::unavailable), {}});
    ec = e;
    return out;
}

} // namespace dlock::detail::etcd

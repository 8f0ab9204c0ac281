// etcd_backend::acquire_read_under: a write lock downgraded to a read lock. The RWMutex orders
// contenders by revision, and a read key put now is younger than every waiter: a writer queued
// behind the write hold would wait only for the write key and then hold beside this reader.
// So the read key is put (with the write hold's lease) only while no write key younger than
// the hold's exists, in one Txn; when a writer waits behind it the downgrade is refused
// (errc::invalid_argument, and the last error says why) rather than waiting for itself.
#include "etcd/backend.hpp"
#include "etcd/backend_call.hpp"
#include "etcd/hold.hpp"
#include "etcd/layout.hpp"
#include "etcd/ops.hpp"

#include <dlock/error.hpp>

namespace dlock::detail::etcd {

std::shared_ptr<hold> etcd_backend::acquire_read_under(const hold& write, std::error_code& ec) {
    ec.clear();
    const auto* w = dynamic_cast<const etcd_hold*>(&write);
    if (!w || on_io_thread() || kind_of_key(w->range(), w->key()) != lock_kind::write) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    auto lease = w->lease();
    if (w->lost() || w->released() || !lease || lease->ended()) {
        ec = make_error_code(errc::not_owner);
        return nullptr;
    }
    using result = std::pair<std::error_code, std::shared_ptr<hold>>;
    auto [e, granted] = call<result>(
        [this, lease, name = w->name(), range = w->range(),
         write_rev = w->revision()](std::function<void(result)> done) {
            auto key = rw_key(range, lock_kind::read, unique_ns());
            rpc_->txn(
                downgrade_txn(key, rw_blockers(range, lock_kind::read), write_rev, lease->id()),
                [this, lease, name, range, key, done](grpc::Status s, pb::TxnResponse&& r) {
                    if (!s.ok()) {
                        set_error("downgrade to read on etcd " + url_.display() + ": " +
                                  s.error_message());
                        return done({to_error(s), nullptr});
                    }
                    if (!r.succeeded()) {
                        set_error("downgrade to read on etcd: a writer waits behind the "
                                  "write lock of '" +
                                  name + "', and a read key put now would not keep it out");
                        return done({make_error_code(errc::invalid_argument), nullptr});
                    }
                    const auto rev = r.header().revision();
                    auto read = std::make_shared<etcd_hold>(*this, lease, name, range, key, rev, 0);
                    read->start(rev + 1);
                    done({{}, std::move(read)});
                });
        },
        {make_error_code(errc::unavailable), nullptr});
    ec = e;
    return granted;
}

} // namespace dlock::detail::etcd

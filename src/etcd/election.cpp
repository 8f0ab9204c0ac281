// etcd_backend's leader election in etcd's concurrency.Election layout (dlock/election.hpp,
// docs/design/election.md): campaign, proclaim and leader. The observation is observe.cpp.
//
// The election `name` is a key range as a lock name is (layout.hpp: "<prefix>/<name>/"). A
// participant is its lease's key "<range><lease hex>" with its value, as the Go client's
// Campaign and `etcdctl elect NAME VALUE` put it; the key with the lowest create revision leads,
// and the others wait for the deletion of every older key (the Mutex's wait: acquire.cpp, in
// election mode). The leader's hold is an etcd_hold (hold.hpp): epoch = its key's create
// revision, lost when the lease ends or the key is deleted. proclaim() puts a new value on the
// key while its create revision is unchanged (Election.Proclaim); leader() reads the range's
// first key by create revision (Election.Leader).
#include "core/blocking_acquire.hpp"
#include "core/runtime.hpp"
#include "etcd/acquire.hpp"
#include "etcd/backend.hpp"
#include "etcd/backend_call.hpp"
#include "etcd/hold.hpp"
#include "etcd/ops.hpp"

#include <dlock/error.hpp>

namespace dlock::detail::etcd {

void etcd_backend::async_campaign(
    std::string name, std::string value, const campaign_options& opts,
    std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    const auto post_error = [&](errc e, std::string why) {
        if (!why.empty()) set_error(std::move(why));
        rt_.post([done = std::move(done), e] { done(make_error_code(e), nullptr); });
    };
    if (shut()) return post_error(errc::cancelled, "the etcd backend shut down");
    if (value.size() > leadership::max_value_size)
        return post_error(errc::invalid_argument,
                          "the value is over leadership::max_value_size bytes");
    std::error_code ec;
    auto range = range_of(name, ec);
    if (ec) return post_error(errc::invalid_argument, {}); // range_of() said why
    acquire_options o;
    o.kind = lock_kind::reentrant;
    o.wait = opts.wait;
    // `this`, not a shared_ptr: the I/O thread must never hold the last reference.
    rt_.post([this, name = std::move(name), range = std::move(range), o, value = std::move(value),
              done = std::move(done)]() mutable {
        auto a = std::make_shared<acquisition>(*this, std::move(name), std::move(range), o,
                                               std::move(done));
        a->elect(std::move(value));
        track(a);
        a->start();
    });
}

std::shared_ptr<hold> etcd_backend::campaign(std::string_view name, std::string value,
                                             const campaign_options& opts, std::error_code& ec) {
    return campaign_blocking(*this, name, std::move(value), opts, ec);
}

void etcd_backend::proclaim(hold& leader, std::string value, std::error_code& ec) {
    ec.clear();
    auto* h = dynamic_cast<etcd_hold*>(&leader);
    const auto lease = h ? h->lease() : nullptr;
    if (!h || !lease || h->lost() || h->released()) {
        ec = errc::not_owner;
        return;
    }
    if (on_io_thread() || value.size() > leadership::max_value_size) {
        ec = errc::invalid_argument;
        return;
    }
    ec = call<std::error_code>(
        [this, key = h->key(), rev = h->revision(), id = lease->id(),
         value = std::move(value)](std::function<void(std::error_code)> done) {
            if (shut()) return done(make_error_code(errc::not_owner));
            rpc_->txn(proclaim_txn(key, rev, id, value),
                      [this, key, done](grpc::Status s, pb::TxnResponse&& r) {
                          if (s.ok())
                              return done(r.succeeded() ? std::error_code{}
                                                        : make_error_code(errc::not_owner));
                          set_error("proclaim on " + key + " (etcd " + url_.display() +
                                    "): " + s.error_message());
                          // A request that may have reached the server may have been applied.
                          done(transient(s) ? make_error_code(errc::ambiguous) : to_error(s));
                      });
        },
        make_error_code(errc::ambiguous));
}

std::optional<leader_info> etcd_backend::leader(std::string_view name, std::error_code& ec) {
    ec.clear();
    const auto range = range_of(name, ec);
    if (ec) return std::nullopt;
    if (on_io_thread()) {
        ec = errc::invalid_argument;
        return std::nullopt;
    }
    using result = std::pair<std::error_code, std::optional<leader_info>>;
    auto [e, li] = call<result>(
        [this, range](std::function<void(result)> done) {
            rpc_->range(by_create(range, 1), [this, done](grpc::Status s, pb::RangeResponse&& r) {
                if (!s.ok()) {
                    set_error("read the leader on etcd " + url_.display() + ": " +
                              s.error_message());
                    return done({to_error(s), std::nullopt});
                }
                if (r.kvs().empty()) return done({{}, std::nullopt});
                done({{},
                      leader_info{r.kvs(0).value(),
                                  static_cast<std::uint64_t>(r.kvs(0).create_revision())}});
            });
        },
        {make_error_code(errc::unavailable), std::nullopt});
    ec = e;
    return li;
}

} // namespace dlock::detail::etcd

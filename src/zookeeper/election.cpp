// zk_backend's leader election in Apache Curator 5.x's LeaderLatch layout (dlock/election.hpp,
// docs/design/election.md): campaign, proclaim and leader. The observation is observe.cpp.
//
// The election `name` is a directory mapped as a lock name is (names.hpp: lock_dir). A
// participant is a protected EPHEMERAL_SEQUENTIAL child `_c_<uuid>-latch-<seq10>` whose data is
// its value (LeaderLatch: the participant id). campaign() is an acquisition in election mode
// (acquire.hpp: the lowest sequence leads, the others watch their predecessor, parents are
// CONTAINERs, protected-mode recovery, a vanished node or session starts over within the wait);
// the leader's hold is a zk_hold (hold.hpp): epoch = its czxid, lost on session expiry, the
// session's deadline or the node deleted. proclaim() sets the leader node's data; leader() reads
// the first child in LeaderLatch's order (names.hpp: sort_latch) as getLeader() does, skipping
// a child deleted meanwhile.
#include "core/blocking_acquire.hpp"
#include "core/runtime.hpp"
#include "zookeeper/acquire.hpp"
#include "zookeeper/backend.hpp"
#include "zookeeper/backend_call.hpp"
#include "zookeeper/hold.hpp"

#include <dlock/error.hpp>

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

void zk_backend::async_campaign(std::string name, std::string value, const campaign_options& opts,
                                std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    const auto post_error = [&](errc e, std::string why) {
        if (!why.empty()) set_error(std::move(why));
        rt_.post([done = std::move(done), e] { done(make_error_code(e), nullptr); });
    };
    if (shut()) return post_error(errc::cancelled, "the ZooKeeper backend shut down");
    if (value.size() > leadership::max_value_size)
        return post_error(errc::invalid_argument,
                          "the value is over leadership::max_value_size bytes");
    std::string why;
    auto dir = lock_dir(name, &why);
    if (dir.empty()) return post_error(errc::invalid_argument, "election name: " + why);
    acquire_options o;
    o.kind = lock_kind::reentrant;
    o.wait = opts.wait;
    // `this`, not a shared_ptr: the I/O thread must never hold the last reference.
    rt_.post([this, name = std::move(name), dir = std::move(dir), o, value = std::move(value),
              done = std::move(done)]() mutable {
        auto a = std::make_shared<acquisition>(*this, std::move(name), std::move(dir), o,
                                               std::move(done));
        a->elect(std::move(value));
        track(a);
        a->start();
    });
}

std::shared_ptr<hold> zk_backend::campaign(std::string_view name, std::string value,
                                           const campaign_options& opts, std::error_code& ec) {
    return campaign_blocking(*this, name, std::move(value), opts, ec);
}

void zk_backend::proclaim(hold& leader, std::string value, std::error_code& ec) {
    ec.clear();
    auto* h = dynamic_cast<zk_hold*>(&leader);
    if (!h || h->lost() || h->released()) {
        ec = errc::not_owner;
        return;
    }
    if (on_io_thread() || value.size() > leadership::max_value_size) {
        ec = errc::invalid_argument;
        return;
    }
    auto s = h->owner_session();
    multi_op set;
    set.what = multi_op::type::set;
    set.path = h->path();
    set.data = std::move(value);
    ec = call<std::error_code>(
        [this, s, set](std::function<void(std::error_code)> done) {
            s->when_connected([this, s, set, done](std::error_code e) {
                if (e) return done(make_error_code(errc::not_owner)); // the session ended
                s->multi({set}, [this, path = set.path, done](reply&& r) {
                    if (r.rc == ZOK) return done({});
                    const bool gone = r.rc == ZNONODE || session_gone(r.rc) ||
                                      (!r.results.empty() && r.results.front() == ZNONODE);
                    if (gone) return done(make_error_code(errc::not_owner));
                    set_error("proclaim on " + path + ": " + zerror(r.rc));
                    done(make_error_code(transport_loss(r.rc) ? errc::ambiguous
                                                              : errc::server_error));
                });
            });
        },
        make_error_code(errc::ambiguous));
}

namespace {

/// getLeader(): the first child of `sorted` from `i` on that still exists.
void read_first(std::shared_ptr<session> s, std::string dir, std::vector<std::string> sorted,
                std::size_t i, std::function<void(int rc, std::optional<leader_info>)> done) {
    if (i >= sorted.size()) return done(ZOK, std::nullopt);
    const auto path = dir + "/" + sorted[i];
    s->get(path, {},
           [s, dir = std::move(dir), sorted = std::move(sorted), i,
            done = std::move(done)](reply&& r) mutable {
               if (r.rc == ZNONODE)
                   return read_first(std::move(s), std::move(dir), std::move(sorted), i + 1,
                                     std::move(done));
               if (r.rc != ZOK) return done(r.rc, std::nullopt);
               leader_info li;
               li.value = std::move(r.data);
               li.epoch = r.stat ? static_cast<std::uint64_t>(r.stat->czxid) : 0;
               done(ZOK, std::move(li));
           });
}

} // namespace

std::optional<leader_info> zk_backend::leader(std::string_view name, std::error_code& ec) {
    ec.clear();
    std::string why;
    const auto dir = lock_dir(name, &why);
    if (dir.empty() || on_io_thread()) {
        if (!why.empty()) set_error("election name: " + why);
        ec = errc::invalid_argument;
        return std::nullopt;
    }
    using result = std::pair<std::error_code, std::optional<leader_info>>;
    auto [e, li] = call<result>(
        [this, dir](std::function<void(result)> done) {
            with_session([this, dir, done](std::error_code e2, std::shared_ptr<session> s) {
                if (e2) return done({e2, std::nullopt});
                s->children(dir, {}, [this, s, dir, done](reply&& r) {
                    if (r.rc == ZNONODE) return done({{}, std::nullopt});
                    const auto failed = [this, dir, done](int rc) {
                        set_error("read the leader of " + dir + ": " + zerror(rc));
                        done({make_error_code(transport_loss(rc) || session_gone(rc)
                                                  ? errc::unavailable
                                                  : errc::server_error),
                              std::nullopt});
                    };
                    if (r.rc != ZOK) return failed(r.rc);
                    read_first(s, dir, sort_latch(std::move(r.children)), 0,
                               [failed, done](int rc, std::optional<leader_info> l) {
                                   if (rc != ZOK) return failed(rc);
                                   done({{}, l});
                               });
                });
            });
        },
        {make_error_code(errc::unavailable), std::nullopt});
    ec = e;
    return li;
}

} // namespace dlock::detail::zk

// etcd/watch.hpp: waiting for the deletion of one key (or of any key of a range), or for any
// change of it (watch_changes()), by a watch on the client's one Watch stream (watch_hub.hpp;
// never polling).
//
// A key_watch watches `key` (with `range_end`: every key in [key, range_end)) from
// `start_revision` (0: etcd's current revision; a watch from a revision already passed is
// served by etcd's catch-up loop, every 100 ms). `done` runs once on the I/O thread:
// - deleted: a DELETE event of the key (of a key in the range) arrived;
// - changed (after watch_changes(), an election observer's watch): any event, a put included;
// - broken: the stream ended or went silent, or the server cancelled the watch (a member died
//   or lost its leader, the revision was compacted): the caller reads the state again and
//   decides.
// cancel() ends it without calling `done`. An owner cancels a watch before it drops or
// replaces it.
//
// each_deletion(f), before start(): every DELETE event goes to `f` (key, revision) instead of
// ending the watch, which then ends only when broken or cancelled (a semaphore waiter keeps one
// watch for its whole wait and counts the deletions itself). `f` may cancel the watch.
// on_created(f): `f` gets the revision of the creation's answer. A watch from revision 0 starts
// at etcd's current revision, synced.
//
// probe(every), before start(): a waiter's watch also proves its member alive: while it is
// registered, the hub asks for a progress answer every `every` and gives the stream up when
// nothing at all arrived since the last ask (a frozen or cut-off member is then left within
// 2 x `every` instead of the 8 s of HTTP/2 pings, rpc.cpp). Holds' watches do not ask for it:
// their lease's stream has its own rule (session.hpp).
#pragma once

#include "etcd/rpc.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace dlock::detail::etcd {

class watch_hub;

class key_watch : public std::enable_shared_from_this<key_watch> {
public:
    enum class result { deleted, changed, broken };

    key_watch(rpc& r, std::string key, std::int64_t start_revision,
              std::function<void(result)> done, std::string range_end = {});
    void probe(std::chrono::milliseconds every) noexcept { probe_every_ = every; }
    /// Before start(): puts end the watch too (result::changed).
    void watch_changes() noexcept { changes_ = true; }
    /// Before start(): deletions go to `f` and do not end the watch.
    void each_deletion(std::function<void(const std::string&, std::int64_t)> f) {
        on_delete_ = std::move(f);
    }
    /// Before start(): `f` runs with the revision etcd answers the creation with (a watch
    /// from revision 0 sees every change after it).
    void on_created(std::function<void(std::int64_t)> f) { on_created_ = std::move(f); }
    void start();
    void cancel();

private:
    friend class watch_hub;
    void on_answer(const pb::WatchResponse& a);
    void stream_broken() { finish(result::broken); }
    void cancelled_by_server();
    void finish(result r);
    void unregister();

    std::weak_ptr<watch_hub> hub_;
    std::int64_t id_ = 0; ///< on the hub's stream; 0 before start()
    std::string key_;
    std::string range_end_; ///< empty: the key alone
    std::int64_t start_revision_;
    std::function<void(result)> done_;
    bool finished_ = false;
    bool changes_ = false; ///< puts count too
    std::function<void(const std::string&, std::int64_t)> on_delete_{};
    std::function<void(std::int64_t)> on_created_{};
    std::chrono::milliseconds probe_every_{0};
};

} // namespace dlock::detail::etcd

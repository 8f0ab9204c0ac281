// etcd/watch.hpp: waiting for the deletion of one key (or of any key of a range), or for any
// change of it (watch_changes()), by a Watch stream (never polling).
//
// A key_watch opens its own Watch stream and watches `key` (with `range_end`: every key in
// [key, range_end)) from `start_revision` (the revision after the one at which the caller read
// it: a deletion after that read is never missed, and etcd serves a watch that starts past its
// current revision at once, not from its 100 ms catch-up loop). `done` runs once on the I/O
// thread:
// - deleted: a DELETE event of the key (of a key in the range) arrived;
// - changed (after watch_changes(), an election observer's watch): any event, a put included;
// - broken: the stream ended or the server cancelled the watch (a member died or lost its
//   leader, the revision was compacted): the caller reads the state again and decides.
// cancel() ends it without calling `done`.
//
// each_deletion(f), before start(): every DELETE event goes to `f` (key, revision) instead of
// ending the watch, which then ends only when broken or cancelled (a semaphore waiter keeps one
// watch for its whole wait and counts the deletions itself). `f` may cancel the watch.
// on_created(f): `f` gets the revision of the creation's answer. A watch from revision 0 starts
// at etcd's current revision, synced: one from a revision already passed waits for etcd's
// catch-up loop (every 100 ms).
//
// probe(ex, every), before start(): a waiter's watch also proves its member alive. Every `every`
// it asks for a progress answer (WatchProgressRequest); when nothing at all (no creation, no
// event, no progress) arrived since the last ask, the watch is `broken`. A frozen or cut-off
// member is then left within 2 x `every` instead of the 8 s of HTTP/2 pings (rpc.cpp). Holds'
// watches do not probe (their lease's stream has its own rule, session.hpp): one ask per
// second per held lock would be the keep-alive's cost many times over.
#pragma once

#include "etcd/rpc.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>

namespace dlock::detail::etcd {

class key_watch : public std::enable_shared_from_this<key_watch> {
public:
    enum class result { deleted, changed, broken };

    key_watch(rpc& r, std::string key, std::int64_t start_revision,
              std::function<void(result)> done, std::string range_end = {});
    void probe(asio::any_io_executor ex, std::chrono::milliseconds every);
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
    void arm_probe();
    void on_answer(const pb::WatchResponse& a);
    void finish(result r);

    rpc& rpc_;
    std::string key_;
    std::string range_end_; ///< empty: the key alone
    std::int64_t start_revision_;
    std::function<void(result)> done_;
    std::shared_ptr<watch_stream> stream_{};
    bool finished_ = false;
    bool changes_ = false; ///< puts count too
    std::function<void(const std::string&, std::int64_t)> on_delete_{};
    std::function<void(std::int64_t)> on_created_{};
    std::unique_ptr<asio::steady_timer> probe_timer_{};
    std::chrono::milliseconds probe_every_{0};
    bool answered_ = false; ///< something arrived since the last probe
};

} // namespace dlock::detail::etcd

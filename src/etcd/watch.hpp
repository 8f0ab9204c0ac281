// etcd/watch.hpp: waiting for the deletion of one key (or of any key of a range), by a Watch
// stream (never polling).
//
// A key_watch opens its own Watch stream and watches `key` (with `range_end`: every key in
// [key, range_end)) from `start_revision` (the revision at which the caller read it, so a
// deletion after that read is never missed). `done` runs once on the I/O thread:
// - deleted: a DELETE event of the key (of a key in the range) arrived;
// - broken: the stream ended or the server cancelled the watch (a member died or lost its
//   leader, the revision was compacted): the caller reads the state again and decides.
// cancel() ends it without calling `done`.
#pragma once

#include "etcd/rpc.hpp"

#include <functional>
#include <memory>
#include <string>

namespace dlock::detail::etcd {

class key_watch : public std::enable_shared_from_this<key_watch> {
public:
    enum class result { deleted, broken };

    key_watch(rpc& r, std::string key, std::int64_t start_revision,
              std::function<void(result)> done, std::string range_end = {});
    void start();
    void cancel();

private:
    void on_answer(const pb::WatchResponse& a);
    void finish(result r);

    rpc& rpc_;
    std::string key_;
    std::string range_end_; ///< empty: the key alone
    std::int64_t start_revision_;
    std::function<void(result)> done_;
    std::shared_ptr<watch_stream> stream_{};
    bool finished_ = false;
};

} // namespace dlock::detail::etcd

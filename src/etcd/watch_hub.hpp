// etcd/watch_hub.hpp: every watch of one client on one Watch stream.
//
// etcd multiplexes watches on a stream: each create request carries a watch id (chosen here,
// etcd >= 3.4, so that nothing has to pair creations with their answers) and every answer
// names its watch. One stream per client instead of one per watch: a held lock's watch costs
// an id in a map and one watcher on the server, not a gRPC call with its buffers (about 29 KiB
// of client memory per held lock with a stream each), and a waiter's watch starts without a
// stream's set-up.
//
// The stream is opened at the first watch and kept while the client lives (an open stream
// without traffic costs the HTTP/2 pings the lease's stream has anyway). Ids only grow, so an
// answer for a watch already cancelled is recognised and dropped. When the stream ends (its
// member died, lost its leader, or the authentication failed) or goes silent, every watch on
// it is `broken` at once (key_watch::stream_broken): each caller reads its state again and
// watches anew, on a new stream that the channel's round robin puts on another member.
//
// Silence: while any watch on the stream asked for probing (waiters: key_watch::probe), the
// hub asks etcd for a progress answer every `every`; when nothing at all arrived since the
// last ask, the stream is given up. One ask per stream and period, however many watches.
//
// I/O thread only, except close() (any thread: the backend's shutdown).
#pragma once

#include "etcd/rpc.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dlock::detail::etcd {

class key_watch;

class watch_hub : public std::enable_shared_from_this<watch_hub> {
public:
    watch_hub(rpc& r, asio::any_io_executor ex);
    watch_hub(const watch_hub&) = delete;
    watch_hub& operator=(const watch_hub&) = delete;

    /// Registers `w` and sends `c` with a new id (opening the stream first when there is none);
    /// answers for that id go to key_watch::on_answer. `probe`: a zero period does not probe.
    /// Returns the id (never 0).
    std::int64_t add(const std::shared_ptr<key_watch>& w, pb::WatchCreateRequest c,
                     std::chrono::milliseconds probe);
    /// Ends watch `id` (its answers are dropped; etcd is told to cancel it).
    void remove(std::int64_t id);
    /// Any thread: ends the stream; no new one opens.
    void close();

    /// A watch's answer said the server cancelled it (key_watch::on_answer).
    void count_cancelled() noexcept { cancelled_.fetch_add(1, std::memory_order_relaxed); }
    /// Any thread: watches the server cancelled, streams broken (client::metrics()).
    std::uint64_t cancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }
    std::uint64_t streams_broken() const noexcept {
        return streams_broken_.load(std::memory_order_relaxed);
    }

private:
    struct entry {
        std::weak_ptr<key_watch> w;
        bool probe = false;
    };

    void open();
    void on_answer(std::uint64_t gen, const pb::WatchResponse& a);
    /// The stream of generation `gen` ended or went silent: every watch on it is broken.
    void fail(std::uint64_t gen);
    void send(pb::WatchRequest r);
    void arm_probe();
    /// No watch asks for probing any more: the timer goes (a pending timer would hold the
    /// backend's loop, and so its shutdown, up to a period).
    void stop_probe();
    void on_probe(std::uint64_t gen);

    rpc& rpc_;
    asio::any_io_executor ex_;
    std::mutex mu_; ///< guards stream_ and closed_ against close() from another thread
    std::shared_ptr<watch_stream> stream_{};
    bool closed_ = false;
    // I/O thread only:
    bool opening_ = false;
    std::uint64_t gen_ = 0;                   ///< the current stream's generation
    std::vector<pb::WatchRequest> pending_{}; ///< written once the stream is open
    std::unordered_map<std::int64_t, entry> watches_{};
    std::int64_t next_id_ = 0;
    std::size_t probing_ = 0; ///< watches on the current stream that asked for probing
    std::chrono::milliseconds probe_every_{0};
    bool probe_armed_ = false;
    bool answered_ = false; ///< something arrived since the last progress ask
    std::shared_ptr<asio::steady_timer> probe_timer_{};
    std::atomic<std::uint64_t> cancelled_{0};
    std::atomic<std::uint64_t> streams_broken_{0};
};

} // namespace dlock::detail::etcd

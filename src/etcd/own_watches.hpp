// etcd/own_watches.hpp: the watches of a client's own Mutex keys, kept from one hold of a key
// to the next.
//
// A hold watches its own key for deletion (hold.hpp). A Mutex key is "<range><lease id>", so
// every hold of one name by one client on one lease has the same key. A watch created and
// cancelled per hold cost the server about 120 us of CPU per pair and B about 30 % of its
// throughput (docs/design/etcd.md, "A hold's watch"); here a released hold's watch stays,
// idle, and the next hold of the same key takes it over: no request at all per pair.
//
// Why that covers the new hold: a watch delivers every event after its start revision, in
// order, for as long as it lives. An idle watch of a key was started before that key's
// current incarnation was put, so it covers every deletion after the new hold's create
// revision. Deletions at or before that revision (the previous hold's release, whose event
// may arrive after the next grant) are not the new hold's and are dropped. A watch that breaks
// (stream ended, server cancelled it) leaves the set; its holder, if any, gets `broken` and
// reads its key again (hold.cpp), and the watch it then asks for is a new one.
//
// Bounds: at most `max_idle` idle watches per client (the least recently released goes first)
// and none idle for longer than `linger`, checked at every attach and detach (no timer, so an
// idle client does not wake). A key being watched by a hold is not shared: a second attach of
// it answers 0 and the caller watches on its own (two holds of one Mutex key on one client do
// not happen: the client's queue of the name lets one at a time, backend.hpp).
//
// I/O thread only.
#pragma once

#include "etcd/watch.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

namespace dlock::detail::etcd {

class own_watches {
public:
    using clock = std::chrono::steady_clock;
    static constexpr std::size_t default_max_idle = 256;
    static constexpr std::chrono::seconds default_linger{60};

    explicit own_watches(rpc& r, std::size_t max_idle = default_max_idle,
                         clock::duration linger = default_linger)
        : rpc_(r)
        , max_idle_(max_idle)
        , linger_(linger) {}
    own_watches(const own_watches&) = delete;
    own_watches& operator=(const own_watches&) = delete;
    ~own_watches() { clear(); }

    /// `f` gets the deletions of `key` after revision `rev` (result::deleted; the watch goes
    /// on) and the watch's end (result::broken; it is gone then). Takes over the idle watch of
    /// `key`, or starts one from revision `from`. Returns a ticket for detach(), or 0 when a
    /// hold already watches `key` here.
    std::uint64_t attach(const std::string& key, std::int64_t rev, std::int64_t from,
                         std::function<void(key_watch::result)> f);
    /// The holder of `ticket` is done with `key`'s watch, which stays idle (a stale ticket is
    /// ignored).
    void detach(const std::string& key, std::uint64_t ticket);
    /// Ends every watch (the backend's shutdown).
    void clear();

    std::size_t size() const noexcept { return entries_.size(); }
    std::size_t idle() const noexcept { return idle_.size(); }

private:
    struct entry {
        std::shared_ptr<key_watch> w;
        std::uint64_t watch_id = 0; ///< which watch of `key` this is (events of older ones drop)
        std::uint64_t ticket = 0;   ///< the holder's; 0 while idle
        std::int64_t after = 0;     ///< deletions after this revision are the holder's
        std::function<void(key_watch::result)> f{};
        clock::time_point idle_since{};
        std::list<std::string>::iterator in_idle{};
    };

    void on_deleted(const std::string& key, std::uint64_t watch_id, std::int64_t revision);
    void on_broken(const std::string& key, std::uint64_t watch_id);
    /// Ends idle watches beyond `max_idle_` or idle for longer than `linger_`.
    void trim(clock::time_point now);

    rpc& rpc_;
    std::size_t max_idle_;
    clock::duration linger_;
    std::unordered_map<std::string, entry> entries_{};
    std::list<std::string> idle_{}; ///< idle keys, least recently released first
    std::uint64_t next_id_ = 0;
};

} // namespace dlock::detail::etcd

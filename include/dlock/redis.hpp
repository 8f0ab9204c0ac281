// dlock/redis.hpp: what only a Redis client has, as free functions over a dlock::client.
//
// The neutral dlock::client (dlock/client.hpp) offers what every backend offers: lock objects,
// leases, multi-locks, inspect/list, force_unlock, metrics. What exists on Redis alone is here,
// in namespace dlock::redis: raw commands (command, async_command, command_on_master,
// masters), the fenced write of a resource kept in Redis (fenced_set), and the key layout of
// each lock kind (layout_of, lock_kinds). The reply type is dlock/resp3.hpp's.
//
// Every call that takes a client needs one made from a Redis URL (redis://, rediss://, unix://,
// redis-sentinel://, redis-cluster://) or from client_options. On a client of another backend
// it fails with errc::unsupported: the throwing overloads throw dlock::error whose what()
// names the call, the schemes it needs and the client's backend; the error_code overloads set
// `ec` and return an empty value; async_command completes with it. The ZooKeeper and
// PostgreSQL counterparts are dlock/zookeeper.hpp and dlock/postgres.hpp;
// docs/design/fencing.md tells the fenced-write story of all three.
//
//   dlock::client c("redis://127.0.0.1:6379");
//   auto pong = dlock::redis::command(c, {"PING"});
//   if (auto l = c.acquire("orders:42", {.wait = 5s}))
//       dlock::redis::fenced_set(c, "orders:42:state", "orders:42:fence", *l.token(), "paid");
#pragma once

#include <dlock/client.hpp>
#include <dlock/detail/deliver.hpp>
#include <dlock/detail/request.hpp>
#include <dlock/error.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/resp3.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::redis {

// ---- raw commands --------------------------------------------------------------------------

///@{
/// Runs one command on `c` and returns its reply. A Redis error reply is returned as a value of
/// type resp3::type::error (not thrown); transport failures throw dlock::error (with
/// client::last_error_detail() in what() when it explains them). On a Cluster the command goes
/// to the first seed's master; a command whose first key is in another slot is redirected
/// there (MOVED / ASK followed, at most 5 times). Keyless commands that every master must
/// answer (SCAN, DBSIZE, KEYS) go through command_on_master() instead.
/// Errors: errc::unsupported when `c` is not a Redis client; errc::invalid_argument for no
/// arguments or on the client's I/O thread.
/// Blocking: until the reply or options().command_timeout. Thread safety: any thread except
/// the client's I/O thread.
resp3::value command(client& c, std::initializer_list<std::string_view> args);
resp3::value command(client& c, std::span<const std::string_view> args);
resp3::value command(client& c, std::span<const std::string_view> args, std::error_code& ec);
///@}

///@{
/// How many masters `c` reaches: 1 on a standalone server or through Sentinel, one per shard
/// on a Cluster (as of the client's last slot map). Errors: errc::unsupported when `c` is not
/// a Redis client (the ec form returns 0). Blocking: never. Thread safety: any thread.
std::size_t masters(const client& c);
std::size_t masters(const client& c, std::error_code& ec);
///@}

///@{
/// Runs one command on master `i` (0 <= i < masters(c)), not routed by key: for keyless
/// commands that every master must answer (SCAN on a Cluster). Blocking and errors as
/// command(); errc::invalid_argument when `i` is out of range.
resp3::value command_on_master(client& c, std::size_t i, std::span<const std::string_view> args);
resp3::value command_on_master(client& c, std::size_t i, std::span<const std::string_view> args,
                               std::error_code& ec);
///@}

/// Async twin of command(): completes with void(std::error_code, resp3::value) on the token's
/// associated executor (the client's I/O thread by default); with errc::unsupported when `c`
/// is not a Redis client. Lifetimes: `c` must outlive the operation. Blocking: never.
template <class CompletionToken>
auto async_command(client& c, std::vector<std::string> args, CompletionToken&& token);

// ---- fencing -------------------------------------------------------------------------------

///@{
/// Writes `value` to `key` only if `token` (lease::token(), mutex::fencing_token()) is at least
/// the newest token that wrote `key` before (the newest is kept in `fence_key`; one script does
/// both). Returns false when rejected as stale. Both keys must share a hash slot on a Cluster.
/// A holder paused past its lease (GC, swap, SIGSTOP) may still believe it holds the lock; this
/// check lets a resource kept in Redis refuse its late write (docs/design/fencing.md).
/// Errors: errc::unsupported when `c` is not a Redis client; dlock::error for transport
/// failures and error replies; the ec form returns false.
/// Blocking: one round trip. Thread safety: any thread except the client's I/O thread.
bool fenced_set(client& c, std::string_view key, std::string_view fence_key, std::uint64_t token,
                std::string_view value);
bool fenced_set(client& c, std::string_view key, std::string_view fence_key, std::uint64_t token,
                std::string_view value, std::error_code& ec);
///@}

// ---- key layout ----------------------------------------------------------------------------

/// The Redis keys and channels of one lock, as layout_of() gives them: which keys a lock uses,
/// as the library itself writes them, for tools that read or break locks from outside
/// (`dlock status`, `dlock list`, `dlock keys`, benchmarks) instead of spelling key names.
struct lock_layout {
    /// The kind these keys belong to.
    lock_kind kind{};
    std::string kind_name;   ///< the library's name ("reentrant", "simple", "read", ...)
    std::string key;         ///< N itself
    std::string data_type;   ///< Redis TYPE of N while held ("hash", "string")
    std::string channel;     ///< where releases publish the unlock message
    std::string fencing_key; ///< the fencing counter; empty when the kind has none
    std::string queue_key;   ///< fair lock: the waiter queue (LIST); empty otherwise
    std::string timeout_key; ///< fair lock: the waiters' deadlines (ZSET, epoch ms)
    /// fair lock: each waiter sleeps on channel + ":" + its owner field; empty otherwise
    std::string waiter_channel_prefix;
    /// read-write lock: the marker of a waiting dlock writer (new dlock readers wait while it
    /// exists); empty for other kinds
    std::string writer_intent_key;
};

///@{
/// The layout of the lock `name` of `kind`. Needs no client (the layout is the library's).
/// Errors: errc::invalid_argument for a name no lock may have (empty, over 4096 bytes, or keys
/// that would fall into different cluster slots); errc::unsupported for a kind Redis does not
/// offer. Blocking: never.
lock_layout layout_of(std::string_view name, lock_kind kind);
lock_layout layout_of(std::string_view name, lock_kind kind, std::error_code& ec);
///@}

/// The lock kinds Redis offers, in the order of lock_kind (the others are other backends').
std::vector<lock_kind> lock_kinds();

} // namespace dlock::redis

// ---- async template ------------------------------------------------------------------------

namespace dlock::detail {

/// Hands `r` to `c`'s Redis connection (the non-template part of redis::async_command);
/// completes it with errc::unsupported when `c` is not a Redis client.
void redis_submit(client& c, request& r);

/// One async_command in flight: owns the arguments and the handler, completes once.
template <class Handler>
class command_op final : public request {
public:
    command_op(Handler&& h, std::vector<std::string>&& a, const asio::any_io_executor& io)
        : handler_(std::move(h))
        , work_(asio::get_associated_executor(handler_, io))
        , storage_(std::move(a)) {
        views_.assign(storage_.begin(), storage_.end());
        args = views_;
    }
    void complete(std::error_code ec, resp3::value&& reply) override {
        auto ex = work_.get_executor();
        deliver(ex, [h = std::move(handler_), ec, r = std::move(reply)]() mutable {
            std::move(h)(ec, std::move(r));
        });
        // Only now: work_ keeps the handler's executor (maybe another io_context) from running
        // out of work, and so being stopped or destroyed, while deliver() hands the handler to
        // it. The handler was moved out, so running it inline above did not need this object.
        delete this;
    }

private:
    Handler handler_;
    asio::executor_work_guard<asio::associated_executor_t<Handler, asio::any_io_executor>> work_;
    std::vector<std::string> storage_{};
    std::vector<std::string_view> views_{};
};

} // namespace dlock::detail

namespace dlock::redis {

template <class CompletionToken>
auto async_command(client& c, std::vector<std::string> args, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, resp3::value)>(
        [&c](auto handler, std::vector<std::string> a) {
            detail::initiation_scope scope;
            auto* op = new detail::command_op<std::decay_t<decltype(handler)>>(
                std::move(handler), std::move(a), c.get_executor());
            detail::redis_submit(c, *op);
        },
        token, std::move(args));
}

} // namespace dlock::redis

// dlock/redlock.hpp: Redlock over N independent standalone Redis masters, a backend of
// dlock::client like any other (docs/design/redis-locks.md, "Redlock").
//
// A client on Redlock is made from a URL or from redlock_options:
//
//   redlock://[user[:password]@]host[:port][,[user[:password]@]host[:port]...][/db][?params]
//   rediss-redlock://...     the same over TLS to every master
//   params (milliseconds, joined with '&'): node_timeout, retry_delay, retry_jitter,
//   watchdog_lease (redlock_options below)
//
//   dlock::client c("redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379");
//   dlock::client c(dlock::redlock_options{...});   // per-master client_options (Unix sockets,
//                                                  // TLS files, command_timeout, ...)
//
// It offers one lock kind, lock_kind::simple (the simple-lock layout on every master); every
// other kind is errc::unsupported. client::acquire(), async_acquire(), acquire_all(),
// make_simple_mutex() (not reentrant), inspect(), list(), force_unlock() and metrics() work as
// on every backend. One client has one I/O thread and one connection per master, every request
// fanned out to all masters in parallel. An acquisition is a round:
//   1. take t0 on the steady clock, then send `SET N <128-bit token> NX PX lease` to every
//      master (the simple-lock layout of product page §2 on each master);
//   2. wait at most `node_timeout` (far below the lease) for the answers, deciding as soon as
//      the votes allow;
//   3. acquired only with a quorum of floor(N/2)+1 yes votes AND a positive validity
//      lease - (now - t0) - (lease * 1% + 2 ms); the lease's valid_until() is then
//      t0 + lease - drift;
//   4. otherwise the round is lost and the token is deleted (compare-and-delete) on EVERY
//      master, also those that did not answer; then, while the caller's wait allows, a new
//      round starts after retry_delay plus a uniform random jitter in [0, retry_jitter].
// The handle is an ordinary dlock::lease (so code and dlock::multi-lock treat it like any
// other): release() deletes the token on every master; the watchdog (no explicit lease)
// extends it on every master every watchdog_lease / 3 with the same quorum and validity rule.
// When an extension finds the token gone on so many masters that no quorum can hold it, the
// lease is lost at once; when extensions fail otherwise (masters down, timeouts), it stays held
// until its valid_until() and is lost then. Loss is signalled as for every lease: stop_token()
// requested, on_lost() callbacks, valid_until() in the past.
//
// No fencing token: lease::token() is always nullopt for a Redlock hold. A fencing token must
// come from one counter that orders every grant of the lock; N independent masters have N
// counters and no one of them sees every grant, so any number we returned would look safe
// without being so. Use a single master (dlock::client, reentrant lock) when the protected
// resource needs fencing.
//
// The lease's own calls on a Redlock hold:
// - release(): one round of compare-and-delete on every master. Clear when a quorum deleted
//   the token; errc::not_owner (the lease is marked lost) when so many masters no longer had
//   it that no quorum could; otherwise the first master's error (errc::unavailable when none
//   answered): the handle ends anyway and the keys expire after their lease. The quorum
//   decides that result, but release() (and async_release()'s completion) returns only once
//   EVERY master answered its delete or the command timed out (that master's command_timeout):
//   a key left on one master would block the next acquirer for a lease when another master is
//   down. A master down for good (connection refused) answers at once.
// - extend(d): one round of compare-and-pexpire to `d` on every master, with the acquisition's
//   quorum and validity rule (valid_until() = before the send + d - drift). errc::not_owner
//   when a quorum refused (lost); errc::unavailable when no quorum extended it (the lease is
//   left as it was); errc::invalid_argument for d <= node_timeout or on the I/O thread.
// - token(): always nullopt (above). name(): the name given to acquire().
//
// Waiting is by polling rounds (the Redlock algorithm): a Redlock does not subscribe to unlock
// messages, so a waiter learns of a release at its next round (retry_delay + jitter later).
//
// Which masters voted yes, and why the others did not (refused, failed with an error code, or
// timed out), is available: acquire_with_votes() for the round that decided an acquisition,
// votes(lease) for a held lease (updated by late answers and by every extension round).
//
// The queries answer across the masters: a lock is held when a quorum has its key
// (simple_mutex::is_locked) with one token (inspect().exists); remaining_lease is the quorum-th
// longest PTTL among the masters that have it (the lock is held while that many still have it);
// inspect() shows the holder's token and, under `details`, each master's part ("master.<i>": its
// address, then "holds", "absent", "holds another token", or "error: <reason>"); list() scans every
// master and shows the names a quorum holds; force_unlock() deletes the key on every master (true
// when one had it; an error only when fewer than a quorum answered); a query whose answers leave it
// open (masters down) is errc::unavailable. metrics(): acquisitions under the kind "simple", wait
// and hold times, releases, losses (a quorum that says "not ours" is loss_cause::undetermined; no
// quorum extension before validity ends is deadline) and the wire counters of every master; not
// counted: hand-offs and watchdog renewals. "lock lost" warnings go to the first master's
// client_options::log; last_error_detail() names each master's last failure. What only
// Redlock has is in namespace dlock::redlock below.
//
//   dlock::client c("redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379");
//   if (auto l = c.acquire("job:nightly", {.wait = 2s, .kind = dlock::lock_kind::simple})) {
//       ... l.stop_token() ...
//   }
#pragma once

#include <dlock/client.hpp>
#include <dlock/config.hpp>
#include <dlock/detail/deliver.hpp>
#include <dlock/error.hpp>
#include <dlock/lease.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/metrics.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock {

/// How a Redlock client reaches its masters and paces its rounds (client(redlock_options); the
/// URL form sets the same fields).
struct redlock_options {
    /// One entry per independent standalone master (parse_url() of each URL). Each master keeps
    /// its own credentials, TLS and command_timeout (the bound for a command still queued while
    /// its master is down; the round itself waits only node_timeout). At least one; 3 or 5 make
    /// sense (a quorum of 2 of 3 tolerates one master down, 3 of 5 two).
    std::vector<client_options> masters{};
    /// How long a round waits for the masters' answers. Default 50 ms. Must be positive and
    /// below every lease (acquire_options::lease, watchdog_lease) so that a slow master cannot
    /// eat the validity.
    std::chrono::milliseconds node_timeout{50};
    ///@{
    /// Pause between two acquisition rounds: retry_delay plus a uniform random jitter in
    /// [0, retry_jitter], so competing clients do not retry in lockstep. Defaults 50 ms / 100 ms.
    /// An acquire_options::retry policy replaces both and also bounds the number of rounds.
    std::chrono::milliseconds retry_delay{50};
    std::chrono::milliseconds retry_jitter{100};
    ///@}
    /// Lease of a hold taken without an explicit lease; extended every watchdog_lease / 3.
    /// Default 30 s; at least 30 ms and above node_timeout.
    std::chrono::milliseconds watchdog_lease = std::chrono::seconds(30);
};

/// One master's part in a round.
struct redlock_vote {
    /// What one master answered.
    enum class kind {
        pending,   ///< no answer yet (the round was decided before it came)
        yes,       ///< acquired / extended / released on this master
        refused,   ///< the master answered no: held by another owner, or not ours any more
        failed,    ///< error reply or transport failure: `ec` says which
        timed_out, ///< no answer within node_timeout (`ec` is errc::unavailable when the
                   ///< connection to the master was down at the time)
    };
    std::size_t master = 0; ///< index into redlock_options::masters
    std::string address{};  ///< host:port or the Unix socket path (never a password)
    /// This master's answer.
    kind what = kind::pending;
    /// Why a `failed` vote failed (and errc::unavailable for a `timed_out` one whose connection
    /// was down); empty otherwise.
    std::error_code ec{};
};

/// The outcome of redlock::acquire_with_votes().
struct redlock_acquisition {
    lease held{};                      ///< empty: not acquired
    std::vector<redlock_vote> votes{}; ///< the last round's votes (the winning round's if held)
    unsigned rounds = 0;               ///< rounds run (0: the options were rejected)
};

namespace detail {
/// The non-template part of redlock::async_acquire_with_votes (src/redlock.cpp).
void redlock_start_acquire(client& c, std::string name, const acquire_options& opts,
                           std::function<void(std::error_code, redlock_acquisition)> done);
} // namespace detail

/// What only a Redlock client has. Every call that takes a client needs one made from a
/// redlock:// or rediss-redlock:// URL or from redlock_options; on a client of another backend
/// it fails with errc::unsupported (the throwing forms name the call, the client it needs and
/// the client's backend; the error_code forms set `ec`; the async form completes with it).
namespace redlock {

/// The options of a redlock:// or rediss-redlock:// URL (the form at the top of this file):
/// one client_options per master, each parsed as the redis:// (rediss://) URL of that master
/// alone with the list's /db, and the Redlock parameters of the query. For callers that
/// adjust them (a password from the environment) before client(redlock_options).
/// Errors: dlock::error(errc::configuration_error) naming the problem (never a password).
redlock_options parse_url(std::string_view url);

///@{
/// The number of masters of `c`, and its quorum floor(masters / 2) + 1. Blocking: never.
std::size_t masters(const client& c);
std::size_t masters(const client& c, std::error_code& ec);
std::size_t quorum(const client& c);
///@}

/// The options in effect (one entry per master). Errors: errc::unsupported (thrown) when `c`
/// is not a Redlock client.
const redlock_options& options(const client& c);

/// client::acquire() with the votes of the deciding round and the number of rounds. opts.kind
/// must be lock_kind::simple (errc::unsupported otherwise, as client::acquire()).
/// Blocking: up to opts.wait plus one round (node_timeout). Thread safety: any thread except
/// the client's I/O thread (errc::invalid_argument there). Errors: as client::acquire(): errc::
/// invalid_argument for an empty name, a lease under 1 ms or not above node_timeout, a retry
/// policy with 0 attempts; errc::cancelled when the client is destroyed meanwhile. Masters that
/// are down are not errors: they vote "failed".
redlock_acquisition acquire_with_votes(client& c, std::string_view name,
                                       const acquire_options& opts, std::error_code& ec);

/// Async twin: completes with void(std::error_code, redlock_acquisition) on the token's
/// associated executor (the client's I/O thread by default); never inside the initiating call.
/// Lifetimes: `c` must outlive the operation.
template <class CompletionToken>
auto async_acquire_with_votes(client& c, std::string name, acquire_options opts,
                              CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, redlock_acquisition)>(
        [&c](auto handler, std::string n, acquire_options o) {
            detail::initiation_scope scope;
            detail::redlock_start_acquire(c, std::move(n), o,
                                          detail::completion<std::error_code, redlock_acquisition>(
                                              std::move(handler), c.get_executor()));
        },
        token, std::move(name), std::move(opts));
}

/// The current votes of a lease acquired from a Redlock client: the winning round's, updated
/// by answers that came after the decision and replaced by each extension round (a master that
/// had not answered when that round was decided shows `pending` until its answer or its
/// command_timeout). Empty for an empty lease or one of another backend.
/// Thread safety: any thread.
std::vector<redlock_vote> votes(const lease& l);

} // namespace redlock

} // namespace dlock

// etcd_backend's run once per period (dlock/once.hpp; docs/design/once.md, "etcd"). etcd has no
// clock to align slots to, so a slot is a key bound to a lease of its own: a claim grants a
// lease of ceil(P) - 1 s and puts "dlock-once:<name>" with it unless the key exists; the key
// lives until etcd expires the lease. Two winning claims of a name are therefore at least
// P - 1 s apart on the etcd leader's clock, whatever the clients' clocks say. The slot's index
// is the key's create revision; a release deletes the key while it still holds the claim's
// token.
#include "core/random.hpp"
#include "etcd/backend.hpp"
#include "etcd/backend_call.hpp"
#include "etcd/layout.hpp"
#include "etcd/ops.hpp"

#include <dlock/error.hpp>

namespace dlock::detail::etcd {
namespace {

/// The shortest period etcd can time: its minimum lease TTL is about 2 s with default timings
/// (1.5 x the election timeout, rounded up), and a slot's lease is the period less 1 s.
constexpr std::chrono::seconds shortest_period{3};

/// The lease TTL of a slot of `period`: ceil(period) - 1 s (docs/design/once.md: a key with
/// the whole period often still exists at the next cron tick, as the tick that claimed it came
/// a moment before the claim, and etcd expires leases in rounds).
std::int64_t slot_ttl(std::chrono::milliseconds period) {
    return std::chrono::ceil<std::chrono::seconds>(period).count() - 1;
}

using claim_result = std::pair<std::error_code, std::optional<period_slot>>;

} // namespace

std::optional<period_slot> etcd_backend::claim_period(std::string_view name,
                                                      std::chrono::milliseconds period,
                                                      std::error_code& ec) {
    ec.clear();
    (void)range_of(name, ec); // the lock names' rule: no '/', no control character
    if (ec) return std::nullopt;
    if (period < shortest_period) {
        set_error("run once per period on etcd: the period must be at least 3 s (etcd times "
                  "a slot with a lease, and its shortest lease is about 2 s)");
        ec = make_error_code(errc::invalid_argument);
        return std::nullopt;
    }
    auto key = once_key(url_.prefix, name);
    auto [e, slot] = call<claim_result>(
        [this, key = std::move(key), period](std::function<void(claim_result)> done) {
            pb::LeaseGrantRequest grant;
            grant.set_ttl(slot_ttl(period));
            rpc_->lease_grant(std::move(grant), [this, key, period,
                                                 done](grpc::Status s, pb::LeaseGrantResponse&& g) {
                if (!s.ok() || !g.error().empty() || g.id() == 0) {
                    set_error("run once per period on etcd: lease grant: " +
                              (s.ok() ? g.error() : s.error_message()));
                    return done({s.ok() ? make_error_code(errc::server_error) : to_error(s), {}});
                }
                const auto lease = g.id();
                const auto ttl = std::chrono::seconds(g.ttl());
                auto token = random_token();
                rpc_->txn(
                    once_claim_txn(key, token, lease),
                    [this, lease, ttl, period, token, done](grpc::Status s2, pb::TxnResponse&& t) {
                        if (s2.ok() && t.succeeded()) {
                            period_slot won;
                            won.index = t.header().revision(); // the key's create revision
                            won.period = period;
                            won.left = ttl;
                            won.token = token;
                            return done({{}, std::move(won)});
                        }
                        // Taken, or the outcome is unknown: revoking the lease deletes a
                        // key this claim may have put, so a failed claim leaves nothing.
                        pb::LeaseRevokeRequest revoke;
                        revoke.set_id(lease);
                        rpc_->lease_revoke(std::move(revoke),
                                           [](grpc::Status, pb::LeaseRevokeResponse&&) {});
                        if (!s2.ok())
                            set_error("run once per period on etcd: " + s2.error_message());
                        done({to_error(s2), std::nullopt});
                    });
            });
        },
        {make_error_code(errc::unavailable), std::nullopt});
    ec = e;
    return slot;
}

bool etcd_backend::release_period(std::string_view name, const period_slot& slot,
                                  std::error_code& ec) {
    ec.clear();
    (void)range_of(name, ec);
    if (ec) return false;
    using result = std::pair<std::error_code, bool>;
    auto [e, gone] = call<result>(
        [this, key = once_key(url_.prefix, name),
         token = slot.token](std::function<void(result)> done) {
            // The slot's lease is left to expire: the slot is no longer this key's, and the
            // lease holds nothing else.
            rpc_->txn(once_release_txn(key, token),
                      [this, done](grpc::Status s, pb::TxnResponse&& t) {
                          if (!s.ok())
                              set_error("run once per period on etcd: " + s.error_message());
                          done({to_error(s), s.ok() && t.succeeded()});
                      });
        },
        {make_error_code(errc::unavailable), false});
    ec = e;
    return gone;
}

} // namespace dlock::detail::etcd

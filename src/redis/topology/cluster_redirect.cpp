// detail::cluster's redirections: MOVED / ASK re-dispatched to the named node, CLUSTERDOWN /
// TRYAGAIN re-sent after a map refresh and a short pause (redirect, retry_later).
#include "redis/net/wire.hpp"
#include "redis/topology/cluster.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {
namespace {

/// A command the router sends on its own behalf (ASKING, SCRIPT LOAD) whose reply nobody
/// needs; it owns its words and deletes itself. It goes ahead of the request it serves and
/// has that request's deadline: a default (already passed) one would make the connection's
/// deadline check fail the connection whenever its reply is not back within one tick.
struct owned_request final : request {
    owned_request(std::vector<std::string> w, std::chrono::steady_clock::time_point until,
                  request* ahead_of = nullptr)
        : words(std::move(w))
        , serves(ahead_of) {
        for (const auto& s : words)
            views.push_back(s);
        args = views;
        deadline = until;
    }
    std::vector<std::string> words;
    std::vector<std::string_view> views;
    /// ASKING: the request it goes ahead of (behind it on the same connection, so still in
    /// flight when this reply comes), told when the ACL refuses it (NOPERM; any other error
    /// leaves the request to the redirections as before).
    request* serves;
    void complete(std::error_code ec, resp3::value&& v) override {
        if (!ec && v.is_error() && v.str.starts_with("NOPERM") && serves)
            serves->asking_refused = true;
        delete this;
    }
};

} // namespace

bool cluster::redirect(node& from, request& r, const resp3::value& reply) {
    if (stopped_.load(std::memory_order_acquire)) return false;
    if (r.asking_refused) {
        // The target answered MOVED because it never saw ASKING: following it would only send
        // the request back to the source, which answers ASK again.
        r.asking_refused = false;
        resp3::value refused;
        refused.kind = resp3::type::error;
        refused.str = "NOPERM ASKING was refused: a Cluster client needs +asking to reach a slot "
                      "in migration (README, Least-privilege ACL)";
        r.complete({}, std::move(refused));
        return true;
    }
    bool ask = false;
    std::uint16_t slot = 0;
    net::target to;
    if (!parse_redirect(reply.str, ask, slot, to)) {
        // CLUSTERDOWN / TRYAGAIN: the slot has no master right now (failover), or it is being
        // migrated and the script's keys are not all on one side (a lock script names keys that
        // do not exist, such as its channel, so every lock script of a migrating slot gets
        // TRYAGAIN until the migration ends). Load the map again and start over after a short
        // pause, while the request's deadline allows: bounded by time, not by redirects.
        refresh();
        r.redirects = 0;
        return retry_later(from, r);
    }
    if (r.redirects >= max_redirects) return false;
    ++r.redirects;
    request* const self = &r;
    node* n = node_at(to);
    if (!n && !ask) {
        // An address no shard had: a replica promoted by a failover, or a new master. Let the
        // map say which: a failover keeps the shard's node (matched by member ids) and starts
        // its lock-delay before anything is sent to the promoted master.
        refresh([this, self, slot](bool) {
            node& again = for_slot(slot);
            again.conn().submit_group(std::span<request* const>(&self, 1));
        });
        return true;
    }
    if (!n) n = &add_node(to);
    if (!ask) {
        (*slots_)[slot].store(n, std::memory_order_release);
        refresh(); // other slots probably moved with this one
        n->conn().submit_group(std::span<request* const>(&self, 1));
        return true;
    }
    // ASK: this one command, on that node, preceded by ASKING; the map stays as it is.
    std::vector<request*> group;
    if (!r.eval_fallback.empty())
        group.push_back(
            new owned_request({"SCRIPT", "LOAD", std::string(r.eval_fallback)}, r.deadline));
    group.push_back(new owned_request({"ASKING"}, r.deadline, self));
    group.push_back(self);
    n->conn().submit_group(group);
    return true;
}

bool cluster::retry_later(node& from, request& r) {
    constexpr auto pause = std::chrono::milliseconds(50);
    if (std::chrono::steady_clock::now() + pause >= r.deadline) return false;
    auto t = std::make_shared<asio::steady_timer>(io_, pause);
    retry_timers_.push_back(t);
    t->async_wait([this, t, &from, &r](std::error_code ec) {
        std::erase(retry_timers_, t);
        if (ec || stopped_.load(std::memory_order_acquire))
            return r.complete(make_error_code(errc::cancelled), {});
        request* const self = &r;
        from.conn().submit_group(std::span<request* const>(&self, 1));
    });
    return true;
}

} // namespace dlock::detail

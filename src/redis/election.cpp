// Leader election on Redis (redis_backend::campaign, async_campaign, proclaim, leader): a
// campaign is an acquisition of the election's kind (redis/locks/election/protocol.hpp) that
// carries its value, so the grant writes the leader's record in the same script; waiting,
// renewal, loss and resign are the acquisition machinery's. observe() is observe.cpp.
#include "redis/acquire.hpp"
#include "redis/backend.hpp"
#include "redis/client.hpp"
#include "redis/hold.hpp"
#include "redis/lock_object.hpp"
#include "redis/locks/election/protocol.hpp"

#include <asio/post.hpp>

namespace dlock::detail {
namespace {

/// The request of a campaign for `name` with `value` (errors: a bad name or value).
std::error_code prepare_campaign(redis_client& c, std::string_view name, std::string value,
                                 const campaign_options& opts, acquire_request& req) {
    if (value.size() > leadership::max_value_size) return make_error_code(errc::invalid_argument);
    const auto& p = election_protocol();
    std::error_code ec;
    auto keys = p.keys(name, ec);
    if (ec) return make_error_code(errc::invalid_argument);
    acquire_options o;
    o.wait = opts.wait;
    if ((ec = prepare(c, p, std::move(keys), o, new_owner(c, p, false), req))) return ec;
    req.payload = std::move(value);
    return {};
}

} // namespace

std::shared_ptr<hold> redis_backend::campaign(std::string_view name, std::string value,
                                              const campaign_options& opts, std::error_code& ec) {
    ec.clear();
    auto& c = *c_;
    if (c.on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    acquire_request req;
    if ((ec = prepare_campaign(c, name, std::move(value), opts, req))) return nullptr;
    const auto res = acquire_blocking(c, req, ec);
    if (ec || !res.acquired) return nullptr;
    return make_hold(c, std::move(req), res);
}

void redis_backend::async_campaign(
    std::string name, std::string value, const campaign_options& opts,
    std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    auto c = c_;
    acquire_request req;
    if (const auto ec = prepare_campaign(*c, name, std::move(value), opts, req))
        return asio::post(c->io(), [done = std::move(done), ec] { done(ec, nullptr); });
    acquire_async(
        *c, std::move(req),
        [c, done = std::move(done)](std::error_code e, acquire_result r, const acquire_request& q) {
            if (e || !r.acquired) return done(e, nullptr);
            done({}, make_hold(*c, q, r));
        });
}

void redis_backend::proclaim(hold& leader, std::string value, std::error_code& ec) {
    ec.clear();
    if (c_->on_io_thread() || value.size() > leadership::max_value_size) {
        ec = make_error_code(errc::invalid_argument);
        return;
    }
    auto* h = dynamic_cast<redis_hold*>(&leader);
    if (!h || h->protocol != &election_protocol() || h->client.lock() != c_ || h->lost() ||
        h->released()) {
        ec = make_error_code(errc::not_owner);
        return;
    }
    detail::command cmd;
    election_protocol().proclaim(cmd, *h, value, c_->router().for_slot(h->keys.slot).pubsub_mode());
    const auto v = query_lock(*c_, h->keys, cmd, ec);
    if (!election_lock::read_proclaim(v, ec) && !ec) ec = make_error_code(errc::not_owner);
}

std::optional<leader_info> redis_backend::leader(std::string_view name, std::error_code& ec) {
    ec.clear();
    const auto& p = election_protocol();
    const auto keys = p.keys(name, ec);
    if (ec) {
        ec = make_error_code(errc::invalid_argument);
        return std::nullopt;
    }
    detail::command cmd;
    p.leader_query(cmd, keys);
    const auto v = query_lock(*c_, keys, cmd, ec);
    if (ec) return std::nullopt;
    return election_lock::read_leader(v, ec).leader;
}

} // namespace dlock::detail

// detail::cluster's slot map: the target sources, the nodes, start and stop, and the refresh
// that loads and applies the map (redirections: cluster_redirect.cpp; parsers: cluster_parse.cpp).
#include "redis/topology/cluster.hpp"

#include "redis/net/wire.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <iterator>

namespace dlock::detail {

// ---- target sources --------------------------------------------------------------------------

/// Where the master of one shard is: what the last map said, or (after a lost connection)
/// whatever the refresh it waits for says.
class cluster::shard_source final : public net::target_source,
                                    public std::enable_shared_from_this<shard_source> {
public:
    shard_source(cluster& c, net::target t)
        : c_(c)
        , master_(t)
        , last_(std::move(t)) {}

    void resolve(resolved done) override {
        if (master_) return done({}, *master_);
        c_.refresh([self = shared_from_this(), done = std::move(done)](bool) {
            if (self->master_) return done({}, *self->master_);
            done(make_error_code(errc::unavailable), {});
        });
    }
    void invalidate(const net::target& t) override {
        if (master_ && net::same_endpoint(*master_, t)) master_.reset();
        c_.refresh();
    }

    cluster& c_;
    std::optional<net::target> master_; // what resolve() answers without a refresh
    net::target last_;                  // the last master the map named; nodes_mu_
    std::vector<std::string> ids;       // the shard's node ids, master first; nodes_mu_
};

/// The map-loading connection's target: the seeds and every master learned, in turn; any node
/// may answer CLUSTER SHARDS, so no ROLE check.
class cluster::seed_source final : public net::target_source {
public:
    explicit seed_source(std::vector<net::target> seeds)
        : list_(std::move(seeds)) {}
    void resolve(resolved done) override { done({}, list_.at(next_ % list_.size())); }
    void invalidate(const net::target&) override { ++next_; }
    bool master_only() const noexcept override { return false; }
    void learn(const net::target& t) {
        if (std::none_of(list_.begin(), list_.end(),
                         [&](const auto& s) { return net::same_endpoint(s, t); }))
            list_.push_back(t);
    }

private:
    std::vector<net::target> list_;
    std::size_t next_ = 0;
};

/// One CLUSTER SHARDS / CLUSTER SLOTS of a refresh; owns itself until answered.
struct cluster::map_request final : request {
    cluster* c = nullptr;
    bool shards = true;
    std::string_view cmd[2] = {"CLUSTER", "SHARDS"};
    void complete(std::error_code ec, resp3::value&& v) override {
        auto* owner = c;
        const bool sh = shards;
        delete this;
        owner->map_answered(sh, ec, v);
    }
};

// ---- cluster --------------------------------------------------------------------------------

cluster::cluster(asio::io_context& io, const client_options& opts)
    : io_(io)
    , opts_(opts)
    , slots_(std::make_unique<std::array<std::atomic<node*>, 16384>>())
    , gap_timer_(io) {
    if (opts.endpoints.empty())
        throw error(errc::configuration_error, "dlock: a Cluster client needs seed endpoints");
    std::vector<net::target> seeds;
    for (const auto& ep : opts.endpoints) {
        net::target t;
        t.host = ep.host;
        t.port = ep.port;
        seeds.push_back(std::move(t));
    }
    for (auto& s : *slots_)
        s.store(nullptr, std::memory_order_relaxed);
    seeds_ = std::make_shared<seed_source>(seeds);
    control_ = std::make_shared<net::connection>(io, opts, seeds.front(),
                                                 net::connection::mode::command, seeds_);
    // Until the map has arrived, every slot is answered with the first seed's node.
    first_ = &add_node(seeds.front());
}

cluster::~cluster() = default;

node& cluster::add_node(const net::target& master) {
    auto src = std::make_shared<shard_source>(*this, master);
    auto n = std::make_unique<node>(io_, opts_, master, pubsub::mode::sharded, src);
    node* raw = n.get();
    n->conn().set_redirect_handler(
        [this, raw](request& r, const resp3::value& v) { return redirect(*raw, r, v); });
    seeds_->learn(master);
    bool start = false;
    {
        std::lock_guard lk(nodes_mu_);
        nodes_.push_back(std::move(n));
        sources_.push_back(std::move(src));
        start = first_ != nullptr && control_started_;
    }
    if (start) raw->start();
    return *raw;
}

node* cluster::node_at(const net::target& master) {
    std::lock_guard lk(nodes_mu_);
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (net::same_endpoint(sources_[i]->last_, master)) return nodes_[i].get();
    return nullptr;
}

void cluster::start() {
    {
        std::lock_guard lk(nodes_mu_);
        control_started_ = true;
    }
    control_->start();
    for_each_node([](node& n) { n.start(); });
    asio::post(io_, [this] { refresh(); });
}

bool cluster::wait_ready(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lk(ready_mu_);
    return ready_cv_.wait_until(lk, deadline, [&] { return ready_; });
}

void cluster::stop() {
    stopped_.store(true, std::memory_order_release);
    for_each_node([](node& n) { n.stop(); });
    control_->stop();
    asio::post(io_, [this] {
        for (auto& t : retry_timers_)
            t->cancel();
        gap_timer_.cancel();
    });
}

void cluster::stop_subscribers() {
    for_each_node([](node& n) { n.stop_subscriber(); });
}

node& cluster::for_slot(std::uint16_t slot) noexcept {
    node* n = (*slots_)[slot & 16383u].load(std::memory_order_acquire);
    return n ? *n : *first_;
}

void cluster::for_each_node(const std::function<void(node&)>& f) {
    std::vector<node*> all;
    {
        std::lock_guard lk(nodes_mu_);
        for (auto& n : nodes_)
            all.push_back(n.get());
    }
    for (auto* n : all)
        f(*n);
}

std::vector<node*> cluster::masters() {
    std::vector<node*> out;
    std::lock_guard lk(nodes_mu_);
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (!sources_[i]->ids.empty() || nodes_.size() == 1) {
            // One node per shard; a node adopted twice (the first seed's) is listed once.
            const bool dup = std::any_of(out.begin(), out.end(), [&](node* o) {
                for (std::size_t j = 0; j < nodes_.size(); ++j)
                    if (nodes_[j].get() == o)
                        return net::same_endpoint(sources_[j]->last_, sources_[i]->last_);
                return false;
            });
            if (!dup) out.push_back(nodes_[i].get());
        }
    return out;
}

void cluster::refresh(std::function<void(bool)> done) {
    if (done) refresh_waiting_.push_back(std::move(done));
    if (loading_ || gap_armed_) return;
    if (stopped_.load(std::memory_order_acquire)) return finish_refresh(false);
    if (std::chrono::steady_clock::now() < next_load_) {
        gap_armed_ = true;
        gap_timer_.expires_at(next_load_);
        gap_timer_.async_wait([this](std::error_code ec) {
            gap_armed_ = false;
            if (ec) return finish_refresh(false); // stopped: nobody waits for ever
            refresh();
        });
        return;
    }
    loading_ = true;
    auto* q = new map_request;
    q->c = this;
    q->shards = !use_slots_;
    if (use_slots_) q->cmd[1] = "SLOTS";
    q->args = q->cmd;
    q->deadline = std::chrono::steady_clock::now() + opts_.command_timeout;
    control_->submit(*q); // may complete inline (stopped): map_answered copes
}

void cluster::map_answered(bool shards_cmd, std::error_code ec, const resp3::value& v) {
    if (!ec && v.is_error() && shards_cmd && !stopped_.load(std::memory_order_acquire)) {
        // Before Redis 7: no CLUSTER SHARDS. Ask with CLUSTER SLOTS from now on.
        use_slots_ = true;
        loading_ = false;
        return refresh();
    }
    std::optional<std::vector<cluster_shard>> shards;
    if (!ec && !v.is_error())
        shards = shards_cmd ? parse_cluster_shards(v, opts_.tls.enabled) : parse_cluster_slots(v);
    if (shards && !shards->empty()) apply(*shards);
    finish_refresh(shards && !shards->empty());
}

void cluster::finish_refresh(bool ok) {
    loading_ = false;
    next_load_ = std::chrono::steady_clock::now() + min_refresh_gap;
    refreshes_.fetch_add(1, std::memory_order_relaxed);
    if (ok) {
        std::lock_guard lk(ready_mu_);
        ready_ = true;
    }
    if (ok) ready_cv_.notify_all();
    auto waiting = std::move(refresh_waiting_);
    refresh_waiting_.clear();
    for (auto& w : waiting)
        w(ok);
}

void cluster::apply(const std::vector<cluster_shard>& all) {
    // Only masters that serve slots: a master listed without any (the old master right after a
    // failover, in a node's view that has not yet made it a replica; an empty new master) has
    // nothing to route, and matching it by member ids would take its shard's node away from
    // the promoted replica that now serves the slots (and then no lock-delay would start).
    std::vector<cluster_shard> shards;
    std::copy_if(all.begin(), all.end(), std::back_inserter(shards),
                 [](const cluster_shard& s) { return !s.ranges.empty(); });
    if (shards.empty()) return;
    const auto owner_of = [&](const cluster_shard& s) -> std::pair<node*, shard_source*> {
        std::lock_guard lk(nodes_mu_);
        const auto shares_a_member = [&](const shard_source& src) {
            return std::any_of(src.ids.begin(), src.ids.end(), [&](const std::string& id) {
                return std::find(s.ids.begin(), s.ids.end(), id) != s.ids.end();
            });
        };
        // First the node that served the shard's slots until now, so that a failover keeps the
        // slots on the node whose lock-delay starts: it is this shard's node when they share a
        // member id, or when its master serves no slots in the new map (demoted or dead; the
        // ids may not say so in a view that lists the promoted replica alone). A resharding
        // moves slots to a master that keeps serving others, and is not matched here.
        const node* cur = (*slots_)[s.ranges.front().first].load(std::memory_order_acquire);
        for (std::size_t i = 0; cur && i < nodes_.size(); ++i) {
            const auto& src = *sources_[i];
            if (nodes_[i].get() != cur || src.ids.empty()) continue;
            const bool master_gone =
                std::none_of(shards.begin(), shards.end(), [&](const cluster_shard& o) {
                    return net::same_endpoint(o.master, src.last_);
                });
            if (shares_a_member(src) || master_gone) return {nodes_[i].get(), sources_[i].get()};
        }
        // The same shard: a member id in common (a failover keeps the shard, not the master).
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (shares_a_member(*sources_[i])) return {nodes_[i].get(), sources_[i].get()};
        // A node made for this address before its shard was known (first seed, MOVED).
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (sources_[i]->ids.empty() && net::same_endpoint(sources_[i]->last_, s.master))
                return {nodes_[i].get(), sources_[i].get()};
        return {nullptr, nullptr};
    };
    for (const auto& s : shards) {
        auto [n, src] = owner_of(s);
        if (!n) {
            n = &add_node(s.master);
            std::lock_guard lk(nodes_mu_);
            src = sources_.back().get();
        }
        bool moved = false;
        {
            std::lock_guard lk(nodes_mu_); // masters() reads ids and last_ from any thread
            src->ids = s.ids;
            moved = !net::same_endpoint(src->last_, s.master);
            src->master_ = s.master;
            src->last_ = s.master;
        }
        seeds_->learn(s.master);
        if (moved) { // a failover inside the shard: its connections follow, lock-delay starts
            n->master_changed(lock_delay(opts_));
            if (on_change_) on_change_(s.master.host + ':' + std::to_string(s.master.port));
        }
        for (const auto& [lo, hi] : s.ranges)
            for (unsigned slot = lo; slot <= hi; ++slot)
                (*slots_)[slot].store(n, std::memory_order_release);
    }
    // A node that no shard claimed (the first seed was a replica): it serves the shard of
    // slot 0 from now on, so that commands sent to it (raw commands, early holds) still land.
    std::lock_guard lk(nodes_mu_);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        auto& src = *sources_[i];
        if (!src.ids.empty()) continue;
        // The shard whose master it was made for (a MOVED seen before the map), else slot 0's.
        const auto it = std::find_if(shards.begin(), shards.end(), [&](const cluster_shard& c) {
            return net::same_endpoint(c.master, src.last_);
        });
        const auto& s = it != shards.end() ? *it : shards.front();
        src.ids = s.ids;
        const bool moved = !net::same_endpoint(src.last_, s.master);
        src.master_ = s.master;
        src.last_ = s.master;
        if (moved) nodes_[i]->retarget();
    }
}

} // namespace dlock::detail

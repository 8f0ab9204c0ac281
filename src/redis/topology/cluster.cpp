#include "redis/topology/cluster.hpp"

#include "redis/net/wire.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <charconv>
#include <iterator>

namespace dlock::detail {
namespace {

bool same(const net::target& a, const net::target& b) {
    return a.host == b.host && a.port == b.port;
}

std::optional<std::uint16_t> as_port(const resp3::value& v) {
    if (v.is_integer()) {
        if (v.integer <= 0 || v.integer > 65535) return std::nullopt;
        return static_cast<std::uint16_t>(v.integer);
    }
    unsigned p = 0;
    const auto& s = v.str;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), p);
    if (ec != std::errc{} || end != s.data() + s.size() || p == 0 || p > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(p);
}

std::optional<std::int64_t> as_int(const resp3::value& v) {
    if (v.is_integer()) return v.integer;
    std::int64_t n = 0;
    const auto& s = v.str;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return n;
}

/// A field of a RESP3 map or a RESP2 flat key/value array; null when absent.
const resp3::value* field(const resp3::value& m, std::string_view key) {
    if (!m.is_aggregate()) return nullptr;
    for (std::size_t i = 0; i + 1 < m.elements.size(); i += 2)
        if (m.elements[i].str == key) return &m.elements[i + 1];
    return nullptr;
}

bool add_range(cluster_shard& s, std::int64_t lo, std::int64_t hi) {
    if (lo < 0 || hi < lo || hi > 16383) return false;
    s.ranges.emplace_back(static_cast<std::uint16_t>(lo), static_cast<std::uint16_t>(hi));
    return true;
}

/// A command the router sends on its own behalf (ASKING, SCRIPT LOAD) whose reply nobody
/// needs; it owns its words and deletes itself. It goes ahead of the request it serves and
/// has that request's deadline: a default (already passed) one would make the connection's
/// deadline check fail the connection whenever its reply is not back within one tick.
struct owned_request final : request {
    owned_request(std::vector<std::string> w, std::chrono::steady_clock::time_point until)
        : words(std::move(w)) {
        for (const auto& s : words)
            views.push_back(s);
        args = views;
        deadline = until;
    }
    std::vector<std::string> words;
    std::vector<std::string_view> views;
    void complete(std::error_code, resp3::value&&) override { delete this; }
};

} // namespace

std::optional<std::vector<cluster_shard>> parse_cluster_shards(const resp3::value& v, bool tls) {
    if (!v.is_aggregate()) return std::nullopt;
    std::vector<cluster_shard> out;
    for (const auto& sh : v.elements) {
        const auto* slots = field(sh, "slots");
        const auto* nodes = field(sh, "nodes");
        if (!slots || !nodes || !slots->is_aggregate() || !nodes->is_aggregate())
            return std::nullopt;
        cluster_shard s;
        const resp3::value* master = nullptr;
        for (const auto& n : nodes->elements) {
            const auto* id = field(n, "id");
            const auto* role = field(n, "role");
            const auto* health = field(n, "health");
            if (!id || !role) return std::nullopt;
            const bool online = !health || health->str == "online";
            if (role->str == "master" && online && !master) {
                master = &n;
                s.ids.insert(s.ids.begin(), id->str);
            } else {
                s.ids.push_back(id->str);
            }
        }
        if (!master) continue; // no usable master right now (a failover in progress)
        const auto* ip = field(*master, "ip");
        const auto* port =
            tls && field(*master, "tls-port") ? field(*master, "tls-port") : field(*master, "port");
        if (!ip || !port) return std::nullopt;
        const auto p = as_port(*port);
        if (!p) return std::nullopt;
        s.master.host = ip->str;
        s.master.port = *p;
        for (std::size_t i = 0; i + 1 < slots->elements.size(); i += 2) {
            const auto lo = as_int(slots->elements[i]);
            const auto hi = as_int(slots->elements[i + 1]);
            if (!lo || !hi || !add_range(s, *lo, *hi)) return std::nullopt;
        }
        out.push_back(std::move(s));
    }
    return out;
}

std::optional<std::vector<cluster_shard>> parse_cluster_slots(const resp3::value& v) {
    if (!v.is_aggregate()) return std::nullopt;
    std::vector<cluster_shard> out;
    for (const auto& e : v.elements) {
        // [start, end, [ip, port, id, ...], [replica ip, port, id, ...]...]
        if (!e.is_aggregate() || e.elements.size() < 3) return std::nullopt;
        const auto lo = as_int(e.elements[0]);
        const auto hi = as_int(e.elements[1]);
        const auto& m = e.elements[2];
        if (!lo || !hi || !m.is_aggregate() || m.elements.size() < 2) return std::nullopt;
        const auto p = as_port(m.elements[1]);
        if (!p) return std::nullopt;
        net::target t;
        t.host = m.elements[0].str;
        t.port = *p;
        auto it = std::find_if(out.begin(), out.end(),
                               [&](const cluster_shard& s) { return same(s.master, t); });
        if (it == out.end()) {
            cluster_shard s;
            s.master = t;
            for (std::size_t i = 2; i < e.elements.size(); ++i)
                if (e.elements[i].is_aggregate() && e.elements[i].elements.size() >= 3)
                    s.ids.push_back(e.elements[i].elements[2].str);
            out.push_back(std::move(s));
            it = std::prev(out.end());
        }
        if (!add_range(*it, *lo, *hi)) return std::nullopt;
    }
    return out;
}

bool parse_redirect(std::string_view error, bool& ask, std::uint16_t& slot, net::target& to) {
    // "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381"
    if (error.starts_with("MOVED "))
        ask = false;
    else if (error.starts_with("ASK "))
        ask = true;
    else
        return false;
    error.remove_prefix(error.find(' ') + 1);
    const auto sp = error.find(' ');
    if (sp == std::string_view::npos) return false;
    const auto num = error.substr(0, sp);
    const auto addr = error.substr(sp + 1);
    unsigned s = 0;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), s);
    if (ec != std::errc{} || end != num.data() + num.size() || s > 16383) return false;
    const auto colon = addr.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    resp3::value port;
    port.kind = resp3::type::simple_string;
    port.str.assign(addr.substr(colon + 1));
    const auto p = as_port(port);
    if (!p) return false;
    slot = static_cast<std::uint16_t>(s);
    to.host.assign(addr.substr(0, colon));
    to.port = *p;
    return true;
}

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
        if (master_ && same(*master_, t)) master_.reset();
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
        if (std::none_of(list_.begin(), list_.end(), [&](const auto& s) { return same(s, t); }))
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
    , slots_(std::make_unique<std::array<std::atomic<node*>, 16384>>()) {
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
        if (same(sources_[i]->last_, master)) return nodes_[i].get();
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
                    if (nodes_[j].get() == o) return same(sources_[j]->last_, sources_[i]->last_);
                return false;
            });
            if (!dup) out.push_back(nodes_[i].get());
        }
    return out;
}

void cluster::refresh(std::function<void(bool)> done) {
    if (done) refresh_waiting_.push_back(std::move(done));
    if (loading_) return;
    if (stopped_.load(std::memory_order_acquire)) return finish_refresh(false);
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
                std::none_of(shards.begin(), shards.end(),
                             [&](const cluster_shard& o) { return same(o.master, src.last_); });
            if (shares_a_member(src) || master_gone) return {nodes_[i].get(), sources_[i].get()};
        }
        // The same shard: a member id in common (a failover keeps the shard, not the master).
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (shares_a_member(*sources_[i])) return {nodes_[i].get(), sources_[i].get()};
        // A node made for this address before its shard was known (first seed, MOVED).
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (sources_[i]->ids.empty() && same(sources_[i]->last_, s.master))
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
            moved = !same(src->last_, s.master);
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
            return same(c.master, src.last_);
        });
        const auto& s = it != shards.end() ? *it : shards.front();
        src.ids = s.ids;
        const bool moved = !same(src.last_, s.master);
        src.master_ = s.master;
        src.last_ = s.master;
        if (moved) nodes_[i]->retarget();
    }
}

bool cluster::redirect(node& from, request& r, const resp3::value& reply) {
    if (stopped_.load(std::memory_order_acquire)) return false;
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
    group.push_back(new owned_request({"ASKING"}, r.deadline));
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

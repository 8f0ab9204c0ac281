#include "redis/topology/sentinel.hpp"

#include <dlock/error.hpp>

#include <charconv>

namespace dlock::detail {
namespace {

/// The options for a connection to a sentinel: its own credentials, no database.
client_options sentinel_options(const client_options& data) {
    client_options o = data;
    o.kind = topology::standalone;
    o.username = data.sentinel_username;
    o.password = data.sentinel_password;
    o.db = 0;
    return o;
}

std::optional<net::target> parse_addr(std::string_view host, std::string_view port) {
    unsigned p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (host.empty() || ec != std::errc{} || end != port.data() + port.size() || p == 0 ||
        p > 65535)
        return std::nullopt;
    net::target t;
    t.host.assign(host);
    t.port = static_cast<std::uint16_t>(p);
    return t;
}

} // namespace

/// One SENTINEL GET-MASTER-ADDR-BY-NAME of a round; owns itself until answered.
struct sentinel_source::query final : detail::request {
    std::shared_ptr<sentinel_source> src;
    std::uint64_t round = 0;
    std::string_view cmd[3];
    void complete(std::error_code ec, resp3::value&& v) override {
        auto s = std::move(src);
        s->answered(round, ec, v);
        delete this;
    }
};

sentinel_source::sentinel_source(asio::io_context& io, const client_options& opts)
    : io_(io)
    , opts_(opts) {
    const auto so = sentinel_options(opts);
    for (const auto& ep : opts.endpoints) {
        net::target t;
        t.host = ep.host;
        t.port = ep.port;
        ask_.push_back(
            std::make_shared<net::connection>(io, so, t, net::connection::mode::command));
        listen_.push_back(
            std::make_shared<net::connection>(io, so, t, net::connection::mode::pubsub));
    }
}

sentinel_source::~sentinel_source() = default;

void sentinel_source::start() {
    for (auto& c : ask_)
        c->start();
    for (auto& c : listen_) {
        std::weak_ptr<net::connection> weak = c;
        c->set_state_handler([weak](bool up) {
            auto conn = weak.lock();
            if (!up || !conn) return;
            const std::string_view sub[] = {"SUBSCRIBE", "+switch-master"};
            conn->submit_oneway(sub);
        });
        std::weak_ptr<sentinel_source> self = weak_from_this();
        c->set_push_handler([self](const resp3::value& v) {
            if (auto s = self.lock()) s->on_switch_message(v);
        });
        c->start();
    }
}

void sentinel_source::stop() {
    for (auto& c : ask_)
        c->stop();
    for (auto& c : listen_)
        c->stop();
}

void sentinel_source::resolve(resolved done) {
    if (master_) return done({}, *master_);
    waiting_.push_back(std::move(done));
    if (outstanding_ == 0) ask();
}

void sentinel_source::invalidate(const net::target& t) {
    if (master_ && net::same_endpoint(*master_, t)) master_.reset();
}

void sentinel_source::ask() {
    outstanding_ = ask_.size();
    ++round_;
    round_error_ = make_error_code(errc::unavailable);
    const auto deadline = clock::now() + opts_.connect_timeout;
    for (auto& c : ask_) {
        auto* q = new query;
        q->src = shared_from_this();
        q->round = round_;
        q->cmd[0] = "SENTINEL";
        q->cmd[1] = "GET-MASTER-ADDR-BY-NAME";
        q->cmd[2] = opts_.master_name;
        q->args = q->cmd;
        q->deadline = deadline;
        c->submit(*q); // may complete inline (stopped): answered() copes
    }
}

void sentinel_source::answered(std::uint64_t round, std::error_code ec, const resp3::value& v) {
    if (round != round_ || outstanding_ == 0) return; // a late answer of a decided round
    --outstanding_;
    std::optional<net::target> t;
    if (!ec && v.is_aggregate() && v.elements.size() == 2)
        t = parse_addr(v.elements[0].str, v.elements[1].str);
    if (!ec && v.is_error()) round_error_ = make_error_code(classify_server_error(v.str));
    if (!ec && v.is_null()) round_error_ = make_error_code(errc::configuration_error);
    if (t) {
        outstanding_ = 0; // the first answer decides; later ones are ignored
        learned(*t, false);
    } else if (outstanding_ != 0) {
        return;
    }
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& w : waiting)
        t ? w({}, *t) : w(round_error_, {});
}

void sentinel_source::learned(const net::target& t, bool from_switch) {
    master_ = t;
    const bool changed = last_ && !net::same_endpoint(*last_, t);
    last_ = t;
    if (!changed) return;
    (void)from_switch;
    changes_.fetch_add(1, std::memory_order_relaxed);
    if (on_change_) on_change_(t);
}

void sentinel_source::on_switch_message(const resp3::value& v) {
    // ["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>"]
    if (!v.is_aggregate() || v.elements.size() < 3 || v.elements[0].str != "message") return;
    std::string_view text = v.elements[2].str;
    std::string_view words[5];
    for (auto& w : words) {
        const auto sp = text.find(' ');
        w = text.substr(0, sp);
        text = sp == std::string_view::npos ? std::string_view{} : text.substr(sp + 1);
    }
    if (words[0] != opts_.master_name) return;
    if (const auto t = parse_addr(words[3], words[4])) learned(*t, true);
}

} // namespace dlock::detail

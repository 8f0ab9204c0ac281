// zk_backend::claim_period / release_period, behind dlock/once.hpp (docs/design/once.md).
//
// One persistent node per name, /dlock-once/<lock path of the name>, whose data is
// "<slot>:<token>" (empty: no claim). ZooKeeper has no clock to read, but every write is
// stamped with the leader's wall clock (the Stat's mtime), so the slot comes from a write: a
// claim reads the name's node (data and version), writes the empty probe /dlock-once (its
// mtime is the server's time now), counts the slot from that, and, unless the node already
// holds this slot or a later one, sets the node to "<slot>:<token>" on the version it read.
// Another claim or release in between changes the version: the set fails and the claim
// starts over (only progress by someone else makes it start over). A claim whose answer was
// lost reads the node again: its own token there means it won. A release sets the node back
// to empty, on the version that held this claim's slot and token.
#include "core/random.hpp"
#include "zookeeper/backend.hpp"
#include "zookeeper/backend_call.hpp"
#include "zookeeper/names.hpp"

#include <dlock/error.hpp>
#include <dlock/once.hpp>

#include <algorithm>
#include <charconv>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace dlock::detail::zk {
namespace {

constexpr std::string_view once_root = "/dlock-once";
constexpr int max_rounds = 16;

/// The slot a node's data names, or nullopt for no claim (empty or not ours to read).
std::optional<std::int64_t> stored_slot(std::string_view data) {
    const auto colon = data.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    std::int64_t slot = 0;
    const auto* end = data.data() + colon;
    const auto [p, ec] = std::from_chars(data.data(), end, slot);
    if (ec != std::errc{} || p != end) return std::nullopt;
    return slot;
}

/// One claim or release: a chain of requests on the I/O thread.
struct once_op : std::enable_shared_from_this<once_op> {
    zk_backend* b = nullptr;
    std::shared_ptr<session> s;
    std::string name, node, token;
    std::chrono::milliseconds period{};
    std::int64_t release_slot = -1; ///< >= 0: a release of this slot
    std::function<void(std::error_code, std::optional<period_slot>, bool)> done;
    int rounds = 0;
    int made = 0; ///< parents created so far (create_path)

    void begin() {
        b->with_session(
            [self = shared_from_this()](std::error_code ec, std::shared_ptr<session> live) {
                if (ec) return self->done(ec, std::nullopt, false);
                self->s = std::move(live);
                self->read();
            });
    }
    void fail(int rc, const char* what) {
        b->set_error("once per period \"" + name + "\": " + what + " " + node + ": " + zerror(rc));
        done(make_error_code(rc == ZNOAUTH           ? errc::permission_denied
                             : transport_loss(rc)    ? errc::unavailable
                             : rc == ZSESSIONEXPIRED ? errc::unavailable
                                                     : errc::server_error),
             std::nullopt, false);
    }
    /// Starts over after a conflict or a lost answer (bounded).
    void again(int rc) {
        if (++rounds > max_rounds) return fail(rc, "too many conflicting writes on");
        if (!transport_loss(rc)) return read();
        s->when_connected([self = shared_from_this(), rc](std::error_code ec) {
            if (ec) return self->fail(rc, "connection lost on");
            self->read();
        });
    }
    void read() {
        s->get(node, nullptr, [self = shared_from_this()](reply&& r) { self->on_read(r); });
    }
    void on_read(reply& r) {
        if (r.rc == ZNONODE) {
            if (release_slot >= 0) return done({}, std::nullopt, false); // nothing to give back
            made = 0;
            return create_path();
        }
        if (r.rc != ZOK || !r.stat) return transport_loss(r.rc) ? again(r.rc) : fail(r.rc, "read");
        const int version = r.stat->version;
        const auto held = stored_slot(r.data);
        if (release_slot >= 0) {
            if (r.data != std::to_string(release_slot) + ":" + token)
                return done({}, std::nullopt, false);
            return s->set(node, "", version, [self = shared_from_this()](reply&& w) {
                if (w.rc == ZOK) return self->done({}, std::nullopt, true);
                if (w.rc == ZBADVERSION || w.rc == ZNONODE || transport_loss(w.rc))
                    return self->again(w.rc); // read again: still ours?
                self->fail(w.rc, "release of");
            });
        }
        if (held && r.data.ends_with(":" + token)) return won(*held, r);
        // The server's time now: the mtime of a write to the probe.
        s->set(std::string(once_root), "", -1,
               [self = shared_from_this(), version, held](reply&& p) {
                   if (p.rc != ZOK || !p.stat)
                       return transport_loss(p.rc) ? self->again(p.rc) : self->fail(p.rc, "write");
                   self->claim(version, held, p.stat->mtime);
               });
    }
    void claim(int version, std::optional<std::int64_t> held, std::int64_t now_ms) {
        const auto p = period.count();
        const auto slot = now_ms / p;
        if (held && *held >= slot) return done({}, std::nullopt, false); // taken
        s->set(node, std::to_string(slot) + ":" + token, version,
               [self = shared_from_this(), slot, now_ms](reply&& w) {
                   if (w.rc == ZOK)
                       return self->finish(slot, (slot + 1) * self->period.count() - now_ms);
                   if (w.rc == ZBADVERSION || w.rc == ZNONODE || transport_loss(w.rc))
                       return self->again(w.rc); // someone wrote first, or the answer was lost
                   self->fail(w.rc, "claim of");
               });
    }
    /// Our token was found on a read again (the claim's answer had been lost).
    void won(std::int64_t slot, const reply& r) {
        // What is left is counted from the node's own mtime: the write that claimed it.
        finish(slot, (slot + 1) * period.count() - r.stat->mtime);
    }
    void finish(std::int64_t slot, std::int64_t left_ms) {
        period_slot out;
        out.index = slot;
        out.period = period;
        out.left = std::chrono::milliseconds(std::max<std::int64_t>(0, left_ms));
        out.token = token;
        done({}, std::move(out), true);
    }
    /// Creates the node and its missing parents, one level at a time, then reads again.
    void create_path() {
        std::size_t at = 0;
        for (int i = 0; i <= made; ++i) {
            at = node.find('/', at + 1);
            if (at == std::string::npos) break;
        }
        const auto part = at == std::string::npos ? node : node.substr(0, at);
        s->create(part, "", ZOO_PERSISTENT,
                  [self = shared_from_this(), last = at == std::string::npos](reply&& r) {
                      if (r.rc != ZOK && r.rc != ZNODEEXISTS)
                          return transport_loss(r.rc) ? self->again(r.rc)
                                                      : self->fail(r.rc, "create of");
                      if (last) return self->again(ZOK);
                      ++self->made;
                      self->create_path();
                  });
    }
};

} // namespace

std::optional<period_slot> zk_backend::claim_period(std::string_view name,
                                                    std::chrono::milliseconds period,
                                                    std::error_code& ec) {
    return run_once(name, period, -1, random_token(), ec).first;
}

bool zk_backend::release_period(std::string_view name, const period_slot& slot,
                                std::error_code& ec) {
    return run_once(name, slot.period, slot.index, slot.token, ec).second;
}

std::pair<std::optional<period_slot>, bool>
zk_backend::run_once(std::string_view name, std::chrono::milliseconds period,
                     std::int64_t release_slot, std::string token, std::error_code& ec) {
    ec.clear();
    std::string why;
    const auto dir = lock_dir(name, &why);
    if (dir.empty()) {
        set_error(why);
        ec = make_error_code(errc::invalid_argument);
        return {std::nullopt, false};
    }
    using out = std::tuple<std::error_code, std::optional<period_slot>, bool>;
    auto r = call<out>(
        [this, n = std::string(name), node = std::string(once_root) + dir, period, release_slot,
         token = std::move(token)](std::function<void(out)> done) {
            auto op = std::make_shared<once_op>();
            op->b = this;
            op->name = n;
            op->node = node;
            op->token = token;
            op->period = period;
            op->release_slot = release_slot;
            op->done = [done](std::error_code e, std::optional<period_slot> s, bool ok) {
                done({e, std::move(s), ok});
            };
            op->begin();
        },
        {make_error_code(errc::unavailable), std::nullopt, false});
    ec = std::get<0>(r);
    return {std::move(std::get<1>(r)), std::get<2>(r)};
}

} // namespace dlock::detail::zk

// zk_backend::acquire_read_under: a write lock downgraded to a read lock, as Curator >= 5.5
// does (a read node at the write node's sequence, on the writer's session).
#include "core/random.hpp"
#include "zookeeper/backend.hpp"
#include "zookeeper/backend_call.hpp"
#include "zookeeper/hold.hpp"

#include <dlock/error.hpp>

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

std::shared_ptr<hold> zk_backend::acquire_read_under(const hold& write, std::error_code& ec) {
    ec.clear();
    const auto* w = dynamic_cast<const zk_hold*>(&write);
    if (!w || w->shared() || on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    if (w->lost() || w->released() || w->owner_session()->ended()) {
        ec = make_error_code(errc::not_owner);
        return nullptr;
    }
    const auto slash = w->path().rfind('/');
    const auto seq = w->path().substr(w->path().size() - 10);
    const auto path = w->path().substr(0, slash + 1) + node_prefix(random_uuid(), read_infix) + seq;
    struct creator : std::enable_shared_from_this<creator> {
        zk_backend* b;
        std::shared_ptr<session> s;
        std::string name, path;
        std::function<void(std::pair<std::error_code, std::shared_ptr<hold>>)> done;
        int rounds = 0;
        void create() {
            s->create(path, b->node_data(), ZOO_EPHEMERAL,
                      [self = shared_from_this()](reply&& r) { self->on(std::move(r)); });
        }
        void on(reply&& r) {
            if (r.rc == ZOK && r.stat) return grant(r.stat->czxid);
            if (r.rc == ZNODEEXISTS || (transport_loss(r.rc) && ++rounds < 4)) {
                // A create whose answer was lost: ours if this session owns the node.
                return s->when_connected([self = shared_from_this()](std::error_code e) {
                    if (e) return self->fail(errc::not_owner, "the session ended");
                    self->s->exists(self->path, {}, [self](reply&& st) {
                        if (st.rc == ZOK && st.stat && st.stat->ephemeral_owner == self->s->id())
                            return self->grant(st.stat->czxid);
                        if (st.rc == ZNONODE && self->rounds < 4) return self->create();
                        self->fail(errc::server_error,
                                   "read node " + self->path + ": " + zerror(st.rc));
                    });
                });
            }
            if (r.rc == ZNONODE || r.rc == ZSESSIONEXPIRED || r.rc == ZINVALIDSTATE)
                return fail(errc::not_owner, "the write lock's directory or session is gone");
            fail(errc::server_error, "create " + path + ": " + zerror(r.rc));
        }
        void grant(std::int64_t czxid) {
            auto h = std::make_shared<zk_hold>(*b, s, name, path, czxid, true);
            h->start();
            done({{}, std::move(h)});
        }
        void fail(errc e, const std::string& why) {
            b->set_error("downgrade to read: " + why);
            done({make_error_code(e), nullptr});
        }
    };
    using result = std::pair<std::error_code, std::shared_ptr<hold>>;
    auto [e, h] = call<result>(
        [this, s = w->owner_session(), n = w->name(), path](std::function<void(result)> done) {
            auto c = std::make_shared<creator>();
            c->b = this;
            c->s = s;
            c->name = n;
            c->path = path;
            c->done = std::move(done);
            c->create();
        },
        {make_error_code(errc::unavailable), nullptr});
    ec = e;
    return h;
}

} // namespace dlock::detail::zk

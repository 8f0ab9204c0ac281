// zk_backend::fenced_set, behind dlock::zookeeper::fenced_set: a write to a resource node in one
// multi with a check that the lock node still exists.
#include "zookeeper/backend.hpp"
#include "zookeeper/backend_call.hpp"

#include <dlock/error.hpp>

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

std::error_code zk_backend::fenced_set(const std::string& lock_node, std::string_view node,
                                       std::string_view data) {
    std::string why;
    const auto path = lock_dir(node, &why);
    const auto lock_parent = lock_node.substr(0, lock_node.rfind('/'));
    if (path.empty() || path == lock_parent || path.starts_with(lock_parent + "/")) {
        set_error(path.empty() ? why
                               : "the resource node " + path + " is inside the lock directory " +
                                     lock_parent + " (keep other data out of lock directories)");
        return make_error_code(errc::invalid_argument);
    }
    if (on_io_thread()) return make_error_code(errc::invalid_argument);
    struct writer : std::enable_shared_from_this<writer> {
        zk_backend* b;
        std::shared_ptr<session> s;
        std::string lock_node, path, data;
        std::function<void(std::error_code)> done;
        int rounds = 0;
        bool uncertain = false; ///< an earlier attempt's answer was lost
        void begin(bool first) {
            b->with_session([self = shared_from_this(), first](std::error_code ec,
                                                               std::shared_ptr<session> live) {
                // A session that ended just now (expired) is replaced once: the check needs a
                // live session, not the holder's.
                auto cur = self->b->current_session();
                if (ec == errc::unavailable && first && cur && cur->ended())
                    return self->begin(false);
                if (ec) return self->done(ec);
                self->s = std::move(live);
                self->write(false);
            });
        }
        void write(bool create) {
            // Set, or create when the resource does not exist yet; both after the check.
            multi_op check{multi_op::type::check, lock_node, {}, -1, 0};
            multi_op op{create ? multi_op::type::create : multi_op::type::set, path, data, -1,
                        ZOO_PERSISTENT};
            s->multi(
                {std::move(check), std::move(op)},
                [self = shared_from_this(), create](reply&& r) { self->on(std::move(r), create); });
        }
        void on(reply&& r, bool create) {
            if (r.rc == ZOK) return done({});
            const auto lost_answer = [&] {
                b->set_error("fenced write of " + path + ": the answer was lost (" + zerror(r.rc) +
                             "); it may or may not have been applied");
                done(make_error_code(errc::ambiguous));
            };
            if (transport_loss(r.rc)) {
                // Sending it again is safe (the check still guards it); a refusal then leaves
                // the first attempt's outcome unknown.
                if (uncertain || ++rounds >= 4) return lost_answer();
                uncertain = true;
                return s->when_connected([self = shared_from_this(), create](std::error_code e) {
                    if (e) return self->on(reply{ZSESSIONEXPIRED, {}, {}, {}, {}, {}}, create);
                    self->write(create);
                });
            }
            const int check_rc = r.results.empty() ? r.rc : r.results[0];
            const int write_rc = r.results.size() < 2 ? r.rc : r.results[1];
            if (check_rc != ZOK || r.rc == ZSESSIONEXPIRED || r.rc == ZINVALIDSTATE) {
                if (uncertain) return lost_answer();
                b->set_error("fenced write of " + path + " refused: the lock node " + lock_node +
                             " is gone (the lock was lost)");
                return done(make_error_code(errc::not_owner));
            }
            if (++rounds < 4 &&
                ((!create && write_rc == ZNONODE) || (create && write_rc == ZNODEEXISTS)))
                return write(!create);
            if (create && write_rc == ZNONODE) {
                b->set_error("fenced write: the parent of " + path + " does not exist");
                return done(make_error_code(errc::configuration_error));
            }
            b->set_error("fenced write of " + path + ": " + zerror(write_rc));
            done(make_error_code(write_rc == ZNOAUTH ? errc::permission_denied
                                                     : errc::server_error));
        }
    };
    return call<std::error_code>(
        [this, lock_node, path, d = std::string(data)](std::function<void(std::error_code)> done) {
            auto w = std::make_shared<writer>();
            w->b = this;
            w->lock_node = lock_node;
            w->path = path;
            w->data = d;
            w->done = std::move(done);
            w->begin(true);
        },
        make_error_code(errc::unavailable));
}

} // namespace dlock::detail::zk

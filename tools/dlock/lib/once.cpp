// `dlock exec --once-per D`: claims the current slot of D on the server's clock before the
// lock is taken (dlock/once.hpp); a slot claimed already skips the run.
#include "once.hpp"

#include "common.hpp"

namespace dlock::cli {

once_slot::once_slot(client& c, const exec_options& o, std::ostream& err)
    : c_(c)
    , o_(o)
    , err_(err) {
    std::error_code ec;
    slot_ = claim_period(c, o.name, *o.once_per, ec);
    if (ec == errc::unsupported)
        throw usage_error("--once-per is not offered by the " + std::string(c.backend_name()) +
                          " backend (Redis, ZooKeeper, PostgreSQL and etcd offer it)");
    if (ec) throw diagnose(c, ec, "cannot claim this period of '" + one_line(o.name) + "'", o.name);
    if (!slot_) {
        settled_ = true;
        err << "dlock: '" << o.name << "' already ran in this period of "
            << format_duration(*o.once_per) << "; not running the command\n";
    }
}

once_slot::~once_slot() {
    if (!settled_) give_back();
}

int once_slot::finished(int rc) {
    settled_ = true;
    if (rc != 0 && o_.once_release_on_failure) give_back();
    return rc;
}

void once_slot::give_back() noexcept {
    settled_ = true;
    if (!slot_) return;
    std::error_code ec;
    if (!release_period(c_, o_.name, *slot_, ec) || ec)
        err_ << "dlock: could not give this period of '" << o_.name
             << "' back; it stays taken until its end\n";
}

} // namespace dlock::cli

// PostgreSQL advisory locks: the acquisition (a try on a holding session, then a wait on a
// session of its own: advisory_sessions.hpp) and the kinds served (the hold: advisory_hold.cpp;
// inspect, unlock --force, list: advisory_queries.cpp).
#include "postgres/advisory.hpp"

#include "postgres/advisory_impl.hpp"
#include "postgres/advisory_sessions.hpp"
#include "postgres/election.hpp"

namespace dlock::detail::pg {

std::string app_name_for(std::string_view name) {
    constexpr std::size_t max_app_name = 63; // NAMEDATALEN - 1
    std::string s = std::string(app_prefix) + std::string(name);
    if (s.size() <= max_app_name) return s;
    std::size_t n = max_app_name;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80)
        --n;
    s.resize(n);
    return s;
}

namespace {

const std::string fence_ddl = "DO $$BEGIN IF to_regclass('dlock_fence') IS NULL THEN CREATE "
                              "SEQUENCE IF NOT EXISTS dlock_fence; END IF; END$$";

// --- acquisition ----------------------------------------------------------------------------

struct attempt {
    std::shared_ptr<engine> eng;
    std::string name;
    acquire_options opts;
    advisory_key key;
    clock::time_point start = clock::now();
    acquire_handler done;
    bool fence = false;
    /// A campaign (election.hpp): the leader's value, recorded by the statement after the grant.
    std::optional<std::string> elect{};
    std::optional<result> ddl{}; ///< the first failure of the sequence and table checks

    void finish(std::error_code ec, std::shared_ptr<hold> h) {
        --eng->advisory_attempts;
        const bool got = h != nullptr;
        eng->metrics().acquisition(metrics_slot(opts.kind), ec, got, false, clock::now() - start);
        done(ec, std::move(h));
    }
};

/// The sequence check (and a campaign's table check) goes first in a batch of its own (its own
/// implicit transaction, so a CREATE is committed before the lock wait starts), in the same
/// round trip. True when sent.
bool send_ddl(const std::shared_ptr<attempt>& a, connection& s) {
    const bool ensure_fence = a->fence && !a->eng->fence_ready;
    const bool ensure_table = a->elect && !a->eng->election_ready;
    if (!ensure_fence && !ensure_table) return false;
    std::vector<statement> ddl;
    if (ensure_fence) ddl.push_back({fence_ddl});
    if (ensure_table) ddl.push_back({election_ddl});
    s.run(std::move(ddl), a->eng->config().request_timeout,
          [a](std::error_code ec, std::vector<result>& r) {
              if (ec) return;
              for (const auto& x : r)
                  if (!x.ok()) {
                      a->ddl = x;
                      return;
                  }
          });
    return true;
}

/// The attempt failed: `bad` is the first statement that failed (null: the session was lost,
/// `lost` says why).
void fail_attempt(const std::shared_ptr<attempt>& a, bool ensured, const result* bad,
                  const std::string& lost) {
    auto& e = *a->eng;
    const auto fail = [&](errc code, const std::string& why) {
        e.set_error(e.config().display + ": lock \"" + a->name + "\": " + why);
        a->finish(make_error_code(code), nullptr);
    };
    if (ensured && a->ddl) {
        const auto code = error_of(*a->ddl);
        if (code == errc::permission_denied && a->elect)
            return fail(code, "the sequence dlock_fence or the table dlock_election is missing "
                              "and this role may not create it (create them once: "
                              "docs/design/election.md): " +
                                  a->ddl->message());
        if (code == errc::permission_denied)
            return fail(code, "the sequence dlock_fence is missing and this role may not create "
                              "it (create it once, or add dlock_fence=off to the URL): " +
                                  a->ddl->message());
        if (bad) return fail(code, a->ddl->message());
    }
    if (bad) return fail(error_of(*bad), bad->message());
    return fail(errc::unavailable, lost.empty() ? std::string("session lost while waiting") : lost);
}

std::optional<milliseconds> remaining_wait(const attempt& a) {
    if (!a.opts.wait) return std::nullopt;
    const auto left =
        std::chrono::duration_cast<milliseconds>(*a.opts.wait - (clock::now() - a.start));
    return left > milliseconds(0) ? left : milliseconds(0);
}

void send(std::shared_ptr<attempt> a, std::shared_ptr<connection> s) {
    auto& cfg = a->eng->config();
    const auto remaining = remaining_wait(*a);
    const bool try_once = remaining && remaining->count() == 0;
    const bool shared = shared_kind(a->opts.kind);
    const std::string suffix = shared ? "_shared" : "";

    const bool ensured = send_ddl(a, *s);

    std::vector<statement> st;
    st.push_back({"SELECT set_config('application_name', $1, false)", {app_name_for(a->name)}});
    std::size_t lock_at = 0;
    if (try_once) {
        const std::string call = key_call("pg_try_advisory_lock" + suffix, a->key);
        lock_at = st.size();
        if (a->elect)
            st.push_back(lead_statement(a->name, *a->elect, &a->key)); // no row: not free
        else
            st.push_back(key_statement("SELECT CASE WHEN " + call + " THEN " +
                                           (a->fence ? "nextval('dlock_fence')" : "0") + " END",
                                       a->key));
    } else {
        st.push_back({"SELECT set_config('lock_timeout', $1, false)",
                      {remaining ? std::to_string(remaining->count()) : "0"}});
        lock_at = st.size();
        st.push_back(
            key_statement("SELECT " + key_call("pg_advisory_lock" + suffix, a->key), a->key));
        if (a->elect)
            st.push_back(lead_statement(a->name, *a->elect, nullptr));
        else if (a->fence)
            st.push_back({"SELECT nextval('dlock_fence')"});
    }
    const auto budget = remaining ? *remaining + cfg.request_timeout : milliseconds(0);

    const auto sent = clock::now();
    s->run(std::move(st), budget,
           [a, s, lock_at, try_once, ensured, sent](std::error_code ec, std::vector<result>& r) {
               auto& e = *a->eng;
               // The first statement that failed, if any.
               std::size_t bad = r.size();
               for (std::size_t i = 0; i < r.size(); ++i)
                   if (!r[i].ok()) {
                       bad = i;
                       break;
                   }
               if (!ec && bad == r.size()) {
                   if (a->fence) e.fence_ready = true; // nextval worked
                   if (a->elect) e.election_ready = true;
               }
               if (bad == lock_at && r[lock_at].sqlstate() == sqlstate::lock_not_available) {
                   if (!ec) e.put_session(s); // the wait ended in the server: not acquired
                   return a->finish({}, nullptr);
               }
               if (ec || bad < r.size()) {
                   // The session died, timed out or a statement failed. A statement before the
                   // lock leaves the session clean; otherwise whatever was granted goes with
                   // the closed session.
                   if (!ec && bad < lock_at)
                       e.put_session(s);
                   else
                       s->close();
                   return fail_attempt(a, ensured, bad < r.size() ? &r[bad] : nullptr,
                                       s->error_text());
               }
               std::optional<std::uint64_t> token;
               if (try_once) {
                   if (a->elect ? r[lock_at].rows() == 0 : r[lock_at].is_null(0, 0)) {
                       e.put_session(s);
                       return a->finish({}, nullptr);
                   }
                   if (a->fence)
                       token = static_cast<std::uint64_t>(r[lock_at].int_value(0, 0).value_or(0));
               } else if (a->fence) {
                   token = static_cast<std::uint64_t>(r.back().int_value(0, 0).value_or(0));
               }
               // The session joins the holding set (a hashtext key's or a leader's takes no
               // tries: advisory_sessions.hpp).
               auto hs = join_session(e, s, a->key.server_hash || a->elect.has_value());
               auto h = std::make_shared<advisory_hold>(a->eng, a->name, a->key, a->opts.kind,
                                                        token, hs, a->elect.has_value());
               // A wait's grant is proven when its answer arrives (the statement was sent
               // before the wait, which may outlast dlock_check), as before holding sessions;
               // a try's by its send.
               const auto proven = try_once ? sent : clock::now();
               h->start(a->opts.lease, proven);
               hs->add(key_id(a->key), h, proven);
               e.track(h);
               a->finish({}, h);
           });
}

/// The waiting path: a session of its own from the idle pool (a blocked pg_advisory_lock stops
/// its session's pipeline), which joins the holding set once granted.
void wait_on_own(const std::shared_ptr<attempt>& a) {
    a->eng->get_session([a](std::error_code ec, std::shared_ptr<connection> s) {
        if (ec) return a->finish(ec, nullptr);
        send(a, std::move(s));
    });
}

/// The try first: one statement pipelined on the holding session `hs`, which does not have the
/// key (reserved here until the answer). It cannot barge past the server's queue: a try that
/// conflicts with a granted or a waiting request is refused, and an unlock grants the lock to
/// the first waiter inside the server before any other backend can try.
void try_on(const std::shared_ptr<attempt>& a, const std::shared_ptr<holding_session>& hs) {
    const auto id = key_id(a->key);
    hs->reserve(id);
    const bool ensured = send_ddl(a, hs->conn());
    const std::string call = key_call(
        shared_kind(a->opts.kind) ? "pg_try_advisory_lock_shared" : "pg_try_advisory_lock", a->key);
    std::vector<statement> st;
    st.push_back({"SELECT set_config('application_name', $1, false)",
                  {holding_app_name(a->name, hs->keys())}});
    st.push_back(key_statement("SELECT CASE WHEN " + call + " THEN " +
                                   (a->fence ? "nextval('dlock_fence')" : "0") + " END",
                               a->key));
    const auto sent = clock::now();
    hs->conn().run(std::move(st), a->eng->config().request_timeout,
                   [a, hs, id, ensured, sent](std::error_code ec, std::vector<result>& r) {
                       auto& e = *a->eng;
                       if (ec) {
                           // No answer: the lock may have been granted; only the session's end
                           // frees it.
                           const std::string why = hs->conn().error_text();
                           hs->fail_all(loss_cause::gone);
                           return fail_attempt(a, ensured, nullptr, why);
                       }
                       if (r.size() < 2 || !r[0].ok() || !r[1].ok()) {
                           const result* bad = r.empty() ? nullptr : (!r[0].ok() ? &r[0] : &r[1]);
                           if (r.size() >= 2 && r[0].ok())
                               // The try ran and failed later (nextval): unlock in case it was
                               // granted.
                               hs->drop(id, unlock_statement_for(a->key, a->opts.kind));
                           else
                               hs->remove(id);
                           return fail_attempt(a, ensured, bad, hs->conn().error_text());
                       }
                       if (a->fence) e.fence_ready = true; // nextval worked
                       if (r[1].is_null(0, 0)) {
                           hs->remove(id);
                           const auto left = remaining_wait(*a);
                           if (!left || left->count() > 0) return wait_on_own(a);
                           return a->finish({}, nullptr);
                       }
                       std::optional<std::uint64_t> token;
                       if (a->fence)
                           token = static_cast<std::uint64_t>(r[1].int_value(0, 0).value_or(0));
                       auto h = std::make_shared<advisory_hold>(a->eng, a->name, a->key,
                                                                a->opts.kind, token, hs);
                       h->start(a->opts.lease, sent);
                       hs->add(id, h, sent);
                       e.track(h);
                       a->finish({}, h);
                   });
}

} // namespace

bool advisory_kind(lock_kind kind) noexcept {
    switch (kind) {
    case lock_kind::reentrant:
    case lock_kind::simple:
    case lock_kind::fair:
    case lock_kind::read:
    case lock_kind::write:
        return true;
    case lock_kind::shedlock:
    case lock_kind::lease:
    case lock_kind::versioned:
    case lock_kind::semaphore:
        return false;
    }
    return false;
}

const char* advisory_kind_name(lock_kind kind) noexcept {
    if (kind == lock_kind::read) return "read";
    if (kind == lock_kind::write) return "write";
    return "lock";
}

namespace {

/// The try of `a` on a holding session (behind one batch at most) or on another session;
/// false: every one is busier and the pool full (choose_session), nothing sent.
bool dispatch_try(const std::shared_ptr<attempt>& a) {
    const auto& e = a->eng;
    const auto pick = pick_session(*e, key_id(a->key));
    if (pick.wait) return false;
    if (pick.session) {
        try_on(a, pick.session);
        return true;
    }
    ++e->holding_opening;
    e->get_session([a](std::error_code ec, std::shared_ptr<connection> s) {
        --a->eng->holding_opening;
        if (ec) return a->finish(ec, nullptr);
        try_on(a, join_session(*a->eng, std::move(s), false));
    });
    return true;
}

void start(const std::shared_ptr<attempt>& a) {
    const auto& e = a->eng;
    const auto& opts = a->opts;
    ++e->advisory_attempts;
    std::error_code ec;
    if ((opts.lease && *opts.lease < milliseconds(1)) ||
        (opts.retry && (opts.retry->attempts == 0 || opts.retry->delay.count() < 0 ||
                        opts.retry->jitter.count() < 0)))
        return a->finish(make_error_code(errc::invalid_argument), nullptr);
    a->key = make_key(a->name, e->config().key, ec);
    if (ec) {
        e->set_error("lock name \"" + a->name + "\" cannot be a " +
                     std::string(to_string(e->config().key)) + " advisory key");
        return a->finish(ec, nullptr);
    }
    // Readers share the lock and get no token (as a Redis read lock); a leader's epoch is its
    // token, whatever the URL says.
    a->fence = (e->config().fence && !shared_kind(opts.kind)) || a->elect.has_value();
    // A campaign writes its row with its session's pid, and hashtext keys are known only to
    // the server (two names may share one): both wait on a session of their own.
    if (a->elect || a->key.server_hash) return wait_on_own(a);
    // A client that holds no advisory lock and acquires no other has no session to share: the
    // wait (a grant at once when the lock is free) goes on a session of its own, which then
    // joins the holding set, one round trip as before holding sessions. A try first would cost
    // a contended acquisition a round trip more (the one-lock-per-client C and D rows lost
    // 8-20% to it, BENCHMARKS.md).
    if (e->holding.empty() && e->advisory_attempts == 1 && (!opts.wait || opts.wait->count() > 0))
        return wait_on_own(a);
    // In line behind earlier tries, or when every holding session is busy and the pool full.
    if (!e->waiting_tries.empty() || !dispatch_try(a))
        e->waiting_tries.push_back([a](bool cancelled) {
            if (!cancelled) return dispatch_try(a);
            a->finish(make_error_code(errc::cancelled), nullptr);
            return true;
        });
}

} // namespace

void acquire_advisory(const std::shared_ptr<engine>& e, std::string name,
                      const acquire_options& opts, acquire_handler done) {
    auto a = std::make_shared<attempt>();
    a->eng = e;
    a->name = std::move(name);
    a->opts = opts;
    a->done = std::move(done);
    start(a);
}

void campaign_advisory(const std::shared_ptr<engine>& e, std::string name, std::string value,
                       std::optional<std::chrono::milliseconds> wait, acquire_handler done) {
    auto a = std::make_shared<attempt>();
    a->eng = e;
    a->name = std::move(name);
    a->opts.kind = lock_kind::reentrant;
    a->opts.wait = wait;
    a->elect = std::move(value);
    a->done = std::move(done);
    start(a);
}

} // namespace dlock::detail::pg

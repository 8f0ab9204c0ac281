// The conformance suite's data: every backend dlock::client stands on (one entry each, in
// backends.cpp), what each lock kind of it promises (kind_traits), the servers started once per
// test process, and small helpers shared by the tests. The behaviours themselves are written
// once, in conformance_test.cpp, and run over every entry here.
//
// A new backend joins with one entry in backend_list() (backends.cpp): its label, a check
// that its server binaries exist, a factory that starts its server(s) once and returns the
// URL, how a test client connects, a malformed URL of its scheme and the table of its kinds.
#pragma once

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dlock::conformance {

/// The URL of the backend's server(s), started on first use; skips without the binaries.
#define CONFORMANCE_START(entry, url)                                                              \
    if (!(entry).available()) GTEST_SKIP() << (entry).label << ": server binaries not installed";  \
    const std::string url = (entry).start()

using namespace std::chrono_literals;

/// How a holder learns that its lock was ended by client::force_unlock().
enum class loss_seen {
    by_itself, ///< its watchdog, session watch or node watch notices without any call
    on_extend, ///< only at its next renewal: the test calls lease::extend() to make it happen
               ///< (PostgreSQL lease rows: "no loss is noticed faster than the extend period")
};

/// The thread-bound lock object (dlock/mutex.hpp, rw_mutex.hpp) that takes a kind, if any.
enum class object {
    none,          ///< only client::acquire() takes it (shedlock, lease, versioned, semaphore)
    reentrant,     ///< make_mutex / make_fair_mutex / make_rw_mutex sides: lock twice, count 2
    not_reentrant, ///< make_simple_mutex: a second lock() by the holder is invalid_argument
};

/// What one lock kind of one backend promises.
struct kind_traits {
    lock_kind kind;
    /// The kind another client cannot take while `kind` is held: `kind` itself for the
    /// exclusive kinds, write for read (readers share; a writer is kept out).
    lock_kind rival;
    /// lease::token() is set and strictly increasing across holders; false: always nullopt.
    bool fenced;
    object obj;
    /// acquire_options::lease is honoured (the lock frees itself after it); false: the backend
    /// refuses a fixed lease with errc::unsupported.
    bool fixed_lease;
    loss_seen loss;
    /// inspect() reports remaining_lease of a held lock; false: always nullopt.
    bool status_lease;
};

/// Server(s) of one test's own, which it may pause (SIGSTOP) and resume.
struct own_server {
    /// Short leases: a paused server ends a hold within a few seconds, and a healthy one keeps
    /// more than 400 ms of validity left between renewals.
    std::string url;
    std::function<void()> pause, resume;
    std::shared_ptr<void> keep; ///< the fixture, stopped with the last copy
};

/// One backend behind dlock::client.
struct backend_entry {
    std::string label; ///< for test names: letters, digits, '_'
    /// False when the server binaries are missing (the tests GTEST_SKIP()).
    std::function<bool()> available;
    /// Starts the backend's server(s) on the first call (kept for the whole test process) and
    /// returns the URL; throws what the fixture throws when a server does not come up.
    std::function<std::string()> start;
    /// A client on `url`, with whatever bounds the backend's test clients use, and `log`.
    std::function<std::unique_ptr<client>(const std::string& url, const log_options& log)>
        make_client;
    /// A URL of the backend's scheme that must fail with errc::configuration_error.
    std::string bad_url;
    /// The kinds it offers; every other lock_kind must fail with errc::unsupported.
    std::vector<kind_traits> kinds;
    /// Starts server(s) of the caller's own (the pause tests); empty where another entry's
    /// test covers the same code, said in `own_covered_by`.
    std::function<own_server()> start_own{};
    std::string own_covered_by{};

    std::unique_ptr<client> connect(const std::string& url, const log_options& log = {}) const {
        return make_client(url, log);
    }
};

/// Every backend of this build, in one list (backends.cpp).
const std::vector<backend_entry>& backend_list();

/// A kind's name in test names and messages: the library's (dlock::kind_name; "lock" for the
/// reentrant lock).
inline std::string name_of(lock_kind k) {
    return std::string(dlock::kind_name(k));
}

/// One (backend, kind) pair: the parameter of the per-kind tests.
struct kind_case {
    const backend_entry* backend;
    kind_traits traits;
};
/// One (backend, kind it lacks) pair.
struct lacking_case {
    const backend_entry* backend;
    lock_kind kind;
};

std::vector<const backend_entry*> backend_params();
std::vector<kind_case> kind_params();
std::vector<lacking_case> lacking_params();

/// What GoogleTest prints for a parameter ("postgresql/lease").
void PrintTo(const kind_case& c, std::ostream* os);
void PrintTo(const lacking_case& c, std::ostream* os);
void PrintTo(const backend_entry* b, std::ostream* os);

/// Test-name generators for INSTANTIATE_TEST_SUITE_P.
std::string param_name(const ::testing::TestParamInfo<const backend_entry*>& i);
std::string param_name(const ::testing::TestParamInfo<kind_case>& i);
std::string param_name(const ::testing::TestParamInfo<lacking_case>& i);

/// A lock name no other test of this process uses ("cf<n>-<tag>").
std::string fresh_name(const std::string& tag);

/// The servers started by the backends' factories, stopped when the test program ends
/// (a GoogleTest environment, so before static destruction).
void keep_until_exit(std::shared_ptr<void> fixture);

/// Polls `pred` every 5 ms until it holds or `budget` passed (observing a state another
/// thread or the server reaches; not a sleep standing in for synchronisation).
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget);

/// A thread-bound lock object of `kind` on `c` (traits.obj != object::none).
class lock_object {
public:
    lock_object(client& c, const std::string& name, lock_kind kind);
    basic_mutex& get();

private:
    lock_kind kind_;
    std::optional<mutex> m_;
    std::optional<simple_mutex> s_;
    std::optional<fair_mutex> f_;
    std::optional<rw_mutex> rw_;
};

} // namespace dlock::conformance

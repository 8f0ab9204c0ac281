// Exclusion among 8 processes for every PostgreSQL lock kind (issue 14): advisory (lock and
// write), ShedLock rows, dlock's lease rows, pglock's version-column rows and a semaphore of one
// permit. Each process has its own backend and session; a checker in shared memory sees any
// overlap, and the fencing tokens of the kinds that have one must strictly increase in the
// order the processes got in.
#include "postgres_test_util.hpp"

#include <atomic>
#include <cstdio>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dlock::test {
namespace {

struct shared_state {
    critical_section_checker check;
    std::atomic<std::uint64_t> last_token{0};
    std::atomic<int> regressions{0}; ///< a token not above the one before it
    std::atomic<int> tokens{0};      ///< critical sections that had a token
    std::atomic<int> entries{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

struct kind_case {
    lock_kind kind;
    const char* name;
    bool fenced; ///< acquisitions carry a fencing token
};

class pg_exclusion : public pg_suite, public ::testing::WithParamInterface<kind_case> {};

// One child: `rounds` acquisitions of `lock`, a short critical section each, then release.
// Returns the number of errors as its exit status.
int child(const std::string& url, const std::string& lock, const kind_case& k, int rounds,
          shared_state* st) {
    int errors = 0;
    std::error_code ec;
    std::string why;
    auto b = detail::make_postgres_backend(url, ec, &why);
    if (!b) {
        std::fprintf(stderr, "child: %s\n", why.c_str());
        return 100;
    }
    for (int i = 0; i < rounds; ++i) {
        auto h = b->acquire(lock, wait_for(60s, k.kind), ec);
        if (ec || !h) {
            std::fprintf(stderr, "child: %s: %s\n", ec.message().c_str(),
                         b->last_error_detail().c_str());
            ++errors;
            continue;
        }
        {
            auto in = st->check.enter_write();
            st->entries.fetch_add(1);
            if (const auto t = h->fencing_token()) {
                st->tokens.fetch_add(1);
                if (*t <= st->last_token.exchange(*t)) st->regressions.fetch_add(1);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        h->release_blocking(ec);
        if (ec) ++errors;
    }
    return errors;
}

TEST_P(pg_exclusion, eight_processes_never_overlap) {
    constexpr int procs = 8, rounds = 4;
    const kind_case k = GetParam();
    void* mem = ::mmap(nullptr, sizeof(shared_state), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* st = new (mem) shared_state();
    const std::string url = server().url();
    const std::string lock = std::string("excl:") + k.name;
    std::vector<pid_t> kids;
    for (int p = 0; p < procs; ++p) {
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) ::_exit(child(url, lock, k, rounds, st));
        kids.push_back(pid);
    }
    for (const pid_t pid : kids) {
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << k.name << ": child errors: " << WEXITSTATUS(status);
    }
    EXPECT_EQ(st->entries.load(), procs * rounds);
    EXPECT_EQ(st->check.violations(), 0) << k.name;
    EXPECT_EQ(st->tokens.load(), k.fenced ? procs * rounds : 0) << k.name;
    EXPECT_EQ(st->regressions.load(), 0) << k.name;
    st->~shared_state();
    ::munmap(mem, sizeof(shared_state));
}

INSTANTIATE_TEST_SUITE_P(every_kind, pg_exclusion,
                         ::testing::Values(kind_case{lock_kind::reentrant, "lock", true},
                                           kind_case{lock_kind::write, "write", true},
                                           kind_case{lock_kind::shedlock, "shedlock", false},
                                           kind_case{lock_kind::lease, "lease", true},
                                           kind_case{lock_kind::versioned, "versioned", true},
                                           // one permit (acquire_options::permits = 1)
                                           kind_case{lock_kind::semaphore, "semaphore", true}),
                         [](const testing::TestParamInfo<kind_case>& i) {
                             return std::string(i.param.name);
                         });

} // namespace
} // namespace dlock::test

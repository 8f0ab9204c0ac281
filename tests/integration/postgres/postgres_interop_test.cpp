// ShedLock interop from Java: ShedLock's database-time SQL sent through PgJDBC
// (ShedLockJdbc.java, run with Java's single-file launcher) against dlock's lock_kind::shedlock
// on one server, in both directions. Skipped when java or Debian's PgJDBC jar is missing.
#include "postgres_test_util.hpp"

#include <array>
#include <cstdio>
#include <unistd.h>

namespace dlock::test {
namespace {

constexpr const char* jdbc_jar = "/usr/share/java/postgresql.jar";

class pg_shedlock_java : public pg_suite {
public:
    void SetUp() override {
        pg_suite::SetUp();
        if (IsSkipped()) return;
        if (::access("/usr/bin/java", X_OK) != 0 || ::access(jdbc_jar, R_OK) != 0)
            GTEST_SKIP() << "java or " << jdbc_jar << " (libpostgresql-jdbc-java) missing";
    }

    /// Runs ShedLockJdbc.java; returns the rows it changed ("1" / "0").
    static std::string java(const std::string& args) {
        const std::string jdbc =
            "jdbc:postgresql://127.0.0.1:" + std::to_string(server().port()) + "/postgres";
        const std::string cmd = std::string("/usr/bin/java -cp ") + jdbc_jar + " " +
                                DLOCK_SHEDLOCK_JAVA + " " + args.substr(0, args.find(' ')) + " " +
                                jdbc + " postgres " + pg_server::password() +
                                args.substr(args.find(' ')) + " 2>&1";
        std::string out;
        if (FILE* p = ::popen(cmd.c_str(), "r")) {
            std::array<char, 512> buf{};
            while (std::fgets(buf.data(), static_cast<int>(buf.size()), p))
                out += buf.data();
            ::pclose(p);
        }
        while (!out.empty() && out.back() == '\n')
            out.pop_back();
        return out;
    }
};

acquire_options shed(std::chrono::milliseconds wait) {
    return wait_for(wait, lock_kind::shedlock);
}

TEST_F(pg_shedlock_java, dlock_holds_and_java_is_refused_then_gets_it_after_release) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("interop", shed(0ms), ec);
    ASSERT_TRUE(h) << ec.message();
    EXPECT_EQ(java("lock interop java-node 30"), "0");
    h->release_blocking(ec);
    ASSERT_FALSE(ec);
    EXPECT_EQ(java("lock interop java-node 30"), "1");
    EXPECT_FALSE(b->acquire("interop", shed(0ms), ec));
    EXPECT_FALSE(ec);
    EXPECT_EQ(java("unlock interop java-node"), "1");
    EXPECT_TRUE(b->acquire("interop", shed(0ms), ec)) << ec.message();
}

TEST_F(pg_shedlock_java, java_holds_and_dlock_waits_for_its_expiry) {
    auto b = backend();
    std::error_code ec;
    // The table exists once dlock has used it.
    b->acquire("warm-up", shed(0ms), ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(java("lock expiring java-node 3"), "1");
    EXPECT_FALSE(b->acquire("expiring", shed(0ms), ec));
    auto h = b->acquire("expiring", shed(10s), ec); // polls until lock_until passes
    ASSERT_TRUE(h) << ec.message();
    // The Java node's extend-less unlock no longer matches its locked_by: nothing changes.
    EXPECT_EQ(java("unlock expiring java-node"), "0");
    EXPECT_FALSE(h->lost());
}

} // namespace
} // namespace dlock::test

// TLS as libpq offers it (issue 14): the URL's sslmode / sslrootcert go to libpq unchanged. A
// server with a throwaway self-signed certificate (openssl, made per suite); `sslmode=require`
// and `sslmode=verify-full` with the right root take locks over TLS (pg_stat_ssl shows the
// session encrypted); a wrong root certificate is auth_failed, and `sslmode=require` against a
// server without TLS is configuration_error; both typed, nothing held.
#include "postgres_test_util.hpp"
#include "process.hpp"

#include <filesystem>
#include <pwd.h>
#include <unistd.h>

namespace dlock::test {
namespace {

namespace fs = std::filesystem;

// A self-signed certificate for 127.0.0.1 in `dir`/NAME.crt and NAME.key; false if openssl
// failed.
bool make_cert(const fs::path& dir, const std::string& name) {
    const auto [out, rc] = run_capture(
        {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
         (dir / (name + ".key")).string(), "-out", (dir / (name + ".crt")).string()});
    return rc == 0;
}

class pg_tls : public ::testing::Test {
public:
    static void SetUpTestSuite() {
        if (!postgres_available() || ::access("/usr/bin/openssl", X_OK) != 0) return;
        char tmpl[] = "/tmp/dlock-pgtls-XXXXXX";
        if (!::mkdtemp(tmpl)) return;
        dir_ = new fs::path(tmpl);
        fs::permissions(*dir_,
                        fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
        if (!make_cert(*dir_, "server") || !make_cert(*dir_, "other")) return;
        // The server reads its key as its own user, and only from a file no one else may read.
        if (::geteuid() == 0) {
            const passwd* pw = ::getpwnam("postgres");
            if (!pw) return;
            for (const char* f : {"server.key", "server.crt"})
                if (::chown((*dir_ / f).c_str(), pw->pw_uid, pw->pw_gid) != 0) return;
        }
        fs::permissions(*dir_ / "server.key", fs::perms::owner_read | fs::perms::owner_write);
        server_ = new pg_server({"ssl=on", "ssl_cert_file=" + (*dir_ / "server.crt").string(),
                                 "ssl_key_file=" + (*dir_ / "server.key").string()});
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
        if (dir_) {
            std::error_code ec;
            fs::remove_all(*dir_, ec);
            delete dir_;
            dir_ = nullptr;
        }
    }
    void SetUp() override {
        if (!server_) GTEST_SKIP() << "PostgreSQL 15 binaries or openssl not found";
    }
    static pg_server& server() { return *server_; }
    static std::string root(const char* name) { return (*dir_ / name).string(); }
    static int ssl_sessions() {
        return std::stoi(server_->psql("SELECT count(*) FROM pg_stat_ssl WHERE ssl"));
    }

private:
    static inline pg_server* server_ = nullptr;
    static inline fs::path* dir_ = nullptr;
};

TEST_F(pg_tls, require_and_verify_full_take_locks_over_tls) {
    for (const std::string& params : {std::string("sslmode=require"),
                                      "sslmode=verify-full&sslrootcert=" + root("server.crt")}) {
        std::error_code ec;
        std::string why;
        auto b = detail::make_postgres_backend(server().url(params), ec, &why);
        ASSERT_TRUE(b) << params << ": " << why;
        auto h = b->acquire("tls", wait_for(5s), ec);
        ASSERT_TRUE(h) << params << ": " << ec.message() << " " << b->last_error_detail();
        EXPECT_GE(ssl_sessions(), 1) << params; // psql on the Unix socket is never TLS
        EXPECT_TRUE(h->fencing_token());
        h->release_blocking(ec);
        EXPECT_FALSE(ec) << params;
    }
}

TEST_F(pg_tls, a_wrong_root_certificate_is_auth_failed) {
    std::error_code ec;
    std::string why;
    auto b = detail::make_postgres_backend(
        server().url("sslmode=verify-full&sslrootcert=" + root("other.crt")), ec, &why);
    ASSERT_TRUE(b) << why;
    EXPECT_FALSE(b->acquire("tls", wait_for(2s), ec));
    EXPECT_EQ(ec, errc::auth_failed) << ec.message() << " " << b->last_error_detail();
    EXPECT_NE(b->last_error_detail().find("certificate"), std::string::npos)
        << b->last_error_detail();
    EXPECT_EQ(b->last_error_detail().find(pg_server::password()), std::string::npos);
}

TEST_F(pg_tls, require_against_a_server_without_tls_is_configuration_error) {
    pg_server plain; // ssl off
    std::error_code ec;
    std::string why;
    auto b = detail::make_postgres_backend(plain.url("sslmode=require"), ec, &why);
    ASSERT_TRUE(b) << why;
    EXPECT_FALSE(b->acquire("tls", wait_for(2s), ec));
    EXPECT_EQ(ec, errc::configuration_error) << ec.message() << " " << b->last_error_detail();
}

} // namespace
} // namespace dlock::test

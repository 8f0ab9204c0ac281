// The etcd backend over TLS (etcds://, etcd/rpc.cpp's SslCredentials) against an etcd member
// whose client port speaks only TLS, with certificates made per test by the openssl CLI
// (make_tls(), redis_fixture.hpp): the test CA verifies the server and the lock works; an
// unrelated CA is errc::auth_failed at once (not retried), a plain etcd:// URL never locks; with
// --client-cert-auth a client certificate is needed, and one the CA signed is accepted; a
// certificate file that cannot be read is a configuration error before any connection.
#include "etcd_fixture.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;

bool have_openssl() {
    return ::access("/usr/bin/openssl", X_OK) == 0;
}

class etcd_tls : public ::testing::TestWithParam<bool> {
protected:
    void SetUp() override {
        if (!dlock::test::etcd_available()) GTEST_SKIP() << "etcd or etcdctl not installed";
        if (!have_openssl()) GTEST_SKIP() << "openssl not installed";
        etcd_ = std::make_unique<dlock::test::etcd_cluster>(
            1, dlock::test::etcd_options{.tls = true, .client_cert_auth = GetParam()});
    }
    bool client_auth() const { return GetParam(); }
    /// etcds://...?cacert=CA[&cert=...&key=...] (the client certificate when the server asks).
    std::string url(const std::filesystem::path& ca, bool with_cert) const {
        const auto& t = etcd_->tls();
        std::string q = "?ttl=5&connect_timeout=2000&cacert=" + ca.string();
        if (with_cert) q += "&cert=" + t.server_cert.string() + "&key=" + t.server_key.string();
        return etcd_->url("", q);
    }
    std::error_code try_lock(const std::string& u, std::string* detail = nullptr) {
        dlock::client c(u);
        std::error_code ec;
        auto l = c.acquire("orders", {.wait = 1s}, ec);
        if (detail) *detail = c.last_error_detail();
        if (!ec && !l) return make_error_code(dlock::errc::timeout);
        return ec;
    }

    std::unique_ptr<dlock::test::etcd_cluster> etcd_;
};

TEST_P(etcd_tls, the_test_ca_verifies_the_server_and_the_lock_works) {
    dlock::client c(url(etcd_->tls().ca_cert, client_auth()));
    auto l = c.acquire("orders", {.wait = 2s});
    ASSERT_TRUE(l);
    ASSERT_TRUE(l.token());
    auto [keys, rc] = etcd_->etcdctl({"get", "orders/", "--prefix", "--keys-only"});
    ASSERT_EQ(rc, 0) << keys;
    EXPECT_NE(keys.find("orders/"), std::string::npos) << keys;
    l.release();
}

TEST_P(etcd_tls, an_unrelated_ca_is_refused_with_the_reason) {
    std::string detail;
    EXPECT_EQ(try_lock(url(etcd_->tls().wrong_ca_cert, client_auth()), &detail),
              dlock::errc::auth_failed);
    EXPECT_NE(detail.find("certificate"), std::string::npos) << detail;
}

TEST_P(etcd_tls, a_plain_url_never_locks) {
    // The client port speaks only TLS: a plaintext HTTP/2 preface gets no answer it can use.
    auto plain = etcd_->url("", "?ttl=5&connect_timeout=1000");
    plain.replace(0, std::string("etcds://").size(), "etcd://");
    const auto ec = try_lock(plain);
    EXPECT_TRUE(ec == dlock::errc::unavailable || ec == dlock::errc::protocol_error)
        << ec.message();
}

TEST_P(etcd_tls, the_client_certificate_is_needed_only_when_the_server_asks) {
    std::string detail;
    const auto ec = try_lock(url(etcd_->tls().ca_cert, false), &detail);
    // TLS 1.3: the server checks the client's certificate after the client has finished its
    // handshake and then closes the connection; gRPC reports only "Endpoint read failed", the
    // same as a member that went away, so this is errc::unavailable, not auth_failed.
    if (client_auth())
        EXPECT_EQ(ec, dlock::errc::unavailable) << ec.message() << ": " << detail;
    else
        EXPECT_FALSE(ec) << ec.message();
}

TEST_P(etcd_tls, an_unreadable_certificate_file_is_a_configuration_error) {
    std::string why;
    try {
        dlock::client c(url(etcd_->tls().ca_cert.string() + ".missing", false));
        std::error_code ec;
        (void)c.acquire("orders", {.wait = 1s}, ec);
        EXPECT_EQ(ec, dlock::errc::configuration_error);
        why = c.last_error_detail();
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), dlock::errc::configuration_error);
        why = e.what();
    }
    EXPECT_NE(why.find(".missing"), std::string::npos) << why;
}

INSTANTIATE_TEST_SUITE_P(server_only_and_mutual, etcd_tls, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                             return p.param ? "mutual" : "server_only";
                         });

} // namespace

// The etcd backend against an etcd member with authentication on (etcd/rpc.cpp's
// Auth.Authenticate and token, etcd/url.cpp's user:password@): the right password locks, a wrong
// or missing one is errc::auth_failed, a role limited to a key prefix locks under that prefix
// (the URL's /prefix) and gets errc::permission_denied outside it, a percent-encoded password
// with reserved characters is decoded, and no message carries the password.
#include "etcd_fixture.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace {

using namespace std::chrono_literals;

constexpr const char* root_password = "r00t-pw";

class etcd_auth : public ::testing::Test {
protected:
    void SetUp() override {
        if (!dlock::test::etcd_available()) GTEST_SKIP() << "etcd or etcdctl not installed";
        etcd_ = std::make_unique<dlock::test::etcd_cluster>(1);
        // A role "locks" may read and write keys under "/locks/" only; user "app" has it. The
        // password of "svc" has every character a URL reserves for itself.
        ctl({"user", "add", std::string("root:") + root_password, "--interactive=false"}, false);
        ctl({"auth", "enable"}, false); // etcdctl grants root the root role first
        ctl({"role", "add", "locks"});
        ctl({"role", "grant-permission", "locks", "--prefix=true", "readwrite", "/locks/"});
        ctl({"user", "add", "app:app-pw", "--interactive=false"});
        ctl({"user", "grant-role", "app", "locks"});
        ctl({"user", "add", "svc:p@ss:w/rd?#%", "--interactive=false"});
        ctl({"user", "grant-role", "svc", "root"});
    }
    /// etcdctl, as root once authentication is on.
    std::string ctl(std::vector<std::string> args, bool as_root = true) {
        if (as_root) args.push_back(std::string("--user=root:") + root_password);
        auto [out, status] = etcd_->etcdctl(args);
        EXPECT_EQ(status, 0) << out;
        return out;
    }
    /// etcd://USERINFO@endpoints/prefix?connect_timeout=2000
    std::string url(const std::string& userinfo, const std::string& prefix = {}) const {
        auto u = etcd_->url(prefix, "?ttl=5&connect_timeout=2000");
        if (!userinfo.empty()) u.insert(std::string("etcd://").size(), userinfo + "@");
        return u;
    }
    /// One try (wait 1 s) through a fresh client of `url`; the error code, or {} when held.
    std::error_code try_lock(const std::string& u, const std::string& name,
                             std::string* detail = nullptr) {
        dlock::client c(u);
        std::error_code ec;
        auto l = c.acquire(name, {.wait = 1s}, ec);
        if (detail) *detail = c.last_error_detail();
        if (!ec && !l) return make_error_code(dlock::errc::timeout); // not expected here
        return ec;
    }

    std::unique_ptr<dlock::test::etcd_cluster> etcd_;
};

TEST_F(etcd_auth, the_right_password_locks_and_the_key_is_the_users) {
    dlock::client c(url(std::string("root:") + root_password));
    auto l = c.acquire("orders", {.wait = 2s});
    ASSERT_TRUE(l);
    ASSERT_TRUE(l.token());
    // etcdctl, as root, sees the lock key at the token's create revision.
    const auto keys = ctl({"get", "orders/", "--prefix", "--keys-only"});
    EXPECT_NE(keys.find("orders/"), std::string::npos) << keys;
    l.release();
    EXPECT_EQ(ctl({"get", "orders/", "--prefix", "--keys-only"}), "");
}

TEST_F(etcd_auth, a_wrong_or_missing_password_is_auth_failed_and_never_printed) {
    std::string detail;
    EXPECT_EQ(try_lock(url("root:not-the-password"), "orders", &detail), dlock::errc::auth_failed);
    EXPECT_EQ(detail.find("not-the-password"), std::string::npos) << detail;
    EXPECT_EQ(try_lock(url("nobody:x"), "orders"), dlock::errc::auth_failed);
    EXPECT_EQ(try_lock(url(""), "orders"), dlock::errc::auth_failed); // auth on, no user
    // The message of the throwing form names the server, not the secret.
    dlock::client c(url("root:not-the-password"));
    try {
        (void)c.acquire("orders", {.wait = 1s});
        ADD_FAILURE() << "acquired with a wrong password";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), dlock::errc::auth_failed);
        EXPECT_EQ(std::string(e.what()).find("not-the-password"), std::string::npos) << e.what();
    }
}

TEST_F(etcd_auth, a_role_limited_to_a_prefix_locks_there_and_is_denied_elsewhere) {
    // Under the URL prefix /locks every key is "/locks/<name>/...": inside the role's range.
    dlock::client inside(url("app:app-pw", "/locks"));
    auto l = inside.acquire("orders", {.wait = 2s});
    ASSERT_TRUE(l);
    EXPECT_NE(ctl({"get", "/locks/orders/", "--prefix", "--keys-only"}), "");
    // Without the prefix the key "orders/..." is outside it.
    EXPECT_EQ(try_lock(url("app:app-pw"), "orders"), dlock::errc::permission_denied);
    // Queries need read permission on the range they read, too.
    dlock::client outside(url("app:app-pw"));
    std::error_code ec;
    (void)outside.inspect("orders", dlock::lock_kind::reentrant, ec);
    EXPECT_EQ(ec, dlock::errc::permission_denied);
    l.release();
}

TEST_F(etcd_auth, a_percent_encoded_password_is_decoded) {
    // "p@ss:w/rd?#%" with every reserved character encoded.
    dlock::client c(url("svc:p%40ss%3Aw%2Frd%3F%23%25"));
    auto l = c.acquire("orders", {.wait = 2s});
    EXPECT_TRUE(l);
    // The same password, not encoded, is a malformed URL (its '@', '/' and '?' end the parts).
    EXPECT_THROW(dlock::client(url("svc:p@ss:w/rd?#%")), dlock::error);
}

} // namespace

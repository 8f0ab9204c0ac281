// The etcd backend's sans-I/O parts: the URL (etcd/url.hpp) and etcd's Mutex layout
// (etcd/layout.hpp): key ranges, own keys, prefix range ends, names refused, keys read back;
// the oldest server version spoken to (etcd/version.hpp).
#include "etcd/layout.hpp"
#include "etcd/url.hpp"
#include "etcd/version.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

using namespace dlock;
using namespace dlock::detail::etcd;

TEST(etcd_url, hosts_prefix_and_defaults) {
    std::error_code ec;
    std::string why;
    const auto u = parse_etcd_url("etcd://a:1,b,[::1]:3/locks/x/", ec, &why);
    ASSERT_FALSE(ec) << why;
    ASSERT_EQ(u.endpoints.size(), 3U);
    EXPECT_EQ(u.endpoints[1].name, "b");
    EXPECT_EQ(u.endpoints[1].port, 2379);
    EXPECT_EQ(u.endpoints[2].name, "[::1]");
    EXPECT_EQ(u.prefix, "/locks/x");
    EXPECT_FALSE(u.tls);
    EXPECT_EQ(u.ttl, std::chrono::seconds(60));
    EXPECT_EQ(u.display(), "etcd://a:1,b:2379,[::1]:3/locks/x");
}

TEST(etcd_url, credentials_tls_and_parameters) {
    std::error_code ec;
    std::string why;
    const auto u = parse_etcd_url(
        "etcds://root:p%40ss@h:1?ttl=5&connect_timeout=700&cacert=/ca.pem&cert=/c&key=/k", ec,
        &why);
    ASSERT_FALSE(ec) << why;
    EXPECT_TRUE(u.tls);
    EXPECT_EQ(u.user, "root");
    EXPECT_EQ(u.password, "p@ss");
    EXPECT_EQ(u.ttl, std::chrono::seconds(5));
    EXPECT_EQ(u.connect_timeout, std::chrono::milliseconds(700));
    EXPECT_EQ(u.cacert, "/ca.pem");
    EXPECT_EQ(u.display().find("p@ss"), std::string::npos) << "never the password";
}

TEST(etcd_url, malformed_urls_are_configuration_errors) {
    for (const char* bad :
         {"etcd://", "etcd://h:70000", "etcd://h:1?ttl=0", "etcd://h:1?nope=1", "etcd://h:1?ttl",
          "etcd://h:1?cacert=/x", "etcds://h:1?cert=/c", "etcd://user@h:1", "redis://h:1"}) {
        std::error_code ec;
        std::string why;
        (void)parse_etcd_url(bad, ec, &why);
        EXPECT_EQ(ec, errc::configuration_error) << bad;
        EXPECT_FALSE(why.empty()) << bad;
    }
}

TEST(etcd_layout, keys_as_etcdctl_lock_makes_them) {
    EXPECT_EQ(lock_range("", "orders"), "orders/");
    EXPECT_EQ(lock_range("/p", "orders"), "/p/orders/");
    EXPECT_EQ(own_key("orders/", 0x694d7a3c2b1e8f05), "orders/694d7a3c2b1e8f05");
    EXPECT_EQ(lease_hex(0x1a), "1a");
    EXPECT_EQ(lease_hex(0), "0");
}

TEST(etcd_layout, range_end_is_the_prefix_incremented) {
    EXPECT_EQ(range_end("orders/"), "orders0");
    EXPECT_EQ(range_end(std::string("a\xff", 2)), "b");
    EXPECT_EQ(range_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
    EXPECT_EQ(range_end(""), std::string(1, '\0'));
}

TEST(etcd_layout, names_are_data) {
    std::string why;
    EXPECT_TRUE(valid_name("orders-1.x", &why));
    EXPECT_TRUE(valid_name("with space", &why));
    for (const auto& bad : {std::string(), std::string("a/b"), std::string("/a"),
                            std::string("a\nb"), std::string(1, '\0'), std::string(4097, 'x')}) {
        EXPECT_FALSE(valid_name(bad, &why)) << bad;
        EXPECT_FALSE(why.empty());
    }
}

TEST(etcd_layout, keys_map_back_to_their_locks) {
    EXPECT_EQ(lock_of_key("", "orders/694d7a3c2b1e8f05"), "orders");
    EXPECT_EQ(lock_of_key("/p", "/p/orders/1a"), "orders");
    EXPECT_FALSE(lock_of_key("/p", "/q/orders/1a"));
    EXPECT_FALSE(lock_of_key("/p", "/porders/1a"));
    EXPECT_FALSE(lock_of_key("", "orders"));     // no lease part
    EXPECT_FALSE(lock_of_key("", "orders/xyz")); // not hex
    EXPECT_FALSE(lock_of_key("", "orders/01a")); // leading zero: not what %x prints
    EXPECT_FALSE(lock_of_key("", "a/b/1a"));     // a name with '/': not ours
    EXPECT_FALSE(lock_of_key("", "orders/1A"));  // upper case: not what %x prints
    EXPECT_EQ(lock_of_key("", "orders/read/1732600000123456789"), "orders");
    EXPECT_EQ(lock_of_key("/p", "/p/orders/write/17"), "orders");
    EXPECT_FALSE(lock_of_key("", "orders/read/"));    // no time
    EXPECT_FALSE(lock_of_key("", "orders/read/1a"));  // not decimal
    EXPECT_FALSE(lock_of_key("", "orders/other/17")); // neither side
}

TEST(etcd_layout, rw_and_semaphore_keys) {
    EXPECT_EQ(rw_key("orders/", lock_kind::read, 1732600000123456789),
              "orders/read/1732600000123456789");
    EXPECT_EQ(rw_key("/p/orders/", lock_kind::write, 17), "/p/orders/write/17");
    // A reader waits behind older writers only; a writer behind every older key.
    EXPECT_EQ(rw_blockers("orders/", lock_kind::read), "orders/write");
    EXPECT_EQ(rw_blockers("orders/", lock_kind::write), "orders/");
    EXPECT_EQ(kind_of_key("orders/", "orders/read/17"), lock_kind::read);
    EXPECT_EQ(kind_of_key("orders/", "orders/write/17"), lock_kind::write);
    EXPECT_EQ(kind_of_key("orders/", "orders/1a"), lock_kind::reentrant);
    EXPECT_FALSE(kind_of_key("orders/", "orders/read/x"));
    EXPECT_EQ(kind_of_key("orders/", "orders/semaphore/17"), lock_kind::semaphore);
    EXPECT_EQ(semaphore_key("/p/pool/", 17), "/p/pool/semaphore/17");
    EXPECT_EQ(semaphore_range("pool/"), "pool/semaphore/");
    EXPECT_EQ(lock_of_key("", "pool/semaphore/17"), "pool");
    EXPECT_FALSE(kind_of_key("orders/", "other/1a"));
}

TEST(etcd_layout, the_offered_kinds) {
    EXPECT_TRUE(offered(lock_kind::reentrant));
    EXPECT_TRUE(offered(lock_kind::fair));
    EXPECT_TRUE(offered(lock_kind::read));
    EXPECT_TRUE(offered(lock_kind::write));
    EXPECT_FALSE(offered(lock_kind::simple));
    EXPECT_TRUE(offered(lock_kind::semaphore));
    EXPECT_FALSE(offered(lock_kind::shedlock));
}

TEST(etcd_version, members_before_3_4_are_refused) {
    for (const char* v : {"3.4.0", "3.4.23", "3.5.9", "3.6.0-alpha.0", "4.0.0", "3.10.1"})
        EXPECT_TRUE(version_supported(v)) << v;
    for (const char* v : {"3.3.27", "3.0.0", "2.3.8", "3.2"})
        EXPECT_FALSE(version_supported(v)) << v;
    // Not a version: judged by what the server answers, not refused here.
    for (const char* v : {"", "x", "3", "3.x"})
        EXPECT_TRUE(version_supported(v)) << v;
}

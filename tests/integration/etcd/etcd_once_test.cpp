// Run once per period on etcd (src/etcd/once.cpp; docs/design/once.md, "etcd") against a real
// member: the slot is the key "dlock-once:<name>" (under the URL's prefix) holding the claim's
// token, bound to a lease of the period less 1 s, with the key's create revision as the slot's
// index; the key lies in no lock's range (`etcdctl lock NAME` is not held up by it, `list`
// does not show it); a release deletes only its own claim's key. (What every backend promises
// is in the conformance suite; the race of three `dlock exec --once-per` processes, one with a
// skewed clock, is in tests/cli/cli_etcd_test.cpp.)
#include "etcd_test_util.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace {

using namespace std::chrono_literals;

class etcd_once : public dlock::test::etcd_member_test {};

TEST_F(etcd_once, a_slot_is_a_key_with_the_token_on_a_lease_of_the_period_less_a_second) {
    auto c = connect();
    auto slot = dlock::claim_period(*c, "nightly", 1h);
    ASSERT_TRUE(slot);
    EXPECT_EQ(slot->left, 3599s);
    auto [text, rc] = etcd_->etcdctl({"get", "dlock-once:nightly"});
    ASSERT_EQ(rc, 0) << text;
    EXPECT_EQ(text, "dlock-once:nightly\n" + slot->token);
    auto [json, rc2] = etcd_->etcdctl({"get", "dlock-once:nightly", "-w", "json"});
    ASSERT_EQ(rc2, 0) << json;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(json, m, std::regex("\"create_revision\":([0-9]+)"))) << json;
    EXPECT_EQ(slot->index, std::stoll(m[1].str()));
    ASSERT_TRUE(std::regex_search(json, m, std::regex("\"lease\":([0-9]+)"))) << json;
    std::ostringstream hex;
    hex << std::hex << std::stoll(m[1].str());
    auto [ttl, rc3] = etcd_->etcdctl({"lease", "timetolive", hex.str()});
    ASSERT_EQ(rc3, 0) << ttl;
    EXPECT_NE(ttl.find("granted with TTL(3599s)"), std::string::npos) << ttl;
}

TEST_F(etcd_once, the_key_is_in_no_locks_range) {
    auto c = connect();
    ASSERT_TRUE(dlock::claim_period(*c, "report", 1h));
    // etcdctl's Mutex on the same name takes its lock at once, and so does dlock's.
    auto [out, rc] = etcd_->etcdctl({"lock", "report", "/bin/true"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_TRUE(c->acquire("report", {.wait = 2s}));
    std::error_code ec;
    for (const auto& st : c->list("", ec))
        EXPECT_EQ(st.name.find("dlock-once"), std::string::npos) << st.name;
    EXPECT_FALSE(ec) << ec.message();
}

TEST_F(etcd_once, a_prefixed_url_puts_the_key_under_its_prefix) {
    dlock::client c(etcd_->url("/app", "?ttl=5&connect_timeout=2000"));
    ASSERT_TRUE(dlock::claim_period(c, "nightly", 10s));
    auto [text, rc] = etcd_->etcdctl({"get", "--prefix", "/app/dlock-once:"});
    ASSERT_EQ(rc, 0) << text;
    EXPECT_EQ(text.rfind("/app/dlock-once:nightly\n", 0), 0u) << text;
}

TEST_F(etcd_once, a_release_deletes_only_its_own_claim) {
    auto c = connect();
    auto first = dlock::claim_period(*c, "job", 1h);
    ASSERT_TRUE(first);
    auto stale = *first;
    stale.token = "not-this-claim";
    EXPECT_FALSE(dlock::release_period(*c, "job", stale));
    EXPECT_FALSE(dlock::claim_period(*c, "job", 1h)) << "a wrong token freed the slot";
    EXPECT_TRUE(dlock::release_period(*c, "job", *first));
    auto [text, rc] = etcd_->etcdctl({"get", "dlock-once:job"});
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(text, "");
}

} // namespace

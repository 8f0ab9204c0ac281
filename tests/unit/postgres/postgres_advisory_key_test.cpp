// Advisory key conventions (postgres/advisory_key.hpp) against the test vectors of
// research/zookeeper-sql.md §2a (name `orders:12345`, computed there with Python, Java and
// PostgreSQL 15), and DistributedLock's ASCII and hex rules (PostgresAdvisoryLockKey.cs).
#include "postgres/advisory_key.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

namespace pg = dlock::detail::pg;

namespace {

pg::advisory_key key(std::string_view name, pg::key_scheme s) {
    std::error_code ec;
    auto k = pg::make_key(name, s, ec);
    EXPECT_FALSE(ec) << name;
    return k;
}

TEST(pg_key, sha256_le64_matches_django_pglock) {
    const auto k = key("orders:12345", pg::key_scheme::sha256_le64);
    EXPECT_FALSE(k.pair);
    EXPECT_EQ(k.value, 4758452604826750144LL);
    EXPECT_EQ(pg::le64_of_sha256(""), 1449310910991872227LL);
    EXPECT_EQ(pg::le64_of_sha256("\xc3\xa9t\xc3\xa9"), -3822101346471116355LL); // "été"
}

TEST(pg_key, sha1_le64_matches_distributed_lock_hashing) {
    const auto k = key("orders:12345", pg::key_scheme::sha1_le64);
    EXPECT_FALSE(k.pair);
    EXPECT_EQ(k.value, -4126917098020774521LL);
    // Not ASCII: hashed even when short.
    EXPECT_EQ(key("\xc3\xa9t\xc3\xa9", pg::key_scheme::sha1_le64).value, 304323862446461028LL);
}

TEST(pg_key, sha1_le64_packs_short_ascii_names_into_the_pair_form) {
    auto k = key("a", pg::key_scheme::sha1_le64);
    EXPECT_TRUE(k.pair);
    EXPECT_EQ(static_cast<std::uint64_t>(k.value), 0xc2ffffffffffffffULL);
    EXPECT_EQ(k.first(), -1023410177);
    EXPECT_EQ(k.second(), -1);
    EXPECT_EQ(static_cast<std::uint64_t>(key("lock", pg::key_scheme::sha1_le64).value),
              0xd9bf1eb7ffffffffULL);
    EXPECT_EQ(static_cast<std::uint64_t>(key("abcdefghi", pg::key_scheme::sha1_le64).value),
              0xc38b1e4cb9b3e8d2ULL);
    // Ten ASCII characters are too many: hashed, bigint form.
    EXPECT_FALSE(key("abcdefghij", pg::key_scheme::sha1_le64).pair);
}

TEST(pg_key, sha1_le64_parses_hex_names) {
    auto k = key("0123456789abcdef", pg::key_scheme::sha1_le64);
    EXPECT_FALSE(k.pair);
    EXPECT_EQ(k.value, 0x0123456789abcdefLL);
    k = key("FFFFFFFF,00000002", pg::key_scheme::sha1_le64);
    EXPECT_TRUE(k.pair);
    EXPECT_EQ(k.first(), -1);
    EXPECT_EQ(k.second(), 2);
    // Sixteen characters that are not all hex: hashed.
    k = key("0123456789abcdeg", pg::key_scheme::sha1_le64);
    EXPECT_FALSE(k.pair);
    EXPECT_EQ(k.value, pg::le64_of_sha1("0123456789abcdeg"));
}

TEST(pg_key, crc32_pair_matches_rails_with_advisory_lock) {
    const auto k = key("orders:12345", pg::key_scheme::crc32_pair);
    EXPECT_TRUE(k.pair);
    EXPECT_EQ(k.first(), 1382419284);
    EXPECT_EQ(k.second(), 0);
    EXPECT_EQ(pg::crc32("orders:12345"), 3529902932U);
    EXPECT_EQ(pg::crc32("a"), 3904355907U);
}

TEST(pg_key, crc32_i32_matches_django_pglocks) {
    const auto k = key("orders:12345", pg::key_scheme::crc32_i32);
    EXPECT_FALSE(k.pair);
    EXPECT_EQ(k.value, -765064364);
}

TEST(pg_key, hashtext_is_left_to_the_server) {
    const auto k = key("orders:12345", pg::key_scheme::hashtext);
    EXPECT_TRUE(k.server_hash);
    EXPECT_EQ(pg::key_call("pg_advisory_lock", k), "pg_advisory_lock(hashtext($1)::bigint)");
    EXPECT_EQ(pg::key_param1(k), "orders:12345");
    EXPECT_FALSE(pg::key_param2(k));
}

TEST(pg_key, raw_numbers_are_taken_as_is) {
    auto k = key("-42", pg::key_scheme::int64);
    EXPECT_EQ(k.value, -42);
    EXPECT_EQ(pg::key_call("pg_advisory_lock", k), "pg_advisory_lock($1::bigint)");
    EXPECT_EQ(pg::key_param1(k), "-42");
    k = key("3333,-4444", pg::key_scheme::int32_pair);
    EXPECT_TRUE(k.pair);
    EXPECT_EQ(pg::key_call("pg_try_advisory_lock", k), "pg_try_advisory_lock($1::int4, $2::int4)");
    EXPECT_EQ(pg::key_param1(k), "3333");
    EXPECT_EQ(pg::key_param2(k), "-4444");
}

TEST(pg_key, pg_locks_coordinates_follow_the_server) {
    // pg_advisory_lock(3333 * 2^32 + 4444) shows classid 3333, objid 4444, objsubid 1.
    pg::advisory_key k;
    k.value = 3333LL * (1LL << 32) + 4444;
    EXPECT_EQ(k.classid(), 3333U);
    EXPECT_EQ(k.objid(), 4444U);
    EXPECT_EQ(k.objsubid(), 1);
    k = key("1111,2222", pg::key_scheme::int32_pair);
    EXPECT_EQ(k.classid(), 1111U);
    EXPECT_EQ(k.objid(), 2222U);
    EXPECT_EQ(k.objsubid(), 2);
    EXPECT_NE(key("orders:12345", pg::key_scheme::sha256_le64).describe().find("objsubid 1"),
              std::string::npos);
}

TEST(pg_key, bad_names_are_invalid_arguments) {
    std::error_code ec;
    for (auto s : {pg::key_scheme::sha256_le64, pg::key_scheme::int64}) {
        pg::make_key("", s, ec);
        EXPECT_EQ(ec, dlock::errc::invalid_argument);
        pg::make_key(std::string(4097, 'x'), s, ec);
        EXPECT_EQ(ec, dlock::errc::invalid_argument);
    }
    pg::make_key("12a", pg::key_scheme::int64, ec);
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    pg::make_key("99999999999999999999", pg::key_scheme::int64, ec);
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    pg::make_key("1", pg::key_scheme::int32_pair, ec);
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    pg::make_key("1,3000000000", pg::key_scheme::int32_pair, ec);
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
}

TEST(pg_key, preset_names_round_trip) {
    for (auto s : {pg::key_scheme::sha256_le64, pg::key_scheme::sha1_le64,
                   pg::key_scheme::crc32_pair, pg::key_scheme::crc32_i32, pg::key_scheme::hashtext,
                   pg::key_scheme::int64, pg::key_scheme::int32_pair})
        EXPECT_EQ(pg::key_scheme_from(pg::to_string(s)), s);
    EXPECT_FALSE(pg::key_scheme_from("md5"));
}

} // namespace

// pg::advisory_key: how a lock name becomes a PostgreSQL advisory lock key, sans-I/O.
//
// PostgreSQL has two advisory key spaces that never conflict with each other: one bigint
// (pg_locks objsubid = 1, classid = high 32 bits, objid = low 32 bits) and a pair of int4
// (objsubid = 2, classid = first, objid = second). A convention therefore fixes both the hash
// and the form. The presets match the libraries other services use on the same database
// (research/zookeeper-sql.md §2a, test vectors for `orders:12345` in
// tests/unit/postgres/postgres_advisory_key_test.cpp):
//
//   sha256-le64 (default)  bigint = first 8 bytes of SHA-256(UTF-8 name), little-endian, signed
//                          (django-pglock's _cast_lock_id)              4758452604826750144
//   sha1-le64              .NET DistributedLock's PostgresAdvisoryLockKey(name, allowHashing):
//                          <= 9 ASCII characters are packed 7 bits each into a pair key; 16
//                          hex digits are a bigint, `8hex,8hex` a pair; anything else the first
//                          8 bytes of SHA-1, little-endian, signed          -4126917098020774521
//   crc32-pair             Rails with_advisory_lock: pair (crc32 & 0x7fffffff, 0)  (1382419284,0)
//   crc32-i32              django-pglocks: bigint = crc32 as a signed int32       -765064364
//   hashtext               the server's hashtext(name) (int4, as a bigint): Laravel, plain SQL
//                                                                                  1099366921
//   int64                  the name is a decimal bigint, taken as is
//   int32-pair             the name is `a,b`, two decimal int4, the pair form
//
// A name hashed by two different conventions names two different locks: they do not exclude
// each other. `dlock status` prints the bigint and the (classid, objid, objsubid) a name maps
// to, so a mismatch shows at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail::pg {

enum class key_scheme {
    sha256_le64,
    sha1_le64,
    crc32_pair,
    crc32_i32,
    hashtext,
    int64,
    int32_pair
};

/// The preset's name as URLs write it ("sha256-le64", ...).
std::string_view to_string(key_scheme s) noexcept;
/// The preset named `s`, or nullopt.
std::optional<key_scheme> key_scheme_from(std::string_view s) noexcept;

/// One advisory key. For `server_hash` (hashtext) the key is computed by the server from
/// `text`; `value` is then unknown here.
struct advisory_key {
    bool pair = false;        ///< the (int4, int4) form, else the bigint form
    bool server_hash = false; ///< hashtext(text) on the server (bigint form)
    std::int64_t value = 0;   ///< bigint form: the key; pair form: (first << 32) | (uint32)second
    std::string text{};       ///< server_hash: the name to hash

    std::int32_t first() const noexcept { return static_cast<std::int32_t>(value >> 32); }
    std::int32_t second() const noexcept {
        return static_cast<std::int32_t>(static_cast<std::uint32_t>(value & 0xffffffff));
    }
    /// pg_locks coordinates (classid, objid as unsigned oids; objsubid 1 or 2).
    std::uint32_t classid() const noexcept {
        return static_cast<std::uint32_t>(static_cast<std::uint64_t>(value) >> 32);
    }
    std::uint32_t objid() const noexcept {
        return static_cast<std::uint32_t>(static_cast<std::uint64_t>(value) & 0xffffffff);
    }
    int objsubid() const noexcept { return pair ? 2 : 1; }
    /// "bigint 4758452604826750144 (classid 1107917853, objid 3436140224, objsubid 1)".
    std::string describe() const;
};

/// The key of lock `name` under `scheme`. Errors: errc::invalid_argument for an empty name,
/// a name over 4096 bytes, or a name the scheme cannot encode (int64 / int32-pair not numbers).
advisory_key make_key(std::string_view name, key_scheme scheme, std::error_code& ec);

/// The SQL of one advisory call on `k` as parameters $1 (and $2) carry it: the function
/// `fn` (pg_advisory_lock, pg_try_advisory_lock_shared, pg_advisory_unlock, ...) applied to
/// the key, e.g. "pg_advisory_lock($1::bigint)", "pg_advisory_lock($1::int4, $2::int4)",
/// "pg_advisory_lock(hashtext($1)::bigint)".
std::string key_call(std::string_view fn, const advisory_key& k);
/// The parameters key_call() refers to (decimal text, or the name for hashtext).
std::string key_param1(const advisory_key& k);
std::optional<std::string> key_param2(const advisory_key& k);

/// Hash primitives, exposed for the unit tests.
std::uint32_t crc32(std::string_view data) noexcept;
std::int64_t le64_of_sha256(std::string_view data);
std::int64_t le64_of_sha1(std::string_view data);

} // namespace dlock::detail::pg

// Bad input on the PostgreSQL backend gets a typed error and a message without the password:
// an unreachable server, a wrong password, a role that may not create the fencing sequence,
// names a key convention cannot encode, and kinds the backend does not offer.
#include "postgres_test_util.hpp"

namespace dlock::test {
namespace {

class pg_errors : public pg_suite {};

TEST_F(pg_errors, unreachable_server_is_unavailable) {
    const auto port = free_port();
    auto b = backend_at("postgresql://postgres:pw@127.0.0.1:" + std::to_string(port) +
                        "/postgres?dlock_connect_timeout=2000");
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(b->acquire("x", wait_for(0ms), ec));
    EXPECT_EQ(ec, errc::unavailable);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
    const auto why = b->last_error_detail();
    EXPECT_NE(why.find("127.0.0.1"), std::string::npos) << why;
    EXPECT_EQ(why.find(":pw@"), std::string::npos) << why;
}

TEST_F(pg_errors, wrong_password_is_auth_failed) {
    auto b = backend_at(server().url_as("postgres", "not-the-password"));
    std::error_code ec;
    EXPECT_FALSE(b->acquire("x", wait_for(1s), ec));
    EXPECT_EQ(ec, errc::auth_failed);
    const auto why = b->last_error_detail();
    EXPECT_NE(why.find("password authentication failed"), std::string::npos) << why;
    EXPECT_EQ(why.find("not-the-password"), std::string::npos) << why;
}

TEST_F(pg_errors, missing_sequence_and_no_right_to_create_it_is_permission_denied) {
    auto b = backend_at(server().url_as("limited", pg_server::limited_password()));
    std::error_code ec;
    EXPECT_FALSE(b->acquire("x", wait_for(1s), ec));
    EXPECT_EQ(ec, errc::permission_denied);
    EXPECT_NE(b->last_error_detail().find("dlock_fence"), std::string::npos)
        << b->last_error_detail();
    EXPECT_EQ(granted(), 0); // nothing was left held
    // Without fencing the same role locks fine.
    auto plain =
        backend_at(server().url_as("limited", pg_server::limited_password(), "dlock_fence=off"));
    auto h = plain->acquire("x", wait_for(1s), ec);
    ASSERT_TRUE(h) << ec.message();
    EXPECT_FALSE(h->fencing_token());
    // Once the sequence exists (made by its owner) and the role may use it, fencing works.
    server().psql("CREATE SEQUENCE dlock_fence; GRANT USAGE ON SEQUENCE dlock_fence TO limited");
    auto fenced = b->acquire("y", wait_for(1s), ec);
    ASSERT_TRUE(fenced) << ec.message();
    EXPECT_TRUE(fenced->fencing_token());
}

// The row kinds need their table: a role that finds it missing and may not create it gets
// permission_denied naming the table, and nothing is left behind; once the owner made the table
// and granted its use, the same role locks.
TEST_F(pg_errors, missing_lease_table_and_no_right_to_create_it_is_permission_denied) {
    struct row_kind {
        lock_kind kind;
        const char* table;
    };
    const row_kind kinds[] = {{lock_kind::shedlock, "shedlock"},
                              {lock_kind::lease, "dlock_lease"},
                              {lock_kind::versioned, "locks"}};
    auto b =
        backend_at(server().url_as("limited", pg_server::limited_password(), "dlock_fence=off"));
    for (const auto& k : kinds) {
        std::error_code ec;
        EXPECT_FALSE(b->acquire("row", wait_for(1s, k.kind), ec)) << k.table;
        EXPECT_EQ(ec, errc::permission_denied) << k.table << ": " << ec.message();
        EXPECT_NE(b->last_error_detail().find(k.table), std::string::npos)
            << b->last_error_detail();
        EXPECT_EQ(server().psql(std::string("SELECT count(*) FROM pg_tables WHERE tablename = '") +
                                k.table + "'"),
                  "0");
    }
    // The owner creates the tables (by taking each kind once) and grants their use.
    auto owner = backend();
    for (const auto& k : kinds) {
        std::error_code ec;
        auto h = owner->acquire("setup", wait_for(1s, k.kind), ec);
        ASSERT_TRUE(h) << k.table << ": " << ec.message() << " " << owner->last_error_detail();
        h->release_blocking(ec);
    }
    server().psql("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO limited;"
                  "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO limited");
    for (const auto& k : kinds) {
        std::error_code ec;
        auto h = b->acquire("row", wait_for(1s, k.kind), ec);
        EXPECT_TRUE(h) << k.table << ": " << ec.message() << " " << b->last_error_detail();
        if (h) h->release_blocking(ec);
    }
}

TEST_F(pg_errors, force_unlock_without_the_right_is_permission_denied) {
    auto owner = backend();
    std::error_code ec;
    auto h = owner->acquire("guarded", wait_for(1s), ec);
    ASSERT_TRUE(h);
    auto weak =
        backend_at(server().url_as("limited", pg_server::limited_password(), "dlock_fence=off"));
    EXPECT_FALSE(weak->force_unlock("guarded", lock_kind::reentrant, ec));
    EXPECT_EQ(ec, errc::permission_denied);
    EXPECT_FALSE(h->lost());
}

TEST_F(pg_errors, names_and_kinds_the_backend_cannot_take_are_typed_errors) {
    std::error_code ec;
    auto b = backend("dlock_key=int64");
    EXPECT_FALSE(b->acquire("not-a-number", wait_for(0ms), ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(b->acquire("", wait_for(0ms), ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    auto o = wait_for(0ms);
    o.lease = 0ms;
    EXPECT_FALSE(b->acquire("1", o, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    std::string why;
    EXPECT_FALSE(detail::make_postgres_backend(server().url("dlock_key=md5"), ec, &why));
    EXPECT_EQ(ec, errc::configuration_error);
    EXPECT_EQ(why.find(pg_server::password()), std::string::npos);
}

} // namespace
} // namespace dlock::test

// libpq on demand (postgres/libpq.hpp): no process loads it before its first postgresql:// URL,
// and a libpq that cannot be loaded is a sentence, not a crash. No server.
#include "postgres/libpq.hpp"
#include "postgres/settings.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace pg = dlock::detail::pg;

namespace {

bool libpq_mapped() {
    std::ifstream maps("/proc/self/maps");
    std::stringstream all;
    all << maps.rdbuf();
    return all.str().find("/libpq.so") != std::string::npos;
}

// First in the file: when the whole binary runs in one process, nothing before it parsed a URL.
TEST(pg_libpq, a_process_loads_libpq_at_its_first_postgresql_url_and_not_before) {
    ASSERT_FALSE(libpq_mapped()) << "libdlock linked or loaded libpq before any postgresql:// URL";
    std::error_code ec;
    std::string why;
    const auto s = pg::parse_settings("postgresql://alice@127.0.0.1:5432/app", ec, &why);
    ASSERT_FALSE(ec) << why;
    EXPECT_TRUE(libpq_mapped());
    ASSERT_NE(pg::load_libpq(), nullptr);
    EXPECT_EQ(pg::load_libpq(), &pg::pq()); // one table for the process
    // The loaded functions are libpq's: its own parser, called through the table, agrees.
    char* err = nullptr;
    PQconninfoOption* opts = pg::pq().conninfo_parse("host=h port=1 dbname=d", &err);
    ASSERT_NE(opts, nullptr);
    std::string host;
    for (auto* o = opts; o->keyword; ++o)
        if (std::string_view(o->keyword) == "host" && o->val) host = o->val;
    pg::pq().conninfo_free(opts);
    EXPECT_EQ(host, "h");
}

TEST(pg_libpq, a_library_that_is_not_there_is_named_with_its_debian_package) {
    pg::libpq_api api;
    std::string why;
    EXPECT_FALSE(pg::load_libpq_from("libdlock-test-no-such-library.so.5", api, why));
    EXPECT_NE(why.find("cannot load libdlock-test-no-such-library.so.5"), std::string::npos) << why;
    EXPECT_NE(why.find("libpq5"), std::string::npos) << why;
    EXPECT_EQ(api.conninfo_parse, nullptr); // nothing filled
}

TEST(pg_libpq, a_library_without_libpqs_functions_is_refused_naming_the_first_missing_one) {
    pg::libpq_api api;
    std::string why;
    EXPECT_FALSE(pg::load_libpq_from("libc.so.6", api, why));
    EXPECT_NE(why.find("libc.so.6 has no PQconninfoParse"), std::string::npos) << why;
    EXPECT_EQ(api.finish, nullptr);
}

TEST(pg_libpq, the_real_library_fills_every_function) {
    pg::libpq_api api;
    std::string why;
    ASSERT_TRUE(pg::load_libpq_from(pg::libpq_soname, api, why)) << why;
    EXPECT_NE(api.conninfo_parse, nullptr);
    EXPECT_NE(api.enter_pipeline_mode, nullptr);
    EXPECT_NE(api.getlength, nullptr); // the last one resolved
}

} // namespace

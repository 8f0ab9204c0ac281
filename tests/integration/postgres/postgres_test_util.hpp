// Helpers of the PostgreSQL backend tests: one throwaway server per test suite (one process
// per test under ctest), backends made from its URL, and pg_locks read through psql.
#pragma once

#include "backends.hpp"
#include "critical_section_checker.hpp"
#include "pg_fixture.hpp"
#include "postgres/backend.hpp"
#include "redis_fixture.hpp" // eventually()

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

namespace dlock::test {

using namespace std::chrono_literals;

class pg_suite : public ::testing::Test {
public:
    static void SetUpTestSuite() {
        if (postgres_available()) server_ = new pg_server();
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        if (!server_) GTEST_SKIP() << "PostgreSQL 15 server binaries not found";
    }

    static pg_server& server() { return *server_; }

    /// A backend on the suite's server (`params` appended to the URL's query).
    static std::shared_ptr<detail::lock_backend> backend(std::string_view params = {}) {
        return backend_at(server_->url(params));
    }
    static std::shared_ptr<detail::lock_backend> backend_at(const std::string& url) {
        std::error_code ec;
        std::string why;
        auto b = detail::make_postgres_backend(url, ec, &why);
        EXPECT_FALSE(ec) << why;
        return b;
    }

    /// Advisory locks granted / waiting in pg_locks now (all keys).
    static int granted() {
        return std::stoi(
            server_->psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"));
    }
    static int waiting() {
        return std::stoi(server_->psql(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"));
    }

private:
    static inline pg_server* server_ = nullptr;
};

inline acquire_options wait_for(std::chrono::milliseconds w, lock_kind k = lock_kind::reentrant) {
    acquire_options o;
    o.wait = w;
    o.kind = k;
    return o;
}

} // namespace dlock::test

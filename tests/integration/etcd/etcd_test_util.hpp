// What the etcd backend's integration tests share: a fixture with one private etcd member and
// clients on it with a 5 s lease (renewed every 1.7 s) and a 2 s connect bound; and one that also
// runs etcdctl as a child (the interop tests), killed at the test's end.
#pragma once

#include "etcd_fixture.hpp"
#include "process.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace dlock::test {

class etcd_member_test : public ::testing::Test {
protected:
    void SetUp() override {
        if (!etcd_available()) GTEST_SKIP() << "etcd or etcdctl not installed";
        etcd_ = std::make_unique<etcd_cluster>(1);
    }
    std::unique_ptr<dlock::client> connect() const {
        return std::make_unique<dlock::client>(etcd_->url("", "?ttl=5&connect_timeout=2000"));
    }

    std::unique_ptr<etcd_cluster> etcd_;
};

/// The whole of a file (a child's log).
inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// etcd_member_test plus etcdctl children (`etcdctl lock`, `etcdctl elect`), SIGKILLed and
/// reaped when the test ends unless the test ended them.
class etcdctl_test : public etcd_member_test {
protected:
    void TearDown() override {
        for (const auto pid : children_) {
            ::kill(pid, SIGKILL);
            reap_child(pid, std::chrono::seconds(5));
        }
    }
    /// `etcdctl <args...>` as a child with its output in `log`.
    pid_t etcdctl_child(const std::vector<std::string>& args, const std::filesystem::path& log) {
        const auto pid =
            spawn_child(etcd_->etcdctl_argv(args), log, {.env_extra = {"ETCDCTL_API=3"}});
        children_.push_back(pid);
        return pid;
    }
    /// Ends a child with SIGTERM (etcdctl unlocks or resigns then); its exit status.
    int terminate(pid_t pid) {
        ::kill(pid, SIGTERM);
        const int rc = wait_child(pid);
        std::erase(children_, pid);
        return rc;
    }
    std::filesystem::path file(const std::string& leaf) const { return etcd_->dir() / leaf; }
    /// The create revision of the first key `etcdctl get <args...> -w json` shows.
    std::optional<std::uint64_t> create_revision_of(std::vector<std::string> args) const {
        args.insert(args.begin(), "get");
        args.insert(args.end(), {"-w", "json"});
        auto [out, rc] = etcd_->etcdctl(args);
        std::smatch m;
        if (rc != 0 || !std::regex_search(out, m, std::regex("\"create_revision\":([0-9]+)")))
            return std::nullopt;
        return std::stoull(m[1].str());
    }

    std::vector<pid_t> children_;
};

} // namespace dlock::test

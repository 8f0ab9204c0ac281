// What the etcd backend's integration tests share: a fixture with one private etcd member and
// clients on it with a 5 s lease (renewed every 1.7 s) and a 2 s connect bound.
#pragma once

#include "etcd_fixture.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <memory>

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

} // namespace dlock::test

// etcd_backend::with_server (etcd/version.hpp): a server that does not speak etcd's v3 API,
// or an etcd older than 3.4, is refused with errc::unsupported before anything waits on a
// watch it would never answer. Debian 12 ships etcd 3.4 only, so both servers are played by
// in-process gRPC servers (the one kind of fault a real member here cannot produce): one with
// no method implemented, one whose Maintenance.Status says 3.3.27 and
// which grants leases. A real 3.4 member passes the same check in every other etcd test.
#include "process.hpp"
#include "rpc.grpc.pb.h" // generated from src/etcd/proto/rpc.proto

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <grpcpp/grpcpp.h>
#include <memory>
#include <string>

namespace {

using namespace std::chrono_literals;
namespace pb = ::etcdserverpb;

/// An etcd 3.3 as far as dlock asks: its version, and leases (granted, revoked: counted).
class old_etcd final : public pb::Maintenance::Service, public pb::Lease::Service {
public:
    grpc::Status Status(grpc::ServerContext*, const pb::StatusRequest*,
                        pb::StatusResponse* r) override {
        r->set_version("3.3.27");
        return grpc::Status::OK;
    }
    grpc::Status LeaseGrant(grpc::ServerContext*, const pb::LeaseGrantRequest* q,
                            pb::LeaseGrantResponse* r) override {
        r->set_id(granted.fetch_add(1) + 100);
        r->set_ttl(q->ttl());
        return grpc::Status::OK;
    }
    grpc::Status LeaseRevoke(grpc::ServerContext*, const pb::LeaseRevokeRequest* q,
                             pb::LeaseRevokeResponse*) override {
        revoked_id.store(q->id());
        return grpc::Status::OK;
    }
    std::atomic<long long> granted{0};
    std::atomic<long long> revoked_id{0};
};

/// A gRPC server on a free loopback port with `services`.
class fake_server {
public:
    explicit fake_server(std::vector<grpc::Service*> services) {
        grpc::ServerBuilder b;
        b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
        for (auto* s : services)
            b.RegisterService(s);
        server_ = b.BuildAndStart();
    }
    ~fake_server() {
        if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    }
    fake_server(const fake_server&) = delete;
    fake_server& operator=(const fake_server&) = delete;
    bool up() const { return server_ && port_ > 0; }
    std::string url() const {
        return "etcd://127.0.0.1:" + std::to_string(port_) + "?connect_timeout=2000";
    }

private:
    int port_ = 0;
    std::unique_ptr<grpc::Server> server_;
};

/// A lock of `c` on its server is refused as unsupported; the last error says `why`.
void expect_refused(dlock::client& c, const std::string& why) {
    std::error_code ec;
    auto l = c.acquire("job", {.wait = 1s}, ec);
    EXPECT_FALSE(l);
    EXPECT_EQ(ec, dlock::errc::unsupported) << ec.message();
    EXPECT_NE(c.last_error_detail().find(why), std::string::npos) << c.last_error_detail();
}

TEST(etcd_server_version, a_server_without_etcds_v3_api_is_unsupported) {
    // A synchronous gRPC server needs one service: the generated base class of one, whose
    // every method answers UNIMPLEMENTED, as every other method of etcd's API does here.
    pb::Auth::Service none;
    fake_server s({&none});
    ASSERT_TRUE(s.up());
    dlock::client c(s.url());
    expect_refused(c, "not etcd's v3 API");
}

TEST(etcd_server_version, an_etcd_before_3_4_is_unsupported_and_its_lease_given_back) {
    old_etcd svc;
    fake_server s(
        {static_cast<pb::Maintenance::Service*>(&svc), static_cast<pb::Lease::Service*>(&svc)});
    ASSERT_TRUE(s.up());
    dlock::client c(s.url());
    expect_refused(c, "etcd 3.3.27 at ");
    // The check and the grant went side by side; the lease granted is revoked at once.
    EXPECT_EQ(svc.granted.load(), 1);
    EXPECT_TRUE(dlock::test::wait_until([&] { return svc.revoked_id.load() != 0; }, 5s));
    EXPECT_EQ(svc.revoked_id.load(), 100);

    // An election's observer would wait on a watch too: refused the same way.
    std::error_code ec;
    auto o = c.observe(
        "job", [](const std::optional<dlock::leader_info>&) {}, ec);
    EXPECT_EQ(ec, dlock::errc::unsupported) << ec.message();
}

} // namespace

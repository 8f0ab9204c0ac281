// etcd_memory_floor: the memory floor of a C++ etcd client on Debian 12's gRPC, for issue 22's
// "client memory <= 16 MiB". No dlock code: one channel, the stubs dlock generates from its own
// .proto files, a lease granted, one key put under it (a Txn), one keep-alive over the
// LeaseKeepAlive stream, then idle for SECONDS. Prints the process's peak RSS (VmHWM, which counts
// the pages of shared libraries it touched) and its private memory (RssAnon), in KiB, as JSON: what
// a client holding one lock costs before any lock library adds to it (bench/backend_bench.sh runs
// it beside lock_bench K).
//
//   etcd_memory_floor HOST:PORT [SECONDS]
#include "rpc.grpc.pb.h" // generated from src/etcd/proto/rpc.proto

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <grpcpp/grpcpp.h>
#include <iostream>
#include <string>
#include <thread>

namespace {

namespace pb = ::etcdserverpb;

long status_kib(const std::string& field) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + field.size());
    return -1;
}

int fail(const char* what, const grpc::Status& s) {
    std::cerr << what << ": " << s.error_message() << "\n";
    return 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: etcd_memory_floor HOST:PORT [SECONDS]\n";
        return 64;
    }
    const int seconds = argc > 2 ? std::atoi(argv[2]) : 5;
    auto channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
    auto kv = pb::KV::NewStub(channel);
    auto lease = pb::Lease::NewStub(channel);

    pb::LeaseGrantRequest grant;
    grant.set_ttl(60);
    pb::LeaseGrantResponse granted;
    grpc::ClientContext grant_ctx;
    if (auto s = lease->LeaseGrant(&grant_ctx, grant, &granted); !s.ok())
        return fail("LeaseGrant", s);

    // dlock's .proto has no Put method: the put goes in a Txn, as dlock's own Mutex does.
    pb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key("etcd-memory-floor/" + std::to_string(granted.id()));
    put->set_lease(granted.id());
    pb::TxnResponse txn_answer;
    grpc::ClientContext txn_ctx;
    if (auto s = kv->Txn(&txn_ctx, txn, &txn_answer); !s.ok()) return fail("Txn", s);

    grpc::ClientContext keepalive_ctx;
    auto stream = lease->LeaseKeepAlive(&keepalive_ctx);
    pb::LeaseKeepAliveRequest ping;
    ping.set_id(granted.id());
    pb::LeaseKeepAliveResponse pong;
    if (!stream->Write(ping) || !stream->Read(&pong))
        return fail("LeaseKeepAlive", stream->Finish());

    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    std::cout << "{\"scenario\":\"etcd-memory-floor\",\"seconds\":" << seconds
              << ",\"ttl\":" << pong.ttl() << ",\"vmhwm_kib\":" << status_kib("VmHWM:")
              << ",\"rss_anon_kib\":" << status_kib("RssAnon:") << "}\n";
    keepalive_ctx.TryCancel();
    stream->Finish();
    return 0;
}

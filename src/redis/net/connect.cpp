// net::connection: connecting (resolve, TCP or Unix socket, TLS with verification), the
// handshake's commands (encode_handshake), and why the connection last failed.
#include "redis/net/connection.hpp"
#include "redis/net/failure.hpp"

#include <dlock/error.hpp>

#include <asio/connect.hpp>
#include <asio/ssl/host_name_verification.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>

namespace dlock::net {

bool connect_failure_is_definite(const std::error_code& transport_ec) noexcept {
    return transport_ec == asio::error::connection_refused ||
           transport_ec == asio::error::host_not_found || transport_ec == asio::error::no_data ||
           transport_ec == asio::error::service_not_found ||
           (transport_ec.category() == asio::error::get_system_category() &&
            transport_ec.value() == ENOENT); // Asio's system category maps to no std::errc
}

std::string connection::last_failure() const {
    std::lock_guard lk(mu_);
    return last_failure_;
}

void connection::note_error_reply(std::string_view text) {
    note_failure(address() + ": " + bounded_text(text));
}

void connection::note_failure(std::string text) {
    std::lock_guard lk(mu_);
    last_failure_ = std::move(text);
}

std::string connection::address() const {
    if (!target_.unix_socket.empty()) return "unix:" + target_.unix_socket;
    const bool v6 = target_.host.find(':') != std::string::npos;
    return (v6 ? "[" + target_.host + "]" : target_.host) + ":" + std::to_string(target_.port);
}

void connection::fail_connect(const std::error_code& transport_ec, std::string_view what) {
    note_failure(std::string(what) + " " + address() + ": " + transport_ec.message());
    fail_connection(map_transport_error(transport_ec));
    // Nothing was written on this connection: failing what is queued is a certain outcome.
    // One-way commands (a subscriber's SUBSCRIBE) stay queued for the next connection. With a
    // target source (Sentinel) a refused master is no answer: fail_connection() made it
    // resolve again, and the queued requests wait for the master it finds.
    if (!source_ && connect_failure_is_definite(transport_ec))
        expire_pending(std::chrono::steady_clock::time_point::max(),
                       make_error_code(errc::unavailable));
}

// ---- connect and handshake -------------------------------------------------------------

void connection::do_connect() {
    {
        std::lock_guard lk(mu_);
        if (stopped_) return;
    }
    const auto gen = ++generation_;
    connect_timer_.expires_after(opts_.connect_timeout);
    connect_timer_.async_wait([this, self = shared_from_this(), gen](std::error_code ec) {
        if (ec || gen != generation_) return;
        note_failure("connect " + address() + ": no answer within " +
                     std::to_string(opts_.connect_timeout.count()) + " ms");
        fail_connection(make_error_code(errc::unavailable));
    });

    if (!source_) return connect_to_target(gen);
    source_->resolve([this, self = shared_from_this(), gen](std::error_code ec, target t) {
        if (gen != generation_) return;
        if (ec) return fail_connection(ec);
        target_ = std::move(t);
        connect_to_target(gen);
    });
}

void connection::connect_to_target(std::uint64_t gen) {
    if (!target_.unix_socket.empty()) {
        auto& sock = stream_.emplace<asio::local::stream_protocol::socket>(io_);
        sock.async_connect(asio::local::stream_protocol::endpoint(target_.unix_socket),
                           [this, self = shared_from_this(), gen](std::error_code ec) {
                               if (gen != generation_) return;
                               if (ec) return fail_connect(ec, "connect");
                               on_transport_ready();
                           });
        return;
    }
    resolver_.async_resolve(
        target_.host, std::to_string(target_.port),
        [this, self = shared_from_this(), gen](std::error_code ec, tcp::resolver::results_type rs) {
            if (gen != generation_) return;
            if (ec) return fail_connect(ec, "resolve");
            tcp::socket* sock = nullptr;
            if (ssl_ctx_) {
                auto& tls = stream_.emplace<std::unique_ptr<tls_stream>>(
                    std::make_unique<tls_stream>(io_, *ssl_ctx_));
                sock = &tls->next_layer();
            } else {
                sock = &stream_.emplace<tcp::socket>(io_);
            }
            asio::async_connect(
                *sock, rs, [this, self, gen](std::error_code ec2, const tcp::endpoint&) {
                    if (gen != generation_) return;
                    if (ec2) return fail_connect(ec2, "connect");
                    if (auto* s = std::get_if<tcp::socket>(&stream_))
                        s->set_option(tcp::no_delay(true));
                    else
                        std::get<std::unique_ptr<tls_stream>>(stream_)->next_layer().set_option(
                            tcp::no_delay(true));
                    on_transport_ready();
                });
        });
}

void connection::on_transport_ready() {
    auto* tls = std::get_if<std::unique_ptr<tls_stream>>(&stream_);
    if (!tls) return handshake();
    const std::string& name = opts_.tls.server_name.empty() ? target_.host : opts_.tls.server_name;
    // SNI only for host names; verification for both names and IP addresses.
    std::error_code addr_ec;
    (void)asio::ip::make_address(name, addr_ec);
    if (addr_ec) SSL_set_tlsext_host_name((*tls)->native_handle(), name.c_str());
    (*tls)->set_verify_callback(asio::ssl::host_name_verification(name));
    const auto gen = generation_;
    (*tls)->async_handshake(asio::ssl::stream_base::client, [this, self = shared_from_this(),
                                                             gen](std::error_code ec) {
        if (gen != generation_) return;
        if (ec) {
            // A certificate that fails verification is an auth failure:
            // retrying will not fix it, and we never fall back.
            const bool verify = ec.category() == asio::error::get_ssl_category();
            std::string why = ec.message();
            // OpenSSL's reason says which check failed ("certificate has expired").
            auto* t = std::get_if<std::unique_ptr<tls_stream>>(&stream_);
            const long result = t ? SSL_get_verify_result((*t)->native_handle()) : X509_V_OK;
            if (verify && result != X509_V_OK)
                why += std::string(" (") + X509_verify_cert_error_string(result) + ")";
            note_failure("TLS handshake with " + address() + ": " + why);
            return fail_connection(make_error_code(verify ? errc::auth_failed : errc::unavailable));
        }
        handshake();
    });
}

std::size_t encode_handshake(std::string& out, const client_options& o) {
    std::vector<std::string_view> hello{"HELLO", "3"};
    if (!o.password.empty()) {
        hello.push_back("AUTH");
        hello.push_back(o.username.empty() ? std::string_view("default") : o.username);
        hello.push_back(o.password);
    }
    if (!o.client_name.empty()) {
        hello.push_back("SETNAME");
        hello.push_back(o.client_name);
    }
    resp3::encode_command(out, hello);
    if (o.db == 0) return 1;
    const std::string db = std::to_string(o.db);
    resp3::encode_command(out, {"SELECT", db});
    return 2;
}

} // namespace dlock::net

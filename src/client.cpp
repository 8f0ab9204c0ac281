// dlock::client: the public facade over detail::client_impl.
#include "redis/client_impl.hpp"

#include <dlock/mutex.hpp>

namespace dlock {

client::client(std::string_view url)
    : client(parse_url(url)) {}

client::client(client_options opts)
    : impl_(std::make_shared<detail::client_impl>(std::move(opts))) {
    impl_->start();
}

client::~client() {
    if (impl_) impl_->shutdown();
}
client::client(client&&) noexcept = default;
client& client::operator=(client&& o) noexcept {
    if (this != &o) {
        if (impl_) impl_->shutdown();
        impl_ = std::move(o.impl_);
    }
    return *this;
}

const client_options& client::options() const noexcept {
    return impl_->options();
}
const std::string& client::id() const noexcept {
    return impl_->id();
}

resp3::value client::command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
}

resp3::value client::command(std::span<const std::string_view> args) {
    std::error_code ec;
    auto v = command(args, ec);
    throw_if(ec);
    return v;
}

resp3::value client::command(std::span<const std::string_view> args, std::error_code& ec) {
    if (args.empty()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    return impl_->run(args, ec);
}

mutex client::make_mutex(std::string name) {
    return mutex(*this, std::move(name));
}
simple_mutex client::make_simple_mutex(std::string name) {
    return simple_mutex(*this, std::move(name));
}

lease client::acquire(std::string_view name, const acquire_options& opts) {
    std::error_code ec;
    auto l = acquire(name, opts, ec);
    throw_if(ec);
    return l;
}

lease client::acquire(std::string_view name, const acquire_options& opts, std::error_code& ec) {
    if (impl_->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    detail::completion_flag done;
    lease result;
    detail::start_acquire(
        impl_, std::string(name), opts,
        [&](std::error_code e, lease l) {
            ec = e;
            result = std::move(l);
            done.set();
        },
        detail::caller::may_block);
    done.wait();
    return result;
}

bool client::fenced_set(std::string_view key, std::string_view fence_key, std::uint64_t token,
                        std::string_view value) {
    const std::string tok = std::to_string(token);
    const std::string_view args[] = {"2", key, fence_key, tok, value};
    std::error_code ec;
    auto v = impl_->run_script(detail::script_id::fencing_set, args, ec);
    throw_if(ec);
    throw_if(detail::reply_error(v));
    if (!v.is_integer()) throw error(errc::protocol_error);
    return v.integer == 1;
}

asio::any_io_executor client::get_executor() const {
    return impl_->io().get_executor();
}

} // namespace dlock

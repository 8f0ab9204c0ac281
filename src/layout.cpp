// dlock::redis::layout_of and lock_kinds (dlock/redis.hpp): the Redis kinds' key layouts, from
// their protocols.
#include "redis/locks/protocol.hpp"

#include <dlock/redis.hpp>

namespace dlock::redis {

lock_layout layout_of(std::string_view name, lock_kind kind, std::error_code& ec) {
    const auto& p = detail::protocol_of(kind);
    auto k = p.keys(name, ec);
    if (ec) return {};
    lock_layout l;
    l.writer_intent_key = p.intent_key(k); // (before k's strings are moved below)
    l.queue_key = p.queue_key(k);
    l.timeout_key = p.timeout_key(k);
    l.kind = kind;
    l.kind_name = std::string(p.name());
    l.key = std::move(k.key);
    l.data_type = std::string(p.layout().data_type);
    l.channel = std::move(k.channel);
    l.fencing_key = std::move(k.token_key);
    if (p.queues_on_server()) l.waiter_channel_prefix = l.channel;
    return l;
}

lock_layout layout_of(std::string_view name, lock_kind kind) {
    std::error_code ec;
    auto l = layout_of(name, kind, ec);
    throw_if(ec);
    return l;
}

std::vector<lock_kind> lock_kinds() {
    return detail::offered_kinds();
}

} // namespace dlock::redis

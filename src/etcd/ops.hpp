// etcd/ops.hpp: the requests dlock sends, built in one place (the Mutex layout of layout.hpp
// turned into RangeRequest and TxnRequest messages).
#pragma once

#include "etcd/rpc.hpp"

#include <cstdint>
#include <string>

namespace dlock::detail::etcd {

/// Every key of `range` (keys under it), oldest create revision first; `limit` 0 = all.
pb::RangeRequest by_create(const std::string& range, std::int64_t limit = 0);
/// The newest key of `range` created before revision `below` (the waiter's predecessor).
pb::RangeRequest predecessor(const std::string& range, std::int64_t below);
/// The key `key` alone.
pb::RangeRequest one_key(const std::string& key);
/// The Mutex's one round trip: put `key` with `lease` unless it exists (else read it); read the
/// first key of `range` either way. Responses: [0] put or read of the key, [1] the first key.
pb::TxnRequest lock_txn(const std::string& key, const std::string& range, std::int64_t lease);
/// Deletes `key` when its create revision is still `rev` (succeeded false otherwise).
pb::TxnRequest delete_if(const std::string& key, std::int64_t rev);

} // namespace dlock::detail::etcd

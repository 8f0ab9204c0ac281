// etcd/ops.hpp: the requests dlock sends, built in one place (the Mutex layout of layout.hpp
// turned into RangeRequest and TxnRequest messages).
#pragma once

#include "etcd/rpc.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dlock::detail::etcd {

/// Every key of `range` (keys under it), oldest create revision first; `limit` 0 = all.
pb::RangeRequest by_create(const std::string& range, std::int64_t limit = 0);
/// The newest key of `range` created before revision `below` (the waiter's predecessor).
pb::RangeRequest predecessor(const std::string& range, std::int64_t below);
/// The key `key` alone.
pb::RangeRequest one_key(const std::string& key);
/// The Mutex's one round trip: put `key` with `lease` unless it exists (else read it). Then, when
/// put, count the keys of `range` (the new key is the newest: it holds if it is alone; a count
/// reads no key, which costs etcd less than Go's sorted read of the first key); when read, read
/// the first key of `range`. Responses: [0] put or read of the key, [1] the count or first key.
/// With a `value` (an election's campaign: concurrency.Election), the key is put with it, and
/// a key that existed (this lease's own, adopted) gets it too after the two reads, as the Go
/// client's Campaign proclaims the new value on a key it finds.
pb::TxnRequest lock_txn(const std::string& key, const std::string& range, std::int64_t lease,
                        const std::string* value = nullptr);
/// An election's proclaim: puts `value` on `key` with `lease` while its create revision is still
/// `rev` (succeeded false otherwise: no longer the leader).
pb::TxnRequest proclaim_txn(const std::string& key, std::int64_t rev, std::int64_t lease,
                            std::string value);
/// The newest key under `prefix` last modified before revision `below` (the RWMutex's
/// waitOnLastRev: sort by mod revision, descending, limit 1, max_mod_revision = below - 1).
pb::RangeRequest last_before(const std::string& prefix, std::int64_t below);
/// The RWMutex's put: `key` with `lease` unless it exists, then the two newest keys under
/// `blockers` by mod revision (the own key may be one of them). Responses on success: [0] the
/// put, [1] the read.
pb::TxnRequest rw_txn(const std::string& key, const std::string& blockers, std::int64_t lease);
/// The semaphore's put: `key` with `lease` and the value `permits` (decimal) unless it exists,
/// then every key of `keys` (the semaphore's range: the keys ahead of the new one, and it).
/// Responses on success: [0] the put, [1] the read.
pb::TxnRequest semaphore_txn(const std::string& key, const std::string& keys, std::int64_t lease,
                             unsigned permits);
/// A waiter's line, in one revision: [0] every key of `keys` created before revision `rev`
/// (the own key's; values included, for the permits check), [1] `key`.
pb::TxnRequest semaphore_line(const std::string& key, const std::string& keys, std::int64_t rev);
/// A waiter's next look at its line, in one round trip and one revision: while `key` still has
/// create revision `rev` (its lease alive, not forced away), the read `ahead` (the predecessor,
/// or the newest older blocker); succeeded false when the key is gone. A Txn of reads only is
/// served as one linearizable read (no Raft entry). Responses on success: [0] the read.
pb::TxnRequest still_mine_then(const std::string& key, std::int64_t rev, pb::RangeRequest ahead);
/// A read key put under a write hold (a downgrade): `key` with `lease`, only while no write key
/// under `writers` was created after revision `write_rev` (no writer queued behind the hold).
pb::TxnRequest downgrade_txn(const std::string& key, const std::string& writers,
                             std::int64_t write_rev, std::int64_t lease);
/// A run-once-per-period claim: puts `key` = `token` with `lease` unless the key exists
/// (succeeded false: the slot is taken).
pb::TxnRequest once_claim_txn(const std::string& key, std::string token, std::int64_t lease);
/// Gives a claim back: deletes `key` while its value is still `token` (succeeded false
/// otherwise: the slot ended, or it is another claim's).
pb::TxnRequest once_release_txn(const std::string& key, const std::string& token);
/// Deletes `key` when its create revision is still `rev` (succeeded false otherwise).
pb::TxnRequest delete_if(const std::string& key, std::int64_t rev);
/// Deletes every key of `keys` when each create revision is still the one given (else none).
pb::TxnRequest delete_if(const std::vector<std::pair<std::string, std::int64_t>>& keys);

} // namespace dlock::detail::etcd

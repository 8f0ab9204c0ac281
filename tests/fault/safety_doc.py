"""Renders docs/SAFETY.md from the outcomes the fault scenarios recorded (faultrun.py --results),
merged per row over every result folder given (one campaign's OUT/seedN/ folders, older
campaigns), and from coverage_tests.py's results file for the bad-input and security table.

  python3 tests/fault/faultrun.py safety-doc [--random RANDOM_DIR] [--tests TESTS.json] \
      DIR... > docs/SAFETY.md
"""

import glob
import json
import os
import re
import sys

PROMISES = """\
## What dlock promises, and what it does not

dlock hands out **leases**: a holder may believe it holds a lock until `valid_until()`, an
instant on the monotonic clock measured from *before* the acquire request was sent, minus a
clock-drift allowance (TTL x 1% + 2 ms). Everything below is about that belief, and about what
a protected resource accepts.

**Single Redis master (mode S, `lock_kind::simple` or any kind on one server).** Two holders'
validity windows never overlap, *provided* the server keeps its keys: it must not evict them
(`maxmemory-policy noeviction`), and after a crash it must either come back with its data
(AOF `appendfsync always`) or stay down longer than the longest lease (delayed restart). Its
clock must only be slewed (NTP), never stepped. A holder that pauses (GC, swap, SIGSTOP) or
whose writes are delayed in the network can still act after its lease ended: a lease lock
cannot prevent that, and an unfenced resource then loses updates (F02, F06 below show it).

**Fenced single master (mode F, reentrant/fair/write locks with `lease::token()`).** The
same, plus a fencing token that strictly increases with every grant, as long as the counter
survives (AOF `appendfsync always`, no failover). A resource that checks the token
(`dlock::redis::fenced_set`, on open *and* on write) rejects the late writes of a paused or delayed
holder, so the resource stays consistent even when beliefs overlap. A rollback of the server's
data (lost fsync window, restore from backup) makes tokens repeat (F23), and so does an eviction
of the counter, which has no TTL: `volatile-lru` spares it (F29 F), `allkeys-lru` does not (F29a).

**Redlock (mode R, a `dlock::client` on Redlock over N independent masters).** Mutual exclusion of beliefs
while a majority of the masters keep their keys; the masters must be independent (no
replication between them), each with the same requirements as a single master, or restarted
only after the longest lease: a holder on all 3 masters survives one restart (F20 R), one on a
bare quorum (2 of 3) does not (F20q, and F23 R for a rollback), nor does a quorum that evicts
(F29 R). Redlock gives **no fencing token**: N counters cannot order
every grant. Pauses and delays affect it exactly as a single master.

**Failover-based deployments (Sentinel, Cluster).** An asynchronous failover can lose a lock
that was not yet replicated (F25 shows the overlap on Sentinel, F25C on a Cluster); `wait=N` (WAIT) and the lock-delay only
narrow that window (F26 and F25L are safe in their schedules, not in general), and
nothing helps when the old master keeps serving clients that cannot see the failover (F27);
`min-replicas-to-write 1` with `min-replicas-max-lag N` bounds that old master's grants to N + 2 s
after it lost its replicas (F27w).
A master cut off from everyone (F11 FO: clients, replicas and sentinels alike) or stalled
(F24 FO) past `down-after-milliseconds` fails over; the lock-delay outlasted every hold the old
master had granted in those runs, but a client that has not yet seen the switch can still be
granted by the old master while it serves. A controlled switch (F33 FO: SENTINEL FAILOVER)
and one client cut off alone (F14 FO) were safe; a clock fault on the master acts as on a
single master (F15b, F16 FO overlap; F18 FO is safe).
dlock does not promise mutual exclusion across a failover, and fencing tokens can regress
there. Resharding a held lock's slot moves its keys and its fence counter together (F28).

**Always, in every mode:** release and extend act only on the lock instance the same
acquisition created (128-bit random token, compare-and-delete scripts); an acquisition whose
outcome is unknown (timeout, reset, lost reply) is reported as not acquired (`errc::ambiguous`)
and its token is released best-effort (a Sentinel client, whose master may be moving, releases
it and tries again within the wait: F05, F09, F10 in mode FO); every call returns within its
wait plus one command timeout; a crashed holder's lock is free again after at most its lease. A
server that cannot take the lock (read-only replica, LOADING, MASTERDOWN, BUSY, out of memory,
refused credentials) gives a typed error, never "not acquired" (F30, F31, F33-F35); a
single-node client reports it at once, Sentinel and Cluster clients retry it within the wait
(F35 FO: LOADING), except refused credentials, which a Sentinel client reports at once too
(F34 FO).

**Operational requirements:** `maxmemory-policy noeviction`; persistence with `appendfsync
always` or a restart delayed past the longest lease; NTP slewing only (no clock steps on the
servers); for Redlock, independent masters; for resources that must stay consistent under
pauses and delays, a fencing token checked by the resource.

**ZooKeeper (`zk://`, InterProcessMutex and the other Curator recipes).** A lock is an
ephemeral sequential node; it lives as long as its holder's session, so the **session is the
lease** (no fixed lease: `acquire_options::lease` is unsupported). A holder's `valid_until()`
is the send time of its session's last answered request + the negotiated session timeout -
drift; pings every timeout/3 push it forward, and when it passes unanswered the session is
ended on the client (loss at `valid_until`, before the server's Expired event that a
partitioned client never receives). The server expires the session no earlier than a session
timeout after it last heard from the client, which is after that send time: the holder's
belief ends before the server frees the lock, whether the holder is killed (Z01), paused
(Z02), cut off (Z03, Z05) or the server is restarted (Z04; sessions survive a restart) or an
ensemble's leader is lost (Z06) or partitioned into a minority (Z08: it stops serving, the
majority elects a leader and goes on); a waiter whose predecessor's node expires reads the queue again
and does not jump it (Z07); a create whose answer is lost (Z10: the node made, the
connection dropped) is found again by its protected-mode prefix and adopted, one node per
acquisition. **In an ensemble, set the URL's `server_lag`** to (syncLimit + 1) x tickTime
(Z09): a follower partitioned away answers its clients' reads (dlock's pings are `exists`
calls) from its own copy for up to syncLimit x tickTime before it drops out of the quorum,
while the leader, which expires sessions, hears nothing of them. With `server_lag` an answer
proves only the requests sent at least that long before it, so `valid_until()` stays before
the leader's expiry (Z09, on a 4 s session and a 2.2 s lag: every run as expected). A URL without it
has the server asked: a standalone server lags 0; an ensemble is assumed to lag 12 s
(ZooKeeper's sample zoo.cfg) and refused unless its session outlasts 18 s, so it never runs
without a lag unless `server_lag=0` is given. With lag 0 every answer counted at once: each of Z09's 5 runs
of 2026-11-28 before the parameter existed overlapped by 0.14-0.19 s
(`docs/fault-results/2026-11-28-z09-before-server-lag/`); a holder that acts on the deadline
it was granted rather than reading `valid_until()` again was not affected. The token (`lease::token()`) is the node's czxid: it strictly
increases per ensemble. `dlock::zookeeper::fenced_set` makes the server check the holder's node
in the same transaction as the write. What is not promised: a holder paused past its session
and resumed acts on a lock it lost unless it checks `valid_until()` (or writes through
`fenced_set`); the server must really keep the session's timeout (tickTime x 2 <= timeout <=
tickTime x 20; the negotiated timeout is the one used) and its transaction log (`forceSync=yes`, the
default); an ensemble needs a quorum; clocks do not matter (ZooKeeper times sessions on its
monotonic clock).

**PostgreSQL (`postgresql://`).** *Advisory locks* (the default kinds): the lock belongs to a
server session (one per hold). The holder proves its session alive every `dlock_check` / 2;
its `valid_until()` is the last proven check + `dlock_check` (and at most its fixed lease).
The server frees the lock the instant the session ends: a killed holder (P01), a
`pg_terminate_backend` (P03), a restart (P04), an idle or keepalive timeout. **Belief-overlap
window:** the holder learns that its session ended when its socket says so (P03: the FATAL
arrives within milliseconds, `valid_until()` moves into the past and a careful holder does not
write), and at the latest at `valid_until()`; between the two it may still believe it holds a lock
that another session was already granted, up to `dlock_check`. A holder cut off from the server
(P05) is freed by the server only at its TCP keepalive bound (`keepalive::server_bound()` of
`dlock_keepalive`: about 11 s by default, 3 s for `1:1:2:3000`), so `dlock_check` must be
shorter than that bound, or the holder believes past the moment the server frees the lock; the
URL parser rejects `dlock_check >= server_bound()`. A holder paused (SIGSTOP, GC) keeps its
session, so nobody else is granted until it resumes (P02 PGA). **Advisory locks are not
replicated**: a failover to a standby loses every lock (two holders: P06 shows it, with the
old primary still serving its holder), and `dlock_fence` on a promoted standby may regress
(P06 saw FENCE violated too). When the primary crashed instead (P07 PGA), the holder is told by
its socket and writes nothing more, and a synchronous standby keeps `dlock_fence`; a promotion
within `dlock_check` of the crash could still overlap beliefs, so P07 promotes only after the
holder's deadline. Transaction-mode poolers (PgBouncer) break session locks.
*Lease rows* (`lock_kind::lease`, `dlock_lease`): the row expires on the database clock after
the lease; rows outlive sessions and restarts (P01-P05 PGL); a holder's `valid_until()` is the
send time + lease - drift, before the database's expiry unless the database clock is stepped
forward; a failover to a synchronous standby keeps the row and the token sequence (P07: the
holder's row on the promoted standby, nobody granted before its lease ran out, tokens go on
increasing), and one that loses the row (asynchronous standby) means two holders. ShedLock rows
(PGS) have the same clock and no token. Held with the watchdog (P05 and P07 in PGAW, PGLW,
PGSW, PGVW), a holder cut off or left on a crashed primary renews nothing, and its loss is
signalled by its last proven deadline (checker rule LOSS; P05 PGLW found a row's loss signalled
only when its unanswered extend gave up, up to `dlock_timeout` late: fixed in db972d7);
versioned rows (PGV, pglock's) have no clock in the
table but assume equal clock rates and the same lease on every side, and a dead holder's row is
taken over only a whole lease after a waiter first saw its version (up to two leases, P01 PGV).
Server configuration: keep the keepalive settings
dlock sends (`tcp_keepalives_*`, `tcp_user_timeout`, `client_connection_check_interval`;
a pooler or proxy in between must not keep a dead client's session alive), direct session-mode
connections for advisory locks, and a synchronous standby (or no failover) where rows must
survive one.

**etcd (`etcd://`, the Mutex recipe).** As ZooKeeper: a lock is a key under the client's lease,
the **lease is the lease** (no fixed lease), kept alive every TTL/3; `valid_until()` is the send
time of the last answered keep-alive + its TTL - drift, and the server expires the lease no
earlier than a TTL after it last renewed it. A killed (E01) or cut-off (E03) holder's belief
ends before its key goes; a leader lost (E04) or partitioned into a minority (E05: it steps
down, clients move to another member and keep their lease) keeps leases and keys (the new
leader extends them), and so does a follower partitioned away (E06: the leader keeps its
quorum; the isolated member cannot forward keep-alives, so nothing it answers renews a lease,
and clients move to the others), and so does compaction under a hand-over load (E07: a
holder's watch that compaction cancels reads its key again and watches anew). A revoked lease (E02, `etcdctl lease revoke`) deletes the key at once: the holder's
watch on its own key sees the deletion and marks the lease lost; until then (milliseconds) it
may still believe (a careful holder checks `valid_until()` before it writes). The token is the
key's create revision: it strictly increases per cluster.
"""

NOT_COVERED = [
    ("P (issue 24)", "PostgreSQL: a misconfigured `dlock_check` >= keepalive bound; row kinds "
     "across a failover to an asynchronous standby that lost the holder's row",
     "the misconfiguration cannot be run: the URL parser rejects it "
     "(`pg_settings.a_check_period_not_shorter_than_the_keepalive_bound_is_rejected`); the "
     "lost row is documented (two holders, as an advisory lock in P06), not run: P07 runs the "
     "supported setup, a synchronous standby"),
    ("E07 waiters", "etcd: a compaction that cancels a waiter's watch",
     "cannot happen: a waiter watches its predecessor from etcd's current revision (and reads "
     "the key again when the watch was created past its read), a synced watch that compaction "
     "never cancels; E07 compacts under a hand-over load, where a holder's watch of its own key "
     "(from the grant's revision + 1) can be cancelled, and asserts that at least one was "
     "(the client's watches_cancelled)"),
    ("F31 FO", "BUSY (a 400 ms script) on a Sentinel master",
     "not run: Sentinel itself sends SCRIPT KILL to a master that answers its pings with BUSY "
     "while subjectively down, so the row's \"no SCRIPT KILL\" is not dlock's to keep there "
     "(measured; see F31's scenario); BUSY is shown on one master (F31 S, F, R)"),
    ("F35 FO, MASTERDOWN phase", "a Sentinel master made a replica of a dead server",
     "not run: a role change the sentinels revert (F35 FO runs the LOADING phase only, where "
     "a Sentinel client retries within its wait instead of reporting server_busy)"),
]


# reliability.md §7.4 (bad input, protocol and server errors) and §7.5 (security): where each
# case is tested. Every `suite.test` in backticks is a GoogleTest name: coverage_tests.py runs it
# and records its result, which the page shows; every F.. id is a fault row, shown with its
# runs. What no test covers is said in the last field.
COVERAGE = [
    ("B01", "malformed framing (missing CRLF, unknown type byte, bad lengths)",
     "`resp3_parser.malformed_input_is_a_protocol_error_at_every_split_point` (every row at "
     "every split point, incl. NUL, bare CR and LF-only inside a simple string or error, empty "
     "line, `$+5`, `$ 5`); libFuzzer target `resp3_parser_fuzz`", ""),
    ("B02", "huge declared lengths", "`resp3_parser.huge_declared_lengths_fail_on_the_header_"
     "alone`, `resp3_parser.the_bulk_length_limit_applies_before_allocating`, "
     "`connection_faults.a_huge_declared_length_is_a_protocol_error_not_an_allocation`", ""),
    ("B03", "oversized data, deep nesting", "`resp3_parser.nesting_one_past_the_limit_is_"
     "rejected`, `resp3_parser.the_aggregate_limit_counts_map_pairs_twice`, `resp3_parser."
     "the_buffered_bytes_limit_bounds_an_incomplete_bulk`, `resp3_parser.the_line_length_"
     "limit_applies_to_lines_without_crlf`",
     "no test streams a real 100 MB bulk from a server"),
    ("B04", "bad integers, doubles, booleans, big numbers", "`resp3_parser.malformed_input_is_"
     "a_protocol_error_at_every_split_point` (overflow, `:+5`, `:1.5`, `:-`, empty, junk, `#x`, "
     "`,1.2.3`, `(12a`); `,nan` and `,inf` are valid RESP3 doubles (`resp3_parser.every_valid_"
     "reply_parses_the_same_at_every_split_point`) and `acquire_reading.a_double_or_boolean_where_"
     "an_integer_is_expected_is_never_success` (`,nan`, `,inf`, `,1`, `#t`, `(1` in every "
     "integer slot: protocol error for every kind's acquire and release, no TTL, no renewal)",
     ""),
    ("B05", "truncated reply, reset, silence", "`connection_faults.a_truncated_reply_then_"
     "close_is_ambiguous`, `connection_faults.a_server_that_never_answers_gives_ambiguous_at_"
     "the_deadline`, `connection_faults.a_reply_then_reset_delivers_the_reply`; fault F09, "
     "F10, F11 (real servers behind the proxy)", ""),
    ("B06", "desync, unsolicited replies", "`connection_faults.an_unsolicited_reply_drops_the_"
     "connection_and_is_never_attributed`, `bad_server.a_second_reply_to_one_command_is_never_"
     "attributed_to_the_next` (sync lane; found and fixed a stray `+OK` read as the next SET "
     "NX's grant), `bad_server.a_push_is_never_taken_as_the_reply_of_a_pending_command` (a "
     "grant-shaped push before and after replies, blocking and async), `connection.replies_"
     "match_their_commands_under_many_threads`",
     "a push is skipped, not a reason to drop the connection (RESP3 allows pushes between "
     "replies); a stray reply that arrives after the next command was written cannot be told "
     "from that command's reply (no request ids in RESP)"),
    ("B07", "wrong-type success replies, huge error text", "`acquire_reading.unexpected_replies_"
     "are_protocol_errors_never_success`, `release_reading.every_kind_reads_a_malformed_"
     "release_reply_as_a_protocol_error`, `renew_reading.a_batch_reply_must_answer_every_"
     "hold`, `connection.the_last_error_reply_is_kept_for_messages_and_bounded`", ""),
    ("B08", "invalid lock names, key derivation, one slot", "`lock_names.rejects_empty_names_"
     "oversized_names_and_empty_hash_tags`, `lock.invalid_names_and_leases_are_rejected`, "
     "`lock_names.every_key_of_a_lock_shares_the_lock_slot`, `cluster_map.every_key_of_every_"
     "lock_kind_shares_the_slot_of_the_lock_name`, `lock_names.key_slot_matches_redis_cluster_"
     "keyslot`; fault F28 (lock and fence key migrate together)",
     "no property test over random names against a real cluster"),
    ("B09", "wrong password, unknown user, NOAUTH, protected mode",
     "`connection.a_wrong_password_is_auth_failed_and_nothing_runs_as_default`, `connection."
     "a_handshake_error_that_echoes_the_password_is_kept_without_it`, `config.rejects_bad_"
     "urls_with_a_reason_that_has_no_password`, `bad_server.protected_mode_denied_at_the_"
     "handshake_is_auth_failed_and_nothing_follows` (fake server: `auth_failed`, only HELLO "
     "received, canary password absent); fault F34 (password rotated mid-run)",
     "`DENIED` comes from a fake server, not a real one in protected mode"),
    ("B10", "errors inside a script (real)", "`connection.acl_users_authenticate_and_denied_"
     "commands_are_permission_errors`, `security.a_command_the_acl_denies_inside_a_script_is_"
     "permission_denied` (ERR from the script is `permission_denied`, ACL LOG shows it); "
     "`bad_server.a_killed_or_unkillable_acquire_script_is_a_"
     "typed_error_and_keeps_the_connection` (fake server: `Script killed by user` is "
     "`server_error`, `UNKILLABLE` is `server_busy`, not acquired, nothing released, connection "
     "kept, blocking and async)",
     "killed and UNKILLABLE replies come from a fake server, not a real SCRIPT KILL"),
    ("B11", "NOSCRIPT after SCRIPT FLUSH", "`connection.scripts_fall_back_to_eval_after_script_"
     "flush`, `lock.script_flush_mid_run_is_survived`, `metrics.a_flushed_script_cache_counts_"
     "a_noscript_fallback`, `bad_server.a_server_that_always_answers_noscript_gives_no_"
     "script_after_one_eval` (fake server: `no_script` at once, one EVALSHA and one EVAL per "
     "acquisition, reentrant and fair, blocking and async); fault F32", ""),
    ("B12", "READONLY (real replica)", "fault F33 (demoted master: typed `readonly`, never "
     "contended), fault F35; `sentinel.a_failover_moves_holds_and_waiters_to_the_new_master`",
     ""),
    ("B13", "MOVED / ASK", "`cluster_map.moved_and_ask_errors_name_the_slot_and_the_address_"
     "to_go_to` (malformed MOVED refused), `cluster.moved_after_a_migration_and_ask_during_one_"
     "are_followed_and_a_held_lock_keeps_renewing`; fault F28; `connection.moved_ping_pong_"
     "between_two_nodes_stops_after_bounded_redirects`, `connection.moved_to_an_unreachable_"
     "host_fails_typed_within_the_deadline` (two fake Cluster nodes: 1 + 5 sends, then the "
     "MOVED reply, `moved`, in milliseconds; an unmapped MOVED address is not dialled, the map "
     "is asked again)", "ping-pong and the unreachable address only against fake nodes"),
    ("B14", "CROSSSLOT", "`errors.server_errors_are_classified_by_their_first_word`, "
     "`cluster.a_cross_slot_command_is_answered_once_with_cross_slot_and_never_retried` (real "
     "Cluster: MSET and EVAL over two slots through `dlock::redis::command()`, `cross_slot`, sent "
     "once by the nodes' commandstats)", "the lock paths cannot produce one (every layout keeps "
     "one slot), so only raw commands are tested"),
    ("B15", "OOM (real)", "fault F30 (acquire told `out_of_memory`, release still works); "
     "`errors.server_errors_are_classified_by_their_first_word`", ""),
    ("B16", "BUSY (real)", "fault F31; `errors.server_errors_are_classified_by_their_first_"
     "word`", ""),
    ("B17", "LOADING, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, NOREPLICAS, EXECABORT, unknown",
     "`errors.server_errors_are_classified_by_their_first_word` (EXECABORT and unknown `-FOO "
     "bar` are `server_error`); real: fault F35 (MASTERDOWN, LOADING), F26 (NOREPLICAS), "
     "`cluster.moved_after_a_migration_and_ask_during_one_are_followed_and_a_held_lock_"
     "keeps_renewing` (TRYAGAIN during the migration)", "EXECABORT only classified (dlock "
     "sends no MULTI)"),
    ("B18", "TLS failures", "`connection.tls_verifies_the_chain_and_the_host_name_and_never_"
     "falls_back`, `connection.tls_rejects_a_certificate_for_another_host`, `connection.tls_"
     "rejects_an_expired_certificate_and_runs_nothing` (trusted CA, right host, expired: "
     "`auth_failed`, the reason says expired, no command ran, no plaintext port)", ""),
    ("S1", "canary password never printed", "`config.to_string_never_prints_the_password`, "
     "`log_sink.warnings_never_contain_the_password_owner_or_token`, `connection.a_handshake_"
     "error_that_echoes_the_password_is_kept_without_it`; fault F34 (canary absent from every "
     "worker log and stderr)", "no sweep of every failure path's output"),
    ("S2", "a wrong password never falls back to `default`", "`connection.a_wrong_password_is_"
     "auth_failed_and_nothing_runs_as_default`", ""),
    ("S3", "TLS verification matrix", "`connection.tls_verifies_the_chain_and_the_host_name_"
     "and_never_falls_back`, `connection.tls_rejects_a_certificate_for_another_host`, "
     "`cluster_map.a_tls_client_takes_the_masters_tls_port`",
     "SNI mismatch and Sentinel-given IP SANs not tested"),
    ("S4", "least privilege (whole suite as a restricted ACL user, ACL LOG empty)",
     "`connection.acl_users_authenticate_and_denied_commands_are_permission_errors` (one user), "
     "`security.every_lock_kind_works_as_the_least_privileged_user` (the README's ACL: every "
     "kind acquired, renewed, waited for, handed over locally, released and force-unlocked, a "
     "multi-lock, an election, after SCRIPT FLUSH too; ACL LOG empty), "
     "`security.a_sentinel_client_works_as_the_least_privileged_user` and "
     "`security.a_cluster_client_works_as_the_least_privileged_user` (the same behind Sentinel "
     "and on all three masters of a Cluster, with an ASK during a migration), "
     "`security.a_handover_the_acl_denies_writes_nothing`, "
     "`security.the_eviction_policy_check_is_optional_for_the_least_privileged_user`, "
     "`security.a_cluster_user_without_asking_is_permission_denied_during_a_migration`",
     "the whole suite does not run as that user"),
    ("S5", "script allowlist", "`lock.every_script_is_named_by_the_sha1_redis_computes` "
     "(constant scripts), `security.every_script_the_server_receives_is_a_constant_one_for_"
     "hostile_names` (MONITOR records every command while every kind and a multi-lock are "
     "acquired, renewed, waited for, released and force-unlocked under hostile and random "
     "names: each EVAL body, SCRIPT LOAD and EVALSHA digest is a constant script's, names "
     "travel only as keys, arguments and channels, no FLUSHALL, the sentinel key survives)",
     "standalone only (no Cluster or Sentinel recording)"),
    ("S6", "tokens unique, from getrandom, across fork()", "`random.tokens_do_not_repeat_across_"
     "buffer_refills_and_threads`, `random.a_million_tokens_from_the_generator_have_no_"
     "duplicate` (10^6 tokens from the generator, `random_token()`, compared as 128-bit "
     "values), `random.a_forked_child_never_repeats_the_parents_next_tokens`, `random.a_token_"
     "is_32_lowercase_hex_characters`; fault F36",
     "10^6 tokens from the generator, not 10^6 acquisitions against a server"),
]



# The user's guide: one row per deployment, its promise, what it does not promise and what the
# server must be configured for, in short (the paragraphs above say it in full; the facts are
# theirs and docs/design/'s, none is added here). The modes are the fault suite's: the rows that
# show each deployment are read from the scenario registry and the results, not written here.
DEPLOYMENTS = [
    ("Redis, single master (`redis://`, any kind)", ("S", "SW"),
     "two holders' validity windows never overlap; release and extend act only on the "
     "acquisition's own instance; an unknown outcome is `ambiguous`, never a hold; a crashed "
     "holder's lock is free after at most its lease; a server that cannot take the lock gives "
     "a typed error",
     "a paused or delayed holder can still act after its lease (an unfenced resource then "
     "loses updates); no fencing token (`simple`); keys lost to eviction or to a restart "
     "without data",
     "`maxmemory-policy noeviction`; AOF `appendfsync always` or a restart delayed past the "
     "longest lease; the clock slewed (NTP), never stepped"),
    ("Redis, single master with fencing (reentrant, fair or write lock + `lease::token()`)",
     ("F", "FW"),
     "as the single master, plus a token that strictly increases with every grant while the "
     "counter survives; a resource that checks it (`fenced_set`, on open and on write) rejects "
     "a late holder's writes",
     "tokens repeat after a rollback of the server's data (lost fsync window, restore from a "
     "backup) or an eviction of the counter (`allkeys-lru`); nothing is fenced unless the "
     "resource checks the token",
     "as the single master; AOF `appendfsync always`, no failover"),
    ("Redis Sentinel (`redis-sentinel://`)", ("FO", "FOW"),
     "what every mode promises (own-instance release and extend, `ambiguous` outcomes, calls "
     "bounded by the wait plus one command timeout, typed errors retried within the wait)",
     "mutual exclusion across a failover: a lock not yet replicated is lost (two holders); "
     "`wait=N` and the lock-delay only narrow that window; an old master that keeps serving "
     "clients that cannot see the failover grants again; fencing tokens can regress",
     "each data node as a single master; `wait=N` (with `min-replicas-to-write`, as F26 runs "
     "it) and the lock-delay (default: one lease) narrow the window, they do not close it"),
    ("Redis Cluster (`redis-cluster://`)", ("FO:F28", "FO:F25C"),
     "every key of a lock (and its fence counter) in one slot: resharding a held lock's slot "
     "moves them together; MOVED and ASK are followed; after a master's failover the client "
     "follows the promoted replica (F25C: its first grant there within 0.2 s of the promotion)",
     "mutual exclusion across a failover (as Sentinel: replication is asynchronous; F25C shows "
     "the overlap); fencing tokens can repeat there",
     "each master as a single master"),
    ("Redlock (`redlock://`, N independent masters)", ("R", "RW"),
     "mutual exclusion of beliefs while a majority of the masters keep their keys",
     "no fencing token (N counters cannot order every grant); pauses and delays act as on a "
     "single master; a holder on a bare quorum loses the lock when one of its masters restarts "
     "without its data or rolled back, or when a quorum evicts",
     "independent masters (no replication between them), each configured as a single master "
     "or restarted only after the longest lease"),
    ("ZooKeeper (`zk://`, Curator's recipes)", ("ZK", "ZKE"),
     "the session is the lease: a holder's belief ends (`valid_until`) before the server frees "
     "the lock, whether the holder is killed, paused or cut off, the server restarts or the "
     "leader is lost or partitioned; no queue jumping; the token (czxid) strictly increases "
     "per ensemble; `fenced_set` checks the holder's node in the write's transaction",
     "no fixed lease; a holder paused past its session and resumed acts on a lost lock unless "
     "it checks `valid_until()` or writes through `fenced_set`; an ensemble given "
     "`server_lag=0`, or a lag below its (syncLimit + 1) x tickTime, lets a follower "
     "partitioned away stretch `valid_until()` past the leader's expiry of the session (Z09; "
     "without `server_lag` an ensemble is assumed to lag 12 s, ZooKeeper's sample zoo.cfg)",
     "an ensemble: the URL's `server_lag` = (syncLimit + 1) x tickTime and a session timeout "
     "above 1.5 x it; session timeout within tickTime x 2 .. x 20 (the negotiated one is used); transaction "
     "log kept (`forceSync=yes`, the default); an ensemble needs a quorum; clocks do not "
     "matter"),
    ("etcd (`etcd://`, the Mutex recipe)", ("ET", "ETC"),
     "the client's lease is the lease: a killed or cut-off holder's belief ends before its "
     "key goes; a leader lost, or a leader or follower partitioned into a minority, keeps "
     "leases and keys; the token "
     "(create revision) strictly increases per cluster",
     "no fixed lease; a revoked lease deletes the key at once and the holder learns it from "
     "its watch milliseconds later (check `valid_until()` before writing)",
     "a quorum of members (a cluster); docs/design/etcd.md states no other server setting"),
    ("PostgreSQL advisory locks (`postgresql://`, the default kinds)", ("PGA", "PGAW"),
     "the lock belongs to a server session, freed the instant it ends; `valid_until()` is the "
     "last proven check + `dlock_check`; the URL parser rejects `dlock_check` >= the keepalive "
     "bound",
     "a belief-overlap window of up to `dlock_check` after the session ends; not replicated: "
     "a failover loses every lock and `dlock_fence` may regress; transaction-mode poolers "
     "(PgBouncer) break session locks",
     "the keepalive settings dlock sends (`tcp_keepalives_*`, `tcp_user_timeout`, "
     "`client_connection_check_interval`) kept; direct session-mode connections, no pooler or "
     "proxy keeping a dead client's session; no failover (the locks are not replicated)"),
    ("PostgreSQL lease rows (`lock_kind::lease`, `dlock_lease`)", ("PGL", "PGLW"),
     "the row expires on the database clock after the lease and outlives sessions and "
     "restarts; `valid_until()` = send time + lease - drift, before the database's expiry; a "
     "token from `dlock_fence`",
     "a database clock stepped forward; a failover that loses the row (asynchronous standby) "
     "means two holders, and the token may regress there",
     "the database clock not stepped; a synchronous standby (or no failover)"),
    ("PostgreSQL ShedLock rows", ("PGS", "PGSW"),
     "as lease rows (the database clock)",
     "no token; a forward clock step shortens leases; a row lost by an asynchronous failover "
     "means two holders",
     "as lease rows; no Java side on client time in a non-UTC zone (it breaks exclusion: "
     "docs/design/postgres.md)"),
    ("PostgreSQL versioned rows (pglock's table)", ("PGV", "PGVW"),
     "no clock in the table; a dead holder's row is taken over only a whole lease after a "
     "waiter first saw its version (up to two leases)",
     "unequal clock rates or leases between clients; a holder paused past its lease is taken "
     "over and learns it only at its next heartbeat (use the token); failover as lease rows",
     "the same lease on every client; a synchronous standby (or no failover)"),
]


def measured_text(r):
    if r.get("skipped"):
        return "skipped: " + r["skipped"]
    if r.get("error"):
        return "harness error: " + r["error"]
    viol = [c for c, v in sorted(r.get("measured", {}).items()) if v == "violated"]
    text = "violated: " + ", ".join(viol) if viol else "no violation"
    failed = [p["name"] + " (" + p["detail"] + ")" for p in r.get("probes", []) if not p["passed"]]
    if failed:
        text += "; probe FAILED: " + "; ".join(failed)
    return text


def witness_lines(r, most=12):
    """The violated checks of the run's checker report, with their witnesses."""
    out, inside = [], False
    for ln in r.get("report", "").splitlines():
        if ln and not ln.startswith(" "):
            inside = "VIOLATED" in ln
        if inside and not ln.lstrip().startswith("#"):
            out.append(ln)
    return out[:most] or ["(no checker violation: see the probes)"]


def expected_text(r):
    asserted = [c + "=" + v for c, v in sorted(r.get("expect", {}).items()) if v != "ok"]
    base = r.get("expected", "")
    return base + (" [" + ", ".join(asserted) + "]" if asserted else "")


RANDOM_INTRO = (
    "`tests/fault/random.sh SECONDS SEED MODE`: a seeded schedule of faults that keep the "
    "model (tests/fault/random_tier.py: dropped, held and slow replies, resets, blackholes, "
    "nft partitions of a route or of a server, server stalls, worker kill -9 with a "
    "replacement, SCRIPT FLUSH, server kill -9 with `appendfsync always` (not for Redlock), "
    "server clocks stepped back and running 0.3 %% fast or slow, workers' wall clocks stepped "
    "by an hour; no forward step, outside the model; in mode FO, a Sentinel-managed master, "
    "coordinated failovers: writes paused until every replica caught up, then SENTINEL "
    "FAILOVER, with the master's cuts kept under down-after-milliseconds and no server "
    "restart or clock step, so that no uncoordinated failover, outside the model, happens), "
    "judged as SAFE. Each fault is counted when it fired (the proxy triggered, packets were "
    "dropped, a call met the window, the server's TIME moved, the sentinels named a new "
    "master), not when it was scheduled; the liveness bound asserts an acquisition in every "
    "%s of the time outside every fault and the %s after it (a failover: a lease more). The "
    "batch of 2026-11-24 predates both; its table is copied in its notes.")


def random_runs(random_dir):
    """The randomised tier's result files in random_dir or one folder below it."""
    runs = []
    paths = glob.glob(os.path.join(random_dir, "RND-*.json"))
    paths += glob.glob(os.path.join(random_dir, "*", "RND-*.json"))
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    return sorted(runs, key=lambda r: (r["seed"], r["mode"]))


def fired_text(r):
    """"12/14 (partition 2/2, ...)": faults fired of those scheduled, per kind that ran."""
    f = r.get("faults")
    if not f:
        return "-"
    kinds = ["%s %d/%d" % (k, c["fired"], c["scheduled"]) for k, c in f.items() if c["scheduled"]]
    return "%d/%d (%s)" % (sum(c["fired"] for c in f.values()),
                           sum(c["scheduled"] for c in f.values()), ", ".join(kinds))


def random_section(random_dirs):
    """The randomised tier's runs, one table per folder (random.sh writes the last run per mode
    to its results folder; a batch kept one folder per run below it is listed whole, by seed),
    each followed by the folder's NOTES.md (what was found and how it was judged)."""
    if isinstance(random_dirs, str):
        random_dirs = [random_dirs]
    out = []
    for random_dir in random_dirs or []:
        runs = random_runs(random_dir)
        notes = os.path.join(random_dir, "NOTES.md")
        if not runs and not os.path.exists(notes):
            continue
        out += ["", "### `%s`" % random_dir, ""]
        if runs:
            out += ["| Mode | Seed | Duration | Commit | Faults fired / scheduled | Quiet time, "
                    "longest gap | Measured | Verdict |", "|---|---|---|---|---|---|---|---|"]
        for r in runs:
            live = r.get("liveness")
            out.append("| %s | %d | %.0f s | %s | %s | %s | %s | %s |" % (
                r["mode"], r["seed"], r["duration_s"], short_commit(r), fired_text(r),
                "%.0f s, %d ms" % (live["quiet_s"], live["longest_quiet_gap_ms"]) if live
                else "-", measured_text(r), r["verdict"]))
        if not runs:
            out += ["No result file of the randomised tier is in `%s`; its notes:" % random_dir]
        if os.path.exists(notes):
            with open(notes) as f:
                out += [""] + f.read().rstrip("\n").splitlines()
    if not out:
        return []
    import random_tier
    return ["", "## Randomised runs", "", RANDOM_INTRO % (
        "%.1f s" % (random_tier.LIVE_MS / 1000), "%.1f s" % (random_tier.RECOVERY_MS / 1000))] + out



MODE_ORDER = ["S", "F", "R", "FO", "SW", "FW", "RW", "FOW", "ZK", "ZKE", "PGA", "PGL", "PGS",
              "PGV", "PGAW", "PGLW", "PGSW", "PGVW", "ET", "ETC"]
BACKEND_MODES = ("ZK", "ZKE", "PGA", "PGL", "PGS", "PGV", "PGAW", "PGLW", "PGSW", "PGVW", "ET",
                 "ETC")
RESULT_NAME = re.compile(r"^([A-Za-z0-9]+)-([A-Z]+)\.json$")
ENOUGH = 5  # runs per row that issue 24 asks for


def load_results(dirs):
    """Every result file (ID-MODE.json, not the randomised tier's RND-*) in the folders or
    below them, each file once."""
    seen, out = set(), []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "**", "*.json"), recursive=True)):
            m = RESULT_NAME.match(os.path.basename(path))
            if not m or m.group(1) == "RND" or os.path.realpath(path) in seen:
                continue
            seen.add(os.path.realpath(path))
            with open(path) as f:
                r = json.load(f)
            r["_path"] = path
            out.append(r)
    return out


def merge(results, scenarios):
    """(ID, mode) -> its runs, oldest first, for every row the registry has (no run: an empty
    list); and the results of rows the registry no longer has."""
    rows = {(sid, m): [] for sid, sc in scenarios.items() for m in sc.modes + sc.ext_modes}
    stray = []
    for r in results:
        (rows[(r["id"], r["mode"])] if (r["id"], r["mode"]) in rows else stray).append(r)
    for runs in rows.values():
        runs.sort(key=lambda r: r.get("when", ""))
    return rows, stray


def row_key(k):
    return (k[0][0] if k[0][0] in "ZPE" else "", k[0],
            MODE_ORDER.index(k[1]) if k[1] in MODE_ORDER else 99)


def short_commit(r):
    c = r.get("commit")
    if not c:
        return "unrecorded"
    return c[:10] + ("-dirty" if c.endswith("-dirty") else "")


def summary(runs):
    """runs, as expected, skipped, the seeds, the commits of one row's results."""
    ran = [r for r in runs if r["verdict"] != "skipped"]
    good = sum(1 for r in ran if r["verdict"] == "as expected")
    seeds = {}
    for r in ran:
        seeds[r["seed"]] = seeds.get(r["seed"], 0) + 1
    seed_text = ", ".join("%d" % s + (" (x%d)" % n if n > 1 else "")
                          for s, n in sorted(seeds.items())) or "-"
    commits = []
    for r in ran:
        if short_commit(r) not in commits:
            commits.append(short_commit(r))
    return len(ran), good, len(runs) - len(ran), seed_text, ", ".join(commits) or "-"


def runs_text(n, good, skipped):
    text = "%d / %d" % (good, n)
    if n < ENOUGH:
        text += " (fewer than %d)" % ENOUGH if n else " (no run)"
    if skipped:
        text += ", %d skipped" % skipped
    return text


def failed_checks(r):
    """The checks whose measured outcome is not the expected one."""
    out = []
    for c, want in sorted(r.get("expect", {}).items()):
        got = r.get("measured", {}).get(c)
        if want != "any" and got is not None and got != want:
            out.append("%s (expected %s, measured %s)" % (c, want, got))
    return out


def cell(text):
    return str(text).replace("|", "/").replace("\n", " ")


def row_table(keys, rows, scenarios):
    out = ["| ID | Mode | Fault | What it checks | Expected | Measured (last run) | As expected "
           "/ runs | Seeds | Commits |", "|---|---|---|---|---|---|---|---|---|"]
    for k in keys:
        sc, runs = scenarios[k[0]], rows[k]
        n, good, skipped, seeds, commits = summary(runs)
        ran = [r for r in runs if r["verdict"] != "skipped"] or runs
        last = ran[-1] if ran else None
        mode = k[1] + (" (ext)" if k[1] in sc.ext_modes else "")
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            k[0], mode, cell(sc.title), cell(sc.checks),
            cell(expected_text(last) if last else sc.outcome.get(k[1], "")),
            cell(measured_text(last)) if last else "-", runs_text(n, good, skipped), seeds,
            commits))
    return out


def totals(keys, rows):
    runs = [r for k in keys for r in rows[k]]
    ran = [r for r in runs if r["verdict"] != "skipped"]
    good = sum(1 for r in ran if r["verdict"] == "as expected")
    few = sum(1 for k in keys if 0 < summary(rows[k])[0] < ENOUGH)
    none = sum(1 for k in keys if summary(rows[k])[0] == 0)
    text = ("%d rows; %d runs: %d as expected, %d NOT as expected" %
            (len(keys), len(ran), good, len(ran) - good))
    if len(runs) > len(ran):
        text += ", %d skipped" % (len(runs) - len(ran))
    text += ("; %d rows with fewer than %d runs, %d of them without any." %
             (few + none, ENOUGH, none))
    return text


def bad_runs(keys, rows):
    out = []
    for k in keys:
        for r in rows[k]:
            if r["verdict"] in ("as expected", "skipped"):
                continue
            checks = failed_checks(r)
            probes = [p["name"] + " (" + p["detail"] + ")" for p in r.get("probes", [])
                      if not p["passed"]]
            out.append("- **%s %s seed %d** (%s, commit %s, %s%s): expected %s; measured %s. "
                       "Checks that differ: %s. Probes that failed: %s.%s Witness from the "
                       "checker:" % (
                           r["id"], r["mode"], r["seed"], os.path.dirname(r["_path"]),
                           short_commit(r), r.get("when", "?"),
                           ", load average %.2f at its start" % r["loadavg"][0]
                           if r.get("loadavg") else "", expected_text(r),
                           measured_text(r), ", ".join(checks) or "none",
                           "; ".join(probes) or "none",
                           " Harness error: %s." % r["error"] if r.get("error") else ""))
            out += ["", "  ```"] + ["  " + ln for ln in witness_lines(r)] + ["  ```", ""]
    return out or ["None."]


CLUSTER_ROWS = ("F28", "F25C")  # mode FO on a redis-cluster:// URL, not on Sentinel


def deployment_rows(spec, scenarios):
    """The (ID, mode) rows of one deployment: "FO" is every FO row but the Cluster's (F28,
    F25C), "FO:F28" only F28's."""
    keys = []
    for m in spec:
        mode, _, only = m.partition(":")
        for sid, sc in scenarios.items():
            if mode in sc.modes + sc.ext_modes and (sid == only if only else
                                                    not (mode == "FO" and sid in CLUSTER_ROWS)):
                keys.append((sid, mode))
    return sorted(keys, key=row_key)


def deployment_table(rows, scenarios):
    out = ["| Deployment | Promised | Not promised | The server must be configured for | Shown "
           "by (fault rows; as expected / runs) |", "|---|---|---|---|---|"]
    for name, spec, promised, not_promised, config in DEPLOYMENTS:
        keys = deployment_rows(spec, scenarios)
        safe, viol = [], []
        for k in keys:
            expect = scenarios[k[0]].expect.get(k[1])
            label = k[0] + ("" if k[1] == spec[0].partition(":")[0] else " " + k[1])
            if label not in safe + viol:
                (viol if expect and "violated" in expect.values() else safe).append(label)
        runs = [r for k in keys for r in rows[k] if r["verdict"] != "skipped"]
        good = sum(1 for r in runs if r["verdict"] == "as expected")
        shown = "safe: " + ", ".join(safe) if safe else ""
        if viol:
            shown += ("; " if shown else "") + "expected to violate: " + ", ".join(viol)
        out.append("| %s | %s | %s | %s | %s (%d / %d) |" % (
            name, cell(promised), cell(not_promised), cell(config), shown, good, len(runs)))
    return out


TEST_NAME = re.compile(r"`([a-z0-9_]+\.[a-z0-9_]+)`")
FAULT_ID = re.compile(r"\b(F\d\d[a-zA-Z]?)\b")


def coverage_tests(covered_by):
    """The gtest names (`suite.test`) a COVERAGE row cites, in order."""
    out = []
    for name in TEST_NAME.findall(covered_by):
        if name not in out:
            out.append(name)
    return out


def coverage_results(cases, tests, rows, scenarios):
    """Each B/S case's tests with their last result (from the file coverage_tests.py wrote)
    and the fault rows it cites with their runs; "no test" where it names none."""
    out = []
    for cid, case, by, gap in cases:
        names = coverage_tests(by)
        counts = {}
        for n in names:
            res = tests.get("tests", {}).get(n, {}).get("result", "not run")
            counts.setdefault(res, []).append(n)
        parts = []
        for res in sorted(counts, key=lambda x: (x != "passed", x)):
            ns = counts[res]
            parts.append("%d %s" % (len(ns), res) + ("" if res == "passed" else
                                                      " (" + ", ".join(ns) + ")"))
        faults = []
        for sid in FAULT_ID.findall(by):
            if sid in scenarios and sid not in faults:
                faults.append(sid)
        for sid in faults:
            runs = [r for k, v in rows.items() if k[0] == sid for r in v
                    if r["verdict"] != "skipped"]
            parts.append("fault %s: %d / %d as expected" % (
                sid, sum(1 for r in runs if r["verdict"] == "as expected"), len(runs)))
        out.append((cid, case, by, gap, "; ".join(parts) or "no test"))
    return out


def load_tests(path):
    if not path:
        return {}
    with open(path) as f:
        return json.load(f)

REDIS_INTRO = (
    "Each run is one `tests/fault/faultrun.py run ID MODE --seed N` (the ctest test "
    "`fault.ID.MODE` runs seed 1): real redis-server processes, dlock's own fault "
    "proxy between every worker and every server, 3 workers doing a read-modify-write "
    "under the lock, and the history checker `dlock_check` judging the merged histories "
    "(reliability.md §8). *Expected* is the row of reliability.md §7.3 (SAFE: no "
    "violation of any check; EXPECT-VIOL: the checker must find the named violation "
    "with a witness; LIVE(x): no gap longer than x while someone waited). Modes: S = "
    "single master (simple lock, counter resource), F = single master with fencing "
    "(reentrant lock, `fenced_set` resource), R = Redlock over 3 masters (counter "
    "resource), FO = a Sentinel-managed master (1 master, 2 replicas, 3 sentinels; "
    "simple lock through a `redis-sentinel://` URL, counter resource; the fault proxy stands "
    "in front of every data node and the topology announces the proxies' addresses, so "
    "workers, replicas and sentinels all go through it and a fault on the master's route "
    "hits the master for everyone: a blackhole is a partition that fails over; F27 "
    "instead cuts by source address with nftables; F28: a 3-master "
    "Cluster through a `redis-cluster://` URL, reentrant lock with `fenced_set`; F25C: the "
    "same with a replica per master); SW, FW, RW, "
    "FOW: the same with the worker's watchdog (auto-renewed leases, checker rule LOSS). "
    "Checks in brackets are asserted as stated; every other check must "
    "be ok. Mode \"(ext)\": a mode CI leaves out for time (`ctest -L extended`). Probes are "
    "the harness's own assertions (the fault took effect, calls "
    "stayed bounded, the resource's acknowledgements match its log). F12-F14, F17 and F27 "
    "move the whole run into a network namespace of its own (`ip netns`, root) and drop packets "
    "there with nftables rules; where that is not permitted they are reported as skipped, "
    "with the reason.")

BACKEND_INTRO = (
    "`tests/fault/backends.py`: the same workload and checker as above on a real "
    "ZooKeeper server (Debian's jars, tickTime 200 ms), PostgreSQL 15 "
    "(initdb + postmaster) or etcd, 3 workers in mode S on a `zk://`, `postgresql://` "
    "or `etcd://` URL doing a read-modify-write of an append-only file under the lock "
    "(RESOURCE judges it). Modes: ZK = standalone ZooKeeper, InterProcessMutex, 2 s session "
    "(the lease; each worker through its own fault-proxy route); ZKE = a 3-server ensemble; "
    "PGA = advisory lock (`simple`), `dlock_check` = fixed lease = 1 s, `dlock_keepalive="
    "1:1:2:3000` (server bound 3 s); PGL = `dlock_lease` rows, PGS = ShedLock rows, PGV = "
    "versioned rows (pglock's table), fixed lease 1 s; ET = one etcd 3.4 member, the Mutex "
    "recipe, the client's lease (TTL 2 s) as the lease, each worker through its own proxy "
    "route; ETC = a 3-member etcd cluster. Every row is extended (`ctest -L extended`; CI's "
    "fault tier does not run them); the probes assert that the fault landed inside a hold and "
    "that others acquired during or after it (no vacuous SAFE).")

COMMAND = ("python3 tests/fault/faultrun.py safety-doc --random docs/fault-results/"
           "2026-11-24-random --random docs/fault-results/2026-11-27-random --random "
           "docs/fault-results/2026-11-28-random-failover --tests "
           "docs/fault-results/coverage-tests.json docs/fault-results/2026-11-27-* "
           "docs/fault-results/2026-11-28-followers "
           "docs/fault-results/2026-11-28-z09-server-lag "
           "docs/fault-results/2026-11-28-zk-server-lag-default "
           "docs/fault-results/2026-11-28-z10 docs/fault-results/2026-11-28-e07 "
           "docs/fault-results/2026-11-28-pg-tries-wait "
           "docs/fault-results/2026-11-28-e07-watch-counter "
           "docs/fault-results/2026-11-28-zk-single-thread "
           "docs/fault-results/2026-11-28-zk-pipelined "
           "docs/fault-results/2026-11-28-zk-handoff "
           "docs/fault-results/2026-11-28-f25-cluster "
           "docs/fault-results/2026-11-28-pg-failover "
           "docs/fault-results/2026-11-28-fo-cells "
           "docs/fault-results/2026-11-28-pg-watchdog "
           "> docs/SAFETY.md")


def render(results_dirs, scenarios, random_dir=None, tests_path=None):
    if isinstance(results_dirs, str):
        results_dirs = [results_dirs]
    rows, stray = merge(load_results(results_dirs), scenarios)
    keys = sorted(rows, key=row_key)
    redis = [k for k in keys if k[1] not in BACKEND_MODES]
    backend = [k for k in keys if k[1] in BACKEND_MODES]
    every = [r for k in keys for r in rows[k]]
    when = [r["when"] for r in every if r.get("when")]
    unrecorded = [r for r in every if not r.get("commit")]
    unrecorded_in = sorted({d for d in results_dirs for r in unrecorded
                            if os.path.realpath(r["_path"]).startswith(
                                os.path.realpath(d) + os.sep)})
    tests = load_tests(tests_path)
    out = ["# Safety: what dlock promises under failure, and the fault runs that check it", "",
           "<!-- generated by tests/fault/safety_doc.py from the result files in "
           "docs/fault-results/; do not edit by hand. Made with:", "  " + COMMAND, "-->", "",
           "## Which deployment promises what", "",
           "One row per way to deploy dlock: what it promises, what it does not, what the "
           "server must be configured for, and the fault rows (below) that show it: \"safe\" "
           "rows expect no violation, \"expected to violate\" rows show a limit that is not "
           "promised (the checker must find the violation). The sections after the table say "
           "the same at length.", ""]
    out += deployment_table(rows, scenarios)
    out += ["", PROMISES, "",
            "## How the results were collected", "",
            "Every row below merges every result file found in: %s (%s to %s). A row's "
            "*As expected / runs* counts its runs over all seeds and folders; *Seeds* lists "
            "them; *Commits* names the commits the runs were made on, read from the result "
            "files. Results made before the campaign script recorded commits (%d of the %d "
            "files here, in %s) have no commit field: they show as \"unrecorded\". A row with fewer than %d runs is marked "
            "\"fewer than %d\". The Redis rows' runs of 2026-11-24 (seed 1, the table this page "
            "showed up to commit 4fc4427) are not counted: their result files were not kept, "
            "so nothing here can trace them. A campaign is run with `scripts/fault-campaign.sh "
            "--seeds 1-5 OUT` (docs/fault-results/README.md)." % (
                ", ".join("`%s`" % d for d in results_dirs), min(when, default="-"),
                max(when, default="-"), len(unrecorded), len(every),
                ", ".join("`%s`" % d for d in unrecorded_in) or "none", ENOUGH, ENOUGH), "",
            "## The Redis fault scenarios", "", REDIS_INTRO, "", totals(redis, rows), ""]
    out += row_table(redis, rows, scenarios)
    out += ["", "## ZooKeeper, PostgreSQL and etcd scenarios (extended)", "", BACKEND_INTRO, "",
            totals(backend, rows), ""]
    out += row_table(backend, rows, scenarios)
    out += ["", "## Runs that did not go as expected", ""] + bad_runs(keys, rows)
    skipped = [r for k in keys for r in rows[k] if r["verdict"] == "skipped"]
    if skipped:
        out += ["", "## Skipped runs", "", "These did not run where they were made, so they "
                "prove nothing there:", ""]
        out += ["- **%s %s seed %d** (%s): %s" % (r["id"], r["mode"], r["seed"],
                                                  os.path.dirname(r["_path"]), r["skipped"])
                for r in skipped]
    if stray:
        out += ["", "Result files of rows the registry no longer has (not counted): " +
                ", ".join(sorted(r["_path"] for r in stray)) + "."]
    out += random_section(random_dir)
    out += ["", "## Rows of reliability.md §7.3 not covered yet", "",
            "| ID | Fault | Why not |", "|---|---|---|"]
    for sid, what, why in NOT_COVERED:
        out.append("| %s | %s | %s |" % (sid, what, why))
    out += ["", "## Bad input, protocol errors and security (reliability.md §7.4, §7.5)", "",
            "Each case names the tests that cover it (GoogleTest `suite.test`, and the fault "
            "rows above) and what no test covers yet. *Last result* is read from %s: "
            "`tests/fault/coverage_tests.py` runs every named test and records its result "
            "(made %s on commit %s by `%s`); \"not run\" is a test missing from that file, "
            "\"no test\" a case that names none." % (
                "`%s`" % tests_path if tests_path else "no results file",
                tests.get("when", "-"), tests.get("commit", "-"), tests.get("command", "-")), "",
            "| ID | Case | Covered by | Not covered | Last result |", "|---|---|---|---|---|"]
    for cid, case, by, gap, res in coverage_results(COVERAGE, tests, rows, scenarios):
        out.append("| %s | %s | %s | %s | %s |" % (cid, case, by, gap or "-", res))
    out += ["", "## Running it", "",
            "- Deterministic tier, CI's seed: `ctest --test-dir build/ci -L fault -LE "
            "extended` is what CI runs; `ctest --test-dir build/ci -L extended` runs the modes "
            "CI leaves out for time (%s)." % ", ".join(
                "%s %s" % (sid, "/".join(sc.ext_modes)) for sid, sc in sorted(scenarios.items())
                if sc.ext_modes),
            "- Every row, several seeds (what this page counts): `scripts/fault-campaign.sh "
            "[--seeds 1-5] [--only REGEX] [--stop-at HH:MM] [--build build/ci] "
            "docs/fault-results/DATE-campaign` (resumable; adds seeds to an existing folder), "
            "then regenerate this page: `%s`." % COMMAND,
            "- The B/S table's results: `python3 tests/fault/coverage_tests.py build/ci "
            "docs/fault-results/coverage-tests.json`.",
            "- One scenario: `python3 tests/fault/faultrun.py --worker "
            "build/ci/tests/fault/dlock_fault_worker --proxy build/ci/tests/fault/"
            "dlock_fault_proxy --check build/ci/tests/fault/dlock_check run F02 F --seed 7 "
            "--keep` (artifacts: histories, server logs, the checker's report).",
            "- Randomised tier (Jepsen-style schedule of faults that keep the model, so SAFE is "
            "expected): `tests/fault/random.sh SECONDS SEED [MODE] [BUILD_DIR] [RESULTS_DIR]`; "
            "it prints the checker's verdict and the faults that fired.", ""]
    return "\n".join(out)


def add_arguments(ap):
    """The command line, for this file and for `faultrun.py safety-doc`."""
    ap.add_argument("results", nargs="+", help="result folders (searched recursively)")
    ap.add_argument("--random", action="append",
                    help="a results folder of the randomised tier (repeatable)")
    ap.add_argument("--tests", help="coverage_tests.py's results file (the B/S table)")


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="safety_doc.py")
    add_arguments(ap)
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import faultrun
    sys.stdout.write(render(a.results, faultrun.SCENARIOS, a.random, a.tests))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

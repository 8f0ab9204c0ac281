#!/usr/bin/env bash
# Black-box tests of the dlock binary. Usage: cli_test.sh CASE DLOCK_BINARY REDIS_URL
# (scripts/with-redis.sh appends the URL of a private server). Every wait is bounded.
set -uo pipefail
case_name=$1 dlock=$2 url=$3
export DLOCK_URL=$url
port=${url##*:}
rcli() { redis-cli -p "$port" --raw "$@"; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() { # expect_rc WANT CMD...
  local want=$1; shift
  "$@"; local rc=$?
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want"
}
# wait_for SECONDS CMD...: poll a condition with a deadline (no fixed sleeps as sync)
wait_for() {
  local until=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $until ] && return 1; sleep 0.02; done
}
held() { [ -n "$(rcli EXISTS "$1" | grep 1)" ]; }

case $case_name in
exec_exit_codes)
  expect_rc 7 "$dlock" exec n1 -- sh -c 'exit 7'
  expect_rc 0 "$dlock" exec n1 -- true
  expect_rc 137 "$dlock" exec n1 -- sh -c 'kill -9 $$'
  expect_rc 64 "$dlock" exec --wait 3x n1 -- true
  expect_rc 0 "$dlock" exec --kind read n1r -- true
  expect_rc 0 "$dlock" exec --kind write n1w -- true
  expect_rc 0 "$dlock" exec --kind fair n1f -- true
  out=$("$dlock" exec envcheck -- sh -c 'echo "$DLOCK_NAME $DLOCK_FENCING_TOKEN"') || fail "env run"
  [[ $out =~ ^envcheck\ [0-9]+$ ]] || fail "env: '$out'"
  out2=$("$dlock" exec --kind simple envsimple -- sh -c 'echo "[$DLOCK_FENCING_TOKEN]"')
  [ "$out2" = "[]" ] || fail "simple lock has no token: '$out2'"
  # --wait 0 on a held lock: 75
  "$dlock" exec held1 -- sleep 30 & holder=$!
  wait_for 5 held held1 || fail "holder never acquired"
  expect_rc 75 "$dlock" exec --wait 0 held1 -- true
  expect_rc 75 "$dlock" exec --wait 200ms held1 -- true
  kill -TERM $holder; wait $holder
  # command not found / not executable: 127 / 126, and the lock is released again
  expect_rc 127 "$dlock" exec nx1 -- /nonexistent/command
  printf 'echo hi\n' > "$tmp/noexec"; chmod 0644 "$tmp/noexec"
  expect_rc 126 "$dlock" exec nx1 -- "$tmp/noexec"
  held nx1 && fail "lock kept after a failed exec"
  # usage errors: no command, '--' outside exec, --lease 0
  expect_rc 64 "$dlock" exec n1
  expect_rc 64 "$dlock" status n1 -- true
  expect_rc 64 "$dlock" exec --lease 0 n1 -- true
  "$dlock" --version | grep -Eq '^dlock [0-9]' || fail "--version"
  # unreachable server: 69 (the failures case checks the message and the time)
  DLOCK_URL=redis://127.0.0.1:1 expect_rc 69 "$dlock" exec n2 -- true
  ;;
failures)
  # Every failure of dlock itself: its own exit code (never 1), the cause, what to do.
  # expect_fail WANT_RC MAX_SECONDS TEXT CMD...: exits WANT_RC within MAX_SECONDS and says TEXT.
  # MAX_SECONDS is a bound against waiting out a timeout or a --wait (15 s: far above a start
  # of a sanitizer build on a loaded machine, which took 2 s in CI), not a speed target.
  expect_fail() {
    local want=$1 max=$2 text=$3; shift 3
    local t0=$(date +%s%N)
    "$@" 2>"$tmp/err"; local rc=$?
    local ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$tmp/err")"
    grep -qF -- "$text" "$tmp/err" || fail "'$*' did not say '$text': $(cat "$tmp/err")"
    [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "'$*': not one line: $(cat "$tmp/err")"
    [ "$ms" -le $((max * 1000)) ] || fail "'$*' took $ms ms (at most ${max}s expected)"
    cat "$tmp/err" # the messages, for the log
  }
  # A refused connection and a name that does not resolve are definite answers, with the
  # address and the system's reason (a timeout would say so): exec --wait 30s does not wait.
  expect_fail 69 15 "connect 127.0.0.1:1: Connection refused" \
    env DLOCK_URL=redis://127.0.0.1:1 "$dlock" exec x -- true
  expect_fail 69 15 "is redis-server running there?" \
    env DLOCK_URL=redis://127.0.0.1:1 "$dlock" exec --wait 30s x -- true
  expect_fail 69 15 "resolve no-such-host.invalid:6379: Host not found" \
    env DLOCK_URL=redis://no-such-host.invalid:6379 "$dlock" exec x -- true
  expect_fail 69 15 "check the host name" \
    env DLOCK_URL=redis://no-such-host.invalid:6379 "$dlock" status x
  expect_fail 69 15 "Host not found" \
    env DLOCK_URL=redis://no-such-host.invalid:6379 "$dlock" exec --wait 30s x -- true
  expect_fail 69 15 "connect unix:$tmp/none.sock" \
    env DLOCK_URL=unix://$tmp/none.sock "$dlock" list
  # A key that holds a string: 65, the server's text, and what to do; the child never runs.
  rcli SET notalock 1 >/dev/null
  expect_fail 65 15 "'notalock' holds a string, not a lock" "$dlock" exec notalock -- touch "$tmp/ran"
  grep -q "WRONGTYPE" "$tmp/err" || fail "the server's text is missing: $(cat "$tmp/err")"
  [ -e "$tmp/ran" ] && fail "the command ran without the lock"
  expect_fail 65 15 "'notalock' holds a string" "$dlock" exec --kind fair notalock -- true
  expect_fail 65 15 "'notalock' holds a string that is not a lock token, not a lock" "$dlock" status notalock
  expect_fail 65 15 "not a lock" "$dlock" unlock --force notalock
  [ "$(rcli GET notalock)" = 1 ] || fail "unlock --force changed a key that is no lock"
  # Out of memory (maxmemory 1, noeviction): 76 with the server's OOM text.
  rcli CONFIG SET maxmemory-policy noeviction >/dev/null
  rcli CONFIG SET maxmemory 1 >/dev/null
  expect_fail 76 15 "server out of memory" "$dlock" exec oom1 -- touch "$tmp/ran"
  grep -q "OOM command not allowed" "$tmp/err" || fail "the server's OOM text is missing: $(cat "$tmp/err")"
  grep -q "raise maxmemory" "$tmp/err" || fail "no advice: $(cat "$tmp/err")"
  rcli CONFIG SET maxmemory 0 >/dev/null
  [ -e "$tmp/ran" ] && fail "the command ran without the lock"
  # A wrong password: 69 (the product page); an ACL without the scripts: 77 with the server's NOPERM text.
  rcli ACL SETUSER alice on '>right' '~*' '&*' '+@all' >/dev/null
  rcli ACL SETUSER bob on '>pw' '~*' '&*' '+@all' '-evalsha' '-eval' >/dev/null
  expect_fail 69 15 "authentication failed" \
    env DLOCK_URL="redis://alice:wrong@127.0.0.1:$port" "$dlock" exec a1 -- true
  grep -q "wrong" "$tmp/err" && fail "the password appears: $(cat "$tmp/err")"
  grep -q "WRONGPASS" "$tmp/err" || fail "the server's text is missing: $(cat "$tmp/err")"
  expect_fail 77 15 "permission denied" \
    env DLOCK_URL="redis://bob:pw@127.0.0.1:$port" "$dlock" exec a1 -- true
  grep -q "NOPERM" "$tmp/err" || fail "the server's text is missing: $(cat "$tmp/err")"
  # Usage: an unknown command says so; no command says one is required.
  expect_fail 64 15 "unknown command 'frobnicate'" "$dlock" frobnicate x
  expect_fail 64 15 "unknown command 'frobnicate'" "$dlock" --url "$url" frobnicate
  expect_fail 64 15 "a command is required" "$dlock"
  expect_fail 64 15 "unknown URL scheme" env DLOCK_URL=http://x "$dlock" status x
  ;;
status_watch)
  # The live view under tmux: the holder appears and disappears, q quits with 0.
  command -v tmux >/dev/null || { echo "SKIP: tmux is not installed (scripts/deps.sh)"; exit 77; }
  sock="$tmp/tmux.sock"
  tm() { tmux -S "$sock" "$@"; }
  pane() { tm capture-pane -p -t w 2>/dev/null; }
  pane_has() { pane | grep -qF -- "$1"; }
  pane_lacks() { ! pane | grep -qF -- "$1"; }
  tm -f /dev/null new-session -d -s w -x 150 -y 30 \
    "DLOCK_URL=$url $dlock status --watch --interval 100ms wl1 wl2; echo \$? > $tmp/watch.rc"
  wait_for 10 pane_has "wl1  not locked" || fail "no view: $(pane)"
  pane_has "(q quits)" || fail "no key hint: $(pane)"
  "$dlock" exec wl1 -- sleep 30 & holder=$!
  wait_for 10 pane_has "holder  " || fail "the holder never appeared: $(pane)"
  wait_for 10 pane_has "lease   [" || fail "no lease bar: $(pane)"
  pane_has "wl1  lock  fencing 1" || fail "kind and fencing: $(pane)"
  pane_has "wl2  not locked" || fail "second lock: $(pane)"
  kill -TERM $holder; wait $holder
  wait_for 10 pane_has "wl1  not locked" || fail "the holder never disappeared: $(pane)"
  pane_lacks "holder  " || fail "a holder is still shown: $(pane)"
  tm send-keys -t w q
  wait_for 10 test -s "$tmp/watch.rc" || fail "q did not end the view: $(pane)"
  [ "$(cat "$tmp/watch.rc")" = 0 ] || fail "the view exited $(cat "$tmp/watch.rc")"
  tm kill-server 2>/dev/null
  # list --watch in tmux; SIGTERM ends it with 0.
  tm -f /dev/null new-session -d -s w -x 150 -y 30 \
    "DLOCK_URL=$url $dlock list --watch --interval 100ms 'wl*'; echo \$? > $tmp/list.rc"
  wait_for 10 pane_has "no locks match 'wl*'" || fail "no list view: $(pane)"
  "$dlock" exec wl3 -- sleep 30 & holder=$!
  wait_for 10 pane_has "wl3" || fail "list --watch never showed wl3: $(pane)"
  kill -TERM $holder; wait $holder
  wait_for 10 pane_has "no locks match 'wl*'" || fail "wl3 never left the list: $(pane)"
  viewer=$(pgrep -P "$(tm list-panes -t w -F '#{pane_pid}')") || fail "no view process"
  kill -TERM $viewer
  wait_for 10 test -s "$tmp/list.rc" || fail "SIGTERM did not end the view"
  [ "$(cat "$tmp/list.rc")" = 0 ] || fail "list view exited $(cat "$tmp/list.rc")"
  tm kill-server 2>/dev/null
  # Not a terminal: plain blocks, one per refresh, each headed by '---'.
  "$dlock" status --watch --interval 100ms wl1 > "$tmp/plain" & viewer=$!
  wait_for 10 sh -c "[ \$(grep -c '^--- ' $tmp/plain) -ge 3 ]" || fail "no refreshes: $(cat "$tmp/plain")"
  kill -INT $viewer; wait $viewer; rc=$?
  [ $rc -eq 0 ] || fail "Ctrl-C: exit $rc"
  grep -q $'\x1b' "$tmp/plain" && fail "escape sequences in plain output"
  grep -q "^wl1  not locked" "$tmp/plain" || fail "plain block: $(head -5 "$tmp/plain")"
  expect_rc 64 "$dlock" status --watch --interval 10ms wl1
  expect_rc 64 "$dlock" status --watch --json wl1
  DLOCK_URL=redis://127.0.0.1:1 expect_rc 69 "$dlock" status --watch wl1
  ;;
exec_signals)
  # SIGTERM to dlock reaches the child, whose exit status dlock returns.
  "$dlock" exec sig1 -- sh -c "trap 'echo got > $tmp/term; exit 3' TERM; touch $tmp/ready; while :; do sleep 0.05; done" & pid=$!
  wait_for 5 test -f "$tmp/ready" || fail "child never started"
  kill -TERM $pid
  wait $pid; rc=$?
  [ $rc -eq 3 ] || fail "forwarded SIGTERM: exit $rc, expected 3"
  [ "$(cat "$tmp/term")" = got ] || fail "child did not get SIGTERM"
  held sig1 && fail "lock not released after the child ended"
  # Loss while the child runs: SIGTERM to the child, exit 73.
  "$dlock" exec --watchdog 300ms --kill-after 1s lost1 -- sh -c "trap 'echo term > $tmp/lost; exit 0' TERM; touch $tmp/ready2; while :; do sleep 0.05; done" & pid=$!
  wait_for 5 test -f "$tmp/ready2" || fail "child never started"
  rcli DEL lost1 >/dev/null
  wait $pid; rc=$?
  [ $rc -eq 73 ] || fail "lost lock: exit $rc, expected 73"
  [ "$(cat "$tmp/lost")" = term ] || fail "child not told to stop"
  # A child that ignores SIGTERM is killed after --kill-after.
  "$dlock" exec --watchdog 300ms --kill-after 300ms lost2 -- sh -c "trap '' TERM; touch $tmp/ready3; while :; do sleep 0.05; done" & pid=$!
  wait_for 5 test -f "$tmp/ready3" || fail "child never started"
  rcli DEL lost2 >/dev/null
  wait $pid; rc=$?
  [ $rc -eq 73 ] || fail "stubborn child: exit $rc, expected 73"
  ;;
exec_warn_signal)
  # --warn-signal: the child gets it when the lease stops being renewed, before the loss's SIGTERM.
  expect_rc 64 "$dlock" exec --warn-signal NOSUCH w0 -- true
  expect_rc 64 "$dlock" exec --warn-margin 1s w0 -- true
  expect_rc 0 "$dlock" exec --warn-signal usr1 w0 -- true
  server_pid=$(rcli INFO server | tr -d '\r' | sed -n 's/^process_id://p')
  [ -n "$server_pid" ] || fail "no server pid"
  "$dlock" exec --watchdog 1500ms --warn-signal SIGUSR1 --warn-margin 600ms --kill-after 2s warn1 -- \
    sh -c "trap 'echo warning >> $tmp/events' USR1; trap 'echo term >> $tmp/events; exit 0' TERM; touch $tmp/ready; while :; do sleep 0.05; done" \
    2> "$tmp/err" & pid=$!
  wait_for 5 test -f "$tmp/ready" || fail "child never started"
  kill -STOP "$server_pid"
  wait $pid; rc=$?
  kill -CONT "$server_pid"
  [ $rc -eq 73 ] || fail "paused server: exit $rc, expected 73; $(cat "$tmp/err")"
  [ "$(tr '\n' ' ' < "$tmp/events")" = "warning term " ] ||
    fail "events: '$(cat "$tmp/events")', expected a warning, then the loss"
  grep -q "is not being renewed" "$tmp/err" || fail "no warning message: $(cat "$tmp/err")"
  ;;
exec_max_hold)
  # --max-hold: the lock is released and the command stopped as for a loss (73), with a warning
  # (--warn-signal) first and a message naming the cause; bad durations are usage errors (64).
  expect_rc 64 "$dlock" exec --max-hold 3x m0 -- true
  expect_rc 64 "$dlock" exec --max-hold 0 m0 -- true
  expect_rc 64 "$dlock" exec --max-hold -1s m0 -- true
  expect_rc 0 "$dlock" exec --max-hold 1h m0 -- true
  "$dlock" exec --max-hold 700ms --warn-signal USR1 --warn-margin 300ms --kill-after 2s mh1 -- \
    sh -c "trap 'echo warning >> $tmp/mh_events' USR1; trap 'echo term >> $tmp/mh_events; exit 0' TERM; while :; do sleep 0.05; done" \
    2> "$tmp/mh_err"; rc=$?
  [ $rc -eq 73 ] || fail "--max-hold: exit $rc, expected 73; $(cat "$tmp/mh_err")"
  [ "$(tr '\n' ' ' < "$tmp/mh_events")" = "warning term " ] ||
    fail "events: '$(cat "$tmp/mh_events")', expected a warning, then the loss"
  grep -q "max_hold" "$tmp/mh_err" || fail "the message does not name max_hold: $(cat "$tmp/mh_err")"
  wait_for 5 sh -c "! redis-cli -p $port EXISTS mh1 | grep -q 1" || fail "mh1 still held after --max-hold"
  ;;
exec_once_per)
  expect_rc 64 "$dlock" exec --once-per 0s o0 -- true
  expect_rc 64 "$dlock" exec --taken-exit 3 o0 -- true
  expect_rc 64 "$dlock" exec --once-per 1h --on-failure maybe o0 -- true
  # One slot of an hour: the first run runs, the next ones are skipped (0, or --taken-exit).
  expect_rc 0 "$dlock" exec --once-per 1h hourly -- sh -c "echo \$DLOCK_PERIOD_SLOT >> $tmp/hourly"
  expect_rc 0 "$dlock" exec --once-per 1h hourly -- sh -c "echo again >> $tmp/hourly"
  expect_rc 3 "$dlock" exec --once-per 1h --taken-exit 3 hourly -- sh -c "echo again >> $tmp/hourly"
  [ "$(wc -l < "$tmp/hourly")" -eq 1 ] || fail "hourly ran $(wc -l < "$tmp/hourly") times"
  grep -qE '^[0-9]+$' "$tmp/hourly" || fail "DLOCK_PERIOD_SLOT: '$(cat "$tmp/hourly")'"
  # A failed run keeps its slot by default; with --on-failure release another run may go.
  expect_rc 5 "$dlock" exec --once-per 1h keep1 -- sh -c 'exit 5'
  expect_rc 0 "$dlock" exec --once-per 1h keep1 -- touch "$tmp/keep1"
  [ -e "$tmp/keep1" ] && fail "a failed run's slot was run again"
  expect_rc 5 "$dlock" exec --once-per 1h --on-failure release rel1 -- sh -c 'exit 5'
  expect_rc 0 "$dlock" exec --once-per 1h rel1 -- touch "$tmp/rel1"
  [ -e "$tmp/rel1" ] || fail "the released slot was not run again"
  # Three processes racing over 1 s slots until three runs happened (at most 30 s: a loaded
  # machine, or a sanitizer build, starts a dlock process in up to a second): never two runs
  # in one slot.
  : > "$tmp/race"
  for p in 1 2 3; do
    ( end=$((SECONDS + 30))
      while [ $SECONDS -lt $end ] && [ "$(wc -l < "$tmp/race")" -lt 3 ]; do
        "$dlock" exec --once-per 1s race -- sh -c "echo \$DLOCK_PERIOD_SLOT >> $tmp/race"
      done ) &
  done
  wait
  runs=$(wc -l < "$tmp/race"); slots=$(sort -u "$tmp/race" | wc -l)
  [ "$runs" -ge 3 ] || fail "only $runs runs in 30 s of 1 s slots"
  [ "$runs" -eq "$slots" ] || fail "$runs runs in $slots slots: $(sort "$tmp/race" | tr '\n' ' ')"
  # A client clock 10 minutes ahead changes nothing: the slot is the server's.
  if [ -n "${DLOCK_SKEW_LIB:-}" ] && [ -e "$DLOCK_SKEW_LIB" ]; then
    echo "600000 1" > "$tmp/skew"
    # A sanitizer build's runtime must come first among the preloaded libraries; leak checks
    # stay off in these two runs, whose children (sh, date) are not built with the runtime.
    preload=$DLOCK_SKEW_LIB rt=$(ldd "$dlock" | awk '/lib[at]san\.so/ { print $3; exit }')
    [ -z "$rt" ] || preload="$rt $DLOCK_SKEW_LIB"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    DLOCK_SKEW_FILE=$tmp/skew LD_PRELOAD=$preload "$dlock" exec --once-per 2s skewed -- \
      sh -c "echo \$DLOCK_PERIOD_SLOT > $tmp/skewed" || fail "skewed run failed"
    now_ms=$(date +%s%3N) slot=$(cat "$tmp/skewed")
    off=$(( slot * 2000 - now_ms )); off=${off#-}
    [ "$off" -lt 10000 ] || fail "skewed client got slot $slot, ${off} ms from the real time"
    DLOCK_SKEW_FILE=$tmp/skew LD_PRELOAD=$preload date +%s > "$tmp/skewed_date"
    [ $(( $(cat "$tmp/skewed_date") - now_ms / 1000 )) -ge 590 ] || fail "the skew shim did not skew"
  fi
  ;;
elect_leader)
  # elect and leader on Redis (redis/locks/election/): the command runs while leading, with
  # DLOCK_EPOCH, and `leader --json` run by it shows the value and that epoch; resigned when it
  # exits; not elected while another leads (75); `unlock --force NAME` deletes the leader's lock
  # N, and elect stops its command and exits 73 (its watchdog sees the loss within a renewal).
  "$dlock" leader cl1 | grep -q vacant || fail "leader of a fresh name: $("$dlock" leader cl1)"
  out=$("$dlock" elect --value host-a --wait 5s cl1 -- \
        sh -c "echo epoch=\$DLOCK_EPOCH; '$dlock' leader --json cl1") || fail "elect: $out"
  epoch=$(echo "$out" | sed -n 's/^epoch=//p')
  [[ $epoch =~ ^[0-9]+$ ]] || fail "DLOCK_EPOCH: '$out'"
  echo "$out" | grep -qF "\"vacant\":false,\"value\":\"host-a\",\"epoch\":$epoch}" ||
    fail "leader --json: '$out'"
  "$dlock" leader --json cl1 | grep -qF '"vacant":true' || fail "not resigned"
  "$dlock" elect --watchdog 900ms --value host-b cl1 -- sleep 60 > "$tmp/elect.out" 2>&1 &
  leader=$!
  wait_for 10 sh -c "'$dlock' leader cl1 | grep -q host-b" || fail "elect did not lead"
  expect_rc 75 "$dlock" elect --wait 0 cl1 -- true
  expect_rc 0 "$dlock" unlock --force cl1
  wait $leader; rc=$?
  [ $rc -eq 73 ] || fail "elect after a forced unlock exited $rc: $(cat "$tmp/elect.out")"
  grep -q "leadership of 'cl1' lost" "$tmp/elect.out" || fail "message: $(cat "$tmp/elect.out")"
  "$dlock" leader cl1 | grep -q vacant || fail "vacant after the loss"
  expect_rc 64 "$dlock" elect --watchdog 10ms cl1 -- true
  ;;
exec_semaphore)
  # A semaphore of 2 permits (Redisson RPermitExpirableSemaphore's layout): eight processes, three
  # runs each, never more than two inside at once (each counts itself in and out on the server).
  for i in 1 2 3 4 5 6 7 8; do
    ( for r in 1 2 3; do
        "$dlock" exec --kind semaphore --permits 2 --wait 60s sem -- sh -c \
          "redis-cli -p $port INCR inside >> $tmp/inside; sleep 0.05; redis-cli -p $port DECR inside > /dev/null" ||
          echo "run failed" >> "$tmp/errors"
      done ) &
  done
  wait
  [ ! -e "$tmp/errors" ] || fail "$(wc -l < "$tmp/errors") runs failed"
  [ "$(wc -l < "$tmp/inside")" -eq 24 ] || fail "$(wc -l < "$tmp/inside") runs, expected 24"
  max=$(sort -n "$tmp/inside" | tail -1)
  [ "$max" -le 2 ] || fail "$max holders at once in a semaphore of 2"
  # status shows the permits in use and each holder; --permits 0 is a usage error.
  "$dlock" exec --kind semaphore --permits 2 sem -- sleep 30 & holder=$!
  wait_for 10 sh -c "'$dlock' status sem | grep -q '1 of 2 permit'" || fail "status: $("$dlock" status sem)"
  "$dlock" status --json sem | grep -q '"kind":"semaphore"' || fail "status --json: $("$dlock" status --json sem)"
  kill -TERM $holder; wait $holder
  expect_rc 64 "$dlock" exec --kind semaphore --permits 0 sem -- true
  ;;
exec_exclusion)
  # Four concurrent execs of one lock: their [start, end] intervals never overlap.
  for i in 1 2 3 4; do
    "$dlock" exec excl -- sh -c "echo start \$(date +%s%N) >> $tmp/log.$i; sleep 0.1; echo end \$(date +%s%N) >> $tmp/log.$i" &
  done
  wait
  cat "$tmp"/log.* | sort -k2 -n > "$tmp/all"
  [ "$(wc -l < "$tmp/all")" -eq 8 ] || fail "expected 8 events"
  awk '{ if ($1 == "start") { if (inside) bad = 1; inside = 1 } else inside = 0 } END { exit bad }' "$tmp/all" ||
    fail "critical sections overlapped: $(cat "$tmp/all")"
  # unlock --force wakes a waiting exec.
  "$dlock" exec stuck -- sleep 30 & holder=$!
  wait_for 5 held stuck || fail "holder never acquired"
  "$dlock" exec --wait 10s stuck -- touch "$tmp/woke" & waiter=$!
  wait_for 5 sh -c "redis-cli -p $port PUBSUB NUMSUB 'redisson_lock__channel:{stuck}' | tail -1 | grep -q 1" ||
    fail "waiter never subscribed"
  "$dlock" unlock --force stuck | grep -q "unlocked 'stuck'" || fail "unlock --force output"
  wait $waiter || fail "waiter failed"
  [ -f "$tmp/woke" ] || fail "waiter did not run"
  kill -TERM $holder; wait $holder
  ;;
inspect)
  "$dlock" exec st1 -- sleep 30 & holder=$!
  wait_for 5 held st1 || fail "holder never acquired"
  json=$("$dlock" status --json st1)
  for field in '"name":"st1"' '"kind":"lock"' '"holders":[{"owner":"' '"count":1' '"ttl_ms":' '"waiters":0' '"fencing_token":1'; do
    [[ $json == *"$field"* ]] || fail "status --json lacks $field: $json"
  done
  "$dlock" list --json | grep -q '"name":"st1"' || fail "list --json"
  "$dlock" list 'nomatch*' | grep -q "no locks" || fail "list with no match"
  "$dlock" status --json absent | grep -q '"kind":"none"' || fail "status of a free lock"
  kill -TERM $holder; wait $holder
  # A fair lock with two queued waiters: status shows the queue in order; unlock --force
  # wakes the head, which then holds the lock.
  "$dlock" exec --kind fair fq -- sleep 30 & fholder=$!
  wait_for 5 held fq || fail "fair holder never acquired"
  "$dlock" exec --kind fair fq -- sh -c "touch $tmp/first; exec sleep 30" & first=$!
  wait_for 5 sh -c "[ \$(redis-cli -p $port LLEN 'redisson_lock_queue:{fq}') = 1 ]" || fail "first waiter not queued"
  "$dlock" exec --kind fair --wait 20s fq -- true & second=$!
  wait_for 5 sh -c "[ \$(redis-cli -p $port LLEN 'redisson_lock_queue:{fq}') = 2 ]" || fail "second waiter not queued"
  json=$("$dlock" status --json fq)
  [[ $json == *'"kind":"fair"'* && $json == *'"waiters":2'* && $json == *'"queue":[{"owner":"'*'"place_ms":'*'},{"owner":"'* ]] ||
    fail "fair status: $json"
  text=$("$dlock" status fq)
  [[ $text == *"queue    1. "*"queue    2. "* ]] || fail "fair status text: $text"
  kill -KILL $fholder; wait $fholder 2>/dev/null
  expect_rc 0 "$dlock" unlock --force fq
  wait_for 10 test -f "$tmp/first" || fail "the head of the fair queue was not woken"
  kill -TERM $first $second 2>/dev/null; wait $first $second 2>/dev/null
  # A read-write lock held by two readers while a writer waits: status shows the mode, both
  # readers and the waiting writer; unlock --force breaks it and the writer gets in.
  "$dlock" exec --kind read rw1 -- sleep 30 & r1=$!
  "$dlock" exec --kind read rw1 -- sleep 30 & r2=$!
  wait_for 5 sh -c "[ \$(redis-cli -p $port HLEN rw1) = 3 ]" || fail "two readers never held rw1"
  "$dlock" exec --kind write rw1 -- touch "$tmp/wrote" & w=$!
  wait_for 5 sh -c "[ \$(redis-cli -p $port EXISTS 'dlock_rwlock_writer:{rw1}') = 1 ]" || fail "the writer never waited"
  json=$("$dlock" status --json rw1)
  [[ $json == *'"kind":"read-write"'* && $json == *'"mode":"read"'* && $json == *'"writer_waiting":true'* ]] ||
    fail "read-write status: $json"
  [ "$(grep -o '"count":1' <<<"$json" | wc -l)" = 2 ] || fail "two readers expected: $json"
  "$dlock" status rw1 | grep -q "^mode     read" || fail "read-write status text"
  expect_rc 0 "$dlock" unlock --force rw1
  wait_for 10 test -f "$tmp/wrote" || fail "the writer did not get the lock after unlock --force"
  kill -TERM $r1 $r2 2>/dev/null; wait $r1 $r2 $w 2>/dev/null
  rcli SET notalock 1 >/dev/null
  "$dlock" list | grep -q notalock && fail "list shows a non-lock key"
  expect_rc 0 "$dlock" unlock --force absent
  # keys: the layout the library writes, for both kinds, without a server.
  keys=$(DLOCK_URL=redis://127.0.0.1:1 "$dlock" keys orders) || fail "keys exit $?"
  [[ $keys == *"key      orders (hash)"* && $keys == *"channel  redisson_lock__channel:{orders}"* &&
     $keys == *"fencing  redisson_lock_token:{orders}"* ]] || fail "keys: $keys"
  keys=$("$dlock" keys --kind simple 'a{b}') || fail "keys --kind simple exit $?"
  [[ $keys == *"key      a{b} (string)"* && $keys == *"channel  dlock_simple__channel:a{b}"* &&
     $keys == *"fencing  -"* ]] || fail "keys --kind simple: $keys"
  expect_rc 64 "$dlock" keys 'a{}b'
  keys=$("$dlock" keys --kind fair orders) || fail "keys --kind fair exit $?"
  [[ $keys == *"key      orders (hash)"* && $keys == *"queue    redisson_lock_queue:{orders}"* &&
     $keys == *"timeouts redisson_lock_timeout:{orders}"* &&
     $keys == *"waiters  redisson_lock__channel:{orders}:<owner>"* ]] || fail "keys --kind fair: $keys"
  keys=$("$dlock" keys --kind write orders) || fail "keys --kind write exit $?"
  [[ $keys == *"key      orders (hash)"* && $keys == *"channel  redisson_rwlock:{orders}"* &&
     $keys == *"fencing  dlock_rwlock_token:{orders}"* && $keys == *"intent   dlock_rwlock_writer:{orders}"* ]] ||
    fail "keys --kind write: $keys"
  ;;
demo)
  out=$("$dlock" demo --processes 2 --threads 2 --stock 50) || fail "demo exit $?"
  [[ $out == *"exact"* ]] || fail "demo: $out"
  ;;
exec_redlock)
  # Several --url: Redlock over three masters (the private server and two more, reached on
  # Unix sockets by --url and on TCP by the redlock:// URL).
  free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
  pids=() tcp=()
  for i in 1 2; do
    tcp+=("$(free_port)")
    redis-server --port "${tcp[$((i - 1))]}" --bind 127.0.0.1 --unixsocket "$tmp/m$i.sock" \
      --save '' --appendonly no --dir "$tmp" --dbfilename "m$i.rdb" >/dev/null & pids+=($!)
  done
  for i in 1 2; do
    wait_for 10 sh -c "redis-cli -s $tmp/m$i.sock PING 2>/dev/null | grep -q PONG" ||
      fail "master $i never started"
  done
  heldm() { [ "$(redis-cli -s "$tmp/m$1.sock" EXISTS "$2")" = 1 ]; }
  rl=("$dlock" --url "$url" --url "unix://$tmp/m1.sock" --url "unix://$tmp/m2.sock")
  out=$("${rl[@]}" exec rl1 -- sh -c 'echo "[$DLOCK_NAME][$DLOCK_FENCING_TOKEN]"') ||
    fail "redlock exec exit $?"
  [ "$out" = "[rl1][]" ] || fail "redlock has no fencing token: '$out'"
  held rl1 && fail "redlock key kept after exec"
  heldm 1 rl1 && fail "redlock key kept on master 1 after exec"
  heldm 2 rl1 && fail "redlock key kept on master 2 after exec"
  "${rl[@]}" exec rl2 -- sleep 30 & holder=$!
  wait_for 5 sh -c "redis-cli -p $port EXISTS rl2 | grep -q 1" || fail "holder never acquired"
  wait_for 5 heldm 1 rl2 || fail "rl2 not on master 1"
  wait_for 5 heldm 2 rl2 || fail "rl2 not on master 2"
  expect_rc 75 "${rl[@]}" exec --wait 0 rl2 -- true
  kill -TERM $holder; wait $holder
  wait_for 5 sh -c "! redis-cli -s $tmp/m1.sock EXISTS rl2 | grep -q 1" || fail "rl2 kept on m1"
  # One redlock:// URL: the same Redlock; exec (simple by default, --kind lock refused),
  # status, list and unlock --force answer across the masters.
  rlu=(--url "redlock://127.0.0.1:$port,127.0.0.1:${tcp[0]},127.0.0.1:${tcp[1]}")
  expect_rc 0 "$dlock" "${rlu[@]}" exec rl5 -- true
  expect_rc 78 "$dlock" "${rlu[@]}" exec --kind lock rl5 -- true # not a Redlock kind
  "$dlock" "${rlu[@]}" exec rl6 -- sleep 30 & holder=$!
  wait_for 5 heldm 2 rl6 || fail "rl6 not on master 2"
  wait_for 5 held rl6 || fail "rl6 not on master 0"
  st=$("$dlock" "${rlu[@]}" status rl6) || fail "redlock status exit $?"
  [[ $st == *simple* && $st == *"127.0.0.1:${tcp[1]} holds"* ]] || fail "redlock status: $st"
  st=$("${rl[@]}" status --json rl6) || fail "redlock status (several --url) exit $?"
  [[ $st == *'"backend":"redlock"'* && $st == *'"exists":true'* ]] || fail "status --json: $st"
  ls=$("$dlock" "${rlu[@]}" list 'rl*') || fail "redlock list exit $?"
  [[ $ls == *rl6* ]] || fail "redlock list: $ls"
  "$dlock" "${rlu[@]}" unlock --force rl6 | grep -q "unlocked 'rl6'" || fail "redlock unlock --force"
  held rl6 && fail "rl6 kept on master 0 after unlock --force"
  heldm 1 rl6 && fail "rl6 kept on master 1 after unlock --force"
  wait $holder # its watchdog finds the lock gone: the child is ended
  expect_rc 64 "$dlock" --url "redlock://127.0.0.1:$port,,127.0.0.1:1" status rl6
  # One master of three down: the quorum of two still grants it.
  kill -TERM "${pids[1]}"; wait "${pids[1]}"
  expect_rc 0 "${rl[@]}" exec --wait 2s rl3 -- true
  expect_rc 64 "${rl[@]}" exec --lease 20ms rl4 -- true
  expect_rc 0 "${rl[@]}" status rl4 # the two masters up answer: not held
  kill -TERM "${pids[0]}"; wait "${pids[0]}"
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"

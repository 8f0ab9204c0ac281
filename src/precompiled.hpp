// The headers most of libdlock's translation units parse, precompiled once per build tree when
// DLOCK_PCH is ON (CI's sanitizer trees, scripts/test.sh; docs/design/ci.md). Parsing them is
// most of a source's compile time at -O0 (Asio and the standard library: about 1.5 s of 2 to 6 s
// per source). The release tree (step 1, whose compile database clang-tidy reads) builds without
// it, so a source that forgets one of its own includes still fails there.
#pragma once

#include <dlock/client.hpp>
#include <dlock/election.hpp>
#include <dlock/lease.hpp>
#include <dlock/lock_options.hpp>
#include <dlock/metrics.hpp>
#include <dlock/multi_lock.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/post.hpp>
#include <asio/ssl/context.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

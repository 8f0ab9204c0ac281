// The headers most test sources parse (GoogleTest, the whole public API, Asio's futures and the
// standard library), precompiled once and reused by every GoogleTest executable of the tree when
// DLOCK_PCH is ON (CI's sanitizer trees; tests/CMakeLists.txt, docs/design/ci.md). The release
// tree builds without it, so a test that forgets one of its own includes still fails there.
#pragma once

#include <dlock/dlock.hpp>

#include <asio/use_future.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

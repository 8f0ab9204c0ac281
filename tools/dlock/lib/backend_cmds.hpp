// backend_cmds.hpp: `dlock status`, `list` and `unlock --force` on a backend other than Redis
// (zk://, and postgresql:// when built), through dlock::client::inspect() / list() and the lock
// object's force_unlock(). The Redis path (inspect.cpp) reads its key layout itself instead.
#pragma once

#include "common.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace dlock::cli {

/// A client for the single URL of `g` when it names a non-Redis backend. Errors: usage_error
/// for several URLs; failure (exit 78) for a URL this build or backend cannot take.
client backend_client(const global_options& g);

int run_backend_status(const global_options& g, const std::vector<std::string>& names, bool json,
                       std::ostream& out);
int run_backend_list(const global_options& g, const std::string& pattern, bool json,
                     std::ostream& out);
int run_backend_unlock(const global_options& g, const std::string& name, std::ostream& out);

} // namespace dlock::cli

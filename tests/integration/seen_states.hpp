// tests/integration/seen_states.hpp: what an election observation (client::observe) delivered,
// collected from the I/O thread and read by the test, for the backends' election tests.
#pragma once

#include <dlock/election.hpp>

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

namespace dlock::test {

struct seen_states {
    std::mutex mu;
    std::vector<std::optional<leader_info>> v;
    std::function<void(const std::optional<leader_info>&)> callback() {
        return [this](const std::optional<leader_info>& li) {
            std::lock_guard g(mu);
            v.push_back(li);
        };
    }
    std::size_t size() {
        std::lock_guard g(mu);
        return v.size();
    }
    std::optional<leader_info> at(std::size_t i) {
        std::lock_guard g(mu);
        return v.at(i);
    }
    std::optional<leader_info> last() {
        std::lock_guard g(mu);
        return v.empty() ? std::nullopt : v.back();
    }
};

} // namespace dlock::test

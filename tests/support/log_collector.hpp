// collecting_sink: a dlock::log_sink for tests that keeps every record as one line,
// "level message key=value ...", for the log-sink tests of every backend.
#pragma once

#include <dlock/log.hpp>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::test {

class collecting_sink {
public:
    dlock::log_sink sink() {
        return [this](const dlock::log_record& r) {
            std::string line =
                std::string(dlock::to_string(r.level)) + ' ' + std::string(r.message);
            for (const auto& f : r.fields)
                line += ' ' + std::string(f.key) + '=' + std::string(f.value);
            std::lock_guard lk(mu_);
            lines_.push_back(std::move(line));
        };
    }
    std::vector<std::string> lines() const {
        std::lock_guard lk(mu_);
        return lines_;
    }
    /// Whether a line of `level` contains `text`.
    bool has(std::string_view level, std::string_view text) const {
        std::lock_guard lk(mu_);
        for (const auto& l : lines_)
            if (l.starts_with(level) && l.find(text) != std::string::npos) return true;
        return false;
    }
    std::string all() const {
        std::string s;
        for (const auto& l : lines())
            s += l + '\n';
        return s;
    }

private:
    mutable std::mutex mu_;
    std::vector<std::string> lines_;
};

} // namespace dlock::test

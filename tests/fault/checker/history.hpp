#pragma once

// The event history of a fault run (reliability.md §8.1), sans-I/O: one flat JSON object per line,
// string / integer / bool values only. Worker logs, the orchestrator's nemesis log and the resource
// log share the format; parse_history() classifies each line and merges worker events by `t`.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace dlock::fault {

using json_value = std::variant<std::string, std::int64_t, bool>;
using json_object = std::map<std::string, json_value, std::less<>>;

/// Parses one flat JSON object. On failure returns nullopt and sets `error` (without line number).
std::optional<json_object> parse_flat_json(std::string_view line, std::string& error);

/// Writes one flat JSON object per line in insertion order; what the workers will use.
class jsonl_writer {
public:
    jsonl_writer& field(std::string_view key, std::string_view value);
    jsonl_writer& field(std::string_view key, const char* value) {
        return field(key, std::string_view(value));
    }
    jsonl_writer& field(std::string_view key, std::int64_t value);
    jsonl_writer& field(std::string_view key, bool value);
    /// The finished line ("{...}\n"); the writer is reset for the next line.
    std::string line();

private:
    void key(std::string_view k);
    std::string buf_;
};

enum class op_kind { acquire, extend, use, release, crash, lost };
enum class op_type { invoke, ok, fail, info };

const char* to_string(op_kind k) noexcept;
const char* to_string(op_type t) noexcept;

/// One worker event. Times are CLOCK_MONOTONIC ns. `crash` is the orchestrator's synthetic end
/// event of a crashed worker; `lost` is a holder's loss signal (lease::on_lost), naming the hold
/// by its `token_h`; `watchdog` marks an acquire ok whose lease the client renews itself (then
/// an extend ok without an invoke is a renewal the holder observed, `t_start` its send). `t_start`
/// is the library's internal start stamp, `t_first_fwd` the proxy's first forward of this
/// operation's first request (joined in by the orchestrator).
struct op_event {
    std::int64_t w = 0;
    std::int64_t op = 0;
    std::string lock;
    op_kind f = op_kind::acquire;
    op_type type = op_type::invoke;
    std::int64_t t = 0;
    std::optional<std::string> token_h;
    std::optional<std::int64_t> fence;
    std::optional<std::int64_t> deadline;
    std::optional<std::int64_t> ttl_ms;
    std::optional<std::int64_t> t_start;
    std::optional<std::int64_t> t_first_fwd;
    std::optional<std::int64_t> deleted;
    bool watchdog = false;
    std::string source; // "file:line"
};

struct nemesis_event {
    std::string nemesis;
    std::string target;
    std::string value;
    std::int64_t t = 0;
    std::string source;
};

/// One entry of the fenced/unfenced resource's log, in `seq` order. kind "final" records the
/// value read after the run (`after`).
struct resource_entry {
    std::int64_t seq = 0;
    std::string lock;
    std::string kind; // open | write | final
    std::optional<std::int64_t> fence;
    bool accepted = true;
    std::optional<std::int64_t> before;
    std::optional<std::int64_t> after;
    std::string source;
};

struct history {
    std::vector<op_event> events; // merged by t (invokes before completions at equal t)
    std::vector<nemesis_event> nemesis;
    std::vector<resource_entry> resource; // sorted by seq
};

struct parse_error {
    std::string message; // "source:line: what"
};

/// Adds the lines of one file (`name` is used in messages). Returns an error naming the line.
std::optional<parse_error> add_jsonl(history& h, std::string_view name, std::string_view text);
/// Sorts the merged history; call after the last add_jsonl.
void finish(history& h);

} // namespace dlock::fault

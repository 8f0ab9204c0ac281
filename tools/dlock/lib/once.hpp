// `dlock exec --once-per D`: the slot claim around one run (once.cpp).
#pragma once

#include "commands.hpp"

#include <dlock/dlock.hpp>

#include <optional>
#include <ostream>
#include <string>

namespace dlock::cli {

/// The slot of --once-per that this run claimed, or found taken. Claims in the constructor
/// (errors: a diagnosed failure, as acquisition errors are); taken() says whether the slot
/// was claimed already (the message is written to `err`: the run is skipped). finished(rc)
/// says how the command ended: a failure (rc != 0) gives the slot back with --on-failure
/// release. Destroyed without finished() (the command never ran: not acquired, interrupted),
/// it gives the slot back, so that another machine may run in it.
class once_slot {
public:
    once_slot(client& c, const exec_options& o, std::ostream& err);
    ~once_slot();
    once_slot(const once_slot&) = delete;
    once_slot& operator=(const once_slot&) = delete;

    bool taken() const noexcept { return !slot_; }
    /// The exit status of a skipped run (--taken-exit, default 0).
    int skipped_exit() const noexcept { return o_.once_taken_exit; }
    /// Returns `rc`, after giving the slot back if the run failed and --on-failure release.
    int finished(int rc);
    /// The claimed slot's number, for the child's DLOCK_PERIOD_SLOT ("" when taken).
    std::string slot_index() const { return slot_ ? std::to_string(slot_->index) : std::string(); }

private:
    void give_back() noexcept;
    client& c_;
    const exec_options& o_;
    std::ostream& err_;
    std::optional<period_slot> slot_;
    bool settled_ = false;
};

} // namespace dlock::cli

#include "core/metrics.hpp"

#include <dlock/error.hpp>

namespace dlock {

double histogram_snapshot::fraction_at_most(double bound) const noexcept {
    if (count == 0) return 0;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < bounds.size() && i < counts.size(); ++i) {
        n += counts[i];
        if (bounds[i] >= bound) break;
    }
    return static_cast<double>(n) / static_cast<double>(count);
}

std::string_view to_string(error_class c) noexcept {
    switch (c) {
    case error_class::unavailable:
        return "unavailable";
    case error_class::ambiguous:
        return "ambiguous";
    case error_class::cancelled:
        return "cancelled";
    case error_class::denied:
        return "denied";
    case error_class::server:
        return "server";
    case error_class::protocol:
        return "protocol";
    case error_class::invalid:
        return "invalid";
    case error_class::other:
        return "other";
    }
    return "other";
}

std::string_view to_string(loss_cause c) noexcept {
    switch (c) {
    case loss_cause::gone:
        return "gone";
    case loss_cause::taken:
        return "taken";
    case loss_cause::deadline:
        return "deadline";
    case loss_cause::server_error:
        return "server_error";
    case loss_cause::undetermined:
        return "undetermined";
    case loss_cause::max_hold:
        return "max_hold";
    }
    return "undetermined";
}

kind_counts metrics_snapshot::kind(std::string_view name) const {
    for (const auto& k : acquisitions)
        if (k.kind == name) return k;
    kind_counts none;
    none.kind = std::string(name);
    return none;
}

std::uint64_t metrics_snapshot::losses_total() const noexcept {
    std::uint64_t n = 0;
    for (auto l : losses)
        n += l;
    return n;
}

} // namespace dlock

namespace dlock::detail {
namespace {

/// The label of slot `i`: the kinds table's, then "custom".
std::string_view kind_label(std::size_t i) noexcept {
    return i < kind_count ? kinds_begin()[i].metrics_label : std::string_view("custom");
}

std::uint64_t get(const std::atomic<std::uint64_t>& a) noexcept {
    return a.load(std::memory_order_relaxed);
}

void bump(std::atomic<std::uint64_t>& a, std::uint64_t n = 1) noexcept {
    a.fetch_add(n, std::memory_order_relaxed);
}

} // namespace

error_class classify(std::error_code ec) noexcept {
    if (ec.category() != error_category()) return error_class::other;
    switch (static_cast<errc>(ec.value())) {
    case errc::unavailable:
    case errc::timeout:
        return error_class::unavailable;
    case errc::ambiguous:
        return error_class::ambiguous;
    case errc::cancelled:
        return error_class::cancelled;
    case errc::auth_failed:
    case errc::permission_denied:
        return error_class::denied;
    case errc::out_of_memory:
    case errc::server_busy:
    case errc::readonly:
    case errc::moved:
    case errc::cross_slot:
    case errc::no_script:
    case errc::server_error:
    case errc::not_replicated: // the server's WAIT answered too few replicas
        return error_class::server;
    case errc::protocol_error:
        return error_class::protocol;
    case errc::invalid_argument:
    case errc::configuration_error:
    case errc::unsupported:
        return error_class::invalid;
    case errc::not_owner:
    case errc::lock_lost:
        return error_class::other;
    }
    return error_class::other;
}

void wire_counters::add_to(metrics_snapshot& s) const noexcept {
    s.commands += get(commands);
    s.scripts += get(scripts);
    s.noscript_fallbacks += get(noscript);
    s.ambiguous += get(ambiguous);
    s.connects += get(connects);
    s.reconnects += get(reconnects);
}

void client_metrics::acquisition(std::size_t kind, std::error_code ec, bool acquired,
                                 bool reentered, clock::duration waited) noexcept {
    if constexpr (!metrics_enabled) return;
    auto& k = kinds_[kind < kinds ? kind : kinds - 1];
    if (ec)
        bump(k.errors[static_cast<std::size_t>(classify(ec))]);
    else if (!acquired)
        bump(k.not_acquired);
    else {
        bump(reentered ? k.reentered : k.acquired);
        wait_.wait_time.record(waited);
    }
}

void client_metrics::renewal_batch(std::size_t locks) noexcept {
    if constexpr (!metrics_enabled) return;
    bump(renewals_.batches);
    renewals_.batch_size.record(locks);
}

void client_metrics::renewals(std::uint64_t ok, std::uint64_t failed) noexcept {
    if constexpr (!metrics_enabled) return;
    if (ok) bump(renewals_.ok, ok);
    if (failed) bump(renewals_.failed, failed);
}

void client_metrics::release(release_result r) noexcept {
    if constexpr (!metrics_enabled) return;
    switch (r) {
    case release_result::released:
        return bump(holds_.releases);
    case release_result::not_owner:
        return bump(holds_.releases_not_owner);
    case release_result::failed:
        return bump(holds_.releases_failed);
    }
}

metrics_snapshot client_metrics::snapshot() const {
    metrics_snapshot s;
    s.enabled = metrics_enabled;
    s.acquisitions.reserve(kinds);
    for (std::size_t i = 0; i < kinds; ++i) {
        kind_counts k;
        k.kind = std::string(kind_label(i));
        k.acquired = get(kinds_[i].acquired);
        k.reentered = get(kinds_[i].reentered);
        k.not_acquired = get(kinds_[i].not_acquired);
        for (std::size_t e = 0; e < error_class_count; ++e)
            k.errors[e] = get(kinds_[i].errors[e]);
        s.acquisitions.push_back(std::move(k));
    }
    s.wait_time = wait_.wait_time.snapshot();
    s.hold_time = holds_.hold_time.snapshot();
    s.handoff_handover = holds_.handover.snapshot();
    s.handoff_wake = holds_.wake.snapshot();
    s.renewal_batches = get(renewals_.batches);
    s.renewals_ok = get(renewals_.ok);
    s.renewals_failed = get(renewals_.failed);
    s.renewal_batch_size = renewals_.batch_size.snapshot(1.0);
    for (std::size_t i = 0; i < loss_cause_count; ++i)
        s.losses[i] = get(renewals_.losses[i]);
    s.releases = get(holds_.releases);
    s.releases_not_owner = get(holds_.releases_not_owner);
    s.releases_failed = get(holds_.releases_failed);
    s.topology_changes = get(renewals_.topology_changes);
    s.connects = get(renewals_.connects);
    s.reconnects = get(renewals_.reconnects);
    s.warnings = get(renewals_.warnings);
    s.renewal_slack = renewals_.slack.snapshot();
    return s;
}

} // namespace dlock::detail

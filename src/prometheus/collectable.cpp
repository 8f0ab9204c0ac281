// dlock::prometheus: metrics_snapshot -> prometheus::MetricFamily, and the collectable that
// takes a snapshot per scrape. prometheus-cpp serializes; nothing here writes text.
#include "access.hpp"
#include "core/lock_backend.hpp"

#include <dlock/prometheus.hpp>

#include <limits>
#include <string>
#include <utility>

namespace dlock {
namespace {

using ::prometheus::ClientMetric;
using ::prometheus::MetricFamily;
using ::prometheus::MetricType;

class builder {
public:
    builder(std::vector<MetricFamily>& out, const ::prometheus::Labels& labels)
        : out_(out)
        , labels_(labels) {}

    MetricFamily& family(std::string name, std::string help, MetricType type) {
        out_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
        return out_.back();
    }
    ClientMetric
    sample(std::initializer_list<std::pair<std::string_view, std::string_view>> extra) {
        ClientMetric m;
        for (const auto& [k, v] : labels_)
            m.label.push_back({k, v});
        for (const auto& [k, v] : extra)
            m.label.push_back({std::string(k), std::string(v)});
        return m;
    }
    void counter(MetricFamily& f, std::uint64_t value,
                 std::initializer_list<std::pair<std::string_view, std::string_view>> extra = {}) {
        auto m = sample(extra);
        m.counter.value = static_cast<double>(value);
        f.metric.push_back(std::move(m));
    }
    void counter(std::string name, std::string help, std::uint64_t value) {
        counter(family(std::move(name), std::move(help), MetricType::Counter), value);
    }
    void
    histogram(MetricFamily& f, const histogram_snapshot& h,
              std::initializer_list<std::pair<std::string_view, std::string_view>> extra = {}) {
        auto m = sample(extra);
        m.histogram.sample_count = h.count;
        m.histogram.sample_sum = h.sum;
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < h.counts.size(); ++i) {
            cumulative += h.counts[i];
            m.histogram.bucket.push_back(
                {cumulative,
                 i < h.bounds.size() ? h.bounds[i] : std::numeric_limits<double>::infinity()});
        }
        f.metric.push_back(std::move(m));
    }

private:
    std::vector<MetricFamily>& out_;
    const ::prometheus::Labels& labels_;
};

class snapshot_collectable final : public ::prometheus::Collectable {
public:
    snapshot_collectable(std::function<std::optional<metrics_snapshot>()> source,
                         ::prometheus::Labels labels)
        : source_(std::move(source))
        , labels_(std::move(labels)) {}
    std::vector<MetricFamily> Collect() const override {
        const auto s = source_();
        if (!s) return {};
        return prometheus_families(*s, labels_);
    }

private:
    std::function<std::optional<metrics_snapshot>()> source_;
    ::prometheus::Labels labels_;
};

} // namespace

std::vector<MetricFamily> prometheus_families(const metrics_snapshot& s,
                                              const ::prometheus::Labels& labels) {
    std::vector<MetricFamily> out;
    out.reserve(24);
    builder b(out, labels);

    auto& acq = b.family("dlock_acquisitions_total",
                         "Acquisitions that ended, by lock kind and outcome", MetricType::Counter);
    auto& err = b.family("dlock_acquisition_errors_total",
                         "Acquisitions that ended with an error, by lock kind and error class",
                         MetricType::Counter);
    for (const auto& k : s.acquisitions) {
        b.counter(acq, k.acquired, {{"kind", k.kind}, {"outcome", "acquired"}});
        b.counter(acq, k.reentered, {{"kind", k.kind}, {"outcome", "reentered"}});
        b.counter(acq, k.not_acquired, {{"kind", k.kind}, {"outcome", "not_acquired"}});
        for (std::size_t e = 0; e < error_class_count; ++e)
            b.counter(err, k.errors[e],
                      {{"kind", k.kind}, {"class", to_string(static_cast<error_class>(e))}});
    }
    b.histogram(b.family("dlock_acquisition_wait_seconds",
                         "Time from the call to the grant of granted acquisitions",
                         MetricType::Histogram),
                s.wait_time);
    b.histogram(b.family("dlock_hold_seconds", "Time a hold lasted, until released or lost",
                         MetricType::Histogram),
                s.hold_time);
    auto& handoff = b.family("dlock_handoff_seconds",
                             "Hand-off latency: local hand-over start, or wake, to the grant",
                             MetricType::Histogram);
    b.histogram(handoff, s.handoff_handover, {{"path", "handover"}});
    b.histogram(handoff, s.handoff_wake, {{"path", "wake"}});

    b.counter("dlock_renewal_batches_total", "Watchdog renewal scripts sent", s.renewal_batches);
    auto& ren = b.family("dlock_renewals_total", "Locks renewed by the watchdog, by result",
                         MetricType::Counter);
    b.counter(ren, s.renewals_ok, {{"result", "ok"}});
    b.counter(ren, s.renewals_failed, {{"result", "failed"}});
    b.histogram(b.family("dlock_renewal_batch_locks", "Locks per watchdog renewal script",
                         MetricType::Histogram),
                s.renewal_batch_size);
    b.histogram(b.family("dlock_renewal_slack_seconds",
                         "Validity a hold had left when a renewal of it succeeded",
                         MetricType::Histogram),
                s.renewal_slack);
    b.counter("dlock_warnings_total", "Leases that warned before a loss", s.warnings);

    auto& loss = b.family("dlock_losses_total", "Held locks lost, by cause", MetricType::Counter);
    for (std::size_t i = 0; i < loss_cause_count; ++i)
        b.counter(loss, s.losses[i], {{"cause", to_string(static_cast<loss_cause>(i))}});
    auto& rel = b.family("dlock_releases_total", "Final releases, by outcome", MetricType::Counter);
    b.counter(rel, s.releases, {{"outcome", "released"}});
    b.counter(rel, s.releases_not_owner, {{"outcome", "not_owner"}});
    b.counter(rel, s.releases_failed, {{"outcome", "failed"}});

    b.counter("dlock_ambiguous_total", "Commands written whose reply never came", s.ambiguous);
    b.counter("dlock_connects_total", "First handshakes of connections", s.connects);
    b.counter("dlock_reconnects_total", "Later handshakes of the same connections", s.reconnects);
    b.counter("dlock_topology_changes_total", "New masters followed after a failover",
              s.topology_changes);
    b.counter("dlock_commands_total", "Commands sent, scripts included", s.commands);
    b.counter("dlock_scripts_total", "EVALSHA and EVAL commands sent", s.scripts);
    b.counter("dlock_noscript_fallbacks_total", "EVALSHA answered NOSCRIPT and re-sent as EVAL",
              s.noscript_fallbacks);
    b.counter("dlock_watches_cancelled_total",
              "Server-side watches the server cancelled (etcd: compaction), watched anew",
              s.watches_cancelled);
    b.counter("dlock_watch_streams_broken_total",
              "Watch streams that ended or went silent, their watches set up anew",
              s.watch_streams_broken);
    return out;
}

std::shared_ptr<::prometheus::Collectable>
make_prometheus_collectable(std::function<std::optional<metrics_snapshot>()> source,
                            ::prometheus::Labels labels) {
    return std::make_shared<snapshot_collectable>(std::move(source), std::move(labels));
}

std::shared_ptr<::prometheus::Collectable>
make_prometheus_collectable(const client& c, ::prometheus::Labels labels) {
    // Every backend's counters, through the seam (client::metrics() reads the same).
    std::weak_ptr<detail::lock_backend> weak = detail::access::backend(c);
    return make_prometheus_collectable(
        [weak]() -> std::optional<metrics_snapshot> {
            const auto b = weak.lock();
            if (!b) return std::nullopt;
            return b->metrics();
        },
        std::move(labels));
}

} // namespace dlock

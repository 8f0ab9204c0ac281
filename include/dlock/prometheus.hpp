// dlock/prometheus.hpp: a client's metrics as Prometheus metric families (optional component
// dlock::prometheus, library dlock_prometheus, built when prometheus-cpp is found; Debian
// prometheus-cpp-dev 1.0.1). No exposition text is written here: prometheus-cpp serializes
// the families at scrape time.
//
//   dlock::client c(url);
//   prometheus::Exposer exposer("127.0.0.1:9464");            // prometheus-cpp-pull
//   auto dlock_metrics = dlock::make_prometheus_collectable(c, {{"service", "orders"}});
//   exposer.RegisterCollectable(dlock_metrics);                 // keep dlock_metrics alive
//
// prometheus-cpp 1.0.1's Registry takes only its own metric families, not a Collectable of
// ours, so the collectable goes next to the registry: to the Exposer (or a Gateway) with
// RegisterCollectable, which takes any number of them.
//
// Families (all labelled with the constant labels given; times in seconds):
//   dlock_acquisitions_total{kind, outcome=acquired|reentered|not_acquired}     counter
//   dlock_acquisition_errors_total{kind, class=unavailable|ambiguous|...}       counter
//   dlock_acquisition_wait_seconds                                              histogram
//   dlock_hold_seconds                                                          histogram
//   dlock_handoff_seconds{path=handover|wake}                                   histogram
//   dlock_renewal_batches_total, dlock_renewals_total{result=ok|failed}         counter
//   dlock_renewal_batch_locks, dlock_renewal_slack_seconds                      histogram
//   dlock_losses_total{cause=gone|taken|deadline|server_error|undetermined|max_hold} counter
//   dlock_warnings_total                                                        counter
//   dlock_releases_total{outcome=released|not_owner|failed}                     counter
//   dlock_ambiguous_total, dlock_connects_total, dlock_reconnects_total,
//   dlock_topology_changes_total, dlock_commands_total, dlock_scripts_total,
//   dlock_noscript_fallbacks_total, dlock_watches_cancelled_total,
//   dlock_watch_streams_broken_total                                            counter
// dlock/metrics.hpp says what each one measures.
#pragma once

#include <dlock/client.hpp>
#include <dlock/metrics.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <prometheus/collectable.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>
#include <vector>

namespace dlock {

/// The metric families of one snapshot, each sample labelled with `labels`.
/// Errors: none (label names are not checked; use valid Prometheus names).
std::vector<::prometheus::MetricFamily>
prometheus_families(const metrics_snapshot& s, const ::prometheus::Labels& labels = {});

/// A collectable that takes a snapshot of `c` at every scrape.
/// Lifetimes: refers to the client's internals, not to the `client` object, so moving the
/// client is fine; once the client is destroyed the collectable returns no families.
/// Thread safety: Collect() from any thread (the exposer's), concurrently with the client.
std::shared_ptr<::prometheus::Collectable>
make_prometheus_collectable(const client& c, ::prometheus::Labels labels = {});

/// The same over any source of snapshots (a sum of several clients').
/// `source` runs on the scraping thread; returning std::nullopt yields no families.
std::shared_ptr<::prometheus::Collectable>
make_prometheus_collectable(std::function<std::optional<metrics_snapshot>()> source,
                            ::prometheus::Labels labels = {});

} // namespace dlock

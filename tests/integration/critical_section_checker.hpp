// critical_section_checker: who is inside a critical section, and every violation of the lock's
// rule seen at the moment someone entered. For every kind's tests: an exclusive lock has writers
// only; a read-write lock has writers and readers (at most `max_readers` at once, unbounded by
// default).
//
//   dlock::test::critical_section_checker check;
//   { auto in = check.enter_write(); ... }      // after lock()
//   { auto in = check.enter_read();  ... }      // after lock_shared()
//   EXPECT_EQ(check.violations(), 0);
//
// The whole state is one 64-bit atomic (writers in the high half, readers in the low half), so
// an entry sees exactly who was inside when it arrived: two writers, or a writer and a reader,
// are found by whichever of them came second. Only lock-free atomics: an object placed in
// MAP_SHARED memory (placement new) checks several processes.
#pragma once

#include <climits>

#include <atomic>
#include <cstdint>
#include <utility>

namespace dlock::test {

class critical_section_checker {
public:
    explicit critical_section_checker(std::int64_t max_readers = INT_MAX) noexcept
        : max_readers_(max_readers) {}
    critical_section_checker(const critical_section_checker&) = delete;
    critical_section_checker& operator=(const critical_section_checker&) = delete;

    /// Leaves the section when destroyed (or at leave()).
    class [[nodiscard]] guard {
    public:
        guard(guard&& o) noexcept
            : c_(std::exchange(o.c_, nullptr))
            , unit_(o.unit_) {}
        guard(const guard&) = delete;
        guard& operator=(const guard&) = delete;
        guard& operator=(guard&&) = delete;
        ~guard() { leave(); }
        void leave() noexcept {
            if (c_) c_->state_.fetch_sub(unit_, std::memory_order_acq_rel);
            c_ = nullptr;
        }

    private:
        friend class critical_section_checker;
        guard(critical_section_checker* c, std::int64_t unit) noexcept
            : c_(c)
            , unit_(unit) {}
        critical_section_checker* c_;
        std::int64_t unit_;
    };

    /// Enters as the holder of an exclusive (write) lock.
    guard enter_write() noexcept {
        const auto before = state_.fetch_add(writer_unit, std::memory_order_acq_rel);
        if (writers_of(before) > 0) two_writers_.fetch_add(1, std::memory_order_relaxed);
        if (readers_of(before) > 0) writer_and_reader_.fetch_add(1, std::memory_order_relaxed);
        raise(max_writers_, writers_of(before) + 1);
        writes_.fetch_add(1, std::memory_order_relaxed);
        return {this, writer_unit};
    }

    /// Enters as the holder of a shared (read) lock.
    guard enter_read() noexcept {
        const auto before = state_.fetch_add(1, std::memory_order_acq_rel);
        if (writers_of(before) > 0) writer_and_reader_.fetch_add(1, std::memory_order_relaxed);
        const auto readers = readers_of(before) + 1;
        if (readers > max_readers_) too_many_readers_.fetch_add(1, std::memory_order_relaxed);
        raise(max_readers_seen_, readers);
        reads_.fetch_add(1, std::memory_order_relaxed);
        return {this, 1};
    }

    /// Who is inside now.
    std::int64_t readers_inside() const noexcept { return readers_of(state_.load()); }
    std::int64_t writers_inside() const noexcept { return writers_of(state_.load()); }

    /// Violations: an entry that found another writer inside; a writer and a reader inside at
    /// once (counted by whichever came second); a reader that made the readers exceed the bound.
    std::int64_t two_writers() const noexcept { return two_writers_.load(); }
    std::int64_t writer_and_reader() const noexcept { return writer_and_reader_.load(); }
    std::int64_t too_many_readers() const noexcept { return too_many_readers_.load(); }
    std::int64_t violations() const noexcept {
        return two_writers() + writer_and_reader() + too_many_readers();
    }

    /// The most readers / writers ever inside at once, and the entries so far.
    std::int64_t max_readers_seen() const noexcept { return max_readers_seen_.load(); }
    std::int64_t max_writers_seen() const noexcept { return max_writers_.load(); }
    std::int64_t reads() const noexcept { return reads_.load(); }
    std::int64_t writes() const noexcept { return writes_.load(); }

private:
    static constexpr std::int64_t writer_unit = std::int64_t{1} << 32;
    static std::int64_t writers_of(std::int64_t s) noexcept { return s >> 32; }
    static std::int64_t readers_of(std::int64_t s) noexcept { return s & 0xffffffff; }
    static void raise(std::atomic<std::int64_t>& max, std::int64_t v) noexcept {
        auto seen = max.load(std::memory_order_relaxed);
        while (v > seen && !max.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
        }
    }

    static_assert(std::atomic<std::int64_t>::is_always_lock_free,
                  "the checker must work in memory shared between processes");

    const std::int64_t max_readers_;
    std::atomic<std::int64_t> state_{0};
    std::atomic<std::int64_t> two_writers_{0};
    std::atomic<std::int64_t> writer_and_reader_{0};
    std::atomic<std::int64_t> too_many_readers_{0};
    std::atomic<std::int64_t> max_readers_seen_{0};
    std::atomic<std::int64_t> max_writers_{0};
    std::atomic<std::int64_t> reads_{0};
    std::atomic<std::int64_t> writes_{0};
};

} // namespace dlock::test

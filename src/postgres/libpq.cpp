#include "postgres/libpq.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace dlock::detail::pg {
namespace {

std::string dl_error() {
    const char* e = ::dlerror();
    return e ? e : "unknown error";
}

template <class Fn>
bool resolve(void* lib, const char* symbol, Fn& out, std::string& why, const char* soname) {
    ::dlerror(); // clear: dlsym's own result cannot tell a missing symbol from a null one
    void* p = ::dlsym(lib, symbol);
    if (!p) {
        why = std::string(soname) + " has no " + symbol +
              " (libpq 14 or newer is needed): " + dl_error();
        return false;
    }
    out = reinterpret_cast<Fn>(p); // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
    return true;
}

struct process_libpq {
    std::once_flag once;
    libpq_api api;
    std::string why;
    std::atomic<const libpq_api*> loaded{nullptr}; // set once, after `api` is filled
};

// Never destroyed: a connection closed by a static destructor still calls PQfinish.
process_libpq& process() {
    static auto* p = new process_libpq; // NOLINT(cppcoreguidelines-owning-memory)
    return *p;
}

} // namespace

bool load_libpq_from(const char* soname, libpq_api& out, std::string& why) {
    // RTLD_LOCAL: libpq's symbols (and its GnuTLS, Kerberos ...) stay out of the global scope,
    // so they cannot stand in for another copy the program links itself.
    void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        why = std::string("cannot load ") + soname +
              " (the PostgreSQL client library; Debian package libpq5): " + dl_error();
        return false;
    }
    libpq_api a;
    const auto get = [&](const char* symbol, auto& fn) {
        return resolve(lib, symbol, fn, why, soname);
    };
    const bool ok =
        get("PQconninfoParse", a.conninfo_parse) && get("PQconninfoFree", a.conninfo_free) &&
        get("PQconnectStartParams", a.connect_start_params) &&
        get("PQconnectPoll", a.connect_poll) && get("PQfinish", a.finish) &&
        get("PQstatus", a.status) && get("PQerrorMessage", a.error_message) &&
        get("PQsetNoticeReceiver", a.set_notice_receiver) && get("PQsocket", a.socket) &&
        get("PQsetnonblocking", a.set_nonblocking) &&
        get("PQenterPipelineMode", a.enter_pipeline_mode) && get("PQbackendPID", a.backend_pid) &&
        get("PQconsumeInput", a.consume_input) && get("PQnotifies", a.notifies) &&
        get("PQfreemem", a.freemem) && get("PQisBusy", a.is_busy) &&
        get("PQgetResult", a.get_result) && get("PQsendQueryParams", a.send_query_params) &&
        get("PQsendPrepare", a.send_prepare) && get("PQsendQueryPrepared", a.send_query_prepared) &&
        get("PQpipelineSync", a.pipeline_sync) && get("PQflush", a.flush) &&
        get("PQclear", a.clear) && get("PQresultStatus", a.result_status) &&
        get("PQresultErrorField", a.result_error_field) &&
        get("PQresultErrorMessage", a.result_error_message) && get("PQntuples", a.ntuples) &&
        get("PQnfields", a.nfields) && get("PQcmdTuples", a.cmd_tuples) &&
        get("PQgetisnull", a.getisnull) && get("PQgetvalue", a.getvalue) &&
        get("PQgetlength", a.getlength);
    if (!ok) {
        ::dlclose(lib); // nothing of it was handed out
        return false;
    }
    out = a;
    return true;
}

const libpq_api* load_libpq(std::string* why) {
    auto& p = process();
    std::call_once(p.once, [&p] {
        if (load_libpq_from(libpq_soname, p.api, p.why))
            p.loaded.store(&p.api, std::memory_order_release);
    });
    if (const auto* api = p.loaded.load(std::memory_order_acquire)) return api;
    if (why) *why = p.why;
    return nullptr;
}

const libpq_api& pq() noexcept {
    const libpq_api* api = process().loaded.load(std::memory_order_acquire);
    if (!api) { // a caller broke the rule above: no settings, so no connection, exist
        std::fputs("dlock: libpq used before it was loaded\n", stderr);
        std::abort();
    }
    return *api;
}

} // namespace dlock::detail::pg

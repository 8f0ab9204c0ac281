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
    const bool ok = resolve(lib, "PQconninfoParse", a.conninfo_parse, why, soname) &&
                    resolve(lib, "PQconninfoFree", a.conninfo_free, why, soname) &&
                    resolve(lib, "PQconnectStartParams", a.connect_start_params, why, soname) &&
                    resolve(lib, "PQconnectPoll", a.connect_poll, why, soname) &&
                    resolve(lib, "PQfinish", a.finish, why, soname) &&
                    resolve(lib, "PQstatus", a.status, why, soname) &&
                    resolve(lib, "PQerrorMessage", a.error_message, why, soname) &&
                    resolve(lib, "PQsetNoticeReceiver", a.set_notice_receiver, why, soname) &&
                    resolve(lib, "PQsocket", a.socket, why, soname) &&
                    resolve(lib, "PQsetnonblocking", a.set_nonblocking, why, soname) &&
                    resolve(lib, "PQenterPipelineMode", a.enter_pipeline_mode, why, soname) &&
                    resolve(lib, "PQbackendPID", a.backend_pid, why, soname) &&
                    resolve(lib, "PQconsumeInput", a.consume_input, why, soname) &&
                    resolve(lib, "PQnotifies", a.notifies, why, soname) &&
                    resolve(lib, "PQfreemem", a.freemem, why, soname) &&
                    resolve(lib, "PQisBusy", a.is_busy, why, soname) &&
                    resolve(lib, "PQgetResult", a.get_result, why, soname) &&
                    resolve(lib, "PQsendQueryParams", a.send_query_params, why, soname) &&
                    resolve(lib, "PQpipelineSync", a.pipeline_sync, why, soname) &&
                    resolve(lib, "PQflush", a.flush, why, soname) &&
                    resolve(lib, "PQclear", a.clear, why, soname) &&
                    resolve(lib, "PQresultStatus", a.result_status, why, soname) &&
                    resolve(lib, "PQresultErrorField", a.result_error_field, why, soname) &&
                    resolve(lib, "PQresultErrorMessage", a.result_error_message, why, soname) &&
                    resolve(lib, "PQntuples", a.ntuples, why, soname) &&
                    resolve(lib, "PQnfields", a.nfields, why, soname) &&
                    resolve(lib, "PQcmdTuples", a.cmd_tuples, why, soname) &&
                    resolve(lib, "PQgetisnull", a.getisnull, why, soname) &&
                    resolve(lib, "PQgetvalue", a.getvalue, why, soname) &&
                    resolve(lib, "PQgetlength", a.getlength, why, soname);
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

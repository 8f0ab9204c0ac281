// pg::libpq: the libpq functions dlock calls, loaded from libpq.so.5 when a process first parses
// a postgresql:// URL, not at start-up (docs/design/postgres.md, "libpq on demand").
//
// Why: libpq pulls in Kerberos, LDAP, SASL and GnuTLS (about 20 shared libraries and 3 MiB of
// resident pages in every dlock process). A program that only talks to Redis, ZooKeeper or etcd
// should not carry them. So libdlock does not link libpq; it includes libpq-fe.h for the types
// and calls through the table below, filled once by dlopen and dlsym. The library stays loaded
// for the life of the process (no dlclose: connections may outlive any owner of the table).
#pragma once

#include <libpq-fe.h>
#include <string>

namespace dlock::detail::pg {

struct libpq_api {
    decltype(&::PQconninfoParse) conninfo_parse = nullptr;
    decltype(&::PQconninfoFree) conninfo_free = nullptr;
    decltype(&::PQconnectStartParams) connect_start_params = nullptr;
    decltype(&::PQconnectPoll) connect_poll = nullptr;
    decltype(&::PQfinish) finish = nullptr;
    decltype(&::PQstatus) status = nullptr;
    decltype(&::PQerrorMessage) error_message = nullptr;
    decltype(&::PQsetNoticeReceiver) set_notice_receiver = nullptr;
    decltype(&::PQsocket) socket = nullptr;
    decltype(&::PQsetnonblocking) set_nonblocking = nullptr;
    decltype(&::PQenterPipelineMode) enter_pipeline_mode = nullptr;
    decltype(&::PQbackendPID) backend_pid = nullptr;
    decltype(&::PQconsumeInput) consume_input = nullptr;
    decltype(&::PQnotifies) notifies = nullptr;
    decltype(&::PQfreemem) freemem = nullptr;
    decltype(&::PQisBusy) is_busy = nullptr;
    decltype(&::PQgetResult) get_result = nullptr;
    decltype(&::PQsendQueryParams) send_query_params = nullptr;
    decltype(&::PQsendPrepare) send_prepare = nullptr;
    decltype(&::PQsendQueryPrepared) send_query_prepared = nullptr;
    decltype(&::PQpipelineSync) pipeline_sync = nullptr;
    decltype(&::PQflush) flush = nullptr;
    decltype(&::PQclear) clear = nullptr;
    decltype(&::PQresultStatus) result_status = nullptr;
    decltype(&::PQresultErrorField) result_error_field = nullptr;
    decltype(&::PQresultErrorMessage) result_error_message = nullptr;
    decltype(&::PQntuples) ntuples = nullptr;
    decltype(&::PQnfields) nfields = nullptr;
    decltype(&::PQcmdTuples) cmd_tuples = nullptr;
    decltype(&::PQgetisnull) getisnull = nullptr;
    decltype(&::PQgetvalue) getvalue = nullptr;
    decltype(&::PQgetlength) getlength = nullptr;
};

/// The soname dlock loads: the one Debian's libpq5 package installs (libpq's ABI has kept
/// major version 5 since PostgreSQL 8.2).
inline constexpr const char* libpq_soname = "libpq.so.5";

/// Loads `soname` and fills `out` with every function above. On failure returns false and sets
/// `why` to a sentence naming the library, the missing symbol if any, and dlerror()'s text.
/// Each call loads afresh (the test's entry point); the process's table is load_libpq().
bool load_libpq_from(const char* soname, libpq_api& out, std::string& why);

/// The process's table, loaded from libpq_soname at the first call (thread-safe); nullptr with
/// `why` set when libpq cannot be loaded. Every later call returns the same answer.
const libpq_api* load_libpq(std::string* why = nullptr);

/// The loaded table. Only code that runs after a successful load_libpq() calls it: every
/// pg::settings comes from parse_settings(), which loads libpq first, and every connection is
/// made from settings.
const libpq_api& pq() noexcept;

} // namespace dlock::detail::pg

# Script mode helper of dlock_embed_scripts(): writes OUT from SCRIPTS (paths below ROOT).
set(ids "")
set(texts "")
list(SORT SCRIPTS)
foreach(script IN LISTS SCRIPTS)
  file(RELATIVE_PATH rel ${ROOT} ${script})
  string(REGEX REPLACE "^locks/" "" rel "${rel}")
  string(REGEX REPLACE "\\.lua$" "" rel "${rel}")
  string(REPLACE "/" "_" id "${rel}")
  if(NOT id MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "${script}: script name '${id}' is not a C++ identifier")
  endif()
  file(READ ${script} text)
  string(FIND "${text}" ")dlock_lua\"" bad)
  if(NOT bad EQUAL -1)
    message(FATAL_ERROR "${script} contains the raw-string delimiter")
  endif()
  string(APPEND ids "    ${id},\n")
  string(APPEND texts "    R\"dlock_lua(${text})dlock_lua\",\n")
endforeach()
set(content "// Generated from src/redis/**/*.lua by cmake/EmbedScriptsRun.cmake. Do not edit.
#pragma once
#include <array>
#include <cstddef>
#include <string_view>
namespace dlock::detail {
/// One enumerator per embedded script, in the order of script_texts.
enum class script_id {
${ids}    count_
};
inline constexpr std::array<std::string_view, static_cast<std::size_t>(script_id::count_)>
    script_texts{
${texts}};
} // namespace dlock::detail
")
file(WRITE ${OUT}.tmp "${content}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)

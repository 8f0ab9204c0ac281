# dlock_embed_scripts(OUT header SCRIPTS a.lua b.lua ...)
# Generates a header of `inline constexpr std::string_view <stem>_lua` holding each script's
# exact text. Regenerated when a script changes.
function(dlock_embed_scripts)
  cmake_parse_arguments(ARG "" "OUT" "SCRIPTS" ${ARGN})
  add_custom_command(
    OUTPUT ${ARG_OUT}
    COMMAND ${CMAKE_COMMAND} -DOUT=${ARG_OUT} "-DSCRIPTS=${ARG_SCRIPTS}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedScriptsRun.cmake
    DEPENDS ${ARG_SCRIPTS} ${PROJECT_SOURCE_DIR}/cmake/EmbedScriptsRun.cmake
    COMMENT "Embedding Lua scripts"
    VERBATIM)
endfunction()

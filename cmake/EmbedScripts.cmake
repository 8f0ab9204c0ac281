# dlock_embed_scripts(OUT header ROOT dir SCRIPTS a.lua b.lua ...)
# Generates the script table: `enum class script_id` with one enumerator per script, named
# after its path below ROOT with the `locks/` folder dropped and '/' turned into '_'
# (locks/reentrant/acquire.lua -> reentrant_acquire, fencing/set.lua -> fencing_set), and
# `script_texts`, each script's exact text in the same order. A new .lua file in a kind's
# folder is embedded and registered without editing any list. Regenerated when a script changes.
function(dlock_embed_scripts)
  cmake_parse_arguments(ARG "" "OUT;ROOT" "SCRIPTS" ${ARGN})
  add_custom_command(
    OUTPUT ${ARG_OUT}
    COMMAND ${CMAKE_COMMAND} -DOUT=${ARG_OUT} -DROOT=${ARG_ROOT} "-DSCRIPTS=${ARG_SCRIPTS}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedScriptsRun.cmake
    DEPENDS ${ARG_SCRIPTS} ${PROJECT_SOURCE_DIR}/cmake/EmbedScriptsRun.cmake
    COMMENT "Embedding Lua scripts"
    VERBATIM)
endfunction()

# SPDX-License-Identifier: Apache-2.0
# After each link of libnemolens_preload.so: every function that a file in
# hooks/ defines with NL_EXPORT (or NL_EXPORT_COLD) is a dynamic symbol of the .so. A hook left
# out of preload/base/interposed.h would be made local by the version script
# and silently never called; this makes it a build error instead.
file(GLOB hook_files ${HOOKS_DIR}/*.c)
set(defined "")
foreach(f ${hook_files})
  file(STRINGS ${f} lines REGEX "^NL_EXPORT(_COLD)? ")
  foreach(l ${lines})
    string(REGEX MATCH "([A-Za-z_0-9]+)\\(" m "${l}")
    list(APPEND defined ${CMAKE_MATCH_1})
  endforeach()
endforeach()
execute_process(COMMAND nm -D --defined-only ${SO} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${SO}")
endif()
foreach(name ${defined})
  if(NOT syms MATCHES " T ${name}\n")
    message(FATAL_ERROR "hooks define ${name} but ${SO} does not export it: add it to preload/base/interposed.h")
  endif()
endforeach()

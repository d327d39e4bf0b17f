# SPDX-License-Identifier: Apache-2.0
# The user documentation: the manual pages, nemolens-run(1) and nemolens(7),
# turned into roff by scdoc from their sources in docs/man/, and the
# reference pages of docs/, installed beside the README.
#
# nemolens(7)'s list of variables is made from docs/configuration.md's table
# (docs/man/config_to_scd.py), so the page and the reference never differ.
# Debian wants manual pages compressed, with no name or time in the gzip
# header (reproducible): gzip -9n.
find_program(NL_SCDOC scdoc)
if(NOT NL_SCDOC)
  message(FATAL_ERROR "scdoc not found: it builds the manual pages (bash scripts/setup-deps.sh installs it)")
endif()
find_program(NL_GZIP gzip REQUIRED)
set(NL_MAN_DIR ${CMAKE_BINARY_DIR}/man)
file(MAKE_DIRECTORY ${NL_MAN_DIR})
set(NL_MAN_SRC ${CMAKE_SOURCE_DIR}/docs/man)

add_custom_command(OUTPUT ${NL_MAN_DIR}/nemolens.7.scd
  COMMAND /usr/bin/python3 ${NL_MAN_SRC}/config_to_scd.py ${CMAKE_SOURCE_DIR}/docs/configuration.md
          ${NL_MAN_SRC}/nemolens.7.scd.in ${NL_MAN_DIR}/nemolens.7.scd
  DEPENDS ${NL_MAN_SRC}/config_to_scd.py ${CMAKE_SOURCE_DIR}/docs/configuration.md ${NL_MAN_SRC}/nemolens.7.scd.in)

set(NL_MAN_PAGES)
foreach(page nemolens-run.1 nemolens.7)
  if(EXISTS ${NL_MAN_SRC}/${page}.scd)
    set(src ${NL_MAN_SRC}/${page}.scd)
  else()
    set(src ${NL_MAN_DIR}/${page}.scd)
  endif()
  add_custom_command(OUTPUT ${NL_MAN_DIR}/${page} ${NL_MAN_DIR}/${page}.gz
    COMMAND ${CMAKE_COMMAND} -DSCDOC=${NL_SCDOC} -DIN=${src} -DOUT=${NL_MAN_DIR}/${page}
            -P ${CMAKE_SOURCE_DIR}/cmake/scdoc.cmake
    COMMAND ${NL_GZIP} -9nkf ${NL_MAN_DIR}/${page}
    DEPENDS ${src} ${CMAKE_SOURCE_DIR}/cmake/scdoc.cmake)
  list(APPEND NL_MAN_PAGES ${NL_MAN_DIR}/${page}.gz)
  string(REGEX MATCH "[0-9]$" section ${page})
  install(FILES ${NL_MAN_DIR}/${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()
add_custom_target(nl_man ALL DEPENDS ${NL_MAN_PAGES})

install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
  FILES_MATCHING PATTERN "*.md" PATTERN "man" EXCLUDE)

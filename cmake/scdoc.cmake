# SPDX-License-Identifier: Apache-2.0
# cmake -DSCDOC=... -DIN=page.scd -DOUT=page -P scdoc.cmake: scdoc reads its
# source on standard input and writes roff on standard output.
execute_process(COMMAND ${SCDOC} INPUT_FILE ${IN} OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT})
  message(FATAL_ERROR "scdoc ${IN} failed (${rc})")
endif()

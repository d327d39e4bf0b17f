# SPDX-License-Identifier: Apache-2.0
# Generates the protobuf-c code for the OTLP metrics service from the .proto
# files of Debian's opentelemetry-proto package. protoc-c 1.4 rejects proto3
# `optional` fields, so each one is rewritten to the single-field oneof that
# encodes identically on the wire (`oneof _sum { double sum = 5; }`).
set(NL_OTLP_PROTOS
  opentelemetry/proto/common/v1/common.proto
  opentelemetry/proto/resource/v1/resource.proto
  opentelemetry/proto/metrics/v1/metrics.proto
  opentelemetry/proto/collector/metrics/v1/metrics_service.proto)
set(NL_OTLP_GEN_DIR ${CMAKE_BINARY_DIR}/otlp)
set(NL_OTLP_SRC_DIR ${CMAKE_BINARY_DIR}/otlp-proto)
set(NL_OTLP_SRCS "")
set(_rewritten "")
foreach(p ${NL_OTLP_PROTOS})
  if(NOT EXISTS ${NEMOLENS_PROTO_DIR}/${p})
    message(FATAL_ERROR "${NEMOLENS_PROTO_DIR}/${p} not found: run scripts/setup-deps.sh")
  endif()
  add_custom_command(
    OUTPUT ${NL_OTLP_SRC_DIR}/${p}
    COMMAND ${CMAKE_COMMAND} -DIN=${NEMOLENS_PROTO_DIR}/${p} -DOUT=${NL_OTLP_SRC_DIR}/${p}
            -P ${CMAKE_SOURCE_DIR}/cmake/rewrite_optional.cmake
    DEPENDS ${NEMOLENS_PROTO_DIR}/${p} ${CMAKE_SOURCE_DIR}/cmake/rewrite_optional.cmake)
  list(APPEND _rewritten ${NL_OTLP_SRC_DIR}/${p})
  string(REGEX REPLACE "\\.proto$" ".pb-c.c" _c ${p})
  list(APPEND NL_OTLP_SRCS ${NL_OTLP_GEN_DIR}/${_c})
endforeach()
string(REGEX REPLACE "\\.c(;|$)" ".h\\1" NL_OTLP_HDRS "${NL_OTLP_SRCS}")
add_custom_command(
  OUTPUT ${NL_OTLP_SRCS} ${NL_OTLP_HDRS}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${NL_OTLP_GEN_DIR}
  COMMAND ${PROTOC_C} --c_out=${NL_OTLP_GEN_DIR} -I${NL_OTLP_SRC_DIR} ${NL_OTLP_PROTOS}
  DEPENDS ${_rewritten}
  WORKING_DIRECTORY ${NL_OTLP_SRC_DIR})
set_source_files_properties(${NL_OTLP_SRCS} PROPERTIES COMPILE_OPTIONS "-w")

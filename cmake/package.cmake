# SPDX-License-Identifier: Apache-2.0
# The Debian package: `cmake --build build --target package` writes
# build/nemolens_<version>_<arch>.deb with every install() rule of the project
# (the shim and its export module, libnemolens.so, header and nemolens.pc, nemolens-run, the Python
# adapter, the dashboards, the docs), installed under /usr.
#
# Depends: what dpkg-shlibdeps finds in the ELF files, plus the runtime
# packages of libcurl, which the export module opens with dlopen
# (exporter/curl_dl.c), of libunwind, which the shim opens at its first
# call site (preload/base/unwind.c), and of libmicrohttpd, which
# nemolens-run opens for its Prometheus endpoint: no ELF file names them. Nothing is activated on install: no maintainer
# scripts touch /etc/ld.so.preload (docs/install.md).

# Files Debian wants in every package's doc directory.
set(NL_DEB_DOC ${CMAKE_CURRENT_BINARY_DIR}/debian-doc)
file(MAKE_DIRECTORY ${NL_DEB_DOC})
# The date honours SOURCE_DATE_EPOCH (reproducible builds).
string(TIMESTAMP NL_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/changelog.in ${NL_DEB_DOC}/changelog @ONLY)
# gzip -n: no name or time stamp in the header, so the file is reproducible.
execute_process(COMMAND gzip -9nf ${NL_DEB_DOC}/changelog RESULT_VARIABLE gz_rc)
if(NOT gz_rc EQUAL 0)
  message(FATAL_ERROR "gzip ${NL_DEB_DOC}/changelog failed")
endif()
install(FILES ${NL_DEB_DOC}/changelog.gz ${CMAKE_CURRENT_LIST_DIR}/debian/copyright README.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME nemolens)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "nemolens")
set(CPACK_PACKAGE_CONTACT "nemolens maintainers <maintainers@users.noreply.a-seed-7cbbf559.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "NeMo Gym and NeMo Lens metrics for unmodified programs via LD_PRELOAD")
# The synopsis is the summary; this is the extended description (CPack
# indents it and turns empty lines into " .").
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "libnemolens_preload.so, loaded into any dynamically linked program with
LD_PRELOAD (or started with nemolens-run), records connection attempts,
their waits and the code that made them, HTTP/1.x requests on both sides and memory of server process
trees, and exports them as OpenTelemetry metrics over OTLP/HTTP with NeMo
Gym's names. libnemolens.so and its header give C programs NeMo Lens's record
functions. A Grafana dashboard for Prometheus-type backends is included.

Installing the package activates nothing: programs are instrumented only
when started with nemolens-run or LD_PRELOAD.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libcurl.so.4, libunwind.so.8 and libmicrohttpd.so.12 are opened with
# dlopen: dpkg-shlibdeps cannot see them.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libcurl4, libunwind8, libmicrohttpd12")
# The shlibs entry of the public libnemolens.so.0 (so packages linked with it
# depend on this one), and the ldconfig trigger Debian wants for libraries in
# the loader's directories.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(NL_DEB_TRIGGERS ${CMAKE_CURRENT_BINARY_DIR}/debian-control/triggers)
file(WRITE ${NL_DEB_TRIGGERS} "activate-noawait ldconfig\n")
# Maintainer scripts: the Python adapter (if the package has it) compiled at
# install and its caches removed before removal; nothing else. This postinst
# replaces CPack's, which would call ldconfig (the trigger runs it); CPack's
# postrm still does.
set(NL_DEB_PYTHON_DIR usr/${CMAKE_INSTALL_LIBDIR}/nemolens-python)
configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/postinst.in ${CMAKE_CURRENT_BINARY_DIR}/debian-control/postinst @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/prerm.in ${CMAKE_CURRENT_BINARY_DIR}/debian-control/prerm @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${NL_DEB_TRIGGERS}
    ${CMAKE_CURRENT_BINARY_DIR}/debian-control/postinst ${CMAKE_CURRENT_BINARY_DIR}/debian-control/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Directories as Debian policy has them, whatever the builder's umask.
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
include(CPack)

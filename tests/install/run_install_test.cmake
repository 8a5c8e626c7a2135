# run_install_test.cmake -- cmake -P script behind the install_consumer test.
#   1. cmake --install BUILD_DIR --prefix WORK_DIR/prefix
#   2. configure and build consumer/ with find_package(redjit); run its shared and static programs
#   3. cc consumer/main.c $(pkg-config --cflags --libs redjit), README's line and nothing more;
#      run it, with no LD_LIBRARY_PATH: the .pc's rpath must find libredjit.so.0
#   4. the same against libredjit.a alone with pkg-config --static; run it
#   5. an install for prefix /usr (under DESTDIR): its redjit.pc has no rpath
# Prints one line per check and a final "N passed, M failed"; fails if M > 0.

foreach(v BUILD_DIR WORK_DIR CONSUMER_DIR LIBDIR GENERATOR C_COMPILER)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: -D${v}=... is required")
  endif()
endforeach()

set(passed 0)
set(failed 0)
macro(check name ok detail)
  if(${ok})
    math(EXPR passed "${passed} + 1")
    message("PASS ${name}")
  else()
    math(EXPR failed "${failed} + 1")
    message("FAIL ${name}\n${detail}")
  endif()
endmacro()

# Run a command; set <name>_ok and <name>_log (command line, output).
function(run name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(JOIN " " cmdline ${ARGN})
  if(rc EQUAL 0)
    set(${name}_ok TRUE PARENT_SCOPE)
  else()
    set(${name}_ok FALSE PARENT_SCOPE)
  endif()
  set(${name}_log "  $ ${cmdline}\n  exit: ${rc}\n${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# ---- 1. install -----------------------------------------------------------------------------
set(config_args "")
if(CONFIG)
  set(config_args --config ${CONFIG})
endif()
run(install ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})
check("cmake --install into ${prefix}" install_ok "${install_log}")
if(NOT install_ok)
  message("${passed} passed, ${failed} failed")
  message(FATAL_ERROR "install failed; nothing else to check")
endif()
foreach(f include/redjit.h ${LIBDIR}/pkgconfig/redjit.pc ${LIBDIR}/cmake/redjit/redjitConfig.cmake
          ${LIBDIR}/cmake/redjit/redjitConfigVersion.cmake)
  if(EXISTS ${prefix}/${f})
    set(present TRUE)
  else()
    set(present FALSE)
  endif()
  check("installed ${f}" present "  missing: ${prefix}/${f}")
endforeach()

# ---- 2. find_package(redjit) ---------------------------------------------------------------
set(cbuild ${WORK_DIR}/consumer-build)
set(make_args "")
if(MAKE_PROGRAM)
  set(make_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
run(cfg ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${cbuild} -G ${GENERATOR} ${make_args}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON
    -DCMAKE_C_COMPILER=${C_COMPILER} "-DCMAKE_C_FLAGS=${EXTRA_C_FLAGS}"
    -DCMAKE_BUILD_TYPE=Release)
check("find_package(redjit): configure" cfg_ok "${cfg_log}")
if(cfg_ok)
  run(bld ${CMAKE_COMMAND} --build ${cbuild})
  check("find_package(redjit): build" bld_ok "${bld_log}")
  foreach(kind shared static)
    if(bld_ok)
      set(target redjit)
      if(kind STREQUAL "static")
        set(target redjit_static)
      endif()
      run(exe ${cbuild}/consumer_${kind})
      check("find_package(redjit): run consumer_${kind} (redjit::${target})" exe_ok "${exe_log}")
    endif()
  endforeach()
endif()

# ---- 3 and 4. pkg-config ----------------------------------------------------------------------
if(NOT PKG_CONFIG)
  message("SKIP pkg-config checks: pkg-config not found")
else()
  set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
  separate_arguments(extra UNIX_COMMAND "${EXTRA_C_FLAGS}")

  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs redjit RESULT_VARIABLE rc
                  OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_err OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${PKG_CONFIG} --variable=libdir redjit
                  OUTPUT_VARIABLE pc_libdir OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(pc_ok FALSE)
  if(rc EQUAL 0 AND pc_libdir STREQUAL "${prefix}/${LIBDIR}")
    set(pc_ok TRUE)
  endif()
  check("pkg-config --cflags --libs redjit: ${pc_flags}" pc_ok
        "  exit ${rc}, libdir '${pc_libdir}' (want ${prefix}/${LIBDIR})\n${pc_err}")
  if(pc_ok)
    string(FIND " ${pc_flags} " " -Wl,-rpath,${prefix}/${LIBDIR} " at)
    set(rpath_ok FALSE)
    if(at GREATER -1)
      set(rpath_ok TRUE)
    endif()
    check("pkg-config --libs has an rpath to ${prefix}/${LIBDIR}" rpath_ok "  flags: ${pc_flags}")
    separate_arguments(pc_list UNIX_COMMAND "${pc_flags}")
    run(cc ${C_COMPILER} ${extra} ${CONSUMER_DIR}/main.c -o ${WORK_DIR}/pc_shared ${pc_list})
    check("pkg-config: cc main.c $(pkg-config --cflags --libs redjit)" cc_ok "${cc_log}")
    if(cc_ok)
      set(saved_ld_path "$ENV{LD_LIBRARY_PATH}")
      unset(ENV{LD_LIBRARY_PATH})
      run(exe ${WORK_DIR}/pc_shared)
      set(ENV{LD_LIBRARY_PATH} "${saved_ld_path}")
      check("pkg-config: run pc_shared (libredjit.so.0 found through the rpath)" exe_ok "${exe_log}")
    endif()

    # Static: a directory holding only libredjit.a comes first on the search path, so -lredjit
    # must resolve to the archive and Libs.private must supply everything it needs.
    execute_process(COMMAND ${PKG_CONFIG} --static --libs redjit
                    OUTPUT_VARIABLE pcs_flags OUTPUT_STRIP_TRAILING_WHITESPACE)
    file(MAKE_DIRECTORY ${WORK_DIR}/static-only)
    file(COPY ${prefix}/${LIBDIR}/libredjit.a DESTINATION ${WORK_DIR}/static-only)
    separate_arguments(pcs_list UNIX_COMMAND "${pcs_flags}")
    execute_process(COMMAND ${PKG_CONFIG} --cflags redjit
                    OUTPUT_VARIABLE pcc_flags OUTPUT_STRIP_TRAILING_WHITESPACE)
    separate_arguments(pcc_list UNIX_COMMAND "${pcc_flags}")
    run(ccs ${C_COMPILER} ${extra} ${CONSUMER_DIR}/main.c -o ${WORK_DIR}/pc_static
        ${pcc_list} -L${WORK_DIR}/static-only ${pcs_list})
    check("pkg-config --static: cc main.c libredjit.a ${pcs_flags}" ccs_ok "${ccs_log}")
    if(ccs_ok)
      file(REMOVE_RECURSE ${WORK_DIR}/static-only)   # prove nothing is loaded from there
      run(exe ${WORK_DIR}/pc_static)
      check("pkg-config --static: run pc_static" exe_ok "${exe_log}")
    endif()
  endif()
endif()

# ---- 5. a system prefix ------------------------------------------------------------------------
# DESTDIR keeps the files in the scratch directory; the .pc is written for prefix /usr, whose
# library directory the loader searches anyway: an rpath there would only override the system.
set(ENV{DESTDIR} ${WORK_DIR}/destdir)
run(sysinst ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix /usr ${config_args})
unset(ENV{DESTDIR})
set(sys_pc ${WORK_DIR}/destdir/usr/${LIBDIR}/pkgconfig/redjit.pc)
set(sys_ok FALSE)
set(sys_libs "")
if(sysinst_ok AND EXISTS ${sys_pc})
  file(STRINGS ${sys_pc} sys_libs REGEX "^Libs:")
  if(sys_libs MATCHES "^Libs: " AND NOT sys_libs MATCHES "rpath")
    set(sys_ok TRUE)
  endif()
endif()
check("prefix /usr: redjit.pc has no rpath" sys_ok "${sysinst_log}\n  ${sys_pc}: '${sys_libs}'")

message("${passed} passed, ${failed} failed")
if(failed GREATER 0)
  message(FATAL_ERROR "install test failed")
endif()

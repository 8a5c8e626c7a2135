# install.cmake -- the installed package: CMake config files (find_package(redjit)) and redjit.pc.
# Included from the top-level CMakeLists.txt after install(TARGETS redjit redjit_static
# EXPORT redjitTargets); this file only describes how other projects find what was installed.

include(CMakePackageConfigHelpers)

set(REDJIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/redjit
    CACHE STRING "Where redjitConfig.cmake is installed, relative to the prefix")

# redjit::redjit (shared) and redjit::redjit_static.  The static archive's link interface names
# OpenMP::OpenMP_C, m and dl; redjitConfig.cmake finds OpenMP before loading the targets.
install(EXPORT redjitTargets
        NAMESPACE redjit::
        FILE redjitTargets.cmake
        DESTINATION ${REDJIT_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/redjitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/redjitConfig.cmake
  INSTALL_DESTINATION ${REDJIT_INSTALL_CMAKEDIR})

# 0.x releases may break the interface at every minor version (SemVer), so a request for 0.1
# accepts 0.1.z only.  Revisit when 1.0 is tagged: SameMajorVersion then.
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/redjitConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)

install(FILES ${CMAKE_CURRENT_BINARY_DIR}/redjitConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/redjitConfigVersion.cmake
        DESTINATION ${REDJIT_INSTALL_CMAKEDIR})

# ---- pkg-config -------------------------------------------------------------------------------
# The prefix is written when the files are installed, not when the build is configured, so that
# `cmake --install build --prefix DIR` produces a redjit.pc that points into DIR.
set(REDJIT_PC_LIBS_PRIVATE "${OpenMP_C_FLAGS} -lm")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND REDJIT_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
if(REDJIT_HAVE_MPI)
  # the MPI engine (src/dist/mpi.c) calls MPI: a static link needs its libraries
  string(APPEND REDJIT_PC_LIBS_PRIVATE " ${MPI_C_LINK_FLAGS}")
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND REDJIT_PC_LIBS_PRIVATE " ${lib}")
  endforeach()
endif()
string(STRIP "${REDJIT_PC_LIBS_PRIVATE}" REDJIT_PC_LIBS_PRIVATE)

foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(REDJIT_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(REDJIT_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()

# A program linked with `pkg-config --libs redjit` must also find libredjit.so.0 when it runs.
# The loader searches the system's directories only, so for any other libdir (a prefix in $HOME,
# /opt, /usr/local before ldconfig has run) Libs carries an rpath to it.  The directories the
# compiler links from without -L stand for the system's; the choice waits for the install
# prefix, known only at install time.
set(REDJIT_PC_SYSTEM_LIBDIRS ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES} ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES})
set(redjit_pc_in ${CMAKE_CURRENT_LIST_DIR}/redjit.pc.in)
set(redjit_pc ${CMAKE_CURRENT_BINARY_DIR}/redjit.pc)
install(CODE "
  set(REDJIT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(libdir [[${CMAKE_INSTALL_LIBDIR}]])
  if(NOT IS_ABSOLUTE \"\${libdir}\")
    set(libdir \"\${CMAKE_INSTALL_PREFIX}/\${libdir}\")
  endif()
  file(REAL_PATH \"\${libdir}\" libdir)
  set(REDJIT_PC_RPATH [[-Wl,-rpath,\${libdir} ]])
  set(system_libdirs [[${REDJIT_PC_SYSTEM_LIBDIRS}]])
  foreach(dir IN LISTS system_libdirs)
    file(REAL_PATH \"\${dir}\" dir)
    if(dir STREQUAL libdir)
      set(REDJIT_PC_RPATH \"\")
    endif()
  endforeach()
  set(REDJIT_PC_LIBDIR [[${REDJIT_PC_LIBDIR}]])
  set(REDJIT_PC_INCLUDEDIR [[${REDJIT_PC_INCLUDEDIR}]])
  set(REDJIT_PC_LIBS_PRIVATE [[${REDJIT_PC_LIBS_PRIVATE}]])
  set(PROJECT_VERSION [[${PROJECT_VERSION}]])
  configure_file([[${redjit_pc_in}]] [[${redjit_pc}]] @ONLY)
")
install(FILES ${redjit_pc} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

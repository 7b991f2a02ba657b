# What `cmake --install` puts under the prefix, and `cpack` into a .deb:
#   bin/uroce
#   include/uroce/...                     the C++ API and its vocabulary
#   lib/liburoce.so.0 (+ liburoce.so)      the C++ API (uroce::uroce, pkg-config uroce)
#   lib/cmake/uroce/                       uroceConfig.cmake, uroceConfigVersion.cmake, targets
#   lib/pkgconfig/uroce.pc
#   lib/uroce/libibverbs.so.1, libmlx5.so.1, libefa.so.1
# The drop-ins go to a directory of their own, never beside the system's libibverbs: they
# must be chosen (LD_LIBRARY_PATH, or `uroce exec`, which finds PREFIX/lib/uroce from
# PREFIX/bin/uroce), not shadow rdma-core for every program.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(UROCE_DROPIN_DIR ${CMAKE_INSTALL_LIBDIR}/uroce)

install(TARGETS uroce RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS uroce_shared EXPORT uroceTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/uroce DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS uroce_ibverbs uroce_mlx5_standin uroce_efa_standin
        LIBRARY DESTINATION ${UROCE_DROPIN_DIR} NAMELINK_SKIP)

install(EXPORT uroceTargets NAMESPACE uroce:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/uroce)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/uroceConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/uroceConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/uroce)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/uroceConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/uroceConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/uroceConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/uroce)

# The .pc file finds its prefix from its own place: UROCE_PC_UP climbs from LIBDIR/pkgconfig.
file(RELATIVE_PATH UROCE_PC_UP /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/uroce.pc.in ${PROJECT_BINARY_DIR}/cmake/uroce.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/uroce.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cpack -G DEB` in the build directory: uroce_<version>_<arch>.deb. dpkg-shlibdeps fills in
# the library packages it needs (libisal2, libfmt9, ...), from the files it holds.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME uroce)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RoCE v2 in user space: C++ verbs API, libibverbs drop-in, tools")
set(CPACK_PACKAGE_CONTACT "uroce developers <uroce@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The drop-ins provide libibverbs.so.1 etc. themselves; dpkg-shlibdeps must not look for them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
include(CPack)

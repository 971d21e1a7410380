# Driver for the consumer tests, run as `cmake -P` from CTest.
#
#   ACTION=install  PROJECT_BINARY_DIR, PREFIX [, CONFIG]
#       installs the ebac build tree into a fresh PREFIX.
#   ACTION=build    SOURCE, BINARY, GENERATOR, CXX_COMPILER, BUILD_TYPE
#                   [, MAKE_PROGRAM, EXPECT_EMPTY_INSTALL] and -- args for the consumer's configure
#       configures, builds and runs a consumer project's own test; with
#       EXPECT_EMPTY_INSTALL also installs it and fails if anything lands.
cmake_minimum_required(VERSION 3.24)

set(_forward)
set(_seen_separator FALSE)
foreach(_i RANGE ${CMAKE_ARGC})
  if(_seen_separator AND DEFINED CMAKE_ARGV${_i})
    list(APPEND _forward "${CMAKE_ARGV${_i}}")
  elseif(CMAKE_ARGV${_i} STREQUAL "--")
    set(_seen_separator TRUE)
  endif()
endforeach()

function(run)
  string(JOIN " " _line ${ARGN})
  message(STATUS "run: ${_line}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "failed (${_rc}): ${_line}")
  endif()
endfunction()

if(ACTION STREQUAL "install")
  file(REMOVE_RECURSE "${PREFIX}")
  set(_config)
  if(CONFIG)
    set(_config --config "${CONFIG}")
  endif()
  run(${CMAKE_COMMAND} --install "${PROJECT_BINARY_DIR}" --prefix "${PREFIX}" ${_config})
  if(NOT EXISTS "${PREFIX}/include/ebac/ebac.hpp")
    message(FATAL_ERROR "install did not put include/ebac/ebac.hpp under ${PREFIX}")
  endif()
elseif(ACTION STREQUAL "build")
  set(_make)
  if(MAKE_PROGRAM)
    set(_make "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
  endif()
  run(${CMAKE_COMMAND} --fresh -S "${SOURCE}" -B "${BINARY}" -G "${GENERATOR}" ${_make}
      "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${_forward})
  run(${CMAKE_COMMAND} --build "${BINARY}" --config "${BUILD_TYPE}")
  run(${CMAKE_CTEST_COMMAND} --test-dir "${BINARY}" -C "${BUILD_TYPE}" --output-on-failure --no-tests=error)
  if(EXPECT_EMPTY_INSTALL)
    set(_prefix "${BINARY}/install-check")
    file(REMOVE_RECURSE "${_prefix}")
    run(${CMAKE_COMMAND} --install "${BINARY}" --prefix "${_prefix}" --config "${BUILD_TYPE}")
    file(GLOB_RECURSE _installed LIST_DIRECTORIES false "${_prefix}/*")
    if(_installed)
      message(FATAL_ERROR "a subproject ebac installed files:\n${_installed}")
    endif()
  endif()
else()
  message(FATAL_ERROR "ACTION must be install or build, not '${ACTION}'")
endif()

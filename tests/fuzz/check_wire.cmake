# The external-collective checker's formats (src/check/check_wire.c): store
# values written by other processes.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_check_wire ${_d}/fuzz_check_wire.c ${_d}/replay_main.c)
target_link_libraries(replay_check_wire PRIVATE cohort_static)
target_include_directories(replay_check_wire PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_check_wire COMMAND replay_check_wire ${_d}/corpus/check_wire)
set_tests_properties(fuzz_replay_check_wire PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_check_wire ${_d}/fuzz_check_wire.c ${PROJECT_SOURCE_DIR}/src/check/check_wire.c)
  target_compile_options(fuzz_check_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_check_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_check_wire PRIVATE cohort_static)
  target_include_directories(fuzz_check_wire PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
endif()

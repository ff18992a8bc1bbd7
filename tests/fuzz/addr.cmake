# Network addresses (src/util/addr.c): environment, command lines, and the
# addresses ranks publish through the store.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_addr ${_d}/fuzz_addr.c ${_d}/replay_main.c)
target_link_libraries(replay_addr PRIVATE cohort_static)
target_include_directories(replay_addr PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_addr COMMAND replay_addr ${_d}/corpus/addr)
set_tests_properties(fuzz_replay_addr PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_addr ${_d}/fuzz_addr.c ${PROJECT_SOURCE_DIR}/src/util/addr.c)
  target_compile_options(fuzz_addr PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_addr PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_addr PRIVATE cohort_static)
  target_include_directories(fuzz_addr PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include
                                               ${PROJECT_BINARY_DIR})
endif()

# Slurm host lists (src/util/hostlist.c) and the JSON string writer
# (src/util/json.c): input from the job's environment and from any bytes.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_hostlist ${_d}/fuzz_hostlist.c ${_d}/replay_main.c)
target_link_libraries(replay_hostlist PRIVATE cohort_static)
target_include_directories(replay_hostlist PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_hostlist COMMAND replay_hostlist ${_d}/corpus/hostlist)
set_tests_properties(fuzz_replay_hostlist PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_hostlist ${_d}/fuzz_hostlist.c ${PROJECT_SOURCE_DIR}/src/util/hostlist.c
                               ${PROJECT_SOURCE_DIR}/src/util/json.c)
  target_compile_options(fuzz_hostlist PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_hostlist PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_hostlist PRIVATE cohort_static)
  target_include_directories(fuzz_hostlist PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
endif()

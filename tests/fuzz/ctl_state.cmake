# The state record a stall report reads from each rank (src/group/ctl_wire.c):
# bytes any store client can write, followed as indexes (src/group/monitor.c).
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_ctl_state ${_d}/fuzz_ctl_state.c ${_d}/replay_main.c)
target_link_libraries(replay_ctl_state PRIVATE cohort_static)
target_include_directories(replay_ctl_state PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_ctl_state COMMAND replay_ctl_state ${_d}/corpus/ctl_state)
set_tests_properties(fuzz_replay_ctl_state PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_ctl_state ${_d}/fuzz_ctl_state.c ${PROJECT_SOURCE_DIR}/src/group/ctl_wire.c
                                ${PROJECT_SOURCE_DIR}/src/contract/fp_record.c ${PROJECT_SOURCE_DIR}/src/util/txt.c)
  target_compile_options(fuzz_ctl_state PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_ctl_state PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_ctl_state PRIVATE cohort_static)
  target_include_directories(fuzz_ctl_state PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
endif()

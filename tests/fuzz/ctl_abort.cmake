# The store's abort record (src/group/ctl_wire.c): bytes any store client
# can write, read by every rank's monitor thread (src/group/monitor.c).
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_ctl_abort ${_d}/fuzz_ctl_abort.c ${_d}/replay_main.c)
target_link_libraries(replay_ctl_abort PRIVATE cohort_static)
target_include_directories(replay_ctl_abort PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_ctl_abort COMMAND replay_ctl_abort ${_d}/corpus/ctl_abort)
set_tests_properties(fuzz_replay_ctl_abort PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_ctl_abort ${_d}/fuzz_ctl_abort.c ${PROJECT_SOURCE_DIR}/src/group/ctl_wire.c)
  target_compile_options(fuzz_ctl_abort PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_ctl_abort PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_ctl_abort PRIVATE cohort_static)
  target_include_directories(fuzz_ctl_abort PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
endif()

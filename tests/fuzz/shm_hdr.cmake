# A member's check of its lead's segment header (src/transport/shm/shm_geo.c,
# shm_hdr_check): the header is memory the lead, or any local process of the job, wrote.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_shm_hdr ${_d}/fuzz_shm_hdr.c ${_d}/replay_main.c)
target_link_libraries(replay_shm_hdr PRIVATE cohort_static)
target_include_directories(replay_shm_hdr PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_shm_hdr COMMAND replay_shm_hdr ${_d}/corpus/shm_hdr)
set_tests_properties(fuzz_replay_shm_hdr PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_shm_hdr ${_d}/fuzz_shm_hdr.c ${PROJECT_SOURCE_DIR}/src/transport/shm/shm_geo.c)
  target_compile_options(fuzz_shm_hdr PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_shm_hdr PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_shm_hdr PRIVATE cohort_static)
  target_include_directories(fuzz_shm_hdr PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
endif()

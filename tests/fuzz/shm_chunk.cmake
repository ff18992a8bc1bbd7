# The send/recv channels' chunk check (src/coll/shm/shm_p2p.c,
# shm_chunk_parse): a channel slot is memory a peer process writes.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_shm_chunk ${_d}/fuzz_shm_chunk.c ${_d}/replay_main.c)
target_link_libraries(replay_shm_chunk PRIVATE cohort_static)
target_include_directories(replay_shm_chunk PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_shm_chunk COMMAND replay_shm_chunk ${_d}/corpus/shm_chunk)
set_tests_properties(fuzz_replay_shm_chunk PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_shm_chunk ${_d}/fuzz_shm_chunk.c ${PROJECT_SOURCE_DIR}/src/coll/shm/shm_p2p.c)
  target_compile_options(fuzz_shm_chunk PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_shm_chunk PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_shm_chunk PRIVATE cohort_static)
  target_include_directories(fuzz_shm_chunk PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
endif()

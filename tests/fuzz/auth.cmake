# The handshakes' shared decision (src/util/auth.c): what the store, the tcp
# transport and the shm hand-over judge a peer's answer with.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_auth ${_d}/fuzz_auth.c ${_d}/replay_main.c)
target_link_libraries(replay_auth PRIVATE cohort_static)
target_include_directories(replay_auth PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_auth COMMAND replay_auth ${_d}/corpus/auth)
set_tests_properties(fuzz_replay_auth PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_auth ${_d}/fuzz_auth.c ${PROJECT_SOURCE_DIR}/src/util/auth.c
                 ${PROJECT_SOURCE_DIR}/src/util/util.c ${PROJECT_SOURCE_DIR}/src/util/status.c)
  target_compile_options(fuzz_auth PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_auth PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_auth PRIVATE PkgConfig::SODIUM Threads::Threads)
  target_include_directories(fuzz_auth PRIVATE ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
endif()

# The tcp transport's handshake frames and data headers (src/transport/tcp/
# wire.c): the bytes a stray client can send to any rank's listening port.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_tcp_wire ${_d}/fuzz_tcp_wire.c ${_d}/replay_main.c)
target_link_libraries(replay_tcp_wire PRIVATE cohort_static)
target_include_directories(replay_tcp_wire PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_tcp_wire COMMAND replay_tcp_wire ${_d}/corpus/tcp_wire)
set_tests_properties(fuzz_replay_tcp_wire PROPERTIES TIMEOUT 120)

# Seed corpus / documentation hex dumps (not a test):
#   gen_tcp_wire tests/fuzz/corpus/tcp_wire ; gen_tcp_wire --hex
add_executable(gen_tcp_wire ${_d}/gen_tcp_wire.c)
target_link_libraries(gen_tcp_wire PRIVATE cohort_static)
target_include_directories(gen_tcp_wire PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  # wire.c and the shared handshake unit (util/auth.c) are compiled into the
  # target for coverage instrumentation; they need util.c and libsodium.
  add_executable(fuzz_tcp_wire ${_d}/fuzz_tcp_wire.c ${PROJECT_SOURCE_DIR}/src/transport/tcp/wire.c
                 ${PROJECT_SOURCE_DIR}/src/util/auth.c ${PROJECT_SOURCE_DIR}/src/util/util.c
                 ${PROJECT_SOURCE_DIR}/src/util/status.c)
  target_compile_options(fuzz_tcp_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_tcp_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_tcp_wire PRIVATE PkgConfig::SODIUM Threads::Threads)
  target_include_directories(fuzz_tcp_wire PRIVATE ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR})
endif()

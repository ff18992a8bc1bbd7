# The flight recorder's dump line parser (src/trace/jsonl.c): input from
# dump files and store values cohort did not necessarily write.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_trace_line ${_d}/fuzz_trace_line.c ${_d}/replay_main.c)
target_link_libraries(replay_trace_line PRIVATE cohort_static)
target_include_directories(replay_trace_line PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_trace_line COMMAND replay_trace_line ${_d}/corpus/trace_line)
set_tests_properties(fuzz_replay_trace_line PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  # The parser's sources are compiled into the target itself so they get
  # coverage instrumentation and ASan/UBSan whatever the library was built
  # with; the archive supplies everything else.
  # trace_api.c: the public parser (cohort_trace.h) the target compares.
  add_executable(fuzz_trace_line ${_d}/fuzz_trace_line.c ${PROJECT_SOURCE_DIR}/src/trace/jsonl.c
                                 ${PROJECT_SOURCE_DIR}/src/core/names.c
                                 ${PROJECT_SOURCE_DIR}/src/contract/trace_api.c)
  target_compile_options(fuzz_trace_line PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_trace_line PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_trace_line PRIVATE cohort_static)
  target_include_directories(fuzz_trace_line PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
endif()

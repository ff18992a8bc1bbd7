# PyTorch TCPStore request parser (src/store/torch_proto.c): bytes from
# clients that do not authenticate.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_torch_proto ${_d}/fuzz_torch_proto.c ${_d}/replay_main.c)
target_link_libraries(replay_torch_proto PRIVATE cohort_static)
target_include_directories(replay_torch_proto PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_torch_proto COMMAND replay_torch_proto ${_d}/corpus/torch_proto)
set_tests_properties(fuzz_replay_torch_proto PROPERTIES TIMEOUT 120 LABELS "store;fuzz")

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_torch_proto ${_d}/fuzz_torch_proto.c ${PROJECT_SOURCE_DIR}/src/store/torch_proto.c)
  target_compile_options(fuzz_torch_proto PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_torch_proto PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_torch_proto PRIVATE cohort_static)
  target_include_directories(fuzz_torch_proto PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
endif()

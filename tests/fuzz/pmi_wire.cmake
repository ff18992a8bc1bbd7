# PMI-1 wire lines (src/group/pmi_wire.c): the replies MPICH's launcher
# writes on PMI_FD.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_pmi_wire ${_d}/fuzz_pmi_wire.c ${_d}/replay_main.c)
target_link_libraries(replay_pmi_wire PRIVATE cohort_static)
target_include_directories(replay_pmi_wire PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_pmi_wire COMMAND replay_pmi_wire ${_d}/corpus/pmi_wire)
set_tests_properties(fuzz_replay_pmi_wire PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_pmi_wire ${_d}/fuzz_pmi_wire.c ${PROJECT_SOURCE_DIR}/src/group/pmi_wire.c)
  target_compile_options(fuzz_pmi_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_pmi_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_pmi_wire PRIVATE cohort_static)
  target_include_directories(fuzz_pmi_wire PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
endif()

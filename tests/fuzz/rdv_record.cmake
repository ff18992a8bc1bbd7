# Rendezvous records (src/group/record.c): what each rank publishes under
# rank/<r> and every rank parses back.
set(_d ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(replay_rdv_record ${_d}/fuzz_rdv_record.c ${_d}/replay_main.c)
target_link_libraries(replay_rdv_record PRIVATE cohort_static)
target_include_directories(replay_rdv_record PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
add_test(NAME fuzz_replay_rdv_record COMMAND replay_rdv_record ${_d}/corpus/rdv_record)
set_tests_properties(fuzz_replay_rdv_record PROPERTIES TIMEOUT 120)

if(COHORT_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_rdv_record ${_d}/fuzz_rdv_record.c ${PROJECT_SOURCE_DIR}/src/group/record.c
                                 ${PROJECT_SOURCE_DIR}/src/util/txt.c)
  target_compile_options(fuzz_rdv_record PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_rdv_record PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_rdv_record PRIVATE cohort_static)
  target_include_directories(fuzz_rdv_record PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
endif()

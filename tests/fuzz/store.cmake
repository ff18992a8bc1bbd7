# ---- store frame parser (src/store/proto.c) ----
cohort_test(test_fuzz_store_replay SOURCES fuzz_store_replay.c fuzz_store_proto.c TIMEOUT 300
            LABELS store fuzz)
if(COHORT_FUZZ)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    # The parser is compiled into the target itself so that libFuzzer's
    # coverage instrumentation covers it.
    add_executable(fuzz_store_proto fuzz_store_proto.c ${PROJECT_SOURCE_DIR}/src/store/proto.c
                   ${PROJECT_SOURCE_DIR}/src/util/auth.c ${PROJECT_SOURCE_DIR}/src/util/util.c
                   ${PROJECT_SOURCE_DIR}/src/util/status.c)
    target_include_directories(fuzz_store_proto PRIVATE ${PROJECT_SOURCE_DIR}/include
                               ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR})
    target_compile_options(fuzz_store_proto PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_store_proto PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_store_proto PRIVATE PkgConfig::SODIUM Threads::Threads)
  else()
    message(WARNING "COHORT_FUZZ=ON needs clang (CC=clang-14); fuzz targets not built")
  endif()
endif()

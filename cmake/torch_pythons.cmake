# cohort_torch_pythons(OUT): the interpreters with a distinct torch, found at
# configure time (Debian's 1.13 for /usr/bin/python3, pip's 2.x for the
# python3 on PATH), as "PYTHON|MAJOR.MINOR" entries; none found: empty.
function(cohort_torch_pythons out)
  set(_seen "")
  set(_res "")
  foreach(py /usr/bin/python3 python3)
    find_program(_ctp_${py} NAMES ${py} NO_CACHE)
    set(_p "${_ctp_${py}}")
    if(NOT _p)
      continue()
    endif()
    execute_process(COMMAND ${_p} -c "import torch; print(torch.__version__.split('+')[0])"
                    OUTPUT_VARIABLE _ver OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                    RESULT_VARIABLE _rc TIMEOUT 120)
    if(NOT _rc EQUAL 0 OR _ver STREQUAL "" OR _ver IN_LIST _seen)
      continue()
    endif()
    list(APPEND _seen ${_ver})
    string(REGEX REPLACE "^([0-9]+\\.[0-9]+).*" "\\1" _mm ${_ver})
    list(APPEND _res "${_p}|${_mm}")
  endforeach()
  set(${out} "${_res}" PARENT_SCOPE)
endfunction()

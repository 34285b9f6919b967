# Lists the tests of a GoogleTest binary and writes a CTest file that runs
# them: each suite named in PER_TEST (the end-to-end suites, seconds a test)
# a CTest test per test, so that `ctest -j` spreads them over the cores;
# every other suite (in-process unit tests, milliseconds a test) one CTest
# test for the whole suite, so that the binary's start-up (LibTorch's, half
# a second) is paid once a suite rather than once a test.
#
# Run after each build of the binary (and of this script):
#   cmake -DBINARY=... -DOUT=... -DPER_TEST=Suite=label,... -DENVIRONMENT=VAR=value,...
#         -P cmake/gtest_suites.cmake
# Each test is labelled: its suite's label from PER_TEST, else `unit`. On a
# build tree's first run, before CTest has measured any test, the tests of
# PER_TEST start first (COST): they take seconds each, and the quick unit
# suites fill in at the end, so that no long test starts last.
execute_process(COMMAND ${BINARY} --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE failed
                TIMEOUT 60)
if(failed)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests: ${failed}")
endif()
string(REPLACE "," ";" per_test "${PER_TEST}")
string(REPLACE "," ";" environment "${ENVIRONMENT}")
foreach(entry ${per_test})
  string(REPLACE "=" ";" pair ${entry})
  list(GET pair 0 suite)
  list(GET pair 1 label)
  set(label_of_${suite} ${label})
endforeach()
string(REPLACE "\n" ";" lines "${listing}")
set(text "# Written by cmake/gtest_suites.cmake after each build of ${BINARY}.\n")
set(suite "")
set(unit_suites)
foreach(line ${lines})
  if(line MATCHES "^([A-Za-z0-9_]+)\\.$")
    set(suite ${CMAKE_MATCH_1})
    if(NOT DEFINED label_of_${suite})
      list(APPEND unit_suites ${suite})
    endif()
  elseif(line MATCHES "^  ([A-Za-z0-9_]+)" AND DEFINED label_of_${suite})
    set(name ${suite}.${CMAKE_MATCH_1})
    string(APPEND text "add_test([=[${name}]=] [==[${BINARY}]==] --gtest_filter=${name} "
                       "--gtest_also_run_disabled_tests)\n"
                       "set_tests_properties([=[${name}]=] PROPERTIES LABELS ${label_of_${suite}} COST 10 "
                       "ENVIRONMENT \"${environment}\")\n")
  endif()
endforeach()
foreach(suite ${unit_suites})
  string(APPEND text "add_test([=[${suite}.*]=] [==[${BINARY}]==] --gtest_filter=${suite}.* "
                     "--gtest_also_run_disabled_tests)\n"
                     "set_tests_properties([=[${suite}.*]=] PROPERTIES LABELS unit "
                     "ENVIRONMENT \"${environment}\")\n")
endforeach()
file(WRITE ${OUT} "${text}")

# Lists the tests of a GoogleTest binary and writes a CTest file that runs
# them in shards, a process each, so that the binary's start-up (LibTorch's,
# half a second of CPU) is paid once a shard rather than once a test:
# - each suite named in PER_TEST (the end-to-end suites, seconds a test) in
#   shards of 3 tests, named after the first (Suite.Test, or Suite.Test+2 for
#   it and the 2 after it), so that `ctest -j` still spreads them over the
#   cores;
# - every other suite (in-process unit tests, milliseconds a test) in shards
#   of 15 suites, alphabetically (unit.FirstSuite-LastSuite).
# `ctest -N -V` shows each shard's --gtest_filter.
#
# Run after each build of the binary (and of this script):
#   cmake -DBINARY=... -DOUT=... -DPER_TEST=Suite=label,... -DENVIRONMENT=VAR=value,...
#         -P cmake/gtest_suites.cmake
# Each test is labelled: its suite's label from PER_TEST, else `unit`. On a
# build tree's first run, before CTest has measured any test, the shards of
# PER_TEST start first (COST): they take seconds each, and the quick unit
# shards fill in at the end, so that no long test starts last.
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
set(text "# Written by cmake/gtest_suites.cmake after each build of ${BINARY}.\n")

# One CTest test `name` running the GoogleTest patterns `patterns`.
macro(add_shard name patterns label cost)
  list(JOIN ${patterns} ":" filter)
  string(APPEND text "add_test([=[${name}]=] [==[${BINARY}]==] --gtest_filter=${filter} "
                     "--gtest_also_run_disabled_tests)\n"
                     "set_tests_properties([=[${name}]=] PROPERTIES LABELS ${label} COST ${cost} "
                     "ENVIRONMENT \"${environment}\")\n")
endmacro()

# The tests of PER_TEST's suites, in the listing's order; the other suites.
string(REPLACE "\n" ";" lines "${listing}")
set(suite "")
set(per_test_suites)
set(unit_suites)
foreach(line ${lines})
  if(line MATCHES "^([A-Za-z0-9_]+)\\.$")
    set(suite ${CMAKE_MATCH_1})
    if(DEFINED label_of_${suite})
      list(APPEND per_test_suites ${suite})
      set(tests_of_${suite})
    else()
      list(APPEND unit_suites ${suite})
    endif()
  elseif(line MATCHES "^  ([A-Za-z0-9_]+)" AND DEFINED label_of_${suite})
    list(APPEND tests_of_${suite} ${suite}.${CMAKE_MATCH_1})
  endif()
endforeach()

set(tests_a_shard 3)
foreach(suite ${per_test_suites})
  list(LENGTH tests_of_${suite} count)
  foreach(first RANGE 0 ${count} ${tests_a_shard})
    if(first EQUAL count)
      break()
    endif()
    list(SUBLIST tests_of_${suite} ${first} ${tests_a_shard} shard)
    list(GET shard 0 name)
    list(LENGTH shard n)
    if(n GREATER 1)
      math(EXPR more "${n} - 1")
      string(APPEND name "+${more}")
    endif()
    math(EXPR cost "10 * ${n}")
    add_shard(${name} shard ${label_of_${suite}} ${cost})
  endforeach()
endforeach()

set(suites_a_shard 15)
list(SORT unit_suites)
list(LENGTH unit_suites count)
foreach(first RANGE 0 ${count} ${suites_a_shard})
  if(first EQUAL count)
    break()
  endif()
  list(SUBLIST unit_suites ${first} ${suites_a_shard} shard)
  list(GET shard 0 from)
  list(GET shard -1 to)
  list(TRANSFORM shard APPEND ".*")
  add_shard(unit.${from}-${to} shard unit 0)
endforeach()
file(WRITE ${OUT} "${text}")

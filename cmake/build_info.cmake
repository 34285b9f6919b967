# Writes OUT, a header naming the commit the build is of (`fedprof --version`),
# at every build, but touches it only when the commit changes, so that only
# what includes it is compiled again. -DSOURCE=the source tree -DOUT=the header.
set(commit unknown)
find_program(GIT git)
if(GIT)
  execute_process(COMMAND ${GIT} -C ${SOURCE} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
  if(NOT failed AND head)
    set(commit ${head})
    # Tracked files changed since the commit: the build is not the commit's.
    execute_process(COMMAND ${GIT} -C ${SOURCE} status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes ERROR_QUIET)
    if(changes)
      set(commit "${commit}+changes")
    endif()
  endif()
endif()
set(text "// Made by cmake/build_info.cmake at each build.\n#define FEDPROF_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} before)
endif()
if(NOT before STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()

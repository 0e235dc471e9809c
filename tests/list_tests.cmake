# Read by ctest when it starts (a TEST_INCLUDE_FILES script that CMakeLists.txt generates per
# test executable, setting test_exe to the executable's path and test_prefix to its name): asks
# the executable for the tests it registered (`test_x --list`) and adds each as a test of its own,
# `test_x.name`, run as `test_x name`. An executable that is missing or cannot list its tests
# gives one test, `test_x.list`, that fails, so that its tests cannot go missing unnoticed.
execute_process(COMMAND "${test_exe}" --list OUTPUT_VARIABLE test_names RESULT_VARIABLE test_rc
                ERROR_QUIET)
string(REGEX MATCHALL "[^\n]+" test_names "${test_names}")
if(test_rc EQUAL 0 AND test_names)
    foreach(test_name IN LISTS test_names)
        add_test("${test_prefix}.${test_name}" "${test_exe}" "${test_name}")
        set_tests_properties("${test_prefix}.${test_name}" PROPERTIES TIMEOUT 1200)
    endforeach()
else()
    add_test("${test_prefix}.list" "${test_exe}" --no-tests-listed) # fails: no test has that name
endif()

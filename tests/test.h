/* A tiny test framework: TEST(name) defines a test and registers it (a constructor function
 * per test, run before main, links it into the registry), CHECK* record failures with file and
 * line, TEST_MAIN() runs the test named on the command line, or all of them in source order;
 * `--list` prints their names, one a line, which is how ctest learns them (every test is its own
 * ctest test; see tests/list_tests.cmake). Failures print the context set with TEST_CONTEXT
 * (scene, seed, method...) so that they can be reproduced. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__GNUC__) && !defined(__clang__)
#error "tests/test.h registers tests with __attribute__((constructor)) (GCC or clang)"
#endif

typedef void test_fn(void);
typedef struct test_case {
    const char *name;
    test_fn *fn;
    const char *file;
    int line;
    struct test_case *next;
} test_case;

extern int test_failures;
extern char test_context[512];
extern test_case *test_registry; /* every TEST, ordered by (file, line) */

/* Links c into the registry at its place by (file, line), whatever order the constructors run
 * in, so that the tests run (and are listed) in the order of the source. */
static inline void test_register(test_case *c) {
    test_case **at = &test_registry;
    while (*at) {
        int f = strcmp((*at)->file, c->file);
        if (f > 0 || (f == 0 && (*at)->line > c->line)) break;
        at = &(*at)->next;
    }
    c->next = *at;
    *at = c;
}

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    static test_case name##_test_case = {#name, test_##name, __FILE__, __LINE__, NULL};            \
    __attribute__((constructor)) static void name##_test_register(void) {                          \
        test_register(&name##_test_case);                                                          \
    }                                                                                              \
    static void test_##name(void)

#define TEST_CONTEXT(...) snprintf(test_context, sizeof test_context, __VA_ARGS__)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed [%s]\n", __FILE__, __LINE__, #cond,           \
                    test_context);                                                                 \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        if (check_a_ != check_b_) {                                                                \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld [%s]\n", __FILE__, __LINE__, #a, \
                    #b, check_a_, check_b_, test_context);                                         \
        }                                                                                          \
    } while (0)

/* Stop the current test when a check fails (for loops over many cases). */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        int before_ = test_failures;                                                               \
        CHECK(cond);                                                                               \
        if (test_failures != before_) return;                                                      \
    } while (0)

/* main: `test_x` runs every test, `test_x name` the one named, `test_x --list` prints the
 * names. Exit status 0 when every test run passed, 1 when one failed, 2 when none is named so. */
#define TEST_MAIN()                                                                                \
    int test_failures = 0;                                                                         \
    char test_context[512] = "";                                                                   \
    test_case *test_registry = NULL;                                                               \
    int main(int argc, char **argv) {                                                              \
        if (argc > 1 && strcmp(argv[1], "--list") == 0) {                                          \
            for (const test_case *c = test_registry; c; c = c->next) printf("%s\n", c->name);      \
            return 0;                                                                              \
        }                                                                                          \
        int ran = 0;                                                                               \
        for (const test_case *c = test_registry; c; c = c->next) {                                 \
            if (argc > 1 && strcmp(argv[1], c->name) != 0) continue;                               \
            int before = test_failures;                                                            \
            test_context[0] = '\0';                                                                \
            c->fn();                                                                               \
            printf("%s %s\n", test_failures == before ? "PASS" : "FAIL", c->name);                 \
            ran++;                                                                                 \
        }                                                                                          \
        if (ran == 0) {                                                                            \
            fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(any)");                   \
            return 2;                                                                              \
        }                                                                                          \
        return test_failures ? 1 : 0;                                                              \
    }

/* A tiny test framework: TEST(name) defines a test, CHECK* record failures with file and line,
 * TEST_MAIN runs the test named on the command line (or all of them). ctest registers every
 * TEST(name) found at the start of a line as its own test. Failures print the context set with
 * TEST_CONTEXT (scene, seed, method...) so that they can be reproduced. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void test_fn(void);
typedef struct test_case {
    const char *name;
    test_fn *fn;
} test_case;

extern int test_failures;
extern char test_context[512];

#define TEST(name) static void test_##name(void)

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

#define TEST_MAIN(...)                                                                             \
    int test_failures = 0;                                                                         \
    char test_context[512] = "";                                                                   \
    int main(int argc, char **argv) {                                                              \
        static const test_case cases[] = {__VA_ARGS__};                                            \
        size_t n = sizeof cases / sizeof cases[0];                                                 \
        int ran = 0;                                                                               \
        for (size_t i = 0; i < n; i++) {                                                           \
            if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) continue;                         \
            int before = test_failures;                                                            \
            test_context[0] = '\0';                                                                \
            cases[i].fn();                                                                         \
            printf("%s %s\n", test_failures == before ? "PASS" : "FAIL", cases[i].name);           \
            ran++;                                                                                 \
        }                                                                                          \
        if (ran == 0) {                                                                            \
            fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(any)");                   \
            return 2;                                                                              \
        }                                                                                          \
        return test_failures ? 1 : 0;                                                              \
    }

#define TEST_ENTRY(name)                                                                           \
    { #name, test_##name }

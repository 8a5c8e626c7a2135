/*
 * check.h -- the counting CHECK of the C unit tests: a failed condition prints
 * "FAIL: " and its message and counts; main prints the totals and exits 1 when
 * anything failed.
 */
#ifndef RED_TESTS_CHECK_H
#define RED_TESTS_CHECK_H

#include <stdio.h>

static int npass, nfail;
#define CHECK(c, ...)                     \
    do {                                  \
        if (c) npass++;                   \
        else {                            \
            nfail++;                      \
            printf("FAIL: " __VA_ARGS__); \
            printf("\n");                 \
        }                                 \
    } while (0)

#endif

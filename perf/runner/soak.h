/* The soak (broadphase-run --soak): a `moving` world stepped for many frames under churn, with
 * its pairs checked against brute force on a sample of objects every frame and in full every
 * `full_every` frames, and its memory (the heap's bytes in use and the process's resident set)
 * held against its value at the end of the warm-up. */
#pragma once

#include "broadphase.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct soak_options {
    size_t count;  /* objects */
    size_t frames; /* frames to step */
    broadphase_method method;
    broadphase_update_policy update;
    int threads;
    uint64_t seed;
    size_t sample;        /* objects whose pairs are checked every frame */
    size_t full_every;    /* frames between full checks (and memory samples) */
    size_t warmup;        /* the frame whose memory the later frames are held to */
    double memory_slack;  /* allowed drift after warm-up, as a fraction (0.05) */
    const char *csv_path; /* a row per full check, or NULL */
    bool quiet;
} soak_options;

/* Runs the soak and prints its summary to `out`; 0 when every check passed and memory stayed
 * within the slack, 1 otherwise, 2 on a usage or setup error. */
int soak_run(const soak_options *o, FILE *out);

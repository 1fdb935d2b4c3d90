/* SPDX-License-Identifier: MIT */
/* The monotonic clock every layer reads (milliseconds and microseconds). */
#ifndef GG_CLOCK_H
#define GG_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t gg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline uint64_t gg_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

#endif

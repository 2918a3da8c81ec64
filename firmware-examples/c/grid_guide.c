/*
 * The grid-world guide in C (firmware-examples/src/bin/grid_guide.rs, through laq.h).
 *
 * From (0, 0), each step scores the cells the 8 moves lead to (clamped to the 6x6
 * grid; entering the goal (5, 5) gives reward 1 and ends the episode) and lets the
 * runtime pick the best by reward + gamma * V(next). Prints the model, V of all 36
 * cells and the path; succeeds only if the goal is reached in the optimal 5 steps.
 * run.sh runs the same program on the host and on the Cortex-M4F (QEMU) and requires
 * the two outputs to be identical: values are printed as IEEE-754 bit patterns.
 *
 * Only laq.h and platform.h: no heap, no stdio, no libc formatting.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "laq.h"

/* The layout the library was built with, checked by this compiler (a negative array
 * size fails the build): 32-bit enums even where C enums are short, as on bare-metal
 * ARM. */
typedef char laq_enums_are_32_bits[sizeof(laq_head) == 4 && sizeof(laq_status) == 4 ? 1 : -1];
typedef char laq_candidate_is_24_bytes[sizeof(laq_candidate) == 24 ? 1 : -1];
#include "platform.h"

extern const uint8_t laq_grid_model[];
extern const uint8_t laq_grid_model_end[];

#define SIZE 6
#define GOAL_ROW 5
#define GOAL_COL 5
#define OPTIMAL_STEPS 5
#define MAX_STEPS 20
#define MOVES 8
/* Enough for the shipped grid model (2-64-64-8: 130 floats); checked at run time. */
#define SCRATCH_LEN 256

/* The 8 moves as (d_row, d_col), in the Rust example's action order. */
static const int moves[MOVES][2] = {
    {-1, 0}, {1, 0}, {0, -1}, {0, 1}, {-1, -1}, {-1, 1}, {1, -1}, {1, 1},
};
static const char *const names[MOVES] = {
    "up", "down", "left", "right", "up-left", "up-right", "down-left", "down-right",
};

/* The handle and scratch live in static memory: no large stack frames. */
static laq_model model;
static float scratch[SCRATCH_LEN];

/* A line being built, written out by `line_end`. */
static char line[160];
static size_t line_len;

static void put(const char *s) {
    while (*s != '\0' && line_len + 1 < sizeof line) {
        line[line_len++] = *s++;
    }
    line[line_len] = '\0';
}

static void put_padded(const char *s, size_t width) {
    size_t n = strlen(s);
    put(s);
    while (n++ < width) {
        put(" ");
    }
}

static void put_uint(uint32_t v) {
    char buf[11];
    size_t i = sizeof buf - 1;
    buf[i] = '\0';
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(&buf[i]);
}

static void put_int(int32_t v) {
    if (v < 0) {
        put("-");
        put_uint((uint32_t)0 - (uint32_t)v);
    } else {
        put_uint((uint32_t)v);
    }
}

/* The float's bit pattern, exact on every platform: "0x3f4618c8". */
static void put_bits(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    char buf[11] = "0x";
    for (int i = 0; i < 8; i++) {
        buf[2 + i] = "0123456789abcdef"[(b >> (28 - 4 * i)) & 0xf];
    }
    buf[10] = '\0';
    put(buf);
}

/* Six decimals, for reading (|v| < 2^31 / 10^6); the bit pattern is the exact value. */
static void put_fixed(float v) {
    if (v != v) {
        put("nan");
        return;
    }
    if (v < 0.0f) {
        put("-");
        v = -v;
    }
    uint32_t micros = (uint32_t)((double)v * 1e6 + 0.5);
    put_uint(micros / 1000000u);
    put(".");
    char frac[7];
    uint32_t f = micros % 1000000u;
    for (int i = 5; i >= 0; i--) {
        frac[i] = (char)('0' + f % 10);
        f /= 10;
    }
    frac[6] = '\0';
    put(frac);
}

static void line_end(void) {
    put("\n");
    platform_write(line);
    line_len = 0;
    line[0] = '\0';
}

static void fail(const char *what, int32_t code) {
    put("error: ");
    put(what);
    put(": ");
    put(laq_error_str(code));
    put(" (");
    put_int(code);
    put(")");
    line_end();
    platform_exit(false);
}

static int clamp(int v) { return v < 0 ? 0 : (v > SIZE - 1 ? SIZE - 1 : v); }

int main(void) {
    size_t len = (size_t)(laq_grid_model_end - laq_grid_model);
    int32_t rc = laq_model_init(&model, laq_grid_model, len);
    if (rc != LAQ_OK) {
        fail("loading the model", rc);
    }
    laq_info info;
    rc = laq_model_info(&model, &info);
    if (rc != LAQ_OK) {
        fail("reading the model", rc);
    }
    if (info.obs_len != 2 || info.scratch_len > SCRATCH_LEN) {
        fail("the grid model needs obs_len 2 and this scratch", LAQ_ERR_BUFFER_TOO_SMALL);
    }
    put("grid model: ");
    put_uint((uint32_t)len);
    put(" bytes, ");
    put_uint((uint32_t)info.num_layers);
    put(" layers, ");
    put_uint((uint32_t)info.macs);
    put(" MACs, gamma ");
    put_fixed(info.gamma);
    put(", aligned ");
    put(info.aligned ? "true" : "false");
    line_end();

    /* 1. V of every cell. */
    for (int r = 0; r < SIZE; r++) {
        for (int c = 0; c < SIZE; c++) {
            float obs[2] = {(float)r, (float)c};
            float v;
            rc = laq_value(&model, obs, 2, scratch, SCRATCH_LEN, &v);
            if (rc != LAQ_OK) {
                fail("evaluating V", rc);
            }
            put("V(");
            put_int(r);
            put(", ");
            put_int(c);
            put(") = ");
            put_bits(v);
            put(" ");
            put_fixed(v);
            line_end();
        }
    }

    /* 2. Drive from the start to the goal. */
    int row = 0, col = 0;
    int steps = 0;
    bool reached = false;
    put("path: (0, 0)");
    line_end();
    while (steps < MAX_STEPS) {
        float next[MOVES][2];
        float rewards[MOVES];
        bool terminal[MOVES];
        for (int k = 0; k < MOVES; k++) {
            int r = clamp(row + moves[k][0]);
            int c = clamp(col + moves[k][1]);
            next[k][0] = (float)r;
            next[k][1] = (float)c;
            terminal[k] = r == GOAL_ROW && c == GOAL_COL;
            rewards[k] = terminal[k] ? 1.0f : 0.0f;
        }
        laq_candidate report[MOVES];
        size_t best;
        rc = laq_select_report(&model, &next[0][0], MOVES, 2, rewards, terminal, scratch,
                               SCRATCH_LEN, report, MOVES, &best);
        if (rc != LAQ_OK) {
            fail("selecting a move", rc);
        }
        if (report[best].status != LAQ_STATUS_VALID) {
            fail("the winner's report", LAQ_ERR_INVALID_ARGUMENT);
        }
        row = (int)next[best][0];
        col = (int)next[best][1];
        steps++;
        put("  step ");
        put_int(steps);
        put(": ");
        put_padded(names[best], 10);
        put(" -> (");
        put_int(row);
        put(", ");
        put_int(col);
        put(")  score ");
        put_bits(report[best].score);
        put(" ");
        put_fixed(report[best].score);
        line_end();
        if (row == GOAL_ROW && col == GOAL_COL) {
            reached = true;
            break;
        }
    }
    bool ok = reached && steps == OPTIMAL_STEPS;
    put("goal reached: ");
    put(reached ? "true" : "false");
    put(", steps: ");
    put_int(steps);
    put(" (optimal ");
    put_int(OPTIMAL_STEPS);
    put(")");
    line_end();
    put("grid_guide (C): ");
    put(ok ? "PASS" : "FAIL");
    line_end();
    return ok ? 0 : 1;
}

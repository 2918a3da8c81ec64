/*
 * The C interface on the host, driven by tests/c_host.rs.
 *
 * usage: host GRID_MODEL GATED_MODEL
 *
 * Prints one line per result ("v ROW COL BITS", values as IEEE-754 bit patterns in hex
 * so that the Rust side can compare them exactly) and "check NAME ok|FAIL" for each
 * expectation on errors, NULL pointers and lengths; exits 0 only if every check
 * passed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "laq.h"

/* The layout the library was built with, checked by this compiler (a negative array
 * size fails the build): 32-bit enums even where C enums are short, as on bare-metal
 * ARM. */
typedef char laq_enums_are_32_bits[sizeof(laq_head) == 4 && sizeof(laq_status) == 4 ? 1 : -1];
typedef char laq_candidate_is_24_bytes[sizeof(laq_candidate) == 24 ? 1 : -1];

static int failures = 0;

static void check(const char *name, int ok) {
    printf("check %s %s\n", name, ok ? "ok" : "FAIL");
    if (!ok) {
        failures++;
    }
}

static uint32_t bits(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

/* The whole file in an 8-aligned buffer (malloc's alignment), as firmware keeps it. */
static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 8);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* A model file that must be refused: a negative code with a message. */
static void refused(const char *name, const uint8_t *bytes, size_t len) {
    laq_model m;
    int32_t rc = laq_model_init(&m, bytes, len);
    const char *msg = laq_error_str(rc);
    printf("refused %s %d %s\n", name, (int)rc, msg);
    check(name, rc < 0 && msg != NULL && msg[0] != '\0');
    float obs[2] = {0.0f, 0.0f};
    float scratch[8];
    float v;
    check("refused-handle-holds-no-model",
          laq_value(&m, obs, 2, scratch, 8, &v) == LAQ_ERR_NOT_LOADED &&
              laq_scratch_len(&m) == 0);
}

/* The 8 moves of the grid world as (d_row, d_col). */
static const int moves[8][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}, {-1, -1}, {-1, 1}, {1, -1}, {1, 1}};

/* What the lookahead's callback is given: it counts its calls. */
typedef struct {
    int calls;
} grid_context;

/* The moves as controllers for laq_select_ahead: a move off the 6x6 grid is unavailable
 * (rather than clamped, as in the table below); entering the goal (5, 5) pays 1 and
 * ends the episode. */
static int32_t grid_move(void *context, size_t controller, const float *state, float *next,
                         size_t obs_len, float *reward, bool *terminal) {
    grid_context *g = context;
    g->calls++;
    if (controller >= 8 || obs_len != 2) {
        return 1;
    }
    float r = state[0] + (float)moves[controller][0];
    float c = state[1] + (float)moves[controller][1];
    if (r < 0.0f || r > 5.0f || c < 0.0f || c > 5.0f) {
        return 1;
    }
    next[0] = r;
    next[1] = c;
    *terminal = r == 5.0f && c == 5.0f;
    *reward = *terminal ? 1.0f : 0.0f;
    return 0;
}

/* Lookahead from a few cells, 1 to 3 moves deep (the Rust side recomputes every line),
 * and its errors. */
static void lookahead(const laq_model *model) {
    size_t n = laq_lookahead_scratch_len(model, 3);
    check("lookahead-scratch-len", n == laq_scratch_len(model) + 2 * 2 &&
                                       laq_lookahead_scratch_len(model, 1) ==
                                           laq_scratch_len(model) &&
                                       laq_lookahead_scratch_len(NULL, 3) == 0);
    float *scratch = malloc(n * sizeof(float));
    grid_context g = {0};
    laq_candidate report[8];
    size_t best;
    const float starts[3][2] = {{0.0f, 0.0f}, {2.0f, 2.0f}, {3.0f, 4.0f}};
    for (int i = 0; i < 3; i++) {
        for (size_t depth = 1; depth <= 3; depth++) {
            int32_t rc = laq_select_ahead(model, starts[i], 2, 8, grid_move, &g, depth, scratch,
                                          n, report, 8, &best);
            check("select-ahead", rc == LAQ_OK && best < 8);
            printf("select-ahead %d %d %zu %zu", (int)starts[i][0], (int)starts[i][1], depth,
                   best);
            for (int k = 0; k < 8; k++) {
                printf(" %d:%08x:%08x", (int)report[k].status, bits(report[k].value),
                       bits(report[k].score));
            }
            printf("\n");
        }
    }
    check("select-ahead-calls", g.calls > 0);

    /* One move ahead from an inner cell is the table selection of the 8 moved cells. */
    float cand[8][2];
    for (int k = 0; k < 8; k++) {
        cand[k][0] = 2.0f + (float)moves[k][0];
        cand[k][1] = 2.0f + (float)moves[k][1];
    }
    laq_candidate table[8];
    size_t table_best;
    int32_t rc = laq_select_report(model, &cand[0][0], 8, 2, NULL, NULL, scratch, n, table, 8,
                                   &table_best);
    rc |= laq_select_ahead(model, starts[1], 2, 8, grid_move, &g, 1, scratch, n, report, 8, &best);
    int same = rc == LAQ_OK && best == table_best;
    for (int k = 0; k < 8; k++) {
        same = same && bits(report[k].score) == bits(table[k].score);
    }
    check("select-ahead-depth-1-is-select", same);

    check("select-ahead-null-predict",
          laq_select_ahead(model, starts[0], 2, 8, NULL, &g, 2, scratch, n, NULL, 0, &best) ==
              LAQ_ERR_NULL);
    check("select-ahead-depth-0",
          laq_select_ahead(model, starts[0], 2, 8, grid_move, &g, 0, scratch, n, NULL, 0,
                           &best) == LAQ_ERR_INVALID_ARGUMENT);
    check("select-ahead-depth-max",
          laq_select_ahead(model, starts[0], 2, 8, grid_move, &g, LAQ_MAX_LOOKAHEAD + 1, scratch,
                           n, NULL, 0, &best) == LAQ_ERR_INVALID_ARGUMENT);
    check("select-ahead-too-many",
          laq_select_ahead(model, starts[0], 2, LAQ_MAX_CONTROLLERS + 1, grid_move, &g, 1,
                           scratch, n, NULL, 0, &best) == LAQ_ERR_INVALID_ARGUMENT);
    check("select-ahead-scratch-short",
          laq_select_ahead(model, starts[0], 2, 8, grid_move, &g, 3, scratch, n - 1, NULL, 0,
                           &best) == LAQ_ERR_BUFFER_TOO_SMALL);
    check("select-ahead-obs-len",
          laq_select_ahead(model, starts[0], 1, 8, grid_move, &g, 2, scratch, n, NULL, 0,
                           &best) == LAQ_ERR_STATE_LENGTH);
    free(scratch);
}

static void grid(const char *path) {
    size_t len;
    uint8_t *bytes = read_file(path, &len);
    laq_model model;
    int32_t rc = laq_model_init(&model, bytes, len);
    check("grid-loads", rc == LAQ_OK);
    if (rc != LAQ_OK) {
        printf("error %d %s\n", (int)rc, laq_error_str(rc));
        return;
    }
    laq_info info;
    check("info", laq_model_info(&model, &info) == LAQ_OK);
    printf("info %zu %zu %zu %zu %zu %d %08x %d %d\n", info.obs_len, info.output_len,
           info.scratch_len, info.num_layers, info.macs, (int)info.head, bits(info.gamma),
           (int)info.has_density_gate, (int)info.aligned);
    check("obs-len", laq_obs_len(&model) == 2 && info.obs_len == 2);
    check("scratch-len", laq_scratch_len(&model) == info.scratch_len);

    size_t n = laq_scratch_len(&model);
    float *scratch = malloc(n * sizeof(float));
    for (int r = 0; r < 6; r++) {
        for (int c = 0; c < 6; c++) {
            float obs[2] = {(float)r, (float)c};
            float v = 0.0f;
            rc = laq_value(&model, obs, 2, scratch, n, &v);
            if (rc != LAQ_OK) {
                printf("error %d %s\n", (int)rc, laq_error_str(rc));
                failures++;
            }
            printf("v %d %d %08x %.9g\n", r, c, bits(v), (double)v);
        }
    }

    /* The full evaluation at the start: value, Q values and the best latent action. */
    float start[2] = {0.0f, 0.0f};
    float q[64];
    float v;
    size_t best;
    rc = laq_evaluate(&model, start, 2, scratch, n, &v, q, 64, &best);
    check("evaluate", rc == LAQ_OK && laq_output_len(&model) <= 64);
    printf("evaluate %08x %zu", bits(v), best);
    for (size_t k = 0; k < laq_output_len(&model); k++) {
        printf(" %08x", bits(q[k]));
    }
    printf("\n");

    /* Selection among the 8 moves from (0, 0), clamped to the grid; the move onto the
     * goal would be terminal with reward 1, but from the start none reaches it. */
    float cand[8][2];
    for (int k = 0; k < 8; k++) {
        int r = moves[k][0] < 0 ? 0 : moves[k][0];
        int c = moves[k][1] < 0 ? 0 : moves[k][1];
        cand[k][0] = (float)r;
        cand[k][1] = (float)c;
    }
    rc = laq_select(&model, &cand[0][0], 8, 2, NULL, scratch, n, &best);
    check("select", rc == LAQ_OK);
    printf("select %zu\n", best);
    laq_candidate report[8];
    float rewards[8] = {0};
    bool terminal[8] = {0};
    rewards[3] = 0.5f;
    terminal[3] = true;
    rc = laq_select_report(&model, &cand[0][0], 8, 2, rewards, terminal, scratch, n, report, 8,
                           &best);
    check("select-report", rc == LAQ_OK);
    printf("select-report %zu", best);
    for (int k = 0; k < 8; k++) {
        printf(" %d:%08x:%08x", (int)report[k].status, bits(report[k].value),
               bits(report[k].score));
    }
    printf("\n");
    cand[2][1] = INFINITY;
    rc = laq_select_report(&model, &cand[0][0], 8, 2, NULL, NULL, scratch, n, report, 8, &best);
    check("select-skips-non-finite",
          rc == LAQ_OK && report[2].status == LAQ_STATUS_NON_FINITE && best != 2);

    lookahead(&model);

    /* The caller's mistakes. */
    float tiny[2];
    check("value-null-model", laq_value(NULL, start, 2, scratch, n, &v) == LAQ_ERR_NULL);
    check("value-null-obs", laq_value(&model, NULL, 2, scratch, n, &v) == LAQ_ERR_NULL);
    check("value-null-scratch", laq_value(&model, start, 2, NULL, n, &v) == LAQ_ERR_NULL);
    check("value-null-out", laq_value(&model, start, 2, scratch, n, NULL) == LAQ_ERR_NULL);
    check("value-obs-len", laq_value(&model, start, 3, scratch, n, &v) == LAQ_ERR_STATE_LENGTH);
    check("value-obs-len-0", laq_value(&model, start, 0, scratch, n, &v) == LAQ_ERR_STATE_LENGTH);
    check("value-scratch-short",
          laq_value(&model, start, 2, tiny, 2, &v) == LAQ_ERR_BUFFER_TOO_SMALL);
    check("value-overlap",
          laq_value(&model, scratch, 2, scratch, n, &v) == LAQ_ERR_INVALID_ARGUMENT);
    float nan_obs[2] = {NAN, 0.0f};
    check("value-nan", laq_value(&model, nan_obs, 2, scratch, n, &v) == LAQ_ERR_NON_FINITE_STATE);
    check("evaluate-outputs-short",
          laq_evaluate(&model, start, 2, scratch, n, &v, q, 1, NULL) == LAQ_ERR_BUFFER_TOO_SMALL);
    check("select-null-best",
          laq_select(&model, &cand[0][0], 8, 2, NULL, scratch, n, NULL) == LAQ_ERR_NULL);
    check("select-obs-len",
          laq_select(&model, &cand[0][0], 4, 4, NULL, scratch, n, &best) == LAQ_ERR_STATE_LENGTH);
    check("select-overflow", laq_select(&model, &cand[0][0], SIZE_MAX, 2, NULL, scratch, n,
                                        &best) == LAQ_ERR_INVALID_ARGUMENT);
    check("select-none", laq_select(&model, &cand[0][0], 0, 2, NULL, scratch, n, &best) ==
                             LAQ_ERR_NO_VALID_CANDIDATE);
    check("select-report-short", laq_select_report(&model, &cand[0][0], 8, 2, NULL, NULL, scratch,
                                                   n, report, 7, &best) == LAQ_ERR_BUFFER_TOO_SMALL);
    check("gamma-range", laq_set_gamma(&model, 1.5f) == LAQ_ERR_INVALID_ARGUMENT);
    check("gamma-set", laq_set_gamma(&model, 1.0f) == LAQ_OK &&
                           laq_model_info(&model, &info) == LAQ_OK && info.gamma == 1.0f);
    check("info-null", laq_model_info(&model, NULL) == LAQ_ERR_NULL);
    check("init-null-model", laq_model_init(NULL, bytes, len) == LAQ_ERR_NULL);
    laq_model other;
    check("init-null-bytes", laq_model_init(&other, NULL, len) == LAQ_ERR_NULL);
    laq_model zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    check("zeroed-handle", laq_value(&zeroed, start, 2, scratch, n, &v) == LAQ_ERR_NOT_LOADED &&
                               laq_obs_len(&zeroed) == 0);
    check("null-handle-lengths", laq_obs_len(NULL) == 0 && laq_scratch_len(NULL) == 0);

    /* Corrupted files. */
    uint8_t *copy = malloc(len);
    refused("truncated-4", bytes, 4);
    refused("truncated-header", bytes, 100);
    refused("truncated-last-byte", bytes, len - 1);
    refused("empty", bytes, 0);
    memcpy(copy, bytes, len);
    copy[8] ^= 0xff; /* the JSON header's opening brace */
    refused("flipped-header", copy, len);
    memcpy(copy, bytes, len);
    memset(copy + len - 4, 0xff, 4); /* the last weight becomes NaN */
    refused("nan-weight", copy, len);
    memcpy(copy, bytes, len);
    copy[0] ^= 0x40; /* the header length */
    refused("flipped-length", copy, len);

    for (int32_t code = 0; code >= -130; code--) {
        const char *msg = laq_error_str(code);
        if (msg == NULL || msg[0] == '\0') {
            check("error-str", 0);
        }
    }
    for (int32_t code = -1; code >= -20; code--) {
        printf("error-str %d %s\n", (int)code, laq_error_str(code));
    }
    check("error-str-any", strcmp(laq_error_str(12345), "unknown error code") == 0);
    free(copy);
    free(scratch);
    free(bytes);
}

/* A model with a density gate: gated value, log-density and shaping. */
static void gated(const char *path) {
    size_t len;
    uint8_t *bytes = read_file(path, &len);
    laq_model model;
    check("gated-loads", laq_model_init(&model, bytes, len) == LAQ_OK);
    float scratch[64];
    size_t n = laq_scratch_len(&model);
    check("gated-scratch", n > 0 && n <= 64);
    const float states[3][2] = {{1.0f, 1.0f}, {4.0f, 4.0f}, {100.0f, -100.0f}};
    for (int i = 0; i < 3; i++) {
        laq_gated g;
        float lp;
        bool inside;
        int32_t rc = laq_gated_value(&model, states[i], 2, scratch, n, &g);
        int32_t rc2 = laq_log_density(&model, states[i], 2, &lp, &inside);
        check("gated", rc == LAQ_OK && rc2 == LAQ_OK && g.has_log_density &&
                           inside == g.in_distribution && bits(lp) == bits(g.log_density));
        printf("gated %d %08x %08x %08x %d\n", i, bits(g.value), bits(g.raw_value),
               bits(g.log_density), (int)g.in_distribution);
    }
    float shaped;
    int32_t rc = laq_shaped_reward(&model, states[0], 0.0f, false, states[1], 2, scratch, n,
                                   &shaped);
    check("shaped", rc == LAQ_OK);
    printf("shaped 0 %08x\n", bits(shaped));
    rc = laq_shaped_reward(&model, states[0], 1.0f, true, states[1], 2, scratch, n, &shaped);
    check("shaped-terminal", rc == LAQ_OK);
    printf("shaped 1 %08x\n", bits(shaped));
    check("shaped-nan-reward", laq_shaped_reward(&model, states[0], NAN, false, states[1],
                                                 2, scratch, n, &shaped) == LAQ_ERR_INVALID_ARGUMENT);
    check("log-density-outputs-optional",
          laq_log_density(&model, states[0], 2, NULL, NULL) == LAQ_OK);
    free(bytes);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GRID_MODEL GATED_MODEL\n", argv[0]);
        return 2;
    }
    grid(argv[1]);
    gated(argv[2]);
    printf("failures %d\n", failures);
    return failures == 0 ? 0 : 1;
}

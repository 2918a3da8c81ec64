/*
 * The grid model in read-only memory (flash on the target), 8-aligned so that the
 * runtime reads f32 weights in place. LAQ_GRID_MODEL is the file's path as a string
 * literal (run.sh passes -DLAQ_GRID_MODEL='"..."').
 */
    .section .rodata.laq_grid_model, "a"
    .balign 8
    .global laq_grid_model
laq_grid_model:
    .incbin LAQ_GRID_MODEL
    .global laq_grid_model_end
laq_grid_model_end:

    /* No executable stack needed (GNU linkers ask). */
    .section .note.GNU-stack, "", %progbits

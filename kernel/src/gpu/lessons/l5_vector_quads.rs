//! Lesson 5: 16-byte vector loads.
//!
//! **The idea.** Lesson 4 moves each quad as four 4-byte loads. A quad is 16 consecutive bytes,
//! and for rows in whole quads (`dim % 4 == 0`) every quad starts 16-byte aligned (buffers from
//! `cuMemAlloc` are 256-byte aligned), so it can move as one vector instruction
//! (`ld.global.v4.f32`, `st.global.v4.f32`): a quarter of the load and store instructions, the
//! same bytes. Nothing else changes: lesson 4's body with `V4 = true`.
//!
//! **What it costs.** Rows must be whole quads; the production step keeps a scalar variant for
//! the others.
//!
//! **Measured**: the README's lessons table (`host lessons 5`).

use crate::lessons::l4_row_in_registers::{lane_group_entry_point, lane_groups};

lane_group_entry_point!(
    lesson5_vector_quads_q2,
    lane_groups,
    2,
    true,
    256,
    "`G` lanes per row, the row in registers, 16-byte quads"
);
lane_group_entry_point!(
    lesson5_vector_quads_q8,
    lane_groups,
    8,
    true,
    1024,
    "`G` lanes per row, the row in registers, 16-byte quads"
);

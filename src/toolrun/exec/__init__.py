"""Running a tool: templates rendered and quoted, processes spawned, guarded, sandboxed and time-boxed."""

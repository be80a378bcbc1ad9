// Helpers shared by every vkmha compute shader.
//
// Conventions: workgroup and tile sizes are specialization constants (id 0 is
// always the workgroup size WG, which is also local_size_x); runtime shapes,
// strides, scales and flags live in a push-constant block `p` mirrored by a C
// struct with the same field order (static_assert'ed to fit 128 bytes);
// read-only bindings come first, the output binding last. Indices are in
// elements; every buffer is at most maxStorageBufferRange bytes (checked on
// the host), so 32-bit element indices cannot overflow.


// The workgroup's linear index: the host numbers the workgroups of a pass
// linearly and dispatches them as x, y, z grids within
// maxComputeWorkGroupCount, several when there are more (vk_dispatch_groups);
// `base` (the push constant group_base) is the first number of this grid.
uint linear_group(uint base)
{
    return base + (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) *
                      gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

// Byte `i` of a uint8 array bound as uint words (little-endian packing, as
// the host copied it byte for byte). Avoids requiring 8-bit storage, which
// many mobile GPUs lack.
uint byte_at_words(uint word, uint i)
{
    return (word >> ((i & 3u) * 8u)) & 0xffu;
}

// -infinity (a function: uintBitsToFloat is not a constant expression here).
float neg_inf()
{
    return uintBitsToFloat(0xff800000u);
}

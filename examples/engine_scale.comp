#version 450
// The example engine's own shader: x[i] = x[i] * mul + add for i < n.
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
    uint n;
    float mul;
    float add;
} p;
layout(binding = 0) buffer X { float x[]; };

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i < p.n)
        x[i] = x[i] * p.mul + p.add;
}

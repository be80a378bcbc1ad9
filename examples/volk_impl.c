/* The example's own copy of volk (the engine's loader); vkmha has its own,
 * hidden inside the library. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#include <volk.c>

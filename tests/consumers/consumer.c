/* The consumer built outside the suite's own Meson build: by the Meson
 * parent project (meson-parent/), by CMake through find_package(vkmha)
 * (cmake/), and with `pkg-config --cflags --libs vkmha` (run-consumer). One
 * TAP line. */
#include "consumer.h"

int main(void)
{
    int rc = consumer_forward(CONSUMER_NAME);
    printf("%s - %s links vkmha, runs a layer forward on Vulkan (validation on) and matches "
           "the reference\n", rc ? "not ok 1" : "ok 1", CONSUMER_NAME);
    printf("1..1\n");
    return rc;
}

/* Preprocessed at build time (meson.build: cc.preprocess) so that
 * src/volk_rename.py lists the global symbols of exactly the volk.h this
 * build compiles in. Not compiled. */
#include <volk.h>

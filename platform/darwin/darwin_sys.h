/* The Apple-only system headers of platform/darwin, in one place.
 *
 * On Darwin this includes the real headers. Elsewhere a Darwin-only source
 * compiles only in the syntax check (-DLYH_DARWIN_STUBS, see
 * tests/unit/platform/CMakeLists.txt), against stub/apple.h: declarations
 * with Apple's names, types and layouts, so the code keeps compiling with
 * -Werror on Linux and cannot rot unseen. Nothing compiled against the stub
 * talks to a kernel. */
#ifndef LYH_PLATFORM_DARWIN_SYS_H
#define LYH_PLATFORM_DARWIN_SYS_H

#if defined(__APPLE__)
#include <net/if.h>
#include <net/if_dl.h>
#include <net/route.h>
#include <sys/socket.h>
#elif defined(LYH_DARWIN_STUBS)
#include "platform/darwin/stub/apple.h"
#else
#error "Darwin-only source: build it on macOS, or syntax-check it with -DLYH_DARWIN_STUBS"
#endif

#endif

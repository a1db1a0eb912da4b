#include "malloc_tuning.h"

#if defined(__GLIBC__)
#include <malloc.h>

int gqlmux_keep_freed_heap(int bytes) { return mallopt(M_TRIM_THRESHOLD, bytes); }

int gqlmux_trim_heap(void) { return malloc_trim(0); }

#else

int gqlmux_keep_freed_heap(int bytes) { (void)bytes; return 0; }

int gqlmux_trim_heap(void) { return 0; }

#endif

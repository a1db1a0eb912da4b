#ifndef GQLMUX_MALLOC_TUNING_H
#define GQLMUX_MALLOC_TUNING_H

/// Keeps up to `bytes` of freed heap at the top of an arena instead of returning it to the
/// system after each large free (glibc's M_TRIM_THRESHOLD). Returns 1 on success.
int gqlmux_keep_freed_heap(int bytes);

/// Returns freed heap to the system now (glibc's malloc_trim(0)). Returns 1 if memory was released.
int gqlmux_trim_heap(void);

#endif

#ifndef GQLMUX_CSYSTEMD_SHIM_H
#define GQLMUX_CSYSTEMD_SHIM_H
// We pass CODE_FILE/CODE_LINE/CODE_FUNC ourselves (the caller's Swift location).
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/syscall.h>
#include <unistd.h>
// memfd_create(2) with MFD_CLOEXEC: glibc declares it only under _GNU_SOURCE.
static inline int gqlmux_memfd_create(const char *name) { return (int)syscall(SYS_memfd_create, name, 1u); }
#endif

#ifndef GQLMUX_CSYSTEMD_SHIM_H
#define GQLMUX_CSYSTEMD_SHIM_H
// We pass CODE_FILE/CODE_LINE/CODE_FUNC ourselves (the caller's Swift location).
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#endif

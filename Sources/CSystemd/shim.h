#ifndef GQLMUX_CSYSTEMD_SHIM_H
#define GQLMUX_CSYSTEMD_SHIM_H
// We pass CODE_FILE/CODE_LINE/CODE_FUNC ourselves (the caller's Swift location).
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
// memfd_create(2) with MFD_CLOEXEC | MFD_ALLOW_SEALING: glibc declares it only under _GNU_SOURCE.
static inline int gqlmux_memfd_create(const char *name) { return (int)syscall(SYS_memfd_create, name, 1u | 2u); }
// F_ADD_SEALS / F_GET_SEALS and the seals (linux/fcntl.h), which glibc declares only under _GNU_SOURCE.
#define GQLMUX_F_ADD_SEALS 1033
#define GQLMUX_F_GET_SEALS 1034
#define GQLMUX_SEALS_FIXED (0x0002 | 0x0004 | 0x0008) /* F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE */
// Seals a memory file: its size and contents can no longer change, by any process holding it.
static inline int gqlmux_memfd_seal(int fd) { return fcntl(fd, GQLMUX_F_ADD_SEALS, GQLMUX_SEALS_FIXED); }
// A memory file's seals; -1 for a file that is not one.
static inline int gqlmux_memfd_seals(int fd) { return fcntl(fd, GQLMUX_F_GET_SEALS); }
// memfd_create(2) without MFD_ALLOW_SEALING, as gqlmuxd wrote its record before it sealed it
// (for the tests of reading such a record).
static inline int gqlmux_memfd_create_unsealable(const char *name) { return (int)syscall(SYS_memfd_create, name, 1u); }

#include <systemd/sd-bus.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The type of the job the service manager runs on this process's unit ("restart", "stop", …),
// copied into `out` ("" when it runs none). Asked over the system bus, at most 2 s. Returns 0,
// or a negative errno when it cannot be known (no unit, no bus). sd_bus_message_read is
// variadic, which Swift cannot call: hence C.
static inline int gqlmux_unit_job_type(char *out, size_t size) {
    out[0] = 0;
    char *job_type = NULL;
    const char *unit_path = NULL, *job_path = NULL;
    uint32_t job_id = 0;
    sd_bus *bus = NULL;
    sd_bus_message *unit = NULL, *job = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    // The unit by our PID: the manager knows it (reading /proc/self/cgroup may be refused).
    int r = sd_bus_open_system(&bus);
    if (r >= 0) r = sd_bus_set_method_call_timeout(bus, 2000000);
    if (r >= 0)
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                               "GetUnitByPID", &error, &unit, "u", (uint32_t)getpid());
    if (r >= 0) r = sd_bus_message_read(unit, "o", &unit_path);
    if (r >= 0)
        r = sd_bus_get_property(bus, "org.freedesktop.systemd1", unit_path, "org.freedesktop.systemd1.Unit", "Job", &error, &job, "(uo)");
    if (r >= 0) r = sd_bus_message_read(job, "(uo)", &job_id, &job_path);
    if (r >= 0 && job_id != 0) {
        r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", job_path, "org.freedesktop.systemd1.Job", "JobType", &error, &job_type);
        if (r >= 0 && job_type != NULL && size > 0) {
            strncpy(out, job_type, size - 1);
            out[size - 1] = 0;
        }
    }
    free(job_type);
    sd_bus_message_unref(job);
    sd_bus_message_unref(unit);
    sd_bus_error_free(&error);
    sd_bus_flush_close_unref(bus);
    return r < 0 ? r : 0;
}
#endif

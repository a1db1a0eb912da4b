// glibc's GNU extensions for spawning children, which Swift's Glibc module does not show
// (it is built without _GNU_SOURCE).
#pragma once
#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np: close every fd >= `from` in the child.
int cspawn_addclosefrom(posix_spawn_file_actions_t *actions, int from);
/// posix_spawn_file_actions_addchdir_np: the child's working directory.
int cspawn_addchdir(posix_spawn_file_actions_t *actions, const char *path);
/// pipe2(fds, O_CLOEXEC): a pipe no other child inherits by accident.
int cspawn_pipe_cloexec(int fds[2]);

/// Every test target gets `ChildProcess` and `runCommand` with the support helpers.
@_exported import Spawn

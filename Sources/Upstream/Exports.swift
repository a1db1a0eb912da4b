// The upstream's settings are values of their own module (the configuration reads them
// without this one); whoever drives the upstream sees them through this module.
@_exported import UpstreamSettings

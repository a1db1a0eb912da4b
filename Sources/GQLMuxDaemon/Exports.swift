// The daemon's configuration is part of its API: importers of GQLMuxDaemon see it too.
@_exported import GQLMuxConfiguration

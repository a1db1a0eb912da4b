import GQLMuxConfiguration
import Upstream

/// A reloaded configuration with its file I/O done (blocking: built on a thread pool).
package struct PreparedReload: Sendable {
    /// The whole configuration to run with (``DaemonConfiguration/reloading(_:)``: what takes
    /// effect only at start keeps its running value).
    package var configuration: DaemonConfiguration
    /// Every upstream of the table, its TLS contexts built.
    package var definitions: [UpstreamRegistry.Definition]

    /// - Parameters:
    ///   - path: the configuration file; nil re-applies the running configuration.
    ///   - running: the configuration in use.
    package init(path: String?, running: DaemonConfiguration) throws {
        let read = try path.map { path throws(ConfigurationError) in try DaemonConfiguration.load(path: path) } ?? running
        let next = try read.reloading(running)
        definitions = try Daemon.definitions(next, checkPayloadFile: true)
        configuration = next
    }
}

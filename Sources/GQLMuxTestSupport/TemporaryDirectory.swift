import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A new directory `<tmp>/<prefix>-<8 hex>` (mode 0755, so a daemon run as another user in a
/// test can reach its socket). The caller removes it.
package func makeTemporaryDirectory(_ prefix: String) throws -> String {
    let path = NSTemporaryDirectory() + prefix + "-" + UUID().uuidString.prefix(8)
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    chmod(path, 0o755)
    return path
}

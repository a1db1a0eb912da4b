#if canImport(Glibc)
import Glibc
#endif

/// The repository's folder (the one holding Package.swift), found from a test file's own path:
/// tests read the shipped configuration, fixtures and corpora through it, so a test file can
/// move between folders without its paths breaking.
package func repositoryRoot(of file: String = #filePath) -> String {
    var folder = file
    while let slash = folder.lastIndex(of: "/") {
        folder = String(folder[..<slash])
        if access(folder + "/Package.swift", F_OK) == 0 { return folder }
    }
    preconditionFailure("no Package.swift above \(file)")
}

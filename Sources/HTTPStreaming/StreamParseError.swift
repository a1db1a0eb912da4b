/// Why a stream's bytes cannot be read any further. The stream is ended (and requested again
/// with backoff); no other stream is touched.
package struct StreamParseError: Error, Equatable, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

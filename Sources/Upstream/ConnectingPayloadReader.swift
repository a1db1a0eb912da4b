import AWSSigning
import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Produces the `connection_init` payload for one connect. Blocking file I/O: called on a
/// thread pool (``ConnectingPayloadSource``, a reload's preparation), never on the event loop.
package enum ConnectingPayloadReader {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Reads and validates the payload; a file is read anew each time.
    package static func read(_ payload: UpstreamConfiguration.ConnectingPayload) throws -> ByteBuffer? {
        switch payload {
        case .none:
            return nil
        case .inline(let buffer):
            return buffer
        case .file(let path):
            let buffer = try readFile(path)
            let kind = try? buffer.withUnsafeReadableBytes { bytes throws(JSONScanError) in try JSONScanner.validate(bytes) }
            guard kind == .object else {
                throw Failure(description: "connecting_payload_file \(path) does not hold a JSON object")
            }
            return buffer
        }
    }

    /// What one connect or request of an AppSync upstream authorizes with: the key or token
    /// read from its file, or the AWS credentials (from the environment as read at start, or
    /// the profile of a shared credentials file, read now).
    package static func readAppSync(_ auth: AppSyncSettings.Auth) throws -> AppSyncSettings.Secret {
        switch auth {
        case .apiKey(.file(let path)), .token(.file(let path)):
            return .text(try readSecret(path))
        case .apiKey(.presented(let value)), .token(.presented(let value)):
            guard let secret = AppSyncSettings.secret(fromFile: value) else {
                throw Failure(description: "the app's \(auth.presentedHeader ?? "") is empty or holds characters no HTTP header may carry")
            }
            return .text(secret)
        case .apiKey(.identity), .token(.identity):
            throw Failure(
                description: "no \(auth.presentedHeader ?? "credential") was presented for this identity (identity = \"client\" sends each app's own)"
            )
        case .iam(.environment(let credentials)):
            return .aws(credentials)
        case .iam(.file(let path, let profile)):
            let text = String(buffer: try readFile(path, naming: "[upstream.appsync] credentials_file"))
            guard let credentials = AWSCredentialsFile.credentials(in: text, profile: profile) else {
                throw Failure(
                    description: "[upstream.appsync] credentials_file \(path) has no profile '\(profile)' with aws_access_key_id and aws_secret_access_key"
                )
            }
            return .aws(credentials)
        }
    }

    /// Reads an AppSync secret (an API key, a token) from `path`: one line of printable text.
    package static func readSecret(_ path: String) throws -> String {
        let buffer = try readFile(path, naming: "[upstream.appsync] secret file")
        guard let secret = AppSyncSettings.secret(fromFile: String(buffer: buffer)) else {
            throw Failure(description: "[upstream.appsync] secret file \(path) is empty or holds characters no HTTP header may carry")
        }
        return secret
    }

    /// Reads a header's value from `path` (`[upstream.header_files]`): one line of printable
    /// text, a final newline dropped. The file must be a regular file others may not read (a
    /// FIFO would hold a start or reload; a world-readable secret is a leak already).
    package static func readHeaderValue(_ path: String, naming name: String) throws -> String {
        // One descriptor, checked and then read: the file cannot be swapped in between.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw Failure(description: "cannot read \(name) \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw Failure(description: "\(name) \(path) is not a regular file")
        }
        guard info.st_mode & 0o007 == 0 else {
            throw Failure(
                description:
                    "\(name) \(path) may be read by every user (mode \(String(info.st_mode & 0o777, radix: 8))); make it readable by gqlmuxd's user only"
            )
        }
        let buffer = try read(opened: fd, path, naming: name)
        guard let value = AppSyncSettings.secret(fromFile: String(buffer: buffer)) else {
            throw Failure(description: "\(name) \(path) is empty or holds characters no HTTP header may carry")
        }
        return value
    }

    private static func readFile(_ path: String, naming name: String = "connecting_payload_file") throws -> ByteBuffer {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw Failure(description: "cannot read \(name) \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        return try read(opened: fd, path, naming: name)
    }

    /// The whole of open file `fd` (at most 1 MiB); `path` and `name` only name it in errors.
    private static func read(opened fd: Int32, _ path: String, naming name: String) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "cannot read \(name) \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            buffer.writeBytes(chunk[0..<n])
            if buffer.readableBytes > 1 << 20 {
                throw Failure(description: "\(name) \(path) is larger than 1 MiB")
            }
        }
        return buffer
    }
}

import LocalProtocol
import NIOCore
import Testing

/// A `LIMIT_EXCEEDED` names the limit it hit in `extensions.limit`, read from its message (each
/// message names its configuration key; these are the daemon's own messages' shapes).
@Suite struct LimitNameTests {
    @Test(arguments: [
        ("max_clients (1024) reached", "max_clients"),
        ("max_operations_per_client (100) reached", "max_operations_per_client"),
        ("max_streams (256) upstream streams are open", "max_streams"),
        ("the upstream pool is full: 4 connections × 100 operations (max_connections, max_operations_per_connection)", "max_connections"),
        ("max_identities (64) identities have upstream connections", "max_identities"),
        ("max_identities_per_uid (16): uid 1000 holds that many identities already", "max_identities_per_uid"),
        ("the credential presented (20000 bytes) is over [limits] max_credential_bytes (16384)", "max_credential_bytes"),
        ("the daemon's memory budget (total_buffer_bytes) is full; your unfinished line was dropped", "total_buffer_bytes"),
        ("subscribe: document has more than max_document_tokens (10000) tokens", "max_document_tokens"),
        ("resnapshot: document nests deeper than max_document_depth (64)", "max_document_depth"),
    ])
    func theErrorNamesTheLimit(message: String, limit: String) {
        let errors = String(buffer: SessionError.local(code: .limitExceeded, message: message).errors)
        #expect(errors.contains(#""extensions":{"code":"LIMIT_EXCEEDED","limit":"\#(limit)"}"#), "\(errors)")
    }

    @Test func otherCodesNameNoLimit() {
        let errors = String(buffer: SessionError.local(code: .badRequest, message: "line longer than max_line_bytes (1048576)").errors)
        #expect(!errors.contains("\"limit\""))
    }
}

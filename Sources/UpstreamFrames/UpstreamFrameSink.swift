import GQLMuxVocabulary
import NIOCore

/// What an upstream connection's frame handler tells its transport, each call for the
/// connection `generation` (a transport ignores a generation it has left). Every call is made
/// on the connection's event loop, after the read that brought it has released the reader.
package protocol UpstreamFrameSink: AnyObject {
    /// A whole text message.
    func frameReceived(generation: Int, _ frame: ByteBuffer)
    /// A whole binary message (the GraphQL protocols have none).
    func binaryReceived(generation: Int)
    /// Any sign of life (a ping frame).
    func activity(generation: Int)
    /// A pong frame: a sign of life, and the answer to a ping frame we sent.
    func pongReceived(generation: Int)
    /// The server's close frame came: whether it answers ours.
    func closeFrameReceived(generation: Int) -> CloseHandshake.PeerClose
    /// The server broke a rule the transport closes for with `code`.
    func protocolViolation(generation: Int, _ reason: String, code: CloseCode)
    /// The connection ended, with the server's close code and reason if it sent one.
    func connectionClosed(generation: Int, code: CloseCode?, reason: String)
    /// NIO's read of the socket completed (up to its reads per event), and what it brought was
    /// all told, outside any call above: what arrived together can be written on now.
    func readComplete(generation: Int)
}

extension UpstreamFrameSink {
    package func readComplete(generation: Int) {}
}

/// The closing side of the WebSocket close handshake (RFC 6455, section 7.1.2), as a state of
/// each connection the client closes: `open` → `closing` (our close frame sent, waiting for
/// the peer's) → `closed`. The socket is closed when the peer's close frame arrives, or when
/// `timeout` passes without one, whichever comes first. Pure: the I/O side reports what
/// happened with the time, and closes the sockets this returns.
package struct CloseHandshake {
    /// How long a peer has to answer our close frame.
    package let timeout: Duration
    /// Connections (by generation) in `closing`, with the instant their wait ends.
    private var closing: [Int: Instant] = [:]

    package init(timeout: Duration) {
        self.timeout = timeout
    }

    /// How the peer's close frame on a connection is to be handled.
    package enum PeerClose: Equatable, Sendable {
        /// We closed first: the handshake is complete; close the socket, send nothing more.
        case completesOurs
        /// The peer closes first: answer with a close frame, then close the socket.
        case startsTheirs
    }

    /// We sent a close frame on connection `generation`: it is `closing`.
    package mutating func closeSent(generation: Int, now: Instant) {
        closing[generation] = now + timeout
    }

    /// The peer's close frame arrived on `generation`.
    package mutating func peerClosed(generation: Int) -> PeerClose {
        closing.removeValue(forKey: generation) != nil ? .completesOurs : .startsTheirs
    }

    /// The socket of `generation` is gone (closed by either side, or dropped).
    package mutating func socketClosed(generation: Int) {
        closing[generation] = nil
    }

    /// The connections whose peer did not answer in time, in generation order: close their
    /// sockets now.
    package mutating func expired(now: Instant) -> [Int] {
        let due = closing.filter { $0.value <= now }.map(\.key).sorted()
        for generation in due { closing[generation] = nil }
        return due
    }

    /// When ``expired(now:)`` next has work.
    package var nextDeadline: Instant? { closing.values.min() }

    /// Whether `generation` is waiting for the peer's close frame.
    package func isClosing(_ generation: Int) -> Bool { closing[generation] != nil }
}
